"""Re-measure only the latency columns of docs/results/retrieval.md (p50 query ms, p50 search ms) on a quiet
machine, keeping every quality figure of docs/results/retrieval.json as it is.

The whole of benchmarks/results_retrieval.py is too long to keep a machine quiet for (it also encodes, fits and
scores); only the latency depends on the load. So, in two steps:

    python benchmarks/retrieval_latency.py --prepare  # build the 16 indexes
    python benchmarks/retrieval_latency.py --measure  # time them (nothing else running), rewrite the files

``--measure --lock FILE`` holds an exclusive lock on FILE while it times; the page reports the conditions the run
observed (benchmarks/machine.py's ``RunConditions``), the lock only when it held one.

The timing is the one of results_retrieval.py (whitevec.evaluation.retrieval's median over 100 single queries
of uncached encode + transform + search + fetch, and of search + fetch alone).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import RunConditions, command_line, conditions_sentence, exclusive_lock, machine_facts
from results_retrieval import MAX_LENGTH, OUT, write_results
from whitevec.datasets.retrieval import load_retrieval_dataset
from whitevec.encoders.transformer import Encoder
from whitevec.evaluation.retrieval import RetrievalReport, RetrievalScore, _timings
from whitevec.index import Retriever

WORK = Path("/tmp/whitevec-bench/retrieval-latency")


def load_reports(path: Path) -> tuple[dict[str, Any], list[RetrievalReport]]:
    data = json.loads(path.read_text())
    reports = []
    for raw in data["reports"]:
        fields = dict(raw)
        scores = [RetrievalScore(**s) for s in fields.pop("scores")]
        reports.append(RetrievalReport(**fields, scores=scores))
    return data["machine"], reports


def folder(model: str, score: RetrievalScore) -> Path:
    return WORK / f"{model}-{score.pooling}-{score.transform}"


def time_reports(reports: list[RetrievalReport], texts: list[str], lock: str | None) -> dict[str, Any]:
    """Each score's latency columns measured again (in place); the conditions the timing observed."""
    observed = RunConditions(lock)
    for report in reports:
        for score in report.scores:
            with Retriever.load(folder(report.model, score), cache=False) as retriever:
                timing = _timings(retriever, retriever.encoder, texts, report.latency_queries)
            for name, value in timing.items():
                setattr(score, name, value)
            print(f"{report.model} {score.pooling} {score.transform}: {score.p50_query_ms} ms", file=sys.stderr)
    return observed.record()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    step = parser.add_mutually_exclusive_group(required=True)
    step.add_argument("--prepare", action="store_true", help="build the indexes (no timing)")
    step.add_argument("--measure", action="store_true", help="time them and rewrite the results")
    parser.add_argument("--results", type=Path, default=OUT / "retrieval.json")
    parser.add_argument("--max-load", type=float, default=0.6)
    parser.add_argument("--lock", type=Path, default=None, help="--measure: hold an exclusive lock on this file")
    args = parser.parse_args()
    full_run, reports = load_reports(args.results)
    dataset = load_retrieval_dataset(reports[0].dataset)
    if args.prepare:
        for report in reports:
            poolings = list(dict.fromkeys(score.pooling for score in report.scores))
            with Encoder(report.model, poolings[0], max_length=MAX_LENGTH) as encoder:
                # One forward pass for every pooling; each build below then reads its vectors from the cache.
                encoder.encode_poolings([doc.text for doc in dataset.corpus], poolings)
            for score in report.scores:
                out = folder(report.model, score)
                if not (out / "manifest.json").is_file():
                    encoder = Encoder(report.model, score.pooling, max_length=MAX_LENGTH)
                    Retriever.build(
                        dataset.corpus, out, encoder=encoder, transform=score.transform, fit_on="corpus"
                    )
                    print(f"built {out}", file=sys.stderr)
        return
    with exclusive_lock(args.lock) as lock:
        load = os.getloadavg()[0]
        if load > args.max_load:
            raise SystemExit(f"load average {load:.2f} is above {args.max_load}: not measuring (wait and rerun)")
        conditions = time_reports(reports, list(dataset.queries.values()), lock)
    now = machine_facts("faiss-cpu")
    note = (
        f"Latency columns re-measured {now['date']} by `{command_line()}`: {conditions_sentence(conditions)} "
        "The quality, build and size columns are from the full run dated above."
    )
    for report in reports:
        report.notes = [n for n in report.notes if not n.startswith("latency re-measured")]
        report.notes.append(f"latency re-measured {now['date']}, load average {load:.2f}")
    write_results(
        args.results.with_suffix(".md"), reports, full_run, dataset, latency_note=note, latency_facts=now
    )


if __name__ == "__main__":
    main()
