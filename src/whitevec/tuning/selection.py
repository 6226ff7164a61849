"""Choosing among candidates so that noise cannot fool the choice: a paired bootstrap over the scored items.

Items are what the dev data scores: STS pairs (the statistic is Spearman x 100 over the pairs) or retrieval
queries (the statistic is the mean of a per-query metric x 100). Every candidate and the baseline (``none``) are
scored on the same resamples, so each resample gives one gain per candidate, and the gains' spread holds the
correlation between candidate and baseline (a paired bootstrap).

Resample ``b`` draws ``n`` item indices with replacement, ``idx[b] = rng.integers(0, n, n)`` from
``numpy.random.default_rng(seed)`` (all ``n_boot`` rows in one call, shape ``(n_boot, n)``). Spearman on a
resample is the Spearman correlation of the drawn items, repeated items included, ties given their average rank
(scipy's ``spearmanr`` on ``x[idx[b]], y[idx[b]]``); it is computed here from the draw counts without sorting
each resample (see :func:`spearman_resampled`).

The 95% interval of a gain is the 2.5 and 97.5 percentiles of its resampled gains (numpy's linear
interpolation). A candidate is *significant* when its gain stays above 0 across all candidates at once: the
lower bound ``gain - q * se`` with ``se`` the bootstrap standard error of its gain and ``q`` the 97.5%
quantile over resamples of ``max_c (gain_c - gain_c[b]) / se_c`` (a max-t simultaneous bound). With one
candidate this is its one-sided 97.5% bound; with many it does not let the best of thirty lucky draws through.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Resamples handled at once: bounds the (chunk x n) work arrays (ATEC's 20,000 pairs: ~40 MB each in float64).
_CHUNK = 250


def resample_counts(n_items: int, n_boot: int, seed: int) -> np.ndarray:
    """How often each item is drawn in each resample: int32 array (n_items, n_boot), columns summing to n_items.

    The draws are ``default_rng(seed).integers(0, n_items, size=(n_boot, n_items))``, row ``b`` resample ``b``.
    Items run down the rows so that reordering items moves whole contiguous rows (the fast direction).
    """
    idx = np.random.default_rng(seed).integers(0, n_items, size=(n_boot, n_items))
    flat = idx + (np.arange(n_boot, dtype=np.int64)[:, None] * n_items)
    counts = np.bincount(flat.ravel(), minlength=n_boot * n_items).reshape(n_boot, n_items)
    return np.ascontiguousarray(counts.T, dtype=np.int32)


def _sorted_ranks(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, ranks)``: the items sorted by value, and each item's average rank within each resample (columns
    of ``weights``, already in that order) as if the draws were listed.

    A group of equal values with total weight ``w`` preceded by weight ``s`` holds the ranks ``s + 1 .. s + w``;
    each of its draws gets their mean ``s + (w + 1) / 2``. Without ties a group is one item, and that is
    ``cumsum - (w - 1) / 2``.
    """
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    return order, starts


def _ranks(weights_sorted: np.ndarray, starts: np.ndarray) -> np.ndarray:
    n = weights_sorted.shape[0]
    if starts.size == n:  # no ties
        return np.cumsum(weights_sorted, axis=0, dtype=np.float64) - (weights_sorted - 1.0) / 2.0
    group_weight = np.add.reduceat(weights_sorted, starts, axis=0).astype(np.float64)
    before = np.cumsum(group_weight, axis=0) - group_weight
    sizes = np.diff(np.r_[starts, n])
    return np.repeat(before + (group_weight + 1.0) / 2.0, sizes, axis=0)


def _weighted_pearson(
    a: np.ndarray, b: np.ndarray, weights: np.ndarray, b_sums: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """Column-wise Pearson correlation of ``a`` and ``b`` with each item (row) counted ``weights`` times (NaN for
    a constant column); ``b_sums`` = (sum w b, sum w b^2) per column, which no reordering of rows changes."""
    total = weights.sum(axis=0, dtype=np.float64)
    wa = weights * a
    sum_a = wa.sum(axis=0)
    sum_aa = np.einsum("ij,ij->j", wa, a)
    sum_ab = np.einsum("ij,ij->j", wa, b)
    sum_b, sum_bb = b_sums
    cov = sum_ab - sum_a * sum_b / total
    var = np.sqrt(np.maximum(sum_aa - sum_a**2 / total, 0.0) * np.maximum(sum_bb - sum_b**2 / total, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(var > 0, cov / np.where(var > 0, var, 1.0), np.nan)


def spearman_resampled(predicted: np.ndarray, gold: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Spearman x 100 of each row of ``predicted`` (candidates x n) against ``gold`` (n) on each resample given by
    ``counts`` (n x n_boot, see :func:`resample_counts`): an array (candidates x n_boot)."""
    predicted = np.atleast_2d(predicted)
    out = np.empty((predicted.shape[0], counts.shape[1]), dtype=np.float64)
    gold_order, gold_starts = _sorted_ranks(gold, counts)
    inverse = np.empty_like(gold_order)
    inverse[gold_order] = np.arange(gold_order.size)
    for start in range(0, counts.shape[1], _CHUNK):
        block = np.ascontiguousarray(counts[:, start : start + _CHUNK])
        # Gold ranks back in item order, then each candidate works in its own sorted order (row gathers only).
        gold_ranks = _ranks(block[gold_order], gold_starts)[inverse]
        weighted_gold = block * gold_ranks
        gold_sums = (weighted_gold.sum(axis=0), np.einsum("ij,ij->j", weighted_gold, gold_ranks))
        for c, row in enumerate(predicted):
            order, starts = _sorted_ranks(row, block)
            weights = block[order]
            out[c, start : start + _CHUNK] = 100.0 * _weighted_pearson(
                _ranks(weights, starts), gold_ranks[order], weights, gold_sums
            )
    return out


def mean_resampled(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Mean x 100 of each row of per-item ``values`` (candidates x n) on each resample: (candidates x n_boot)."""
    values = np.atleast_2d(values).astype(np.float64)
    return 100.0 * (values @ counts.astype(np.float64)) / values.shape[1]


@dataclass(frozen=True)
class Gain:
    """One candidate's gain over the baseline on the scored items (points x 100)."""

    score: float
    gain: float
    low: float  # 95% percentile interval of the gain
    high: float
    bound: float  # simultaneous lower bound (max-t over all candidates); significant when > 0
    significant: bool


def bootstrap_gains(resampled: np.ndarray, baseline: int, scores: Sequence[float]) -> list[Gain]:
    """Gains over candidate ``baseline`` with their intervals and simultaneous bounds.

    ``resampled`` (candidates x n_boot): each candidate's statistic on each resample; ``scores``: each one's
    statistic on the items as they are. Candidates whose resampled gains have no spread (they rank every item
    as the baseline does) get gain 0 and are never significant.
    """
    point = np.asarray(scores, dtype=np.float64)
    gains = resampled - resampled[baseline]
    point_gain = point - point[baseline]
    # nan-aware: on a tiny set a resample can draw constant gold scores, whose correlation is undefined.
    low, high = np.nanpercentile(gains, [2.5, 97.5], axis=1)
    se = np.nanstd(gains, axis=1, ddof=1)
    spread = se > 1e-12 * (1.0 + np.abs(point_gain))
    if spread.any():
        t = (point_gain[spread, None] - gains[spread]) / se[spread, None]
        q = float(np.nanquantile(np.nanmax(t, axis=0), 0.975))
    else:
        q = 0.0
    out = []
    for c in range(len(point)):
        bound = float(point_gain[c] - q * se[c]) if spread[c] else 0.0
        out.append(Gain(float(point[c]), float(point_gain[c]), float(low[c]), float(high[c]), bound, bound > 0))
    return out


def tied_with(resampled: np.ndarray, best: int, other: int) -> bool:
    """Whether ``other`` is not significantly below ``best``: the 95% interval of ``best - other`` over the
    resamples reaches 0."""
    return bool(np.nanpercentile(resampled[best] - resampled[other], 2.5) <= 0.0)
