"""Row-wise vector arithmetic shared by the transforms, the index, evaluation and diagnostics."""

from __future__ import annotations

from typing import Any

import numpy as np

from whitevec.errors import BadInputError


def unit_rows(vectors: Any, *, dtype: Any = np.float32, zero_rows: str = "keep", name: str = "X") -> np.ndarray:
    """Rows scaled to unit L2 norm, as a contiguous ``dtype`` array.

    A zero row has no direction: ``zero_rows="keep"`` leaves it zero (its cosine with anything is then 0, what
    an index stores and what STS scoring wants), ``"raise"`` refuses it with a BadInputError naming up to five
    such rows of ``name`` (measures that average over unit vectors would be silently biased by zeros).
    """
    if zero_rows not in ("keep", "raise"):
        raise BadInputError(f"zero_rows must be 'keep' or 'raise', got {zero_rows!r}")
    x = np.asarray(vectors, dtype=dtype)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    zero = norms[:, 0] == 0
    if zero.any() and zero_rows == "raise":
        bad = np.flatnonzero(zero)[:5]
        raise BadInputError(
            f"{name} has zero-length rows ({', '.join(map(str, bad))}); cosines and L2 normalisation are "
            "undefined for them: drop those rows"
        )
    return np.ascontiguousarray(x / np.where(zero[:, None], 1.0, norms), dtype=dtype)


def best_first(scores: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``depth`` best columns of ``scores`` (higher is better), best first, ties to the earlier
    column, and their scores: an exact search's ranking of a block of query-by-document scores. ``depth`` at
    most the number of columns."""
    if depth < scores.shape[1]:
        top = np.argpartition(-scores, depth - 1, axis=1)[:, :depth]
    else:
        top = np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
    picked = np.take_along_axis(scores, top, axis=1)
    order = np.lexsort((top, -picked), axis=1)
    return np.take_along_axis(top, order, axis=1), np.take_along_axis(picked, order, axis=1)
