"""Regenerate docs/results/filters.md (and filters.json): what a metadata filter costs a search, and whether its
answers stay exact, from 100% of the documents passing down to 0.1% (issue 40's filter target: exactly the top k
of the passing documents, at p50 <= 2x an unfiltered search down to 1% on 100,000 documents).

100,000 clustered unit vectors (benchmarks/common/data.py, 384 dimensions, the size of all-MiniLM-L6-v2's),
each document with the metadata ``{"bucket": b}``, ``b`` a seeded permutation of ``i mod 1000``; the filter
``bucket < T`` passes T in 1,000. Indexes: flat float32, flat sq8, flat pq48 (product quantization, whose flat
index takes no faiss selector), HNSW and IVF float32. Each query is one ``Retriever.search`` call of k = 10 through
the whole stack (filter parse and check, the passing rows' mask, the store's search, the documents' fetch), the
unfiltered search and every selectivity in turns per query, after a warm-up that also builds each filter's mask
once (a mask is cached per version: repeated filters cost no new mask; the first use of a filter over 100,000
documents costs its mask, reported apart).

Exactness, per index: ``exact`` is the share of queries whose hits equal the store's own unfiltered ranking of
the whole corpus cut to the passing documents (for flat float32 also exact brute force); ``short`` counts answers
with fewer than k hits where k documents pass. HNSW and IVF are approximate, so their recall@10 against brute
force over the passing documents is given instead.

    python benchmarks/maintained/bench_filters.py [--docs 100000] [--queries 200] [--lock FILE]

Run alone on a quiet machine (the page states the load it saw).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import clustered_unit_vectors
from benchmarks.common.machine import (
    RunConditions,
    command_line,
    conditions_sentence,
    exclusive_lock,
    machine_facts,
    results_header,
)
from benchmarks.common.scale import RowEncoder

from whitevec.datasets.retrieval import Document
from whitevec.index import Retriever
from whitevec.utils.io import atomic_path

OUT = Path(__file__).resolve().parents[2] / "docs" / "results"
DIM = 384
BUCKETS = 1000
THRESHOLDS = (1000, 100, 10, 1)  # bucket < T: 100%, 10%, 1%, 0.1% pass
INDEXES = {
    "flat float32": ("flat", "float32"),
    "flat sq8": ("flat", "sq8"),
    "flat pq48": ("flat", "pq48"),
    "hnsw float32": ("hnsw", "float32"),
    "ivf float32": ("ivf", "float32"),
}
K = 10


def corpus(n: int) -> tuple[list[Document], np.ndarray, np.ndarray, np.ndarray]:
    """Documents ``str(i)`` with their bucket, the vectors, the buckets, and the query rows (RowEncoder reads a
    query text ``str(j)`` as row j: the queries are rows past the corpus)."""
    x, q = clustered_unit_vectors(n, 500, d=DIM)
    buckets = np.random.default_rng(0).permutation(np.arange(n) % BUCKETS)
    docs = [Document(str(i), str(i), {"bucket": int(b)}) for i, b in enumerate(buckets)]
    return docs, x, q, buckets


def build(folder: Path, docs: list[Document], rows: np.ndarray, kind: str, encoding: str) -> Retriever:
    params = {"encoding": encoding, "train_sample": 20_000}
    return Retriever.build(docs, folder, encoder=RowEncoder(rows, DIM), kind=kind, index_params=params)


def timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return 1e3 * (time.perf_counter() - started)


def latencies(retriever: Retriever, queries: list[str]) -> dict[str, Any]:
    """p50/p99 ms of one query per call, unfiltered and at each threshold, in turns; the first mask's cost."""
    filters: dict[int | None, str | None] = {None: None, **{t: f"bucket < {t}" for t in THRESHOLDS}}
    first_mask = {t: timed(lambda f=f: retriever.search([queries[0]], K, filter=f)) for t, f in filters.items()}
    for query in queries[:20]:  # warm-up
        for f in filters.values():
            retriever.search([query], K, filter=f)
    times: dict[Any, list[float]] = {t: [] for t in filters}
    for query in queries:
        for t, f in filters.items():
            times[t].append(timed(lambda q=query, f=f: retriever.search([q], K, filter=f)))
    out = {}
    for t, values in times.items():
        key = "none" if t is None else str(t)
        out[key] = {
            "p50_ms": round(statistics.median(values), 3),
            "p99_ms": round(float(np.percentile(values, 99)), 3),
            "first_call_ms": round(first_mask[t], 3),
        }
    return out


def exactness(retriever: Retriever, rows: np.ndarray, q: np.ndarray, buckets: np.ndarray, n_q: int) -> dict:
    """Per threshold: the share of queries equal to the store's own whole ranking cut to the passing rows, short
    answers, and recall@10 against brute force over the passing rows."""
    texts = [str(len(rows) + j) for j in range(n_q)]
    whole = retriever.search(texts, len(rows))
    truth = q[:n_q] @ rows.T
    out = {}
    for t in THRESHOLDS:
        passing = buckets < t
        hits = retriever.search(texts, K, filter=f"bucket < {t}")
        same = short = 0
        recall = []
        for j, found in enumerate(hits):
            ids = [h.id for h in found]
            cut = [h.id for h in whole[j] if passing[int(h.id)]][:K]
            same += ids == cut
            short += len(ids) < min(K, int(passing.sum()))
            best = np.argsort(-np.where(passing, truth[j], -np.inf))[:K]
            reachable = min(K, int(passing.sum()))
            recall.append(len({int(i) for i in ids} & {int(i) for i in best[:reachable]}) / reachable)
        out[str(t)] = {
            "passing": int(passing.sum()),
            "same_as_cut_ranking": round(same / n_q, 4),
            "short": short,
            "recall10": round(float(np.mean(recall)), 4),
        }
    return out


def run(n: int, n_queries: int, work: Path) -> dict[str, Any]:
    docs, x, q, buckets = corpus(n)
    rows = np.concatenate([x, q])  # RowEncoder: row i is document i, row n + j is query j
    queries = [str(n + j) for j in range(len(q))]
    results = {}
    for name, (kind, encoding) in INDEXES.items():
        started = time.perf_counter()
        with build(work / name.replace(" ", "-"), docs, rows, kind, encoding) as retriever:
            built = time.perf_counter() - started
            results[name] = {
                "build_s": round(built, 2),
                "latency": latencies(retriever, [queries[j % len(queries)] for j in range(n_queries)]),
                "exactness": exactness(retriever, x, q, buckets, 50),
            }
        print(f"{name}: done", file=sys.stderr, flush=True)
    return results


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "# Filtered search: latency and exactness by selectivity",
        "",
        results_header(f"`{data['command']}`", data["facts"]),
        "",
        (__doc__ or "").split("\n\n    python")[0].split("\n\n", 1)[1].strip(),
        "",
        conditions_sentence(data["conditions"]),
        "",
        "| index | passing | p50 ms | p50 / unfiltered | p99 ms | first call ms | same as the cut ranking | short "
        "| recall@10 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, result in data["indexes"].items():
        base = result["latency"]["none"]
        lines.append(
            f"| {name} | unfiltered | {base['p50_ms']:.2f} | 1.00 | {base['p99_ms']:.2f} | "
            f"{base['first_call_ms']:.1f} | | | |"
        )
        for t in THRESHOLDS:
            lat, ex = result["latency"][str(t)], result["exactness"][str(t)]
            share, ratio = f"{100 * t / BUCKETS:g}%", lat["p50_ms"] / base["p50_ms"]
            lines.append(
                f"| {name} | {share} ({ex['passing']:,}) | {lat['p50_ms']:.2f} | {ratio:.2f} "
                f"| {lat['p99_ms']:.2f} | {lat['first_call_ms']:.1f} | {100 * ex['same_as_cut_ranking']:.0f}% "
                f"| {ex['short']} | {ex['recall10']:.3f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--lock", type=Path, default=None)
    args = parser.parse_args()
    with exclusive_lock(args.lock) as held, tempfile.TemporaryDirectory(prefix="whitevec-filters-") as work:
        conditions = RunConditions(held)
        indexes = run(args.docs, args.queries, Path(work))
        data = {
            "command": command_line(),
            "facts": machine_facts("faiss-cpu"),
            "conditions": conditions.record(),
            "docs": args.docs,
            "indexes": indexes,
        }
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in (("filters.json", json.dumps(data, indent=1) + "\n"), ("filters.md", markdown(data))):
        with atomic_path(args.out / name) as tmp:
            tmp.write_text(text)
    print(markdown(data))


if __name__ == "__main__":
    main()
