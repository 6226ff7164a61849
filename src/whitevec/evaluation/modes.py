"""The search modes ``eval-retrieval`` scores beside the dense rows (``--mode dense,lexical,hybrid --fusion
SPEC,...``): one row per mode and fusion, checked before any model loads.

Each index of the grid (pooling x transform x encoding) gives its dense row and one hybrid row per fusion; the
lexical ranking needs no encoder or transform, so it is one row, scored on the first index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from whitevec.errors import BadInputError

if TYPE_CHECKING:  # whitevec.index is imported where it is used: importing the evaluation stays light
    from whitevec.index.search.fusion import Fusion


@dataclass(frozen=True)
class ModeRow:
    """One row of a configuration: ``mode`` (dense, lexical, hybrid) and a hybrid row's ``fusion``."""

    mode: str
    fusion: Fusion | None = None

    def transform_label(self, transform: str, analyzer: str) -> str:
        """The row's ``transform`` cell: the transform (dense), the BM25 ranker and its analyzer (lexical), or
        both and the fusion (hybrid)."""
        if self.mode == "lexical":
            return f"bm25 ({analyzer})"
        if self.mode == "hybrid":
            return f"{transform} + bm25 {self.fusion}"
        return transform


DENSE = ModeRow("dense")
LEXICAL = ModeRow("lexical")


@dataclass(frozen=True)
class ModePlan:
    """The rows to score: ``dense`` (a dense row per index), ``lexical`` (one lexical row), ``hybrid`` (a row
    per index and fusion), and the ``analyzer`` of the lexical part (None: no lexical part is built)."""

    dense: bool = True
    lexical: bool = False
    hybrid: tuple[ModeRow, ...] = ()
    analyzer: str | None = None

    def index_rows(self) -> list[ModeRow]:
        """The rows every index gives: its dense row, then one per fusion."""
        return ([DENSE] if self.dense else []) + list(self.hybrid)


def plan_modes(
    modes: Sequence[str] | None = None,
    fusions: Sequence[str] | None = None,
    analyzer: str | None = None,
    backend: str = "faiss",
) -> ModePlan:
    """The rows of ``modes`` (None: dense only, as before modes existed), each hybrid one with each of
    ``fusions`` (None or empty: the default fusion), over indexes of ``backend``.

    Raises:
        BadInputError: an unknown mode, fusion or analyzer; a fusion without the hybrid mode, an analyzer
            without the lexical or hybrid mode; no mode at all; a lexical part asked of a backend without one.
    """
    from whitevec.index.lexical.analyzers import DEFAULT_ANALYZER, check_analyzer_name
    from whitevec.index.lexical.bm25 import check_lexical
    from whitevec.index.search.fusion import DEFAULT_FUSION, parse_fusion
    from whitevec.index.search.modes import parse_mode

    chosen = ["dense"] if modes is None else list(dict.fromkeys(parse_mode(m) for m in modes))
    if not chosen:
        raise BadInputError("give at least one mode (dense, lexical, hybrid)")
    parsed = list(dict.fromkeys(parse_fusion(f) for f in fusions or ()))
    if parsed and "hybrid" not in chosen:
        raise BadInputError("--fusion applies to hybrid rows; add hybrid to --mode")
    lexical_part = "lexical" in chosen or "hybrid" in chosen
    if analyzer is not None and not lexical_part:
        raise BadInputError("--analyzer applies to lexical and hybrid rows; add lexical or hybrid to --mode")
    hybrid = tuple(ModeRow("hybrid", f) for f in parsed or [DEFAULT_FUSION]) if "hybrid" in chosen else ()
    if lexical_part:
        if backend != "faiss":
            # The rows score bm25s's ranking, built once per run; Milvus's BM25 is measured apart
            # (benchmarks/investigations/milvus_bm25_quality.py).
            raise BadInputError(
                f"eval-retrieval's lexical and hybrid rows run on --backend faiss, not {backend}; "
                "leave --mode out for dense rows on it"
            )
        check_lexical("bm25", analyzer or DEFAULT_ANALYZER, backend)
    return ModePlan(
        dense="dense" in chosen,
        lexical="lexical" in chosen,
        hybrid=hybrid,
        analyzer=check_analyzer_name(analyzer or DEFAULT_ANALYZER) if lexical_part else None,
    )


def no_term_note(no_term: int, of: int, analyzer: str) -> str | None:
    """One line on the queries with no term left after analysis, when there are any."""
    if not no_term:
        return None
    return (
        f"{no_term} of {of} queries have no term left after analysis (analyzer {analyzer}): the lexical row ranks "
        "nothing for them (score 0), the hybrid rows rank them by the dense ranking alone"
    )


def mode_fields(
    retriever: Any, row: ModeRow, transform: str, encoding: str, analyzer: str, queries: Sequence[str]
) -> dict[str, Any]:
    """What a lexical or hybrid row of ``retriever``'s index reports beside its quality: the configuration (a
    lexical row: none, and the lexical part's bytes as its index bytes), how many of ``queries`` have no term
    left after analysis, and NaN timings (these rows are not timed)."""
    import math

    import numpy as np

    from whitevec.index.lexical.bm25 import lexical_size

    manifest: Mapping[str, Any] = retriever.manifest
    lexical = row.mode == "lexical"
    return {
        "transform": row.transform_label(transform, analyzer),
        "encoding": "-" if lexical else encoding,
        "dim": 0 if lexical else retriever.dim,
        "index_bytes": lexical_size(dict(manifest))["lexical_bytes"] if lexical else retriever.index_bytes,
        "mode": row.mode,
        "fusion": None if row.fusion is None else row.fusion.spec,
        "no_term_queries": int(np.count_nonzero(~np.asarray(retriever.lexical.has_terms(queries), dtype=bool))),
        "p50_query_ms": math.nan,
        "p50_search_ms": math.nan,
    }
