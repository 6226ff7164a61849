"""nDCG@10 of each search mode of one index built with ``--lexical bm25``: dense, lexical, and hybrid with the
default fusion and its neighbours, on the retrieval collections (issue 39's first check of the shipped code).

Dated 2026-12-06. Quoted by docs/how-to/hybrid-search.md. Quality figures: they do not depend on the load.

    python benchmarks/investigations/hybrid_modes.py [--data-dir DIR] [--model all-MiniLM-L6-v2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from whitevec.datasets.retrieval import load_retrieval_dataset
from whitevec.encoders import load_encoder
from whitevec.evaluation.retrieval import ndcg_at_k
from whitevec.index import Retriever

COLLECTIONS = ("cranfield", "med", "cacm", "adi")
SEARCHES = (
    ("dense", None),
    ("lexical", None),
    *(("hybrid", f"convex:{alpha}") for alpha in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)),
    ("hybrid", "rrf:10"),
    ("hybrid", "rrf:60"),
)


def collection_path(name: str, data_dir: Path) -> str:
    return "cranfield" if name == "cranfield" else str(data_dir / "retrieval" / name)


def scores(name: str, data_dir: Path, model: str, folder: Path) -> dict[str, float]:
    dataset = load_retrieval_dataset(collection_path(name, data_dir), data_dir)
    queries = dataset.judged_queries()
    encoder = load_encoder(model)
    out = {}
    with Retriever.build(dataset.corpus, folder / name, encoder=encoder, lexical="bm25") as retriever:
        for mode, fusion in SEARCHES:
            found = retriever.search(list(queries.values()), k=10, mode=mode, fusion=fusion)
            per_query = [
                ndcg_at_k([hit.id for hit in hits], dataset.qrels[qid], 10)
                for qid, hits in zip(queries, found, strict=True)
            ]
            out[f"{mode} {fusion or ''}".strip()] = round(100 * float(np.mean(per_query)), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    args = parser.parse_args()
    from whitevec.datasets.paths import resolve_data_dir

    data_dir = resolve_data_dir(args.data_dir)
    with tempfile.TemporaryDirectory() as tmp:
        table = {name: scores(name, data_dir, args.model, Path(tmp)) for name in COLLECTIONS}
    print(json.dumps(table, indent=1))
    labels = list(next(iter(table.values())))
    print("| nDCG@10 | " + " | ".join(COLLECTIONS) + " | average (first three) |")
    print("|---|" + "---:|" * (len(COLLECTIONS) + 1))
    for label in labels:
        row = [table[name][label] for name in COLLECTIONS]
        print(f"| {label} | " + " | ".join(f"{v:.2f}" for v in row) + f" | {np.mean(row[:3]):.2f} |")


if __name__ == "__main__":
    main()
