"""Saved transforms applied with numpy alone: what a search does to its query vectors, without the estimator
classes (scikit-learn estimators, so importing them loads scikit-learn, scipy and pandas: seconds).

``load_to_apply`` reads a saved transform for applying only. A Whitening or a Center becomes its frozen form
(:class:`FrozenWhitening`, :class:`FrozenCenter`): the arrays the class's ``transform`` reads, applied with the
same code (``arithmetic.py``), so the vectors are bitwise the class's. Only a file the class itself would load
as it is gets a frozen form; any other file, and every other class, is loaded by ``Transform.from_bytes``, which
refuses a bad one with its own message.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from whitevec.transforms.arithmetic import centre, whiten, whitening_matrix, working_dtype
from whitevec.transforms.saved import SavedTransform, read_saved
from whitevec.transforms.validation import check_vectors


class AppliesVectors(Protocol):
    """What applying a fitted transform needs: its input width and ``transform`` (float32 rows out)."""

    @property
    def n_features_in_(self) -> int: ...

    def transform(self, X: Any) -> np.ndarray: ...


@dataclass(frozen=True)
class FrozenWhitening:
    """A saved :class:`~whitevec.transforms.Whitening` for applying only: ``(X - shift) @ matrix``."""

    n_features_in_: int
    matrix: np.ndarray  # W, d x k
    shift: np.ndarray  # beta * mu
    precision: str
    saved: bytes = field(default=b"", repr=False, compare=False)  # the file, for :func:`as_transform`
    source: str = field(default="<bytes>", repr=False, compare=False)

    def transform(self, X: Any) -> np.ndarray:
        """What ``Whitening.transform`` gives: float32, shape (n, k)."""
        X = check_vectors(
            X, expected_dim=self.n_features_in_, dtype=working_dtype(X), finite=False, owner="Whitening"
        )
        return whiten(X, self.matrix, self.shift, self.precision)


@dataclass(frozen=True)
class FrozenCenter:
    """A saved :class:`~whitevec.transforms.Center` for applying only: ``X - mean``."""

    n_features_in_: int
    mean: np.ndarray
    saved: bytes = field(default=b"", repr=False, compare=False)  # the file, for :func:`as_transform`
    source: str = field(default="<bytes>", repr=False, compare=False)

    def transform(self, X: Any) -> np.ndarray:
        """What ``Center.transform`` gives: float32, shape (n, d)."""
        return centre(check_vectors(X, expected_dim=self.n_features_in_, owner="Center"), self.mean)


def _count(value: Any, low: int, high: float = math.inf) -> bool:
    """An int (not a bool) in ``low..high``."""
    return type(value) is int and low <= value <= high


def _number(value: Any) -> bool:
    """A finite int or float (not a bool)."""
    return type(value) in (int, float) and math.isfinite(value)


def _shaped(arrays: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]) -> bool:
    """Exactly the arrays ``shapes`` names, each of its shape."""
    return set(arrays) == set(shapes) and all(arrays[name].shape == shape for name, shape in shapes.items())


def _frozen_whitening(saved: SavedTransform) -> FrozenWhitening | None:
    """The frozen form of a saved Whitening whose decomposition was saved (every fitted one's), or None where
    the file holds anything the class would refuse or compute (the class's load then decides)."""
    params, values, d = saved.params, saved.values, saved.values.get("n_features_in_")
    if not (_count(d, 1) and set(params) == {"n_components", "beta", "gamma", "eps", "precision"}):
        return None
    k = d if params["n_components"] is None else params["n_components"]
    fits = _count(k, 1, d) and _number(params["beta"]) and _number(params["gamma"]) and _number(params["eps"])
    fits = fits and params["eps"] > 0 and params["precision"] in ("float64", "float32")
    fits = fits and _number(values.get("n_samples_seen_"))
    shapes = {"mean_": (d,), "scatter_": (d, d), "_eigenvalues": (d,), "_eigenvectors": (d, d)}
    if not (fits and _shaped(saved.arrays, shapes)):
        return None
    arrays = saved.arrays
    matrix = whitening_matrix(arrays["_eigenvalues"], arrays["_eigenvectors"], k, params["gamma"], params["eps"])
    return FrozenWhitening(d, matrix, params["beta"] * arrays["mean_"], params["precision"])


def _frozen_center(saved: SavedTransform) -> FrozenCenter | None:
    """The frozen form of a saved Center, or None where the file holds anything the class would refuse."""
    d = saved.values.get("n_features_in_")
    if saved.params or not _count(d, 1) or not _shaped(saved.arrays, {"mean_": (d,)}):
        return None
    return FrozenCenter(d, saved.arrays["mean_"])


# The classes with a frozen form, by the key their files name them under (``base.class_key``).
_FROZEN: dict[str, Callable[[SavedTransform], FrozenWhitening | FrozenCenter | None]] = {
    "whitevec.transforms.whitening:Whitening": _frozen_whitening,
    "whitevec.transforms.baselines:Center": _frozen_center,
}


def load_to_apply(data: bytes, source: str = "<bytes>", device: str = "cpu") -> AppliesVectors:
    """The saved transform in ``data`` for applying: its frozen form where it has one (no scikit-learn loaded),
    else the class itself, loaded onto ``device`` by ``Transform.from_bytes``. ``source`` names the file in
    errors."""
    saved = read_saved(data, source)
    freeze = _FROZEN.get(saved.key)
    if freeze is not None and isinstance(saved.params, dict) and isinstance(saved.values, dict):
        frozen = freeze(saved)
        if frozen is not None:
            return replace(frozen, saved=data, source=source)
    from whitevec.transforms.base import Transform

    return Transform.from_bytes(data, source, device)


def as_transform(applier: AppliesVectors | None) -> Any:
    """The transform class itself for what :func:`load_to_apply` gave (a frozen form loaded from its file, with
    scikit-learn; anything else as it is): for code that reads the fitted estimator, not a search."""
    if isinstance(applier, FrozenWhitening | FrozenCenter):
        from whitevec.transforms.base import Transform

        return Transform.from_bytes(applier.saved, applier.source)
    return applier
