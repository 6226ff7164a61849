"""Searchable indexes of transformed sentence vectors: FAISS on one machine, Milvus to scale out.

>>> from whitevec.encoders import Encoder                                             # doctest: +SKIP
>>> r = Retriever.build("corpus.jsonl", "idx", encoder=Encoder(pooling="last-avg"))  # doctest: +SKIP
>>> Retriever.load("idx").search(["how do wings stall?"], k=5)                        # doctest: +SKIP
"""

# The vector stores and document stores register themselves by name when their modules are imported
# (whitevec.index.store, whitevec.index.documents).
from whitevec.datasets.retrieval import Document, read_corpus_file
from whitevec.index import docstore, faiss_store, milvus_docs, milvus_store  # noqa: F401
from whitevec.index.build import build_index, check_build, stored_dim
from whitevec.index.documents import DocumentStore, document_store_names
from whitevec.index.encodings import Encoding, list_encodings, parse_encoding, storage_estimate
from whitevec.index.faiss_store import FaissStore
from whitevec.index.retriever import QueryHits, Retriever, SearchHit, SearchResults, check_encoder
from whitevec.index.snapshot import read_manifest
from whitevec.index.store import KINDS, METRICS, VectorStore, index_size, store_names, stored_form

__all__ = [
    "KINDS",
    "METRICS",
    "Document",
    "DocumentStore",
    "Encoding",
    "FaissStore",
    "QueryHits",
    "Retriever",
    "SearchHit",
    "SearchResults",
    "VectorStore",
    "build_index",
    "check_build",
    "check_encoder",
    "document_store_names",
    "index_size",
    "list_encodings",
    "parse_encoding",
    "read_corpus_file",
    "read_manifest",
    "storage_estimate",
    "store_names",
    "stored_dim",
    "stored_form",
]
