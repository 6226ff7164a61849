"""What Flow's default optimisation budget buys and costs (the README's BERT-flow section).

    python benchmarks/investigations/flow_defaults.py criterion [--max-steps N ...]  # quality, any load
    python benchmarks/investigations/flow_defaults.py time [--max-steps N ...]  # wall seconds: a quiet machine

``criterion``: the latent of ``Flow(seed=0)`` fitted on 6,000 rows of a correlated 16-dim Gaussian
(``N(0, I) @ A + 2``, A a seeded 16x16 normal matrix; the case tests/test_flow.py checks): the range of its
covariance diagonal, its largest off-diagonal entry and its largest |mean|.
``time``: one default fit on 15,457 seeded synthetic 768-dim vectors (the STS-B target count; this data never
stops early, so the whole budget runs), wall and CPU seconds and the load average before it.

An investigation, not part of the maintained suite (`make bench`). Backs docs/notes/flow-budget.md (why Flow's
default is 500 steps, 32778fa).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from whitevec.transforms import Flow


def criterion(max_steps: int | None) -> None:
    rng = np.random.default_rng(0)
    mixing = rng.standard_normal((16, 16))
    X = rng.standard_normal((6000, 16)) @ mixing + 2
    options = {} if max_steps is None else {"max_steps": max_steps}
    flow = Flow(seed=0, show_progress=False, **options).fit(X)
    Z = flow.transform(X).astype(np.float64)
    cov = np.cov(Z.T)
    off = np.abs(cov - np.diag(np.diag(cov))).max()
    print(
        f"steps {flow.n_steps_}: diagonal {np.diag(cov).min():.3f}-{np.diag(cov).max():.3f}, "
        f"max off-diagonal {off:.3f}, max |mean| {np.abs(Z.mean(axis=0)).max():.3f}"
    )


def timing(max_steps: int | None) -> None:
    rng = np.random.default_rng(0)
    mixing = rng.standard_normal((768, 768)).astype(np.float32) / 28
    X = (rng.standard_normal((15457, 768)).astype(np.float32) @ mixing + 0.5).astype(np.float32)
    load = os.getloadavg()[0]
    options = {} if max_steps is None else {"max_steps": max_steps}
    wall, cpu = time.perf_counter(), time.process_time()
    flow = Flow(seed=0, show_progress=False, **options).fit(X)
    print(
        f"load before {load:.2f}; fit wall {time.perf_counter() - wall:.1f} s, "
        f"cpu {time.process_time() - cpu:.1f} s, steps {flow.n_steps_}, stopped early {flow.stopped_early_}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", choices=("criterion", "time"))
    parser.add_argument("--max-steps", type=int, nargs="*", default=[None])
    args = parser.parse_args()
    for steps in args.max_steps:
        (criterion if args.part == "criterion" else timing)(steps)


if __name__ == "__main__":
    main()
