"""Search speed and memory: faiss flat on raw 768-d vectors vs flat and HNSW on whitened 256-d vectors.

Vectors: the synthetic anisotropic float32 vectors of bench_whitening_fit.py (d=768) stand in for encoder output;
"whitened-256" is whitevec Whitening(n_components=256) fitted on the first 50,000 of them. Every space is
L2-normalised and searched by inner product (cosine), k=10, faiss with 2 threads (faiss used directly: the same
index types whitevec.index builds). Each configuration runs in a fresh subprocess (peak memory includes the raw
vectors it was made from).

  batched QPS   one search() call with --queries queries (1,000), queries / seconds, median of --reps
  latency       single-query search() calls (--single queries, 200), p50 and p99 in milliseconds
  index bytes   len(faiss.serialize_index(index))
  recall@10     HNSW only: overlap of its top 10 with exact flat search in the same whitened space

  real data     HNSW recall@10 on real sentence vectors (STS-B train+dev+test sentences, last-avg, raw vs
                whitened-256, 500 of them as queries against the rest, efSearch 16 and 64): whitened synthetic
                Gaussians are the worst case for graph search; this row shows what sentence vectors do.

Retrieval quality (raw vs whitened on real data) is in docs/results/retrieval.md, quoted by run_all.py.
Run: `python benchmarks/maintained/bench_recall.py [--n 1000000] [--hnsw-n 1000000]` (a --hnsw-n other than --n
adds flat rows at that N too, so HNSW is compared with flat search at its own size).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import HELD_OUT
from benchmarks.common.data import anisotropic_chunk as chunk
from benchmarks.common.data import anisotropic_rows as all_rows
from benchmarks.common.runs import THREADS, emit, median, ratio, run_worker, save_result

K = 10
FIT_ROWS = 50_000
HNSW_M = 32
EF_CONSTRUCTION = 40
EF_SEARCH = 64


def _normalize(X: np.ndarray) -> np.ndarray:
    out: np.ndarray = X / np.linalg.norm(X, axis=1, keepdims=True)
    return np.ascontiguousarray(out, dtype=np.float32)


def vectors(n: int, space: str, n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    X = all_rows(n)
    Q = chunk(HELD_OUT, n_queries)
    if space == "raw-768":
        return _normalize(X), _normalize(Q)
    from whitevec.transforms import Whitening

    w = Whitening(n_components=256).fit(X[:FIT_ROWS])
    Y = w.transform(X)
    del X
    return _normalize(Y), _normalize(w.transform(Q))


def hnsw_index(d: int) -> Any:
    """The HNSW index every row here builds (inner product; efSearch is set per search)."""
    import faiss

    index = faiss.IndexHNSWFlat(d, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = EF_CONSTRUCTION
    return index


def exact_top_k(X: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Ids of the top K rows of ``X`` for each query of ``Q`` by exact inner product."""
    import faiss

    exact = faiss.IndexFlatIP(X.shape[1])
    exact.add(X)
    _, truth = exact.search(Q, K)
    return np.asarray(truth)


def overlap_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    """recall@K of ``found`` against ``truth``: the share of true top-K ids found, over all queries."""
    hits = sum(len(set(a) & set(b)) for a, b in zip(found.tolist(), truth.tolist(), strict=True))
    return hits / (K * len(truth))


def worker(kind: str, space: str, n: int, n_queries: int, n_single: int, reps: int) -> dict[str, Any]:
    import faiss

    faiss.omp_set_num_threads(THREADS)
    X, Q = vectors(n, space, n_queries)
    d = X.shape[1]
    started = time.perf_counter()
    index: Any
    if kind == "flat":
        index = faiss.IndexFlatIP(d)
    else:
        index = hnsw_index(d)
        index.hnsw.efSearch = EF_SEARCH
    index.add(X)
    build_s = time.perf_counter() - started
    index_bytes = int(faiss.serialize_index(index).size)
    index.search(Q[:10], K)
    batched = []
    for _ in range(reps):
        started = time.perf_counter()
        _, found = index.search(Q, K)
        batched.append(time.perf_counter() - started)
    single = []
    for i in range(min(n_single, len(Q))):
        started = time.perf_counter()
        index.search(Q[i : i + 1], K)
        single.append(time.perf_counter() - started)
    result: dict[str, Any] = {
        "kind": kind,
        "space": space,
        "n": n,
        "dim": d,
        "build_s": build_s,
        "index_bytes": index_bytes,
        "batched_qps": n_queries / median(batched),
        "single_p50_ms": float(np.percentile(single, 50) * 1000),
        "single_p99_ms": float(np.percentile(single, 99) * 1000),
        "single_qps": 1.0 / median(single),
    }
    if kind == "hnsw":
        result["recall_at_10_vs_flat"] = overlap_at_k(found, exact_top_k(X, Q))
    return result


def worker_real(model: str) -> dict[str, Any]:
    """HNSW recall@10 against exact search on real sentence vectors, raw and whitened-256."""
    import faiss

    from whitevec.datasets import load_sts_task
    from whitevec.encoders.transformer import Encoder
    from whitevec.transforms import Whitening

    faiss.omp_set_num_threads(THREADS)
    texts = load_sts_task("stsb").sentences("target")
    X = Encoder(model, pooling="last-avg").encode(texts, show_progress=False)  # the shared vector cache
    queries = np.random.default_rng(0).choice(len(X), 500, replace=False)
    in_base = np.ones(len(X), dtype=bool)
    in_base[queries] = False
    rows = []
    for space, Y in (("raw", X), ("whitened-256", Whitening(n_components=256).fit(X).transform(X))):
        Y = _normalize(Y)
        base, Q = Y[in_base], Y[queries]
        truth = exact_top_k(base, Q)
        index = hnsw_index(Y.shape[1])
        index.add(base)
        for ef in (16, EF_SEARCH):
            index.hnsw.efSearch = ef
            _, found = index.search(Q, K)
            rows.append({"model": model, "space": space, "dim": Y.shape[1], "n": len(base), "ef_search": ef,
                         "recall_at_10_vs_flat": overlap_at_k(found, truth)})  # fmt: skip
    return {"rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--kind", default="flat")
    parser.add_argument("--space", default="raw-768")
    parser.add_argument("--n", type=int, default=1_000_000, help="vectors in the flat indexes")
    parser.add_argument(
        "--hnsw-n", type=int, default=1_000_000, help="HNSW index size (0 skips it; its build is the slow part)"
    )
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--single", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--real-models", default="all-MiniLM-L6-v2,all-mpnet-base-v2", help="HNSW recall on real vectors; '' skips"
    )
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="worker: the real-data model")
    args = parser.parse_args()
    if args.worker:
        if args.kind == "real":
            emit(worker_real(args.model))
        else:
            emit(worker(args.kind, args.space, args.n, args.queries, args.single, args.reps))
        return
    script = Path(__file__).resolve()
    configs = [("flat", "raw-768", args.n), ("flat", "whitened-256", args.n)]
    if args.hnsw_n:
        if args.hnsw_n != args.n:
            configs += [("flat", "raw-768", args.hnsw_n), ("flat", "whitened-256", args.hnsw_n)]
        configs.append(("hnsw", "whitened-256", args.hnsw_n))
    rows = []
    for kind, space, n in configs:
        argv = ["--kind", kind, "--space", space, "--n", str(n), "--queries", str(args.queries),
                "--single", str(args.single), "--reps", str(args.reps)]  # fmt: skip
        result = run_worker(script, argv)
        result.setdefault("kind", kind)
        result.setdefault("space", space)
        result.setdefault("n", n)
        print(result, flush=True)
        rows.append(result)
    for row in rows:
        base = next(r for r in rows if r["kind"] == "flat" and r["space"] == "raw-768" and r["n"] == row["n"])
        for key in ("batched_qps", "single_qps"):
            row[f"{key}_vs_raw"] = ratio(row.get(key, float("nan")), base.get(key, float("nan")))
        row["bytes_vs_raw"] = ratio(row.get("index_bytes", float("nan")), base.get("index_bytes", float("nan")))
    real = []
    for model in [m for m in args.real_models.split(",") if m]:
        result = run_worker(script, ["--kind", "real", "--model", model])
        print(result, flush=True)
        real += result.get("rows", [{"model": model, "error": result.get("error")}])
    hnsw = {"M": HNSW_M, "efConstruction": EF_CONSTRUCTION, "efSearch": EF_SEARCH}
    path = save_result("recall", {"k": K, "queries": args.queries, "hnsw": hnsw, "rows": rows, "real": real})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
