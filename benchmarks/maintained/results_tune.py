"""Regenerate docs/results/tune.md, docs/results/sts-zh.md and docs/results/tune.json: does `whitevec tune` leave
users better off, measured on the side it did not choose on?

For each model and set, ``whitevec.tuning.tune`` runs with its defaults (poolings last-avg and first-last-avg,
the default transform grid with flow, float32, 1000 bootstrap resamples, seed 0), every transform fitted on the
set's unlabelled sentences (all sentences of the task; Cranfield: the corpus):

- STS-B (English): tuned on dev, reported on test.
- STS12-15: no dev split, so 5-fold over the pairs: chosen on 4 folds, scored on the fifth; figures are the
  size-weighted mean over the 5 held-out folds (Spearman "all" within each fold: subsets concatenated).
- The Chinese tasks (m3e-small): tuned on valid, reported on test.
- Cranfield: 5-fold over the judged queries, nDCG@10 (exact cosine search over the 1,400 documents).

Columns: raw = the model's own pooling (last-avg, mean pooling) with no transform; whitening = last-avg with full
BERT-whitening (a fixed choice); tuned = what tune chose; best = the best candidate on the held-out side (what an
oracle would have picked). Targets: tuned >= raw - 0.1 everywhere; tuned >= raw + 1.0 where best >= raw + 1.5.

Run (quality figures; the load does not change them): ``python -W ignore benchmarks/maintained/results_tune.py``
with WHITEVEC_DATA set; ``--models``/``--sets`` run a part and merge it into the existing tune.json.
``--no-flow`` leaves flow out of the grid (the committed figures do: see tune.md for why).

``--encodings-run`` runs only the encoding axis instead (issue 12): all-MiniLM-L6-v2, last-avg, on Cranfield
(5-fold over the queries, nDCG@10), transforms :data:`ENCODING_TRANSFORMS` x encodings :data:`ENCODINGS`, each
compressed encoding scored on its decoded codes as the index stores them (``whitevec.tuning.run``). Every
candidate's row goes under ``"encodings"`` in tune.json and into its own section of tune.md; the other sets are
not rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import command_line, facts_markdown, machine_facts, results_header
from benchmarks.common.sts import seeded_sample

from whitevec.datasets import CHINESE_TASKS, load_sts_task
from whitevec.datasets.retrieval import load_retrieval_dataset
from whitevec.encoders.transformer import Encoder
from whitevec.tuning import TuneResult, tune
from whitevec.utils.io import atomic_path, write_json, writers_lock

# The token limit these figures were taken with (before a folder's max_seq_length became the default).
MAX_LENGTH = 512

ENGLISH_MODELS = ["all-MiniLM-L6-v2", "all-mpnet-base-v2"]
CHINESE_MODEL = "m3e-small"
ENGLISH_SETS = ["stsb", "sts12", "sts13", "sts14", "sts15", "cranfield"]
POOLINGS = ["last-avg", "first-last-avg"]
OUT = Path(__file__).resolve().parents[2] / "docs" / "results"
ENCODING_MODEL = "all-MiniLM-L6-v2"
ENCODING_TRANSFORMS = ["whitening-128", "whitening-256", "pca-128"]  # none is always scored
ENCODINGS = ["float32", "sq8", "pq96", "pq48"]
ENCODING_BUDGET = 128  # code bytes: a twelfth of the raw 384-d float32 vector, the compression study's budget


def run_one(model: str, name: str, encoder: Encoder, args: argparse.Namespace) -> dict[str, Any]:
    """Tune one model on one set; the row of the results table."""
    started = time.perf_counter()
    common: dict[str, Any] = {
        "models": [model],
        "poolings": POOLINGS,
        "encoders": {model: encoder},
        "folds": args.folds,
        "n_boot": args.n_boot,
        "seed": 0,
        "include_flow": not args.no_flow,
        "show_progress": False,
    }
    if name == "cranfield":
        data = load_retrieval_dataset("cranfield")
        result = tune(data, **common)
        protocol = f"query {args.folds}-fold, nDCG@10"
    elif name in CHINESE_TASKS:
        # valid and test, each cut to a seeded sample of at most --zh-pairs pairs; the transforms are fitted on
        # the sentences of both (unlabelled). The full ATEC/BQ/LCQMC sets (~150k sentences) do not fit the
        # encoding budget of two shared cores.
        task = load_sts_task(name)
        valid, test = (
            seeded_sample(task.splits["valid"], args.zh_pairs),
            seeded_sample(task.splits["test"], args.zh_pairs),
        )
        fit = list(dict.fromkeys(s for p in [*valid, *test] for s in (p.sentence1, p.sentence2)))
        result = tune(valid, test=test, fit_texts=fit, **common)
        protocol = "valid -> test" + (
            f" (samples of {args.zh_pairs})" if len(task.splits["test"]) > len(test) else ""
        )
    else:
        task = load_sts_task(name)
        fit = task.sentences("target")
        dev_split = next((s for s in ("dev", "valid") if s in task.splits), None)
        if dev_split is not None and args.fit_dev_test:
            # Fit on the dev and test sentences only (not train): a third of STS-B's text to encode.
            fit = list(dict.fromkeys(task.sentences(dev_split) + task.sentences("test")))
        if dev_split is None:
            result = tune(task.all_pairs(), fit_texts=fit, **common)
            protocol = f"{args.folds}-fold over pairs"
        else:
            result = tune(task.splits[dev_split], test=task.splits["test"], fit_texts=fit, **common)
            protocol = f"{dev_split} -> test" + (", fit on dev+test sentences" if args.fit_dev_test else "")
    return summarise(model, name, protocol, result, time.perf_counter() - started)


def run_encodings(args: argparse.Namespace) -> dict[str, Any]:
    """The encoding axis on Cranfield: every candidate's row, the choice and its held-out check."""
    started = time.perf_counter()
    data = load_retrieval_dataset("cranfield")
    common: dict[str, Any] = {
        "models": [ENCODING_MODEL],
        "poolings": ["last-avg"],
        "transforms": ENCODING_TRANSFORMS,
        "encodings": ENCODINGS,
        "folds": args.folds,
        "n_boot": args.n_boot,
        "seed": 0,
        "include_flow": False,
        "show_progress": False,
    }
    with Encoder(ENCODING_MODEL, pooling="last-avg", max_length=MAX_LENGTH) as encoder:
        result = tune(data, encoders={ENCODING_MODEL: encoder}, **common)
        budgeted = tune(data, encoders={ENCODING_MODEL: encoder}, max_bytes_per_vector=ENCODING_BUDGET, **common)
    result.plot(args.out / "tune-encodings-cranfield.png")
    budget_check = budgeted.check_summary()
    return {
        "budget": ENCODING_BUDGET,
        "budget_chosen": budgeted.chosen.candidate.label,
        "budget_chosen_gain": [budgeted.chosen.gain, budgeted.chosen.low, budgeted.chosen.high],
        "budget_check": budget_check,
        "budget_fold_choices": [c.chosen for c in budgeted.checks],
        "model": ENCODING_MODEL,
        "set": "cranfield",
        "protocol": f"query {args.folds}-fold, nDCG@10",
        "n_dev": result.n_dev,
        "candidates": [
            {
                "transform": r.transform,
                "encoding": r.encoding,
                "dim": r.dim,
                "bytes": r.bytes_per_vector,
                "status": r.status,
                "dev": r.dev,
                "gain": r.gain,
                "ci95": [r.low, r.high],
                "significant": r.significant,
                "chosen": r.chosen,
            }
            for r in result.candidates
        ],
        "chosen": result.chosen.candidate.label,
        "check": result.check_summary(),
        "fold_choices": [c.chosen for c in result.checks],
        "notes": result.notes,
        "seconds": round(time.perf_counter() - started, 1),
    }


def built_scores(folder: Path, model: str) -> dict[tuple[str, str], float]:
    """nDCG@10 x 100 of the indexes benchmarks/maintained/results_compression.py built for real
    (compression-quality.json), by (canonical transform, encoding); empty when that file is absent."""
    from whitevec.tuning.space import canonical_transform

    path = folder / "compression-quality.json"
    if not path.is_file():
        return {}
    out = {}
    for report in json.loads(path.read_text())["reports"]:
        if report["model"] == model and report["dataset"] == "cranfield":
            for score in report["scores"]:
                out[(canonical_transform(score["transform"]), score["encoding"])] = 100 * score["ndcg_10"]
    return out


def render_encodings(run: dict[str, Any], built: dict[tuple[str, str], float]) -> list[str]:
    """tune.md's section on the encoding axis; ``built``: the same configurations' scores from real indexes."""
    check = run["check"]

    def short(label: str) -> str:  # "model / pooling / transform / encoding" -> "transform / encoding"
        return " / ".join(label.split(" / ")[2:])

    lines = [
        "",
        "## The encoding axis: transform x index encoding on Cranfield",
        "",
        f"Command: `{run['command']}` (1-minute load average before: {run['load']}; quality figures do not depend "
        "on load). Run time "
        f"{run['seconds']} s. {run['model']}, last-avg, max_length {MAX_LENGTH}; {run['protocol']} over "
        f"{run['n_dev']} judged queries. A compressed encoding is scored on the corpus stored with it and decoded "
        "(a flat FAISS store trained on the 1,400 documents; queries stay float). bytes = code bytes per vector "
        "(the index's 8-byte id per vector left out). dev = nDCG@10 x 100 over all judged queries; gain over "
        "none / float32 with its 95% bootstrap interval; sig = significant over all candidates at once (max-t). "
        "built index = the same configuration's nDCG@10 from compression-quality.json, where "
        "benchmarks/maintained/results_compression.py built each index for real (`eval-retrieval`) and "
        "searched it.",
        "",
        "| transform | encoding | dim | bytes | dev | built index | gain [95% CI] | sig | status |",
        "|---|---|---:|---:|---:|---:|---|---|---|",
    ]
    for r in run["candidates"]:
        lo, hi = r["ci95"]
        interval = "-" if lo is None else f"{r['gain']:+.2f} [{lo:+.2f}, {hi:+.2f}]"
        lines.append(
            f"| {'**' if r['chosen'] else ''}{r['transform']}{'**' if r['chosen'] else ''} | {r['encoding']} | "
            f"{r['dim']} | {r['bytes']:,} | {fmt(r['dev'])} | {fmt(built.get((r['transform'], r['encoding'])))} | "
            f"{interval} | {'yes' if r['significant'] else ''} | "
            f"{r['status'] if r['status'] != 'scored' else ''} |"
        )
    pairs = [
        (r["dev"], built[(r["transform"], r["encoding"])])
        for r in run["candidates"]
        if r["dev"] is not None and (r["transform"], r["encoding"]) in built
    ]
    if pairs:
        worst = max(abs(a - b) for a, b in pairs)
        lines += [
            "",
            f"Decoded scoring against the built indexes: {len(pairs)} configurations in both, largest difference "
            f"{worst:.4f} nDCG@10 points.",
        ]
    lines += [
        "",
        f"Chosen on all dev queries: **{short(run['chosen'])}**. On the held-out folds: raw {check['raw']:.2f}, "
        f"tuned {check['tuned']:.2f} ({check['gain']:+.2f}). Per fold: "
        + "; ".join(map(short, run["fold_choices"]))
        + ".",
        "",
        f"With `--max-bytes-per-vector {run['budget']}` (the same candidates, those over {run['budget']} code "
        f"bytes left out but the float32 baseline): chosen **{short(run['budget_chosen'])}**, dev gain "
        f"{run['budget_chosen_gain'][0]:+.2f} [{run['budget_chosen_gain'][1]:+.2f}, "
        f"{run['budget_chosen_gain'][2]:+.2f}]; on the held-out folds raw {run['budget_check']['raw']:.2f}, tuned "
        f"{run['budget_check']['tuned']:.2f} ({run['budget_check']['gain']:+.2f}). Per fold: "
        + "; ".join(map(short, run["budget_fold_choices"]))
        + ".",
        "",
        *[f"- note: {n}" for n in run["notes"]],
        "",
        "![quality against bytes](tune-encodings-cranfield.png)",
    ]
    return lines


def summarise(model: str, name: str, protocol: str, result: TuneResult, seconds: float) -> dict[str, Any]:
    def held(pooling: str, transform: str) -> float | None:
        for row in result.candidates:
            if row.pooling == pooling and row.transform == transform and row.status == "scored":
                return result.held_out_score(row)
        return None

    scored = [r for r in result.candidates if r.status == "scored"]
    best = max(scored, key=lambda r: result.held_out_score(r) or float("-inf"))
    chosen = result.chosen
    check = result.check_summary()
    assert check is not None
    return {
        "model": model,
        "set": name,
        "protocol": protocol,
        "metric": result.metric,
        "n_dev": result.n_dev,
        "n_test": result.n_test,
        "n_fit": result.n_fit,
        "raw": check["raw"],
        "whitening": held("last-avg", "whitening"),
        "whitening_256": held("last-avg", "whitening-256"),
        "tuned": check["tuned"],
        "best": result.held_out_score(best),
        "best_label": f"{best.pooling} / {best.transform}",
        "chosen": f"{chosen.pooling} / {chosen.transform}",
        "chosen_dev_gain": chosen.gain,
        "chosen_ci95": [chosen.low, chosen.high],
        "fold_choices": [c.chosen.split(" / ", 1)[1].rsplit(" / ", 1)[0] for c in result.checks],
        "n_candidates": len(scored),
        "seconds": round(seconds, 1),
    }


def targets(row: dict[str, Any]) -> tuple[bool, bool | None]:
    """(tuned >= raw - 0.1, and where best >= raw + 1.5: tuned >= raw + 1.0; else None)."""
    safe = row["tuned"] >= row["raw"] - 0.1
    finds = row["tuned"] >= row["raw"] + 1.0 if row["best"] >= row["raw"] + 1.5 else None
    return safe, finds


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def run_machines(data: dict[str, Any], model: str = "", distinct: bool = False) -> list[dict[str, Any]]:
    """The machine facts of the runs (those naming ``model``), one per command (``distinct``: each once); files
    written before they were recorded per run have only the latest run's."""
    machines = data.get("machines")
    if machines is None:
        return [data["facts"]]
    found = [facts for command, facts in zip(data["commands"], machines, strict=True) if model in command]
    return list({json.dumps(f, sort_keys=True): f for f in found}.values()) if distinct else found


def render_tune(data: dict[str, Any]) -> str:
    rows = data["rows"]
    lines = [
        "# `whitevec tune`: raw vs fixed whitening vs tuned, on the side tune did not choose on",
        "",
        results_header(
            "`python -W ignore benchmarks/maintained/results_tune.py` (the runs listed below)",
            *run_machines(data),
            *([data["encodings"]["machine"]] if "machine" in data.get("encodings", {}) else []),
        ),
        "",
        "Generated by `benchmarks/maintained/results_tune.py` (its docstring has the protocol). Score x 100: "
        "Spearman on STS "
        "sets, nDCG@10 on Cranfield. raw = last-avg (the models' own mean pooling), no transform; whitening = "
        "last-avg + full BERT-whitening fitted on the set's unlabelled sentences; tuned = tune's choice; best = "
        "the best of all candidates on the held-out side (an oracle; it says whether a gain was there to find). "
        "Held-out side: the test split (STS-B dev -> test, Chinese valid -> test) or the mean over 5 held-out "
        "folds (SemEval years: pairs; Cranfield: queries), each fold's choice made without it.",
        "",
        "Commands (each run merges its rows into tune.json):",
        "",
        *[f"- `{command}`" for command in data["commands"]],
        "",
        *[facts_markdown(facts) for facts in run_machines(data, distinct=True)],
        "",
        f"1-minute load average before the run(s): {', '.join(str(x) for x in data['load_averages'])} "
        "(quality figures do not depend on load).",
        "",
        "| model | set | protocol | dev items | raw | whitening | tuned | tuned - raw | best (oracle) | chosen "
        "(all dev) | dev gain [95% CI] | >= raw - 0.1 | finds >= +1.0 where best >= +1.5 |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    safe_all, finds_all = True, True
    for row in rows:
        safe, finds = targets(row)
        safe_all &= safe
        finds_all &= finds is not False
        lo, hi = row["chosen_ci95"]
        lines.append(
            f"| {row['model']} | {row['set']} | {row['protocol']} | {row['n_dev']} | {fmt(row['raw'])} | "
            f"{fmt(row['whitening'])} | {fmt(row['tuned'])} | {row['tuned'] - row['raw']:+.2f} | "
            f"{fmt(row['best'])} ({row['best_label']}) | {row['chosen']} | {row['chosen_dev_gain']:+.2f} "
            f"[{lo:+.2f}, {hi:+.2f}] | {'yes' if safe else '**no**'} | "
            f"{'n/a' if finds is None else ('yes' if finds else '**no**')} |"
        )
    lines += [
        "",
        f"Targets: tuned >= raw - 0.1 on every set: **{'met' if safe_all else 'not met'}**; tuned >= raw + 1.0 "
        f"wherever some candidate gains >= 1.5 on the held-out side: **{'met' if finds_all else 'not met'}**.",
        "",
        "Choices per held-out fold (k-fold sets):",
        "",
    ]
    for row in rows:
        if row["fold_choices"]:
            lines.append(f"- {row['model']} {row['set']}: " + "; ".join(row["fold_choices"]))
    have = {(r["model"], r["set"]) for r in rows}
    wanted = [(m, s) for m in ENGLISH_MODELS for s in ENGLISH_SETS] + [(CHINESE_MODEL, s) for s in CHINESE_TASKS]
    missing = [f"{m} {s}" for m, s in wanted if (m, s) not in have]
    lines += [
        "",
        "## Not covered by these figures",
        "",
        "- **Flow** was left out of the grid (`--no-flow`). One Flow fit takes about 30 s per model, pooling "
        "and set on this shared two-core machine (61 s for the two poolings of STS-B in a profile), some 20 "
        "minutes over the runs here, which had to share the machine with three other jobs. docs/results/sts.md "
        "has flow within 0.3 points of raw on the five-task average for both models' mean pooling, below the best "
        "whitening variants. `whitevec tune` includes flow by default and tries it last, so `--max-seconds` cuts "
        "it first.",
        "- **Not measured** (encoding time on the shared cores): "
        + (", ".join(missing) if missing else "none")
        + ".",
    ]
    lines += ["", "Run time per set (encoding from the vector cache; fits, scoring, bootstrap):", ""]
    lines += [f"- {r['model']} {r['set']}: {r['seconds']} s, {r['n_candidates']} candidates" for r in rows]
    if "encodings" in data:
        lines += render_encodings(data["encodings"], built_scores(OUT, data["encodings"]["model"]))
    return "\n".join(lines) + "\n"


def render_zh(data: dict[str, Any]) -> str:
    rows = [r for r in data["rows"] if r["set"] in CHINESE_TASKS]
    lines = [
        "# Chinese STS and matching: m3e-small, raw, whitened and tuned",
        "",
        results_header(
            "`python -W ignore benchmarks/maintained/results_tune.py --models m3e-small --no-flow "
            "--sets pawsx,stsb-zh,atec,bq,lcqmc`",
            *run_machines(data, CHINESE_MODEL),
        ),
        "",
        "Generated by `benchmarks/maintained/results_tune.py`. Model: m3e-small (moka-ai; BERT, 4 layers, "
        "hidden 512, "
        "fine-tuned on Chinese sentence pairs; `whitevec` alias `m3e-small`). Spearman x 100 of the cosine "
        "against the gold label (0/1 for ATEC, BQ, LCQMC, PAWS-X; 0-5 for STS-B) on each task's **test** split. "
        "Every transform is fitted on the unlabelled sentences of the task's valid and test pairs used here; "
        "`whitevec tune` chooses on the **valid** labels only. ATEC, BQ and LCQMC are seeded samples of 2,000 "
        "valid and 2,000 test pairs each (the protocol column says so): encoding their full sets (about 150,000 "
        "sentences) with m3e-small on two cores shared with three other jobs did not fit this run's time. "
        "PAWS-X and STS-B are complete (STS-B's train split is not used for fitting, for the same reason).",
        "",
        *[f"Run: `{command}`" for command in data["commands"] if CHINESE_MODEL in command],
        "",
        *[facts_markdown(facts) for facts in run_machines(data, CHINESE_MODEL, distinct=True)],
        "",
        "| task | protocol | valid pairs | test pairs | raw (last-avg) | whitening | whitening-256 | tuned | "
        "chosen on valid | best on test (oracle) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['set']} | {row['protocol']} | {row['n_dev']} | {row['n_test']} | {fmt(row['raw'])} | "
            f"{fmt(row['whitening'])} | "
            f"{fmt(row['whitening_256'])} | {fmt(row['tuned'])} | {row['chosen']} | {fmt(row['best'])} "
            f"({row['best_label']}) |"
        )
    lines += [
        "",
        "## Beside the BERT-whitening authors' Chinese numbers",
        "",
        "The BERT-whitening authors evaluate these five tasks with their own Chinese encoders (BERT, RoBERTa, "
        "WoBERT, RoFormer, SimBERT, ...; `chn/eval.py` in bojone/BERT-whitening fits the kernel on all three "
        "splits), which are different models from m3e-small, so no row here is comparable to theirs number for "
        "number. Their published table is not in the shared data folder (`/work/shared/data/README.md` lists only "
        "the English BERT-base figures), and it could not be found in the reference material reachable from this "
        "machine, so it is **not reproduced here**: figures that cannot be checked against their source are "
        "left out rather than quoted from memory.",
    ]
    return "\n".join(lines) + "\n"


def _merge(json_path: Path, mine: list[dict[str, Any]], command: str, load: float) -> dict[str, Any]:
    """tune.json with this run's rows in place of earlier ones for the same model and set, written under a lock
    (runs for other models may be writing theirs meanwhile)."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    with writers_lock(json_path.parent):  # a lock on the folder itself: no lock file to publish
        data = json.loads(json_path.read_text()) if json_path.is_file() else {"rows": [], "commands": []}
        keys = {(r["model"], r["set"]) for r in mine}
        data["rows"] = [r for r in data["rows"] if (r["model"], r["set"]) not in keys] + mine
        order, every = [*ENGLISH_MODELS, CHINESE_MODEL], [*ENGLISH_SETS, *CHINESE_TASKS]
        data["rows"].sort(key=lambda r: (order.index(r["model"]), every.index(r["set"])))
        facts = machine_facts()
        if command not in data.setdefault("commands", []):
            data["commands"].append(command)
            data.setdefault("load_averages", []).append(load)
            data.setdefault("machines", []).append(facts)
        elif "machines" in data:  # the same command run again: its rows and machine are this run's
            data["machines"][data["commands"].index(command)] = facts
        data["facts"] = facts
        write_json(json_path, data)
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join([*ENGLISH_MODELS, CHINESE_MODEL]))
    parser.add_argument("--sets", default=",".join([*ENGLISH_SETS, *CHINESE_TASKS]))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--no-flow", action="store_true")
    parser.add_argument("--fit-dev-test", action="store_true", help="STS-B: fit on dev+test sentences only")
    parser.add_argument("--zh-pairs", type=int, default=2000, help="valid/test pairs per Chinese task (sample)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--render-only", action="store_true", help="rewrite the .md files from tune.json")
    parser.add_argument("--encodings-run", action="store_true", help="only the encoding axis on Cranfield")
    args = parser.parse_args()
    json_path = args.out / "tune.json"
    data: dict[str, Any] = json.loads(json_path.read_text()) if json_path.is_file() else {"rows": []}
    if args.encodings_run:
        load = round(os.getloadavg()[0], 2)
        encodings = run_encodings(args)
        encodings.update(command=command_line(), load=load, machine=machine_facts())
        data = json.loads(json_path.read_text()) if json_path.is_file() else {"rows": []}
        data["encodings"] = encodings
        write_json(json_path, data)
    elif not args.render_only:
        mine: list[dict[str, Any]] = []
        command = command_line()
        load = round(os.getloadavg()[0], 2)
        sets = args.sets.split(",")
        for model in args.models.split(","):
            chosen_sets = [s for s in sets if (s in CHINESE_TASKS) == (model == CHINESE_MODEL)]
            if not chosen_sets:
                continue
            with Encoder(model, pooling="last-avg", max_length=MAX_LENGTH) as encoder:
                for name in chosen_sets:
                    row = run_one(model, name, encoder, args)
                    print(json.dumps(row), flush=True)
                    mine.append(row)
                    data = _merge(json_path, mine, command, load)
        data = _merge(json_path, mine, command, load)
    for name, text in (("tune.md", render_tune(data)), ("sts-zh.md", render_zh(data))):
        with atomic_path(args.out / name) as tmp:
            tmp.write_text(text, encoding="utf-8")
        print(f"wrote {args.out / name}")


if __name__ == "__main__":
    main()
