"""The Ray engine's cost on one machine, and a capacity plan for 100M documents from the measured per-core rate.

Same corpus (the unique sentences of STS-B, STS12-15: JSONL with ids), same model (all-MiniLM-L6-v2, last-avg,
float32, batch 64, max_length 256), same transform (whitening-256), same Milvus Lite collection, same 2 cores:

- ``local``: ``build_index`` in one process (torch on 2 threads), model load included;
- ``ray``: ``ray_build`` on a local Ray instance with 2 CPUs and 2 actors (1 CPU, 1 torch thread each); the
  ``ray.init`` is timed apart (a cluster is normally up already), the actor pool's start is included.

Each run is a fresh subprocess; sentences/s = documents / wall seconds of the build. Peak memory: the driver's
ru_maxrss, and each actor's VmHWM read from /proc while it runs. The plan divides 100M documents by the measured
per-core rate of the Ray build (sentences per CPU-second: driver and actors' user + system time) for a few
cluster sizes, and sizes Milvus's memory per index
encoding with ``whitevec.index.encodings.spec.storage_estimate`` (vectors only; Milvus's own overhead comes on
top).

Run: ``python benchmarks/maintained/bench_scale.py [--max-docs N] [--repeats 1,4] [--markdown]`` (WHITEVEC_DATA
set; about 7 min on 2 cores). Two or more corpus sizes (the unique sentences and copies in other letter cases)
also give each build's fixed cost (start-up, writes) apart from its rate, which is what a large corpus sees.
Writes benchmarks/results/scale.json and, with --markdown, docs/results/scale.md (``python
benchmarks/pages/scale.py`` writes the page from the JSON, measuring nothing). The settings:
benchmarks/common/scale.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import machine_facts
from benchmarks.common.runs import emit, run_page, run_worker, save_result
from benchmarks.common.scale import (
    BATCH,
    CASE_COPIES,
    CPUS,
    DIMS,
    MAX_LENGTH,
    MODEL,
    POOLING,
    TRANSFORM,
    write_corpus,
)

TARGET_DOCS = 100_000_000
CLUSTERS = [16, 64, 256, 1024]  # CPUs (one actor each)
ENCODINGS = [("flat", "float32"), ("hnsw", "float32"), ("hnsw", "sq8"), ("ivf", "sq8"), ("ivf", "pq64")]


def _actor_peaks(stop: threading.Event, peaks: dict[int, float], cpu: dict[int, float]) -> None:
    """VmHWM (peak resident MiB) and CPU seconds (user + system) of each encoder actor process, sampled every
    0.2 s until ``stop``."""
    ticks = os.sysconf("SC_CLK_TCK")
    while not stop.is_set():
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if b"MapWorker(MapBatches(EncodeUnits))" not in (entry / "cmdline").read_bytes():
                    continue
                pid = int(entry.name)
                for line in (entry / "status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peaks[pid] = max(peaks.get(pid, 0.0), int(line.split()[1]) / 1024)
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cpu[pid] = max(cpu.get(pid, 0.0), (int(fields[11]) + int(fields[12])) / ticks)
            except (OSError, ValueError, IndexError):
                continue
        stop.wait(0.2)


def _own_cpu_seconds() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def worker(mode: str, corpus: str, count: int) -> None:
    out = Path(tempfile.mkdtemp(prefix="bench-scale-")) / "index"
    if mode == "local":
        import torch

        from whitevec.encoders.transformer import Encoder
        from whitevec.index import build_index

        torch.set_num_threads(CPUS)
        started = time.perf_counter()
        with Encoder(MODEL, POOLING, max_length=MAX_LENGTH, batch_size=BATCH, cache=False) as encoder:
            build_index(corpus, out, encoder=encoder, transform=TRANSFORM, backend="milvus")
        seconds = time.perf_counter() - started
        cpu_seconds = _own_cpu_seconds()
        emit(
            {
                "mode": mode,
                "docs": count,
                "seconds": round(seconds, 2),
                "docs_per_s": round(count / seconds, 1),
                "cpu_seconds": round(cpu_seconds, 1),
                "docs_per_cpu_s": round(count / cpu_seconds, 1),
            }
        )
        return
    import ray

    from whitevec.engines.ray import ray_build

    started = time.perf_counter()
    ray.init(num_cpus=CPUS, include_dashboard=False, log_to_driver=False, object_store_memory=500 << 20)
    init_seconds = time.perf_counter() - started
    peaks: dict[int, float] = {}
    actor_cpu: dict[int, float] = {}
    driver_cpu = _own_cpu_seconds()
    stop = threading.Event()
    sampler = threading.Thread(target=_actor_peaks, args=(stop, peaks, actor_cpu), daemon=True)
    sampler.start()
    try:
        started = time.perf_counter()
        ray_build(
            corpus,
            out,
            encoder={"model": MODEL, "pooling": POOLING, "max_length": MAX_LENGTH, "batch_size": BATCH},
            transform=TRANSFORM,
            workers=CPUS,
        )
        seconds = time.perf_counter() - started
        driver_cpu = _own_cpu_seconds() - driver_cpu
    finally:
        stop.set()
        sampler.join()
        ray.shutdown()
    cpu_seconds = driver_cpu + sum(actor_cpu.values())
    emit(
        {
            "mode": mode,
            "docs": count,
            "seconds": round(seconds, 2),
            "docs_per_s": round(count / seconds, 1),
            "ray_init_seconds": round(init_seconds, 2),
            "actor_peak_mib": sorted(round(v, 1) for v in peaks.values()),
            "cpu_seconds": round(cpu_seconds, 1),
            "actor_cpu_seconds": sorted(round(v, 1) for v in actor_cpu.values()),
            "docs_per_cpu_s": round(count / cpu_seconds, 1),
        }
    )


def capacity_plan(docs_per_s_per_cpu: float) -> dict[str, Any]:
    from whitevec.index.encodings.spec import parse_encoding, storage_estimate

    hours = {cpus: round(TARGET_DOCS / (docs_per_s_per_cpu * cpus) / 3600, 2) for cpus in CLUSTERS}
    memory: dict[str, dict[int, float]] = {}
    for kind, spec in ENCODINGS:
        params = {"M": 32, "nlist": 16384}
        row = {}
        for dim in DIMS:
            encoding = parse_encoding(spec)
            if encoding.m is not None and dim % encoding.m:
                continue
            per, fixed = storage_estimate(encoding, kind, params, dim)
            row[dim] = round((fixed + per * TARGET_DOCS) / 2**30, 1)
        memory[f"{kind}+{spec}"] = row
    return {"hours_by_cpus": hours, "milvus_gib_by_dim": memory}


def _fit_line(runs: list[dict[str, Any]], build: str) -> dict[str, float] | None:
    """``seconds = fixed + documents / rate`` through the smallest and largest corpus, for one build; also the
    marginal documents per CPU-second."""
    if len(runs) < 2:
        return None
    small, large = runs[0][build], runs[-1][build]
    docs = large["docs"] - small["docs"]
    per_doc = (large["seconds"] - small["seconds"]) / docs
    return {
        "fixed_seconds": round(small["seconds"] - small["docs"] * per_doc, 2),
        "docs_per_s": round(1 / per_doc, 1),
        "docs_per_cpu_s": round(docs / (large["cpu_seconds"] - small["cpu_seconds"]), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", nargs=3, metavar=("MODE", "CORPUS", "COUNT"))
    parser.add_argument("--max-docs", type=int, default=40_000)
    parser.add_argument(
        "--repeats",
        default="1,4",
        help="corpus sizes, as copies (1 to 4) of the unique sentences (comma-separated); two or more also "
        "give the builds' fixed costs and rates past them",
    )
    parser.add_argument(
        "--markdown", action="store_true", help="then write docs/results/scale.md (pages/scale.py)"
    )
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], int(args.worker[2]))
        return
    repeats = sorted({int(r) for r in args.repeats.split(",")})
    if not repeats or repeats[0] < 1 or repeats[-1] > len(CASE_COPIES):
        parser.error(f"--repeats takes whole numbers from 1 to {len(CASE_COPIES)}")
    load_before = " ".join(f"{v:.2f}" for v in os.getloadavg())
    folder = Path(tempfile.mkdtemp(prefix="bench-scale-corpus-"))
    script = Path(__file__).resolve()
    runs: list[dict[str, Any]] = []
    for repeat in repeats:
        corpus = folder / f"corpus-{repeat}.jsonl"
        count = write_corpus(corpus, args.max_docs, repeat)
        local = run_worker(script, ["local", str(corpus), str(count)])
        rayed = run_worker(script, ["ray", str(corpus), str(count)])
        for name, got in (("local", local), ("ray", rayed)):
            if "error" in got:
                raise SystemExit(f"{name} run ({repeat}x) failed: {got['error']}")
        runs.append(
            {
                "repeats": repeat,
                "local": local,
                "ray": rayed,
                "ratio": round(rayed["docs_per_s"] / local["docs_per_s"], 3),
                "cpu_ratio": round(rayed["docs_per_cpu_s"] / local["docs_per_cpu_s"], 3),
            }
        )
        corpus.unlink()
    fits = {name: _fit_line(runs, key) for name, key in (("single process", "local"), ("Ray", "ray"))}
    # The per-core rate of the plan: sentences per CPU-second of the Ray build (driver and actors), which a busy
    # machine does not distort as it does sentences/s; past the fixed costs when two sizes were run.
    ray_fit = fits["Ray"]
    per_cpu = ray_fit["docs_per_cpu_s"] if ray_fit else runs[-1]["ray"]["docs_per_cpu_s"]
    result = {
        "command": "python benchmarks/maintained/bench_scale.py " + " ".join(sys.argv[1:]),
        "machine": machine_facts("ray", "pymilvus"),
        "load_before": load_before,
        "runs": runs,
        **({"fits": fits} if ray_fit else {}),
        "ray_docs_per_s_per_cpu": round(per_cpu, 1),
        "plan": capacity_plan(per_cpu),
    }
    print(json.dumps(result, indent=2))
    save_result("scale", result)
    if args.markdown:
        run_page("scale")


if __name__ == "__main__":
    main()
