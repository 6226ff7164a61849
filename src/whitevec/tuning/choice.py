"""The choice among the scored candidates on a set of dev items (see :mod:`whitevec.tuning.selection` and
:mod:`whitevec.tuning.run`'s protocol), made on all of them, and the procedure checked by k-fold over them."""

from __future__ import annotations

import numpy as np

from whitevec.tuning.items import Items
from whitevec.tuning.results import FoldCheck
from whitevec.tuning.scoring import Scored, statistic
from whitevec.tuning.selection import (
    Gain,
    bootstrap_gains,
    mean_resampled,
    resample_counts,
    spearman_resampled,
    tied_with,
)
from whitevec.tuning.space import cost_key


def choose(
    kind: str,
    scored: list[Scored],
    gold: np.ndarray | None,
    items: np.ndarray,
    n_boot: int,
    seed: int,
    budget: int | None,
) -> tuple[int, list[Gain]]:
    """Index into ``scored`` of the choice made on ``items`` (step 4 of :mod:`whitevec.tuning.run`), and every
    gain."""
    matrix = np.vstack([s.dev_items[items] for s in scored])
    counts = resample_counts(items.size, n_boot, seed)
    if kind == "sts":
        assert gold is not None
        resampled = spearman_resampled(matrix, gold[items], counts)
    else:
        resampled = mean_resampled(matrix, counts)
    points = [statistic(kind, s.dev_items, gold, items) for s in scored]
    gains = bootstrap_gains(resampled, 0, points)
    costs = [cost_key(s.result.candidate, s.result.dim) for s in scored]
    allowed = [budget is None or s.result.bytes_per_vector <= budget for s in scored]
    if allowed[0]:
        eligible = [c for c in range(len(scored)) if allowed[c] and (c == 0 or gains[c].significant)]
    else:
        eligible = [c for c in range(len(scored)) if allowed[c]]
    if not eligible:
        return 0, gains
    best = max(eligible, key=lambda c: (gains[c].gain, [-x for x in costs[c]]))
    tied = [c for c in eligible if c == best or tied_with(resampled, best, c)]
    choice = min(tied, key=lambda c: (costs[c], -gains[c].gain, c))
    return choice, gains


def choose_on_dev(scored: list[Scored], items: Items, n_boot: int, seed: int, budget: int | None) -> int:
    """The choice on all dev items (index into ``scored``), marked; every candidate's gain recorded."""
    choice, gains = choose(items.kind, scored, items.gold, np.arange(items.n_dev), n_boot, seed, budget)
    for s, g in zip(scored, gains, strict=True):
        s.result.dev, s.result.gain, s.result.low, s.result.high = g.score, g.gain, g.low, g.high
        s.result.bound, s.result.significant = g.bound, g.significant
        if s.test_items is not None:
            s.result.test = statistic(items.kind, s.test_items, items.test_gold, np.arange(items.n_test))
    scored[choice].result.chosen = True
    return choice


def check_by_folds(
    scored: list[Scored], items: Items, folds: int, n_boot: int, seed: int, budget: int | None
) -> list[FoldCheck]:
    """The procedure checked by k-fold over the dev items: chosen without each fold, scored on it beside raw
    (each candidate's fold scores recorded too)."""
    kind, gold, n_dev = items.kind, items.gold, items.n_dev
    checks: list[FoldCheck] = []
    fold_of = fold_ids(n_dev, min(folds, n_dev), seed)
    for fold in range(min(folds, n_dev)):
        inside, held_out = np.flatnonzero(fold_of != fold), np.flatnonzero(fold_of == fold)
        if inside.size < 2 or held_out.size < 2:
            continue
        if kind == "sts" and (np.ptp(gold[inside]) == 0 or np.ptp(gold[held_out]) == 0):  # type: ignore[index]
            continue
        pick, _ = choose(kind, scored, gold, inside, n_boot, seed + 1 + fold, budget)
        for s in scored:
            s.result.folds.append(statistic(kind, s.dev_items, gold, held_out))
        checks.append(
            FoldCheck(
                fold,
                int(held_out.size),
                scored[pick].result.candidate.label,
                statistic(kind, scored[0].dev_items, gold, held_out),
                statistic(kind, scored[pick].dev_items, gold, held_out),
            )
        )
    return checks


def fold_ids(n: int, folds: int, seed: int) -> np.ndarray:
    """Fold number of each item: a seeded permutation cut into ``folds`` near-equal parts."""
    order = np.random.default_rng(seed).permutation(n)
    ids = np.empty(n, dtype=np.int64)
    ids[order] = np.arange(n) % folds
    return ids
