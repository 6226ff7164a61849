"""Milvus's own BM25 against whitevec's bm25s index (issue 39, item 4): nDCG@10 on a retrieval collection of the
lexical, dense and hybrid searches of one index built on FAISS (bm25s beside the vectors) and one built on Milvus
Lite (Milvus's BM25 function on the collection's text field, hybrid rrf through its ``hybrid_search``), with the
same model and pooling (all-MiniLM-L6-v2 last-avg by default) and the ``english`` analyzer; on FAISS also with
``plain`` (no stop words, no stemmer), to show what Milvus Lite's missing stemmer costs. Quality figures only:
the machine's load does not change them.

    python benchmarks/investigations/milvus_bm25_quality.py [--collection cranfield] [--data-dir DIR]

An investigation of 2026-12-06, not part of the maintained suite (`make bench`). Quoted in
docs/how-to/hybrid-search.md (on Milvus).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import warnings
from pathlib import Path

from whitevec.datasets.retrieval import load_retrieval_dataset
from whitevec.encoders import load_encoder
from whitevec.evaluation.retrieval import ndcg_at_k
from whitevec.index import Retriever

SEARCHES = {"lexical": ("lexical", None), "dense": ("dense", None), "rrf:60": ("hybrid", "rrf:60")}
SEARCHES["convex:0.6"] = ("hybrid", "convex:0.6")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", default="cranfield")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--pooling", default="last-avg")
    args = parser.parse_args()
    data = load_retrieval_dataset(args.collection, args.data_dir)
    queries = data.judged_queries()
    texts, qids = list(queries.values()), list(queries)
    builds = {
        "faiss english (bm25s)": {"lexical": "bm25", "analyzer": "english"},
        "faiss plain (bm25s)": {"lexical": "bm25", "analyzer": "plain"},
        "milvus-lite english (Milvus BM25)": {"lexical": "bm25", "analyzer": "english", "backend": "milvus"},
    }
    table: dict[str, dict[str, float]] = {}
    with load_encoder(args.model, args.pooling) as encoder, tempfile.TemporaryDirectory() as tmp:
        for i, (name, options) in enumerate(builds.items()):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Milvus Lite does not stem: said at build, measured here
                retriever = Retriever.build(data.corpus, Path(tmp) / str(i), encoder=encoder, **options)
            with retriever:
                table[name] = {}
                for label, (mode, fusion) in SEARCHES.items():
                    found = retriever.search(texts, 10, mode=mode, fusion=fusion)
                    pairs = zip(qids, found, strict=True)
                    scores = [ndcg_at_k([h.id for h in hits], data.qrels[q], 10) for q, hits in pairs]
                    table[name][label] = round(100 * sum(scores) / len(scores), 2)
    print(json.dumps({"collection": data.name, "queries": len(qids), "ndcg@10": table}, indent=2))


if __name__ == "__main__":
    main()
