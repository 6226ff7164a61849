"""How much ``+rescore`` buys back for the multi-bit codes (SQ, PQ) on Cranfield, and so which default K they take.

For each model (last-avg pooling, cosine, the raw vectors), nDCG@10 over Cranfield's 225 judged queries of
``sq8``, ``sq4`` and ``pqM`` (M = d / 8: one byte per 8 dimensions, as the 1-bit codes' d / 8 bytes) through
``eval-retrieval``'s own path (a real flat index per configuration, quality only), each plain and with
``+rescore=K`` for K in 1, 2, 4, 10 (the top K x 10 re-ranked from half-precision vectors on disk), beside exact
float32. The default K (``whitevec.index.encodings.spec.DEFAULT_RESCORE``) is the smallest K keeping both models
within 1% of float32, as for the 1-bit codes (one_bit_cranfield.py).

Run: ``WHITEVEC_DATA=../shared/data python benchmarks/investigations/rescore_cranfield.py [--models M ...]``
(writes ``benchmarks/results/rescore_cranfield.json``; quality only, deterministic, no timing).

An investigation of 2026-12-05, not part of the maintained suite (``make bench``). Quoted in
docs/how-to/index-and-compress.md (the default rescoring multiplier of SQ and PQ).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from whitevec.datasets.retrieval import RetrievalDataset, load_retrieval_dataset
from whitevec.encoders.transformer import Encoder
from whitevec.evaluation.retrieval import evaluate_retrieval

MULTIPLIERS = (1, 2, 4, 10)
OUT = Path(__file__).resolve().parents[1] / "results" / "rescore_cranfield.json"


def codes(dim: int) -> list[str]:
    return ["sq8", "sq4", f"pq{dim // 8}"]


def measure(model: str, data: RetrievalDataset) -> dict[str, float]:
    encoder = Encoder(model, "last-avg")
    encodings = ["float32"]
    for code in codes(encoder.dim):
        encodings += [code, *(f"{code}+rescore={k}" for k in MULTIPLIERS)]
    report = evaluate_retrieval(encoder, data, ["none"], encodings=encodings, latency_queries=0)
    encoder.close()
    return {s.encoding: round(100 * s.ndcg_10, 2) for s in report.scores}


def smallest_k(results: dict[str, dict[str, float]], code_of: dict[str, str]) -> int | None:
    """The smallest K in MULTIPLIERS keeping every model within 1% of its float32 (None: none does)."""
    for k in MULTIPLIERS:
        if all(f[f"{code_of[m]}+rescore={k}"] >= 0.99 * f["float32"] for m, f in results.items()):
            return k
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["all-MiniLM-L6-v2", "all-mpnet-base-v2"])
    args = parser.parse_args()
    data = load_retrieval_dataset("cranfield")
    figures = {model: measure(model, data) for model in args.models}
    families: dict[str, int | None] = {}
    for family in ("sq8", "sq4", "pq"):
        code_of = {m: next(c.split("+")[0] for c in f if c.startswith(family)) for m, f in figures.items()}
        families[family] = smallest_k(figures, code_of)
    for model, found in figures.items():
        for name, value in found.items():
            print(f"{model:18s} {name:20s} {value:6.2f} ({100 * value / found['float32']:5.1f}% of float32)")
    print("smallest K within 1% of float32 for every model:", families)
    results = {"date": time.strftime("%Y-%m-%d"), "dataset": "cranfield", "metric": "nDCG@10", "models": figures,
               "smallest_k_within_1pct": families}  # fmt: skip
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
