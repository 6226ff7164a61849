"""Query batches through ``Retriever.search`` / ``embed`` with the query path's one-BLAS-thread block
(whitevec.utils.threads) and without it, by batch size, in the thread layout of the server (a second thread
encodes). Each setting runs in a fresh process with the machine's threads.

Why: numpy's and faiss's OpenBLAS threads spin after a product and take cores from torch's next forward pass.

    python benchmarks/investigations/blas_threads.py INDEX_DIR QUERIES_JSON [--compute bf16]
        [--batches 1,8,16,32,64]

INDEX_DIR and QUERIES_JSON: those of benchmarks/maintained/bench_serve.py
(/tmp/whitevec-bench/cranfield-minilm-w256 and /tmp/whitevec-bench-serve-queries.json).

An investigation of 2026-12-04, not part of the maintained suite (`make bench`). Backs docs/notes/blas-threads.md
(the query path's BLAS on one thread, 1cf427a and c64a47b); its output is benchmarks/results/blas_threads.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common
from benchmarks.common.machine import facts_markdown, machine_facts
from benchmarks.common.runs import emit, run_worker


def worker(index: str, queries_file: str, compute: str, batches: list[int], blas_block: bool) -> None:
    if not blas_block:  # the code before the block: every BLAS at its default threads
        import whitevec.index.faiss.store as faiss_store_module
        import whitevec.index.stores.vector as store_module

        def no_block(when: bool = True) -> contextlib.nullcontext[None]:
            return contextlib.nullcontext()

        store_module.one_blas_thread = no_block  # type: ignore[assignment]
        faiss_store_module.one_blas_thread = no_block  # type: ignore[assignment]
    from whitevec.service.run import load_retriever

    retriever: Any = load_retriever(index) if compute == "index" else load_retriever(index, compute)
    queries: list[str] = json.loads(Path(queries_file).read_text())
    result: dict[str, Any] = {}

    def rate(call: Any, batch: int) -> float:
        rates = []
        for _ in range(3):
            started, done = time.perf_counter(), 0
            for i in range(0, len(queries) - batch + 1, batch):
                call(queries[i : i + batch])
                done += batch
            rates.append(done / (time.perf_counter() - started))
        return round(statistics.median(rates), 1)

    def measure() -> None:
        for q in queries[:10]:
            retriever.search([q], k=10)
        for batch in batches:
            result[f"search_{batch}"] = rate(lambda b: retriever.search(b, k=10), batch)
            result[f"embed_{batch}"] = rate(retriever.embed, batch)

    thread = threading.Thread(target=measure)  # like the server's encoder thread
    thread.start()
    thread.join()
    emit(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index")
    parser.add_argument("queries")
    parser.add_argument("--compute", default="index")
    parser.add_argument("--batches", default="1,8,16,32,64")
    parser.add_argument("--worker", choices=["on", "off"], default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    if args.worker:
        worker(args.index, args.queries, args.compute, batches, args.worker == "on")
        return
    print(f"# One BLAS thread on the query path, by batch size (compute `{args.compute}`)\n")
    print(facts_markdown(machine_facts("numpy", "torch", "faiss-cpu", "threadpoolctl")))
    print(
        f"Command: `python benchmarks/investigations/blas_threads.py {' '.join(sys.argv[1:])}`; "
        "load average (1 min) before: "
        f"{os.getloadavg()[0]:.2f}. Queries/s: median of 3 passes over the Cranfield queries.\n"
    )
    common = [args.index, args.queries, "--compute", args.compute, "--batches", args.batches]
    results = {label: run_worker(Path(__file__), [label, *common]) for label in ("off", "on")}
    print("| call | batch | queries/s, BLAS at default threads | queries/s, one BLAS thread | ratio |")
    print("|---|---:|---:|---:|---:|")
    for label, result in results.items():
        if "error" in result:
            raise SystemExit(f"the {label} worker failed: {result['error']}")
    for call in ("search", "embed"):
        for batch in batches:
            off, on = results["off"][f"{call}_{batch}"], results["on"][f"{call}_{batch}"]
            print(f"| {call} | {batch} | {off:.1f} | {on:.1f} | {on / off:.2f}x |")


if __name__ == "__main__":
    main()
