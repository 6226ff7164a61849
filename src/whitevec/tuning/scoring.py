"""Each candidate's score on each item: the cosine of each pair, or each query's metric under exact search over
the documents as the index would store them (ranked and scored by :mod:`whitevec.evaluation.retrieval`); and the
statistic over a set of items (Spearman x 100, or the mean metric x 100)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from whitevec.encoders.protocol import zero_unknown_rows
from whitevec.errors import BadInputError
from whitevec.evaluation.metrics import cosine_rows, spearman100
from whitevec.evaluation.retrieval import query_metric, query_scores
from whitevec.index.encodings.spec import parse_encoding
from whitevec.index.faiss.encoded import encoded_vectors, exact_rankings, searched_rankings
from whitevec.tuning.fits import Fits, fit_apply
from whitevec.tuning.items import Items, Rows
from whitevec.tuning.results import CandidateResult
from whitevec.tuning.searches import searched_scores
from whitevec.tuning.space import Candidate

STS_METRICS = ("spearman",)
RETRIEVAL_METRICS = ("ndcg@K", "recall@K", "mrr@K", "map")


def check_metric(metric: str | None, kind: str) -> str:
    """The metric name, lower-cased; raises BadInputError listing the valid ones for this kind of dev data."""
    if kind == "sts":
        name = (metric or "spearman").strip().lower()
        if name != "spearman":
            raise BadInputError(f"unknown metric {metric!r} for scored pairs; valid metrics: spearman")
        return name
    name = (metric or "ndcg@10").strip().lower()
    try:
        query_metric(name)
    except BadInputError:
        raise BadInputError(
            f"unknown metric {metric!r} for retrieval; valid metrics: {', '.join(RETRIEVAL_METRICS)} (K a "
            "positive integer, e.g. ndcg@10, recall@100)"
        ) from None
    return name


@dataclass
class Scored:
    """A scored candidate: its result row and its score on each item."""

    result: CandidateResult
    dev_items: np.ndarray  # per dev item: cosine (STS) or metric value (retrieval)
    test_items: np.ndarray | None


def score_candidate(
    candidate: Candidate, result: CandidateResult, raw: np.ndarray, items: Items, fits: Fits, known: np.ndarray
) -> Scored:
    """Fit (or reuse) the candidate's transform, store the vectors with its encoding, score every item. Texts
    with no token the model knows (``known`` False) stay out of the fit and the codes' training, and keep zero
    vectors."""
    key = (candidate.model, candidate.pooling, candidate.transform)
    if key not in fits.last_space:
        fits.last_space.clear()
        fit_rows = items.fit_rows[known[items.fit_rows]]
        space, seconds = fit_apply(candidate, raw, fit_rows, items.scored_rows, fits.shared)
        fits.last_space[key] = zero_unknown_rows(space, known), seconds
    space, result.fit_seconds = fits.last_space[key]
    if candidate.mode != "dense":  # the index's own search: its store codes the vectors (searches.py)
        return Scored(result, *searched_scores(candidate, space, items, known, fits.searches))
    coded = time.perf_counter()
    searched = parse_encoding(candidate.encoding).scoring == "search"  # coded in the scoring
    stored_rows = items.stored_rows[known[items.stored_rows]]
    stored = (
        space if searched else zero_unknown_rows(encoded_vectors(space, candidate.encoding, stored_rows), known)
    )
    result.fit_seconds += time.perf_counter() - coded
    dev_items, test_items = item_scores(stored, items, candidate.encoding, known)
    return Scored(result, dev_items, test_items)


def item_scores(
    space: np.ndarray, items: Items, encoding: str, known: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """Each dev (and test) item's score on the vectors ``space``; a pair with a text the model knows no token of
    scores 0 (its zero vector), a query without one 0, and a document without one is not ranked."""
    dev = items.dev_rows
    searchable = known[dev.docs] if dev.docs is not None else None
    if searchable is not None and not searchable.any():
        raise BadInputError("no document has a token the model knows; nothing to rank")

    def score(rows: Rows) -> np.ndarray:
        if items.kind == "sts":
            assert rows.left is not None and rows.right is not None
            return cosine_rows(space[rows.left], space[rows.right])
        assert rows.docs is not None and rows.queries is not None and searchable is not None
        doc_ids = [d.id for d, ok in zip(items.data.corpus, searchable, strict=True) if ok]
        out = per_query_scores(
            space[rows.docs[searchable]], space[rows.queries], doc_ids, rows.qrels, items.metric, encoding
        )
        out[~known[rows.queries]] = 0.0
        return out

    return score(dev), (score(items.test_rows) if items.test_rows is not None else None)


def per_query_scores(
    doc_vectors: np.ndarray,
    query_vectors: np.ndarray,
    doc_ids: list[str],
    qrels: list[Mapping[str, int]],
    metric: str,
    encoding: str = "float32",
) -> np.ndarray:
    """Each query's metric (:func:`whitevec.evaluation.retrieval.query_scores`) of its ranking under exact search
    over the documents as a flat cosine index with ``encoding`` ranks them, ties broken by document order
    (:func:`whitevec.index.faiss.encoded.exact_rankings`): by cosine for float32, by the index's own score against
    decoded codes or sign codes (``doc_vectors`` from :func:`whitevec.index.faiss.encoded.encoded_vectors`); for
    RaBitQ and ``+rescore``, the ranking of a flat store's own search at the metric's depth
    (:func:`whitevec.index.faiss.encoded.searched_rankings`)."""
    _, depth = query_metric(metric)
    depth = min(depth, len(doc_ids))
    if parse_encoding(encoding).scoring == "search":
        rankings = searched_rankings(doc_vectors, query_vectors, encoding, depth)
    else:
        rankings = exact_rankings(doc_vectors, query_vectors, encoding, depth)
    return query_scores(([doc_ids[i] for i in row if i >= 0] for row in rankings), qrels, metric)


def statistic(kind: str, scores: np.ndarray, gold: np.ndarray | None, items: np.ndarray) -> float:
    """Spearman x 100 (STS) or mean metric x 100 (retrieval) of the per-item ``scores`` over ``items``."""
    if kind == "sts":
        assert gold is not None
        return spearman100(scores[items], gold[items])
    return float(100.0 * scores[items].mean())
