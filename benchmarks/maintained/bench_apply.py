"""Applying transforms: vectors/s of whitevec's transform() vs the reference numpy expression.

Data: the synthetic anisotropic float32 vectors of bench_whitening_fit.py (d=768). The whitening is fitted on
the first --fit-n rows; --n rows are then transformed (median of --reps passes). The reference is what a user
writes with the same fitted parameters: ``(X - mu) @ W`` on float32 arrays. whitevec's default transform works in
float64 (then float32 output); ``precision="float32"`` keeps float32 arithmetic. Flow (``make_transform("flow")``,
trained for --flow-epochs only: its apply cost does not depend on how well it trained) has no numpy peer; its
rate is shown beside whitening. Every system runs in a fresh subprocess (peak memory includes the data).

Run: `python benchmarks/maintained/bench_apply.py [--n 200000] [--reps 5]`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import anisotropic_rows as all_rows
from benchmarks.common.runs import THREADS, emit, median, ratio, run_worker, save_result

SYSTEMS = ["numpy-reference", "whitevec", "whitevec-f32", "whitevec-flow"]


def worker(system: str, n: int, fit_n: int, reps: int, flow_epochs: float) -> dict[str, Any]:
    X = all_rows(n)
    fit_rows = X[:fit_n]
    if system == "whitevec-flow":
        import torch

        torch.set_num_threads(THREADS)
        from whitevec.transforms import make_transform

        transform = make_transform("flow")
        assert transform is not None
        transform.set_params(epochs=flow_epochs, show_progress=False)
        transform.fit(fit_rows)
        apply = transform.transform
    else:
        from whitevec.transforms import Whitening

        w = Whitening(precision="float32" if system == "whitevec-f32" else "float64").fit(fit_rows)
        if system == "numpy-reference":
            mu, W = w.mean_.astype(np.float32), w.components_.astype(np.float32)

            def apply(X: np.ndarray) -> np.ndarray:
                out: np.ndarray = (X - mu) @ W
                return out
        else:
            apply = w.transform
    apply(X[:1000])
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        apply(X)
        seconds.append(time.perf_counter() - started)
    return {"system": system, "n": n, "seconds": seconds, "vectors_per_s": n / median(seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--system", default="whitevec")
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--fit-n", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--flow-epochs", type=float, default=0.2)
    args = parser.parse_args()
    if args.worker:
        emit(worker(args.system, args.n, args.fit_n, args.reps, args.flow_epochs))
        return
    script = Path(__file__).resolve()
    runs = {}
    for system in SYSTEMS:
        argv = ["--system", system, "--n", str(args.n), "--fit-n", str(args.fit_n), "--reps", str(args.reps),
                "--flow-epochs", str(args.flow_epochs)]  # fmt: skip
        runs[system] = run_worker(script, argv)
        print(runs[system], flush=True)
    peer = runs["numpy-reference"].get("vectors_per_s", float("nan"))
    ratios = {s: ratio(runs[s].get("vectors_per_s", float("nan")), peer) for s in SYSTEMS[1:]}
    path = save_result("apply", {"n": args.n, "d": 768, "reps": args.reps, "runs": runs, "ratio_vs_numpy": ratios})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
