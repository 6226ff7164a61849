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
