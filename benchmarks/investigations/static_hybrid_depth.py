"""A static table + BM25: nDCG@10 of hybrid search by the dense weight and the candidate depth (issue 39's target
"a static table + BM25 >= the contextual model's dense average", which planning figures met with whole-corpus
min-max scaling and the shipped fusion, scaled over each ranker's candidates, misses at its default weight).

Dated 2026-12-06. Quoted by docs/results/hybrid.md. Quality figures: they do not depend on the load.

    python -W ignore benchmarks/investigations/static_hybrid_depth.py [--data-dir DIR]

The table is ``whitevec distill all-MiniLM-L6-v2`` with its defaults (benchmarks.common.data's
``default_static_table``, made once).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import default_static_table

from whitevec.datasets.paths import resolve_data_dir
from whitevec.datasets.retrieval import load_retrieval_dataset
from whitevec.encoders import load_encoder
from whitevec.evaluation.retrieval import ndcg_at_k
from whitevec.index import Retriever

COLLECTIONS = ("cranfield", "med", "cacm")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None)
    data = resolve_data_dir(parser.parse_args().data_dir)
    table: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in COLLECTIONS:
            dataset = load_retrieval_dataset(name if name == "cranfield" else str(data / "retrieval" / name), data)
            queries = dataset.judged_queries()
            with Retriever.build(
                dataset.corpus,
                Path(tmp) / name,
                encoder=load_encoder(str(default_static_table("all-MiniLM-L6-v2"))),
                lexical="bm25",
            ) as index:
                for candidates in (10, 30, 100):
                    for fusion in ("convex:0.5", "convex:0.3"):
                        hits = index.search(
                            list(queries.values()), 10, mode="hybrid", fusion=fusion, candidates=candidates
                        )
                        scores = [
                            ndcg_at_k([h.id for h in found], dataset.qrels[q], 10)
                            for q, found in zip(queries, hits, strict=True)
                        ]
                        table.setdefault(f"{fusion}, candidates {candidates}", {})[name] = 100 * float(
                            np.mean(scores)
                        )
    print("| static table + BM25 | Cranfield | MED | CACM | average |")
    print("|---|---:|---:|---:|---:|")
    for label, row in table.items():
        values = [row[c] for c in COLLECTIONS]
        print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in values) + f" | {np.mean(values):.2f} |")


if __name__ == "__main__":
    main()
