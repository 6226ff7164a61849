"""Chroma, local: ``chromadb.PersistentClient(FOLDER)``, one collection with no embedding function (the vectors
are given), its default HNSW index (space ``l2``, which ranks unit vectors as cosine does), the text as each
document and ``bucket`` as metadata, added in batches of the client's ``get_max_batch_size()``. Dense search:
``query(query_embeddings=..., n_results=k)``, every query in one call; filters: ``where={"bucket": {"$lt": N}}``.
Local Chroma has no ranked full-text search: its ``Collection.search`` (BM25 and hybrid ranking) raises
NotImplementedError "for Local Chroma" in chromadb 1.5, and ``where_document`` only filters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common.peers.inputs import Docs, Queries

PACKAGES = ("chromadb",)
SETTINGS = {"default": "HNSW at Chroma's defaults (space l2, M 16, ef_construction 100, ef_search 100)"}
COLLECTION = "docs"


class ChromaSystem:
    modes = ("dense",)

    def __init__(self, folder: Path, setting: str) -> None:
        import chromadb

        self.client: Any = chromadb.PersistentClient(path=str(folder))
        names = {c if isinstance(c, str) else c.name for c in self.client.list_collections()}
        self.collection: Any = (
            self.client.get_collection(COLLECTION, embedding_function=None) if COLLECTION in names else None
        )

    def build(self, docs: Docs, lexical: bool) -> None:
        self.collection = self.client.create_collection(COLLECTION, embedding_function=None)
        self.add(docs)

    def search(self, mode: str, queries: Queries, k: int, below: int | None = None) -> list[list[str]]:
        where = None if below is None else {"bucket": {"$lt": below}}
        found = self.collection.query(query_embeddings=queries.vectors, n_results=k, where=where, include=[])
        return [list(ids) for ids in found["ids"]]

    def add(self, docs: Docs) -> None:
        step = self.client.get_max_batch_size()
        for first in range(0, len(docs), step):
            part = docs.part(slice(first, first + step))
            self.collection.add(
                ids=part.ids,
                embeddings=part.vectors,
                documents=part.texts,
                metadatas=[{"bucket": int(b)} for b in part.buckets.tolist()],
            )

    def delete(self, ids: list[str]) -> None:
        self.collection.delete(ids=ids)

    def close(self) -> None:
        self.client.close() if hasattr(self.client, "close") else None


def open_system(folder: Path, setting: str) -> ChromaSystem:
    return ChromaSystem(folder, setting)
