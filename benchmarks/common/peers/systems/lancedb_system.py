"""LanceDB, embedded: ``lancedb.connect(FOLDER)``, one table (``id``, ``text``, ``vector`` as a fixed-size list
of float32, ``bucket``) made from an Arrow table, its native full-text index on ``text``
(``create_fts_index("text")``), no vector index (LanceDB's default: an exact scan, L2, which ranks unit vectors as
cosine does). Dense: ``search(vector)``; lexical: ``search(text, query_type="fts")``; hybrid:
``search(query_type="hybrid").vector(v).text(t)`` with its default reranker, ``RRFReranker()`` (K 60), over
``limit`` results of each search; filters: ``where("bucket < N")`` (a pre-filter, LanceDB's default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common.peers.inputs import DIM, Docs, Queries

PACKAGES = ("lancedb", "pyarrow")
SETTINGS = {
    "default": "full-text index at its defaults (simple tokenizer, lower case, English stemming and stop words, "
    "ASCII folding); hybrid RRFReranker() over the 10 + 10 results of a limit of 10",
    "rrf/100": "hybrid RRFReranker() over 100 + 100 (limit 100, cut to 10): whitevec's depth",
    "linear:0.7": "hybrid LinearCombinationReranker(weight=0.7), LanceDB's documented alternative",
    "plain": "full-text index with stem=False, remove_stop_words=False (the issue's row); hybrid as default",
}
TABLE = "docs"


class LanceDBSystem:
    modes = ("dense", "lexical", "hybrid")

    def __init__(self, folder: Path, setting: str) -> None:
        import lancedb

        self.setting = setting
        self.db: Any = lancedb.connect(str(folder))
        self.table: Any = self.db.open_table(TABLE) if TABLE in self.db.table_names() else None

    def build(self, docs: Docs, lexical: bool) -> None:
        self.table = self.db.create_table(TABLE, data=_arrow(docs))
        if lexical:
            plain = self.setting == "plain"
            self.table.create_fts_index("text", stem=not plain, remove_stop_words=not plain)

    def _reranker(self) -> Any:
        from lancedb.rerankers import LinearCombinationReranker, RRFReranker

        return LinearCombinationReranker(weight=0.7) if self.setting == "linear:0.7" else RRFReranker()

    def _one(self, mode: str, vector: Any, text: str, k: int, below: int | None) -> list[str]:
        if mode == "dense":
            query = self.table.search(vector)
        elif mode == "lexical":
            query = self.table.search(text, query_type="fts")
        else:
            query = self.table.search(query_type="hybrid").vector(vector).text(text).rerank(self._reranker())
        limit = 100 if mode == "hybrid" and self.setting == "rrf/100" else k
        if below is not None:
            query = query.where(f"bucket < {below}")
        rows = query.select(["id"]).limit(limit).to_arrow()
        return [str(i) for i in rows.column("id").to_pylist()[:k]]

    def search(self, mode: str, queries: Queries, k: int, below: int | None = None) -> list[list[str]]:
        return [
            self._one(mode, vector, text, k, below)
            for vector, text in zip(queries.vectors, queries.texts, strict=True)
        ]

    def add(self, docs: Docs) -> None:
        self.table.add(_arrow(docs))

    def delete(self, ids: list[str]) -> None:
        quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
        self.table.delete(f"id IN ({quoted})")

    def close(self) -> None:
        self.table = self.db = None  # the synchronous connection has no close(): its handles go with it


def _arrow(docs: Docs) -> Any:
    import numpy as np
    import pyarrow as pa

    flat = pa.array(np.ascontiguousarray(docs.vectors, dtype=np.float32).reshape(-1))
    return pa.table(
        {
            "id": pa.array(docs.ids, pa.string()),
            "text": pa.array(docs.texts, pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(flat, DIM),
            "bucket": pa.array(np.asarray(docs.buckets, dtype=np.int64)),
        }
    )


def open_system(folder: Path, setting: str) -> LanceDBSystem:
    return LanceDBSystem(folder, setting)
