"""Baseline post-processing transforms: centering, L2 normalisation, and All-but-the-Top.

Each accepts any float dtype, computes in float64 and returns float32.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any, ClassVar

import numpy as np

from whitevec.transforms.arithmetic import centre, moments, principal_axes, working_dtype
from whitevec.transforms.base import BadParameterError, Count, Shape, Transform
from whitevec.transforms.validation import check_vectors
from whitevec.utils.linalg import unit_rows


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
        return centre(self._apply_input(X), self.mean_)

    def affine(self) -> tuple[np.ndarray, np.ndarray]:
        """``(I, -mu)``."""
        self._check_fitted()
        return np.eye(self.n_features_in_), -np.asarray(self.mean_, dtype=np.float64)

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

    def affine(self) -> tuple[np.ndarray, np.ndarray]:
        """``(P, -mu P)`` with the projection ``P = I - V^T V``."""
        self._check_fitted()
        projection = np.eye(self.n_features_in_) - self.directions_.T @ self.directions_
        return projection, -(self.mean_ @ projection)


class CommonComponentRemoval(Transform):
    """SIF's and uSIF's common-component removal: principal directions of the *uncentred* vectors removed.

    ``u_1..u_m`` are the top right-singular vectors of the fitted matrix X itself (eigenvectors of ``X^T X``,
    as the papers' TruncatedSVD finds them: no centring, unlike :class:`AllButTheTop`), ``s_i^2`` its squared
    singular values. ``x' = x - sum_i lambda_i (u_i . x) u_i`` with

    * ``soft=False`` (SIF, Arora et al. 2017, ``m = 1``): ``lambda_i = 1``, the projections removed in full;
    * ``soft=True`` (uSIF, Ethayarajh 2018, ``m = 5``): ``lambda_i = s_i^2 / sum_{j<=m} s_j^2``, each direction
      removed by its share of the variance the m directions hold.

    With m = 1 both are the same. Learned: ``components_`` (m x d, signs fixed), ``weights_`` (lambda_i).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Count(Integral, 1, None, closed="left")],  # at most the input dimension
        "soft": ["boolean"],
    }
    _state_arrays: ClassVar[dict[str, Shape]] = {
        "components_": ("n_components_", "n_features_in_"),
        "weights_": ("n_components_",),
    }
    _state_values: ClassVar[dict[str, type | tuple[type, ...]]] = {"n_features_in_": int, "n_components_": int}

    def __init__(self, n_components: int = 5, soft: bool = True) -> None:
        self.n_components = n_components
        self.soft = soft

    def _check_dimension_params(self, n_features: int) -> None:
        if self.n_components > n_features:
            raise BadParameterError(
                f"n_components must be an integer in 1..{n_features} (the input dimension), "
                f"got {self.n_components!r}"
            )

    def fit(self, X: Any, y: Any = None) -> CommonComponentRemoval:
        """Find the top ``n_components`` uncentred principal directions of ``X`` (at least 1 row)."""
        X = self._fit_input(X, min_rows=1)
        m = int(self.n_components)
        second = np.zeros((X.shape[1], X.shape[1]), dtype=np.float64)
        for start in range(0, X.shape[0], 8192):
            rows = X[start : start + 8192]
            second += rows.T @ rows
        s, U = principal_axes(second)
        top = s[:m]
        self.n_features_in_, self.n_components_ = int(X.shape[1]), m
        self.components_ = np.ascontiguousarray(U[:, :m].T)
        if self.soft and top.sum() > 0:
            self.weights_ = top / top.sum()
        else:
            self.weights_ = np.ones(m)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """``X - ((X V^T) * lambda) V`` as float32, with ``V = components_``."""
        X = self._apply_input(X)
        return (X - ((X @ self.components_.T) * self.weights_) @ self.components_).astype(np.float32)

    def affine(self) -> tuple[np.ndarray, np.ndarray]:
        """``(I - V^T diag(lambda) V, 0)``: linear, no shift."""
        self._check_fitted()
        V = self.components_
        return np.eye(self.n_features_in_) - (V.T * self.weights_) @ V, np.zeros(self.n_features_in_)
