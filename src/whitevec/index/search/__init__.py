"""Searching: the search modes and how one search runs (``modes``), the fusion of a dense and a lexical ranking
(``fusion``), what a search answers (``hits``)."""

from whitevec.index.search.fusion import (
    CANDIDATE_FACTOR,
    CONVEX_ALPHA,
    DEFAULT_FUSION,
    FUSION_FORMS,
    RRF_K,
    FusedHit,
    Fusion,
    Ranked,
    fuse,
    parse_fusion,
)
from whitevec.index.search.modes import MODES, SearchPlan, parse_mode, plan_search, search_defaults

__all__ = [
    "CANDIDATE_FACTOR",
    "CONVEX_ALPHA",
    "DEFAULT_FUSION",
    "FUSION_FORMS",
    "MODES",
    "RRF_K",
    "FusedHit",
    "Fusion",
    "Ranked",
    "SearchPlan",
    "fuse",
    "parse_fusion",
    "parse_mode",
    "plan_search",
    "search_defaults",
]
