"""Anisotropy measures over a matrix of vectors (rows), each returning a plain dataclass with ``to_dict``.

* :func:`cosine_stats`: mean and spread of the cosine of random pairs of rows;
* :func:`spectrum`: eigenvalues of the covariance, variance share of the top directions, effective rank;
* :func:`isotropy_mu`: I(W) of Mu & Viswanath (2018);
* :func:`isoscore`: IsoScore of Rudman et al. (2022);
* :func:`alignment_uniformity`: alignment and uniformity of Wang & Isola (2020).

Every function rejects fewer than two vectors, NaN/inf, and constant vectors (zero variance) with a
:class:`~whitevec.errors.BadInputError`; computations run in float64.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.special import logsumexp

from whitevec.errors import BadInputError, DimensionMismatchError
from whitevec.transforms.validation import check_vectors
from whitevec.utils.linalg import unit_rows

DEFAULT_PAIRS = 20000
DEFAULT_SEED = 0


def check_matrix(X: Any, name: str = "vectors", allow_constant: bool = False) -> np.ndarray:
    """``X`` as float64 (n, d) with n >= 2, finite, and (unless ``allow_constant``) not all rows equal."""
    array = check_vectors(X, name=name, dtype=np.float64)
    if array.shape[0] < 2:
        raise BadInputError(
            f"{name} has {array.shape[0]} row(s); anisotropy diagnostics need at least two vectors"
        )
    if array.shape[1] < 1:
        raise BadInputError(f"{name} has dimension 0; give vectors with at least one dimension")
    if not allow_constant and np.ptp(array, axis=0).max() == 0.0:
        raise BadInputError(
            f"{name}: all {array.shape[0]} vectors are identical (zero variance); diagnostics need varied "
            "vectors: check that the texts differ and the encoder is not broken"
        )
    return array


def _unit_rows(X: np.ndarray, name: str) -> np.ndarray:
    # A zero row has no direction; kept as zero it would silently pull every mean over unit vectors.
    return unit_rows(X, dtype=np.float64, zero_rows="raise", name=name)


def random_pairs(n: int, max_pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j): every pair when there are at most ``max_pairs``, else a seeded uniform sample.

    The sample draws i != j uniformly with replacement over pairs, so it is unbiased for the mean over all pairs.
    """
    total = n * (n - 1) // 2
    if total <= max_pairs:
        i, j = np.triu_indices(n, k=1)
        return i, j
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, size=max_pairs)
    # j uniform over the other n-1 rows: draw from n-1 and skip i.
    j = rng.integers(0, n - 1, size=max_pairs)
    j = j + (j >= i)
    return np.minimum(i, j), np.maximum(i, j)


# --- cosine of random pairs ------------------------------------------------------------------------------
@dataclass
class CosineStats:
    """Cosine similarity of random pairs of distinct rows: mean, standard deviation, and the sample used.

    ``mean`` near 1 means the vectors sit in a narrow cone; an isotropic space gives about 0.
    """

    mean: float
    std: float
    n_pairs: int
    exhaustive: bool
    seed: int
    values: np.ndarray = field(repr=False, compare=False)  # the sampled cosines (plots); not in to_dict

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "values"}


def cosine_stats(X: Any, max_pairs: int = DEFAULT_PAIRS, seed: int = DEFAULT_SEED) -> CosineStats:
    """Mean and std of the cosine of random pairs of distinct rows (all pairs when at most ``max_pairs``)."""
    array = check_matrix(X)
    if max_pairs < 1:
        raise BadInputError(f"max_pairs must be at least 1, got {max_pairs}")
    unit = _unit_rows(array, "vectors")
    i, j = random_pairs(len(unit), max_pairs, seed)
    values = np.einsum("ij,ij->i", unit[i], unit[j])
    exhaustive = len(i) == len(unit) * (len(unit) - 1) // 2
    return CosineStats(float(values.mean()), float(values.std()), len(values), exhaustive, seed, values)


# --- eigen-spectrum --------------------------------------------------------------------------------------
@dataclass
class Spectrum:
    """Eigenvalues of the (unbiased) covariance, descending, and summaries of how variance is spread.

    ``top_share[k]`` is the share of total variance in the top ``k`` directions (k = 1, 10, 100, capped at d);
    ``effective_rank`` is ``exp(H(p))`` with ``p = lambda / sum(lambda)`` (Roy & Vetterli 2007): d for a
    perfectly flat spectrum, 1 when one direction holds everything.
    """

    eigenvalues: list[float]
    total_variance: float
    top_share: dict[str, float]
    effective_rank: float
    dim: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def covariance_eigenvalues(X: np.ndarray) -> np.ndarray:
    """Eigenvalues (descending, negatives from rounding set to 0) of the unbiased covariance of the rows."""
    centered = X - X.mean(axis=0)
    cov = centered.T @ centered / (len(X) - 1)
    values = np.linalg.eigvalsh(cov)[::-1]
    return np.clip(values, 0.0, None)


def effective_rank(eigenvalues: Any) -> float:
    """``exp(-sum p log p)`` with ``p = eigenvalues / sum``; zero eigenvalues contribute 0 (0 log 0 = 0)."""
    values = np.asarray(eigenvalues, dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or (values < 0).any() or not np.isfinite(values).all():
        raise BadInputError("effective_rank needs a non-empty 1-D array of finite, non-negative eigenvalues")
    total = values.sum()
    if total <= 0:
        raise BadInputError("effective_rank: every eigenvalue is 0 (zero variance)")
    p = values[values > 0] / total
    return float(np.exp(-(p * np.log(p)).sum()))


def spectrum(X: Any, tops: tuple[int, ...] = (1, 10, 100)) -> Spectrum:
    """Covariance eigen-spectrum of the rows of ``X`` with top-k variance shares and effective rank."""
    array = check_matrix(X)
    values = covariance_eigenvalues(array)
    total = float(values.sum())
    if total <= 0:
        raise BadInputError("vectors have zero total variance; diagnostics need varied vectors")
    shares = {str(k): float(values[: min(k, len(values))].sum() / total) for k in tops}
    return Spectrum(values.tolist(), total, shares, effective_rank(values), array.shape[1])


# --- I(W), Mu & Viswanath --------------------------------------------------------------------------------
@dataclass
class Isotropy:
    """I(W) = min_c Z(c) / max_c Z(c), ``Z(c) = sum_i exp(c^T w_i)``, c over the unit eigenvectors of W^T W.

    1 for a perfectly isotropic cloud around the origin, near 0 when the vectors share a common direction.
    ``log_z_min``/``log_z_max`` are the logs of the extreme partition functions (kept because the ratio
    underflows to 0 for strongly anisotropic spaces).
    """

    value: float
    log_z_min: float
    log_z_max: float
    normalized: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def isotropy_mu(X: Any, normalize: bool = False) -> Isotropy:
    """Isotropy I(W) of Mu & Viswanath ("All-but-the-Top", ICLR 2018, Sec. 2.2 and Eq. 2).

    Scale: as in the paper (and the codes that report I(W) for BERT-type vectors), the vectors are used as they
    are, unnormalised and uncentred; so I(W) depends on their scale (a larger norm sharpens ``exp``) as well as
    their shape. ``normalize=True`` L2-normalises each row first, for a scale-free variant. The partition
    functions are computed as ``logsumexp`` so large norms do not overflow.

    Sign: an eigenvector is defined only up to sign, and ``Z(c) != Z(-c)`` in general; both ``c`` and ``-c`` of
    every eigenvector are taken into the min and max, which makes the result independent of the solver's
    choice of sign.
    """
    W = check_matrix(X)
    if normalize:
        W = _unit_rows(W, "vectors")
    _, eigenvectors = np.linalg.eigh(W.T @ W)
    projections = W @ eigenvectors  # (n, d): c^T w_i for every eigenvector c
    log_z = np.concatenate([logsumexp(projections, axis=0), logsumexp(-projections, axis=0)])
    low, high = float(log_z.min()), float(log_z.max())
    return Isotropy(float(np.exp(low - high)), low, high, normalize)


# --- IsoScore, Rudman et al. ---------------------------------------------------------------------------------
@dataclass
class IsoScoreResult:
    """IsoScore (Rudman, Gillman, Rayburn & Eickhoff, ACL Findings 2022) and its intermediate quantities.

    ``score`` is in [0, 1]: 1 when every dimension is used equally, 0 when one dimension holds all variance.
    ``isotropy_defect`` is delta(X) in [0, 1]; ``fraction_used`` is phi(X) in [1/n, 1]; ``dims_used`` is
    ``n * phi(X)``, the number of dimensions used isotropically.
    """

    score: float
    isotropy_defect: float
    fraction_used: float
    dims_used: float
    dim: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def isoscore(X: Any) -> IsoScoreResult:
    """IsoScore of the rows of ``X``, following Algorithm 1 of Rudman et al. (2022) step by step."""
    points = check_matrix(X)
    n = points.shape[1]  # the paper's n is the dimension of the space
    if n < 2:
        raise BadInputError("IsoScore needs vectors of dimension at least 2")
    # Step 2: reorient the point cloud with PCA (centre, rotate onto the principal axes; all n components kept).
    centered = points - points.mean(axis=0)
    _, eigenvectors = np.linalg.eigh(centered.T @ centered)
    points_pca = centered @ eigenvectors[:, ::-1]
    # Step 3: the variance vector: the diagonal of the covariance of the reoriented points.
    variance = points_pca.var(axis=0, ddof=1)
    # Step 4: normalise the variance vector to length sqrt(n) (the length of the identity's diagonal).
    variance_hat = np.sqrt(n) * variance / np.linalg.norm(variance)
    # Step 5: isotropy defect: distance from the identity's diagonal (1, ..., 1), scaled to [0, 1] by its
    # largest possible value sqrt(2 (n - sqrt(n))) (all variance in one dimension).
    defect = float(np.linalg.norm(variance_hat - 1.0) / np.sqrt(2.0 * (n - np.sqrt(n))))
    # Step 6: fraction of dimensions used: phi = (n - delta^2 (n - sqrt(n)))^2 / n^2.
    phi = float((n - defect**2 * (n - np.sqrt(n))) ** 2 / n**2)
    # Step 7: IsoScore = (n * phi - 1) / (n - 1), so one used dimension maps to 0 and all n to 1.
    score = (n * phi - 1.0) / (n - 1.0)
    return IsoScoreResult(float(score), defect, phi, n * phi, n)


# --- alignment and uniformity, Wang & Isola --------------------------------------------------------------
@dataclass
class AlignmentUniformity:
    """Alignment and uniformity of L2-normalised vectors (Wang & Isola, ICML 2020).

    ``alignment = E ||f(x) - f(y)||^alpha`` over positive pairs (lower: positives closer);
    ``uniformity = log E exp(-t ||f(x) - f(y)||^2)`` over pairs of distinct vectors (lower: more uniform on the
    sphere; -4 is the limit for t = 2 on a high-dimensional sphere, 0 when all vectors coincide).
    """

    alignment: float
    uniformity: float
    n_positive_pairs: int
    n_uniformity_pairs: int
    alpha: float
    t: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def alignment_uniformity(
    left: Any,
    right: Any,
    vectors: Any | None = None,
    alpha: float = 2.0,
    t: float = 2.0,
    max_pairs: int = 1_000_000,
    seed: int = DEFAULT_SEED,
) -> AlignmentUniformity:
    """Alignment over the positive pairs (``left[i]``, ``right[i]``) and uniformity over ``vectors``.

    ``vectors`` defaults to the rows of ``left`` and ``right`` together (duplicates removed). Uniformity uses
    every pair of distinct rows when there are at most ``max_pairs`` of them, else a seeded random sample.
    """
    # One positive pair is enough for alignment, and identical pairs are legitimate (alignment 0).
    a = check_vectors(left, name="left", min_rows=1, dtype=np.float64)
    b = check_vectors(right, name="right", min_rows=1, dtype=np.float64)
    if a.shape != b.shape:
        raise DimensionMismatchError(f"positive pairs need left and right of one shape, got {a.shape}, {b.shape}")
    if alpha <= 0 or t <= 0:
        raise BadInputError(f"alpha and t must be positive, got alpha={alpha}, t={t}")
    ua, ub = _unit_rows(a, "left"), _unit_rows(b, "right")
    alignment = float((np.linalg.norm(ua - ub, axis=1) ** alpha).mean())
    pool = np.unique(np.concatenate([a, b]), axis=0) if vectors is None else check_matrix(vectors)
    if pool.shape[1] != a.shape[1]:
        raise DimensionMismatchError(f"vectors have dimension {pool.shape[1]}, pairs {a.shape[1]}")
    if len(pool) < 2:
        raise BadInputError("uniformity needs at least two distinct vectors")
    unit = _unit_rows(pool, "vectors")
    i, j = random_pairs(len(unit), max_pairs, seed)
    # ||u - v||^2 = 2 - 2 u.v for unit vectors; clip rounding below 0.
    squared = np.clip(2.0 - 2.0 * np.einsum("ij,ij->i", unit[i], unit[j]), 0.0, None)
    uniformity = float(logsumexp(-t * squared) - np.log(len(squared)))
    return AlignmentUniformity(alignment, uniformity, len(a), len(squared), alpha, t)
