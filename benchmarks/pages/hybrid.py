"""The page of benchmarks/maintained/results_hybrid.py: docs/results/hybrid.md rendered from hybrid.json (quality)
and, when it exists, hybrid-speed.json (bench_hybrid.py), measuring nothing (the hand-written notes below the
page's notes mark are kept).

    python benchmarks/pages/hybrid.py [--out docs/results]

Every statement about the figures (the issue's quality targets met or not) is computed from the rows at render
time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import facts_markdown, results_header
from benchmarks.common.pages import NOTES_MARK, kept_notes

from whitevec.utils.io import atomic_path

OUT = Path(__file__).resolve().parents[2] / "docs" / "results"
COLLECTIONS = ("cranfield", "med", "cacm", "adi")
ANCHORS = ("cranfield", "med", "cacm")
TITLES = {"cranfield": "Cranfield", "med": "MED", "cacm": "CACM", "adi": "ADI"}
MODEL_TITLES = {
    "all-MiniLM-L6-v2": "all-MiniLM-L6-v2",
    "all-mpnet-base-v2": "all-mpnet-base-v2",
    "static": "static table (`whitevec distill all-MiniLM-L6-v2`)",
}
WEIGHTS_OF = {"all-MiniLM-L6-v2": "uSIF weights", "all-mpnet-base-v2": "SIF weights", "static": "the table's"}
DEFAULT_FUSION = "convex:0.5"
STORES_FUSION = "rrf:60"
# Issue 39's quality targets (nDCG@10 points).
DEFAULT_GAIN_TARGET = 5.0
TUNED_SLACK = 0.5

Row = dict[str, Any]
Lookup = Callable[[str, str, str, str], float | None]


def lookup(data: dict[str, Any]) -> Lookup:
    """score(model, collection, transform, "dense" | "lexical" | a fusion) -> nDCG@10, or None when not run."""

    def score(model: str, collection: str, transform: str, what: str) -> float | None:
        rows = data["quality"].get(model, {}).get(collection, {}).get("rows", [])
        for row in rows:
            if what == "lexical" and row["mode"] == "lexical":
                return float(row["ndcg10"])
            if row["transform"] == transform and (row["fusion"] or row["mode"]) == what:
                return float(row["ndcg10"])
        return None

    return score


def models_of(data: dict[str, Any]) -> list[str]:
    """The measured models, in the page's order (the runs may merge in any)."""
    return sorted(
        data["quality"], key=lambda m: list(MODEL_TITLES).index(m) if m in MODEL_TITLES else len(MODEL_TITLES)
    )


def tuned(data: dict[str, Any], model: str, collection: str) -> float | None:
    found = data["quality"].get(model, {}).get(collection, {}).get("tuned")
    return None if found is None else float(found["ndcg10"])


def average(values: list[float | None]) -> str:
    return "" if any(v is None for v in values) or not values else f"{np.mean(values):.2f}"


def cell(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def transforms_of(data: dict[str, Any], model: str) -> list[str]:
    """The model's transforms in the order they were run (none, whitening-128, the token-weight one)."""
    for collection in data["quality"].get(model, {}).values():
        return list(dict.fromkeys(r["transform"] for r in collection["rows"] if r["mode"] != "lexical"))
    return []


def transform_title(model: str, transform: str) -> str:
    if transform in ("none", "whitening-128") or model == "static":
        return transform
    return f"{WEIGHTS_OF[model]} + {transform} (scored by tune)"


def model_table(data: dict[str, Any], model: str) -> list[str]:
    score = lookup(data)
    head = (
        "| nDCG@10 | " + " | ".join(TITLES[c] for c in COLLECTIONS) + " | average (first three) | average (all) |"
    )
    lines = [head, "|---|" + "---:|" * (len(COLLECTIONS) + 2)]

    def line(label: str, values: list[float | None]) -> None:
        cells = " | ".join(cell(v) for v in values)
        lines.append(f"| {label} | {cells} | {average(values[:3])} | {average(values)} |")

    line("lexical: BM25 (english)", [score(model, c, "", "lexical") for c in COLLECTIONS])
    for transform in transforms_of(data, model):
        title = transform_title(model, transform)
        for what, label in (
            ("dense", "dense"),
            (STORES_FUSION, "hybrid rrf:60"),
            (DEFAULT_FUSION, "hybrid convex:0.5"),
        ):
            line(f"{title}: {label}", [score(model, c, transform, what) for c in COLLECTIONS])
    line("**tuned** (half the queries / the other half)", [tuned(data, model, c) for c in COLLECTIONS])
    return lines


def tuned_choices(data: dict[str, Any], model: str) -> list[str]:
    lines = ["| collection | chosen on half A (scored on B) | chosen on half B (scored on A) |", "|---|---|---|"]
    for collection in COLLECTIONS:
        found = data["quality"].get(model, {}).get(collection, {}).get("tuned")
        if found is None:
            continue
        sides = [f"`{side['chosen']}` ({side['test']:.2f} on {side['n_test']})" for side in found["sides"]]
        lines.append(f"| {TITLES[collection]} | " + " | ".join(sides) + " |")
    return lines


def targets(data: dict[str, Any]) -> list[str]:
    """The issue's quality targets, each with its figures and met / not met."""
    score, model = lookup(data), "all-MiniLM-L6-v2"
    dense = [score(model, c, "none", "dense") for c in ANCHORS]
    fused = [score(model, c, "none", DEFAULT_FUSION) for c in ANCHORS]
    rrf = [score(model, c, "none", STORES_FUSION) for c in ANCHORS]
    static = [score("static", c, "none", DEFAULT_FUSION) for c in ANCHORS]
    if any(v is None for v in (*dense, *fused, *rrf)):
        return ["(the MiniLM rows are not all measured yet)"]
    gain = float(np.mean(fused) - np.mean(dense))  # type: ignore[arg-type]
    each = all(f >= d for f, d in zip(fused, dense, strict=True))  # type: ignore[operator]
    lines = [
        f"- Hybrid with the default fusion ({DEFAULT_FUSION}) over dense alone, all-MiniLM-L6-v2 raw, average of "
        f"Cranfield, MED and CACM: {gain:+.2f} (target >= +{DEFAULT_GAIN_TARGET:.1f}: "
        f"{'met' if gain >= DEFAULT_GAIN_TARGET else 'not met'}); above dense on each: {'yes' if each else 'no'} "
        f"({', '.join(f'{f - d:+.2f}' for f, d in zip(fused, dense, strict=True))}).",  # type: ignore[operator]
        f"- The default fusion against the stores' default ({STORES_FUSION}) on that average: "
        f"{np.mean(fused):.2f} vs {np.mean(rrf):.2f} "
        f"({'beaten' if np.mean(fused) > np.mean(rrf) else 'not beaten'}).",
    ]
    if not any(v is None for v in static):
        ok = np.mean(static) >= np.mean(dense)
        lines.append(
            f"- The static table + BM25 ({DEFAULT_FUSION}) against all-MiniLM-L6-v2 dense, same average: "
            f"{np.mean(static):.2f} vs {np.mean(dense):.2f} ({'met' if ok else 'not met'})."
        )
    lines += tuned_targets(data, score)
    return lines


def tuned_targets(data: dict[str, Any], score: Lookup) -> list[str]:
    lines = []
    for model in models_of(data):
        misses, checked = [], 0
        for collection in COLLECTIONS:
            got = tuned(data, model, collection)
            dense, fused = (
                score(model, collection, "none", "dense"),
                score(model, collection, "none", DEFAULT_FUSION),
            )
            if got is None or dense is None or fused is None:
                continue
            checked += 1
            floor = max(dense, fused) - TUNED_SLACK
            if got < floor:
                misses.append(f"{TITLES[collection]} {got:.2f} < {floor:.2f}")
        if checked:
            verdict = "met on every collection" if not misses else "not met: " + "; ".join(misses)
            lines.append(
                f"- Tuned ({model}) >= the better of raw dense and raw {DEFAULT_FUSION}, less {TUNED_SLACK}: "
                f"{verdict}."
            )
    return lines


def speed_section(out: Path) -> list[str]:
    path = out / "hybrid-speed.json"
    if not path.exists():
        return ["The speed figures are not measured yet (`python benchmarks/maintained/bench_hybrid.py`)."]
    from benchmarks.common.hybrid_speed import speed_markdown

    return [speed_markdown(json.loads(path.read_text()))]


def markdown(data: dict[str, Any], out: Path, notes: str) -> str:
    runs = data["runs"]
    lines = [
        "# Hybrid recall: BM25 beside the vectors",
        "",
        results_header("`python -W ignore benchmarks/maintained/results_hybrid.py`", *runs),
        "",
        *protocol(data),
        "",
        "Runs:",
        *(
            f"- `{run['command']}` ({', '.join(run['collections'])}): {facts_markdown(run)}"
            for run in data["runs"]
        ),
        "",
        "## Targets",
        "",
        *targets(data),
    ]
    for model in models_of(data):
        lines += ["", f"## {MODEL_TITLES.get(model, model)}", "", *model_table(data, model)]
        lines += ["", "What tune chose on each half:", "", *tuned_choices(data, model)]
    lines += ["", "## Speed", "", *speed_section(out), "", NOTES_MARK, "", notes.strip(), ""]
    return "\n".join(lines)


def protocol(data: dict[str, Any]) -> list[str]:
    sizes = {c: v["n_queries"] for each in data["quality"].values() for c, v in each.items()}
    counted = ", ".join(f"{TITLES[c]} {sizes[c]}" for c in COLLECTIONS if c in sizes)
    return [
        f"nDCG@10 x 100 over each collection's judged queries ({counted}), exact search, one index per",
        "configuration built with `--lexical bm25` (bm25s, the `english` analyzer: lower-case, English stop",
        "words, Snowball stemmer). Rows: BM25 alone (it does not depend on the encoder); per transform,",
        "dense alone and",
        "hybrid with RRF k = 60 (the vector stores' default) and with whitevec's default `convex:0.5` (0.5 x",
        "min-max(dense) + 0.5 x min-max(BM25) over each ranker's top 100). Transforms are fitted on the",
        "collection's documents. The token-weight rows use each model's best weights on STS",
        "([sts-token-weights.md](sts-token-weights.md)), counted on the collection's documents; an index cannot",
        "record token weights yet (a build with such an encoder is refused), so those rows are scored the way",
        "`tune` scores a candidate: the same exact dense ranking, BM25 and fusion a built index runs.",
        "",
        "**Tuned**: `whitevec.tuning.tune` over what an index can be built from (the raw pooling with `none`,",
        "`whitening-128` and the token-weight row's component removal, without the weights) x dense, lexical,",
        "RRF 60 and convex 0.3 to 0.8, chosen on a seeded half of the queries and scored on the other half, then",
        "the halves swapped; the figure is the mean over all queries, each scored by a choice made without it.",
        "tune keeps the plain dense configuration unless another is significantly better on its half (paired",
        "bootstrap), so on the small collections (15 to 26 queries a half) it often keeps it.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT, help="the folder of hybrid.json and hybrid.md")
    args = parser.parse_args()
    data = json.loads((args.out / "hybrid.json").read_text())
    page = args.out / "hybrid.md"
    with atomic_path(page) as tmp:
        tmp.write_text(markdown(data, args.out, kept_notes(page)), encoding="utf-8")
    print(f"wrote {page}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
