"""The transform a Ray build fits: which one and whether it needs a fit, fitted exactly from the whitening
moments the actors wrote (merged in unit order), or on a sample of the shards' vectors on the driver."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from whitevec.datasets.shards import CorpusUnit
from whitevec.engines.ray.shards import moments_name, read_shard_vectors, shard_name
from whitevec.errors import BadInputError, WhitevecError
from whitevec.index.build_transform import is_fitted, resolve_transform
from whitevec.index.stores.vector import sample_rows
from whitevec.transforms import Transform
from whitevec.transforms.whitening import Whitening


def transform_plan(transform: str | Transform | None, sampled: bool) -> tuple[Transform | None, str | None, bool]:
    """``(object, spec, needs a fit)``. Without a sample only a whitening form is fitted (exactly, from moments
    merged across workers); on a sample (``sampled``) any transform is, on the driver."""
    obj, spec = resolve_transform(transform)
    if obj is None:
        return None, None, False
    if is_fitted(obj):
        return obj, spec, False
    if not sampled and not isinstance(obj, Whitening):
        raise BadInputError(
            f"--engine ray fits whitening forms only (whitening, whitening-K, rotation, pca-K) exactly, from "
            f"moments merged across workers; {spec!r} is not one. Fit it on a sample of the corpus "
            "(--fit-sample N), or once with `whitevec fit` and pass the .safetensors file, or use --engine local."
        )
    return obj, spec, True


def check_fit_sample(fit_sample: int | None, fit_seed: int) -> None:
    if fit_sample is not None and (isinstance(fit_sample, bool) or not isinstance(fit_sample, int)):
        raise BadInputError(f"--fit-sample must be a whole number of vectors, not {fit_sample!r}")
    if fit_sample is not None and fit_sample < 2:
        raise BadInputError(f"--fit-sample must be at least 2 vectors, not {fit_sample}")
    if isinstance(fit_seed, bool) or not isinstance(fit_seed, int) or fit_seed < 0:
        raise BadInputError(f"--fit-seed must be a whole number >= 0, not {fit_seed!r}")


def fit_on_sample(
    folder: Path, units: list[CorpusUnit], counts: dict[int, int], target: Transform, size: int, seed: int
) -> int:
    """Fit ``target`` on ``size`` of the corpus's raw vectors, the rows :func:`sample_rows` draws with ``seed``
    from the corpus in unit order (so the sample does not depend on the workers); returns the rows fitted."""
    total = sum(counts[u.index] for u in units)
    wanted = sample_rows(total, size, seed)
    if wanted.size < 2:
        raise BadInputError(f"the transform needs at least 2 documents to fit, the corpus has {total}")
    parts: list[np.ndarray] = []
    row = 0
    for unit in units:
        count = counts[unit.index]
        inside = wanted[(wanted >= row) & (wanted < row + count)] - row
        if inside.size:
            parts.append(read_shard_vectors(folder / shard_name(unit.index))[inside])
        row += count
    target.fit(np.ascontiguousarray(np.concatenate(parts), dtype=np.float32))
    return int(wanted.size)


def merge_moments(folder: Path, units: list[CorpusUnit], counts: dict[int, int], target: Whitening) -> int:
    """Merge every unit's moments into ``target`` in unit order; returns the rows merged."""
    rows = 0
    for unit in units:
        if counts[unit.index] == 0:
            continue
        part = Transform.load(folder / moments_name(unit.index))
        if not isinstance(part, Whitening):
            raise WhitevecError(f"{folder / moments_name(unit.index)} holds no whitening moments; rebuild")
        target.merge(part)
        rows += counts[unit.index]
    if rows < 2:
        raise BadInputError(f"whitening needs at least 2 documents to fit, the corpus has {rows}")
    # Reading the eigenvalues decomposes the covariance: fit()'s floored-eigenvalue warning comes now.
    _ = target.eigenvalues_
    return rows
