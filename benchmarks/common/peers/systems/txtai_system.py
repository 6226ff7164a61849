"""txtai's ``Embeddings``: ``content=True`` (documents and their fields in its SQLite database, so filters are
SQL), ``hybrid=True`` (its BM25 ``scoring`` index beside the dense one, fused with weights 0.5), its default ANN
backend (faiss, the factory txtai picks for the row count), saved to the folder after every write (``save``:
txtai keeps an index in memory until then). The given vectors go in through txtai's ``external`` vectors method:
a ``transform`` that looks each text up among the texts it was given. Dense and lexical searches are hybrid
searches with weights 1 and 0 (what txtai offers on a hybrid index); filters:
``select id from txtai where similar(:q) and bucket < N``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from benchmarks.common.peers.inputs import MODEL, Docs, Queries

PACKAGES = ("txtai", "faiss-cpu")
SETTINGS = {
    "default": "given vectors (method external), hybrid=True: BM25 with txtai's tokenizer (lower case, no "
    "stemming, no stop words), fused convexly with weights 0.5",
    "encodes": "txtai encodes the texts itself with all-MiniLM-L6-v2 (its default model, from the same local "
    "folder), as the issue's txtai rows",
}
_WEIGHTS = {"dense": 1.0, "lexical": 0.0, "hybrid": 0.5}


class TextVectors:
    """txtai's ``transform``: each text's vector, looked up among the texts given so far."""

    def __init__(self) -> None:
        self.rows: dict[str, np.ndarray] = {}

    def learn(self, texts: list[str], vectors: np.ndarray) -> None:
        self.rows.update(zip(texts, vectors, strict=True))

    def __call__(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.rows[text] for text in texts])


class TxtaiSystem:
    modes = ("dense", "lexical", "hybrid")

    def __init__(self, folder: Path, setting: str) -> None:
        from txtai import Embeddings

        self.folder, self.setting = folder, setting
        self.vectors = TextVectors()
        self.embeddings: Any = Embeddings(self._config())
        if (folder / "config.json").exists():
            self.embeddings.load(str(folder), config=self._config())

    def _config(self) -> dict[str, Any]:
        if self.setting == "encodes":
            from whitevec.encoders.models import resolve_model

            return {"path": str(resolve_model(MODEL)), "content": True, "hybrid": True}
        # txtai calls a transform that is not a plain function to make one: a lambda is taken as it is
        return {
            "method": "external",
            "transform": lambda texts: self.vectors(texts),
            "content": True,
            "hybrid": True,
        }

    def build(self, docs: Docs, lexical: bool) -> None:
        if not lexical:
            self.embeddings = type(self.embeddings)({**self._config(), "hybrid": False})
        self.vectors.learn(docs.texts, docs.vectors)
        self.embeddings.index(_rows(docs))
        self.embeddings.save(str(self.folder))

    def search(self, mode: str, queries: Queries, k: int, below: int | None = None) -> list[list[str]]:
        self.vectors.learn(queries.texts, queries.vectors)
        weights = _WEIGHTS[mode] if self.embeddings.scoring else None
        if below is None:
            found = self.embeddings.batchsearch(queries.texts, k, weights=weights)
        else:
            sql = f"select id, score from txtai where similar(:q) and bucket < {below}"
            found = [self.embeddings.search(sql, k, weights=weights, parameters={"q": q}) for q in queries.texts]
        return [[str(hit["id"]) for hit in hits] for hits in found]

    def add(self, docs: Docs) -> None:
        self.vectors.learn(docs.texts, docs.vectors)
        self.embeddings.upsert(_rows(docs))
        self.embeddings.save(str(self.folder))

    def delete(self, ids: list[str]) -> None:
        self.embeddings.delete(ids)
        self.embeddings.save(str(self.folder))

    def close(self) -> None:
        self.embeddings.close()


def _rows(docs: Docs) -> list[tuple[str, dict[str, Any], None]]:
    return [
        (i, {"text": text, "bucket": int(b)}, None)
        for i, text, b in zip(docs.ids, docs.texts, docs.buckets.tolist(), strict=True)
    ]


def open_system(folder: Path, setting: str) -> TxtaiSystem:
    return TxtaiSystem(folder, setting)
