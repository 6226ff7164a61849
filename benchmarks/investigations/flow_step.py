"""Flow internals, timed and checked: one training step at 768 dims, and how exact applying a fitted flow is.

1. Step time: Glow(768, levels 2, depth 3, width 32, additive, LU mixing) with Adam (whitevec's parameter
   groups) on batches of 64 rows of correlated Gaussian data; 5 warm-up steps, then the median ms per step over
   three blocks of 50, and the loss after steps 55 and 205 (same seed, so two code versions can be compared).
2. Apply accuracy: a short Flow fit on 5,000 rows (d = 768), then the latent of 4,000 other rows three ways:
   ``transform()`` (float32), the training-time forward (factored float32 path, grad enabled), and a float64
   pass of the same module; the max abs error of the first two against the third.

Run: `python benchmarks/investigations/flow_step.py [--out FILE]`; with PYTHONPATH pointing at another
checkout's src/ it measures that version. Output: JSON on stdout (and in --out).

An investigation of 2026-12-02, not part of the maintained suite (`make bench`). Backs docs/notes/flow-budget.md
(what a training step costs); its outputs are benchmarks/results/flow_step.json and flow_step_before_9dcd1d4.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from whitevec.transforms.flow import Flow, bits_per_dim, param_groups
from whitevec.transforms.flow_layers import Glow

D = 768


def correlated(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mix = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    out: np.ndarray = (rng.standard_normal((n, D)).astype(np.float32) @ mix + np.float32(0.3)).astype(np.float32)
    return out


def step_time() -> dict[str, object]:
    torch.manual_seed(0)
    module = Glow(D, 2, 3, 32, 1, False, "lu", torch.Generator().manual_seed(0)).float()
    x = torch.from_numpy(correlated(14_000, 1))
    module.data_init(x[:1000])
    optimizer = torch.optim.Adam(param_groups(module, 1e-3), lr=1e-3, foreach=True)
    losses: dict[int, float] = {}
    step = 0

    def run(k: int) -> float:
        nonlocal step
        started = time.perf_counter()
        for _ in range(k):
            batch = x[torch.randint(0, len(x), (64,))]
            loss = bits_per_dim(module.log_prob(batch), D)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            if step in (55, 205):
                losses[step] = round(float(loss.detach()), 4)
        return (time.perf_counter() - started) / k * 1000

    run(5)
    per_block = [run(50) for _ in range(4)]
    return {"ms_per_step_median": round(statistics.median(per_block), 1), "ms_per_step_blocks": per_block,
            "loss_at_step": losses}  # fmt: skip


def apply_accuracy() -> dict[str, float]:
    X = correlated(9_000, 2)
    flow = Flow(epochs=0.05, show_progress=False).fit(X[:5000])
    rows = X[5000:]
    applied = flow.transform(rows)
    with torch.enable_grad():
        factored = flow.module_(torch.from_numpy(rows.copy()))[0].detach().numpy()
    exact = copy.deepcopy(flow.module_).double()
    with torch.no_grad():
        truth = exact(torch.from_numpy(rows).double())[0].numpy()
    return {"transform_max_abs_error": float(np.abs(applied - truth).max()),
            "factored_max_abs_error": float(np.abs(factored - truth).max()),
            "latent_max_abs": float(np.abs(truth).max())}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(2)
    result = {"step": step_time(), "apply": apply_accuracy()}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
