"""Fit time and peak memory of Flow against Whitening on the STS-B target sentence vectors.

For each model (first-last-avg pooling) the ~17k unique sentences of STS-B train+dev+test are encoded once (the
encoder's disk cache makes reruns free) and written to a temporary .npy file. Each fit then runs in a fresh
Python subprocess, so its memory figure is its own: peak RSS is ``resource.getrusage(RUSAGE_SELF).ru_maxrss``
(the process high-water mark, which includes the interpreter, torch and the loaded vectors), and the baseline
RSS just before ``fit`` is recorded too, so ``peak - baseline`` is what fitting itself added. Wall and CPU
(user + system) seconds of ``fit`` alone are timed. On a shared machine wall time depends on load; the load
average at the start of each run is recorded beside it.

Run: ``python benchmarks/maintained/bench_flow_fit.py`` (WHITEVEC_DATA must point at the
data). Writes benchmarks/results/flow_fit.json and flow_fit.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common
from benchmarks.common.machine import machine_facts
from benchmarks.common.runs import RESULTS

MODELS = ("all-MiniLM-L6-v2", "all-mpnet-base-v2")
POOLING = "first-last-avg"

_CHILD = r"""
import json, os, resource, sys, time
import numpy as np
import torch
from whitevec.transforms import Whitening
from whitevec.transforms.flow import Flow
X = np.load(sys.argv[1])
method = sys.argv[2]
est = Flow(show_progress=False) if method == "flow" else Whitening()
def high_water_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
# Imports peak above what a fit adds (ru_maxrss can never be reset): reset the high-water mark (Linux 4.0+) so
# the peak read after the fit is the fit's own.
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
except OSError:
    pass
base = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
load = os.getloadavg()[0]
t0, c0 = time.perf_counter(), time.process_time()
est.fit(X)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
Z = est.transform(X)
peak = high_water_kib()
out = {"wall_s": wall, "cpu_s": cpu, "rss_before_fit_mib": base / 1024, "peak_rss_mib": peak / 1024,
       "load_avg_1min": load, "torch_threads": torch.get_num_threads(), "finite": bool(np.isfinite(Z).all())}
if method == "flow":
    out.update(params={k: est.get_params()[k] for k in ("levels", "depth", "width", "coupling", "lr",
                                                        "max_steps", "batch_size", "mixing_init")},
               steps=est.n_steps_, best_step=est.best_step_, val_bits_per_dim=est.val_bits_per_dim_,
               latent_std=float(Z.std()))
print(json.dumps(out))
"""


def _vectors(model: str) -> np.ndarray:
    from whitevec.datasets import load_sts_task
    from whitevec.encoders.transformer import Encoder

    sentences = load_sts_task("stsb").sentences("target")
    return Encoder(model=model, pooling=POOLING).encode(sentences, show_progress=False)


def _run(path: Path, method: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), method], check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    rows: list[dict[str, Any]] = []
    load_before = " ".join(f"{v:.2f}" for v in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        for model in MODELS:
            X = _vectors(model)
            path = Path(tmp) / f"{model}.npy"
            np.save(path, X)
            for method in ("whitening", "flow"):
                result = _run(path, method)
                rows.append(
                    {
                        "model": model,
                        "pooling": POOLING,
                        "n": int(X.shape[0]),
                        "dim": int(X.shape[1]),
                        "method": method,
                        **result,
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    facts = machine_facts()
    facts["omp_num_threads"] = os.environ.get("OMP_NUM_THREADS")
    facts["load_before"] = load_before
    flow_run = next(r for r in rows if r["method"] == "flow")  # the same defaults for every model
    flow_params = ", ".join(f"{k} {v}" for k, v in flow_run["params"].items())
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "flow_fit.json").write_text(json.dumps({"machine": facts, "runs": rows}, indent=2) + "\n")
    lines = [
        "# Flow vs Whitening: fit time and peak memory (STS-B target vectors, first-last-avg)",
        "",
        f"{facts['date']}; {facts['cpu']}; {facts['cores']} cores; torch {facts['versions']['torch']}; "
        f"OMP_NUM_THREADS={facts['omp_num_threads']}; load average before {facts['load_before']}. Flow with "
        f"its default parameters ({flow_params}). Peak RSS is the fitting subprocess's high-water mark (VmHWM, "
        "reset just before the fit), including interpreter, torch and the vectors; 'added' is peak minus RSS "
        "before fit.",
        "",
        "| model | n x d | method | fit wall s | fit CPU s | peak RSS MiB | added MiB | load avg |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['n']} x {r['dim']} | {r['method']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | "
            f"{r['peak_rss_mib']:.0f} | {r['peak_rss_mib'] - r['rss_before_fit_mib']:.0f} | "
            f"{r['load_avg_1min']:.1f} |"
        )
    (RESULTS / "flow_fit.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
