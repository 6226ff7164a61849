"""The worker side of the peers benchmark: one job of one system, run in a process of its own
(``bench_peers.py --worker JOB --settings JSON``), its result a dict the orchestrator records.

- ``quality``: every setting of the system built on one collection, nDCG@10 of each mode (one scorer:
  ``whitevec.evaluation.retrieval.score_rankings``, the one ``whitevec eval-retrieval`` averages with).
- ``build``: ingest of the speed corpus of ``size`` documents with their vectors, then bytes on disk.
- ``search``: the index reopened from disk (timed), single-query latencies of each mode and of dense filtered
  at 10% and 1% passing, batched queries a second (dense, every query in one call), peak RSS of the process.
- ``writes``: add 10 documents, then delete 10, ``WRITE_ROUNDS`` times (each write persisted before it returns).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common.hybrid_speed import latency_summary, spread
from benchmarks.common.machine import versions
from benchmarks.common.peers.inputs import (
    LEXICAL_MAX,
    Queries,
    new_docs,
    quality_inputs,
    speed_inputs,
    speed_queries,
)
from benchmarks.common.peers.systems import system_module
from benchmarks.common.runs import folder_bytes, peak_mib

K = 10
WARMUP = 10
FILTERS = {"dense filtered 10%": 10, "dense filtered 1%": 1}
WRITE_ROUNDS = 5
WRITE_DOCS = 10


def ndcg_10(rankings: list[list[str]], queries: Queries, qrels: dict[str, Any]) -> float:
    """nDCG@10 x 100 of ``rankings`` (one per query, in ``queries``' order), averaged over the judged queries."""
    from whitevec.evaluation.retrieval import score_rankings

    scores = score_rankings(dict(zip(queries.ids, rankings, strict=True)), qrels, ks=(10,))
    return round(100 * scores.ndcg_10, 2)


def quality(settings: dict[str, Any]) -> dict[str, Any]:
    module = system_module(settings["system"])
    docs, queries, qrels = quality_inputs(
        settings["collection"], Path(settings["cache"]), settings.get("data_dir")
    )
    table: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(dir=settings.get("work")) as scratch:
        for number, setting in enumerate(module.SETTINGS):
            system = module.open_system(Path(scratch) / str(number), setting)
            system.build(docs, lexical=True)
            table[setting] = {
                mode: ndcg_10(system.search(mode, queries, K), queries, qrels) for mode in system.modes
            }
            system.close()
    return {
        "ndcg_10": table,
        "documents": len(docs),
        "queries": len(queries.ids),
        "versions": versions(*module.PACKAGES),
    }


def _folder(settings: dict[str, Any]) -> Path:
    return Path(settings["work"]) / f"{settings['system']}-{settings['size']}"


def build(settings: dict[str, Any]) -> dict[str, Any]:
    module = system_module(settings["system"])
    docs, _ = speed_inputs(settings["size"], Path(settings["cache"]), settings.get("data_dir"))
    folder = _folder(settings)
    # A build starts from nothing: a run's index left from an earlier run would be refused (LanceDB, Chroma,
    # Qdrant Edge, Milvus Lite: "already exists") or, worse, added to.
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    system = module.open_system(folder, "default")
    system.build(docs, lexical=len(docs) <= LEXICAL_MAX)
    system.close()
    ingest = time.perf_counter() - started
    return {"ingest_s": round(ingest, 3), "bytes": folder_bytes(folder), "versions": versions(*module.PACKAGES)}


def _latencies(call: Callable[[Queries], Any], queries: Queries) -> dict[str, float]:
    singles = [
        Queries(queries.ids[i : i + 1], queries.texts[i : i + 1], queries.vectors[i : i + 1])
        for i in range(len(queries.ids))
    ]
    for one in singles[:WARMUP]:
        call(one)
    seconds = []
    for one in singles:
        started = time.perf_counter()
        call(one)
        seconds.append(time.perf_counter() - started)
    return latency_summary(seconds)


def search(settings: dict[str, Any]) -> dict[str, Any]:
    module = system_module(settings["system"])
    queries = speed_queries(settings["size"], Path(settings["cache"]), settings.get("data_dir"))
    started = time.perf_counter()
    system = module.open_system(_folder(settings), "default")
    reopen = time.perf_counter() - started
    modes = system.modes if settings["size"] <= LEXICAL_MAX else ("dense",)
    rows = {mode: _latencies(lambda q, m=mode: system.search(m, q, K), queries) for mode in modes}
    for label, below in FILTERS.items():
        rows[label] = _latencies(lambda q, b=below: system.search("dense", q, K, below=b), queries)
    started = time.perf_counter()
    system.search("dense", queries, K)
    batched = len(queries.ids) / (time.perf_counter() - started)
    system.close()
    return {
        "reopen_s": round(reopen, 3),
        "latency": rows,
        "batched_qps": round(batched, 1),
        "peak_rss_mib": round(peak_mib(), 1),
    }


def writes(settings: dict[str, Any]) -> dict[str, Any]:
    module = system_module(settings["system"])
    docs, _ = speed_inputs(settings["size"], Path(settings["cache"]), settings.get("data_dir"))
    system = module.open_system(_folder(settings), "default")
    added, deleted = [], []
    for round_ in range(WRITE_ROUNDS):
        fresh = new_docs(WRITE_DOCS, round_ * WRITE_DOCS, docs)
        started = time.perf_counter()
        system.add(fresh)
        added.append(time.perf_counter() - started)
        gone = docs.ids[round_ * WRITE_DOCS : (round_ + 1) * WRITE_DOCS]
        started = time.perf_counter()
        system.delete(list(gone))
        deleted.append(time.perf_counter() - started)
    system.close()
    return {"add_10": spread(added), "delete_10": spread(deleted)}


JOBS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "quality": quality,
    "build": build,
    "search": search,
    "writes": writes,
}
