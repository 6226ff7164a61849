"""whitevec, the library: ``Retriever.build(..., vectors=...)`` (FAISS flat, raw vectors, cosine) with its BM25
part (``lexical="bm25"``, the default ``english`` analyzer), searched with ``query_vectors`` (the given vectors:
nothing is encoded at search time in any setting)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common.peers.inputs import MODEL, Docs, Queries

PACKAGES = ("whitevec", "faiss-cpu", "bm25s")
SETTINGS = {
    "default": "given vectors, no model (external encoder); hybrid at the default fusion of such an index, "
    "convex:0.5 over each ranker's top 100",
    "model": "given vectors with all-MiniLM-L6-v2 as the index's encoder: the build chooses its fusion on "
    "pseudo-queries cut from the corpus (issue 53), hybrid at that",
    "convex:0.5": "as default, hybrid convex:0.5 named (the issue's row)",
    "rrf:60/10": "hybrid rrf:60 over each ranker's top 10 (candidates=1): LanceDB's default fusion depth",
}
_FUSION = {"convex:0.5": ("convex:0.5", None), "rrf:60/10": ("rrf:60", 1)}


class WhitevecSystem:
    modes = ("dense", "lexical", "hybrid")

    def __init__(self, folder: Path, setting: str) -> None:
        from whitevec.index import Retriever

        self.folder, self.setting = folder, setting
        self.fusion, self.candidates = _FUSION.get(setting, (None, None))
        self.index: Any = (
            Retriever.load(folder, encoder=self._encoder()) if (folder / "manifest.json").exists() else None
        )

    def _encoder(self) -> Any:
        if self.setting != "model":
            return None
        from whitevec.encoders import load_encoder

        return load_encoder(MODEL, cache=False)

    def build(self, docs: Docs, lexical: bool) -> None:
        from whitevec.index import Retriever

        encoder = self._encoder()
        self.index = Retriever.build(
            _documents(docs),
            self.folder,
            vectors=docs.vectors,
            encoder=encoder,
            encoder_name=None if encoder is not None else MODEL,
            lexical="bm25" if lexical else None,
            show_progress=False,
        )

    def search(self, mode: str, queries: Queries, k: int, below: int | None = None) -> list[list[str]]:
        hybrid = mode == "hybrid"
        results = self.index.search(
            None if mode == "dense" else queries.texts,
            k,
            mode=mode,
            fusion=self.fusion if hybrid else None,
            candidates=self.candidates if hybrid else None,
            filter=None if below is None else f"bucket < {below}",
            query_vectors=None if mode == "lexical" else queries.vectors,
        )
        return [[hit.id for hit in hits] for hits in results]

    def add(self, docs: Docs) -> None:
        self.index.add(_documents(docs), vectors=docs.vectors)

    def delete(self, ids: list[str]) -> None:
        self.index.delete(ids)

    def close(self) -> None:
        if self.index is not None:
            self.index.close()


def _documents(docs: Docs) -> list[Any]:
    from whitevec.datasets.retrieval import Document

    return [
        Document(i, text, {"bucket": int(b)})
        for i, text, b in zip(docs.ids, docs.texts, docs.buckets.tolist(), strict=True)
    ]


def open_system(folder: Path, setting: str) -> WhitevecSystem:
    return WhitevecSystem(folder, setting)
