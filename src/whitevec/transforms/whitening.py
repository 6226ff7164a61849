"""Whitening (BERT-whitening, Su et al. 2021) with exact streaming moments.

With mean ``mu`` and unbiased covariance ``C = M2 / (n - 1)`` of the fitted vectors, and the SVD of the
covariance ``C = U diag(lambda) U^T`` (eigenvalues descending), the transform is::

    x' = (x - beta * mu) @ U[:, :k] @ diag(max(lambda, floor)[:k] ** (-gamma / 2))

with ``floor = eps * lambda_max``. ``beta = gamma = 1`` is BERT-whitening (output covariance I);
``gamma = 0`` only rotates (distances kept); ``beta = 0`` skips centering.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from whitevec.errors import BadInputError, WhitevecWarning
from whitevec.transforms.arithmetic import (
    CHUNK_ROWS,
    eigenvalue_floor,
    moments,
    principal_axes,
    whiten,
    whitening_matrix,
    whitening_scale,
    working_dtype,
)
from whitevec.transforms.base import BadParameterError, Count, Shape, Transform
from whitevec.transforms.validation import check_sample_weight


class Whitening(Transform):
    """``x' = (x - beta*mu) U diag(lambda^(-gamma/2))``, first ``n_components`` columns; see the module docstring.

    Moments are kept exactly in float64 as count ``n``, mean ``mu`` and centered scatter
    ``M2 = sum (x - mu)(x - mu)^T``; batches and shards combine with Chan et al.'s parallel update
    ``M2 = M2_a + M2_b + delta delta^T n_a n_b / n`` (``delta = mu_b - mu_a``), so ``partial_fit`` over any
    batching and ``merge`` of shards equal a one-shot ``fit`` up to rounding.

    ``fit``, ``partial_fit`` (and so ``merge``) take ``sample_weight``: frequency weights, as scikit-learn's
    estimator checks define them (weight 2 counts a row twice, weight 0 drops it). ``n`` is then the total
    weight (a float; ``n_samples_seen_`` holds it), ``mu = sum w x / n``, ``M2 = sum w (x - mu)(x - mu)^T``
    and the covariance is ``M2 / (n - 1)``, so a fit needs weights summing to more than 1 (scale probability
    weights by a count). Weights are checked (one per row, finite, non-negative, positive sum) before any
    pass over the data; a bad one raises :class:`BadInputError` and leaves the moments as they were.

    ``precision`` is the arithmetic of each chunk's scatter before it is added to the float64 totals. Chunks
    are shifted by a fixed reference (the first chunk's mean, so no large mean term is squared) and
    ``S^T S`` is one GEMM. ``"float64"`` (default) promotes the chunk: exact up to float64 rounding.
    ``"float32"`` multiplies float32 input in float32 (in ``fit`` and ``transform``): about twice as fast,
    with an error of order ``1e-7 * condition number`` on whitened outputs, so use it for well-conditioned
    data (the tolerance on realistic data is checked in tests/test_fast_paths.py and measured in
    benchmarks/maintained/bench_whitening_fit.py).

    Eigenvalues below ``eps * lambda_max`` are raised to that floor (one :class:`WhitevecWarning`).
    ``transform`` and ``inverse_transform`` accept any float dtype and return float32, computed in float64.

    Learned attributes: ``n_features_in_``, ``n_samples_seen_``, ``mean_`` (mu), ``scatter_`` (M2); derived on
    demand from them: ``covariance_``, ``eigenvalues_`` (all d, descending), ``eigenvectors_`` (U, d x d, each
    column's largest-magnitude entry positive), ``components_`` (W, d x k), ``explained_variance_ratio_``.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_components": [Count(Integral, 1, None, closed="left"), None],  # at most the input dimension
        "beta": [Interval(Real, None, None, closed="neither")],
        "gamma": [Interval(Real, None, None, closed="neither")],
        "eps": [Interval(Real, 0, None, closed="neither")],
        "precision": [StrOptions({"float64", "float32"})],
    }
    _state_arrays: ClassVar[dict[str, Shape]] = {
        "mean_": ("n_features_in_",),
        "scatter_": ("n_features_in_", "n_features_in_"),
    }
    # The decomposition, once computed, is saved with the moments: a loaded Whitening then gives bitwise the
    # outputs of the saved one (not a recomputation's), and does not repeat a floored-eigenvalue warning.
    _cached_arrays: ClassVar[dict[str, Shape]] = {
        "_eigenvalues": ("n_features_in_",),
        "_eigenvectors": ("n_features_in_", "n_features_in_"),
    }
    # n_samples_seen_: the row count, or the total weight (a float) once a sample_weight was given.
    _state_values: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "n_features_in_": int,
        "n_samples_seen_": (int, float),
    }
    _fitted_attribute: ClassVar[str] = "mean_"
    # The decomposition of the current moments (None until computed), and the first chunk's mean, which
    # later chunks are shifted by before their products.
    _eigenvalues: np.ndarray | None = None
    _eigenvectors: np.ndarray | None = None
    _shift: np.ndarray | None = None

    def __init__(
        self,
        n_components: int | None = None,
        beta: float = 1.0,
        gamma: float = 1.0,
        eps: float = 1e-6,
        precision: str = "float64",
    ) -> None:
        self.n_components = n_components
        self.beta = beta
        self.gamma = gamma
        self.eps = eps
        self.precision = precision

    def _check_dimension_params(self, n_features: int) -> None:
        if self.n_components is not None and self.n_components > n_features:
            raise BadParameterError(
                f"n_components must be an integer in 1..{n_features} (the input dimension), "
                f"got {self.n_components!r}"
            )

    # --- moments -----------------------------------------------------------------------------------------
    def _reset(self, n_features: int | None = None) -> None:
        """Forget all moments; with ``n_features``, start over at that dimension."""
        for name in ("n_features_in_", "n_samples_seen_", "mean_", "scatter_", *self._cached_arrays, "_shift"):
            self.__dict__.pop(name, None)
        if n_features is not None:
            self.n_features_in_ = n_features

    def _combine(self, n_b: float, mean_b: np.ndarray, m2_b: np.ndarray) -> None:
        self._eigenvalues = self._eigenvectors = None
        n_a = getattr(self, "n_samples_seen_", 0)
        if n_a == 0:
            self.n_samples_seen_, self.mean_, self.scatter_ = n_b, mean_b.copy(), m2_b.copy()
            return
        n = n_a + n_b
        delta = mean_b - self.mean_
        self.mean_ = self.mean_ + delta * (n_b / n)
        self.scatter_ = self.scatter_ + m2_b + np.outer(delta, delta) * (n_a * n_b / n)
        self.n_samples_seen_ = n

    def partial_fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> Whitening:
        """Add the rows of ``X`` to the moments (in chunks of ``CHUNK_ROWS`` rows), weighted by
        ``sample_weight`` if given (one non-negative weight per row); returns self."""
        expected = getattr(self, "n_features_in_", None)
        # moments() finds NaN/inf (and names the rows) before anything is stored: no separate scan here.
        data = self._fit_input(X, min_rows=0, dtype=working_dtype(X), finite=False, reset=expected is None)
        weights = check_sample_weight(sample_weight, data.shape[0], owner="Whitening")
        self._add(data, weights)
        return self

    def _add(self, data: np.ndarray, weights: np.ndarray | None = None) -> None:
        """Add the rows of checked ``data`` (with checked ``weights``) to the moments."""
        expected = getattr(self, "n_features_in_", None)
        if data.shape[0] == 0:
            if expected is None:
                self._reset(data.shape[1])
            return
        dtype = np.float32 if self.precision == "float32" else np.float64
        shift = self._shift if expected is not None else None
        mean, scatter, shift = moments(data, dtype=dtype, shift=shift, weights=weights)
        if expected is None:
            self._reset(data.shape[1])
        self._shift = shift
        # Chan's update adds this call's moments to the earlier ones; with weights the count is their sum.
        count = data.shape[0] if weights is None else float(np.sum(weights, dtype=np.float64))
        self._combine(count, mean, scatter)

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None) -> Whitening:
        """Forget earlier data and fit on ``X`` (at least 2 rows; with ``sample_weight``, weights summing to
        more than 1, see the class docstring); returns self."""
        # The moment pass finds NaN/inf (and names the rows) from the scatter: no separate scan here.
        X = self._fit_input(X, min_rows=2, dtype=working_dtype(X), finite=False)
        weights = check_sample_weight(sample_weight, X.shape[0], owner="Whitening")
        if weights is not None and not weights.sum() > 1:
            raise BadInputError(
                f"sample_weight sums to {weights.sum():.6g}; Whitening's covariance divides the weighted scatter "
                "by (total weight - 1) (frequency weights: weight 2 counts a row twice), so the weights must sum "
                "to more than 1. Scale them, e.g. probabilities by the number of rows."
            )
        self._reset()
        self._add(X, weights)
        self._decompose()  # warn about floored directions at fit time, not at first transform
        return self

    def merge(self, other: Whitening) -> Whitening:
        """Add the moments of ``other`` (fitted on another shard) to this one's; returns self."""
        if not isinstance(other, Whitening):
            raise BadInputError(f"can only merge a Whitening with another Whitening, got {type(other).__name__}")
        if getattr(other, "n_samples_seen_", 0) == 0:
            return self
        self._validate_params()
        if getattr(self, "n_samples_seen_", 0) == 0:
            self._check_dimension_params(other.n_features_in_)
            self._reset(other.n_features_in_)
        elif self.n_features_in_ != other.n_features_in_:
            raise BadInputError(
                f"cannot merge statistics of dimension {other.n_features_in_} into dimension {self.n_features_in_}"
            )
        self._combine(other.n_samples_seen_, other.mean_, other.scatter_)
        return self

    # --- derived state -----------------------------------------------------------------------------------
    def _decompose(self) -> tuple[np.ndarray, np.ndarray]:
        """``(eigenvalues, U)`` of the covariance, cached until the moments change."""
        if self._eigenvalues is None or self._eigenvectors is None:
            self._check_fitted()
            n = self.n_samples_seen_
            if not n > 1:
                raise BadInputError(
                    f"Whitening needs at least 2 vectors (a total sample_weight above 1) to estimate a "
                    f"covariance, got {n}"
                )
            k = self._k()
            s, U = principal_axes(self.scatter_ / (n - 1))  # eigenvalues clipped at 0 are floored below anyway
            self._eigenvalues, self._eigenvectors = s, U
            floored = int(np.sum(s[:k] < self._floor(s)))
            if floored and self.gamma != 0:
                warnings.warn(
                    f"{floored} of {k} kept directions have variance below eps*max = {self._floor(s):.3g} "
                    f"(near-singular covariance of {n:.10g} vectors of dimension {s.size}; with sample_weight, "
                    "their total weight); their eigenvalues were raised to that floor. Fit on more vectors, lower "
                    "n_components, or raise eps.",
                    WhitevecWarning,
                    stacklevel=3,
                )
        return self._eigenvalues, self._eigenvectors

    def _floor(self, s: np.ndarray) -> float:
        return eigenvalue_floor(s, self.eps)

    def _k(self) -> int:
        # Every caller has passed fit's parameter checks or _check_fitted's, so n_components fits here.
        return int(self.n_features_in_) if self.n_components is None else int(self.n_components)

    def _scale(self) -> np.ndarray:
        return whitening_scale(self._decompose()[0], self.gamma, self.eps)

    @property
    def eigenvalues_(self) -> np.ndarray:
        """Covariance eigenvalues (all d, descending, before flooring)."""
        return self._decompose()[0]

    @property
    def eigenvectors_(self) -> np.ndarray:
        """U: covariance eigenvectors as columns, signs fixed (largest-magnitude entry positive)."""
        return self._decompose()[1]

    @property
    def covariance_(self) -> np.ndarray:
        """Unbiased covariance ``M2 / (n - 1)``."""
        self._check_fitted()
        n = self.n_samples_seen_
        return self.scatter_ / (n - 1 if n > 1 else 1)

    @property
    def explained_variance_ratio_(self) -> np.ndarray:
        """Share of the total variance along each of the first k directions."""
        self._check_fitted()
        s = self.eigenvalues_
        return s[: self._k()] / s.sum() if s.sum() > 0 else np.zeros(self._k())

    @property
    def components_(self) -> np.ndarray:
        """W = U[:, :k] diag(max(lambda, floor)^(-gamma/2))[:k], shape (d, k)."""
        self._check_fitted()
        return self._components()

    def _components(self) -> np.ndarray:
        s, U = self._decompose()
        return whitening_matrix(s, U, self._k(), self.gamma, self.eps)

    # --- transform ---------------------------------------------------------------------------------------
    def transform(self, X: Any) -> np.ndarray:
        """``(X - beta*mu) @ W`` as float32, shape (n, k)."""
        X = self._apply_input(X, dtype=working_dtype(X), finite=False)
        return whiten(X, self._components(), self.beta * self.mean_, self.precision)

    def affine(self) -> tuple[np.ndarray, np.ndarray]:
        """``(W, -beta mu W)``: ``transform(X) == X W - beta mu W``."""
        self._check_fitted()
        W = self._components()
        return W, -(self.beta * self.mean_) @ W

    def inverse_transform(self, X: Any) -> np.ndarray:
        """``X diag(max(lambda, floor)^(gamma/2)) U^T + beta*mu`` as float32; only when k == d."""
        self._check_fitted()
        d = self.n_features_in_
        if self._k() != d:
            raise BadInputError(
                f"inverse_transform needs all {d} components; this Whitening keeps {self._k()}, so the dropped "
                "directions cannot be recovered. Fit with n_components=None to invert."
            )
        X = self._apply_input(X, dtype=working_dtype(X))
        back = (self.eigenvectors_ / self._scale()).T
        out = np.empty(X.shape, dtype=np.float32)
        for start in range(0, X.shape[0], CHUNK_ROWS):
            out[start : start + CHUNK_ROWS] = X[start : start + CHUNK_ROWS] @ back + self.beta * self.mean_
        return out
