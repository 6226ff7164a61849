"""Fitting the candidates' transforms on the fit rows, sharing what one fit can serve: one whitening (or
All-but-the-Top) fit per model and pooling serves every variant, and one transform's vectors serve each of its
encodings."""

from __future__ import annotations

import copy
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from whitevec.errors import WhitevecWarning
from whitevec.transforms import AllButTheTop, Transform, Whitening, make_transform
from whitevec.tuning.searches import Searches
from whitevec.tuning.space import Candidate

# All-but-the-Top variants are cut from one fit removing this many directions (the grid's largest D).
_ABTT_SHARED = 8


@dataclass
class Fits:
    """Fits reused across candidates: one whitening (or All-but-the-Top) fit per model and pooling serves all
    its variants, and the transformed vectors of one transform serve each of its encodings."""

    shared: dict[tuple[str, str, str], tuple[Transform, float]] = field(default_factory=dict)
    last_space: dict[tuple[str, str, str], tuple[np.ndarray, float]] = field(default_factory=dict)
    searches: Searches = field(default_factory=Searches)  # the lexical and hybrid candidates' rankings


def fit_apply(
    candidate: Candidate,
    raw: np.ndarray,
    fit_rows: np.ndarray,
    scored_rows: np.ndarray,
    shared: dict[tuple[str, str, str], tuple[Transform, float]],
) -> tuple[np.ndarray, float]:
    """Fit the candidate's transform on the fit rows and apply it to the rows the items score (other rows stay
    0); (vectors, seconds). A variant cut from a shared fit counts that fit's seconds too."""
    transform: Transform | None = make_transform(candidate.transform)
    if transform is None:
        return raw, 0.0
    started = time.perf_counter()
    with warnings.catch_warnings():
        # Floored eigenvalues (near-singular covariance): the candidate just scores what it scores.
        warnings.simplefilter("ignore", WhitevecWarning)
        if _shares_a_fit(transform, raw.shape[1]):
            fitted, reused_seconds = _from_shared_fit(candidate, transform, raw, fit_rows, shared)
        else:
            fitted, reused_seconds = transform.fit(raw[fit_rows]), 0.0
        applied = np.asarray(fitted.transform(raw[scored_rows]), dtype=np.float32)
    out = np.zeros((raw.shape[0], applied.shape[1]), dtype=np.float32)
    out[scored_rows] = applied
    return out, reused_seconds + time.perf_counter() - started


def _shares_a_fit(transform: Transform, dim: int) -> bool:
    """Whether ``transform`` is cut from its model and pooling's one shared fit: every whitening variant
    (whitening's k, beta and gamma are read when it is applied), and All-but-the-Top removing at most
    :data:`_ABTT_SHARED` directions (its D directions are the first D of the largest D's fit)."""
    if isinstance(transform, Whitening):
        return True
    return isinstance(transform, AllButTheTop) and _abtt_d(transform, dim) <= min(_ABTT_SHARED, dim)


def _from_shared_fit(
    candidate: Candidate,
    transform: Transform,
    raw: np.ndarray,
    fit_rows: np.ndarray,
    shared: dict[tuple[str, str, str], tuple[Transform, float]],
) -> tuple[Transform, float]:
    """``transform`` fitted exactly by the shared fit of its model, pooling and kind (made now if there is none
    yet); and the seconds of that fit when it was made by an earlier candidate (0 when made now: the caller's
    clock counts it)."""
    kind = type(transform).__name__
    key = (candidate.model, candidate.pooling, kind)
    reused = key in shared
    if not reused:
        started = time.perf_counter()
        base: Transform = (
            Whitening() if kind == "Whitening" else AllButTheTop(n_remove=min(_ABTT_SHARED, raw.shape[1]))
        )
        base.fit(raw[fit_rows])
        shared[key] = (base, time.perf_counter() - started)
    base, seconds = shared[key]
    reused_seconds = seconds if reused else 0.0
    if isinstance(transform, Whitening):
        fitted = copy.copy(base)
        fitted.set_params(**transform.get_params(deep=False))
        return fitted, reused_seconds
    assert isinstance(base, AllButTheTop) and isinstance(transform, AllButTheTop)
    return _abtt_from(base, transform), reused_seconds


def _abtt_d(transform: AllButTheTop, dim: int) -> int:
    """The number of directions ``transform`` removes from vectors of dimension ``dim`` (its default rule)."""
    return int(transform.n_remove) if transform.n_remove is not None else max(1, round(dim / 100))


def _abtt_from(base: AllButTheTop, wanted: AllButTheTop) -> AllButTheTop:
    """``wanted`` (an unfitted AllButTheTop) fitted by taking the first D of ``base``'s directions, which is what
    its own fit would compute (the same eigendecomposition of the same scatter)."""
    D = _abtt_d(wanted, base.n_features_in_)
    out = AllButTheTop(n_remove=wanted.n_remove)
    out.n_features_in_, out.n_remove_ = base.n_features_in_, int(D)
    out.mean_, out.directions_ = base.mean_, np.ascontiguousarray(base.directions_[:D])
    return out
