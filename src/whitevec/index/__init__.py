"""Searchable indexes of transformed sentence vectors: FAISS on one machine, Milvus to scale out.

>>> from whitevec.encoders import Encoder                                             # doctest: +SKIP
>>> r = Retriever.build("corpus.jsonl", "idx", encoder=Encoder(pooling="last-avg"))  # doctest: +SKIP
>>> Retriever.load("idx").search(["how do wings stall?"], k=5)                        # doctest: +SKIP
"""

# The backends (whitevec.index.faiss, whitevec.index.milvus) load when an index first names them
# (whitevec.index.stores.vector's registry), so importing this package imports neither faiss nor pymilvus.
from typing import Any

from whitevec.datasets.retrieval import Document, read_corpus_file
from whitevec.encoders.protocol import ExternalEncoder
from whitevec.index.build import build_index, check_build, stored_dim
from whitevec.index.encodings.spec import Encoding, list_encodings, parse_encoding, storage_estimate
from whitevec.index.folder.snapshot import read_manifest
from whitevec.index.given_vectors import read_vectors
from whitevec.index.retriever import QueryHits, Retriever, SearchHit, SearchResults, check_encoder
from whitevec.index.stores.documents import DocumentStore, document_store_names
from whitevec.index.stores.vector import (
    KINDS,
    METRICS,
    VectorStore,
    index_size,
    store_class,
    store_names,
    stored_form,
)

__all__ = [
    "KINDS",
    "METRICS",
    "Document",
    "DocumentStore",
    "Encoding",
    "ExternalEncoder",
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
    "read_vectors",
    "storage_estimate",
    "store_names",
    "stored_dim",
    "stored_form",
]


def __getattr__(name: str) -> Any:
    if name == "FaissStore":  # the FAISS backend, imported on first use through the registry (by its name)
        return store_class("faiss")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
