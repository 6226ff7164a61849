"""Two questions the Milvus writes raised, asked of Milvus Lite itself (docs/notes/milvus-lite-writes.md):

1. Does Milvus Lite's BM25 score a document as a fresh build of the same documents does once rows were added or
   deleted after the build, and after Milvus's own compaction? (``bm25`` lines: the top scores of one query on a
   collection written in two inserts, then after a delete and a compaction, beside one written in one insert.)
2. Would a JSON metadata field make filtered searches cheaper than the id list whitevec sends today
   (``whitevec.index.milvus.filters.rows_filter``)? (``filter`` lines: ms per one-query search of a FLAT collection
   of ``--rows`` random vectors, unfiltered, by id list and by the filter's Milvus expression on a JSON field.)

    python benchmarks/investigations/milvus_lite_writes.py [--rows 20000] [--queries 20]

An investigation of 2026-12-06, not part of the maintained suite (`make bench`). One JSON object a line.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from pymilvus import DataType, MilvusClient

from whitevec.index.filters.language import parse_filter
from whitevec.index.milvus.bm25 import milvus_bm25_settings
from whitevec.index.milvus.filters import milvus_expression, rows_filter
from whitevec.index.milvus.store import MilvusStore

WORDS = [f"w{i}" for i in range(50)]


def bm25_scores(folder: Path) -> None:
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(WORDS, 6)) for _ in range(42)]
    vectors = rng.normal(size=(42, 8)).astype(np.float32)
    settings = milvus_bm25_settings("plain")
    query = [texts[2]]

    def store(name: str) -> MilvusStore:
        return MilvusStore(str(folder / f"{name}.db"), name, 8, "ip", "flat", None, create=True, bm25=settings)

    def top(target: MilvusStore) -> list[float]:
        _, scores = target.lexical_ranker().search(query, 3)
        return [round(float(s), 4) for s in scores[0]]

    written, fresh, fresh40 = store("written"), store("fresh"), store("fresh40")
    written.add_with_texts(np.arange(40), vectors[:40], texts[:40])
    written.add_with_texts(np.arange(40, 42), vectors[40:], texts[40:])  # a second insert: another segment
    fresh.add_with_texts(np.arange(42), vectors, texts)
    fresh40.add_with_texts(np.arange(2, 42), vectors[2:], texts[2:])  # the live rows after the delete
    print(json.dumps({"bm25": "42 rows", "two_inserts": top(written), "one_insert": top(fresh)}))
    written.delete(np.array([0, 1]))  # two rows of the first insert
    written.flush()
    print(json.dumps({"bm25": "40 live after a delete", "written": top(written), "one_insert": top(fresh40)}))
    written.client.get_compaction_state(written.client.compact(written.collection))
    print(json.dumps({"bm25": "after compaction", "written": top(written), "one_insert": top(fresh40)}))
    for each in (written, fresh, fresh40):
        each.release()


def filter_costs(folder: Path, rows: int, queries: int) -> None:
    client = MilvusClient(str(folder / "filters.db"))
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=64)
    schema.add_field("metadata", DataType.JSON, nullable=True)
    index = client.prepare_index_params()
    index.add_index("vector", index_type="FLAT", metric_type="IP")
    client.create_collection("f", schema=schema, index_params=index)
    x = np.random.default_rng(0).normal(size=(rows, 64)).astype(np.float32)
    for start in range(0, rows, 2000):
        stop = min(rows, start + 2000)
        client.insert("f", [{"id": i, "vector": x[i].tolist(), "metadata": {"n": i}} for i in range(start, stop)])
    client.flush("f")
    client.load_collection("f")
    visible = f"id < {rows}"
    for share in (None, 0.5, 0.01, 0.001):
        ways: dict[str, dict[str, Any]] = {"none": {"filter": visible}}
        if share is not None:
            bound = int(rows * share)
            ways = {
                "id_list": rows_filter(visible, np.arange(rows) < bound),
                "json": {"filter": f"({visible}) and ({milvus_expression(parse_filter(f'n < {bound}'))})"},
            }
        for how, where in ways.items():
            start_time = time.perf_counter()
            for v in x[:queries]:
                client.search("f", data=[v.tolist()], limit=10, output_fields=["id"], **where)
            ms = 1000 * (time.perf_counter() - start_time) / queries
            print(json.dumps({"filter": how, "share": share, "rows": rows, "ms_per_query": round(ms, 1)}))
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    print(json.dumps({"load_average": os.getloadavg()[0]}))
    with tempfile.TemporaryDirectory() as tmp:
        bm25_scores(Path(tmp))
        filter_costs(Path(tmp), args.rows, args.queries)
    print(json.dumps({"load_average": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
