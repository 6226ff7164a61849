"""The page of benchmarks/maintained/results_static.py: docs/results/static.md rendered from static.json alone,
measuring nothing (the hand-written notes below the page's notes mark are kept).

    python benchmarks/pages/static.py [--out docs/results]

Every statement about the figures is computed from the rows at render time: the issue's targets (met or not),
where a static encoder with an isotropy transform comes close to the model and where it does not, ``corpus``
against ``tokens``. The names (models, tasks, methods, systems) are the benchmark's too:
benchmarks/common/pages.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import facts_markdown, results_header
from benchmarks.common.pages import (
    CHINESE,
    CONTEXTUAL,
    CORPUS_OF,
    ENGLISH,
    METHODS,
    MODEL2VEC,
    MODELS,
    NOTES_MARK,
    kept_notes,
)
from benchmarks.common.sts import STS_TASKS, ZH_TASKS, sts_table

from whitevec.utils.io import atomic_path

OUT = Path(__file__).resolve().parents[2] / "docs" / "results"
STEM = "static"


def averages(
    rows: list[dict[str, Any]], tasks: list[str], key: str = "wmean"
) -> dict[tuple[str, str, str], float]:
    """(model, system, transform) -> the plain mean over ``tasks`` of each task's ``key`` (complete rows only)."""
    per: dict[tuple[str, str, str], dict[str, float]] = {}
    for row in rows:
        per.setdefault((row["model"], row["pooling"], row["transform"]), {})[row["task"]] = row[key]
    return {k: sum(v[t] for t in tasks) / len(tasks) for k, v in per.items() if all(t in v for t in tasks)}


def task_scores(rows: list[dict[str, Any]], model: str, system: str, transform: str) -> dict[str, float]:
    return {
        r["task"]: r["wmean"]
        for r in rows
        if (r["model"], r["pooling"], r["transform"]) == (model, system, transform)
    }


def is_whitevec(system: str) -> bool:
    return system.split("/")[0] in METHODS


def reads_eval_text(system: str) -> bool:
    """Whether a whitevec table read the evaluations' own text: the ``corpus`` passes over it, or token counts
    made on it (``sif``, ``usif``). Transforms read it in every row (fitted on the target sentences)."""
    method, weights = system.split("/")
    return CORPUS_OF[method] == "eval" and (method != "tokens" or weights in ("sif", "usif"))


POOLS = {"all": "every whitevec row", "blind": "the tables that read no evaluation text"}


def chosen(quality: dict[str, Any], model: str, pool: str = "all") -> tuple[str, str] | None:
    """The whitevec configuration with the best mean score on the choice tasks (STS-B dev; Chinese valid), among
    every whitevec row (``pool="all"``) or those whose table read no evaluation text (``"blind"``)."""
    names = sorted({r["task"] for r in quality["choice"] if r["model"] == model})
    means = averages([r for r in quality["choice"] if r["model"] == model], names)
    mine = {k: v for k, v in means.items() if is_whitevec(k[1]) and (pool == "all" or not reads_eval_text(k[1]))}
    if not mine:
        return None
    best = max(mine, key=lambda k: mine[k])
    return best[1], best[2]


def cranfield_of(quality: dict[str, Any], model: str, system: str, transform: str) -> float | None:
    for row in quality["cranfield"]:
        if (row["model"], row["system"], row["transform"]) == (model, system, transform):
            return float(row["ndcg_10"])
    return None


def fmt(value: float | None, sign: bool = False) -> str:
    return "—" if value is None else (f"{value:+.2f}" if sign else f"{value:.2f}")


def summary_rows(quality: dict[str, Any], model: str) -> list[tuple[str, str, str]]:
    """(label, system, transform): the model, the peer raw, the peer's best transform, whitevec's two choices and
    whitevec's best in hindsight (by the test average: not a fair choice, shown for the gap)."""
    tasks = ZH_TASKS if model in CHINESE else STS_TASKS
    means = averages([r for r in quality["sts"] if r["model"] == model], tasks)
    rows = [("the model itself (contextual)", CONTEXTUAL, "none"), ("Model2Vec's distill", MODEL2VEC, "none")]
    peer = {k: v for k, v in means.items() if k[1] == MODEL2VEC and k[2] != "none"}
    if peer:
        best = max(peer, key=lambda k: peer[k])
        rows.append((f"Model2Vec's distill + {best[2]} (best in hindsight)", MODEL2VEC, best[2]))
    on = "valid" if model in CHINESE else "STS-B dev"
    for pool, what in (("all", "all rows"), ("blind", "no evaluation text in the table")):
        pick = chosen(quality, model, pool)
        if pick is not None and all(pick != row[1:] for row in rows):
            rows.append((f"whitevec {pick[0]} + {pick[1]} (chosen on {on}, {what})", *pick))
    mine = {k: v for k, v in means.items() if is_whitevec(k[1])}
    if mine:
        best = max(mine, key=lambda k: mine[k])
        rows.append((f"whitevec {best[1]} + {best[2]} (best in hindsight)", best[1], best[2]))
    return rows


def summary_table(quality: dict[str, Any], model: str) -> list[str]:
    tasks = ZH_TASKS if model in CHINESE else STS_TASKS
    rows = [r for r in quality["sts"] if r["model"] == model]
    wmean, every = averages(rows, tasks), averages(rows, tasks, "all")
    head = ["configuration", *tasks, "avg wmean", "avg all"] + (["Cranfield nDCG@10"] if model in ENGLISH else [])
    head.append("table bytes")
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for label, system, transform in summary_rows(quality, model):
        scores = task_scores(rows, model, system, transform)
        cells = [label, *(fmt(scores.get(t)) for t in tasks)]
        cells += [fmt(wmean.get((model, system, transform))), fmt(every.get((model, system, transform)))]
        if model in ENGLISH:
            cells.append(fmt(cranfield_of(quality, model, system, transform)))
        size = quality["sizes"].get(f"{model} {system}")
        cells.append("—" if size is None else f"{size['table_bytes']:,}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def target_checks(quality: dict[str, Any], model: str, pick: tuple[str, str]) -> list[tuple[str, bool]]:
    """(measured, met) of the three quality targets for one configuration of ``model``."""
    rows = [r for r in quality["sts"] if r["model"] == model]
    means = averages(rows, STS_TASKS)
    peer, mine = means[(model, MODEL2VEC, "none")], means[(model, *pick)]
    theirs, ours = task_scores(rows, model, MODEL2VEC, "none"), task_scores(rows, model, *pick)
    gaps = {t: ours[t] - theirs[t] for t in STS_TASKS}
    worst = min(gaps, key=lambda t: gaps[t])
    crank, cpeer = cranfield_of(quality, model, *pick), cranfield_of(quality, model, MODEL2VEC, "none")
    return [
        (f"{mine:.2f} against {peer:.2f} ({mine - peer:+.2f})", mine >= peer + 2.0),
        (f"worst: {worst} {gaps[worst]:+.2f}", gaps[worst] >= -0.5),
        (f"{fmt(crank)} against {fmt(cpeer)}", crank is not None and cpeer is not None and crank >= cpeer),
    ]


def target_lines(quality: dict[str, Any], timing: dict[str, Any] | None, model: str = ENGLISH[0]) -> list[str]:
    """The issue's targets for MiniLM: the quality ones for whitevec's configuration chosen among every row and
    among the tables that read no evaluation text, and ``corpus`` against ``tokens`` (the eval corpus beside the
    first, the held-out one beside the second); then the speed ones."""
    picks = {pool: chosen(quality, model, pool) for pool in POOLS}
    if picks["all"] is None or (model, MODEL2VEC, "none") not in averages(quality["sts"], STS_TASKS):
        return ["(the quality part has not run for both whitevec's distills and Model2Vec's)"]
    names = [
        "5-task wmean average >= Model2Vec's + 2.0",
        "no task more than 0.5 below Model2Vec's",
        "Cranfield nDCG@10 >= Model2Vec's (25.68 in the issue)",
    ]
    checks = {pool: target_checks(quality, model, pick) for pool, pick in picks.items() if pick is not None}
    head = ["target", *(f"{POOLS[pool]}: `{' + '.join(picks[pool] or ())}`" for pool in checks)]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for number, name in enumerate(names):
        cells = [f"{checks[pool][number][0]}: **{'yes' if checks[pool][number][1] else 'no'}**" for pool in checks]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    versus = {"all": "corpus", "blind": "corpus-heldout"}
    cells = [method_verdict(quality, model, versus[pool]) for pool in checks]
    lines.append("| " + " | ".join(["`corpus` against `tokens`: which wins, by how much", *cells]) + " |")
    return [*lines, "", "| target | measured | met |", "|---|---|---|", *timing_target_lines(timing)]


def method_verdict(quality: dict[str, Any], model: str, method: str) -> str:
    """Which of ``method`` and ``tokens`` wins for ``model``, by the mean difference over matched pairs."""
    gaps, cranfield = method_gaps(quality, model, method)
    if not gaps:
        return "—"
    mean = float(np.mean(gaps))
    winner = f"`{method}`" if mean > 0 else "`tokens`"
    text = f"{winner} by {abs(mean):.2f} on the STS average ({sum(g > 0 for g in gaps)} of {len(gaps)} pairs for"
    text += f" `{method}`)"
    if cranfield:
        text += f"; Cranfield {float(np.mean(cranfield)):+.2f} for `{method}`"
    return text


GOOD_ENOUGH = 0.95  # the page's yardstick: a static score within 5% of the model's own (of its magnitude)
ISOTROPY = ["whitening", "whitening-128", "sif-pc", "usif-pc", "zipfian"]


def close_enough(static: float, model: float) -> bool:
    return static >= model - (1 - GOOD_ENOUGH) * abs(model)


def verdict_table(quality: dict[str, Any], model: str) -> list[str]:
    """Per task (and Cranfield): the model, Model2Vec's distill, whitevec's two choices and their share of the
    model's score, with the yardstick's verdict."""
    tasks = ZH_TASKS if model in CHINESE else STS_TASKS
    rows = [r for r in quality["sts"] if r["model"] == model]
    picks = [pick for pick in (chosen(quality, model, pool) for pool in POOLS) if pick is not None]
    scores = {key: task_scores(rows, model, *key) for key in [(CONTEXTUAL, "none"), (MODEL2VEC, "none"), *picks]}
    if model in ENGLISH:
        for key in scores:
            scores[key]["Cranfield nDCG@10"] = cranfield_of(quality, model, *key)  # type: ignore[assignment]
    lines = []
    for task in [*tasks, *(["Cranfield nDCG@10"] if model in ENGLISH else [])]:
        itself = scores[(CONTEXTUAL, "none")].get(task)
        cells = [model, task, fmt(itself), fmt(scores[(MODEL2VEC, "none")].get(task))]
        for pick in picks:
            mine = scores[pick].get(task)
            if mine is None or itself is None:
                cells += ["—", "—"]
                continue
            verdict = "yes" if close_enough(mine, itself) else f"no ({mine - itself:+.2f})"
            cells += [f"{mine:.2f} ({100 * mine / itself:.0f}%)", verdict]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def verdict_lines(quality: dict[str, Any]) -> list[str]:
    """Where whitevec's chosen static configuration comes within the yardstick of the model, and where not."""
    head = ["model", "task", "the model", "Model2Vec", "whitevec's choice (share)", "good enough",
            "choice, no evaluation text in the table (share)", "good enough"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|---|---" + "|---:" * 3 + "|---" + "|---:|---|"]
    bullets = []
    for model in [m for m in MODELS if any(r["model"] == m for r in quality["sts"])]:
        lines += verdict_table(quality, model)
        bullets.append(verdict_bullet(quality, model))
    return [*bullets, "", *lines]


def verdict_bullet(quality: dict[str, Any], model: str) -> str:
    """One sentence per model: how close whitevec's choice (among every row) comes to the model, and where."""
    tasks = ZH_TASKS if model in CHINESE else STS_TASKS
    rows = [r for r in quality["sts"] if r["model"] == model]
    pick = chosen(quality, model, "all")
    if pick is None:
        return f"- **{model}**: no whitevec table measured."
    itself, mine = task_scores(rows, model, CONTEXTUAL, "none"), task_scores(rows, model, *pick)
    good = [t for t in tasks if close_enough(mine[t], itself[t])]
    short = [f"{t} ({mine[t] - itself[t]:+.2f})" for t in tasks if t not in good]
    means = averages(rows, tasks)
    ours, theirs = means[(model, *pick)], means[(model, CONTEXTUAL, "none")]
    on = "valid" if model in CHINESE else "STS-B dev"
    text = (
        f"- **{model}**: `{pick[0]} + {pick[1]}` (chosen on {on}) averages {ours:.2f} against the model's "
        f"{theirs:.2f} ({100 * ours / theirs:.0f}%); good enough on {', '.join(good) or 'no task'}; short on "
        f"{', '.join(short) or 'no task'}"
    )
    a, b = cranfield_of(quality, model, *pick), cranfield_of(quality, model, CONTEXTUAL, "none")
    if a is not None and b is not None:
        verdict = "good enough" if close_enough(a, b) else "short"
        text += f"; Cranfield nDCG@10 {a:.2f} against {b:.2f} ({100 * a / b:.0f}%: {verdict})"
    return text + "."


def transform_gains(quality: dict[str, Any], model: str, spec: str) -> tuple[list[float], list[float]]:
    """``spec`` minus raw for every static table of ``model`` (Model2Vec's and whitevec's): the differences of
    the task average (wmean), and of Cranfield nDCG@10 where both have it."""
    tasks = ZH_TASKS if model in CHINESE else STS_TASKS
    means = averages([r for r in quality["sts"] if r["model"] == model], tasks)
    sts, cranfield = [], []
    for (_, system, transform), value in means.items():
        if transform != spec or system == CONTEXTUAL or (model, system, "none") not in means:
            continue
        sts.append(value - means[(model, system, "none")])
        a, b = cranfield_of(quality, model, system, spec), cranfield_of(quality, model, system, "none")
        cranfield += [a - b] if a is not None and b is not None else []
    return sts, cranfield


def isotropy_lines(quality: dict[str, Any]) -> list[str]:
    """What each isotropy transform does to the static tables of each model, against the same table raw."""
    lines = ["| model | transform | tables | task average minus raw: mean (min, max) | better | "
             "Cranfield minus raw: mean (min, max) | better |", "|---|---|---:|---|---:|---|---:|"]  # fmt: skip
    for model, spec in [(m, t) for m in MODELS for t in ISOTROPY]:
        sts, cranfield = transform_gains(quality, model, spec)
        if sts:
            better = sum(g > 0 for g in cranfield) if cranfield else "—"
            lines.append(f"| {model} | {spec} | {len(sts)} | {spread(sts)} | {sum(g > 0 for g in sts)} | "
                         f"{spread(cranfield)} | {better} |")  # fmt: skip
    return lines


def plain_lines(quality: dict[str, Any]) -> list[str]:
    """The section's answer in three sentences, counted from the rows: how many of whitevec's chosen scores meet
    the yardstick, and what isotropy does to sentence similarity and to retrieval."""
    met, short = [], []
    for model in [m for m in MODELS if chosen(quality, m, "all") is not None]:
        pick = chosen(quality, model, "all")
        assert pick is not None
        rows = [r for r in quality["sts"] if r["model"] == model]
        itself, mine = task_scores(rows, model, CONTEXTUAL, "none"), task_scores(rows, model, *pick)
        scores = [(t, mine[t], itself[t]) for t in (ZH_TASKS if model in CHINESE else STS_TASKS)]
        a, b = cranfield_of(quality, model, *pick), cranfield_of(quality, model, CONTEXTUAL, "none")
        scores += [("Cranfield", a, b)] if a is not None and b is not None else []
        for task, ours, theirs in scores:
            (met if close_enough(ours, theirs) else short).append((f"{model} {task}", ours - theirs))
    gains = {spec: [transform_gains(quality, m, spec) for m in MODELS] for spec in ISOTROPY}
    sts = [g for pairs in gains.values() for pair in pairs for g in pair[0]]
    retrieval = [
        f"{spec} in {sum(g > 0 for g in flat)} of {len(flat)}"
        for spec, pairs in gains.items()
        if (flat := [g for pair in pairs for g in pair[1]])
    ]
    lines = [
        f"- **Good enough** (within 5% of the model) for whitevec's chosen configuration: {len(met)} of "
        f"{len(met) + len(short)} scores ({', '.join(name for name, _ in met) or 'none'}). The others fall "
        f"{-max(g for _, g in short):.2f} to {-min(g for _, g in short):.2f} points short."
        if short
        else f"- **Good enough** for whitevec's chosen configuration on all {len(met)} scores.",
        f"- **Isotropy pays on sentence similarity**: {sum(g > 0 for g in sts)} of {len(sts)} (table, transform) "
        f"pairs raise the task average over the raw table (mean {np.mean(sts):+.2f}).",
    ]
    if retrieval:
        lines.append(f"- **On retrieval it depends on the transform**: Cranfield nDCG@10 rises over the raw table "
                     f"with {', '.join(retrieval)} tables.")  # fmt: skip
    return lines


def spread(values: list[float]) -> str:
    return "—" if not values else f"{np.mean(values):+.2f} ({min(values):+.2f}, {max(values):+.2f})"


def timing_target_lines(timing: dict[str, Any] | None) -> list[str]:
    if timing is None:
        return [
            "| encode >= 40x MiniLM float32 | pending the lead's quiet run | — |",
            "| encode >= 1.0x Model2Vec's StaticModel.encode | pending the lead's quiet run | — |",
            "| static index /search p50 < 5 ms, one client | pending the lead's quiet run | — |",
        ]
    rate = {label: run.get("sentences_per_s") for label, run in timing["encode"].items()}
    base = rate["whitevec Encoder, MiniLM float32 (contextual)"]
    peer = rate["Model2Vec StaticModel.encode, its folder"]
    mine = rate["whitevec StaticEncoder, whitevec's folder"]
    same = rate["whitevec StaticEncoder, Model2Vec's folder"]
    p50 = timing["search"]["one_client"]["p50_ms"]
    lines = []
    if None not in (base, peer, mine, same):
        lines += [
            f"| encode >= 40x MiniLM float32 | {mine / base:.1f}x ({mine:,.0f} against {base:,.0f} sentences/s) | "
            f"{'yes' if mine >= 40 * base else 'no'} |",
            f"| encode >= 1.0x Model2Vec's StaticModel.encode | {same / peer:.2f}x on its own folder, "
            f"{mine / peer:.2f}x on whitevec's | {'yes' if min(same, mine) >= peer else 'no'} |",
        ]
    lines.append(f"| static index /search p50 < 5 ms, one client | {p50:.2f} ms | {'yes' if p50 < 5 else 'no'} |")
    return lines


def method_gaps(quality: dict[str, Any], model: str, method: str) -> tuple[list[float], list[float]]:
    """``method`` minus ``tokens`` over every pair of rows with the same token weights and transform: the
    differences of the task average (wmean), and of Cranfield nDCG@10 where both have it."""
    tasks = ZH_TASKS if model in CHINESE else STS_TASKS
    means = averages([r for r in quality["sts"] if r["model"] == model], tasks)
    gaps, cranfield = [], []
    for (_, system, transform), value in means.items():
        base = "tokens/" + system.split("/")[-1]
        if system.split("/")[0] != method or (model, base, transform) not in means:
            continue
        gaps.append(value - means[(model, base, transform)])
        a, b = cranfield_of(quality, model, system, transform), cranfield_of(quality, model, base, transform)
        if a is not None and b is not None:
            cranfield.append(a - b)
    return gaps, cranfield


def method_lines(quality: dict[str, Any]) -> list[str]:
    """``corpus`` (and ``corpus-heldout``) against ``tokens``, summarised per model."""
    lines = ["| model | method | pairs | minus tokens, mean | min | max | wins | Cranfield, mean difference |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for model, method in [(m, v) for m in MODELS for v in METHODS[1:]]:
        gaps, cranfield = method_gaps(quality, model, method)
        if gaps:
            lines.append(
                f"| {model} | {method} | {len(gaps)} | {np.mean(gaps):+.2f} | {min(gaps):+.2f} | "
                f"{max(gaps):+.2f} | {sum(g > 0 for g in gaps)} of {len(gaps)} | "
                f"{fmt(float(np.mean(cranfield)) if cranfield else None, True)} |"
            )
    return lines


def cranfield_table(quality: dict[str, Any]) -> list[str]:
    lines = ["| model | system | transform | nDCG@10 | R@10 | MRR@10 | MAP |", "|---|---|---|---:|---:|---:|---:|"]
    for r in quality["cranfield"]:
        cells = [r["model"], r["system"], r["transform"], *(f"{r[k]:.2f}" for k in ("ndcg_10", "recall_10",
                 "mrr_10", "map"))]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def distill_lines(data: dict[str, Any]) -> list[str]:
    """Distill seconds (rough: a busy shared machine, load averages given) and table sizes: Model2Vec's, and one
    row per model and method of whitevec's (its ``none`` table, the one that ran the model passes)."""
    lines = ["| model | distiller | seconds | load average before | vocab x dim | table bytes |",
             "|---|---|---:|---|---|---:|"]  # fmt: skip
    sizes = data.get("quality", {}).get("sizes", {})
    for model, record in data.get("peer", {}).items():
        size = sizes.get(f"{model} {MODEL2VEC}", {}).get("table_bytes")
        lines.append(f"| {model} | Model2Vec `{record['call']}` | {record['distill_seconds']:.0f} | "
                     f"{load_text(record)} | {record['vocab']} x {record['dim']} {record['dtype']} | "
                     f"{fmt_int(size)} |")  # fmt: skip
    rest: list[float] = []
    for key, record in sorted(data.get("distill", {}).items(), key=lambda item: distill_order(item[0])):
        if not key.endswith("/none"):
            rest += [record["seconds"]] if "seconds" in record and "/" in key else []
            continue
        model, system = key.split(" ")
        size = sizes.get(f"{model} {system}", {}).get("table_bytes")
        seconds = f"{record['seconds']:.0f}" if "seconds" in record else "— (folder of an earlier run, kept)"
        if "model_pass_seconds" in record:
            seconds += f" (model passes {record['model_pass_seconds']:.0f})"
        method = system.split("/")[0]
        shape = f"{record['vocab']} x {record['dim']} float32"
        corpus = "" if method == "tokens" else f" ({CORPUS_OF[method]} corpus)"  # tokens/none reads no corpus
        lines.append(f"| {model} | `whitevec distill --method {method.split('-')[0]} --token-weights none`"
                     f"{corpus} | {seconds} | {load_text(record)} | {shape} | {fmt_int(size)} |")  # fmt: skip
    if rest:
        lines += ["", f"The other token weightings of each model and method reuse that method's model passes "
                      f"(benchmarks/maintained/results_static.py's `model_passes_once`): {min(rest):.0f} to "
                      f"{max(rest):.0f} s each for the rest of distill (PCA, counts, weights, the "
                      "folder)."]  # fmt: skip
    return lines


def distill_order(key: str) -> tuple[int, int, str]:
    """A distill record's key (``MODEL METHOD/WEIGHTS`` or ``MODEL fold check``) in the page's order."""
    model, _, rest = key.partition(" ")
    method = rest.split("/")[0]
    return (MODELS.index(model) if model in MODELS else len(MODELS),
            METHODS.index(method) if method in METHODS else len(METHODS), rest)  # fmt: skip


def load_text(record: dict[str, Any]) -> str:
    loads = record.get("load_average_before")
    return "—" if not loads else " / ".join(f"{x:.1f}" for x in loads)


def fmt_int(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def timing_lines(timing: dict[str, Any] | None) -> list[str]:
    if timing is None:
        return [
            "**Pending the lead's quiet run** (`python benchmarks/maintained/results_static.py --part timing`); "
            "this machine",
            "is shared, so no speed is quoted here.",
        ]
    lines = [
        f"{facts_markdown(timing['machine'])} Load average before "
        f"{' / '.join(f'{x:.2f}' for x in timing['load_average_before'])}. `{timing['command']}`.",
        "",
        f"Encoding the first {timing['n_texts']:,} STS-B sentences (all splits, first seen first), each system in "
        f"a fresh process with 2 threads; the median of {timing['reps']} passes (contextual) or "
        f"{timing['static_reps']} (static), after a warm-up.",
        "",
        "| system | sentences/s | median s per pass |",
        "|---|---:|---:|",
    ]
    for label, run in timing["encode"].items():
        if "error" in run:
            lines.append(f"| {label} | failed: {run['error']} | |")
        else:
            lines.append(f"| {label} | {run['sentences_per_s']:,.0f} | {float(np.median(run['seconds'])):.4f} |")
    search = timing["search"]
    row, ceiling = search["one_client"], search["ceiling"]
    lines += [
        "",
        f"A static index of the Cranfield documents (folder `{search['folder']}`, flat, cosine) under `whitevec "
        f"serve`, one closed-loop client (benchmarks/common/loadgen.py, its own process), {row['requests']} "
        "requests: "
        f"/search p50 **{row['p50_ms']:.2f} ms**, p99 {row['p99_ms']:.2f} ms, {row['qps']:.0f} queries/s. "
        f"In-process ceiling (bench_serve.py's worker): one query at a time p50 "
        f"{ceiling.get('search_single_p50_ms', 0):.3f} ms; batches of 64 "
        f"{ceiling.get('search_batched_qps', 0):,.0f} queries/s.",
    ]
    return lines


def check_lines(data: dict[str, Any]) -> list[str]:
    quality = data.get("quality", {})
    lines = []
    for model, gap in quality.get("equality", {}).items():
        lines.append(f"- whitevec's StaticEncoder against Model2Vec's StaticModel.encode on the peer folder of "
                     f"{model}, STS-B sentences: largest difference {gap:.1e} (Model2Vec returns its "
                     "table's float16, whitevec float32; float16 rounds a unit vector's entries at about "
                     "5e-4).")  # fmt: skip
    for key, record in data.get("distill", {}).items():
        if key.endswith(" fold check"):
            lines.append(
                f"- {key.split(' ')[0]}: `distill --token-weights sif-rank --transform whitening` (whitening "
                "folded into the table, fitted on every corpus line, normalised) against whitening fitted on the "
                "unnormalised tokens/sif-rank folder's corpus vectors and applied, then normalised, on the STS-B "
                f"sentences: largest difference {record['folded_vs_applied_max_abs_diff']:.1e}. So a row's "
                "transform, fitted and applied here, is the folder that folds it."
            )
    return lines


def corpus_lines(data: dict[str, Any], name: str) -> str:
    """How many lines the corpus file ``name`` had, from a distill record's provenance ("?" if none used it)."""
    for record in data.get("distill", {}).values():
        corpus = (record.get("provenance") or {}).get("corpus") or {}
        if corpus.get("file") == name:
            return f"{corpus['lines']:,}"
    return "?"


# Why a model lacks a method's tables on the page (said where it does).
NOT_DISTILLED = {
    "all-mpnet-base-v2": "cut for time: the corpus passes of this 12-layer, 768-wide model over 10,000 lines each "
    "would take hours on the shared 2-core machine",
}


def missing_lines(quality: dict[str, Any]) -> list[str]:
    """Which models lack which methods' tables in the rows, with the reason and the commands that add them."""
    lines = []
    for model in MODELS:
        systems = {r["pooling"].split("/")[0] for r in quality["sts"] if r["model"] == model}
        missing = [m for m in METHODS if m not in systems]
        if systems and missing:
            why = NOT_DISTILLED.get(model, "not distilled")
            lines.append(f"**Not measured**: {model} by {', '.join(f'`{m}`' for m in missing)} ({why}). "
                         "`python benchmarks/maintained/results_static.py --part distill --models "
                         f"{model} --methods "
                         f"{','.join(missing)}`, then `--part quality --models {model}`, add them.")  # fmt: skip
    return [*lines, ""] if lines else []


def markdown(data: dict[str, Any], notes: str) -> str:
    quality, timing = data.get("quality"), data.get("timing")
    machines = [part["machine"] for part in (data.get("distill_run"), quality, timing) if part]
    command = (
        "`python benchmarks/maintained/results_static.py --part peer|distill|quality|timing` (the parts below)"
    )
    lines = [
        "# Static encoders: `whitevec distill` against Model2Vec's distill and the models themselves",
        "",
        results_header(command, *machines) if machines else f"Command: {command}",
        "",
        "A static encoder keeps one vector per vocabulary token; a sentence is the mean of its tokens' rows, so",
        "encoding is a tokenizer call and one sparse product. Compared, for all-MiniLM-L6-v2, all-mpnet-base-v2",
        "(STS-B test, STS12-15, Cranfield) and m3e-small (ATEC, BQ, LCQMC, PAWS-X, Chinese STS-B):",
        "",
        "- `contextual`: the model itself, whitevec's `Encoder` with the model's own pooling (the mean of the",
        "  last layer), raw vectors.",
        "- `model2vec`: Model2Vec 0.10's own `distill` of the model with its defaults (`pca_dims=256`, SIF",
        "  weights from the token rank with a = 1e-4, float16), run in its own venv (`make peer-m2v`), read with",
        "  whitevec's `StaticEncoder` (the same vectors as `StaticModel.encode`: see Checks).",
        "- `tokens/W`, `corpus/W`: `whitevec distill --method tokens|corpus --dims 256 --token-weights W`:",
        "  each token alone through the model (Model2Vec's method), or each token's mean contextual vector over",
        "  a corpus (10,000 lines sampled with seed 0; tokens never seen fall back to the single-token vector).",
        "  W: `none`, `sif-rank` (Model2Vec's rank weights), `sif` (a = 1e-3) or `usif` from token counts of the",
        "  corpus. The corpus is the unlabelled text the model is evaluated on: English, the target sentences of",
        f"  the five STS tasks and the Cranfield documents ({corpus_lines(data, 'corpus-en.txt')} lines);",
        f"  Chinese, the sentences of the sampled pairs ({corpus_lines(data, 'corpus-zh.txt')} lines). No label",
        "  is read, but the table has seen the evaluated sentences.",
        "- `corpus-heldout/W`: the same with a corpus no score reads, the sentences of STS-B's train split",
        f"  (English {corpus_lines(data, 'corpus-heldout-en.txt')} lines; Chinese STS-B's, "
        f"{corpus_lines(data, 'corpus-heldout-zh.txt')} lines), for counts and corpus passes alike.",
        "- Transforms (the second column of each row): `none`, `whitening`, `whitening-128`, `sif-pc` (the first",
        "  uncentred principal component removed), `usif-pc` (uSIF's soft removal of 5, with usif weights), and",
        "  `zipfian` (Zipfian whitening of the table's rows, p(w)-weighted moments, with the unweighted table).",
        "  Each is fitted on the evaluation's own unlabelled text: for STS the task's target sentences (every",
        "  sentence of the task, all splits: the protocol of [sts.md](sts.md) and of the issue's table), for",
        "  Cranfield the documents, for the Chinese tasks the sentences of the sampled valid and test pairs.",
        "  Every one is affine, so it folds into the table exactly: `distill --transform` does so for all but",
        "  `zipfian` (whose p(w)-weighted token moments distill does not fit; computed here), and the Checks",
        "  show a folded folder giving the vectors of the transform applied as here.",
        "",
        "Spearman x 100 of the cosine against the gold scores; `wmean` weights each subset's correlation by its",
        "pairs, `all` pools the subsets into one correlation (the issue's table quoted `all` for STS12-15); the",
        "averages are plain means over the tasks. The Chinese tasks are the seeded samples of 2,000 valid and",
        "2,000 test pairs of [sts-zh.md](sts-zh.md), scored on test. Cranfield: exact cosine search over the",
        "1,400 documents, nDCG@10 with graded gains as in [retrieval.md](retrieval.md).",
        "",
    ]
    if quality is None:
        lines += ["The quality part has not run yet.", ""]
    else:
        lines += quality_section(data, quality)
    lines += ["## Speed", "", *timing_lines(timing), "", "## Checks", "", *check_lines(data), ""]
    lines += [NOTES_MARK, "", notes.strip(), ""]
    return "\n".join(lines)


def quality_section(data: dict[str, Any], quality: dict[str, Any]) -> list[str]:
    rows = [SimpleNamespace(**r) for r in quality["sts"]]
    english = [r for r in rows if r.model in ENGLISH]
    chinese = [r for r in rows if r.model in CHINESE]
    lines = [
        f"Quality part: {facts_markdown(quality['machine'])} `{quality['command']}`, {quality['seconds']:.0f} s.",
        "",
        *missing_lines(quality),
        "## Where static + isotropy is good enough, and where it is not",
        "",
        "The yardstick: a static configuration is good enough on a task when it scores within 5% of the model",
        "itself (at least 95% of its Spearman or nDCG@10). whitevec's configuration is chosen on STS-B dev (the",
        "Chinese tasks: on the valid samples), as in the targets below; the share of the model's score is in",
        "brackets, so another yardstick can be read off.",
        "",
        *plain_lines(quality),
        "",
        *verdict_lines(quality),
        "",
        "What the isotropy transforms do to a static table (Model2Vec's and each of whitevec's, against the same",
        "table raw; `better`: how many tables gain):",
        "",
        *isotropy_lines(quality),
        "",
        "## The issue's targets (all-MiniLM-L6-v2)",
        "",
        "whitevec's configuration is the one with the best STS-B **dev** score (transform fitted on the target",
        "sentences, as for the test scores), so no test label chooses it; the same configuration is then scored",
        "on Cranfield. Chosen twice: among every whitevec row, and among the tables that read none of the",
        "evaluations' text (`tokens` with no weights or sif-rank, and `corpus-heldout`: a corpus of STS-B's train",
        "sentences, which no score reads), the closer view of text whitevec has not seen. Model2Vec's row is",
        "its distill as it comes (raw).",
        "",
        *target_lines(quality, data.get("timing")),
        "",
        "## Each model: itself, Model2Vec's distill, whitevec's",
        "",
    ]
    for model in MODELS:
        if any(r.model == model for r in rows):
            lines += [f"### {model}", "", *summary_table(quality, model), ""]
    lines += [
        "## `corpus` against `tokens`",
        "",
        "Each pair: the same token weights and transform, the task average of `corpus` minus that of `tokens`.",
        "",
        *method_lines(quality),
        "",
        "## Every configuration",
        "",
        "STS (English models):",
        "",
        *sts_table(english, STS_TASKS),  # type: ignore[arg-type]
        "",
    ]
    if chinese:
        lines += ["Chinese tasks (m3e-small):", "", *sts_table(chinese, ZH_TASKS), ""]  # type: ignore[arg-type]
    lines += ["Cranfield:", "", *cranfield_table(quality), "", "## Distilling: time and size", ""]
    lines += [
        "Seconds are rough: a shared 2-core machine with other jobs running (the load averages say how busy).",
        "",
        *distill_lines(data),
        "",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT, help="the folder of static.json and static.md")
    args = parser.parse_args()
    json_path, page = args.out / f"{STEM}.json", args.out / f"{STEM}.md"
    data = json.loads(json_path.read_text()) if json_path.is_file() else {}
    with atomic_path(page) as tmp:
        tmp.write_text(markdown(data, kept_notes(page)), encoding="utf-8")
    print(f"wrote {page}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
