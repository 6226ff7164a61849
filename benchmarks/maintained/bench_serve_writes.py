"""Regenerate docs/results/serve-writes.md (and serve-writes.json): whether searches keep their share of a served
index while another client adds documents as fast as it can (issue 49, item 12; target: search throughput beside
the flood at least half of its idle figure, and search p99 at most 3x its idle p99).

One `whitevec serve --writable` process serves a copy of bench_serve.py's Cranfield index (all-MiniLM-L6-v2,
first-last-avg, whitening-256, FAISS flat, cosine; built once into ``--index``, copied afresh for each run, since
the flood grows it). Four clients search it (POST /search, one Cranfield query each, k=10, closed loop: each
sends its next request when its answer arrives) for ``--seconds``, three times: idle; beside the flood; idle
again, on the index the flood grew. The flood is one more connection posting adds of ``--write-docs`` Cranfield
documents each (new ids) to POST /documents, the next as soon as the previous is answered, from before the timed
searches until they end. Every add is one new version of the index, flushed to disk before its answer, and
merges segments now and then. The clients are benchmarks/common/loadgen.py, one separate process with one
asyncio event loop (aiohttp), on the same cores as the server.

    python benchmarks/maintained/bench_serve_writes.py [--seconds 30] [--lock FILE]
    python benchmarks/maintained/bench_serve_writes.py --render
    python benchmarks/maintained/bench_serve_writes.py --render --baseline OLD.json --baseline-label REV

Run it alone on a quiet machine: the page states the load it saw. ``--render`` rewrites serve-writes.md from
serve-writes.json (after a change to the page's text). Needs the serve extra, aiohttp (dev extra) and the shared
data ($WHITEVEC_DATA or ../shared/data).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import (
    RunConditions,
    command_line,
    conditions_sentence,
    exclusive_lock,
    machine_facts,
    results_header,
)
from benchmarks.common.serving import (
    Server,
    add_index_options,
    build_index,
    cranfield_queries,
    load_row,
    whitevec_server,
)

from whitevec.utils.io import atomic_path

OUT = Path(__file__).resolve().parents[2] / "docs" / "results"
ROWS = ("idle", "flood", "idle after")
THROUGHPUT_SHARE = 0.5  # the target: search QPS beside the flood at least this share of the idle QPS
P99_FACTOR = 3.0  # and search p99 beside the flood at most this many times the idle p99


def cranfield_texts(data_dir: Path | None) -> list[str]:
    """The flood's texts: Cranfield's documents an add takes (not empty, within the server's max_text_chars)."""
    from whitevec.datasets import resolve_data_dir
    from whitevec.datasets.retrieval import read_cranfield
    from whitevec.service.settings import ServeSettings

    corpus = read_cranfield(resolve_data_dir(data_dir) / "retrieval" / "cranfield").corpus
    return [doc.text for doc in corpus if doc.text.strip() and len(doc.text) <= ServeSettings().max_text_chars]


def index_version(server: Server) -> dict[str, Any]:
    """The version the server searches now: count, deleted, segments, version (GET /info)."""
    answer = httpx.get(server.base + "/info", timeout=30)
    answer.raise_for_status()
    version: dict[str, Any] = answer.json()["index"]
    return version


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The three rows on one server, each with the version the index reached after it."""
    if not (args.index / "manifest.json").is_file():
        build_index(args.index, args.data_dir, args.model, args.pooling, args.transform)
    served = work / "index"
    shutil.copytree(args.index, served)
    queries_file, texts_file = work / "queries.json", work / "texts.json"
    queries_file.write_text(json.dumps(cranfield_queries(args.data_dir)))
    texts_file.write_text(json.dumps(cranfield_texts(args.data_dir)))
    server = whitevec_server(served, {"WHITEVEC_SERVE_WRITABLE": "true"}, args.threads, "writable")
    rows: dict[str, Any] = {}
    try:
        for name in ROWS:
            options = ["--seconds", str(args.seconds)]
            if name == "flood":
                options += ["--writes-url", server.base + "/documents", "--write-docs", str(args.write_docs)]
                options += ["--write-texts", str(texts_file)]
            result = load_row(
                server, "/search", "search", queries_file, args.clients, 10**9, args.k, options=options
            )
            rows[name] = {**result, "index_after": index_version(server)}
            print(f"{name}: {json.dumps(rows[name])}", file=sys.stderr)
    finally:
        server.stop()
    return rows


def markdown(data: dict[str, Any]) -> str:
    rows = data["rows"]
    lines = [
        "# Serving under a write flood: searches beside a client adding as fast as it can",
        "",
        results_header(f"`{data['command']}`", data["facts"]),
        "",
        (__doc__ or "").split("\n\n    python")[0].split("\n\n", 1)[1].strip(),
        "",
        f"Index: Cranfield, {data['documents']} documents at the start, {data['model']}; server threads "
        f"{data['threads']}; {data['clients']} search clients, {data['seconds']:g} s per row; adds of "
        f"{data['write_docs']} documents. {conditions_sentence(data['conditions'])} Per row, the 1-minute load "
        "average just before it (raised by the rows before it: the server and generator themselves).",
        "",
        "| row | search QPS | p50 ms | p99 ms | errors | adds/s (documents/s) | add p50 ms | add p99 ms "
        "| server cores | index after: documents, segments, version | load before |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for name in ROWS:
        r = rows[name]
        after = r["index_after"]
        writes = "-"
        if "writes" in r:
            writes = f"{r['writes_per_s']:.2f} ({r['writes_per_s'] * r['write_docs']:.1f})"
        add_p50 = "-" if r.get("write_p50_ms") is None else f"{r['write_p50_ms']:.0f}"
        add_p99 = "-" if r.get("write_p99_ms") is None else f"{r['write_p99_ms']:.0f}"
        lines.append(
            f"| {name} | {r['qps']:.1f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
            f"{r['errors'] + r.get('write_errors', 0)} | {writes} | {add_p50} | {add_p99} | "
            f"{r['server_cpu_s'] / r['seconds']:.2f} | {after['count']}, {after['segments']}, "
            f"{after['version']} | {r['load_before']:.2f} |"
        )
    return "\n".join([*lines, "", *target_lines(rows), *baseline_lines(data.get("baseline"))]) + "\n"


def target_lines(rows: dict[str, Any]) -> list[str]:
    """The flood row against the idle one, and issue 49's target."""
    idle, flood = rows["idle"], rows["flood"]
    share, factor = flood["qps"] / idle["qps"], flood["p99_ms"] / idle["p99_ms"]
    met = share >= THROUGHPUT_SHARE and factor <= P99_FACTOR
    return [
        f"Beside the flood, searches kept **{share:.2f}x** their idle throughput and their p99 was "
        f"**{factor:.2f}x** the idle p99 (target, issue 49: at least {THROUGHPUT_SHARE}x and at most "
        f"{P99_FACTOR:g}x): {'met' if met else 'missed'}.",
    ]


def baseline_lines(baseline: dict[str, Any] | None) -> list[str]:
    """The same run of an earlier commit (``--baseline``), for the before and after."""
    if baseline is None:
        return []
    rows = baseline["rows"]
    idle, flood = rows["idle"], rows["flood"]
    return [
        "",
        f"Before (commit {baseline['label']}, where a write ran alone on the thread that answers searches; the "
        f"same command with that commit's server; {conditions_sentence(baseline['conditions']).rstrip('.')}): "
        "idle "
        f"{idle['qps']:.1f} searches/s, p99 {idle['p99_ms']:.1f} ms; beside the flood {flood['qps']:.1f}/s, p99 "
        f"{flood['p99_ms']:.1f} ms, {flood['writes_per_s']:.2f} adds/s: **{flood['qps'] / idle['qps']:.2f}x** the "
        f"idle throughput and **{flood['p99_ms'] / idle['p99_ms']:.2f}x** its p99.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_index_options(parser)
    parser.add_argument("--seconds", type=float, default=30.0, help="timed seconds per row")
    parser.add_argument("--clients", type=int, default=4, help="search clients")
    parser.add_argument("--write-docs", type=int, default=4, help="documents per add of the flood")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the server")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--lock", type=Path, default=None, help="hold an exclusive lock on this file meanwhile")
    parser.add_argument("--render", action="store_true", help="rewrite serve-writes.md from its JSON, no run")
    parser.add_argument("--baseline", type=Path, default=None, help="with --render: an earlier commit's JSON")
    parser.add_argument("--baseline-label", default="", help="that commit, as the page names it")
    args = parser.parse_args()
    if args.render:
        data = json.loads((args.out / "serve-writes.json").read_text())
        if args.baseline is not None:
            before = json.loads(args.baseline.read_text())
            kept = {key: before[key] for key in ("rows", "conditions", "facts")}
            data["baseline"] = {"label": args.baseline_label, **kept}
    else:
        with exclusive_lock(args.lock) as held, tempfile.TemporaryDirectory(prefix="whitevec-flood-") as work:
            conditions = RunConditions(held)
            rows = run(args, Path(work))
            manifest = json.loads((args.index / "manifest.json").read_text())
            data = {
                "command": command_line(),
                "facts": machine_facts("fastapi", "uvicorn", "aiohttp"),
                "conditions": conditions.record(),
                "documents": manifest["count"],
                "model": args.model,
                "threads": args.threads,
                "clients": args.clients,
                "seconds": args.seconds,
                "write_docs": args.write_docs,
                "rows": rows,
            }
    args.out.mkdir(parents=True, exist_ok=True)
    pages = [("serve-writes.md", markdown(data))]
    if not args.render or args.baseline is not None:
        pages.insert(0, ("serve-writes.json", json.dumps(data, indent=1) + "\n"))
    for name, text in pages:
        with atomic_path(args.out / name) as tmp:
            tmp.write_text(text)
    print(markdown(data))
    if sum(r["errors"] + r.get("write_errors", 0) for r in data["rows"].values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
