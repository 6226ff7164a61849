"""Input checks shared by every transform: shape, dtype, finiteness and dimension.

Conversion and the shape checks are scikit-learn's own (``check_array``), so a transform refuses sparse, complex,
empty or 1-D input with the messages scikit-learn's estimator checks expect; each is raised as a
:class:`BadInputError` (a ``ValueError``). A plain 2-D float array that passes them all is converted by numpy
alone, so applying a transform to such vectors (a search's queries) loads no scikit-learn.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from whitevec.errors import BadInputError, BadInputTypeError, DimensionMismatchError


def check_vectors(
    X: Any,
    *,
    expected_dim: int | None = None,
    min_rows: int = 0,
    min_features: int = 0,
    name: str = "X",
    dtype: type = np.float64,
    finite: bool = True,
    owner: str | None = None,
) -> np.ndarray:
    """Return ``X`` as a C-contiguous 2-D array of ``dtype``, or raise an error that names the fault.

    NaN or inf raise :class:`BadInputError` naming the first offending rows; a wrong width raises
    :class:`DimensionMismatchError` naming both dimensions. ``finite=False`` skips the NaN/inf scan, for a
    caller whose own result shows any non-finite input (it then calls again with the scan to name the rows).
    ``owner`` names the estimator in the messages.
    """
    array: np.ndarray
    plain = type(X) is np.ndarray and X.ndim == 2 and X.dtype.kind == "f"
    if plain and X.shape[0] >= min_rows and X.shape[1] >= min_features:
        # What check_array does to such an array (nothing there to refuse): one conversion, C order.
        array = np.ascontiguousarray(X, dtype=dtype)
    else:
        array = _checked_array(
            X, min_rows=min_rows, min_features=min_features, name=name, dtype=dtype, owner=owner
        )
    if expected_dim is not None and array.shape[1] != expected_dim:
        raise DimensionMismatchError(
            f"{name} has {array.shape[1]} features, but {owner or 'the transform'} is expecting {expected_dim} "
            "features as input (the dimension it was fitted on)"
        )
    if not finite:
        return array
    finite_rows = np.isfinite(array).all(axis=1)
    if not finite_rows.all():
        bad = np.flatnonzero(~finite_rows)
        shown = ", ".join(str(i) for i in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise BadInputError(f"{name} contains NaN or inf in rows {shown}{more}")
    return array


def _checked_array(
    X: Any, *, min_rows: int, min_features: int, name: str, dtype: type, owner: str | None
) -> np.ndarray:
    """``X`` through scikit-learn's ``check_array`` (imported here: the input may be anything), its refusals as
    :class:`BadInputError`."""
    from sklearn.utils.validation import check_array

    try:
        array: np.ndarray = check_array(
            X,
            accept_sparse=False,
            dtype=dtype,
            order="C",
            ensure_all_finite=False,  # scanned by the caller, naming the rows
            ensure_min_samples=min_rows,
            ensure_min_features=min_features,
            estimator=owner,
            input_name=name,
        )
    except TypeError as exc:  # sparse input, a non-number among the values
        raise BadInputTypeError(str(exc)) from None
    except ValueError as exc:
        raise BadInputError(str(exc)) from None
    return array


def raise_non_finite(X: np.ndarray, *, name: str, overflow: str) -> NoReturn:
    """A result computed from ``X`` came out NaN or inf: name the rows of ``X`` that hold NaN or inf, or, when
    every entry is finite, say that the values overflowed (``overflow`` says where)."""
    check_vectors(X, name=name)
    raise BadInputError(f"{name} has values too large: {overflow}; rescale the vectors")


def check_sample_weight(sample_weight: Any, n_rows: int, *, owner: str | None = None) -> np.ndarray | None:
    """``sample_weight`` as a float64 vector of ``n_rows`` finite, non-negative weights with a positive sum
    (None stays None), or a :class:`BadInputError` naming the problem. It reads only the weights, never ``X``,
    so a caller checks them before any pass over the data."""
    if sample_weight is None:
        return None
    who = f" for {owner}" if owner else ""
    try:
        weights = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise BadInputTypeError(f"sample_weight{who} must be numbers: {exc}") from None
    if weights.ndim != 1:
        raise BadInputError(
            f"sample_weight{who} must be 1-D, one weight per row of X; got an array of shape {weights.shape}"
        )
    if weights.shape[0] != n_rows:
        raise BadInputError(f"sample_weight{who} has {weights.shape[0]} weights but X has {n_rows} rows")
    bad = np.flatnonzero(~np.isfinite(weights))
    if bad.size:
        raise BadInputError(f"sample_weight{who} has NaN or inf weights at positions {_positions(bad)}")
    bad = np.flatnonzero(weights < 0)
    if bad.size:
        raise BadInputError(f"sample_weight{who} has negative weights at positions {_positions(bad)}")
    if n_rows and not weights.sum() > 0:
        raise BadInputError(f"sample_weight{who} sums to zero: every weight is 0, so no row would count")
    return weights


def _positions(indices: np.ndarray) -> str:
    shown = ", ".join(str(i) for i in indices[:5])
    return shown + (f" and {len(indices) - 5} more" if len(indices) > 5 else "")
