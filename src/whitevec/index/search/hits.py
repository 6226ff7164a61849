"""What a search answers: :class:`SearchHit` (one document found), :class:`QueryHits` (one query's, with a note
when a ranker could not search it), :class:`SearchResults` (every query's); and the hits of a lexical or hybrid
search assembled from its rankings (:mod:`whitevec.index.search.fusion`) and the documents of their rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from whitevec.datasets.retrieval import Document
from whitevec.index.search.fusion import FusedHit


@dataclass
class SearchHit:
    """One result: the document's id, its score, text and metadata, and which rankers found it.

    ``score`` depends on the search's mode. Dense: the cosine similarity (metric ``cosine``) or inner product
    (``ip``) in the transformed space, higher is closer; for ``l2`` the squared Euclidean distance, lower is
    closer. Lexical: the BM25 score, higher is closer. Hybrid: the fused score, higher is closer (convex: 0 to 1;
    rrf: a sum of ``1 / (K + rank)``; see :mod:`whitevec.index.search.fusion`). Hits come best first.

    ``rankers`` (lexical and hybrid searches; None for dense): each ranker that had the document among its
    candidates, with its rank there (from 1) and its own score, e.g. ``{"dense": {"rank": 1, "score": 0.83},
    "lexical": {"rank": 4, "score": 12.1}}``; a ranker that did not is left out.
    """

    id: str
    score: float
    text: str
    metadata: dict[str, Any] | None = None
    rankers: dict[str, dict[str, float | int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "score": self.score,
            "text": self.text,
            "metadata": self.metadata,
            "rankers": self.rankers,
        }


# The notes on a query a ranker cannot search (see whitevec.index.Retriever.search).
UNKNOWN_QUERY_NOTE = "the query has no token the model knows; no hits"
NO_TERM_NOTE = "the query has no term left after analysis (only stop words or punctuation); no hits"
DENSE_ALONE_NOTE = "the query has no term left after analysis; the dense ranking alone"
LEXICAL_ALONE_NOTE = "the query has no token the model knows; the lexical ranking alone"
NEITHER_NOTE = "the query has no token the model knows and no term left after analysis; no hits"


class QueryHits(list[SearchHit]):
    """One query's hits, best first (a list); ``note`` says why there are none when the query was not searched,
    or, in a hybrid search, which ranking alone it got."""

    note: str | None = None


class SearchResults(list[QueryHits]):
    """:meth:`whitevec.index.Retriever.search`'s answer: one :class:`QueryHits` per query, in order (a list)."""

    @property
    def unknown_queries(self) -> list[int]:
        """Positions of the queries not searched (empty hits, with a note): no token the model knows, or, in a
        lexical search, no term left after analysis."""
        return [i for i, hits in enumerate(self) if hits.note is not None and not hits]


def no_hits(note: str) -> QueryHits:
    hits = QueryHits()
    hits.note = note
    return hits


def lexical_hits(
    rows: np.ndarray, scores: np.ndarray, terms: np.ndarray, found: Mapping[int, Document]
) -> SearchResults:
    """A lexical search's hits: each query's BM25 ranking (``rows``, ``scores``: (n, k), -1 past the end), the
    documents of ``found``; no hits and a note where ``terms`` says the query has no term left after analysis."""
    results = SearchResults()
    for has_terms, row_list, score_list in zip(terms.tolist(), rows.tolist(), scores.tolist(), strict=True):
        hits = QueryHits() if has_terms else no_hits(NO_TERM_NOTE)
        for rank, (row, score) in enumerate(zip(row_list, score_list, strict=True), start=1):
            doc = found.get(row) if row >= 0 else None
            if doc is not None:
                ranked: dict[str, dict[str, float | int]] = {"lexical": {"rank": rank, "score": float(score)}}
                hits.append(SearchHit(doc.id, float(score), doc.text, doc.metadata, ranked))
        results.append(hits)
    return results


# A hybrid query one ranker could not search: (a token the model knows, a term left) -> its note.
_HYBRID_NOTES = {(True, False): DENSE_ALONE_NOTE, (False, True): LEXICAL_ALONE_NOTE, (False, False): NEITHER_NOTE}


def fused_hits(
    fused: Sequence[Sequence[FusedHit]], known: np.ndarray, terms: np.ndarray, found: Mapping[int, Document]
) -> SearchResults:
    """A hybrid search's hits: each query's fused ranking with the documents of ``found``, noted where the
    query had no token the model knows (``known``) or no term left after analysis (``terms``)."""
    results = SearchResults()
    for query, has_token, has_terms in zip(fused, known.tolist(), terms.tolist(), strict=True):
        note = _HYBRID_NOTES.get((has_token, has_terms))
        hits = QueryHits() if note is None else no_hits(note)
        for hit in query:
            doc = found.get(hit.row)
            if doc is not None:
                ranked = {name: {"rank": at.rank, "score": at.score} for name, at in hit.rankers()}
                hits.append(SearchHit(doc.id, hit.score, doc.text, doc.metadata, ranked))
        results.append(hits)
    return results
