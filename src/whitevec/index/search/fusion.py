"""The fusion of a dense and a lexical ranking (hybrid search; the modes are :mod:`whitevec.index.search.modes`).

A hybrid search asks each ranker for its top ``candidates x k`` documents
(:data:`CANDIDATE_FACTOR` unless given) and fuses those two short lists, so no query scores the whole corpus in
Python. Two fusions (:class:`Fusion`, written ``rrf[:K]`` or ``convex[:ALPHA]``, :func:`parse_fusion`):

- ``convex``: ``alpha x minmax(dense) + (1 - alpha) x minmax(lexical)``, each ranker's scores scaled to [0, 1]
  over its own candidate list of that query (``alpha`` is the dense weight);
- ``rrf``: reciprocal rank fusion, ``sum over rankers of 1 / (K + rank)``, ranks from 1.

Nothing here imports more than numpy: the CLI checks a fusion before any model loads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from whitevec.errors import BadInputError

FUSION_METHODS = ("rrf", "convex")
FUSION_FORMS = "rrf, rrf:K (K an integer >= 1), convex or convex:ALPHA (0 <= ALPHA <= 1, the dense weight)"
RRF_K = 60  # `rrf` alone: the constant of Cormack et al. (2009), what the vector databases default to
# `convex` alone, and the default. Measured with this module's candidate-list min-max (all-MiniLM-L6-v2,
# benchmarks/investigations/hybrid_modes.py): 0.4-0.6 is a flat top, 0.5 the best average of Cranfield, MED,
# CACM and ADI and above dense alone on each.
CONVEX_ALPHA = 0.5
# Each ranker's top CANDIDATE_FACTOR x k documents are fused: enough that a document ranked well by one ranker
# is usually in the other's list too (min-max then scales over a list of the same depth for every query).
CANDIDATE_FACTOR = 10


@dataclass(frozen=True)
class Fusion:
    """How a hybrid search combines its two rankings: ``method`` ``"rrf"`` with ``k`` (>= 1), or ``"convex"``
    with ``alpha`` (the dense weight, 0 to 1). The other method's parameter is unused."""

    method: str
    k: int = RRF_K
    alpha: float = CONVEX_ALPHA

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise BadInputError(f"unknown fusion {self.method!r}; valid: {FUSION_FORMS}")
        if isinstance(self.k, bool) or not isinstance(self.k, int | np.integer) or self.k < 1:
            raise BadInputError(f"the rrf constant must be an integer >= 1, got {self.k!r}; valid: {FUSION_FORMS}")
        alpha = self.alpha
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 <= alpha <= 1:
            raise BadInputError(f"the convex weight must be between 0 and 1, got {alpha!r}; valid: {FUSION_FORMS}")
        object.__setattr__(self, "k", int(self.k))
        object.__setattr__(self, "alpha", float(alpha))

    @property
    def spec(self) -> str:
        """The canonical form :func:`parse_fusion` reads back: ``rrf:60``, ``convex:0.5``."""
        return f"rrf:{self.k}" if self.method == "rrf" else f"convex:{self.alpha:g}"

    def __str__(self) -> str:
        return self.spec


DEFAULT_FUSION = Fusion("convex", alpha=CONVEX_ALPHA)


def parse_fusion(spec: str | Fusion) -> Fusion:
    """A :class:`Fusion` from ``rrf``, ``rrf:K``, ``convex`` or ``convex:ALPHA`` (case and spaces ignored); a
    Fusion is returned as is. A one-line BadInputError naming the valid forms for anything else."""
    if isinstance(spec, Fusion):
        return spec
    if not isinstance(spec, str):
        raise BadInputError(f"a fusion is a string, got {type(spec).__name__}; valid: {FUSION_FORMS}")
    method, colon, value = spec.strip().lower().partition(":")
    method, value = method.strip(), value.strip()
    if method not in FUSION_METHODS or (colon and not value):
        raise BadInputError(f"unknown fusion {spec!r}; valid: {FUSION_FORMS}")
    if not value:
        return Fusion(method)
    if method == "rrf":
        if not value.isdecimal():
            raise BadInputError(f"fusion {spec!r}: K must be an integer >= 1; valid: {FUSION_FORMS}")
        return Fusion("rrf", k=int(value))
    try:
        alpha = float(value)
    except ValueError:
        alpha = math.nan
    if not 0 <= alpha <= 1:  # NaN fails too
        raise BadInputError(f"fusion {spec!r}: ALPHA must be a number from 0 to 1; valid: {FUSION_FORMS}")
    return Fusion("convex", alpha=alpha)


@dataclass(frozen=True)
class Ranked:
    """Where one ranker put a document: its ``rank`` (from 1) and its own ``score``."""

    rank: int
    score: float


@dataclass(frozen=True)
class FusedHit:
    """One fused result: the store ``row``, the fused ``score``, and where each ranker put it (None: not among
    that ranker's candidates)."""

    row: int
    score: float
    dense: Ranked | None
    lexical: Ranked | None

    def rankers(self) -> list[tuple[str, Ranked]]:
        """``(name, Ranked)`` of each ranker that found the document: ``dense``, then ``lexical``."""
        return [(name, at) for name, at in (("dense", self.dense), ("lexical", self.lexical)) if at is not None]


def fuse(
    dense_rows: np.ndarray,
    dense_scores: np.ndarray,
    lexical_rows: np.ndarray,
    lexical_scores: np.ndarray,
    fusion: Fusion,
    k: int,
    *,
    metric: str = "cosine",
) -> list[list[FusedHit]]:
    """Each query's top ``k`` of the union of its two candidate lists, best first.

    The inputs are (n, depth) arrays, best first, rows -1 where a ranker found fewer (a row may be all -1: that
    ranker has nothing for the query, and the other ranking is returned alone). Dense scores are the store's:
    for ``metric`` ``l2`` lower is closer, so they are negated before scaling.

    ``convex``: each list's scores are min-max scaled to [0, 1] over that list (all 1 when they are equal), and a
    document absent from one list gets 0 from it, as that list's last candidate does; fused =
    ``alpha x dense + (1 - alpha) x lexical``. ``rrf``: fused = the sum of ``1 / (K + rank)`` over the lists that
    hold the document. Ties go to the better dense rank, then the better lexical rank, then the lower row.
    """
    shapes = (dense_rows.shape, dense_scores.shape, lexical_rows.shape, lexical_scores.shape)
    if not (
        dense_rows.ndim == lexical_rows.ndim == 2
        and shapes[0] == shapes[1]
        and shapes[2] == shapes[3]
        and shapes[0][0] == shapes[2][0]
    ):
        raise ValueError(f"fuse takes (n, depth) rows and scores of each ranker for the same n, got {shapes}")
    sign = -1.0 if metric == "l2" else 1.0
    return [
        _fuse_query(d_rows, d_scores, l_rows, l_scores, fusion, k, sign)
        for d_rows, d_scores, l_rows, l_scores in zip(
            dense_rows, dense_scores, lexical_rows, lexical_scores, strict=True
        )
    ]


def _fuse_query(
    d_rows: np.ndarray,
    d_scores: np.ndarray,
    l_rows: np.ndarray,
    l_scores: np.ndarray,
    fusion: Fusion,
    k: int,
    sign: float,
) -> list[FusedHit]:
    d_found, l_found = d_rows >= 0, l_rows >= 0
    d_rows, d_scores = d_rows[d_found].astype(np.int64), d_scores[d_found].astype(np.float64)
    l_rows, l_scores = l_rows[l_found].astype(np.int64), l_scores[l_found].astype(np.float64)
    union = np.union1d(d_rows, l_rows)  # sorted: each list's documents found by searchsorted
    d_at, l_at = np.searchsorted(union, d_rows), np.searchsorted(union, l_rows)
    absent = np.iinfo(np.int64).max  # a rank after every real one, for the tie order
    d_rank, l_rank = np.full(len(union), absent), np.full(len(union), absent)
    d_rank[d_at], l_rank[l_at] = np.arange(1, len(d_at) + 1), np.arange(1, len(l_at) + 1)
    d_part, l_part = np.zeros(len(union)), np.zeros(len(union))
    if fusion.method == "rrf":
        d_part[d_at], l_part[l_at] = 1.0 / (fusion.k + d_rank[d_at]), 1.0 / (fusion.k + l_rank[l_at])
        fused = d_part + l_part
    else:
        d_part[d_at], l_part[l_at] = _min_max(sign * d_scores), _min_max(l_scores)
        fused = fusion.alpha * d_part + (1.0 - fusion.alpha) * l_part
    order = np.lexsort((union, l_rank, d_rank, -fused))[:k]
    d_score, l_score = np.zeros(len(union)), np.zeros(len(union))  # each ranker's own score, where it has one
    d_score[d_at], l_score[l_at] = d_scores, l_scores
    return [
        FusedHit(
            row=int(union[i]),
            score=float(fused[i]),
            dense=Ranked(int(d_rank[i]), float(d_score[i])) if d_rank[i] != absent else None,
            lexical=Ranked(int(l_rank[i]), float(l_score[i])) if l_rank[i] != absent else None,
        )
        for i in order.tolist()
    ]


def _min_max(scores: np.ndarray) -> np.ndarray:
    """``scores`` scaled to [0, 1] over themselves; all 1 when they are all equal (each is the list's best)."""
    if scores.size == 0:
        return scores
    low, high = scores.min(), scores.max()
    return np.ones_like(scores) if high == low else (scores - low) / (high - low)
