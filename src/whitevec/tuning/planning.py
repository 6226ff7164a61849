"""Planning a tuning run: the grid of candidates the user asked for, what each encoding really becomes at each
transform's output dimension (and which cannot be), the budget, the order (cheapest first, flow last) and the
time box that cuts the list when the time runs out."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from whitevec.errors import BadInputError
from whitevec.index.encodings.spec import fit_to_training, list_encodings, parse_encoding
from whitevec.index.faiss.encoded import TRAIN_SAMPLE
from whitevec.tuning.items import Items
from whitevec.tuning.space import (
    ALL_ENCODINGS,
    Candidate,
    check_transform_for_dim,
    check_transforms,
    default_transforms,
    encoding_bytes,
    output_dim,
)


@dataclass
class Grid:
    """What the user asked to consider: the axes of the candidate grid, and the budget."""

    poolings: dict[str, list[str]]  # model -> the poolings it is tuned with
    specs: list[str] | None  # None: each model's default transforms
    encodings: list[str]
    include_flow: bool
    budget: int | None  # max bytes per vector
    # How the candidates search (retrieval only): the modes asked (dense is always scored for the baseline) and
    # the fusions each hybrid candidate is scored with.
    modes: tuple[str, ...] = ("dense",)
    fusions: tuple[str, ...] = ()


@dataclass
class Plan:
    """The candidates to score, baseline first, flow last; those the plan already knows it cannot score, with
    the reason (an encoding that cannot take the transform's output)."""

    candidates: list[Candidate]
    skipped: dict[Candidate, str]


def plan_candidates(grid: Grid, info: dict[str, dict[str, Any]], items: Items, notes: list[str]) -> Plan:
    """Every candidate of the grid, cheapest first and flow last (so a time box cuts the slow ones); those over
    the budget left out (the baseline excepted). Notes what was lowered, skipped or left out."""
    n_train = min(items.stored_rows.size, TRAIN_SAMPLE)
    plan: list[Candidate] = []
    skipped: dict[Candidate, str] = {}
    over_budget = 0
    for model, poolings in grid.poolings.items():
        dim = int(info[model]["dim"])
        specs = grid.specs
        if specs is None:
            specs = check_transforms(default_transforms(dim, include_flow=grid.include_flow))
        for spec in specs:
            check_transform_for_dim(spec, dim)
        for pooling in poolings:
            for spec in specs:
                out_dim = output_dim(spec, dim)
                for asked in _expand_encodings(grid.encodings, out_dim, searched=items.kind == "retrieval"):
                    try:
                        encoding, lowered = _effective_encoding(asked, out_dim, n_train)
                    except BadInputError as exc:
                        reason = str(exc).split("; ")[0]
                        skipped[Candidate(model, pooling, spec, asked)] = f"skipped: {_short(reason)}"
                        if str(exc) not in notes:
                            notes.append(str(exc))
                        plan.append(Candidate(model, pooling, spec, asked))
                        continue
                    if lowered and lowered not in notes:
                        notes.append(lowered)
                    baseline = not plan
                    if (
                        not baseline
                        and grid.budget is not None
                        and encoding_bytes(encoding, out_dim) > grid.budget
                    ):
                        over_budget += 1
                        continue
                    plan += _searched(Candidate(model, pooling, spec, encoding), grid, baseline)
    plan = list(dict.fromkeys(plan))  # two asked encodings may come to the same one (pq96, pq96x5)
    _note_plan(plan, skipped, grid.budget, over_budget, notes)
    plan.sort(key=lambda c: c.family == "flow")  # stable: the order above otherwise
    return Plan(plan, skipped)


def _searched(dense: Candidate, grid: Grid, baseline: bool) -> list[Candidate]:
    """The candidates of one model, pooling, transform and encoding: dense (always for the baseline), the
    lexical ranking once per model and pooling (beside its no-transform float32 candidate: lexical search
    reads no vector), and one hybrid candidate per fusion."""
    out = [dense] if baseline or "dense" in grid.modes else []
    if "lexical" in grid.modes and (dense.transform, dense.encoding) == ("none", "float32"):
        out.append(replace(dense, mode="lexical"))
    if "hybrid" in grid.modes:
        out += [replace(dense, mode="hybrid", fusion=fusion) for fusion in grid.fusions]
    return out


def _note_plan(
    plan: list[Candidate], skipped: dict[Candidate, str], budget: int | None, over_budget: int, notes: list[str]
) -> None:
    """Refuse a budget no candidate fits; note the candidates left out or skipped."""
    if budget is not None:
        within = [c for c in plan[1:] if c not in skipped]
        if not within:
            raise BadInputError(
                f"no candidate fits in {budget} bytes per vector (the encodings' code bytes at each "
                "transform's output dimension); raise --max-bytes-per-vector, or add smaller encodings (sq4, pqM "
                "with a small M) or lower-dimensional transforms (whitening-K)"
            )
        if over_budget:
            notes.append(
                f"{over_budget} candidates over the budget of {budget} bytes per vector left out "
                "(none / float32 is scored as the baseline all the same)"
            )
    if skipped:
        notes.append(
            f"{len(skipped)} candidates skipped: their encoding does not fit the transform's output (above)"
        )


@dataclass
class TimeBox:
    """``max_seconds`` from the start of the run: candidates with a transform are not fitted once it is spent."""

    started: float
    max_seconds: float | None
    cut: int = 0  # candidates left unscored because it ran out

    def spent(self, candidate: Candidate) -> bool:
        over = self.max_seconds is not None and time.perf_counter() - self.started > self.max_seconds
        return over and candidate.transform != "none"


def _expand_encodings(names: Sequence[str], dim: int, *, searched: bool = True) -> list[str]:
    """The encoding specs to try at output dimension ``dim``: ``all`` becomes every spec
    :func:`whitevec.index.encodings.spec.list_encodings` gives (the budget is applied afterwards, to the bytes of
    the encoding the index would really use), without those only a search scores unless ``searched`` (retrieval);
    float32 stays first."""
    out: list[str] = []
    for name in names:
        if name == ALL_ENCODINGS:
            out += [e for e in list_encodings(dim) if searched or parse_encoding(e).scoring != "search"]
        else:
            out.append(name)
    return list(dict.fromkeys(["float32", *out]))


def _short(reason: str) -> str:
    """A table-sized reason: ``pq48: PQ with M=48 sub-quantizers needs M to divide the dimension d=128`` ->
    ``M=48 does not divide d=128``."""
    match = re.search(r"M=(\d+) sub-quantizers needs M to divide the dimension d=(\d+)", reason)
    if match:
        return f"M={match.group(1)} does not divide d={match.group(2)}"
    match = re.search(r"needs at least (\d+) training vectors", reason)
    return f"needs {match.group(1)} training vectors" if match else reason


def _effective_encoding(spec: str, dim: int, n_train: int) -> tuple[str, str | None]:
    """The encoding a flat index of ``n_train`` training vectors would store at dimension ``dim`` (PQ bits lowered
    when too few train it, :func:`whitevec.index.encodings.spec.fit_to_training`), and the note saying so;
    BadInputError when the encoding cannot take ``dim`` (PQ's M must divide it) or has too few training vectors at
    all."""
    encoding = parse_encoding(spec)
    encoding.check_dim(dim)
    used, _, notes = fit_to_training(encoding, "flat", {}, n_train)
    if n_train < used.min_training(dim):
        raise BadInputError(
            f"{used.spec} needs at least {used.min_training(dim)} training vectors at d={dim}; got {n_train}"
        )
    return used.spec, ("; ".join(notes) if notes else None)
