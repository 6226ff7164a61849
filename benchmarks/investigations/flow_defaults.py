"""What Flow's default optimisation budget buys and costs (the README's BERT-flow section).

    python benchmarks/investigations/flow_defaults.py criterion [--max-steps N ...]  # quality, any load
    python benchmarks/investigations/flow_defaults.py family [--max-steps N ...]  # quality, any load
    python benchmarks/investigations/flow_defaults.py time [--max-steps N ...]  # wall seconds: a quiet machine

``criterion``: the latent of ``Flow(seed=0)`` fitted on 6,000 rows of a correlated 16-dim Gaussian
(``N(0, I) @ A + 2``, A a seeded 16x16 normal matrix; the case tests/test_flow.py checks): the range of its
covariance diagonal, its largest off-diagonal entry and its largest |mean|.
``family``: the criterion tests/test_flow.py asks (every |cov - I| and |mean| entry below 0.1) over the family,
data seeds 0-4 (A's condition number 66, 179, 17, 28, 34) x flow seeds 0-1, one line each; one torch thread.
``time``: one default fit on 15,457 seeded synthetic 768-dim vectors (the STS-B target count; this data never
stops early, so the whole budget runs), wall and CPU seconds and the load average before it.
``--mixing-init random`` gives the earlier start (a random rotation) for any part.

An investigation of 2026-12-03, not part of the maintained suite (`make bench`). Backs docs/notes/flow-budget.md
(why Flow's default is 500 steps, 32778fa; why its linear maps start at the principal axes).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
import torch

from whitevec.transforms import Flow


def gaussian(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mixing = rng.standard_normal((16, 16))
    return rng.standard_normal((6000, 16)) @ mixing + 2


def criterion(options: dict[str, Any]) -> None:
    X = gaussian(0)
    flow = Flow(seed=0, show_progress=False, **options).fit(X)
    Z = flow.transform(X).astype(np.float64)
    cov = np.cov(Z.T)
    off = np.abs(cov - np.diag(np.diag(cov))).max()
    print(
        f"steps {flow.n_steps_}: diagonal {np.diag(cov).min():.3f}-{np.diag(cov).max():.3f}, "
        f"max off-diagonal {off:.3f}, max |mean| {np.abs(Z.mean(axis=0)).max():.3f}"
    )


def family(options: dict[str, Any]) -> None:
    torch.set_num_threads(1)  # tiny flows: a second thread only spins (tests/test_flow.py)
    worst = 0.0
    for data_seed in range(5):
        X = gaussian(data_seed)
        for flow_seed in (0, 1):
            flow = Flow(seed=flow_seed, show_progress=False, **options).fit(X)
            Z = flow.transform(X).astype(np.float64)
            cov, mean = np.abs(np.cov(Z.T) - np.eye(16)).max(), np.abs(Z.mean(axis=0)).max()
            worst = max(worst, cov, mean)
            print(
                f"data seed {data_seed}, flow seed {flow_seed}: max |cov - I| {cov:.3f}, max |mean| {mean:.3f}, "
                f"steps {flow.n_steps_} (best {flow.best_step_}), held-out bits/dim {flow.val_bits_per_dim_:.4f}",
                flush=True,
            )
    print(f"largest over the family: {worst:.3f} ({'meets' if worst < 0.1 else 'misses'} the 0.1 criterion)")


def timing(options: dict[str, Any]) -> None:
    rng = np.random.default_rng(0)
    mixing = rng.standard_normal((768, 768)).astype(np.float32) / 28
    X = (rng.standard_normal((15457, 768)).astype(np.float32) @ mixing + 0.5).astype(np.float32)
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    flow = Flow(seed=0, show_progress=False, **options).fit(X)
    print(
        f"load before {load:.2f}; fit wall {time.perf_counter() - wall:.1f} s, "
        f"cpu {time.process_time() - cpu:.1f} s, steps {flow.n_steps_}, stopped early {flow.stopped_early_}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("criterion", "family", "time"))
    parser.add_argument("--max-steps", type=int, nargs="*", default=[None])
    parser.add_argument("--mixing-init", choices=("pca", "random"), default=None, help="default: Flow's")
    args = parser.parse_args()
    run = {"criterion": criterion, "family": family, "time": timing}[args.part]
    for steps in args.max_steps:
        options: dict[str, Any] = {} if steps is None else {"max_steps": steps}
        if args.mixing_init is not None:
            options["mixing_init"] = args.mixing_init
        run(options)


if __name__ == "__main__":
    main()
