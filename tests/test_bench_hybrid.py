"""The hybrid speed record's arithmetic and page section (benchmarks/common/hybrid_speed.py): percentiles as numpy
takes them, the build ratio from runs in turns, a part written alone keeps the others, and the page renders
only the parts the record holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from benchmarks.common.hybrid_speed import build_ratio, latency_summary, speed_markdown, write_part


def test_latency_summary_takes_numpy_percentiles_in_milliseconds() -> None:
    seconds = [0.004, 0.001, 0.003, 0.010, 0.002]
    summary = latency_summary(seconds)
    ms = np.array(seconds) * 1000
    assert summary["n"] == 5
    assert summary["p50_ms"] == pytest.approx(np.percentile(ms, 50))
    assert summary["p99_ms"] == pytest.approx(np.percentile(ms, 99), abs=1e-3)
    assert summary["mean_ms"] == pytest.approx(ms.mean())


def test_build_ratio_is_whitevec_over_bm25s_per_turn_and_of_medians() -> None:
    ratio = build_ratio([1.2, 1.0, 3.0], [1.0, 1.0, 2.0])
    assert ratio["ratio_of_medians"] == pytest.approx(1.2 / 1.0)
    assert ratio["turn_ratio_median"] == pytest.approx(1.2)
    assert ratio["turn_ratio_range"] == [1.0, 1.5]
    with pytest.raises(ValueError):
        build_ratio([1.0], [1.0, 2.0])


def _part(**figures: Any) -> dict[str, Any]:
    facts = {"date": "2026-12-06 05:00 UTC", "cpu": "Test CPU", "cores": 2, "python": "3.11", "versions": {}}
    conditions = {"cpu": "Test CPU", "cores": 2, "load_before": 0.1, "load_after": 0.2}
    return {**figures, "quick": False, "command": "python bench", "facts": facts, "conditions": conditions}


HTTP = _part(
    k=10,
    requests=600,
    rounds=3,
    rows=[],
    p50_ms={"dense": 10.0, "hybrid": 13.5},
    p99_ms={"dense": 12, "hybrid": 15},
)


def test_a_part_written_alone_keeps_the_others(tmp_path: Path) -> None:
    record = tmp_path / "speed.json"
    write_part("http", HTTP, record)
    write_part("scale", {"documents": 5}, record)
    write_part("http", {**HTTP, "requests": 7}, record)
    parts = json.loads(record.read_text())["parts"]
    assert list(parts) == ["http", "scale"]
    assert parts["http"]["requests"] == 7
    assert parts["scale"] == {"documents": 5}


def test_the_page_renders_only_what_the_record_holds() -> None:
    page = speed_markdown({"parts": {"http": HTTP}})
    assert "POST /search" in page
    assert "Hybrid - dense p50: **+3.50 ms** (target <= +2 ms: missed)" in page
    assert "Building the lexical index" not in page and "Milvus" not in page and "--quick" not in page
    assert "recorded yet" in speed_markdown({"parts": {}})
    quick = speed_markdown({"parts": {"http": {**HTTP, "quick": True}}})
    assert "A `--quick` run" in quick


def test_the_load_generator_sends_the_search_mode_in_each_body() -> None:
    from benchmarks.common.loadgen import request_body

    body = json.loads(request_body("search", "heat transfer", 10, "", {"mode": "hybrid"}))
    assert body == {"queries": ["heat transfer"], "k": 10, "mode": "hybrid"}
    assert json.loads(request_body("search", "heat transfer", 10, "")) == {"queries": ["heat transfer"], "k": 10}
