"""Similarity and correlation primitives shared by the STS and retrieval evaluations."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from whitevec.errors import BadInputError


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of row i of ``a`` with row i of ``b``; a zero vector scores 0."""
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    if a64.shape != b64.shape:
        raise BadInputError(f"cannot compare rows of shapes {a64.shape} and {b64.shape}")
    # Dot over the product of norms, not linalg.unit_rows then dot: the two differ in the last bit, which
    # reorders pairs tied near cosine 1 (repeated sentences) and moved the default model's STS12 and STS15
    # scores (by up to 0.05 on one STS12 subset).
    norms = np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1)
    dots = np.einsum("ij,ij->i", a64, b64)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def non_finite_to_none(data: Any) -> Any:
    """``data`` with every NaN or infinite float, inside dicts, lists and tuples too, replaced by None.

    For ``to_dict`` methods: JSON has no NaN (strict parsers reject it, and ``whitevec.utils.io.write_json``
    refuses
    it), and a result can hold one, e.g. the Spearman correlation of constant predictions.
    """
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: non_finite_to_none(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [non_finite_to_none(value) for value in data]
    return data


def spearman100(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Spearman rank correlation x 100 (ties get average ranks, as scipy does)."""
    if len(predicted) != len(gold):
        raise BadInputError(f"{len(predicted)} predictions for {len(gold)} gold scores")
    if len(gold) < 2:
        raise BadInputError("Spearman correlation needs at least two pairs")
    return float(spearmanr(predicted, gold).statistic) * 100.0
