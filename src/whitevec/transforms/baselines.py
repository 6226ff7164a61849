"""Baseline post-processing transforms: centering, L2 normalisation, and All-but-the-Top.

Each accepts any float dtype, computes in float64 and returns float32.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any, ClassVar

import numpy as np

from whitevec.linalg import unit_rows
from whitevec.transforms.base import BadParameterError, Count, Shape, Transform
from whitevec.transforms.validation import check_vectors
from whitevec.transforms.whitening import moments, principal_axes, working_dtype


class Center(Transform):
    """``x' = x - mu``, with ``mu`` the mean of the fitted vectors."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    _state_arrays: ClassVar[dict[str, Shape]] = {"mean_": ("n_features_in_",)}
    _state_values: ClassVar[dict[str, type | tuple[type, ...]]] = {"n_features_in_": int}

    def fit(self, X: Any, y: Any = None) -> Center:
        """Store the mean of ``X`` (at least 1 row); returns self."""
        X = self._fit_input(X, min_rows=1)
        self.n_features_in_ = X.shape[1]
        self.mean_ = X.mean(axis=0)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """``X - mu`` as float32."""
        X = self._apply_input(X)
        return (X - self.mean_).astype(np.float32)

    def inverse_transform(self, X: Any) -> np.ndarray:
        """``X + mu`` as float32."""
        X = self._apply_input(X)
        return (X + self.mean_).astype(np.float32)


class Normalize(Transform):
    """``x' = x / ||x||_2`` row by row; zero rows stay zero. ``fit`` only records the dimension."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    _state_values: ClassVar[dict[str, type | tuple[type, ...]]] = {"n_features_in_": int}

    def fit(self, X: Any, y: Any = None) -> Normalize:
        """Record the input dimension; nothing is learned. Returns self."""
        self.n_features_in_ = self._fit_input(X, min_rows=1).shape[1]
        return self

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # Stateless, like scikit-learn's Normalizer: transform works unfitted (any dimension), so the checks
        # that an unfitted transform raises do not apply.
        tags.requires_fit = False
        return tags

    def transform(self, X: Any) -> np.ndarray:
        """Rows of ``X`` scaled to unit L2 norm, as float32; works unfitted (then any dimension is accepted)."""
        X = check_vectors(X, expected_dim=getattr(self, "n_features_in_", None), owner=type(self).__name__)
        return unit_rows(X, dtype=np.float64, zero_rows="keep").astype(np.float32)


class AllButTheTop(Transform):
    """All-but-the-Top (Mu & Viswanath, 2018): ``x' = (x - mu) - sum_{i<=D} (u_i . (x - mu)) u_i``.

    ``u_1..u_D`` are the top-D principal directions (eigenvectors of the covariance of the fitted vectors, largest
    eigenvalues first, signs fixed so each one's largest-magnitude entry is positive). ``n_remove`` = D defaults to
    ``max(1, round(d / 100))``, the paper's rule. Learned: ``mean_``, ``directions_`` (D x d), ``n_remove_``.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_remove": [Count(Integral, 0, None, closed="left"), None],  # at most the input dimension
    }
    _state_arrays: ClassVar[dict[str, Shape]] = {
        "mean_": ("n_features_in_",),
        "directions_": ("n_remove_", "n_features_in_"),
    }
    _state_values: ClassVar[dict[str, type | tuple[type, ...]]] = {"n_features_in_": int, "n_remove_": int}

    def __init__(self, n_remove: int | None = None) -> None:
        self.n_remove = n_remove

    def _check_dimension_params(self, n_features: int) -> None:
        if self.n_remove is not None and self.n_remove > n_features:
            raise BadParameterError(
                f"n_remove must be an integer in 0..{n_features} (the input dimension), got {self.n_remove!r}"
            )

    def fit(self, X: Any, y: Any = None) -> AllButTheTop:
        """Find the mean and top-D principal directions of ``X`` (at least 2 rows); returns self."""
        # Whitening's moment pass, in float64: it finds NaN/inf (and names the rows) itself.
        X = self._fit_input(X, min_rows=2, dtype=working_dtype(X), finite=False)
        d = X.shape[1]
        D = max(1, round(d / 100)) if self.n_remove is None else self.n_remove
        mean, scatter, _ = moments(X)
        _, U = principal_axes(scatter)
        self.n_features_in_, self.n_remove_ = d, int(D)
        self.mean_, self.directions_ = mean, np.ascontiguousarray(U[:, :D].T)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """``(X - mu) (I - V^T V)`` as float32, with ``V = directions_``."""
        X = self._apply_input(X)
        centered = X - self.mean_
        return (centered - (centered @ self.directions_.T) @ self.directions_).astype(np.float32)
