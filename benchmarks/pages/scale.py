"""docs/results/scale.md from the recorded results, measuring nothing: the Ray engine's cost and the plan for 100M
documents (benchmarks/results/scale.json, from maintained/bench_scale.py), then the section on 1-bit codes at 1M
vectors (benchmarks/results/binary_scale.json, from maintained/bench_binary.py) when it has been measured.

    python benchmarks/pages/scale.py

Both benchmarks run it after they save their results. The settings the page names: benchmarks/common/scale.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import conditions_sentence, facts_markdown, results_header
from benchmarks.common.runs import RESULTS
from benchmarks.common.scale import BATCH, CPUS, DIMS, MODEL, MULTIPLIERS, POOLING, TIMED, TRAIN_SAMPLE, TRANSFORM

DOC = Path(__file__).resolve().parents[2] / "docs" / "results" / "scale.md"


# ---- the Ray engine's cost and the plan (scale.json) -----------------------------------------------------------
def markdown(result: dict[str, Any], binary: dict[str, Any] | None) -> str:
    """scale.md: the Ray engine's cost and the plan from ``scale.json``, then the 1-bit section from
    ``binary_scale.json`` (``binary``) when there is one."""
    lines = [*_builds_lines(result), *_fits_lines(result), *_plan_lines(result)]
    if binary is not None:
        lines += report_lines(binary)
    return "\n".join(lines)


def _builds_lines(result: dict[str, Any]) -> list[str]:
    runs = result["runs"]
    return [
        "# Scaling out: the Ray engine's cost here, and a plan for 100M documents",
        "",
        results_header(f"`{result['command']}`", result["machine"]),
        "",
        facts_markdown(result["machine"]),
        f"Load average before the run: {result['load_before']}.",
        "",
        f"Corpus: the {runs[0]['local']['docs']:,} unique sentences of STS-B and STS12-15 (1 copy), and with up "
        "to 3 more copies in other letter cases (lower, upper, swapped; distinct ids, distinct texts, so no "
        "build encodes one text for another, but the same token sequences: the tokenizer lower-cases); "
        f"{MODEL}, {POOLING}, float32, batch {BATCH}, {TRANSFORM}, Milvus Lite; {CPUS} CPUs for both builds.",
        "",
        "| documents | build | seconds | sentences/s | CPU seconds | sentences per CPU-second | peak memory |",
        "|---:|---|---:|---:|---:|---:|---|",
        *[row for run in runs for row in _build_rows(run)],
        "",
        "Ray / single process, target >= 0.85: "
        + "; ".join(
            f"**{r['ratio']:.2f}x** in sentences/s at {r['local']['docs']:,} documents "
            f"({r['cpu_ratio']:.2f}x per CPU-second)"
            for r in runs
        )
        + ". The Ray time includes starting the actor pool (each actor loads the model), moments, the "
        "duplicate-id check and the writes to Milvus (documents included: with the Ray engine they live in "
        "Milvus). On a busy machine (load average above the 2 cores) the wall-clock ratio favours whichever "
        "build runs more processes; the per-CPU-second ratio does not.",
        "",
    ]


def _fits_lines(result: dict[str, Any]) -> list[str]:
    fits = result.get("fits")
    if not fits:
        return []
    return [
        "Fixed cost and rate, from the smallest and largest corpus (seconds = fixed + documents / rate):",
        "",
        "| build | fixed seconds | sentences/s past them | sentences per CPU-second past them |",
        "|---|---:|---:|---:|",
        *[
            f"| {name} | {fit['fixed_seconds']} | {fit['docs_per_s']} | {fit['docs_per_cpu_s']} |"
            for name, fit in fits.items()
        ],
        "",
    ]


def _plan_lines(result: dict[str, Any]) -> list[str]:
    plan, per_cpu, fits = result["plan"], result["ray_docs_per_s_per_cpu"], result.get("fits")
    return [
        f"## 100M documents at {per_cpu:.1f} sentences per CPU-second (the Ray build's, "
        + ("past its fixed costs" if fits else "measured above")
        + ")",
        "",
        "Encoding hours (one actor per CPU; sentences of this length; longer documents cost about in proportion "
        "to their tokens):",
        "",
        "| CPUs | hours |",
        "|---:|---:|",
        *[f"| {cpus} | {hours} |" for cpus, hours in plan["hours_by_cpus"].items()],
        "",
        "Milvus memory for the vectors of 100M documents (GiB; `storage_estimate`: codes, ids, HNSW links with "
        "M=32, IVF nlist=16384; Milvus's own overhead and the scalar fields holding the documents come on top):",
        "",
        "| index + encoding | " + " | ".join(f"d={d}" for d in DIMS) + " |",
        "|---|" + "---:|" * len(DIMS),
        *[
            f"| {name} | " + " | ".join(str(row.get(d, row.get(str(d), "-"))) for d in DIMS) + " |"
            for name, row in plan["milvus_gib_by_dim"].items()
        ],
        "",
    ]


def _build_rows(run: dict[str, Any]) -> list[str]:
    local, rayed = run["local"], run["ray"]
    return [
        f"| {local['docs']:,} | single process (2 torch threads) | {local['seconds']} | {local['docs_per_s']} | "
        f"{local['cpu_seconds']} | {local['docs_per_cpu_s']} | {local['peak_mib']} MiB |",
        f"| {rayed['docs']:,} | Ray, 2 actors x 1 CPU (+ `ray.init` {rayed['ray_init_seconds']} s, not counted) | "
        f"{rayed['seconds']} | {rayed['docs_per_s']} | {rayed['cpu_seconds']} | {rayed['docs_per_cpu_s']} | "
        f"driver {rayed['peak_mib']} MiB; actors {', '.join(str(v) for v in rayed['actor_peak_mib'])} MiB |",
    ]


# ---- the section on 1-bit codes (binary_scale.json) ----------------------------------------------------------
PENDING = "pending"


def _mb(value: float | None) -> str:
    return PENDING if value is None else f"{value / 1e6:,.0f}"


def _part_conditions(part: dict[str, Any]) -> str:
    """The conditions a timing part recorded (parts run before the record kept the three load averages)."""
    if "conditions" in part:
        return conditions_sentence(part["conditions"])
    return f"load average before {part['load_average_before']};"


def report_lines(result: dict[str, Any]) -> list[str]:
    """scale.md's section on 1-bit codes at 1M vectors, from ``binary_scale.json`` (timing cells say pending
    until the timing parts have run)."""
    recall = result.get("recall")
    if not recall:
        return []
    timing = (result.get("timing") or {}).get("indexes", {})
    rescore = (result.get("rescore") or {}).get("indexes", {})
    lines = [
        f"## 1-bit codes at {recall['n']:,} vectors: recall, speed, memory",
        "",
        f"Recall part: `{recall['command']}`; {facts_markdown(recall['machine'])}",
    ]
    for name, part in (("Timing part", result.get("timing")), ("Rescoring part", result.get("rescore"))):
        if part:
            lines.append(
                f"{name}: `{part['command']}`; {_part_conditions(part)} {facts_markdown(part['machine'])}"
            )
    lines += [
        "",
        f"{recall['n']:,} synthetic {recall['dim']}-d unit vectors (benchmarks/common/data.py, seeded), "
        f"recall on {recall['queries']:,} queries (perturbed corpus vectors); whitevec index folders (flat, "
        f"cosine; codes trained on at most a seeded {TRAIN_SAMPLE:,}-vector sample), searched through the loaded "
        "store, top 10. "
        "Recall@10 against exact search; `+rescore`: the top K x 10 re-ranked from float16 vectors on disk. "
        "RAM / disk bytes a vector from the manifest; RSS: growth of a fresh process's resident memory when it "
        "loads the index (anonymous: what it read into memory; the rescoring file is mapped, its pages counted "
        "after the searches). QPS: one batched search call after a warm-up.",
        "",
        "| index | RAM B/vec | disk B/vec | recall@10 | x1 | x2 | x4 | x10 | load RSS (MB) | mapped after "
        "searches (MB) | batched QPS | p50 / p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, row in recall["indexes"].items():
        by_k = row.get("recall_at_10_by_multiplier", {})
        cells = [name, str(row["ram_bytes_per_vector"]), str(row["disk_bytes_per_vector"])]
        cells.append(f"{row['recall_at_10']:.3f}" if "recall_at_10" in row else "-")
        cells += [f"{by_k[str(m)]:.3f}" if str(m) in by_k else "-" for m in MULTIPLIERS]
        t = timing.get(name)
        if name not in TIMED:
            cells += ["-"] * 4
        elif t is None or "error" in t:
            cells += [PENDING] * 4
        else:
            cells += [
                _mb(t["load_rss_growth_bytes"]),
                _mb(t["file_rss_after_searches_bytes"]),
                f"{t['batched_qps']:,.1f}",
                f"{t['p50_ms']} / {t['p99_ms']}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *_speed_verdict(timing), *_rescore_lines(rescore), ""]
    return lines


def _speed_verdict(timing: dict[str, Any]) -> list[str]:
    flat = timing.get("float32")
    if not flat or "error" in flat:
        return [f"Target (>= 10x the QPS of flat float32 at <= 1/24 of its RSS): {PENDING}."]
    out = []
    for name in ("binary-rr", "rabitq", "binary-rr+rescore", "rabitq+rescore"):
        t = timing.get(name)
        if not t or "error" in t:
            continue
        speed = t["batched_qps"] / flat["batched_qps"]
        single = flat["p50_ms"] / t["p50_ms"]  # one query at a time: the rate is 1 / latency
        memory = t["load_rss_growth_bytes"] / flat["load_rss_growth_bytes"]
        met = speed >= 10 and memory <= 1 / 24
        out.append(
            f"- {name}: {speed:.1f}x the batched QPS of flat float32 at {memory:.3f} of its load RSS "
            f"(1/24 = 0.042): **{'met' if met else 'not met'}**; one query at a time {single:.1f}x "
            f"(p50 {t['p50_ms']:.2f} ms against {flat['p50_ms']:.1f} ms)."
        )
    return out


def _rescore_lines(rescore: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "Rescoring from disk, single queries (p50 / p99 ms), the rescoring file's pages in the page cache (warm) "
        "or evicted before every query (cold):",
        "",
        "| index | " + " | ".join(f"x{m} warm | x{m} cold" for m in MULTIPLIERS) + " |",
        "|---|" + "---|---|" * len(MULTIPLIERS),
    ]
    for name in (n for n in TIMED if "+rescore" in n):
        row = rescore.get(name)
        cells = [name]
        for m in MULTIPLIERS:
            got = None if not row or "error" in row else row["by_multiplier"].get(str(m))
            if got is None:
                cells += [PENDING, PENDING]
            else:
                cells += [f"{got[c]['p50_ms']} / {got[c]['p99_ms']}" for c in ("warm", "cold")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    binary = RESULTS / "binary_scale.json"
    result = json.loads((RESULTS / "scale.json").read_text())
    text = markdown(result, json.loads(binary.read_text()) if binary.exists() else None)
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
