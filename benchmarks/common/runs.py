"""Shared plumbing for the benchmarks: one measurement per fresh subprocess, medians, result files, pages.

Every measurement runs in its own Python process (``run_worker``) so that the peak resident memory it reports
(``ru_maxrss`` of that process) belongs to that run alone, and no run warms caches or allocator pools for the
next. A worker prints one line ``RESULT {json}`` as its last output.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "results"
PAGES = Path(__file__).resolve().parents[1] / "pages"
THREADS = 2


def thread_env(threads: int = THREADS) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[key] = str(threads)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def peak_mib() -> float:
    """Peak resident memory of this process so far, MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def emit(result: dict[str, Any]) -> None:
    """Worker side: report one result (peak memory added) to the parent."""
    result.setdefault("peak_mib", round(peak_mib(), 1))
    print("RESULT " + json.dumps(result), flush=True)


def run_worker(script: Path, args: list[str], timeout: float = 3600) -> dict[str, Any]:
    """Run ``script --worker ...`` in a fresh interpreter; its RESULT line as a dict (``{"error": ...}`` if it
    failed)."""
    cmd = [sys.executable, "-W", "ignore", str(script), "--worker", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=thread_env(), timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            parsed: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return parsed
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


def median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def save_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    return path


def ratio(numerator: float, denominator: float) -> float:
    return float(numerator / denominator) if denominator else float("nan")


def run_page(generator: str, *args: str) -> None:
    """Run the page generator ``benchmarks/pages/<generator>.py`` in its own process (scripts share code only
    through benchmarks.common), with the same interpreter; a failure stops the caller."""
    subprocess.run([sys.executable, str(PAGES / f"{generator}.py"), *args], check=True)


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder`` (what an index holds on disk)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
