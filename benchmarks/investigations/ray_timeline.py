"""A timeline of one Ray build of the bench_scale.py corpus: when its phases start and end, when units are
logged as encoded, and the seconds spent in Milvus flushes and upserts. The fixed costs quoted in the README's
"Scaling out" section (time to the first finished call, writes, flushes) come from here.

    python benchmarks/investigations/ray_timeline.py

(WHITEVEC_DATA set; about a minute on 2 cores, alone on the machine)

An investigation of 2026-12-04, not part of the maintained suite (`make bench`). Backs
docs/notes/ray-build-costs.md (where a small Ray build's fixed cost goes).
"""

from __future__ import annotations

import functools
import importlib
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.scale import BATCH, CPUS, MAX_LENGTH, MODEL, POOLING, TRANSFORM, write_corpus

from whitevec.engines import ray as ray_engine
from whitevec.index.milvus.store import MilvusStore

STARTED = time.perf_counter()
SPENT: dict[str, list[float]] = {"flush": [0.0, 0], "upsert_documents": [0.0, 0]}


def mark(what: str) -> None:
    print(f"{time.perf_counter() - STARTED:7.2f} s  {what}", flush=True)


def phase(name: str, call: Any) -> Any:
    @functools.wraps(call)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        mark(f"start {name}")
        try:
            return call(*args, **kwargs)
        finally:
            mark(f"end {name}")

    return wrapped


def summed(name: str, call: Any) -> Any:
    @functools.wraps(call)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            SPENT[name][0] += time.perf_counter() - began
            SPENT[name][1] += 1

    return wrapped


def main() -> None:
    global STARTED
    import ray

    # The steps as the build module calls them (bound there by its imports).
    steps = importlib.import_module("whitevec.engines.ray.build")
    for name in ("encode_units", "check_ids", "merge_moments", "open_collection", "write_vectors"):
        setattr(steps, name, phase(name, getattr(steps, name)))
    for name in SPENT:
        setattr(MilvusStore, name, summed(name, getattr(MilvusStore, name)))
    folder = Path(tempfile.mkdtemp(prefix="ray-timeline-"))
    corpus, out = folder / "corpus.jsonl", folder / "index"
    docs = write_corpus(corpus, 10**9)
    ray.init(num_cpus=CPUS, include_dashboard=False, log_to_driver=False, object_store_memory=500 << 20)
    log = ray_engine.work_folder(out) / ray_engine.ENCODED_LOG
    stop = threading.Event()

    def watch_log() -> None:
        seen = 0
        while not stop.is_set():
            try:
                with open(log) as handle:
                    count = sum(1 for _ in handle)
            except OSError:
                count = 0
            if count != seen:
                mark(f"{count} units logged as encoded")
                seen = count
            time.sleep(0.2)

    threading.Thread(target=watch_log, daemon=True).start()
    STARTED = time.perf_counter()
    encoder = {"model": MODEL, "pooling": POOLING, "max_length": MAX_LENGTH, "batch_size": BATCH}
    ray_engine.ray_build(str(corpus), out, encoder=encoder, transform=TRANSFORM, workers=CPUS)
    mark(f"built ({docs} documents)")
    stop.set()
    ray.shutdown()
    for name, (seconds, calls) in SPENT.items():
        print(f"MilvusStore.{name}: {seconds:.2f} s in {calls} calls")


if __name__ == "__main__":
    main()
