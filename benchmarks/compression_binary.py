"""The 1-bit end of the compression frontier (``results_compression.py --part binary``; no timing).

Cranfield, both English models, last-avg at max_length 512 (the vectors of the quality part), exact search, top
10. Each whitevec row is a flat FAISS index built by ``evaluate_retrieval`` (the store's own codes and search):

- ``binary`` (sign at the stored mean), ``binary-rr`` (then a seeded random rotation), ``itq`` (faiss's ITQ
  rotation), full whitening then ``binary``, ``rabitq`` (faiss RaBitQ behind a random rotation; 4-bit queries,
  faiss's default) and ``rabitq-qb0`` (float queries);
- each without rescoring and with ``+rescore=K`` for K in :data:`MULTIPLIERS` (the top K x 10 candidates
  re-ranked by the float query against float16 vectors kept on disk).

The peer is sentence-transformers' own ``quantize_embeddings(..., "ubinary")`` (the sign at 0, packed) searched
by ``semantic_search_faiss`` (faiss ``IndexBinaryFlat``), without and with its rescoring (the float query against
the top ``rescore_multiplier`` x 10 codes as 0/1 vectors), on the same unit vectors the whitevec indexes store.
Every ranking is scored by whitevec's metric code (``score_rankings``). RAM bytes a vector are the codes faiss
holds in memory; disk bytes the rescoring vectors on disk (memory-mapped; the page cache holds what queries touch).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from whitevec.datasets.retrieval import RetrievalDataset
from whitevec.evaluation.retrieval import evaluate_retrieval, score_rankings
from whitevec.index.encodings import parse_encoding
from whitevec.utils.linalg import unit_rows

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


def measure(encoder: Any, dataset: RetrievalDataset) -> dict[str, Any]:
    """Both systems' rows for one model, and what they say (:func:`findings`)."""
    rows = whitevec_rows(encoder, dataset) + peer_rows(encoder, dataset)
    return {"model": encoder.model_name, "dataset": dataset.name, "rows": rows, "findings": findings(rows)}


# --- what the numbers say ----------------------------------------------------------------------------------
def _pick(rows: Sequence[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    return found[0] if found else None


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

    def best(candidates: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
        return max(candidates, key=lambda r: r["ndcg_10"], default=None)

    def against_peer(candidates: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for multiplier in (None, *MULTIPLIERS):
            mine = best([r for r in candidates if r["rescore"] == multiplier])
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

    per_multiplier = against_peer(ours)
    peer_ram = min((r["ram_bytes"] for r in peer), default=0)
    same_ram = against_peer([r for r in ours if r["ram_bytes"] <= peer_ram])
    plain = best([r for r in ours if r["rescore"] is None and r["codes"].startswith("rabitq")])
    rescored = best([r for r in ours if r["rescore"] is not None])

    def share(row: dict[str, Any] | None) -> float:
        return math.nan if row is None else row["ndcg_10"] / ref

    def plain_ndcg(transform: str, codes: str) -> float:
        row = _pick(rows, system="whitevec", transform=transform, codes=codes, rescore=None)
        return math.nan if row is None else row["ndcg_10"]

    sign_at_zero = _pick(peer, rescore=None)
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
        "unrescored_ndcg_10": {
            "sign at 0 (ST)": math.nan if sign_at_zero is None else sign_at_zero["ndcg_10"],
            "centred sign": plain_ndcg("none", "binary"),
            "random rotation": plain_ndcg("none", "binary-rr"),
            "ITQ": plain_ndcg("none", "itq"),
            "whitening, then sign": plain_ndcg("whitening", "binary"),
            "RaBitQ": plain_ndcg("none", "rabitq"),
            "RaBitQ, float queries": plain_ndcg("none", "rabitq-qb0"),
        },
    }


def _pct(value: float | None, ref: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{100 * value:.2f} ({100 * value / ref:.1f}%)"


def report_lines(part: dict[str, Any]) -> list[str]:
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
