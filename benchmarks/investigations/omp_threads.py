"""Why the server loads its index in a passing thread: torch's OpenMP (libgomp) pools are per thread.

``ops``: a few torch ops timed in the main thread and then in a second thread (``--main-first``) or only in the
second thread; ``serve``: queries through ``load_retriever`` in a second thread (the server's encoder thread),
then in the main thread. Prints time per call and the cores used (process CPU time / wall time).

    python benchmarks/investigations/omp_threads.py ops [--main-first]
    python benchmarks/investigations/omp_threads.py serve INDEX_DIR [--compute bf16] [--load-in-main]

An investigation of 2026-12-04, not part of the maintained suite (`make bench`). Backs docs/notes/openmp-pools.md
(the server loads its index in a passing thread, ec145cc).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

import torch


def timed(label: str, call: Callable[[], object], seconds: float = 0.5) -> None:
    call()
    wall, cpu, n = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - wall < seconds:
        call()
        n += 1
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label:28s} {wall / n * 1e3:9.3f} ms per call, cores {cpu / wall:.2f}")


def in_thread(run: Callable[[], None]) -> None:
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def ops(main_first: bool) -> None:
    x, a, b = torch.randn(1, 12, 30, 30), torch.randn(64, 384), torch.randn(384, 1536)

    def run(where: str) -> None:
        timed(f"{where} matmul 64x384x1536", lambda: a @ b)
        timed(f"{where} softmax", lambda: torch.softmax(x, -1))

    if main_first:
        run("main")
    in_thread(lambda: run("thread"))


def serve(index_dir: str, compute: str, load_in_main: bool) -> None:
    from whitevec.service import run

    if load_in_main:  # as the server did before ec145cc: the load runs in the calling (main) thread
        run.in_passing_thread = lambda load: load()
    retriever = run.load_retriever(index_dir, compute)
    query = ["what are the structural and aeroelastic problems associated with flight of high speed aircraft ."]
    in_thread(lambda: timed(f"{compute} search, thread", lambda: retriever.search(query, k=10), 2.0))
    timed(f"{compute} search, main", lambda: retriever.search(query, k=10), 2.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["ops", "serve"])
    parser.add_argument("index", nargs="?")
    parser.add_argument("--main-first", action="store_true")
    parser.add_argument("--compute", default="index")
    parser.add_argument("--load-in-main", action="store_true", help="serve: load in the main thread (the old way)")
    args = parser.parse_args()
    if args.what == "ops":
        ops(args.main_first)
    else:
        if not args.index:
            parser.error("serve needs INDEX_DIR (bench_serve.py builds one under /tmp/whitevec-bench)")
        serve(args.index, args.compute, args.load_in_main)


if __name__ == "__main__":
    main()
