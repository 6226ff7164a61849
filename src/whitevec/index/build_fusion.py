"""The fusion a build with a lexical part chooses for itself, on pseudo-queries from the corpus it indexes
(issue 53: the `convex:0.5` default put a static table + BM25 below BM25 alone on two collections).

The pseudo-queries (:func:`whitevec.index.search.pseudo_queries.make_pseudo_queries`) search the cut corpus: the
stored vectors with each cut document's rest encoded in its place, and BM25 over the cut texts with the build's
analyzer. The dense side is an exact search of the stored vectors (whatever the store's encoding), the lexical
side bm25s, each ``CANDIDATE_FACTOR x 10`` deep, fused as a search fuses them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from whitevec.encoders.protocol import EncoderLike, ExternalEncoder
from whitevec.index.folder.manifest import CHOICE_FIELD
from whitevec.index.lexical.bm25 import LexicalIndex
from whitevec.index.search.fusion import CANDIDATE_FACTOR, DEFAULT_FUSION
from whitevec.index.search.pseudo_queries import (
    DEPTH,
    FusionChoice,
    build_pseudo_count,
    choose_fusion,
    make_pseudo_queries,
)
from whitevec.index.stores.vector import stored_form
from whitevec.utils.linalg import best_first

if TYPE_CHECKING:
    from whitevec.transforms.frozen import AppliesVectors

_QUERY_BLOCK = 64  # queries scored against every stored row at once: 64 x 1M float32 is 256 MB


def build_fusion_choice(
    texts: Sequence[str],
    stored: np.ndarray,
    lexical: LexicalIndex,
    encoder: EncoderLike,
    transform: AppliesVectors | None,
    metric: str,
    n: int | None = None,
    *,
    seed: int = 0,
) -> FusionChoice:
    """The fusion chosen on ``n`` pseudo-queries (None: :func:`build_pseudo_count` of the corpus) from ``texts``
    (row i stored as ``stored[i]``, BM25 ``lexical``); the default where none can be made (no document long
    enough to cut) or the encoder encodes nothing (vectors given by the caller), with the reason as its rule."""
    started = time.perf_counter()
    if isinstance(encoder, ExternalEncoder):
        return FusionChoice(DEFAULT_FUSION, "default kept: the vectors were given, no query can be encoded")
    made = make_pseudo_queries(texts, build_pseudo_count(len(texts)) if n is None else n, seed=seed)
    if not made.queries:
        return FusionChoice(DEFAULT_FUSION, "default kept: no document long enough to cut", made=made.report())
    cut = made.cut
    encoded = encoder.encode([*made.queries, *(made.corpus[i] for i in cut)], show_progress=False)
    vectors = stored_form(transform, np.asarray(encoded, dtype=np.float32), metric)
    queries, rests = vectors[: len(made.queries)], vectors[len(made.queries) :]
    depth = min(CANDIDATE_FACTOR * DEPTH, len(texts))
    dense = _exact_top(stored, queries, depth, metric, replaced=(cut, rests))
    cut_lexical = LexicalIndex.build(made.corpus, lexical.analyzer, k1=lexical.params.k1, b=lexical.params.b)
    choice = choose_fusion(dense, cut_lexical.search(made.queries, depth), made.relevant, seed=seed)
    return dataclasses.replace(choice, made=made.report(), seconds=time.perf_counter() - started)


def _exact_top(
    stored: np.ndarray, queries: np.ndarray, depth: int, metric: str, replaced: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ``depth`` best rows of ``stored`` with ``replaced`` (rows, vectors) in their place, best first,
    and scores higher-is-closer (the l2 distance negated), by blocks of queries."""
    rows_out = np.empty((len(queries), depth), dtype=np.int64)
    scores_out = np.empty((len(queries), depth), dtype=np.float32)
    at, vectors = replaced
    for start in range(0, len(queries), _QUERY_BLOCK):
        block = queries[start : start + _QUERY_BLOCK]
        scores = _closeness(stored, block, metric)
        scores[:, at] = _closeness(vectors, block, metric)
        rows_out[start : start + len(block)], scores_out[start : start + len(block)] = best_first(scores, depth)
    return rows_out, scores_out


def _closeness(rows: np.ndarray, queries: np.ndarray, metric: str) -> np.ndarray:
    """Higher is closer: inner products (cosine rows are unit already), or minus the squared l2 distance."""
    products: np.ndarray = queries @ rows.T
    if metric != "l2":
        return products
    squared = (queries**2).sum(axis=1)[:, None] + (rows**2).sum(axis=1)[None, :]
    return 2 * products - squared


def choice_fields(choice: FusionChoice | None) -> dict[str, Any]:
    """The manifest's ``search`` and ``fusion_choice`` fields of a build that chose its fusion; nothing for one
    that did not (None)."""
    if choice is None:
        return {}
    return {"search": {"mode": "hybrid", "fusion": choice.fusion.spec}, CHOICE_FIELD: choice.record()}
