"""The search modes and fusion under their name before issue 50's move, kept so imports written then keep
working; their home is :mod:`whitevec.index.search.fusion`."""

from whitevec.index.search.fusion import (
    CANDIDATE_FACTOR,
    CONVEX_ALPHA,
    DEFAULT_FUSION,
    FUSION_FORMS,
    FUSION_METHODS,
    RRF_K,
    FusedHit,
    Fusion,
    Ranked,
    fuse,
    parse_fusion,
)
from whitevec.index.search.modes import (
    MODES,
    SearchPlan,
    parse_mode,
    plan_search,
    search_defaults,
    search_field_problem,
)
from whitevec.index.stores.lexical import (
    FusesItself,
    LexicalRanker,
)

__all__ = [
    "CANDIDATE_FACTOR",
    "CONVEX_ALPHA",
    "DEFAULT_FUSION",
    "FUSION_FORMS",
    "FUSION_METHODS",
    "MODES",
    "RRF_K",
    "FusedHit",
    "FusesItself",
    "Fusion",
    "LexicalRanker",
    "Ranked",
    "SearchPlan",
    "fuse",
    "parse_fusion",
    "parse_mode",
    "plan_search",
    "search_defaults",
    "search_field_problem",
]
