"""The speed of hybrid recall (issue 39's speed targets), shared by the benchmark that measures it
(maintained/bench_hybrid.py) and the hybrid results page that renders it: the record's small arithmetic
(latency and spread summaries, the build ratio), the JSON file each part updates, and ``speed_markdown``, the
page's section, rendered from the record alone (a part the record lacks is left out, not claimed)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common.machine import conditions_sentence, results_header

RESULT = Path(__file__).resolve().parents[2] / "docs" / "results" / "hybrid-speed.json"
PARTS = ("build", "query", "http", "scale", "milvus")
# Issue 39's speed targets.
BUILD_RATIO_TARGET = 1.2
HTTP_HYBRID_OVER_DENSE_MS = 2.0


# ---- the record's arithmetic -----------------------------------------------------------------------------------
def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """Per-call latencies (seconds) as the record keeps them: count, p50, p99 and mean in milliseconds.
    Percentiles by linear interpolation between the closest ranks (numpy's default)."""
    if not seconds:
        raise ValueError("no latencies to summarise")
    ms = sorted(1000.0 * s for s in seconds)

    def percentile(q: float) -> float:
        position = (len(ms) - 1) * q / 100
        low = int(position)
        high = min(low + 1, len(ms) - 1)
        return ms[low] + (ms[high] - ms[low]) * (position - low)

    return {
        "n": len(ms),
        "p50_ms": round(percentile(50), 3),
        "p99_ms": round(percentile(99), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
    }


def spread(seconds: Sequence[float]) -> dict[str, Any]:
    """Repeated timings of one thing (seconds): their median, smallest and largest, and every run."""
    if not seconds:
        raise ValueError("no timings")
    return {
        "median_s": round(statistics.median(seconds), 4),
        "min_s": round(min(seconds), 4),
        "max_s": round(max(seconds), 4),
        "runs_s": [round(s, 4) for s in seconds],
    }


def build_ratio(whitevec_s: Sequence[float], bm25s_s: Sequence[float]) -> dict[str, Any]:
    """whitevec's lexical build against bm25s alone, from runs taken in turns: the ratio of the medians, and
    the median and range of the per-turn ratios (a drift of the machine's load falls on both of a turn)."""
    if len(whitevec_s) != len(bm25s_s) or not whitevec_s:
        raise ValueError("the two systems need the same number of runs, at least one")
    turns = [w / b for w, b in zip(whitevec_s, bm25s_s, strict=True)]
    return {
        "ratio_of_medians": round(statistics.median(whitevec_s) / statistics.median(bm25s_s), 3),
        "turn_ratio_median": round(statistics.median(turns), 3),
        "turn_ratio_range": [round(min(turns), 3), round(max(turns), 3)],
    }


# ---- the file ----------------------------------------------------------------------------------------------
def read_record(path: Path = RESULT) -> dict[str, Any]:
    """The record so far (``{"parts": {}}`` when there is none yet)."""
    if not path.is_file():
        return {"parts": {}}
    data: dict[str, Any] = json.loads(path.read_text())
    data.setdefault("parts", {})
    return data


def write_part(part: str, section: dict[str, Any], path: Path = RESULT) -> dict[str, Any]:
    """Replace one part's section of the record (the others kept as they were measured) and write the file
    through a temporary name; the whole record."""
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; valid: {', '.join(PARTS)}")
    data = read_record(path)
    data["parts"][part] = section
    data["parts"] = {name: data["parts"][name] for name in PARTS if name in data["parts"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    return data


# ---- the page section ------------------------------------------------------------------------------------------
def speed_markdown(data: dict[str, Any]) -> str:
    """The body of the hybrid page's speed section (the page gives its heading) from the record
    (``hybrid-speed.json``): one subsection per part it holds, each with the command, machine, date and
    conditions of its own run."""
    parts = data.get("parts", {})
    lines: list[str] = []
    if not parts:
        return "No part of the speed benchmark is recorded yet.\n"
    render = {"build": _build_lines, "query": _query_lines, "http": _http_lines, "scale": _scale_lines}
    render["milvus"] = _milvus_lines
    for name in PARTS:
        if name in parts:
            lines += [*render[name](parts[name]), ""]
    return "\n".join(lines[:-1]) + "\n"


def _provenance(part: dict[str, Any]) -> list[str]:
    quick = ["**A `--quick` run: small sizes, few repeats; it checks the script, its figures say little.**", ""]
    return [
        *(quick if part.get("quick") else []),
        results_header(f"`{part['command']}`", part["facts"]) + ".",
        "",
        conditions_sentence(part["conditions"]),
        "",
    ]


def _ms(summary: dict[str, Any] | None) -> str:
    return "-" if summary is None else f"{summary['p50_ms']:.2f}"


def _p99(summary: dict[str, Any] | None) -> str:
    return "-" if summary is None else f"{summary['p99_ms']:.2f}"


def _build_lines(part: dict[str, Any]) -> list[str]:
    lines = [
        "### Building the lexical index",
        "",
        *_provenance(part),
        "whitevec: the lexical part of `index build --lexical bm25` (`LexicalIndex.build`, which the build's "
        f"`lexical_part` calls: the `{part['analyzer']}` analyzer and bm25s's score matrix, in memory), then its "
        "two files written (timed apart; bm25s alone writes nothing). bm25s "
        "alone, as a new user runs it: `bm25s.tokenize` with PyStemmer's English stemmer and English stop words, "
        f"then `BM25().index`. The two in turns, {part['repeats']} runs each after one unmeasured run; seconds "
        "are medians (range).",
        "",
        "| corpus | documents | whitevec s | bm25s s | ratio (target <= "
        f"{BUILD_RATIO_TARGET}) | per-turn ratio (range) | writing the files s | bytes/doc whitevec | "
        "bytes/doc bm25s saved |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for row in part["rows"]:
        w, b, r = row["whitevec_s"], row["bm25s_s"], row["ratio"]
        low, high = r["turn_ratio_range"]
        lines.append(
            f"| {row['corpus']} | {row['documents']:,} | {w['median_s']:.3f} ({w['min_s']:.3f}-{w['max_s']:.3f}) "
            f"| {b['median_s']:.3f} ({b['min_s']:.3f}-{b['max_s']:.3f}) | **{r['ratio_of_medians']:.2f}** | "
            f"{r['turn_ratio_median']:.2f} ({low:.2f}-{high:.2f}) | {row['whitevec_save_s']['median_s']:.3f} | "
            f"{row['lexical_bytes_per_document']:.0f} | {row['bm25s_bytes_per_document']:.0f} |"
        )
    return lines


def _query_lines(part: dict[str, Any]) -> list[str]:
    index, latency, excluded = part["index"], part["latency"], part.get("latency_encode_excluded", {})
    lines = [
        "### One query in-process: `Retriever.search`",
        "",
        *_provenance(part),
        f"Cranfield, {index['documents']:,} documents, {index['model']} (pooling `{index['pooling']}`), raw "
        f"vectors, FAISS flat, `--lexical bm25`; one query per call, k={part['k']}, the "
        f"{part['distinct_queries']} queries in turn, {latency['dense']['n']} calls per mode, the modes "
        "interleaved; hybrid with the index's default fusion. `encode excluded`: the same search with the model's "
        "forward pass replaced by a lookup of the query's vector, made beforehand.",
        "",
        "| mode | p50 ms | p99 ms | p50 ms, encode excluded | p99 ms, encode excluded |",
        "|---|---:|---:|---:|---:|",
    ]
    for mode in ("dense", "lexical", "hybrid"):
        if mode in latency:
            ex = excluded.get(mode)
            lines.append(f"| {mode} | {_ms(latency[mode])} | {_p99(latency[mode])} | {_ms(ex)} | {_p99(ex)} |")
    if "encode" in part:
        lines += ["", f"The query's encoding alone: p50 {_ms(part['encode'])} ms, p99 {_p99(part['encode'])} ms."]
    deep = part.get("lexical_depth")
    if deep:
        lines += [
            "",
            f"The lexical ranker alone at depth {deep['depth']} (a query's analysis included): whitevec's "
            f"`LexicalIndex.search` p50 {_ms(deep['whitevec'])} ms (p99 {_p99(deep['whitevec'])}); bm25s's own "
            f"`tokenize` + `retrieve(k={deep['depth']})` p50 {_ms(deep['bm25s'])} ms (p99 {_p99(deep['bm25s'])}).",
        ]
    return lines


def _http_lines(part: dict[str, Any]) -> list[str]:
    p50, ceiling = part["p50_ms"], part.get("ceiling", {})
    lines = [
        "### One client over HTTP: `POST /search`",
        "",
        *_provenance(part),
        "`whitevec serve` on the Cranfield index above, one closed-loop client (benchmarks/common/loadgen.py, its "
        f"own process), {part['requests']} requests per row (one query each, k={part['k']}, the body's `mode`), "
        f"dense and hybrid rows in turns, {part['rounds']} round(s); p50 is the median over the rounds. The "
        "in-process ceiling: `Retriever.search` one query at a time in a fresh process, the same threads.",
        "",
        "| mode | /search p50 ms | p99 ms (median) | in-process p50 ms | over HTTP - in-process ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for mode in ("dense", "hybrid"):
        if mode in p50:
            inside = ceiling.get(mode)
            over = "-" if inside is None else f"{p50[mode] - inside['p50_ms']:+.2f}"
            lines.append(f"| {mode} | {p50[mode]:.2f} | {part['p99_ms'][mode]:.2f} | {_ms(inside)} | {over} |")
    if "dense" in p50 and "hybrid" in p50:
        gap = p50["hybrid"] - p50["dense"]
        met = "met" if gap <= HTTP_HYBRID_OVER_DENSE_MS else "missed"
        lines += [
            "",
            f"Hybrid - dense p50: **{gap:+.2f} ms** (target <= +{HTTP_HYBRID_OVER_DENSE_MS:.0f} ms: {met}).",
        ]
    return lines


def _scale_lines(part: dict[str, Any]) -> list[str]:
    latency = part["latency"]
    lines = [
        f"### {part['documents']:,} documents",
        "",
        *_provenance(part),
        f"Corpus: {part['distinct_texts']:,} distinct texts ({part['sources']}), repeated in order to "
        f"{part['documents']:,} documents (distinct ids; a copy is the same text). Encoder: `{part['encoder']}` "
        f"(a static table, `whitevec distill {part['model']}` with its defaults), raw vectors, FAISS flat, "
        f"`--lexical bm25`. Queries: the Cranfield queries, one per call, k={part['k']}, modes interleaved.",
        "",
        f"- Whole build (encoding included): {part['build_s']:.1f} s; its lexical part (the manifest's record): "
        f"{part['lexical_build_s']:.1f} s",
        f"- Lexical files: {part['lexical_bytes']:,} bytes, **{part['lexical_bytes_per_document']:.0f} bytes per "
        f"document**; the whole index folder {part['index_bytes']:,} bytes (vectors {part['vector_bytes']:,})",
        "",
        "| mode | p50 ms | p99 ms |",
        "|---|---:|---:|",
        *(
            f"| {m} | {_ms(latency[m])} | {_p99(latency[m])} |"
            for m in ("dense", "lexical", "hybrid")
            if m in latency
        ),
    ]
    return lines


def _milvus_lines(part: dict[str, Any]) -> list[str]:
    builds, latency = part["builds"], part["latency"]
    lines = [
        "### Milvus Lite's BM25 beside whitevec's",
        "",
        *_provenance(part),
        f"Cranfield, {part['model']} (pooling `{part['pooling']}`), `--lexical bm25`: on FAISS (bm25s beside the "
        "vectors) and on `--backend milvus` (Milvus Lite; its BM25 function fills a sparse field on insert, so "
        "its lexical side cannot be timed apart: whole builds with and without `--lexical bm25` are timed, the "
        "encoding excluded by vectors made beforehand, and their difference is the lexical side's estimate). "
        f"Builds: medians of {part['repeats']} in turns, after one unmeasured build of each.",
        "",
        "| backend | build s, dense only | build s, with bm25 | difference s |",
        "|---|---:|---:|---:|",
    ]
    for backend, b in builds.items():
        dense, both = b["dense"]["median_s"], b["bm25"]["median_s"]
        lines.append(f"| {backend} | {dense:.2f} | {both:.2f} | {both - dense:+.2f} |")
    searches = list(dict.fromkeys(s for row in latency.values() for s in row))
    lines += [
        "",
        f"One query per call (encode included), {part['queries']} calls per search, interleaved; `hybrid` is the "
        "index's default fusion (on Milvus, whitevec's fusion over the two lists Milvus returns), `hybrid rrf:60` "
        "on Milvus one `hybrid_search` with its `RRFRanker`. p50 ms (p99):",
        "",
        "| backend | " + " | ".join(searches) + " |",
        "|---|" + "---:|" * len(searches),
    ]
    for backend, row in latency.items():
        cells = [f"{_ms(row.get(s))} ({_p99(row.get(s))})" if s in row else "-" for s in searches]
        lines.append(f"| {backend} | " + " | ".join(cells) + " |")
    return lines
