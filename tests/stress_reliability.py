"""Reliability under stress: loads racing a rebuilding process, and the interrupt tests repeated on busy cores.

    python tests/stress_reliability.py                       # both parts, defaults below
    python tests/stress_reliability.py --loads 3000 --runs 20

Part 1 (``race``): one process rebuilds an index over and over, alternating two corpora; another process loads
it in a loop (``Retriever.load`` + a search, and ``read_manifest`` with every checksum) and checks that each
load answers exactly as one of the two versions does. It counts loads, mixed results and errors by type.
Part 2 (``interrupts``): runs the tests that interrupt or kill processes (SIGINT, SIGKILL, SIGTERM) ``--runs``
times each while two busy loops hold both cores, every run started with SIGINT ignored as a shell without
job control starts background commands (the way the suite once failed). It counts failures.

Writes benchmarks/results/reliability.json; ``--markdown`` prints the table for docs/results/reliability.md.
The encoder is the suite's hashed stand-in (no model), so a load costs milliseconds and thousands fit in minutes.
The script lives with the suite whose interrupt tests, corpora and stand-in encoder it runs (pytest collects
nothing from it: its name does not start with test_).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.common.machine import cpu_model  # noqa: E402

RESULT_FILE = REPO / "benchmarks" / "results" / "reliability.json"
INTERRUPT_TESTS = [
    "tests/test_index_interrupt.py",  # SIGKILL and SIGINT in the middle of a build
    "tests/test_fail_early.py::test_ctrl_c_says_interrupted_and_exits_130",  # the CLI under SIGINT
    "tests/test_service_protection.py::test_signal_stops_the_server_whatever_the_clients_do",  # SIGTERM, SIGINT
]
VERSIONS = {"a": (2000, 1), "b": (1500, 2)}  # tag: (documents, seed)


def corpus(tag: str) -> list[Any]:
    from tests.index_helpers import sentences
    from whitevec.index import Document

    n, seed = VERSIONS[tag]
    return [Document(f"{tag}{i}", text) for i, text in enumerate(sentences(n, seed=seed, length=9))]


def rebuild_forever(out: str, transform: str) -> None:
    """Child: rebuild ``out`` alternating the two corpora until killed; print the count after each build."""
    from tests.index_helpers import HashEncoder
    from whitevec.index import Retriever

    versions = [corpus("a"), corpus("b")]
    n = 0
    while True:
        Retriever.build(versions[n % 2], out, encoder=HashEncoder(dim=64), transform=transform).close()  # type: ignore[arg-type]
        n += 1
        print(n, flush=True)


def race(workdir: Path, loads: int, transform: str) -> dict[str, Any]:
    from tests.index_helpers import HashEncoder, sentences
    from whitevec.index import Retriever, read_manifest

    encoder: Any = HashEncoder(dim=64)
    queries = sentences(8, seed=99, length=4)
    expected = {}
    for tag in VERSIONS:
        with Retriever.build(corpus(tag), workdir / tag, encoder=encoder, transform=transform) as built:
            expected[tag] = [[(h.id, round(h.score, 5)) for h in hits] for hits in built.search(queries, k=10)]
    out = workdir / "idx"
    Retriever.build(corpus("a"), out, encoder=encoder, transform=transform).close()
    log_path = workdir / "rebuilder.log"
    with log_path.open("w") as log:
        child = subprocess.Popen(
            [sys.executable, "-W", "ignore", __file__, "--rebuild", str(out), "--transform", transform],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    outcomes: Counter[str] = Counter()
    try:
        while not log_path.read_text().strip():  # loads start once the rebuilder is up and building
            if child.poll() is not None:
                raise RuntimeError("the rebuilder died: " + log_path.read_text()[-500:])
            time.sleep(0.05)
        started = time.perf_counter()
        for n in range(loads):
            try:
                if n % 4 == 3:
                    read_manifest(out)  # every checksum, through the pinned version
                    outcomes["manifest ok"] += 1
                    continue
                with Retriever.load(out, encoder=encoder) as loaded:
                    got = [[(h.id, round(h.score, 5)) for h in hits] for hits in loaded.search(queries, k=10)]
                version = next((tag for tag, want in expected.items() if got == want), None)
                outcomes[f"version {version}" if version else "MIXED"] += 1
            except Exception as exc:  # counted, not raised: the point is to count every kind of failure
                outcomes[f"ERROR {type(exc).__name__}: {str(exc)[:120]}"] += 1
    finally:
        child.kill()
        child.wait()
    seconds = time.perf_counter() - started
    lines = log_path.read_text().split()
    rebuilds = int(lines[-1]) if lines and lines[-1].isdigit() else 0
    return {
        "transform": transform,
        "loads": loads,
        "seconds": round(seconds, 1),
        "rebuilds": rebuilds,
        "rebuilds_per_second": round(rebuilds / seconds, 2),
        "outcomes": dict(outcomes),
        "mixed": outcomes["MIXED"],
        "errors": sum(v for k, v in outcomes.items() if k.startswith("ERROR")),
    }


def busy_loop() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def interrupts(runs: int, tests: list[str]) -> dict[str, Any]:
    hogs = [busy_loop() for _ in range(os.cpu_count() or 2)]
    results: dict[str, Any] = {}
    try:
        for test in tests:
            failures, seconds = [], []
            for run in range(runs):
                started = time.perf_counter()
                proc = subprocess.run(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", test],
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    # As `make test &` from a script: SIGINT ignored, inherited by every child.
                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
                    check=False,
                )
                seconds.append(time.perf_counter() - started)
                if proc.returncode != 0:
                    failures.append({"run": run, "tail": proc.stdout[-800:]})
            results[test] = {
                "runs": runs,
                "failures": len(failures),
                "max_seconds": round(max(seconds), 1),
                "details": failures,
            }
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    return results


def markdown(result: dict[str, Any]) -> str:
    """The run's header line (command, machine, date) and its table, for docs/results/reliability.md."""
    header = f"Command: `{result['command']}`; machine: {result['machine']}; date: {result['date']}"
    rows = [header, "", "| check | runs | bad | notes |", "|---|---:|---:|---|"]
    for part in result.get("race", []):
        note = (
            f"{part['rebuilds']} rebuilds ({part['rebuilds_per_second']}/s) in {part['seconds']} s; "
            + ", ".join(f"{k}: {v}" for k, v in sorted(part["outcomes"].items()))
        )
        rows.append(
            f"| loads racing a rebuild, transform {part['transform']} | {part['loads']} | "
            f"{part['mixed'] + part['errors']} | {note} |"
        )
    for test, part in result.get("interrupts", {}).items():
        rows.append(
            f"| `{test}`, both cores busy, SIGINT ignored at start | {part['runs']} | {part['failures']} | "
            f"slowest run {part['max_seconds']} s |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", type=int, default=3000, help="loads per transform in the race")
    parser.add_argument("--runs", type=int, default=20, help="runs of each interrupt test")
    parser.add_argument("--tests", nargs="*", default=INTERRUPT_TESTS, help="pytest node ids to repeat")
    parser.add_argument("--skip", nargs="*", default=[], choices=["race", "interrupts"])
    parser.add_argument("--markdown", action="store_true", help="print the results table")
    parser.add_argument("--rebuild", help=argparse.SUPPRESS)
    parser.add_argument("--transform", default="whitening-32", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rebuild:
        rebuild_forever(args.rebuild, args.transform)
        return
    import tempfile

    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{cpu_model()} ({platform.machine()}), {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "load_average_before": os.getloadavg(),
        "command": " ".join(["python", "tests/stress_reliability.py", *sys.argv[1:]]),
    }
    if "race" not in args.skip:
        result["race"] = []
        for transform in ("whitening-32", "none"):
            with tempfile.TemporaryDirectory() as folder:
                result["race"].append(race(Path(folder), args.loads, transform))
    if "interrupts" not in args.skip:
        result["interrupts"] = interrupts(args.runs, args.tests)
    RESULT_FILE.write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result) if args.markdown else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
