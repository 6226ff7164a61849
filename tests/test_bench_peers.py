"""The peers benchmark's own logic, without any peer installed (they live in .venv-peers only): the orchestrator's
argument checks, its record merge, the one scorer every system's rankings go through, and the page's ratios."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from benchmarks.common.peers.inputs import Queries
from benchmarks.common.peers.jobs import ndcg_10
from benchmarks.common.peers.systems import SYSTEMS, system_module
from benchmarks.maintained import bench_peers
from benchmarks.pages import peers as peers_page

from whitevec.evaluation.retrieval import ndcg_at_k


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--systems", "whitevec,faiss"], "unknown system faiss; valid: whitevec, txtai"),
        (["--systems", " , "], "unknown system (none)"),
        (["--collections", "trec"], "unknown collection trec"),
        (["--sizes", "10k"], "--sizes takes positive integers"),
        (["--sizes", "0,10"], "--sizes takes positive integers"),
    ],
)
def test_bad_arguments_stop_in_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        bench_peers.parse_args(argv)
    assert stopped.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if not line.startswith(("usage:", " "))]
    assert len(errors) == 1 and message in errors[0], errors


def test_arguments_keep_the_order_given() -> None:
    args = bench_peers.parse_args(["--systems", "lancedb, whitevec", "--sizes", "100000,10000", "--quality-only"])
    assert args.systems == ["lancedb", "whitevec"]
    assert args.sizes == [100000, 10000]
    assert args.quality_only and not args.speed_only


def test_only_a_run_of_every_system_on_every_collection_or_size_replaces_the_runs_before() -> None:
    assert bench_peers.whole_quality_run(bench_peers.parse_args(["--quality-only"]))
    assert not bench_peers.whole_quality_run(bench_peers.parse_args(["--systems", "whitevec"]))
    assert not bench_peers.whole_quality_run(bench_peers.parse_args(["--collections", "adi"]))
    held = {"speed": {"10000": {}, "100000": {}}}
    assert bench_peers.whole_speed_run(bench_peers.parse_args(["--sizes", "10000,100000"]), held)
    assert not bench_peers.whole_speed_run(bench_peers.parse_args(["--sizes", "100000"]), held)
    assert not bench_peers.whole_speed_run(
        bench_peers.parse_args(["--sizes", "10000,100000", "--systems", "txtai"]), held
    )


def test_every_system_names_its_settings_without_importing_its_library() -> None:
    for name in SYSTEMS:
        module = system_module(name)
        assert next(iter(module.SETTINGS)) == "default", name
        assert module.PACKAGES, name


def test_the_scorer_is_the_mean_of_whitevec_ndcg_over_judged_queries() -> None:
    qrels = {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}, "q3": {"d": 0}}  # q3 has no relevant document: not scored
    rankings = [["b", "x", "a"], ["y", "c"], ["d"]]
    queries = Queries(["q1", "q2", "q3"], ["", "", ""], np.zeros((3, 2), np.float32))
    expected = 100 * (ndcg_at_k(rankings[0], qrels["q1"], 10) + ndcg_at_k(rankings[1], qrels["q2"], 10)) / 2
    assert ndcg_10(rankings, queries, qrels) == pytest.approx(round(expected, 2))


def test_a_partial_run_replaces_only_its_own_entries(tmp_path: Path) -> None:
    path = tmp_path / "peers.json"
    path.write_text(json.dumps({"quality": {"whitevec": {"adi": 1}, "txtai": {"adi": 2}}, "speed": {"10000": {}}}))
    record = bench_peers.merged(path, "quality", {"txtai": {"med": 3}})
    assert record["quality"] == {"whitevec": {"adi": 1}, "txtai": {"adi": 2, "med": 3}}
    assert record["speed"] == {"10000": {}}


def test_the_page_gives_whitevec_over_each_peer_per_row() -> None:
    search = {"reopen_s": 0.5, "latency": {"dense": {"p50_ms": 2.0, "p99_ms": 4.0}}, "peak_rss_mib": 100.0}
    systems = {
        "whitevec": {"build": {"ingest_s": 1.0, "bytes": 2_000_000}, "search": search},
        "lancedb": {"build": {"ingest_s": 4.0, "bytes": 1_000_000}, "search": {**search, "reopen_s": 0.25}},
        "chroma": {"build": {"error": "exit 1: boom"}},
    }
    text = "\n".join(peers_page.speed_lines("10000", systems))
    assert "| ingest (s) | 1 | 4 (0.25x) |" in text
    assert "| bytes on disk (MB) | 2 | 1 (2.00x) |" in text
    assert "| reopen (s) | 0.5 | 0.25 (2.00x) |" in text
    assert "Failed: Chroma: exit 1: boom" in text


def test_the_page_names_every_run_of_a_part_and_the_failed_jobs() -> None:
    facts = {"date": "2026-12-07 15:00 UTC", "cpu": "Test CPU", "cores": 2, "python": "3.11", "versions": {}}
    run = {"machine": facts, "conditions": {"cpu": "Test CPU", "cores": 2}, "lexical_max": 100_000}
    record = {
        "quality": {
            "whitevec": {"adi": {"ndcg_10": {"default": {"dense": 49.75}, "model": {"dense": 49.75}}}},
            "txtai": {"adi": {"error": "exit 1: boom"}},
        },
        "runs": {"quality": [{**run, "command": "python first"}, {**run, "command": "python second"}]},
    }
    text = peers_page.render(record)
    assert "`python first`" in text and "`python second`" in text
    assert text.count("| whitevec dense") == 1  # the model setting ranks as the default: said once
    assert "Failed: txtai on ADI: exit 1: boom" in text
