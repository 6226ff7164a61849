"""1-bit codes on Cranfield: which rotation before the sign, and how much rescoring from disk buys back.

For each model (last-avg pooling, cosine), nDCG@10 over Cranfield's 225 judged queries of:

- sign at 0 (sentence-transformers' ``quantize_embeddings(..., "binary")``: no centring), computed here with numpy
  on the same vectors, with and without re-ranking the top 4 x 10 by the float vectors;
- whitevec's encodings through ``eval-retrieval``'s own path (a real index per configuration, quality only):
  ``binary`` (sign at the mean), ``binary-rr`` (mean, seeded random rotation), ``itq``, ``rabitq`` (and faiss's
  RaBitQ without whitevec's rotation, ``faiss:RaBitQ``), each plain and
  with ``+rescore=K`` for K in 1, 2, 4, 10 (the top K x 10 re-ranked from half-precision vectors on disk; the
  int8 form too at K = 4), and ``whitening`` then ``binary`` (every direction scaled to unit variance before the
  sign), beside whitened float32;
- float32 exact search, the reference.

Run: ``WHITEVEC_DATA=../shared/data python benchmarks/investigations/one_bit_cranfield.py [--models M ...]``
(writes ``benchmarks/results/one_bit_cranfield.json``; quality only, deterministic, no timing).

An investigation of 2026-12-05, not part of the maintained suite (``make bench``). Backs
docs/notes/one-bit-codes.md (the rotation before the sign, and the default rescoring multiplier).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from whitevec.datasets.retrieval import RetrievalDataset, load_retrieval_dataset
from whitevec.encoders.transformer import Encoder
from whitevec.evaluation.retrieval import evaluate_retrieval, score_rankings
from whitevec.utils.linalg import unit_rows

MULTIPLIERS = (1, 2, 4, 10)
CODES = ("binary", "binary-rr", "itq", "rabitq")
OUT = Path(__file__).resolve().parents[1] / "results" / "one_bit_cranfield.json"


def sign_at_zero(encoder: Encoder, data: RetrievalDataset) -> dict[str, float]:
    """nDCG@10 of sentence-transformers' binary codes (the sign at 0, Hamming ranking; ties by document order),
    plain and with the top 4 x 10 re-ranked by the float32 vectors."""
    judged = data.judged_queries()
    qids = list(judged)
    docs = unit_rows(encoder.encode([d.text for d in data.corpus], show_progress=False))
    queries = unit_rows(encoder.encode([judged[q] for q in qids], show_progress=False))
    doc_signs, query_signs = np.where(docs > 0, 1.0, -1.0), np.where(queries > 0, 1.0, -1.0)
    agreement = query_signs @ doc_signs.T  # d - 2 x Hamming distance
    order = np.argsort(-agreement, axis=1, kind="stable")
    ids = [d.id for d in data.corpus]

    def ndcg(rows: np.ndarray) -> float:
        rankings = {q: [ids[i] for i in row] for q, row in zip(qids, rows, strict=True)}
        return round(100 * score_rankings(rankings, data.qrels, ks=(10,)).ndcg_10, 2)

    shortlist = order[:, :40]
    exact = np.einsum("qd,qkd->qk", queries, docs[shortlist])
    rescored = np.take_along_axis(shortlist, np.argsort(-exact, axis=1, kind="stable"), axis=1)
    return {"sign at 0": ndcg(order[:, :10]), "sign at 0, rescored 4x from float32": ndcg(rescored[:, :10])}


def measure(model: str, data: RetrievalDataset) -> dict[str, float]:
    encoder = Encoder(model, "last-avg")
    encodings = ["float32"]
    for code in CODES:
        encodings += [code, *(f"{code}+rescore={k}" for k in MULTIPLIERS)]
    encodings += ["binary-rr+rescore=4:int8", "rabitq+rescore=4:int8"]  # the int8 form against fp16
    encodings.append("faiss:RaBitQ")  # faiss's RaBitQ without the random rotation whitevec's rabitq puts first
    report = evaluate_retrieval(encoder, data, ["none"], encodings=encodings, latency_queries=0)
    whitened = evaluate_retrieval(
        encoder, data, ["whitening"], encodings=["float32", "binary", "binary+rescore=4"], latency_queries=0
    )
    figures = {f"{s.transform} / {s.encoding}": round(100 * s.ndcg_10, 2) for s in report.scores + whitened.scores}
    figures.update(sign_at_zero(encoder, data))
    encoder.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["all-MiniLM-L6-v2", "all-mpnet-base-v2"])
    args = parser.parse_args()
    data = load_retrieval_dataset("cranfield")
    results = {"date": time.strftime("%Y-%m-%d"), "dataset": "cranfield", "metric": "nDCG@10", "models": {}}
    for model in args.models:
        figures = measure(model, data)
        results["models"][model] = figures  # type: ignore[index]
        exact = figures["none / float32"]
        for name, value in figures.items():
            print(f"{model:18s} {name:34s} {value:6.2f} ({100 * value / exact:5.1f}% of float32)")
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
