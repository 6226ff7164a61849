"""Searchable indexes of transformed sentence vectors: FAISS on one machine, Milvus to scale out.

>>> from whitevec.encoder import Encoder                                              # doctest: +SKIP
>>> r = Retriever.build("corpus.jsonl", "idx", encoder=Encoder(pooling="last-avg"))  # doctest: +SKIP
>>> Retriever.load("idx").search(["how do wings stall?"], k=5)                        # doctest: +SKIP
"""

from whitevec.datasets.retrieval import Document, read_corpus_file
from whitevec.index.backend import BACKENDS, KINDS, METRICS, VectorBackend, normalize_rows
from whitevec.index.export import export_faiss
from whitevec.index.faiss_backend import FaissBackend
from whitevec.index.retriever import Retriever, SearchHit, check_encoder
from whitevec.index.snapshot import read_manifest

__all__ = [
    "BACKENDS",
    "KINDS",
    "METRICS",
    "Document",
    "FaissBackend",
    "Retriever",
    "SearchHit",
    "VectorBackend",
    "check_encoder",
    "export_faiss",
    "normalize_rows",
    "read_corpus_file",
    "read_manifest",
]
