"""Regenerate docs/results/sts-token-weights.md (and .json): raw, whitening, Zipfian whitening, SIF, uSIF and flow.

STS Spearman x 100 (wmean) on the five STS tasks, per model and pooling. Token frequencies are counted with each
model's own tokenizer on the union of every sentence of the five tasks (web-scale counts do worse here:
docs/notes/zipf-reasons.md).
Every transform is fitted per task on that task's target sentences (all splits), as in results_sts.py.

Methods (a pooling that reads one token, cls, takes no token weights: only the sentence-level rows run there):

* ``raw``: the pooling's vectors; ``whitening``: BERT-whitening; ``flow``: Flow() with its defaults;
* ``zipfian``: Zipfian whitening (Yokoi et al. 2024, Algorithm 1): p(w)-weighted mean and covariance of the
  token vectors the pooling averages, whitening then the uniform mean over non-special tokens;
* ``zipfian-sent``: sentence vectors whitened with Whitening.fit(sample_weight=mean p(w) of each sentence);
* ``sif``: SIF weights a/(a+p(w)), a=1e-3, then the first uncentred principal component removed (``sif-pc``);
* ``usif``: uSIF weights with the closed-form a, then soft removal of 5 components (``usif-pc``).

Run: `python benchmarks/maintained/results_token_weights.py [--models ...] [--poolings ...] [--methods ...]
[--skip-flow]`.
Rows already in the output JSON that this run does not measure are kept (``--fresh`` drops them), so runs can
be split by model, pooling or method.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import facts_markdown, machine_facts, results_header
from benchmarks.common.sts import STS_TASKS, run_method, sts_table, target_union

from whitevec.datasets import load_sts_task
from whitevec.encoders.token_weights import (
    TokenWeighting,
    count_frequencies,
)
from whitevec.encoders.transformer import Encoder
from whitevec.evaluation.sts import StsScore, SubsetScore
from whitevec.utils.io import atomic_path

MODELS = ["all-MiniLM-L6-v2", "all-mpnet-base-v2", "m3e-small"]
POOLINGS = ["embeddings-avg", "cls", "last-avg"]
# m3e-small is a Chinese encoder: only its last-avg runs, on the same (English) tasks.
POOLINGS_OF = {"m3e-small": ["last-avg"]}
METHODS = ["raw", "whitening", "zipfian", "zipfian-sent", "sif", "usif", "flow"]
TOKEN_METHODS = {"zipfian", "sif", "usif"}  # need the token mean (not cls)
OUT = Path(__file__).resolve().parents[2] / "docs" / "results"
STEM = "sts-token-weights"


def delta_table(scores: list[StsScore], tasks: list[str]) -> list[str]:
    """Five-task wmean average per (model, pooling) and method, with the change against uniform whitening."""
    avg: dict[tuple[str, str], dict[str, float]] = {}
    grouped: dict[tuple[str, str, str], list[float]] = {}
    for s in scores:
        grouped.setdefault((s.model, s.pooling, s.transform), []).append(s.wmean)
    for (model, pooling, method), values in grouped.items():
        if len(values) == len(tasks):
            avg.setdefault((model, pooling), {})[method] = sum(values) / len(values)
    present = {m for row in avg.values() for m in row}
    methods = [m for m in ["none", *METHODS[1:]] if m in present]
    head = ["model", "pooling", *[f"{m} (Δ whitening)" if m not in ("none", "whitening") else m for m in methods]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (model, pooling), row in avg.items():
        cells = [model, pooling]
        base = row.get("whitening")
        for m in methods:
            if m not in row:
                cells.append("—")
            elif m in ("none", "whitening") or base is None:
                cells.append(f"{row[m]:.2f}")
            else:
                cells.append(f"{row[m]:.2f} ({row[m] - base:+.2f})")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--poolings", default=None, help=f"default {','.join(POOLINGS)} (m3e-small: last-avg)")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--skip-flow", action="store_true", help="leave out the flow rows (slow)")
    parser.add_argument("--tasks", default=",".join(STS_TASKS))
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--fresh", action="store_true", help="drop the rows of earlier runs in the output JSON")
    parser.add_argument(
        "--render-only", action="store_true", help="measure nothing: rewrite the .md from the JSON"
    )
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    methods = [m for m in args.methods.split(",") if not (args.skip_flow and m == "flow")]
    if "raw" not in methods:
        methods.insert(0, "raw")  # the tables' baseline; cheap (cached vectors)
    unknown = set(methods) - set(METHODS)
    if unknown:
        parser.error(f"unknown methods {sorted(unknown)}; valid: {', '.join(METHODS)}")
    loaded = [] if args.render_only else [load_sts_task(name) for name in tasks]
    union = target_union(loaded)
    load_before = os.getloadavg()
    started = time.perf_counter()
    scores: list[StsScore] = []
    runs: list[dict[str, Any]] = []
    for model in [] if args.render_only else args.models.split(","):
        poolings = args.poolings.split(",") if args.poolings else POOLINGS_OF.get(model, POOLINGS)
        t0 = time.perf_counter()
        encoder = Encoder(model, pooling="last-avg")
        frequencies = count_frequencies(
            encoder.tokenizer,
            union,
            encoder.max_length,
            model=model,
            model_fingerprint=encoder.model_fingerprint,
            source=f"union of the target sentences of {', '.join(tasks)}",
        )
        encoder.encode_poolings(union, poolings, show_progress=False)  # one forward pass fills every cache
        mean_poolings = [p for p in poolings if p not in ("cls", "pooler")]
        for scheme in ("sif", "usif", "zipf"):  # likewise once per token weighting, for every mean pooling
            if mean_poolings and (scheme if scheme != "zipf" else "zipfian") in methods:
                weighted = encoder.with_pooling(mean_poolings[0]).with_token_weights(
                    TokenWeighting(scheme, frequencies)
                )
                weighted.encode_poolings(union, mean_poolings, show_progress=False)
        for pooling in poolings:
            each = encoder.with_pooling(pooling)
            for method in methods:
                if method in TOKEN_METHODS and pooling in ("cls", "pooler"):
                    continue
                m0 = time.perf_counter()
                for task in loaded:
                    scores.append(run_method(each, method, task, frequencies))
                print(f"{model} {pooling} {method}: {time.perf_counter() - m0:.0f} s", file=sys.stderr)
        runs.append(
            {
                "model": encoder.describe(),
                "poolings": poolings,
                "methods": methods,
                "frequencies": TokenWeighting("sif", frequencies).describe()["frequencies"],
                "usif_a": TokenWeighting("usif", frequencies).parameter,
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
        encoder.close()
    load_after = os.getloadavg()
    facts = machine_facts("scikit-learn", "scipy")
    command = "python benchmarks/maintained/results_token_weights.py " + " ".join(sys.argv[1:])
    args.out.mkdir(parents=True, exist_ok=True)
    json_path = args.out / f"{STEM}.json"
    earlier_runs: list[dict[str, Any]] = []
    if json_path.exists() and not args.fresh:
        earlier = json.loads(json_path.read_text())
        measured = {(s.model, s.pooling, s.transform, s.task) for s in scores}
        for row in earlier["scores"]:
            if (row["model"], row["pooling"], row["transform"], row["task"]) not in measured:
                scores.append(StsScore(**{**row, "subsets": [SubsetScore(**x) for x in row["subsets"]]}))
        earlier_runs = earlier.get("runs", [])
    if args.render_only:
        tasks = [t for t in STS_TASKS if any(s.task == t for s in scores)]
    order = {m: i for i, m in enumerate(["none", *METHODS[1:]])}
    scores.sort(
        key=lambda s: (
            s.model,
            POOLINGS.index(s.pooling) if s.pooling in POOLINGS else 9,
            order.get(s.transform, 99),
            tasks.index(s.task) if s.task in tasks else 9,
        )
    )
    this_run = {
        "command": command,
        "machine": facts,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "seconds": round(time.perf_counter() - started, 1),
        "models": runs,
    }
    payload = {
        "protocol": "fit on target (all sentences of the task, all splits, de-duplicated), per task; token "
        "frequencies counted with the model's tokenizer on the union of the target sentences of all tasks",
        "runs": earlier_runs if args.render_only else [*earlier_runs, this_run],
        "scores": [asdict(s) for s in scores],
    }
    with atomic_path(json_path) as tmp:
        tmp.write_text(json.dumps(payload, indent=1) + "\n")
    run_lines = []
    for run in payload["runs"]:
        load = " / ".join(f"{x:.2f}" for x in run["load_average_before"])
        run_lines.append(
            f"- `{run['command'].strip()}`: {facts_markdown(run['machine'])} Load average before "
            f"{load}; {run['seconds']:.0f} s."
        )
    lines = [
        "# STS with token-frequency weights: Zipfian whitening, SIF, uSIF",
        "",
        results_header(
            "`python benchmarks/maintained/results_token_weights.py` (the runs listed below)",
            *(run["machine"] for run in payload["runs"]),
        ),
        "",
        "Spearman x 100 between cosine similarity and gold scores (wmean per task, as in [sts.md](sts.md)). Every",
        "transform is fitted per task on that task's target sentences (all splits, de-duplicated).",
        "Token frequencies p(w) are counted with each model's own tokenizer (special tokens left out) on the",
        f"union of all sentences of the tasks run ({', '.join(tasks)}), so the frequencies come from the",
        "evaluation text itself (unlabelled; the papers use Wikipedia-scale counts, which do worse here:",
        "[zipf-reasons.md](../notes/zipf-reasons.md)).",
        "",
        "- `none`: raw pooling; `whitening`: BERT-whitening; `flow`: `Flow()` with its defaults.",
        "- `zipfian`: Zipfian whitening (Yokoi et al. 2024, Algorithm 1): p(w)-weighted mean and covariance of",
        "  the token vectors the pooling averages (contextual ones for last-avg: every occurrence of a type",
        "  shares its p(w)), tokens whitened, then the uniform mean over non-special tokens.",
        "- `zipfian-sent`: sentence vectors whitened with `Whitening.fit(sample_weight=w)`, w the mean p(w) of",
        "  each sentence's tokens (whitevec's sentence-level variant; the only Zipfian row for cls).",
        "- `sif`: SIF token weights a/(a+p(w)), a = 1e-3, then the first uncentred principal component removed.",
        "- `usif`: uSIF token weights a/(a/2+p(w)) with a in closed form, then soft removal of 5 components.",
        "- cls reads one token, so token weights do not apply: its `zipfian`, `sif`, `usif` rows are absent.",
        "- m3e-small is a Chinese encoder; it runs here on the same English tasks (last-avg only).",
        "",
        "Runs:",
        *run_lines,
        "",
        f"## {len(tasks)}-task average (wmean), change against uniform whitening",
        "",
        *delta_table(scores, tasks),
        "",
        "## Per task",
        "",
        *sts_table(scores, tasks),
        "",
    ]
    with atomic_path(args.out / f"{STEM}.md") as tmp:
        tmp.write_text("\n".join(lines))
    print(f"wrote {args.out / (STEM + '.md')}", file=sys.stderr)


if __name__ == "__main__":
    main()
