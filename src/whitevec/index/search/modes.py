"""The search modes and how one search runs.

An index searches in one of :data:`MODES`: ``dense`` (the vectors alone), ``lexical`` (the BM25 index alone) or
``hybrid`` (both, fused by :mod:`whitevec.index.search.fusion`). :func:`search_defaults` reads an index's own mode
and fusion from its manifest; :func:`plan_search` turns a request into a :class:`SearchPlan`. Nothing here
imports more than numpy: the CLI checks a mode before any model loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError
from whitevec.index.search.fusion import CANDIDATE_FACTOR, DEFAULT_FUSION, Fusion, parse_fusion

MODES = ("dense", "lexical", "hybrid")
ADD_LEXICAL = "rebuild it with --lexical bm25"  # what an index without a lexical part needs for those modes


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
        raise BadInputError(f"{chosen} search needs a lexical index, and this index has none; {ADD_LEXICAL}")
    if chosen != "hybrid":
        return SearchPlan(chosen, defaults[1])
    return SearchPlan("hybrid", fused or defaults[1], CANDIDATE_FACTOR if candidates is None else int(candidates))
