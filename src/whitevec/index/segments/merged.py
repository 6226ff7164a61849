"""An index of several segments, or with deleted rows, searched as one (:mod:`whitevec.index.segments.view`).

:class:`SegmentedStore`, :class:`SegmentedDocs` and :class:`SegmentedLexical` answer as the vector store,
document store and lexical ranker of a single-segment index do, over the index's rows: each segment is searched
for the same ``k`` over its own rows (the deleted ones and those a metadata filter stops masked out, as a filter
masks them), its rows shifted by its base, and the lists merged. The merge is exact: the best ``k`` of the union
are among the best ``k`` of each part.

The lexical ranking weighs terms by the statistics of every segment's live documents together
(:mod:`whitevec.index.lexical.counts`), as one build of them would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, cast

import numpy as np

from whitevec.datasets.retrieval import Document
from whitevec.errors import CorruptFileError
from whitevec.index.lexical.counts import CountedSegment, search_segments
from whitevec.index.segments.view import Segment, gathered_metadata
from whitevec.index.stores.documents import DocumentStore
from whitevec.index.stores.lexical import LexicalRanker
from whitevec.index.stores.vector import VectorStore

_Ranking = tuple[np.ndarray, np.ndarray]


def compose(
    segments: list[Segment], deleted: np.ndarray
) -> tuple[VectorStore, DocumentStore, LexicalRanker | None]:
    """The store, documents and lexical ranker over ``segments`` with ``deleted`` rows: a lone segment's own when
    nothing is deleted, else the merging ones below."""
    if len(segments) == 1 and not deleted.size:
        only = segments[0]
        return only.store, only.docs, only.lexical
    rows = Rows(segments, deleted)
    lexical = cast(LexicalRanker, SegmentedLexical(rows)) if segments[0].lexical is not None else None
    return cast(VectorStore, SegmentedStore(rows)), cast(DocumentStore, SegmentedDocs(rows)), lexical


class Rows:
    """The row space of a set of segments: which segment holds a row, and which rows are live."""

    def __init__(self, segments: list[Segment], deleted: np.ndarray) -> None:
        self.segments = segments
        self.deleted = deleted
        self.total = sum(segment.rows for segment in segments)
        self._bases = np.array([segment.base for segment in segments], dtype=np.int64)
        self.live = np.ones(self.total, dtype=bool)
        self.live[deleted] = False

    def mask(self, allowed: np.ndarray | None) -> np.ndarray | None:
        """The rows a search may return: live, and passing ``allowed`` (None: every row, none deleted)."""
        if allowed is None:
            return self.live if self.deleted.size else None
        return self.live & np.asarray(allowed, dtype=bool)[: self.total]

    def split(self, rows: Sequence[int]) -> list[tuple[Segment, list[int]]]:
        """``rows`` grouped by segment, as each segment's own rows (unknown and negative rows left out)."""
        wanted = np.unique(np.asarray([r for r in rows if 0 <= r < self.total], dtype=np.int64))
        where = np.searchsorted(self._bases, wanted, side="right") - 1
        return [
            (segment, (wanted[where == i] - segment.base).tolist())
            for i, segment in enumerate(self.segments)
            if np.any(where == i)
        ]

    def search_each(
        self,
        search: Callable[[Segment, np.ndarray | None], _Ranking],
        allowed: np.ndarray | None,
        higher_first: bool,
    ) -> _Ranking | None:
        """Each segment's ``search(segment, its slice of the mask)`` (rows, scores) merged, its rows shifted;
        segments whose rows all fail the mask are skipped (a search of none would fail). None: no segment had a
        row to search."""
        mask = self.mask(allowed)
        found: list[_Ranking] = []
        for segment in self.segments:
            part = None if mask is None else mask[segment.base : segment.base + segment.rows]
            if part is not None and part.all():
                part = None  # nothing masked here: the unfiltered search
            if segment.rows == 0 or (part is not None and not part.any()):
                continue
            rows, scores = search(segment, part)
            found.append((np.where(rows >= 0, rows + segment.base, -1), scores))
        return merge(found, higher_first) if found else None


def merge(found: list[_Ranking], higher_first: bool) -> _Ranking:
    """``(rows, scores)`` lists (n, k) of disjoint row sets merged into the best ``k`` of each query, -1 rows
    last; equal scores keep the earlier list's (the lower rows') first."""
    if len(found) == 1:
        return found[0]
    rows = np.concatenate([r for r, _ in found], axis=1)
    scores = np.concatenate([s for _, s in found], axis=1).astype(np.float32)
    k = found[0][0].shape[1]
    key = np.where(rows >= 0, -scores if higher_first else scores, np.inf)
    order = np.argsort(key, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(rows, order, axis=1), np.take_along_axis(scores, order, axis=1)


class SegmentedStore:
    """The vector store of a segmented index: ``count`` is every row (deleted ones too: what a filter's mask
    covers); a search returns live rows only."""

    def __init__(self, rows: Rows) -> None:
        first = rows.segments[0].store
        self._rows = rows
        self.name = first.name
        self.dim, self.metric, self.kind = first.dim, first.metric, first.kind

    @property
    def segments(self) -> list[Segment]:
        return self._rows.segments

    @property
    def count(self) -> int:
        return self._rows.total

    def params(self) -> dict[str, Any]:
        return self._rows.segments[0].store.params()

    def search(self, vectors: np.ndarray, k: int, allowed: np.ndarray | None = None) -> _Ranking:
        """``(scores, ids)`` as a store answers (:meth:`~whitevec.index.stores.vector.VectorStore.search`)."""
        x = np.ascontiguousarray(vectors, dtype=np.float32)

        def one(segment: Segment, part: np.ndarray | None) -> _Ranking:
            scores, ids = segment.store.search(x, k, part) if part is not None else segment.store.search(x, k)
            return ids, scores

        found = self._rows.search_each(one, allowed, higher_first=self.metric != "l2")
        if found is None:
            return np.zeros((x.shape[0], k), np.float32), np.full((x.shape[0], k), -1, np.int64)
        return found[1], found[0]

    def set_rescore_multiplier(self, multiplier: int) -> None:
        for segment in self._rows.segments:
            segment.store.set_rescore_multiplier(multiplier)  # type: ignore[attr-defined]

    def close(self) -> None:
        for segment in self._rows.segments:
            segment.store.close()


class SegmentedDocs:
    """The documents of a segmented index, by the index's rows; deleted rows are invisible."""

    name: ClassVar[str] = "sqlite"

    def __init__(self, rows: Rows) -> None:
        self._rows = rows

    @property
    def count(self) -> int:
        return self._rows.total - int(self._rows.deleted.size)

    def next_row(self) -> int:
        return self._rows.total

    def get(self, rows: Sequence[int]) -> dict[int, Document]:
        out: dict[int, Document] = {}
        live = self._rows.live
        for segment, own in self._rows.split(rows):
            for row, doc in segment.docs.get(own).items():
                if live[segment.base + row]:
                    out[segment.base + row] = doc
        return out

    def metadata(self) -> dict[int, dict[str, Any] | None]:
        return gathered_metadata(
            ((segment.base, segment.docs) for segment in self._rows.segments), self._rows.live
        )

    def rows_of(self, ids: Sequence[str]) -> dict[str, int]:
        """``{id: row}`` of those of ``ids`` held by a live document."""
        out: dict[str, int] = {}
        live = self._rows.live
        for segment in self._rows.segments:
            for doc_id, row in segment.docs.rows_of(ids).items():
                if live[segment.base + row]:
                    out[doc_id] = segment.base + row
        return out

    def existing_ids(self, ids: Sequence[str]) -> list[str]:
        found = self.rows_of(ids)
        return [doc_id for doc_id in ids if doc_id in found]

    def close(self) -> None:
        for segment in self._rows.segments:
            segment.docs.close()


class SegmentedLexical:
    """The lexical ranker of a segmented index: each segment's BM25 ranking over its live rows, merged by score."""

    def __init__(self, rows: Rows) -> None:
        self._rows = rows
        first = rows.segments[0].lexical
        assert first is not None, "a segmented lexical part needs every segment's"
        self.analyzer, self.params = first.analyzer, first.params

    @property
    def count(self) -> int:
        return self._rows.total

    @property
    def documents_without_terms(self) -> int:
        return sum(segment.lexical.documents_without_terms for segment in self._rows.segments if segment.lexical)

    def has_terms(self, queries: Sequence[str]) -> np.ndarray:
        return np.fromiter((bool(terms) for terms in self.analyzer.analyze(queries)), dtype=bool)

    def search(self, queries: Sequence[str], depth: int, allowed: np.ndarray | None = None) -> _Ranking:
        """The BM25 ranking over every segment's live rows, weighted by their statistics together
        (:func:`~whitevec.index.lexical.counts.search_segments`): as a build of the live documents ranks."""
        parts = [
            CountedSegment(segment.base, segment.lexical, segment.counts)
            for segment in self._rows.segments
            if segment.lexical is not None and segment.counts is not None
        ]
        if len(parts) != len(self._rows.segments):
            raise CorruptFileError("a segment of this index lacks its term counts; rebuild the index")
        return search_segments(parts, self._rows.live, queries, depth, allowed)

    def with_encoder(self, encoder: object) -> SegmentedLexical:
        """This ranker with every segment's ``encoder`` analyzer bound to ``encoder``'s tokenizer."""
        for segment in self._rows.segments:
            if segment.lexical is not None:
                segment.lexical = segment.lexical.with_encoder(encoder)
        first = self._rows.segments[0].lexical
        assert first is not None
        self.analyzer = first.analyzer
        return self
