"""How far a filtered HNSW or IVF search must widen (issue 40, the filter target): recall@10 against brute force
over the passing rows, and the store's p50 per query against the same run's unfiltered p50, for efSearch or nprobe
swept in doublings from the unfiltered one (until recall@10 reaches the unfiltered search's, every row or list,
or ``--budget-ms``), whitevec's own choice (``FaissStore.search``: index/faiss/filtered.py), the exact paths (the
passing rows' codes decoded alone; for HNSW, faiss's selector scan of its flat storage; for IVF, every list) and,
with ``--widened``, unfiltered searches of 2k / share and 4k / share cut to the passing rows.

    python benchmarks/investigations/filter_scaling.py [--docs 100000] [--queries 100] [--shares 0.5 0.1]

100,000 x 384 clustered unit vectors (the filters benchmark's), filters passing 100% to 0.1% of the rows drawn
at random. The store alone (no Retriever): one query a search, on one faiss thread, in turns per strategy.
Quality figures do not depend on the machine's load; the p50s do (note ``uptime``). What it showed (load 4-11):
1/sqrt(share) loses recall (HNSW at 10% 0.949-0.962 against 1.000 unfiltered; IVF 0.71); HNSW holds it at
efSearch / share (0.992-0.997), IVF needs more than nprobe / share (0.87-0.89 at 10%; / share ** 1.5: 0.987);
a widened unfiltered search finds what the selector's search at the same setting finds (same recall).
Run 2026-12-06 on the 2-core AMD EPYC; quoted by docs/how-to/filters.md (why these scalings) and behind the
path rule that docs/results/filters.md reports.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import clustered_unit_vectors

from whitevec.index.faiss.store import FaissStore, one_faiss_thread
from whitevec.utils.threads import one_blas_thread

SHARES = (1.0, 0.5, 0.1, 0.01, 0.001)
K = 10
Search = Callable[[np.ndarray], np.ndarray]


def selector_search(store: FaissStore, allowed: np.ndarray, bitmap: np.ndarray, value: int) -> Search:
    """faiss's search within ``allowed`` at efSearch or nprobe ``value``."""
    passing = int(allowed.sum())
    params = store._selector_params(bitmap, K, passing=passing, wide=False)
    if store.kind == "hnsw":
        params.efSearch = max(K, value)
    else:
        params.nprobe = value
    return lambda x: store._search(x, K, params, passing)[1]


def widened_search(store: FaissStore, allowed: np.ndarray, depth: int, value: int) -> Search:
    """An unfiltered search of the ``depth`` best at efSearch or nprobe ``value``, cut to the passing rows' ``K``
    best (faiss's HNSW keeps at least ``depth`` candidates)."""
    faiss = __import__("faiss")
    params = faiss.SearchParametersHNSW() if store.kind == "hnsw" else faiss.SearchParametersIVF()
    if store.kind == "hnsw":
        params.efSearch = value
    else:
        params.nprobe = value

    def search(x: np.ndarray) -> np.ndarray:
        ids = store._search(x, depth, params)[1]
        passes = (ids >= 0) & allowed[np.maximum(ids, 0)]
        order = np.argsort(~passes, axis=1, kind="stable")[:, :K]
        return np.where(np.take_along_axis(passes, order, axis=1), np.take_along_axis(ids, order, axis=1), -1)

    return search


def exact_searches(store: FaissStore, allowed: np.ndarray) -> dict[str, Search]:
    """The exact paths: the passing rows' codes decoded alone; for HNSW, faiss's selector scan of its storage."""
    faiss = __import__("faiss")
    if store.kind != "hnsw":  # IVF keeps no flat array of codes: its exact path is every list
        nlist = int(store.params()["nlist"])
        return {
            f"every list, nprobe {nlist}": selector_search(
                store, allowed, np.packbits(allowed, bitorder="little"), nlist
            )
        }
    out: dict[str, Search] = {"decoded": lambda x: store._passing_rows_search(x, K, allowed, scan=False)[1]}
    storage = faiss.downcast_index(faiss.downcast_index(store.index.index).storage)
    rows = faiss.vector_to_array(store.index.id_map)
    positions = np.packbits(allowed[rows], bitorder="little")
    flat = faiss.SearchParameters()
    flat.sel = faiss.IDSelectorBitmap(len(positions), faiss.swig_ptr(positions))
    flat.bitmap = positions  # the selector reads this array: it must live as long as the parameters

    def storage_scan(x: np.ndarray) -> np.ndarray:
        found = storage.search(x, K, params=flat)[1]
        return np.where(found >= 0, rows[np.maximum(found, 0)], -1)

    out["storage scan"] = storage_scan
    return out


def p50_ms(search: Search, queries: np.ndarray) -> float:
    times = []
    for j in range(len(queries)):
        started = time.perf_counter()
        search(queries[j : j + 1])
        times.append(1e3 * (time.perf_counter() - started))
    return statistics.median(times)


def recall(search: Search, queries: np.ndarray, x: np.ndarray, allowed: np.ndarray) -> float:
    truth = np.argsort(-np.where(allowed, queries @ x.T, -np.inf), axis=1)[:, :K]
    want = min(K, int(allowed.sum()))
    found = [search(queries[j : j + 1])[0] for j in range(len(queries))]
    return float(
        np.mean([len(set(f.tolist()) & set(t[:want].tolist())) / want for f, t in zip(found, truth, strict=True)])
    )


def run(kind: str, x: np.ndarray, q: np.ndarray, budget_ms: float, shares: list[float], widened: bool) -> None:
    """Per share: the setting swept in doublings from the unfiltered one (up to every row or list, or until
    recall@10 reaches the unfiltered one's, or the p50 passes ``budget_ms``), and the exact paths."""
    store = FaissStore(x.shape[1], "cosine", kind, {"encoding": "float32", "train_sample": 20_000})
    started = time.perf_counter()
    store.add(np.arange(len(x), dtype=np.int64), x)
    print(f"{kind}: built in {time.perf_counter() - started:.1f} s, params {store.params()}", file=sys.stderr)
    name = "efSearch" if kind == "hnsw" else "nprobe"
    setting = int(store.params()[name])
    top = len(x) if kind == "hnsw" else int(store.params()["nlist"])
    with one_faiss_thread(), one_blas_thread():
        unfiltered: Search = lambda v: store.search(v, K)[1]  # noqa: E731
        base_recall = recall(unfiltered, q, x, np.ones(len(x), bool))
        rng = np.random.default_rng(1)
        for share in shares:
            allowed = np.zeros(len(x), bool)
            allowed[rng.permutation(len(x))[: int(share * len(x))]] = True
            bitmap = np.packbits(allowed, bitorder="little")
            searches = {}
            value = setting
            while True:
                searches[f"{name} {value} ({value / setting * share:.2g} / share)"] = selector_search(
                    store, allowed, bitmap, value
                )
                found = recall(searches[next(reversed(searches))], q, x, allowed)
                if (
                    found >= base_recall - 0.002
                    or value >= top
                    or p50_ms(searches[next(reversed(searches))], q[:20]) > budget_ms
                ):
                    break
                value = min(top, 2 * value)
            searches["whitevec's choice (FaissStore.search)"] = lambda v, a=allowed: store.search(v, K, a)[1]
            for factor in (2, 4) if widened else ():
                depth = min(len(x), int(np.ceil(factor * K / share)))
                for scale in (1, 2, 4) if kind == "ivf" else (1,):
                    searches[f"widened to {depth}, {name} {scale * setting}"] = widened_search(
                        store, allowed, depth, scale * setting
                    )
            searches.update(exact_searches(store, allowed))
            for label, search in searches.items():
                base, p50 = p50_ms(unfiltered, q), p50_ms(search, q)
                print(
                    f"| {kind} | {100 * share:g}% | {label} | {recall(search, q, x, allowed):.3f} "
                    f"| {base_recall:.3f} | {p50:.3f} | {base:.3f} | {p50 / base:.2f} |",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--kinds", nargs="+", default=["hnsw", "ivf"])
    parser.add_argument("--budget-ms", type=float, default=20.0)
    parser.add_argument("--shares", type=float, nargs="+", default=list(SHARES))
    parser.add_argument("--widened", action="store_true", help="also unfiltered searches widened, then cut")
    args = parser.parse_args()
    x, q = clustered_unit_vectors(args.docs, args.queries, d=384)
    print("| kind | passing | strategy | recall@10 | unfiltered recall@10 | p50 ms | unfiltered p50 ms | ratio |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for kind in args.kinds:
        run(kind, x, q, args.budget_ms, args.shares, args.widened)


if __name__ == "__main__":
    main()
