"""whitevec beside the embedded search libraries a user would pick instead (issue 52): txtai, LanceDB, Chroma,
Qdrant Edge and Milvus Lite, on quality (nDCG@10 of dense, lexical and hybrid search on Cranfield, MED, CACM and
ADI, all-MiniLM-L6-v2 vectors given to every system) and on speed (ingest, single-query latency of each mode and
of dense filtered at 10% and 1% passing, batched queries a second, add and delete of 10 documents, reopening from
disk, peak RSS of search, bytes on disk) at N documents. Writes benchmarks/results/peers.json (a part run alone
replaces only its own entries) and renders docs/results/peers.md from it (benchmarks/pages/peers.py).

Runs in the peers' venv (`make peers`: pyproject's `bench` extra, locked in benchmarks/peers/requirements.lock),
never in `make install`'s:

    .venv-peers/bin/python benchmarks/maintained/bench_peers.py --cache /work/cache52            # everything
    .venv-peers/bin/python benchmarks/maintained/bench_peers.py --quality-only --systems whitevec,lancedb
    .venv-peers/bin/python benchmarks/maintained/bench_peers.py --speed-only --sizes 10000 --lock FILE

Each job of each system runs in a process of its own (``--worker JOB --settings JSON``, one ``RESULT`` line), the
systems in turn, so imports, caches and memory never mix. The inputs (benchmarks/common/peers/inputs.py:
vectors encoded once, the speed corpora) are made on first use and kept in ``--cache``, outside the repository.
The systems and their settings: benchmarks/common/peers/systems/.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the repository root: benchmarks.common, benchmarks.common.peers

from benchmarks.common.machine import (  # noqa: E402
    RunConditions,
    command_line,
    exclusive_lock,
    machine_facts,
    versions,
)
from benchmarks.common.peers.inputs import COLLECTIONS, DEFAULT_CACHE, LEXICAL_MAX  # noqa: E402
from benchmarks.common.peers.jobs import JOBS  # noqa: E402
from benchmarks.common.peers.systems import SYSTEMS, system_module  # noqa: E402
from benchmarks.common.runs import RESULTS, emit, run_page, run_worker, save_result  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000)
RESULT_NAME = "peers"
SPEED_JOBS = ("build", "search", "writes")
WORKER_TIMEOUT_S = 4 * 3600


def names(text: str, valid: tuple[str, ...], what: str) -> list[str]:
    """A comma-separated list of ``valid`` names, in the order given; a ValueError naming an unknown one."""
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in chosen if name not in valid]
    if unknown or not chosen:
        raise ValueError(f"unknown {what} {', '.join(unknown) or '(none)'}; valid: {', '.join(valid)}")
    return chosen


def sizes(text: str) -> list[int]:
    """``--sizes``: positive integers, comma-separated (``10000,100000``); a ValueError otherwise."""
    try:
        chosen = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        chosen = []
    if not chosen or min(chosen) < 1:
        raise ValueError(f"--sizes takes positive integers, comma-separated; got {text!r}")
    return chosen


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", choices=sorted(JOBS), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--settings", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated (default: all)")
    parser.add_argument("--collections", default=",".join(COLLECTIONS), help="the quality rows' collections")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="the speed rows' document counts")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--quality-only", action="store_true")
    only.add_argument("--speed-only", action="store_true")
    parser.add_argument(
        "--cache", type=Path, default=DEFAULT_CACHE, help="the inputs, made once (outside the repo)"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/whitevec-bench/peers"), help="the indexes")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / f"{RESULT_NAME}.json")
    parser.add_argument("--no-page", action="store_true", help="leave docs/results/peers.md as it is")
    parser.add_argument(
        "--lock", type=Path, default=None, help="hold an exclusive lock on this file while measuring"
    )
    args = parser.parse_args(argv)
    if args.worker is None:
        try:
            args.systems = names(args.systems, SYSTEMS, "system")
            args.collections = names(args.collections, COLLECTIONS, "collection")
            args.sizes = sizes(args.sizes)
        except ValueError as exc:  # as argparse reports a bad argument: usage, one error line, exit 2
            parser.error(str(exc))
    return args


def job(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """One job in a fresh process; its result, or ``{"error": ...}`` (printed, and recorded: the page says so)."""
    result = run_worker(Path(__file__), [name, "--settings", json.dumps(settings)], timeout=WORKER_TIMEOUT_S)
    label = ", ".join(f"{k}={v}" for k, v in settings.items() if k in ("system", "collection", "size"))
    print(f"{name} {label}: {result.get('error', 'ok')}", file=sys.stderr, flush=True)
    return result


def quality(args: argparse.Namespace, base: dict[str, Any]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for system in args.systems:
        table[system] = {c: job("quality", {**base, "system": system, "collection": c}) for c in args.collections}
    return table


def speed(args: argparse.Namespace, base: dict[str, Any]) -> dict[str, Any]:
    table: dict[str, Any] = {}
    for size in args.sizes:
        table[str(size)] = {}
        for system in args.systems:
            settings = {**base, "system": system, "size": size}
            row: dict[str, Any] = {"build": job("build", settings)}
            if "error" not in row["build"]:
                row["search"] = job("search", settings)
                row["writes"] = job("writes", settings)
            table[str(size)][system] = row
    return table


def whole_quality_run(args: argparse.Namespace) -> bool:
    """Whether the run's quality part scored every system on every collection (so replaced every entry)."""
    return set(args.systems) == set(SYSTEMS) and set(args.collections) == set(COLLECTIONS)


def whole_speed_run(args: argparse.Namespace, record: dict[str, Any]) -> bool:
    """Whether the run's speed part measured every system at every size the record holds (so replaced every
    entry, and the runs before it describe nothing on the page)."""
    return set(args.systems) == set(SYSTEMS) and {int(n) for n in record.get("speed", {})} <= set(args.sizes)


def merged(path: Path, part: str, fresh: dict[str, Any]) -> dict[str, Any]:
    """The record at ``path`` with ``fresh``'s entries of ``part`` put in (a run of some systems or sizes keeps
    the rest)."""
    record: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    section = record.setdefault(part, {})
    for key, value in fresh.items():
        if isinstance(value, dict) and isinstance(section.get(key), dict):
            section[key].update(value)
        else:
            section[key] = value
    return record


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker is not None:
        emit(JOBS[args.worker](json.loads(args.settings)))
        return
    base = {"cache": str(args.cache), "work": str(args.work), "data_dir": args.data_dir}
    args.work.mkdir(parents=True, exist_ok=True)
    parts = [p for p, skip in (("quality", args.speed_only), ("speed", args.quality_only)) if not skip]
    with exclusive_lock(args.lock) as lock:
        for part in parts:
            conditions = RunConditions(lock)
            fresh = quality(args, base) if part == "quality" else speed(args, base)
            record = merged(args.out, part, fresh)
            for system in SYSTEMS:  # every system's, as the code says now (the modules import no library)
                module = system_module(system)
                record.setdefault("settings", {})[system] = module.SETTINGS
                record.setdefault("versions", {})[system] = versions(*module.PACKAGES)
            # Every run that wrote entries of a part, in order: a partial run adds its own, keeping the others';
            # a run of every system on every collection (quality) or at every size held (speed) replaced them all,
            # so it is the only one left.
            runs = record.setdefault("runs", {})
            whole = whole_quality_run(args) if part == "quality" else whole_speed_run(args, record)
            if whole:
                runs[part] = []
            runs.setdefault(part, []).append(
                {
                    "command": command_line(),
                    "machine": machine_facts(
                        "txtai", "lancedb", "chromadb", "qdrant-edge-py", "pymilvus", "milvus-lite"
                    ),
                    "conditions": conditions.record(),
                    "lexical_max": LEXICAL_MAX,
                }
            )
            args.out.parent.mkdir(parents=True, exist_ok=True)
            if args.out == RESULTS / f"{RESULT_NAME}.json":
                save_result(RESULT_NAME, record)
            else:
                args.out.write_text(json.dumps(record, indent=2) + "\n")
    if not args.no_page:
        run_page("peers", str(args.out))


if __name__ == "__main__":
    main()
