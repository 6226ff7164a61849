"""Benchmark pages claim only the conditions their run recorded (issue 41): the command that ran, the load, the
CPU seconds of the run and of everything else, a lock only when the script took it; run labels say what was
measured; every benchmark script a page or the Makefile names is there."""

from __future__ import annotations

import fcntl
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchmarks.common.machine import RunConditions, command_line, conditions_sentence, exclusive_lock
from benchmarks.maintained import bench_serve

REPO = Path(__file__).resolve().parents[1]
HISTORIES = sorted((REPO / "benchmarks" / "results").glob("*history*.jsonl"))
# What a page says when it claims a lock or a machine nobody else used.
LOCK_CLAIM = re.compile(r"flock|\block\b|no other (benchmark|test|job)|quiet", re.IGNORECASE)


def _serve_run(conditions: dict[str, Any], argv: list[str]) -> dict[str, Any]:
    """A bench_serve history record with one row: what the page renders, the figures made up."""
    ceiling = {
        "search_batched_qps": 100.0,
        "search_single_p50_ms": 10.0,
        "embed_batched_qps": 110.0,
        "embed_single_p50_ms": 9.0,
    }
    row = {
        "server": "default",
        "endpoint": "/search",
        "compute": "index",
        "clients": 32,
        "qps": 80.0,
        "p50_ms": 40.0,
        "p99_ms": 60.0,
        "server_cpu_s": 1.5,
        "seconds": 1.0,
        "generator_cpu_s": 0.1,
        "requests": 20,
        "load_before": conditions["load_before"],
        "errors": 0,
    }
    return {
        "label": "batch wait 2 ms against none",
        "commit": "abc1234",
        "facts": {"date": "2026-12-05 10:00 UTC", "cpu": "Test CPU", "cores": 2, "versions": {"torch": "2"}},
        "argv": argv[1:],
        "command": command_line(argv),
        "load_before": conditions["load_before"],
        "conditions": conditions,
        "threads": 2,
        "batch": 64,
        "k": 10,
        "requests": 20,
        "n_queries": 225,
        "documents": 1400,
        "model": "all-MiniLM-L6-v2",
        "pooling": "first-last-avg",
        "transform": "whitening-256",
        "ceilings": {"index": ceiling},
        "rows": [row],
    }


def _page_head(run: dict[str, Any]) -> str:
    """The page above its history table and notes: where the run's own claims are."""
    return bench_serve.markdown(run, [run], notes="").split("## Every run")[0]


def test_a_page_from_a_run_without_a_lock_claims_none() -> None:
    argv = ["benchmarks/maintained/bench_serve.py", "--out", "serve.md", "--label", "batch wait 2 ms against none"]
    head = _page_head(_serve_run(RunConditions().record(), argv))
    assert not LOCK_CLAIM.search(head), head
    command = 'python benchmarks/maintained/bench_serve.py --out serve.md --label "batch wait 2 ms against none"'
    assert f"Command: `{command}`" in head  # the run's own argv, nothing put before it


def test_a_page_from_a_run_under_its_own_lock_says_so(tmp_path: Path) -> None:
    lock_file = tmp_path / "bench.lock"
    with exclusive_lock(lock_file) as lock:
        conditions = RunConditions(lock).record()
    head = _page_head(_serve_run(conditions, ["benchmarks/maintained/bench_serve.py", "--lock", str(lock_file)]))
    assert "the script held an exclusive lock (its `--lock` file) throughout" in head
    assert conditions["lock"] == str(lock_file)


def test_an_old_record_gets_only_what_it_kept() -> None:
    """Runs recorded before the conditions existed kept the load before: the page says that and no more."""
    run = _serve_run({"load_before": 0.05}, ["benchmarks/maintained/bench_serve.py", "--label", "x"])
    del run["conditions"], run["command"]
    head = _page_head(run)
    assert "1-minute load average 0.05 at the start." in head
    assert not LOCK_CLAIM.search(head), head
    assert "Command: `python benchmarks/maintained/bench_serve.py --label x`" in head


def test_the_sentence_says_only_what_the_record_holds() -> None:
    assert conditions_sentence({}) == ""
    assert conditions_sentence({"load_before": 0.3}) == "1-minute load average 0.30 at the start."
    full = {"cpu": "C", "cores": 2, "load_before": 0.1, "load_after": 1.2, "wall_s": 10.0, "own_cpu_s": 15.0}
    sentence = conditions_sentence({**full, "others_cpu_s": 1.0})
    assert "1.50 cores" in sentence and "all other processes on the machine 1 CPU s (0.10 cores)" in sentence
    assert "lock" not in sentence
    assert "all other processes" not in conditions_sentence(full)  # not observed: not claimed


def test_the_lock_is_exclusive_while_held(tmp_path: Path) -> None:
    lock_file = tmp_path / "bench.lock"
    with exclusive_lock(lock_file) as lock, open(lock_file) as other:
        assert lock == str(lock_file)
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with exclusive_lock(None) as none:
        assert none is None


def test_the_run_counts_its_children_cpu_seconds() -> None:
    observed = RunConditions()
    burn = "import time\nwhile time.process_time() < 0.3: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    record = observed.record()
    assert record["own_cpu_s"] >= 0.25
    assert "lock" not in record


def test_a_measuring_run_needs_a_label() -> None:
    command = [sys.executable, str(bench_serve.__file__), "--quiet-below", "0", "--quiet-wait"]
    proc = subprocess.run([*command, "0", "--history", ""], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "--label is required" in proc.stderr


@pytest.mark.parametrize("history", HISTORIES, ids=lambda p: p.name)
def test_history_labels_say_what_was_measured(history: Path) -> None:
    for line in history.read_text().splitlines():
        label = json.loads(line)["label"]
        assert label.strip(), f"{history.name}: a run without a label"
        assert not re.search(r"\bsession\s*\d", label, re.IGNORECASE), f"{history.name}: {label!r}"


def test_no_page_or_script_names_a_lock_file_outside_the_project() -> None:
    """Issue 37: a user has no /work/cpu.lock; a page says how a figure was taken, not one machine's lock."""
    outside = re.compile(r"flock[^`\n]*\s/(work|tmp)/|/work/cpu\.lock|/tmp/[\w.-]*\.lock")
    where = [REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "benchmarks").rglob("*")]
    found = [
        f"{path.relative_to(REPO)}: {match.group(0)}"
        for path in where
        if path.is_file() and path.suffix in {".md", ".py", ".sh", ".json", ".jsonl"}
        for match in [outside.search(path.read_text(errors="replace"))]
        if match
    ]
    assert not found


# A benchmark script named as a path (`python benchmarks/maintained/bench_serve.py`, benchmarks/common/loadgen.py).
BENCHMARK_PATH = re.compile(r"\bbenchmarks/[\w./-]*\w\.(?:py|sh)\b")


def test_every_benchmark_script_named_exists() -> None:
    """The pages, the README, the Makefile and the code name benchmark scripts by path (a command to run, a
    script a figure came from); each must be there, so a moved script moves every mention with it."""
    named_in = [REPO / "README.md", REPO / "Makefile", *(REPO / "docs").rglob("*.md")]
    named_in += [path for folder in ("benchmarks", "src", "tools") for path in (REPO / folder).rglob("*.py")]
    missing = sorted(
        {
            f"{path.relative_to(REPO)}: {name}"
            for path in named_in
            for name in BENCHMARK_PATH.findall(path.read_text(encoding="utf-8"))
            if not (REPO / name).is_file()
        }
    )
    assert missing == []
