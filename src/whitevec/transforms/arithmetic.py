"""The numpy arithmetic of whitening and its kin (``whitening.py``'s :class:`Whitening`, ``baselines.py``, the
frozen forms of ``frozen.py``): moments, principal axes, the whitening matrix and its application in chunks.
Importable without scikit-learn, so a search applies a saved whitening with the same code that fitted it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from whitevec.transforms.validation import raise_non_finite

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


def eigenvalue_floor(s: np.ndarray, eps: float) -> float:
    """The floor eigenvalues are raised to: ``eps * lambda_max`` (``s`` descending)."""
    # All-identical input has lambda_max = 0; eps alone then keeps the scaling finite.
    return float(eps * s[0]) if s[0] > 0 else float(eps)


def whitening_scale(s: np.ndarray, gamma: float, eps: float) -> np.ndarray:
    """``max(lambda, floor) ** (-gamma / 2)`` for every eigenvalue of ``s`` (descending)."""
    return np.maximum(s, eigenvalue_floor(s, eps)) ** (-gamma / 2)


def whitening_matrix(s: np.ndarray, U: np.ndarray, k: int, gamma: float, eps: float) -> np.ndarray:
    """``W = U[:, :k] diag(max(lambda, floor) ** (-gamma / 2))[:k]``, shape (d, k)."""
    return U[:, :k] * whitening_scale(s, gamma, eps)[:k]


def whiten(X: np.ndarray, W: np.ndarray, shift: np.ndarray, precision: str) -> np.ndarray:
    """``(X - shift) @ W`` as float32, shape (n, k), in chunks of ``CHUNK_ROWS`` rows; ``precision`` float32
    multiplies float32 ``X`` in float32, else the chunks are promoted to W's float64."""
    # The NaN/inf scan is done on each output chunk while it is hot in cache: a NaN or inf entry of a row
    # makes every entry of that row's output non-finite (inf * 0 and inf - inf are NaN), so the input
    # needs a full scan only when an output chunk fails, to name the rows.
    if precision == "float32" and X.dtype == np.float32:
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


def centre(X: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``X - mean`` as float32 (Center's transform)."""
    return (X - mean).astype(np.float32)
