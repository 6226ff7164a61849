"""Input checks shared by every transform: shape, dtype, finiteness and dimension."""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from whitevec.errors import BadInputError, DimensionMismatchError


def check_vectors(
    X: Any,
    *,
    expected_dim: int | None = None,
    min_rows: int = 0,
    name: str = "X",
    dtype: type = np.float64,
    finite: bool = True,
) -> np.ndarray:
    """Return ``X`` as a C-contiguous 2-D array of ``dtype``, or raise an error that names the fault.

    NaN or inf raise :class:`BadInputError` naming the first offending rows; a wrong width raises
    :class:`DimensionMismatchError` naming both dimensions. ``finite=False`` skips the NaN/inf scan, for a
    caller whose own result shows any non-finite input (it then calls again with the scan to name the rows).
    """
    array = np.asarray(X)
    if array.dtype == object or not np.issubdtype(array.dtype, np.number):
        raise BadInputError(f"{name} must be numeric vectors, got dtype {array.dtype}")
    if array.ndim != 2:
        raise BadInputError(f"{name} must be a 2-D array (n_vectors, dim), got shape {array.shape}")
    if array.shape[0] < min_rows:
        raise BadInputError(f"{name} has {array.shape[0]} rows; at least {min_rows} are needed")
    if expected_dim is not None and array.shape[1] != expected_dim:
        raise DimensionMismatchError(
            f"{name} has dimension {array.shape[1]} but the transform was fitted on dimension {expected_dim}"
        )
    array = np.ascontiguousarray(array, dtype=dtype)
    if not finite:
        return array
    finite_rows = np.isfinite(array).all(axis=1)
    if not finite_rows.all():
        bad = np.flatnonzero(~finite_rows)
        shown = ", ".join(str(i) for i in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise BadInputError(f"{name} contains NaN or inf in rows {shown}{more}")
    return array


def raise_non_finite(X: np.ndarray, *, name: str, overflow: str) -> NoReturn:
    """A result computed from ``X`` came out NaN or inf: name the rows of ``X`` that hold NaN or inf, or, when
    every entry is finite, say that the values overflowed (``overflow`` says where)."""
    check_vectors(X, name=name)
    raise BadInputError(f"{name} has values too large: {overflow}; rescale the vectors")
