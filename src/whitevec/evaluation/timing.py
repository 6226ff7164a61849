"""What a retrieval run's timings mean and depend on: single-query latencies and batched QPS of an index
(:func:`query_timings`), and the machine they were taken on (:func:`machine_description`)."""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder

QPS_MIN_SECONDS = 0.3


def machine_description() -> str:
    """CPU model, cores visible, torch threads, and the OS: what a latency figure depends on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch

    return f"{cpu}; {os.cpu_count()} CPUs visible, torch threads {torch.get_num_threads()}; {platform.platform()}"


def query_timings(
    retriever: Any, timing_encoder: AnyEncoder, texts: Sequence[str], latency_queries: int
) -> dict[str, float]:
    """p50/p99 ms of single queries with and without encoding, and batched QPS; NaN when not timed."""
    if latency_queries <= 0 or not texts:
        return {"p50_query_ms": math.nan, "p50_search_ms": math.nan}
    from whitevec.index import stored_form

    full, search_only = [], []
    k = min(10, retriever.count)
    for text in texts[:latency_queries]:
        started = time.perf_counter()
        raw = timing_encoder.encode([text], show_progress=False)
        vector = stored_form(retriever.transform, raw, retriever.manifest["metric"])
        retriever.search_vectors(vector, k)
        middle = time.perf_counter()
        retriever.search_vectors(vector, k)
        end = time.perf_counter()
        full.append((middle - started) * 1000)
        search_only.append((end - middle) * 1000)
    batch = retriever.embed(list(texts))
    rounds, started = 0, time.perf_counter()
    while rounds == 0 or time.perf_counter() - started < QPS_MIN_SECONDS:
        retriever.search_vectors(batch, k)
        rounds += 1
    qps = rounds * len(texts) / (time.perf_counter() - started)

    def pct(values: list[float], q: float) -> float:
        return round(float(np.percentile(values, q)), 3)

    return {
        "p50_query_ms": pct(full, 50),
        "p99_query_ms": pct(full, 99),
        "p50_search_ms": pct(search_only, 50),
        "p99_search_ms": pct(search_only, 99),
        "qps": round(qps, 1),
    }
