"""FAISS search time on faiss's OpenMP pool against one thread, each search straight after a real encoder call
(as in the server, where torch's threads have just held the cores).

For each batch size, ``rounds`` times: encode a batch of Cranfield queries with the index's encoder (torch on
its threads), then time one ``index.search`` of that many query vectors, alternately on the pool (faiss's
default threads) and inside ``one_faiss_thread``. Reports the median, mean and 90th percentile in ms, and the
multiply-adds of the search (queries x documents x dims) beside ``POOL_WORK``.

    python benchmarks/investigations/faiss_threads.py [INDEX] [--rounds 40] [--batches 1,8,32,64,256]

An investigation of 2026-12-04, not part of the maintained suite (`make bench`). Backs docs/notes/faiss-threads.md
(small searches on one faiss thread, 0557e89); its output is benchmarks/results/faiss_threads.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.common.machine import machine_facts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", nargs="?", type=Path, default=Path("/tmp/whitevec-bench/cranfield-minilm-w256"))
    parser.add_argument("--queries", type=Path, default=Path("/tmp/whitevec-bench-serve-queries.json"))
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--batches", default="1,8,32,64,256")
    args = parser.parse_args()

    from whitevec.index.faiss.store import POOL_WORK, one_faiss_thread
    from whitevec.service.run import load_retriever

    load_before = os.getloadavg()[0]
    retriever: Any = load_retriever(args.index)
    index = retriever.store.index
    texts: list[str] = json.loads(args.queries.read_text())
    rng = np.random.default_rng(0)
    facts = machine_facts()
    print(f"{facts['date']}, {facts['cpu']}, {facts['cores']} cores; load before {load_before:.2f}")
    print(f"index: {index.ntotal} x {index.d}; POOL_WORK {POOL_WORK:,}")
    print("| queries | multiply-adds | pool median | pool mean | pool p90 | one median | one mean | one p90 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for batch in (int(b) for b in args.batches.split(",")):
        x = np.ascontiguousarray(rng.standard_normal((batch, index.d)), dtype=np.float32)
        times: dict[str, list[float]] = {"pool": [], "one": []}
        for i in range(args.rounds):
            for mode in ("pool", "one"):
                start = (i * 7) % max(1, len(texts) - 32)
                retriever.embed(texts[start : start + 32])  # torch's threads have just run, as in the server
                began = time.perf_counter()
                with one_faiss_thread() if mode == "one" else contextlib.nullcontext():
                    index.search(x, 10)
                times[mode].append((time.perf_counter() - began) * 1000)
        cells = []
        for mode in ("pool", "one"):
            ms = times[mode]
            cells += [statistics.median(ms), statistics.fmean(ms), float(np.percentile(ms, 90))]
        print(f"| {batch} | {batch * index.ntotal * index.d:,} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
