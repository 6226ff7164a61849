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
from whitevec.transforms.base import BadParameterError, Count, Shape, Transform
from whitevec.transforms.validation import check_sample_weight, raise_non_finite

# Rows per moment/transform chunk: the float64 working copy stays ~50 MB at d=768, so peak memory does not grow
# with N, while each GEMM is still long enough to run at full BLAS speed.
CHUNK_ROWS = 8192


def working_dtype(X: Any) -> type:
    """The dtype to validate ``X`` into: float32 input stays float32 (no full float64 copy; the moment and
    transform chunks are promoted as their precision says), anything else becomes float64."""
    # An array's dtype without reading its values (the parameter checks run before any value is read).
    dtype = getattr(X, "dtype", None)
    if not isinstance(dtype, np.dtype):
        dtype = np.asarray(X).dtype
    return np.float32 if dtype == np.float32 else np.float64


def moments(
    data: np.ndarray,
    *,
    dtype: type = np.float64,
    shift: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and centred scatter ``sum (x - mu)(x - mu)^T`` of the rows of ``data`` (at least one), in float64,
    and the shift used: ``shift``, or when that is None the first chunk's mean.

    With ``weights`` (checked: finite, non-negative, positive sum) the moments are weighted: mean
    ``sum w x / sum w`` and scatter ``sum w (x - mu)(x - mu)^T``. Each shifted row is scaled by ``sqrt(w)`` and
    the last column holds ``sqrt(w)``, so the same one product gives ``sum w s s^T``, ``sum w s`` and ``sum w``.

    One pass in chunks of ``CHUNK_ROWS`` rows. Each chunk is shifted by the fixed reference (near the mean, so
    no large mean term is squared) into the first d columns of a buffer whose last column is 1, so one syrk
    gives S^T S, the column sums S^T 1 and the row count together. ``dtype`` is the arithmetic of that product;
    the totals are float64. Nothing is scanned for NaN/inf up front: any non-finite entry makes the scatter's
    diagonal non-finite (x^2), and only then are the rows scanned, to name them in the BadInputError.
    """
    n, d = data.shape
    if shift is None or shift.shape != (d,):
        first = None if weights is None else weights[:CHUNK_ROWS]
        # The weighted mean when the first chunk has weight: a far-off row of weight 0 must not move the shift.
        if first is None or not first.sum() > 0:
            shift = data[:CHUNK_ROWS].mean(axis=0, dtype=np.float64)
        else:
            shift = np.average(data[:CHUNK_ROWS], axis=0, weights=first).astype(np.float64)
    buffer = np.empty((min(CHUNK_ROWS, n), d + 1), dtype=dtype)
    buffer[:, d] = 1.0
    roots = None if weights is None else np.sqrt(weights).astype(dtype)
    shift_w: np.ndarray = shift.astype(dtype)
    products = np.zeros((d + 1, d + 1), dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # non-finite results are checked just below
        for start in range(0, n, CHUNK_ROWS):
            rows = data[start : start + CHUNK_ROWS]
            size = rows.shape[0]
            np.subtract(rows, shift_w, out=buffer[:size, :d], dtype=dtype)
            if roots is not None:
                buffer[:size, d] = roots[start : start + size]
                buffer[:size, :d] *= buffer[:size, d : d + 1]
            augmented = buffer[:size]
            products += augmented.T @ augmented  # numpy runs A^T A as one syrk; float32 adds to float64
    if not np.isfinite(np.diagonal(products)).all():
        raise_non_finite(data, name="X", overflow=f"their squares overflow {np.dtype(dtype).name}")
    # Shifted moments to centred ones: with the shift near the mean, m is small and the subtraction n m m^T
    # loses nothing. The total weight is summed in float64 from the weights themselves (sqrt(w)^2 rounds).
    total = float(n) if weights is None else float(np.sum(weights, dtype=np.float64))
    m = products[:d, d] / total
    return shift + m, products[:d, :d] - np.outer(m, m) * total, shift


def sign_flip(U: np.ndarray) -> np.ndarray:
    """Flip each column of ``U`` so that its entry of largest absolute value is positive (as svd_flip does)."""
    rows = np.argmax(np.abs(U), axis=0)
    signs = np.sign(U[rows, np.arange(U.shape[1])])
    signs[signs == 0] = 1.0
    return U * signs


def principal_axes(covariance: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending, clipped at 0) and eigenvectors (columns, signs fixed by :func:`sign_flip`) of a
    symmetric positive semi-definite matrix."""
    # eigh: several times faster than an SVD at d=768, same result for a PSD matrix; rounding can leave tiny
    # negative eigenvalues, clipped to 0.
    s, U = np.linalg.eigh(covariance)
    return np.clip(s[::-1], 0.0, None), sign_flip(U[:, ::-1])


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
        # All-identical input has lambda_max = 0; eps alone then keeps the scaling finite.
        return float(self.eps * s[0]) if s[0] > 0 else float(self.eps)

    def _k(self) -> int:
        # Every caller has passed fit's parameter checks or _check_fitted's, so n_components fits here.
        return int(self.n_features_in_) if self.n_components is None else int(self.n_components)

    def _scale(self) -> np.ndarray:
        s, _ = self._decompose()
        return np.maximum(s, self._floor(s)) ** (-self.gamma / 2)

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
        k = self._k()
        return self.eigenvectors_[:, :k] * self._scale()[:k]

    # --- transform ---------------------------------------------------------------------------------------
    def transform(self, X: Any) -> np.ndarray:
        """``(X - beta*mu) @ W`` as float32, shape (n, k)."""
        # The NaN/inf scan is done on each output chunk while it is hot in cache: a NaN or inf entry of a row
        # makes every entry of that row's output non-finite (inf * 0 and inf - inf are NaN), so the input
        # needs a full scan only when an output chunk fails, to name the rows.
        X = self._apply_input(X, dtype=working_dtype(X), finite=False)
        W = self._components()
        shift = self.beta * self.mean_
        if self.precision == "float32" and X.dtype == np.float32:
            # Opt-in float32 arithmetic: about twice the vectors/s, rounding ~1e-6 relative to the output scale.
            W, shift = W.astype(np.float32), shift.astype(np.float32)
        n, k = X.shape[0], W.shape[1]
        out = np.empty((n, k), dtype=np.float32)
        # Reused chunk buffers: no temporaries per chunk, and float32 products land in ``out`` directly.
        centred = np.empty((min(CHUNK_ROWS, n), X.shape[1]), dtype=W.dtype)
        product = out if W.dtype == np.float32 else np.empty((min(CHUNK_ROWS, n), k), dtype=W.dtype)
        for start in range(0, n, CHUNK_ROWS):
            rows = X[start : start + CHUNK_ROWS]
            size = rows.shape[0]
            np.subtract(rows, shift, out=centred[:size])
            with np.errstate(over="ignore", invalid="ignore"):
                if product is out:
                    np.matmul(centred[:size], W, out=out[start : start + size])
                else:
                    out[start : start + size] = np.matmul(centred[:size], W, out=product[:size])
            if not np.isfinite(out[start : start + size]).all():
                raise_non_finite(X, name="X", overflow="the whitened vectors overflow float32")
        return out

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
