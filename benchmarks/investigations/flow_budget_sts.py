"""STS of the flow against its training budget: does a flow that fits its data better score lower on a
fine-tuned model's own pooling? (The README reads the converged flow's loss on MPNet last-avg, 80.22 with the
old one-epoch default against 79.81 now, as "a flow that has moved less from its start scores better"; this
measures it.)

For each ``max_steps`` (everything else at Flow's defaults, early stopping included), a flow is fitted per task
on the task's target sentences (as docs/results/sts.md) and scored; printed: the five-task wmean average, the
steps it ran (mean over tasks) and its held-out bits/dim at the end (mean over tasks; lower = a closer fit to
N(0, I)).

    python benchmarks/investigations/flow_budget_sts.py [--model all-mpnet-base-v2] [--pooling last-avg]
        [--steps 50,100,...] [--mixing-init pca|random] [--tasks stsb,sts12,...]

``--mixing-init random`` fits the flows from the earlier start (random rotations) instead of Flow's default.

An investigation of 2026-12-04, not part of the maintained suite (`make bench`). Backs docs/notes/flow-budget.md
(STS of MPNet last-avg falls as the flow trains longer); its output is benchmarks/results/flow_budget_sts.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.sts import STS_TASKS

from whitevec.datasets import load_sts_task
from whitevec.encoders.transformer import Encoder
from whitevec.evaluation.sts import evaluate_sts
from whitevec.transforms import Flow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="all-mpnet-base-v2")
    parser.add_argument("--pooling", default="last-avg")
    parser.add_argument("--steps", default="50,100,200,500,1000,2000")
    parser.add_argument("--mixing-init", choices=("pca", "random"), default=None, help="default: Flow's")
    parser.add_argument("--tasks", default=",".join(STS_TASKS))
    args = parser.parse_args()
    names = args.tasks.split(",")
    tasks = [load_sts_task(name) for name in names]
    encoder = Encoder(args.model, pooling=args.pooling)
    init = {} if args.mixing_init is None else {"mixing_init": args.mixing_init}
    print(f"{args.model} {args.pooling} {init}; load average before: {os.getloadavg()[0]:.2f}\n")
    print("| max_steps | " + " | ".join(names) + " | average | steps run (mean) | held-out bits/dim (mean) |")
    print("|---:|" + "---:|" * (len(names) + 3))
    report = evaluate_sts(encoder, tasks, ["none"], "target", show_progress=False)
    raw = [s.wmean for s in report.scores]
    print(f"| raw | {' | '.join(f'{x:.2f}' for x in raw)} | {sum(raw) / len(raw):.2f} | — | — |", flush=True)
    for max_steps in [int(s) for s in args.steps.split(",")]:
        flows: list[Flow] = []

        def make(spec: str, max_steps: int = max_steps, flows: list[Flow] = flows) -> Any:
            flow = Flow(max_steps=max_steps, seed=0, show_progress=False, **init)
            flows.append(flow)
            return flow

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scores = [s.wmean for s in evaluate_sts(encoder, tasks, ["flow"], "target", False, make=make).scores]
        fitted = [f for f in flows if hasattr(f, "n_steps_")]  # evaluate_sts also makes one to check the spec
        steps = sum(f.n_steps_ for f in fitted) / len(fitted)
        bits = sum(float(f.val_bits_per_dim_) for f in fitted) / len(fitted)
        cells = " | ".join(f"{x:.2f}" for x in scores)
        print(
            f"| {max_steps} | {cells} | {sum(scores) / len(scores):.2f} | {steps:.0f} | {bits:.3f} |", flush=True
        )
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
