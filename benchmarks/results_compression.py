"""Regenerate docs/results/compression.md (+ .json, compression-frontier-*.png): retrieval quality per byte.

Against: product quantization (and SQ, OPQ) of the raw vectors at the same bytes, and flat float32 search.
Three parts, each saved to docs/results/compression-PART.json, and a report assembled from whatever parts exist:

- ``quality`` (no timing): Cranfield, both models, every encoding x {none, whitening-k, soft
  whitening-k (gamma 0.5), PCA-k} for k in {64, 128, 256}; OPQ on the raw vectors only (its training is slow).
- ``knobs`` (no timing): beta (centring on/off), gamma (0, 0.5, 1) and k at float32, and the fit on the
  corpus against the corpus plus half of the queries (both scored on the other half).
- ``timing`` (run it with nothing else on the machine; the conditions it observed are recorded and reported, and
  ``--lock FILE`` holds an exclusive lock on FILE meanwhile): 1M synthetic 768-d vectors, IVF-PQ against flat
  raw-768: build, batched QPS, memory (code bytes and process RSS), recall@10 of IVF-PQ against exact search.
- ``binary`` (no timing): the 1-bit end, sign codes and RaBitQ with and without rescoring from
  disk, against sentence-transformers' binary quantization on the same vectors (``compression_binary.py``).

Run:
    python benchmarks/results_compression.py --part quality
    python benchmarks/results_compression.py --part knobs
    python benchmarks/results_compression.py --part timing
    python benchmarks/results_compression.py --part binary
    python benchmarks/results_compression.py --part report
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compression_binary
from machine import (
    RunConditions,
    conditions_sentence,
    exclusive_lock,
    facts_markdown,
    machine_facts,
    results_header,
)
from synthetic import clustered_unit_vectors
from whitevec.datasets.retrieval import load_retrieval_dataset
from whitevec.evaluation.frontier import pareto_front, plot_frontier
from whitevec.evaluation.retrieval import RetrievalScore, evaluate_retrieval
from whitevec.transforms import WhitevecWarning, make_transform
from whitevec.utils.io import atomic_path

# The token limit these figures were taken with (before a folder's max_seq_length became the default).
MAX_LENGTH = 512

MODELS = ["all-MiniLM-L6-v2", "all-mpnet-base-v2"]
KS = (64, 128, 256)
ENCODINGS = ["float32", "fp16", "sq8", "sq4", "pq16", "pq32", "pq64", "pq96", "pq128", "pq192"]
OPQ = ["opq32,pq32", "opq64,pq64", "opq96,pq96"]
OUT = Path(__file__).resolve().parents[1] / "docs" / "results"
MAP_DEPTH = 100  # nDCG@10, R@100 and MRR@10 need no more; MAP here is MAP@100


def transforms() -> list[str]:
    specs = ["none"]
    for k in KS:
        specs += [f"whitening-{k}", f"whitening-{k}:gamma=0.5", f"pca-{k}"]
    return specs


def _save(part: str, payload: dict[str, Any]) -> None:
    path = OUT / f"compression-{part}.json"
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {path}", file=sys.stderr)


def part_quality(models: list[str]) -> None:
    from whitevec.encoders.transformer import Encoder

    dataset = load_retrieval_dataset("cranfield")
    earlier = _load("quality")
    # One model at a time, saved after each: a run for one model keeps the other's results.
    reports = [r for r in (earlier or {}).get("reports", []) if r["model"] not in models]
    for model in models:
        started = time.time()
        with Encoder(model, "last-avg", max_length=MAX_LENGTH) as encoder:
            main = evaluate_retrieval(
                encoder, dataset, transforms(), encodings=ENCODINGS, latency_queries=0, map_depth=MAP_DEPTH
            )
            opq = evaluate_retrieval(
                encoder, dataset, ["none"], encodings=OPQ, latency_queries=0, map_depth=MAP_DEPTH
            )
        main.scores += opq.scores
        main.notes += [n for n in opq.notes if n not in main.notes]
        reports.append(main.to_dict())
        print(f"{model}: {len(main.scores)} configurations in {time.time() - started:.0f} s", file=sys.stderr)
        _save("quality", {"machine": machine_facts("faiss-cpu"), "reports": reports})


def part_knobs(models: list[str]) -> None:
    from whitevec.encoders.transformer import Encoder

    dataset = load_retrieval_dataset("cranfield")
    judged = list(dataset.judged_queries())
    rng = np.random.default_rng(0)
    fit_half = sorted(rng.choice(len(judged), size=len(judged) // 2, replace=False))
    fit_ids = [judged[i] for i in fit_half]
    held_out = [q for q in judged if q not in set(fit_ids)]
    specs = ["none"]
    for beta in (1, 0):
        for gamma in (0, 0.5, 1):
            specs.append(f"whitening-128:gamma={gamma}:beta={beta}")
    specs += ["whitening-64", "whitening-128", "whitening-256", "whitening", "pca-128:beta=0"]
    # As in part_quality: a run for one model keeps the other's results.
    reports = [r for r in (_load("knobs") or {}).get("reports", []) if r["model"] not in models]
    for model in models:
        with Encoder(model, "last-avg", max_length=MAX_LENGTH) as encoder:
            corpus = encoder.encode([d.text for d in dataset.corpus], show_progress=False)
            queries = encoder.encode([dataset.queries[q] for q in fit_ids], show_progress=False)
            with_queries = []
            for spec in ("whitening-128", "whitening-128:gamma=0.5", "whitening"):
                transform = make_transform(spec)
                assert transform is not None
                with_queries.append((f"{spec} [fit corpus+queries]", transform.fit(np.vstack([corpus, queries]))))
            report = evaluate_retrieval(
                encoder,
                dataset,
                [*specs, *with_queries],
                latency_queries=0,
                map_depth=MAP_DEPTH,
                query_ids=held_out,
            )
        reports.append(report.to_dict())
    _save(
        "knobs",
        {
            "machine": machine_facts("faiss-cpu"),
            "fit_queries": len(fit_ids),
            "held_out_queries": len(held_out),
            "reports": reports,
        },
    )


def part_binary(models: list[str]) -> None:
    from whitevec.encoders.transformer import Encoder

    dataset = load_retrieval_dataset("cranfield")
    # As in part_quality: a run for one model keeps the other's results.
    reports = [r for r in (_load("binary") or {}).get("reports", []) if r["model"] not in models]
    for model in models:
        with Encoder(model, "last-avg", max_length=MAX_LENGTH) as encoder:
            reports.append(compression_binary.measure(encoder, dataset))
        _save("binary", {"machine": machine_facts("faiss-cpu", "sentence-transformers"), "reports": reports})


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def part_timing(n: int, n_queries: int, flat_queries: int, lock: str | None) -> None:
    """1M synthetic 768-d unit vectors (4096 clusters in a 64-d latent space, projected, plus isotropic noise;
    seeded); flat raw float32 against
    IVF-PQ (pq96: 96 bytes, 1/32 of float32) trained on a 50,000-vector seeded sample."""
    import faiss

    from whitevec.index import FaissStore

    observed = RunConditions(lock)
    threads = faiss.omp_get_max_threads()
    d = 768
    started = time.perf_counter()
    x, q = clustered_unit_vectors(n, n_queries, d)
    generate_s = time.perf_counter() - started
    ids = np.arange(n, dtype=np.int64)
    rows: dict[str, Any] = {}
    exact_ids = None
    for name, kind, params, queries in (
        ("flat raw-768 float32", "flat", {}, flat_queries),
        (
            "IVF-PQ pq96, nlist 1024, nprobe 16",
            "ivf",
            {"encoding": "pq96", "nlist": 1024, "nprobe": 16},
            n_queries,
        ),
    ):
        rss_before = _rss_bytes()
        t0 = time.perf_counter()
        store = FaissStore(d, "cosine", kind, {**params, "train_sample": 50_000} if params else None)
        with warnings.catch_warnings():
            warnings.simplefilter("error", WhitevecWarning)  # nothing may be lowered silently here
            store.add(ids, x)
        build_s = time.perf_counter() - t0
        rss_after = _rss_bytes()
        store.search(q[:10], 10)  # warm
        t0 = time.perf_counter()
        _, found = store.search(q[:queries], 10)
        search_s = time.perf_counter() - t0
        code_size = int(faiss.downcast_index(store.index.index).sa_code_size())
        row: dict[str, Any] = {
            "build_s": round(build_s, 2),
            "queries_timed": queries,
            "batched_qps": round(queries / search_s, 1),
            "code_bytes_per_vector": code_size,
            "codes_bytes": code_size * n,
            "rss_growth_bytes": rss_after - rss_before,
            "params": store.params(),
        }
        if exact_ids is None:
            exact_ids = found
        else:
            m = min(len(exact_ids), len(found))
            row["recall_at_10_vs_exact"] = round(
                float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact_ids[:m], found[:m], strict=True)])),
                4,
            )
            row["recall_queries"] = m
        rows[name] = row
        print(name, row, file=sys.stderr)
        del store
    _save(
        "timing",
        {
            "machine": machine_facts("faiss-cpu"),
            "conditions": observed.record(),
            "faiss_threads": threads,
            "n": n,
            "dim": d,
            "generate_s": round(generate_s, 1),
            "rows": rows,
        },
    )


# --- report ------------------------------------------------------------------------------------------------
def _scores(report: dict[str, Any]) -> list[RetrievalScore]:
    fields = RetrievalScore.__dataclass_fields__
    return [
        RetrievalScore(**{k: (float("nan") if v is None else v) for k, v in s.items() if k in fields})
        for s in report["scores"]
    ]


def _timing_conditions(timing: dict[str, Any]) -> dict[str, Any]:
    """What the timing part recorded of its conditions (runs before the record kept the load at the start)."""
    return timing.get("conditions") or {"load_before": timing["load_average_1min_before"]}


def _load(part: str) -> dict[str, Any] | None:
    path = OUT / f"compression-{part}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _frontier_text(model: str, scores: list[RetrievalScore]) -> list[str]:
    """Statements computed from the numbers: the front, the 1/12-bytes target, whitening-k against raw PQ."""
    raw = next(s for s in scores if s.transform == "none" and s.encoding == "float32")
    lines = [f"**{model}** (raw float32: {raw.code_bytes} bytes, nDCG@10 {100 * raw.ndcg_10:.2f})", ""]
    front = pareto_front(scores, lambda s: s.code_bytes, lambda s: s.ndcg_10)
    lines.append(
        "- Pareto front: " + "; ".join(f"{s.label} {s.code_bytes} B {100 * s.ndcg_10:.2f}" for s in front) + "."
    )
    budget = raw.code_bytes / 12
    within = [s for s in scores if s.code_bytes <= budget]
    best = max(within, key=lambda s: s.ndcg_10) if within else None
    if best is not None:
        gap = 100 * (raw.ndcg_10 - best.ndcg_10)
        verdict = "met" if gap <= 1.0 else "not met"
        lines.append(
            f"- Target (<= 1/12 of raw bytes = {budget:.0f} B, nDCG@10 within 1.0 of raw): best there is "
            f"{best.label} at {best.code_bytes} B, nDCG@10 {100 * best.ndcg_10:.2f} ({-gap:+.2f}): **{verdict}**."
        )
    raw_pq = [s for s in scores if s.transform == "none" and s.encoding.startswith(("pq", "opq"))]
    for family, name in (
        ("whitening", "whitening-k"),
        ("whitening:gamma=0.5", "soft whitening-k"),
        ("pca", "PCA-k"),
    ):
        wins, losses = [], []
        for s in scores:
            head = s.transform.split(":")[0].rsplit("-", 1)[0]
            knobs = s.transform.partition(":")[2]
            if (head + (":" + knobs if knobs else "")) != family:
                continue
            rivals = [p for p in raw_pq if p.code_bytes <= s.code_bytes]
            if not rivals:
                continue
            rival = max(rivals, key=lambda p: p.ndcg_10)
            (wins if s.ndcg_10 > rival.ndcg_10 else losses).append((s, rival))
        if wins or losses:
            best_win = max(wins, key=lambda w: w[0].ndcg_10 - w[1].ndcg_10, default=None)
            text = (
                f"- {name} against PQ on raw vectors at equal or fewer bytes: beats the best such PQ in "
                f"{len(wins)} of {len(wins) + len(losses)} configurations"
            )
            if best_win is not None:
                s, p = best_win
                text += (
                    f" (largest margin: {s.label} {s.code_bytes} B {100 * s.ndcg_10:.2f} vs {p.label} "
                    f"{p.code_bytes} B {100 * p.ndcg_10:.2f})"
                )
            lines.append(text + ".")
    return lines


def _table(scores: list[RetrievalScore]) -> list[str]:
    head = ["transform", "encoding", "dim", "bytes/vec", "nDCG@10", "R@100", "MRR@10", "index bytes", "build s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in sorted(scores, key=lambda s: (s.code_bytes, -s.ndcg_10)):
        lines.append(
            f"| {s.transform} | {s.encoding} | {s.dim} | {s.code_bytes:,} | {100 * s.ndcg_10:.2f} | "
            f"{100 * s.recall_100:.2f} | {100 * s.mrr_10:.2f} | {s.index_bytes:,} | {s.build_s:.2f} |"
        )
    return lines


def part_report() -> None:
    quality, knobs, timing, binary = _load("quality"), _load("knobs"), _load("timing"), _load("binary")
    text = ["# Compressed indexes: retrieval quality per byte (Cranfield)", ""]
    measured = [part["machine"] for part in (quality, knobs, timing, binary) if part]
    text += [
        results_header(
            "`python benchmarks/results_compression.py --part quality` (and `--part knobs`, `--part binary`, "
            "`--part timing`; then `--part report`)",
            *measured,
        ),
        "",
    ]
    if quality:
        text += [
            f"Quality part: {facts_markdown(quality['machine'])}",
            "",
            "Cranfield 1400 (225 judged queries), last-avg pooling, every transform fitted on the corpus, "
            "exact (flat) FAISS search over the encoded vectors, cosine. `bytes/vec` is the code of one vector "
            "(float32: 4 d); `index bytes` the whole index.faiss (ids, trained tables). PQ trains on the 1400 "
            "corpus vectors, so the 8 bits asked are lowered to 5 (39 training vectors per centroid; the encoding "
            "column shows what was built). Quality in percent; MAP is not used (depth 100). Sentences are "
            "encoded at max_length 512. `build s` was taken beside other work on the same "
            "two cores (load average 4-15): read it as the order of magnitude only (OPQ's training is the slow "
            "one); the timed figures are in the 1M-vector part.",
            "",
        ]
        for report in quality["reports"]:
            scores = _scores(report)
            slug = report["model"].split("/")[-1]
            png = OUT / f"compression-frontier-{slug}.png"
            plot_frontier(scores, png, title=f"Cranfield: nDCG@10 per byte - {report['model']} (last-avg)")
            text += [f"## {report['model']}", "", f"![frontier]({png.name})", ""]
            text += [*_frontier_text(report["model"], scores), ""]
            text += [*_table(scores), ""]
            skipped = [n for n in report["notes"] if n.startswith("skipped")]
            if skipped:
                text += [f"{len(skipped)} (transform, PQ) pairs skipped: M does not divide the dimension.", ""]
    if knobs:
        text += [
            "## The transform knobs (float32, exact search)",
            "",
            f"Scored on {knobs['held_out_queries']} held-out queries; the `[fit corpus+queries]` rows fit the "
            f"transform on the corpus plus the other {knobs['fit_queries']} queries (seeded split), the others on "
            "the corpus alone. beta=0: no centring; gamma=0: rotation only (PCA), 0.5: soft, 1: full whitening.",
            "",
            "| model | transform | dim | nDCG@10 | R@100 | MRR@10 |",
            "|---|---|---|---|---|---|",
        ]
        for report in knobs["reports"]:
            for s in _scores(report):
                text.append(
                    f"| {report['model']} | {s.transform} | {s.dim} | {100 * s.ndcg_10:.2f} | "
                    f"{100 * s.recall_100:.2f} | {100 * s.mrr_10:.2f} |"
                )
        text.append("")
    if timing:
        text += [
            "## Speed and memory: 1M synthetic vectors, IVF-PQ against flat raw-768",
            "",
            f"Timing part (faiss threads {timing['faiss_threads']}): "
            f"{conditions_sentence(_timing_conditions(timing))} {facts_markdown(timing['machine'])}",
            "",
            f"{timing['n']:,} unit vectors of dimension {timing['dim']} (4096 clusters in a 64-d latent space, "
            "projected to 768-d, plus noise; seeded), "
            "queries = perturbed corpus vectors. IVF-PQ (and its 1024 lists) trained on a seeded 50,000-vector "
            "sample. QPS: one batched search call, top 10, after a warm-up.",
            "",
            "| index | code bytes/vector | codes (MB) | RSS growth (MB) | build s | queries timed | batched QPS | "
            "recall@10 vs exact |",
            "|---|---|---|---|---|---|---|---|",
        ]
        rows = timing["rows"]
        for name, r in rows.items():
            recall = r.get("recall_at_10_vs_exact")
            recall_cell = "-" if recall is None else f"{recall:.3f} ({r['recall_queries']} queries)"
            text.append(
                f"| {name} | {r['code_bytes_per_vector']} | {r['codes_bytes'] / 1e6:,.0f} | "
                f"{r['rss_growth_bytes'] / 1e6:,.0f} | {r['build_s']} | {r['queries_timed']} | "
                f"{r['batched_qps']:,.1f} | {recall_cell} |"
            )
        flat, ivfpq = list(rows.values())
        text += [
            "",
            f"IVF-PQ / flat: {ivfpq['batched_qps'] / flat['batched_qps']:.1f}x the batched QPS at "
            f"{ivfpq['codes_bytes'] / flat['codes_bytes']:.3f} of the code memory "
            f"({ivfpq['rss_growth_bytes'] / max(flat['rss_growth_bytes'], 1):.3f} of the RSS growth).",
            "",
        ]
    if binary:
        text += compression_binary.report_lines({**binary, "machine_text": facts_markdown(binary["machine"])})
    out = OUT / "compression.md"
    with atomic_path(out) as tmp:
        tmp.write_text("\n".join(text), encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("quality", "knobs", "timing", "binary", "report"), required=True)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1000, help="IVF-PQ queries timed (batched)")
    parser.add_argument("--flat-queries", type=int, default=200, help="flat queries timed (batched)")
    parser.add_argument("--lock", type=Path, default=None, help="timing: hold an exclusive lock on this file")
    args = parser.parse_args()
    models = args.models.split(",")
    warnings.simplefilter("ignore", WhitevecWarning)  # PQ bits lowered on 1400 vectors: said in the report
    if args.part == "quality":
        part_quality(models)
    elif args.part == "knobs":
        part_knobs(models)
    elif args.part == "timing":
        with exclusive_lock(args.lock) as lock:
            part_timing(args.n, args.queries, args.flat_queries, lock)
    elif args.part == "binary":
        part_binary(models)
    part_report()


if __name__ == "__main__":
    main()
