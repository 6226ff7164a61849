"""How long one full garbage collection stops a process that has loaded an index, before and after
``freeze_loaded_heap`` (what ``whitevec serve`` does once the app is built).

Python runs a full (generation 2) collection whenever the objects promoted since the last one reach a quarter
of the old ones; it walks every tracked object with the GIL held, so in a server every request in flight waits
for it. This loads the index as the server does, then times ``gc.collect()`` ``--repeats`` times before and
after the freeze, with the number of objects a collection walks, and counts the full collections Python starts
by itself over ``--searches`` one-query searches afterwards (and how long they took).

    python benchmarks/investigations/gc_pause.py [INDEX] [--repeats 5] [--searches 2000]

An investigation of 2026-12-05, not part of the maintained suite (`make bench`). Backs docs/notes/gc-freeze.md (the
loaded heap frozen once the app is built, 4314981); its output is benchmarks/results/gc_pause.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.common.machine import machine_facts  # noqa: E402


def full_collection_ms(repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - began) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", nargs="?", type=Path, default=Path("/tmp/whitevec-bench/cranfield-minilm-w256"))
    parser.add_argument("--queries", type=Path, default=Path("/tmp/whitevec-bench-serve-queries.json"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--searches", type=int, default=2000)
    args = parser.parse_args()

    from whitevec.service.run import freeze_loaded_heap, load_retriever

    load_before = os.getloadavg()[0]
    retriever: Any = load_retriever(args.index)
    texts: list[str] = json.loads(args.queries.read_text())
    for text in texts[:10]:
        retriever.search([text], k=10)
    facts = machine_facts()
    print(f"{facts['date']}, {facts['cpu']}, {facts['cores']} cores; Python {sys.version.split()[0]}; ", end="")
    print(f"load before {load_before:.2f}; index {args.index.name}")
    print("| heap | objects a full collection walks | full collection ms, median | min-max |")
    print("|---|---:|---:|---|")
    rows = [("as loaded", len(gc.get_objects()), full_collection_ms(args.repeats))]
    freeze_loaded_heap()
    rows.append(("after freeze_loaded_heap", len(gc.get_objects()), full_collection_ms(args.repeats)))
    for name, objects, ms in rows:
        print(f"| {name} | {objects:,} | {statistics.median(ms):.1f} | {min(ms):.1f}-{max(ms):.1f} |")

    # The collections Python starts by itself while serving queries one by one after the freeze.
    started: list[float] = []
    full: list[float] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif info["generation"] == 2:
            full.append((time.perf_counter() - started[-1]) * 1000)

    gc.callbacks.append(watch)
    for i in range(args.searches):
        retriever.search([texts[i % len(texts)]], k=10)
    gc.callbacks.remove(watch)
    slowest = f", the slowest {max(full):.1f} ms" if full else ""
    print(f"\n{args.searches} one-query searches after the freeze: {len(started)} collections, ", end="")
    print(f"{len(full)} full{slowest}")


if __name__ == "__main__":
    main()
