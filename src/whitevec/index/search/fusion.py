"""Search modes and the fusion of a dense and a lexical ranking (hybrid search).

An index searches in one of :data:`MODES`: ``dense`` (the vectors alone), ``lexical`` (the BM25 index alone) or
``hybrid`` (both, fused). A hybrid search asks each ranker for its top ``candidates x k`` documents
(:data:`CANDIDATE_FACTOR` unless given) and fuses those two short lists, so no query scores the whole corpus in
Python. Two fusions (:class:`Fusion`, written ``rrf[:K]`` or ``convex[:ALPHA]``, :func:`parse_fusion`):

- ``convex``: ``alpha x minmax(dense) + (1 - alpha) x minmax(lexical)``, each ranker's scores scaled to [0, 1]
  over its own candidate list of that query (``alpha`` is the dense weight);
- ``rrf``: reciprocal rank fusion, ``sum over rankers of 1 / (K + rank)``, ranks from 1.

:func:`search_defaults` reads an index's own mode and fusion from its manifest. Nothing here imports more than
numpy: the CLI checks a mode and a fusion before any model loads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError

MODES = ("dense", "lexical", "hybrid")
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


def parse_mode(mode: str) -> str:
    """``mode`` of :data:`MODES`, lower-cased; a one-line BadInputError for another."""
    key = mode.strip().lower() if isinstance(mode, str) else mode
    if key not in MODES:
        raise BadInputError(f"unknown search mode {mode!r}; valid: {', '.join(MODES)}")
    return str(key)


def search_defaults(manifest: Mapping[str, Any]) -> tuple[str, Fusion]:
    """An index's own mode and fusion: the manifest's ``"search": {"mode", "fusion"}`` when it has one (set at
    build or by tune); else ``hybrid`` with :data:`DEFAULT_FUSION` when it has a lexical part, else ``dense``."""
    recorded = manifest.get("search")
    if recorded is None:
        mode = "hybrid" if manifest.get("lexical") is not None else "dense"
        return mode, DEFAULT_FUSION
    problem = search_field_problem(recorded)
    if problem is not None:
        raise CorruptFileError(f"the index manifest's search field: {problem}; rebuild the index")
    return parse_mode(recorded["mode"]), parse_fusion(recorded["fusion"])


def search_field_problem(value: Any) -> str | None:
    """Why ``value`` is not a manifest's ``search`` field (``{"mode": MODE, "fusion": SPEC}``), or None."""
    if not isinstance(value, dict) or set(value) != {"mode", "fusion"}:
        return f"must be an object with mode and fusion, got {value!r}"
    try:
        parse_mode(value["mode"])
        parse_fusion(value["fusion"])
    except BadInputError as exc:
        return str(exc)
    return None


@dataclass(frozen=True)
class SearchPlan:
    """How one search runs: its ``mode``; for a hybrid one, the ``fusion`` and ``candidates``, the factor of
    ``k`` each ranker contributes (both unused in the other modes)."""

    mode: str
    fusion: Fusion = DEFAULT_FUSION
    candidates: int = CANDIDATE_FACTOR

    def depth(self, k: int, count: int) -> int:
        """How many documents each ranker gives a hybrid search of ``k`` hits over ``count`` documents."""
        return max(1, min(self.candidates * k, count))


def plan_search(
    mode: str | None,
    fusion: str | Fusion | None,
    candidates: int | None,
    *,
    defaults: tuple[str, Fusion],
    has_lexical: bool,
) -> SearchPlan:
    """The search to run: ``mode`` (None: the index's default, ``defaults[0]``; a fusion or candidates given
    with no mode ask for ``hybrid``), the fusion (None: ``defaults[1]``), ``candidates`` (None:
    :data:`CANDIDATE_FACTOR`). Raises a one-line BadInputError for a bad value, a fusion or candidates with a
    mode other than hybrid, and a lexical or hybrid search of an index without a lexical part."""
    chosen = parse_mode(mode) if mode is not None else None
    fused = parse_fusion(fusion) if fusion is not None else None
    if candidates is not None and (
        isinstance(candidates, bool) or not isinstance(candidates, int | np.integer) or candidates < 1
    ):
        raise BadInputError(f"candidates must be an integer >= 1 (each ranker's top N x k), got {candidates!r}")
    if chosen is None:
        chosen = "hybrid" if fused is not None or candidates is not None else defaults[0]
    elif chosen != "hybrid" and (fused is not None or candidates is not None):
        given = "a fusion" if fused is not None else "candidates"
        raise BadInputError(f"{given} applies to hybrid search only, not to mode {chosen!r}")
    if chosen != "dense" and not has_lexical:
        raise BadInputError(
            f"{chosen} search needs a lexical index, and this index has none; rebuild it with --lexical bm25"
        )
    if chosen != "hybrid":
        return SearchPlan(chosen, defaults[1])
    return SearchPlan("hybrid", fused or defaults[1], CANDIDATE_FACTOR if candidates is None else int(candidates))


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
