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
force over the passing documents is given instead. Each of the 50 queries is searched alone, as in the timings
(a batch is widened as a whole where one of its queries finds fewer than k passing rows).

    python benchmarks/maintained/bench_filters.py [--docs 100000] [--queries 200] [--lock FILE]
    python benchmarks/maintained/bench_filters.py --work [--docs 100000]

Run alone on a quiet machine (the page states the load it saw). ``--work`` prints, instead, the work per code
behind faiss_filter_costs.py's choice of a filtered search's path (thread CPU time on one faiss and BLAS thread:
the work, not the waits, so it holds on a busy machine): faiss's unfiltered scan of a code, its selector's check
of a row, decoding a code, comparing a decoded vector with one query, and an HNSW search's cost per efSearch.
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
        # One query a search, as the latencies: a batch is widened as a whole where one of its queries is short.
        hits = [retriever.search([text], K, filter=f"bucket < {t}")[0] for text in texts]
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


def thread_us(call: Any, reps: int = 9) -> float:
    """The median thread CPU time of ``call(i)``, microseconds."""
    times = []
    for i in range(reps):
        started = time.thread_time()
        call(i)
        times.append(1e6 * (time.thread_time() - started))
    return statistics.median(times)


def per_code_work(n: int) -> None:
    """Per code, ns of one core: what faiss_filter_costs.py's decoding_pays is fitted on."""
    x, q = clustered_unit_vectors(n, 64, d=DIM)
    share = np.zeros(n, bool)
    share[np.random.default_rng(0).permutation(n)[: n // 10]] = True
    print("| index | scan ns/code | selector check ns/row | decode ns/code | compare ns/code/query |")
    print("|---|---:|---:|---:|---:|")
    for kind, encoding in [("flat", e) for e in ("float32", "fp16", "sq8", "sq4", "pq48", "pq16")] + [
        ("hnsw", "float32")
    ]:
        print(code_work(kind, encoding, x, q, share), flush=True)


def code_work(kind: str, encoding: str, x: np.ndarray, q: np.ndarray, share: np.ndarray) -> str:
    """One row of --work's table: a store of ``x`` timed on one query of ``q`` at a time; decoding and comparing
    on the rows ``share`` passes."""
    from whitevec.index.faiss_store import FaissStore, one_faiss_thread
    from whitevec.utils.threads import one_blas_thread

    n = len(x)
    store = FaissStore(DIM, "cosine", kind, {"encoding": encoding, "train_sample": 20_000})
    store.add(np.arange(n, dtype=np.int64), x)
    one = [q[j : j + 1] for j in range(len(q))]
    positions = np.flatnonzero(share)
    with one_faiss_thread(), one_blas_thread():
        scan = 1e3 * thread_us(lambda i: store.index.search(one[i], K)) / n
        if kind == "hnsw":
            return f"| hnsw {encoding} | {scan * n / store.params()['efSearch']:.0f} ns per efSearch | | | |"
        few = np.packbits(share & (np.arange(n) % 100 == 0), bitorder="little")  # 0.1% pass
        try:
            sel = store._selector_params(few, K, passing=n // 1000, wide=False)
            check = 1e3 * thread_us(lambda i: store.index.search(one[i], K, params=sel)) / n
        except RuntimeError:  # PQ takes no selector
            check = float("nan")
        decode = 1e3 * thread_us(lambda i: store._decoded_vectors(positions)) / len(positions)
        vectors = store._decoded_vectors(positions)
        compare = 1e3 * thread_us(lambda i: one[i] @ vectors.T) / len(positions)
    return f"| flat {encoding} | {scan:.1f} | {check:.1f} | {decode:.0f} | {compare:.0f} |"


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
    parser.add_argument("--work", action="store_true", help="print the work per code, measure nothing else")
    args = parser.parse_args()
    if args.work:
        per_code_work(args.docs)
        return
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
