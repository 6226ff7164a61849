"""Regenerate docs/results/sts.md (and .json): STS Spearman x 100 for models x poolings x transforms.

Every transform is fitted on the "target" sentences (all sentences of the evaluated task, all splits), per task,
the protocol of the BERT-whitening and BERT-flow papers; each transform is compared with the same pooling's raw
vectors (``none``).
Run: `make results-sts` or `python benchmarks/maintained/results_sts.py [--models ...] [--transforms ...]`.
Needs WHITEVEC_DATA (the shared data) and all-mpnet-base-v2 fetched (shared/models/fetch-all-mpnet-base-v2).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import facts_markdown, machine_facts, results_header
from benchmarks.common.sts import sts_table

from whitevec.datasets import load_sts_task
from whitevec.encoders.transformer import Encoder
from whitevec.evaluation.sts import StsScore, SubsetScore, evaluate_sts_poolings
from whitevec.transforms import Flow
from whitevec.utils.io import atomic_path

MODELS = ["all-MiniLM-L6-v2", "all-mpnet-base-v2"]
POOLINGS = ["cls", "embeddings-avg", "last-avg", "first-last-avg"]
TRANSFORMS = ["none", "whitening", "whitening-64", "whitening-128", "whitening-256", "flow"]
TASKS = ["stsb", "sts12", "sts13", "sts14", "sts15"]
OUT = Path(__file__).resolve().parents[2] / "docs" / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--poolings", default=",".join(POOLINGS))
    parser.add_argument("--transforms", default=",".join(TRANSFORMS))
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--reuse",
        type=Path,
        default=None,
        help="an earlier sts.json: models not in --models keep their rows from it",
    )
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    loaded = [load_sts_task(name) for name in tasks]
    all_scores: list[StsScore] = []
    runs = []
    started = time.perf_counter()
    for model in args.models.split(","):
        t0 = time.perf_counter()
        encoder = Encoder(model, pooling="last-avg")
        report = evaluate_sts_poolings(
            encoder, args.poolings.split(","), loaded, args.transforms.split(","), "target", show_progress=False
        )
        all_scores += report.scores
        runs.append({"model": report.model, "seconds": round(time.perf_counter() - t0, 1)})
        print(f"{model}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    reused_lines = []
    if args.reuse is not None:
        # Rows this run did not measure (another model, pooling or transform) are kept from the earlier run.
        earlier = json.loads(args.reuse.read_text())
        done = {(s.model, s.pooling, s.transform) for s in all_scores}
        kept: dict[str, set[str]] = {}
        for row in earlier["scores"]:
            if (row["model"], row["pooling"], row["transform"]) not in done:
                all_scores.append(StsScore(**{**row, "subsets": [SubsetScore(**x) for x in row["subsets"]]}))
                kept.setdefault(row["model"], set()).add(row["transform"])
        for run in earlier["runs"]:
            model = run["model"]["model"]
            if model in kept:
                # A run the earlier file had itself kept says when and where it was measured; keep that.
                measured = {"reused_from": earlier["machine"]["date"], "machine": earlier["machine"]}
                runs.append({**run, **{key: run.get(key, value) for key, value in measured.items()}})
                reused_lines.append(
                    f"Rows of {model} with transforms {', '.join(sorted(kept[model]))} come from the earlier run "
                    f"of {earlier['machine']['date']}, where this run did not measure them."
                )
        reused_lines = list(dict.fromkeys(reused_lines))  # one line per model, however many runs it kept
        order = {
            key: i for i, key in enumerate((r["model"], r["pooling"], r["transform"]) for r in earlier["scores"])
        }
        all_scores.sort(key=lambda s: order.get((s.model, s.pooling, s.transform), len(order)))
    facts = machine_facts("scikit-learn", "scipy")
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": facts,
        "protocol": "fit on target (all sentences of the task, all splits, de-duplicated), per task",
        "runs": runs,
        "scores": [asdict(s) for s in all_scores],
    }
    with atomic_path(args.out / "sts.json") as tmp:
        tmp.write_text(json.dumps(payload, indent=1) + "\n")
    measured = [facts, *(run["machine"] for run in runs if "machine" in run)]
    lines = [
        "# STS results",
        "",
        results_header("`make results-sts` (`python benchmarks/maintained/results_sts.py`)", *measured),
        "",
        "Spearman x 100 between cosine similarity and gold scores. Each transform is fitted per task on",
        "that task's *target* sentences (every sentence of the task, all splits, de-duplicated; STS-B:",
        "train+dev+test),",
        "as in BERT-flow and BERT-whitening. STS-B is scored on its test split (one subset, so all = wmean). For",
        "STS12-15 `all` concatenates the subsets into one correlation and `wmean` weights per-subset correlations",
        "by size. `whitening-K` keeps the first K whitened dimensions; `flow` is `whitevec.transforms.Flow` with",
        "its defaults (Glow, 2 levels x depth 3, width 32, additive coupling, Adam 1e-3, 500 steps of 64 rows",
        "with warm-up and cosine decay, early stopping on held-out bits/dim, seed 0, the first invertible linear",
        f"map started at `mixing_init={Flow().mixing_init!r}`).",
        "`Δ avg vs none` is the change of the 5-task wmean average against the same pooling without a transform.",
        "",
        facts_markdown(facts) + f" Total time {time.perf_counter() - started:.0f} s.",
        *reused_lines,
        "",
        *sts_table(all_scores, tasks),
        "",
    ]
    with atomic_path(args.out / "sts.md") as tmp:
        tmp.write_text("\n".join(lines))
    print(f"wrote {args.out / 'sts.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
