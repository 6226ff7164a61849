"""The lexical-ranker protocol: what a search asks of an index's lexical part, wherever it lives (a bm25s index
beside the vectors, :mod:`whitevec.index.lexical`; Milvus's BM25 function, :mod:`whitevec.index.milvus.bm25`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from whitevec.index.search.fusion import FusedHit, Fusion


class LexicalRanker(Protocol):
    """What a search asks of an index's lexical part (:class:`whitevec.index.lexical.bm25.LexicalIndex`): rows are
    the vector store's int64 rows."""

    count: int

    def has_terms(self, queries: Sequence[str]) -> np.ndarray:
        """A bool per query: True where a term is left after analysis (not only stop words or punctuation)."""
        ...

    def search(
        self, queries: Sequence[str], depth: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, scores)``, int64 and float32 (n, depth), best first; -1 and -inf where fewer than ``depth``
        documents share a term with the query (a query with no term: all -1). ``allowed``: a bool per row, the
        rows a metadata filter lets through (None: all)."""
        ...


@runtime_checkable
class FusesItself(Protocol):
    """A lexical ranker that fuses its ranking with the dense one where it lives (Milvus's ``hybrid_search``)."""

    def fused(
        self,
        vectors: np.ndarray,
        queries: Sequence[str],
        lists: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        fusion: Fusion,
        k: int,
    ) -> list[list[FusedHit]] | None:
        """Each query's top ``k`` fused there, as :func:`fuse` would give them over ``lists`` (dense rows and
        scores, lexical rows and scores, (n, depth) each) with each ranker's place; ``vectors`` the queries'
        stored-form vectors. None where it cannot do ``fusion`` (the caller then runs :func:`fuse`)."""
        ...
