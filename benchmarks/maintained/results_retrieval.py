"""Regenerate docs/results/retrieval.md (and .json): Cranfield retrieval quality, build time, latency and
index size for models x poolings x transforms (each transform fitted on the Cranfield corpus).

Run alone on the machine (the latency columns are measured in the same run; mpnet encodes 1400 abstracts, and the
vectors are cached on disk afterwards):
    python benchmarks/maintained/results_retrieval.py
Needs WHITEVEC_DATA (the shared data) and all-mpnet-base-v2 fetched (shared/models/fetch-all-mpnet-base-v2).

The whole run is too long to keep a machine quiet for (it also encodes, fits and scores); only the latency
depends on the load. ``--latency`` re-measures only the latency columns (p50 query ms, p50 search ms) on a quiet
machine, keeping every quality figure of docs/results/retrieval.json as it is, in two steps:

    python benchmarks/maintained/results_retrieval.py --latency prepare  # build the 16 indexes
    python benchmarks/maintained/results_retrieval.py --latency measure  # time them (nothing else running)

``--latency measure --lock FILE`` holds an exclusive lock on FILE while it times; the page reports the conditions
the run observed (benchmarks/common/machine.py's ``RunConditions``), the lock only when it held one. The timing
is the full run's (whitevec.evaluation.retrieval's median over 100 single queries of uncached encode + transform
+ search + fetch, and of search + fetch alone).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import (
    RunConditions,
    command_line,
    conditions_sentence,
    exclusive_lock,
    facts_markdown,
    machine_facts,
    results_header,
)

from whitevec.datasets.retrieval import load_retrieval_dataset
from whitevec.encoders.transformer import Encoder
from whitevec.evaluation.retrieval import RetrievalReport, RetrievalScore, evaluate_retrieval, query_timings
from whitevec.index import Retriever
from whitevec.transforms import Flow
from whitevec.utils.io import atomic_path

# The token limit these figures were taken with (before a folder's max_seq_length became the default).
MAX_LENGTH = 512

MODELS = ["all-MiniLM-L6-v2", "all-mpnet-base-v2"]
POOLINGS = ["last-avg", "first-last-avg"]
TRANSFORMS = ["none", "whitening", "whitening-128", "whitening-256", "flow"]
OUT = Path(__file__).resolve().parents[2] / "docs" / "results"
WORK = Path("/tmp/whitevec-bench/retrieval-latency")  # --latency: the indexes timed


def table(reports: list[RetrievalReport]) -> list[str]:
    head = [
        "model",
        "pooling",
        "transform",
        "dim",
        "R@10",
        "R@100",
        "MRR@10",
        "nDCG@10",
        "MAP",
        "build s",
        "p50 query ms",
        "p50 search ms",
        "index.faiss bytes",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for report in reports:
        for s in report.scores:
            cells = [report.model, *s.cells()]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def observations(reports: list[RetrievalReport]) -> list[str]:
    """Plain statements computed from the numbers (so the text can never disagree with the table)."""
    lines = []
    for report in reports:
        by_pooling: dict[str, dict[str, RetrievalScore]] = {}
        for s in report.scores:
            by_pooling.setdefault(s.pooling, {})[s.transform] = s
        for pooling, rows in by_pooling.items():
            base = rows.get("none")
            if base is None:
                continue
            parts = []
            for name, s in rows.items():
                if name == "none":
                    continue
                parts.append(
                    f"{name} {100 * s.ndcg_10:.2f} ({100 * (s.ndcg_10 - base.ndcg_10):+.2f}), "
                    f"MAP {100 * (s.map - base.map):+.2f}"
                )
            best = max(rows.values(), key=lambda s: s.ndcg_10)
            lines.append(
                f"- {report.model}, {pooling}: nDCG@10 raw {100 * base.ndcg_10:.2f}; "
                + "; ".join(parts)
                + f". Best nDCG@10: {best.transform}."
            )
            smallest = min(rows.values(), key=lambda s: s.index_bytes)
            lines.append(
                f"  Index size: {smallest.transform} {smallest.index_bytes:,} bytes vs raw {base.index_bytes:,} "
                f"({smallest.index_bytes / base.index_bytes:.2f}x). Latency: p50 search alone "
                f"{base.p50_search_ms:.3f} ms vs {base.p50_query_ms:.1f} ms with encoding (search = "
                f"{100 * base.p50_search_ms / base.p50_query_ms:.1f}% of a query's time)."
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--poolings", default=",".join(POOLINGS))
    parser.add_argument("--transforms", default=",".join(TRANSFORMS))
    parser.add_argument("--dataset", default="cranfield")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--latency-queries", type=int, default=100)
    parser.add_argument("--out", default=str(OUT / "retrieval.md"))
    parser.add_argument("--latency", choices=("prepare", "measure"), help="re-measure only the latency columns")
    parser.add_argument("--results", type=Path, default=OUT / "retrieval.json", help="--latency: the full run's")
    parser.add_argument("--max-load", type=float, default=0.6, help="--latency measure: refuse above this load")
    parser.add_argument("--lock", type=Path, default=None, help="--latency measure: hold an exclusive lock on it")
    args = parser.parse_args()
    if args.latency is not None:
        latency(args)
        return
    dataset = load_retrieval_dataset(args.dataset, data_dir=args.data_dir)
    poolings = args.poolings.split(",")
    reports = []
    started = time.time()
    for model in args.models.split(","):
        encoder = Encoder(model, poolings[0], max_length=MAX_LENGTH)
        reports.append(
            evaluate_retrieval(
                encoder,
                dataset,
                args.transforms.split(","),
                poolings=poolings,
                latency_queries=args.latency_queries,
            )
        )
        print(f"{model}: done after {time.time() - started:.0f} s", file=sys.stderr)
    facts = machine_facts("faiss-cpu")
    out = Path(args.out)
    write_results(out, reports, facts, dataset)
    print(f"wrote {out}", file=sys.stderr)


COMMAND = (
    "`python benchmarks/maintained/results_retrieval.py` (alone on the machine; the latency columns: "
    "`python benchmarks/maintained/results_retrieval.py --latency prepare`, then `--latency measure`)"
)


def write_results(
    out: Path,
    reports: list[RetrievalReport],
    facts: dict[str, Any],
    dataset: Any,
    latency_note: str = "",
    latency_facts: dict[str, Any] | None = None,
) -> None:
    """retrieval.md and retrieval.json from the reports (``latency_note``: how the latency was re-measured,
    ``latency_facts``: the machine and date of that re-measurement)."""
    judged = len(dataset.judged_queries())
    text = [
        "# Retrieval on Cranfield: raw vs whitened vs whitened-k indexes",
        "",
        results_header(COMMAND, facts, *([latency_facts] if latency_facts else [])),
        "",
        f"The full run: {facts_markdown(facts)}",
        "",
        f"Data: Cranfield 1400 ({len(dataset.corpus)} documents, {judged} judged queries, 1837 judgments). "
        "Every transform is fitted on the corpus vectors; exact flat FAISS index, cosine metric (vectors "
        "L2-normalised after the transform). Quality in percent. `flow`: `Flow()`'s defaults, the first"
        f" invertible linear map started at `mixing_init={Flow().mixing_init!r}`.",
        "",
        *table(reports),
        "",
        "## How to read it",
        "",
        "- Relevance: Cranfield codes 1-4 are relevant (gain 4 for code 1 'complete answer' down to 1 for code 4 "
        "'minimum interest'); code -1 is not relevant. R@k, MRR@10 and MAP use binary relevance (gain > 0); "
        "nDCG@10 uses the graded gains, linear gain, log2(rank + 1) discount. MAP ranks the whole corpus.",
        "- `build s`: `Retriever.build` wall time with the corpus vectors already in the encoder's disk cache "
        "(fit + transform + FAISS index + SQLite + manifest). One-off encoding of corpus + queries, both "
        "poolings in one pass: "
        + "; ".join(f"{r.model} {sum(r.corpus_encode_s.values()):.1f} s" for r in reports)
        + " (near 0 when the cache already held the vectors).",
        f"- `p50 query ms`: median over {reports[0].latency_queries} single queries of encode (no cache, "
        "model forward pass on CPU) + transform + search + document fetch. `p50 search ms`: the same without "
        "encoding (one embedded query: FAISS search + SQLite fetch of the 10 hits). "
        + (latency_note or "Measured in the same run: run it with no other job on the machine."),
        "- `index.faiss bytes`: the FAISS file (1400 x dim float32 plus ids); the folder also holds "
        "docs.sqlite (same for all rows) and the transform (0 / d x d / d x k floats).",
        "",
        "## What the numbers show",
        "",
        *observations(reports),
        "",
    ]
    with atomic_path(out) as tmp:
        tmp.write_text("\n".join(text), encoding="utf-8")
    with atomic_path(out.with_suffix(".json")) as tmp:
        tmp.write_text(json.dumps({"machine": facts, "reports": [r.to_dict() for r in reports]}, indent=2) + "\n")


# ---- the latency columns again (--latency) ---------------------------------------------------------------------
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


def prepare_latency(reports: list[RetrievalReport], dataset: Any) -> None:
    """Build the index of every row of the full run (no timing)."""
    for report in reports:
        poolings = list(dict.fromkeys(score.pooling for score in report.scores))
        with Encoder(report.model, poolings[0], max_length=MAX_LENGTH) as encoder:
            # One forward pass for every pooling; each build below then reads its vectors from the cache.
            encoder.encode_poolings([doc.text for doc in dataset.corpus], poolings)
        for score in report.scores:
            out = folder(report.model, score)
            if not (out / "manifest.json").is_file():
                encoder = Encoder(report.model, score.pooling, max_length=MAX_LENGTH)
                Retriever.build(dataset.corpus, out, encoder=encoder, transform=score.transform, fit_on="corpus")
                print(f"built {out}", file=sys.stderr)


def time_reports(reports: list[RetrievalReport], texts: list[str], lock: str | None) -> dict[str, Any]:
    """Each score's latency columns measured again (in place); the conditions the timing observed."""
    observed = RunConditions(lock)
    for report in reports:
        for score in report.scores:
            with Retriever.load(folder(report.model, score), cache=False) as retriever:
                timing = query_timings(retriever, retriever.encoder, texts, report.latency_queries)
            for name, value in timing.items():
                setattr(score, name, value)
            print(f"{report.model} {score.pooling} {score.transform}: {score.p50_query_ms} ms", file=sys.stderr)
    return observed.record()


def latency(args: argparse.Namespace) -> None:
    """``--latency prepare`` builds the indexes; ``--latency measure`` times them and rewrites the files."""
    full_run, reports = load_reports(args.results)
    dataset = load_retrieval_dataset(reports[0].dataset)
    if args.latency == "prepare":
        prepare_latency(reports, dataset)
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
