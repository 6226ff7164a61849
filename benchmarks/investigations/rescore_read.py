"""What reading the rescoring rows with ``pread`` costs against the memory map it replaced (issue 37, item 4).

A ``+rescore`` index reads its K x k candidates' vectors from ``rescore.npy``. whitevec reads them with ``pread``
on a descriptor (a file truncated under a server is then an error, not SIGBUS); before, it indexed a numpy
memory map of the file. This script times both readers in one process, on one loaded index, warm page cache:

- ``memmap``: a benchmark-local copy of the old read (``np.memmap`` of the records, fancy-indexed by the ids);
- ``pread``: whitevec's own reader (:class:`whitevec.index.encodings.rescore.RecordFile`).

Corpus: ``n`` seeded synthetic 768-d unit vectors (``common/data.py``), indexed as ``binary-rr+rescore`` (flat,
cosine, codes trained on at most 100,000 of them) by ``common/scale.py``'s ``build_row_index``, as
bench_binary.py builds it; queries are perturbed corpus vectors. For each multiplier K (default 4 and 10) and
each reader, single-query latency p50 / p99 (ms) of

- ``search``: the store's whole search (the codes' Hamming scan, then the rescoring read and scoring), and
- ``rescore``: the rescoring step alone (the same candidates, precomputed from the codes),

after one untimed pass of every query with each reader (warm: the rows in the page cache, the map's pages
mapped). The readers take turns query by query, so drift of a shared machine falls on both alike. Both must
return the same ids (checked).

Run on a quiet machine (the build of 100k vectors takes a minute or two; the folder is reused):
    python benchmarks/investigations/rescore_read.py --n 100000 --workdir /tmp/whitevec-bench-rescore-read
Tiny check that it runs (no figure to quote):
    python benchmarks/investigations/rescore_read.py --n 3000 --queries 20 --workdir /tmp/rescore-read-tiny --out -
Result: benchmarks/results/rescore_read.json (``--out``; ``-`` prints it only).

An investigation of 2026-12-05, not part of the maintained suite (`make bench`). Backs docs/notes/one-bit-codes.md
(what reading the rescoring rows with ``pread`` costs).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import clustered_unit_vectors
from benchmarks.common.machine import machine_facts
from benchmarks.common.runs import RESULTS
from benchmarks.common.scale import DIM, K, RowEncoder, build_row_index, set_multiplier

INDEX = "binary-rr+rescore"
READERS = ("memmap", "pread")


class MemmapRecords:
    """The read path before ``pread``: the records memory-mapped, fancy-indexed (a copy of the old code, kept
    here for this comparison only)."""

    def __init__(self, path: Path, dtype: np.dtype, offset: int, rows: int) -> None:
        self.rows = rows
        self._map = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(rows,))

    def read(self, ids: np.ndarray) -> np.ndarray:
        return np.asarray(self._map[ids])


def _percentiles(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(ms, 50)), 4), "p99_ms": round(float(np.percentile(ms, 99)), 4)}


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = call()
    return (time.perf_counter() - started) * 1000, out


def measure(folder: Path, queries: np.ndarray, multipliers: list[int]) -> dict[str, Any]:
    """p50 / p99 of single-query searches and of the rescoring step alone, per multiplier and reader."""
    from whitevec.index import Retriever
    from whitevec.index.encodings.rescore import RESCORE_FILE

    retriever = Retriever.load(folder, encoder=RowEncoder(None))  # type: ignore[arg-type]
    store: Any = retriever.store
    records = store.rescore
    pread = records.disk
    readers = {
        "memmap": MemmapRecords(folder / RESCORE_FILE, pread.dtype, pread.offset, pread.rows),
        "pread": pread,
    }
    out: dict[str, Any] = {}
    for multiplier in multipliers:
        set_multiplier(store, multiplier)
        candidates = [store.index.search(store.signs.encode(q[None, :]), multiplier * K)[1] for q in queries]
        times: dict[str, dict[str, list[float]]] = {name: {"search": [], "rescore": []} for name in READERS}
        for name in READERS:  # warm: every query's rows read once with each reader
            records.disk = readers[name]
            for q in queries:
                store.search(q[None, :], K)
        for i, q in enumerate(queries):
            found = {}
            for name in READERS if i % 2 == 0 else READERS[::-1]:
                records.disk = readers[name]
                ms, (_, ids) = _timed(lambda q=q: store.search(q[None, :], K))
                times[name]["search"].append(ms)
                found_by_codes = candidates[i]
                ms, _ = _timed(lambda q=q, c=found_by_codes: records.rescore(q[None, :], c, K, store.metric))
                times[name]["rescore"].append(ms)
                found[name] = ids
            if not np.array_equal(found["memmap"], found["pread"]):
                raise SystemExit(f"the readers disagree on query {i}: {found}")
        records.disk = pread
        out[str(multiplier)] = {
            name: {step: _percentiles(ms) for step, ms in steps.items()} for name, steps in times.items()
        }
    retriever.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="corpus vectors")
    parser.add_argument("--queries", type=int, default=500, help="single queries timed per multiplier")
    parser.add_argument("--multipliers", type=int, nargs="+", default=[4, 10])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/whitevec-bench-rescore-read"))
    parser.add_argument("--out", default=str(RESULTS / "rescore_read.json"), help="result file, or - for stdout")
    args = parser.parse_args()
    x, queries = clustered_unit_vectors(args.n, args.queries, DIM)
    folder = build_row_index(args.workdir / f"n{args.n}", x, INDEX)  # reused when already built
    del x
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    result = {
        "command": "python benchmarks/investigations/rescore_read.py " + " ".join(sys.argv[1:]),
        "machine": machine_facts("faiss-cpu"),
        "load_average_before": load,
        "n": args.n,
        "dim": DIM,
        "index": INDEX,
        "k": K,
        "queries": args.queries,
        "by_multiplier": measure(folder, np.ascontiguousarray(queries), args.multipliers),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
