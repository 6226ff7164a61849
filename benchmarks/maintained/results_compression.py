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
  disk, against sentence-transformers' binary quantization on the same vectors.

Run:
    python benchmarks/maintained/results_compression.py --part quality
    python benchmarks/maintained/results_compression.py --part knobs
    python benchmarks/maintained/results_compression.py --part timing
    python benchmarks/maintained/results_compression.py --part binary
    python benchmarks/maintained/results_compression.py --part report
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import clustered_unit_vectors
from benchmarks.common.machine import (
    RunConditions,
    conditions_sentence,
    exclusive_lock,
    facts_markdown,
    machine_facts,
    results_header,
)

from whitevec.datasets.retrieval import RetrievalDataset, load_retrieval_dataset
from whitevec.evaluation.frontier import pareto_front, plot_frontier
from whitevec.evaluation.retrieval import RetrievalScore, evaluate_retrieval, score_rankings
from whitevec.index.encodings.spec import parse_encoding
from whitevec.transforms import WhitevecWarning, make_transform
from whitevec.utils.io import atomic_path
from whitevec.utils.linalg import unit_rows

# The token limit these figures were taken with (before a folder's max_seq_length became the default).
MAX_LENGTH = 512

MODELS = ["all-MiniLM-L6-v2", "all-mpnet-base-v2"]
KS = (64, 128, 256)
ENCODINGS = ["float32", "fp16", "sq8", "sq4", "pq16", "pq32", "pq64", "pq96", "pq128", "pq192"]
OPQ = ["opq32,pq32", "opq64,pq64", "opq96,pq96"]
OUT = Path(__file__).resolve().parents[2] / "docs" / "results"
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
            reports.append(measure_binary(encoder, dataset))
        _save("binary", {"machine": machine_facts("faiss-cpu", "sentence-transformers"), "reports": reports})


# ---- the 1-bit end (--part binary) -----------------------------------------------------------------------------
# The 1-bit end of the compression frontier (``--part binary``; no timing).
#
# Cranfield, both English models, last-avg at max_length 512 (the vectors of the quality part), exact search, top
# 10. Each whitevec row is a flat FAISS index built by ``evaluate_retrieval`` (the store's own codes and search):
#
# - ``binary`` (sign at the stored mean), ``binary-rr`` (then a seeded random rotation), ``itq`` (faiss's ITQ
#   rotation), full whitening then ``binary``, ``rabitq`` (faiss RaBitQ behind a random rotation; 4-bit queries,
#   faiss's default) and ``rabitq-qb0`` (float queries);
# - each without rescoring and with ``+rescore=K`` for K in :data:`MULTIPLIERS` (the top K x 10 candidates
#   re-ranked by the float query against float16 vectors kept on disk).
#
# The peer is sentence-transformers' own ``quantize_embeddings(..., "ubinary")`` (the sign at 0, packed) searched
# by ``semantic_search_faiss`` (faiss ``IndexBinaryFlat``), without and with its rescoring (the float query against
# the top ``rescore_multiplier`` x 10 codes as 0/1 vectors), on the same unit vectors the whitevec indexes store.
# Every ranking is scored by whitevec's metric code (``score_rankings``). RAM bytes a vector are the codes faiss
# holds in memory; disk bytes the rescoring vectors on disk (memory-mapped; the page cache holds what queries
# touch).
K = 10
MULTIPLIERS = (1, 2, 4, 10)
# (transform, encoding, what the row is): every encoding also runs with +rescore=K for each multiplier.
CODES = [
    ("none", "binary", "centred sign"),
    ("none", "binary-rr", "centred, random rotation, sign"),
    ("none", "itq", "ITQ rotation, sign"),
    ("whitening", "binary", "whitening, then sign"),
    ("none", "rabitq", "RaBitQ, 4-bit queries"),
    ("none", "rabitq-qb0", "RaBitQ, float queries"),
]
RAM_SHARE = 24  # the target: RAM at most 1/24 of float32's per vector
RESCORED_SHARE, PLAIN_SHARE = 0.99, 0.90  # of float32's nDCG@10, with and without rescoring


def _rescored(encoding: str, multiplier: int | None) -> str:
    return encoding if multiplier is None else f"{encoding}+rescore={multiplier}"


def whitevec_rows(encoder: Any, dataset: RetrievalDataset) -> list[dict[str, Any]]:
    """One row per (transform, encoding, multiplier) of :data:`CODES`, and exact float32."""
    rows: list[dict[str, Any]] = []
    by_transform: dict[str, list[str]] = {}
    for transform, encoding, _ in CODES:
        by_transform.setdefault(transform, []).extend(_rescored(encoding, m) for m in (None, *MULTIPLIERS))
    by_transform["none"].insert(0, "float32")
    for transform, encodings in by_transform.items():
        report = evaluate_retrieval(
            encoder, dataset, [transform], encodings=encodings, latency_queries=0, map_depth=K
        )
        for score in report.scores:
            encoding = parse_encoding(score.encoding)
            rows.append(
                {
                    "system": "whitevec",
                    "transform": score.transform,
                    "encoding": encoding.spec,
                    "codes": encoding.spec.split("+")[0],
                    "rescore": encoding.rescore,
                    "dim": score.dim,
                    "ram_bytes": encoding.code_bytes(score.dim),
                    "disk_bytes": encoding.disk_bytes(score.dim),
                    "index_bytes": score.index_bytes,
                    "ndcg_10": score.ndcg_10,
                    "recall_10": score.recall_10,
                    "mrr_10": score.mrr_10,
                    "n_queries": score.n_queries,
                }
            )
    return rows


def peer_rows(encoder: Any, dataset: RetrievalDataset) -> list[dict[str, Any]]:
    """sentence-transformers' binary quantization and search on the same vectors, unrescored and rescored."""
    from sentence_transformers.util.quantization import quantize_embeddings, semantic_search_faiss

    queries = dataset.judged_queries()
    qids = list(queries)
    doc_ids = [d.id for d in dataset.corpus]
    corpus = unit_rows(encoder.encode([d.text for d in dataset.corpus], show_progress=False), dtype=np.float32)
    query_vectors = unit_rows(encoder.encode(list(queries.values()), show_progress=False), dtype=np.float32)
    codes = quantize_embeddings(corpus, precision="ubinary")
    rows = []
    for multiplier in (None, *MULTIPLIERS):
        hits, _ = semantic_search_faiss(
            query_vectors,
            corpus_embeddings=codes,
            corpus_precision="ubinary",
            top_k=K,
            rescore=multiplier is not None,
            rescore_multiplier=multiplier or 1,
        )
        rankings = {q: [doc_ids[h["corpus_id"]] for h in row] for q, row in zip(qids, hits, strict=True)}
        quality = score_rankings(rankings, dataset.qrels, ks=(K,))
        rows.append(
            {
                "system": "sentence-transformers",
                "transform": "none",
                "encoding": "ubinary" + ("" if multiplier is None else f" rescore_multiplier={multiplier}"),
                "codes": "sign at 0 (ST ubinary)",
                "rescore": multiplier,
                "dim": int(corpus.shape[1]),
                "ram_bytes": int(codes.shape[1]),
                "disk_bytes": 0,
                "index_bytes": None,
                "ndcg_10": quality.ndcg_10,
                "recall_10": quality.recall_at[K],
                "mrr_10": quality.mrr_10,
                "n_queries": quality.n_queries,
            }
        )
    return rows


def measure_binary(encoder: Any, dataset: RetrievalDataset) -> dict[str, Any]:
    """Both systems' rows for one model, and what they say (:func:`findings`)."""
    rows = whitevec_rows(encoder, dataset) + peer_rows(encoder, dataset)
    return {"model": encoder.model_name, "dataset": dataset.name, "rows": rows, "findings": findings(rows)}


# ---- what the 1-bit numbers say --------------------------------------------------------------------------------
def _pick(rows: Sequence[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    return found[0] if found else None


def _best(candidates: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    return max(candidates, key=lambda r: r["ndcg_10"], default=None)


def _against_peer(candidates: Sequence[dict[str, Any]], peer: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """At each multiplier (none first), the best of ``candidates`` against the peer's row."""
    out = []
    for multiplier in (None, *MULTIPLIERS):
        mine = _best([r for r in candidates if r["rescore"] == multiplier])
        theirs = _pick(peer, rescore=multiplier)
        if mine and theirs:
            out.append(
                {
                    "rescore": multiplier,
                    "whitevec_best": f"{mine['transform']} / {mine['encoding']}",
                    "whitevec_ndcg_10": mine["ndcg_10"],
                    "peer_ndcg_10": theirs["ndcg_10"],
                    "met": mine["ndcg_10"] >= theirs["ndcg_10"],
                }
            )
    return out


def _unrescored(rows: Sequence[dict[str, Any]], peer: Sequence[dict[str, Any]]) -> dict[str, float]:
    """nDCG@10 of each 1-bit code without rescoring: the rotation finding."""

    def plain_ndcg(transform: str, codes: str) -> float:
        row = _pick(rows, system="whitevec", transform=transform, codes=codes, rescore=None)
        return math.nan if row is None else row["ndcg_10"]

    sign_at_zero = _pick(peer, rescore=None)
    return {
        "sign at 0 (ST)": math.nan if sign_at_zero is None else sign_at_zero["ndcg_10"],
        "centred sign": plain_ndcg("none", "binary"),
        "random rotation": plain_ndcg("none", "binary-rr"),
        "ITQ": plain_ndcg("none", "itq"),
        "whitening, then sign": plain_ndcg("whitening", "binary"),
        "RaBitQ": plain_ndcg("none", "rabitq"),
        "RaBitQ, float queries": plain_ndcg("none", "rabitq-qb0"),
    }


def findings(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The targets and the rotation finding, computed from ``rows`` (percent of float32's nDCG@10)."""
    exact = _pick(rows, system="whitevec", encoding="float32")
    assert exact is not None
    ref = exact["ndcg_10"]
    budget = exact["ram_bytes"] / RAM_SHARE
    ours = [
        r for r in rows if r["system"] == "whitevec" and r["encoding"] != "float32" and r["ram_bytes"] <= budget
    ]
    peer = [r for r in rows if r["system"] != "whitevec"]
    per_multiplier = _against_peer(ours, peer)
    peer_ram = min((r["ram_bytes"] for r in peer), default=0)
    same_ram = _against_peer([r for r in ours if r["ram_bytes"] <= peer_ram], peer)
    plain = _best([r for r in ours if r["rescore"] is None and r["codes"].startswith("rabitq")])
    rescored = _best([r for r in ours if r["rescore"] is not None])

    def share(row: dict[str, Any] | None) -> float:
        return math.nan if row is None else row["ndcg_10"] / ref

    over = sorted({r["codes"] for r in rows if r["encoding"] != "float32" and r["ram_bytes"] > budget})
    return {
        "float32_ndcg_10": ref,
        "ram_budget_bytes": budget,
        "over_budget": over,
        "rescored_best": None if rescored is None else f"{rescored['transform']} / {rescored['encoding']}",
        "rescored_share": share(rescored),
        "rescored_met": share(rescored) >= RESCORED_SHARE,
        "plain_rabitq_best": None if plain is None else plain["encoding"],
        "plain_rabitq_share": share(plain),
        "plain_met": share(plain) >= PLAIN_SHARE,
        "against_peer": per_multiplier,
        "against_peer_met": bool(per_multiplier) and all(p["met"] for p in per_multiplier),
        "peer_ram_bytes": peer_ram,
        "against_peer_same_ram": same_ram,
        "against_peer_same_ram_met": bool(same_ram) and all(p["met"] for p in same_ram),
        "unrescored_ndcg_10": _unrescored(rows, peer),
    }


def _pct(value: float | None, ref: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{100 * value:.2f} ({100 * value / ref:.1f}%)"


def binary_report_lines(part: dict[str, Any]) -> list[str]:
    """The compression page's 1-bit section from the saved part (``compression-binary.json``)."""
    lines = [
        "## The 1-bit end: sign codes and RaBitQ, rescored from disk, against sentence-transformers",
        "",
        f"Binary part: {part['machine_text']}",
        "",
        "Cranfield (225 judged queries), last-avg at max_length 512, top 10 searched exhaustively (flat), cosine. "
        "whitevec rows: a flat FAISS index per row, built by `evaluate_retrieval`; `+rescore=K`: the top K x 10 "
        "candidates re-ranked by the float query against float16 vectors on disk. sentence-transformers rows: "
        "`quantize_embeddings(vectors, 'ubinary')` (the sign at 0) searched by `semantic_search_faiss` "
        "(IndexBinaryFlat), rescored by its own `rescore_multiplier` (the float query against the 0/1 codes), "
        "on the same unit vectors. nDCG@10 by whitevec's metric code; in brackets the share of exact float32's. "
        "RAM: the code bytes a vector in memory (whitevec's index also keeps an 8-byte id a vector: see "
        "scale.md for the resident memory at 1M vectors); disk: the "
        "rescoring vector on disk (memory-mapped).",
        "",
    ]
    for report in part["reports"]:
        lines += _model_lines(report)
    return lines


def _against(pairs: Sequence[dict[str, Any]]) -> str:
    return "; ".join(
        f"{'no rescoring' if p['rescore'] is None else 'x' + str(p['rescore'])}: {p['whitevec_best']} "
        f"{100 * p['whitevec_ndcg_10']:.2f} vs {100 * p['peer_ndcg_10']:.2f}"
        + ("" if p["met"] else " (**below**)")
        for p in pairs
    )


def _model_lines(report: dict[str, Any]) -> list[str]:
    f = findings(report["rows"])  # from the rows, so that a report saved before a new statement renders too
    ref = f["float32_ndcg_10"]
    rows = report["rows"]
    lines = [f"### {report['model']}", "", f"Exact float32: nDCG@10 {100 * ref:.2f}.", ""]
    head = ["system", "codes", "transform", "RAM B/vec", "disk B/vec", "no rescoring"]
    head += [f"rescore x{m}" for m in MULTIPLIERS]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    groups: dict[tuple[str, str, str], dict[Any, dict[str, Any]]] = {}
    for r in rows:
        if r["encoding"] == "float32":
            continue
        groups.setdefault((r["system"], r["codes"], r["transform"]), {})[r["rescore"]] = r
    for (system, codes, transform), by_k in groups.items():
        base = by_k.get(None) or next(iter(by_k.values()))
        disk = max(r["disk_bytes"] for r in by_k.values())
        cells = [system, codes, transform, str(base["ram_bytes"]), str(disk)]
        cells += [_pct(by_k[m]["ndcg_10"] if m in by_k else None, ref) for m in (None, *MULTIPLIERS)]
        lines.append("| " + " | ".join(cells) + " |")
    verdict = {True: "**met**", False: "**not met**"}
    lines += [
        "",
        f"- RAM budget (1/{RAM_SHARE} of float32's {4 * rows[0]['dim']} B): {f['ram_budget_bytes']:.0f} B a "
        f"vector; 1-bit rows above it: {', '.join(f['over_budget']) or 'none'}.",
        f"- With rescoring, >= {100 * RESCORED_SHARE:.0f}% of float32: best {f['rescored_best']} at "
        f"{100 * f['rescored_share']:.1f}%: {verdict[f['rescored_met']]}.",
        f"- Without rescoring (RaBitQ), >= {100 * PLAIN_SHARE:.0f}%: {f['plain_rabitq_best']} at "
        f"{100 * f['plain_rabitq_share']:.1f}%: {verdict[f['plain_met']]}.",
        "- whitevec's best 1-bit row against sentence-transformers' binary at the same multiplier: "
        + _against(f["against_peer"])
        + f": {verdict[f['against_peer_met']]}.",
        "- The same at equal RAM (whitevec's rows of no more code bytes than sentence-transformers' "
        f"{f['peer_ram_bytes']} B): "
        + _against(f["against_peer_same_ram"])
        + f": {verdict[f['against_peer_same_ram_met']]}.",
        "- Rotation, without rescoring (nDCG@10): "
        + "; ".join(f"{name} {_pct(v, ref)}" for name, v in f["unrescored_ndcg_10"].items())
        + ".",
        "",
    ]
    return lines


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
    """compression.md (and its frontier plots) from the parts saved so far."""
    quality, knobs, timing, binary = _load("quality"), _load("knobs"), _load("timing"), _load("binary")
    text = ["# Compressed indexes: retrieval quality per byte (Cranfield)", ""]
    measured = [part["machine"] for part in (quality, knobs, timing, binary) if part]
    text += [
        results_header(
            "`python benchmarks/maintained/results_compression.py --part quality` (and `--part knobs`, "
            "`--part binary`, "
            "`--part timing`; then `--part report`)",
            *measured,
        ),
        "",
    ]
    if quality:
        text += _quality_lines(quality)
    if knobs:
        text += _knobs_lines(knobs)
    if timing:
        text += _timing_lines(timing)
    if binary:
        text += binary_report_lines({**binary, "machine_text": facts_markdown(binary["machine"])})
    out = OUT / "compression.md"
    with atomic_path(out) as tmp:
        tmp.write_text("\n".join(text), encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)


def _quality_lines(quality: dict[str, Any]) -> list[str]:
    """The quality part's sections, one per model, each with its frontier plot (written beside the page)."""
    text = [
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
    return text


def _knobs_lines(knobs: dict[str, Any]) -> list[str]:
    text = [
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
    return text


def _timing_lines(timing: dict[str, Any]) -> list[str]:
    text = [
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
    return text


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
