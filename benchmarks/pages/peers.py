"""The page of benchmarks/maintained/bench_peers.py: docs/results/peers.md rendered from peers.json, measuring
nothing (the hand-written notes below the page's notes mark are kept).

    python benchmarks/pages/peers.py [benchmarks/results/peers.json] [--out docs/results/peers.md]

Every ratio is whitevec's figure over the peer's, computed here from the record.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import conditions_sentence, facts_markdown, results_header
from benchmarks.common.pages import NOTES_MARK, kept_notes

REPO = Path(__file__).resolve().parents[2]
RECORD = REPO / "benchmarks" / "results" / "peers.json"
OUT = REPO / "docs" / "results" / "peers.md"
TITLES = {"cranfield": "Cranfield", "med": "MED", "cacm": "CACM", "adi": "ADI"}
SYSTEM_TITLES = {
    "whitevec": "whitevec",
    "txtai": "txtai",
    "lancedb": "LanceDB",
    "chroma": "Chroma",
    "qdrant_edge": "Qdrant Edge",
    "milvus_lite": "Milvus Lite",
}
INPUTS = """\
Quality: the four collections' documents and judged queries, encoded once by all-MiniLM-L6-v2 (whitevec's
encoder, its default pooling, unit rows) and given to every system that takes vectors (txtai too, through its
`external` vectors); each system's lexical ranker reads the texts itself. One scorer for every row:
`whitevec.evaluation.retrieval.score_rankings`, the one `whitevec eval-retrieval` averages with, nDCG@10 x 100
over the judged queries.

Speed: N documents, each the text of two of the four collections' documents drawn at random (seed 0) and joined
by a blank line (no two alike); their vectors clustered synthetic unit rows of 384 dimensions
(`clustered_unit_vectors`, benchmarks/common/data.py: encoding 100,000 texts with MiniLM takes about an hour on
2 cores and says nothing about a store); an integer field `bucket` in [0, 100) drawn at random, filtered
`bucket < 10` (10% pass) and `bucket < 1` (1%). Past {lexical_max:,} documents the rows are dense only and a
document's text is the first 100 characters of each of its two. The queries: the collections' query texts in
turn with 200 clustered query vectors. Each job (build, search, writes) of each system ran in a fresh process,
the systems in turn. Latencies: one query per call, k = 10, after 10 unmeasured calls; batched: the 200 dense
queries in one call. Writes: add 10 documents, then delete 10 other documents, 5 times (median and slowest),
each persisted before the call returns. Reopen: opening the index from disk in a fresh process. Peak RSS: the
search process's (ru_maxrss), which reopened the index and ran every search."""


def _ratio(whitevec: float | None, peer: float | None) -> str:
    if whitevec is None or peer is None or not peer or math.isnan(peer):
        return ""
    return f" ({whitevec / peer:.2f}x)"


def _settings_lines(record: dict[str, Any]) -> list[str]:
    lines = ["| system | versions | setting | what it is |", "|---|---|---|---|"]
    for system, settings in record.get("settings", {}).items():
        versions = ", ".join(f"{k} {v}" for k, v in record.get("versions", {}).get(system, {}).items())
        for number, (name, what) in enumerate(settings.items()):
            first = number == 0
            title = SYSTEM_TITLES.get(system, system) if first else ""
            lines.append(f"| {title} | {versions if first else ''} | `{name}` | {what} |")
    return lines


def quality_lines(quality: dict[str, Any]) -> list[str]:
    collections = list(dict.fromkeys(c for per in quality.values() for c in per))
    lines = [
        "| nDCG@10 | " + " | ".join(TITLES.get(c, c) for c in collections) + " |",
        "|---" + "|---:" * len(collections) + "|",
    ]
    errors = []
    for system, per in quality.items():
        rows: dict[tuple[str, str], dict[str, float]] = {}
        for collection, result in per.items():
            if "error" in result:
                where = TITLES.get(collection, collection)
                errors.append(f"{SYSTEM_TITLES.get(system, system)} on {where}: {result['error']}")
                continue
            for setting, modes in result["ndcg_10"].items():
                for mode, score in modes.items():
                    rows.setdefault((setting, mode), {})[collection] = score
        seen: set[tuple[str, tuple[float | None, ...]]] = set()
        for (setting, mode), scores in rows.items():
            same = (mode, tuple(scores.get(c) for c in collections))
            if same in seen:  # a setting that changes only another mode's ranking: its row said once
                continue
            seen.add(same)
            cells = " | ".join(f"{scores[c]:.2f}" if c in scores else "" for c in collections)
            lines.append(f"| {SYSTEM_TITLES.get(system, system)} {mode} (`{setting}`) | {cells} |")
    return lines + ([""] + [f"Failed: {e}" for e in errors] if errors else [])


def _speed_rows(row: dict[str, Any]) -> dict[str, float | None]:
    """One system's figures at one size, by the page's row names (None: not measured)."""
    build, search, writes = row.get("build", {}), row.get("search", {}), row.get("writes", {})
    figures: dict[str, float | None] = {
        "ingest (s)": build.get("ingest_s"),
        "bytes on disk (MB)": build["bytes"] / 1e6 if "bytes" in build else None,
        "reopen (s)": search.get("reopen_s"),
        "peak RSS of search (MiB)": search.get("peak_rss_mib"),
        "batched dense (queries/s)": search.get("batched_qps"),
    }
    for mode, latency in search.get("latency", {}).items():
        figures[f"{mode} p50 (ms)"] = latency["p50_ms"]
        figures[f"{mode} p99 (ms)"] = latency["p99_ms"]
    for name in ("add_10", "delete_10"):
        if name in writes:
            figures[f"{name.replace('_', ' ')} (ms, median)"] = 1000 * writes[name]["median_s"]
            # The slowest of the rounds too: a write that pays for something once (the first) hides in a median.
            figures[f"{name.replace('_', ' ')} (ms, slowest)"] = 1000 * writes[name]["max_s"]
    return figures


def speed_lines(size: str, systems: dict[str, Any]) -> list[str]:
    figures = {s: _speed_rows(row) for s, row in systems.items()}
    names = list(dict.fromkeys(name for per in figures.values() for name in per))
    lines = [
        f"### {int(size):,} documents",
        "",
        "Each peer's cell: its figure (whitevec's / the peer's).",
        "",
        "| | " + " | ".join(SYSTEM_TITLES.get(s, s) for s in systems) + " |",
        "|---" + "|---:" * len(systems) + "|",
    ]
    own = figures.get("whitevec", {})
    for name in names:
        cells = []
        for system in systems:
            value = figures[system].get(name)
            text = "" if value is None else f"{value:,.3g}" if value < 100 else f"{value:,.0f}"
            cells.append(text + ("" if system == "whitevec" else _ratio(own.get(name), value)))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    errors = [
        f"{SYSTEM_TITLES.get(s, s)}: {row[j]['error']}"
        for s, row in systems.items()
        for j in row
        if "error" in row[j]
    ]
    return lines + ([""] + [f"Failed: {e}" for e in errors] if errors else [])


def render(record: dict[str, Any], out: Path | None = None) -> str:
    runs: dict[str, list[dict[str, Any]]] = record.get("runs", {})
    facts = [run["machine"] for part in runs.values() for run in part]
    command = "`.venv-peers/bin/python benchmarks/maintained/bench_peers.py` (`make peers` first)"
    parts = ["# whitevec beside its peers: txtai, LanceDB, Chroma, Qdrant Edge, Milvus Lite", ""]
    if facts:
        parts += [results_header(command, *facts), ""]
    lexical_max = next((run.get("lexical_max", 100_000) for part in runs.values() for run in part), 100_000)
    parts += [INPUTS.format(lexical_max=lexical_max), "", "## Systems and settings", ""]
    parts += [*_settings_lines(record), ""]
    if "quality" in record:
        note = "A row a setting ranks exactly as an earlier setting of the same system is left out (said once)."
        parts += ["## Quality", "", note, "", *quality_lines(record["quality"]), ""]
        parts += [f"`{run['command']}`: {facts_markdown(run['machine'])}" for run in runs.get("quality", [])]
        parts += [""]
    if "speed" in record:
        parts += ["## Speed", ""]
        for run in runs.get("speed", []):
            parts += [f"`{run['command']}`: {conditions_sentence(run['conditions'])}", ""]
        for size, systems in sorted(record["speed"].items(), key=lambda item: int(item[0])):
            parts += [*speed_lines(size, systems), ""]
    return "\n".join(parts) + "\n" + NOTES_MARK + kept_notes(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", nargs="?", type=Path, default=RECORD)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    text = render(json.loads(args.record.read_text()), args.out)
    args.out.write_text(text if text.endswith("\n") else text + "\n")


if __name__ == "__main__":
    main()
