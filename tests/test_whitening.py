"""Whitening against an independent numpy computation (BERT-whitening: np.cov, SVD, U diag(1/sqrt(s)))."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from whitevec.errors import BadInputError, DimensionMismatchError
from whitevec.transforms import Whitening, WhitevecWarning


def anisotropic(n: int = 400, d: int = 12, seed: int = 0) -> np.ndarray:
    """Correlated Gaussian vectors with well-separated variances and a non-zero mean."""
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(d, d)) * np.linspace(3.0, 0.3, d)[:, None]
    return rng.normal(size=(n, d)) @ mix + rng.normal(size=d) * 5


def reference(X: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """BERT-whitening's compute_kernel_bias: W = U diag(1/sqrt(s)), bias = -mu."""
    mu = X.mean(axis=0, keepdims=True)
    U, s, _ = np.linalg.svd(np.cov(X.T))
    W = U @ np.diag(1 / np.sqrt(s))
    return (W if k is None else W[:, :k]), -mu


def align_columns(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Flip the columns of A to agree in sign with B."""
    signs = np.sign(np.sum(A * B, axis=0))
    return A * signs


def test_output_covariance_is_identity() -> None:
    X = anisotropic()
    Z = Whitening().fit(X).transform(X)
    assert Z.dtype == np.float32 and Z.shape == X.shape
    Z = Z.astype(np.float64)  # the statistics below in float64
    np.testing.assert_allclose(np.cov(Z.T), np.eye(X.shape[1]), atol=1e-6)
    np.testing.assert_allclose(Z.mean(axis=0), 0, atol=1e-6)


def test_output_is_float32() -> None:
    X = anisotropic()
    for dtype in (np.float16, np.float32, np.float64):
        assert Whitening().fit(X).transform(X.astype(dtype)).dtype == np.float32


@pytest.mark.parametrize("k", [None, 5])
def test_matches_reference(k: int | None) -> None:
    X = anisotropic()
    W, bias = reference(X, k)
    expected = (X + bias) @ W
    got = Whitening(n_components=k).fit(X).transform(X)
    assert got.shape == expected.shape
    np.testing.assert_allclose(align_columns(got, expected), expected, atol=1e-5)


def test_float32_input_matches_reference() -> None:
    X = anisotropic().astype(np.float32)
    X64 = X.astype(np.float64)
    W, bias = reference(X64)
    got = Whitening().fit(X).transform(X)
    expected = (X64 + bias) @ W
    np.testing.assert_allclose(align_columns(got, expected), expected, atol=1e-5)


def test_sign_convention_is_deterministic() -> None:
    X = anisotropic()
    U = Whitening().fit(X).eigenvectors_
    largest = U[np.argmax(np.abs(U), axis=0), np.arange(U.shape[1])]
    assert np.all(largest > 0)


def test_attributes() -> None:
    X = anisotropic()
    w = Whitening(n_components=4).fit(X)
    s = np.linalg.eigvalsh(np.cov(X.T))[::-1]
    assert w.n_samples_seen_ == len(X) and w.n_features_in_ == X.shape[1]
    np.testing.assert_allclose(w.mean_, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(w.covariance_, np.cov(X.T), rtol=1e-10)
    np.testing.assert_allclose(w.eigenvalues_, s, rtol=1e-10)
    np.testing.assert_allclose(w.explained_variance_ratio_, s[:4] / s.sum(), rtol=1e-10)
    assert w.components_.shape == (X.shape[1], 4)


def test_streaming_merge_and_one_shot_agree() -> None:
    X = anisotropic(n=1000)
    one = Whitening().fit(X)
    stream = Whitening()
    cuts = [0, 1, 4, 50, 51, 300, 777, 1000]  # uneven batches, including single rows
    for a, b in itertools.pairwise(cuts):
        stream.partial_fit(X[a:b])
    shard_a, shard_b = Whitening().fit(X[:333]), Whitening().fit(X[333:])
    merged = shard_a.merge(shard_b)
    mean, cov = X.mean(axis=0), np.cov(X.T)
    for w in (one, stream, merged):
        assert w.n_samples_seen_ == 1000
        np.testing.assert_allclose(w.mean_, mean, rtol=0, atol=1e-8)
        np.testing.assert_allclose(w.covariance_, cov, rtol=0, atol=1e-8)
        np.testing.assert_allclose(w.components_, one.components_, rtol=0, atol=1e-8)
        np.testing.assert_allclose(w.transform(X), one.transform(X), atol=1e-5)


def test_fit_resets_and_chunking(monkeypatch: pytest.MonkeyPatch) -> None:
    import whitevec.transforms.arithmetic as module

    X = anisotropic(n=500)
    expected = Whitening().fit(X)
    monkeypatch.setattr(module, "CHUNK_ROWS", 7)  # force many internal chunks (moments and whiten read it there)
    w = Whitening().fit(anisotropic(n=50, seed=3)).fit(X)
    assert w.n_samples_seen_ == 500
    np.testing.assert_allclose(w.covariance_, expected.covariance_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(w.transform(X), expected.transform(X), atol=1e-5)


def test_transform_reflects_every_partial_fit() -> None:
    X = anisotropic(n=600)
    w = Whitening().partial_fit(X[:300])
    first = w.transform(X)
    w.partial_fit(X[300:])
    W, bias = reference(X)
    expected = (X + bias) @ W
    assert not np.allclose(first, w.transform(X), atol=1e-3)
    np.testing.assert_allclose(align_columns(w.transform(X), expected), expected, atol=1e-5)


def test_inverse_round_trip() -> None:
    X = anisotropic()
    w = Whitening().fit(X)
    back = w.inverse_transform(w.transform(X))
    np.testing.assert_allclose(back, X, rtol=1e-4, atol=1e-4 * np.abs(X).max())
    with pytest.raises(BadInputError, match="all 12 components"):
        Whitening(n_components=5).fit(X).inverse_transform(np.zeros((2, 5)))


def test_rotation_keeps_distances() -> None:
    X = anisotropic(n=50)
    Z = Whitening(gamma=0.0).fit(X).transform(X).astype(np.float64)
    dist = np.linalg.norm(X[:, None] - X[None], axis=-1)
    np.testing.assert_allclose(np.linalg.norm(Z[:, None] - Z[None], axis=-1), dist, rtol=1e-5, atol=1e-4)
    # centred: norms equal those of X - mu
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), np.linalg.norm(X - X.mean(0), axis=1), rtol=1e-5)


def test_beta_zero_skips_centering() -> None:
    X = anisotropic()
    W, _ = reference(X)
    got = Whitening(beta=0.0).fit(X).transform(X)
    expected = X @ W
    np.testing.assert_allclose(align_columns(got, expected), expected, rtol=1e-5, atol=1e-4)


def test_rank_deficient_warns_once_and_stays_finite() -> None:
    X = anisotropic(n=5, d=12)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = Whitening().fit(X)
        Z = w.transform(X)
        w.transform(X)
    ours = [c for c in caught if issubclass(c.category, WhitevecWarning)]
    assert len(ours) == 1
    assert "8 of 12" in str(ours[0].message)  # 5 rows span 4 centred directions; 8 are floored
    assert np.isfinite(Z).all()


def test_zero_variance_column_warns() -> None:
    X = anisotropic()
    X[:, 3] = 1.5
    with pytest.warns(WhitevecWarning, match="1 of 12"):
        Z = Whitening().fit(X).transform(X)
    assert np.isfinite(Z).all()


def test_bad_inputs() -> None:
    X = anisotropic()
    with pytest.raises(BadInputError, match=r"1 sample.*minimum of 2"):
        Whitening().fit(X[:1])
    with pytest.raises(BadInputError, match="at least 2"):
        Whitening().partial_fit(X[:1]).transform(X)
    bad = X.copy()
    bad[7, 2] = np.nan
    bad[9, 0] = np.inf
    with pytest.raises(BadInputError, match="rows 7, 9"):
        Whitening().fit(bad)
    w = Whitening().fit(X)
    # A bad batch in a stream is refused whole and leaves the moments as they were.
    before = (w.n_samples_seen_, w.mean_.copy(), w.scatter_.copy())
    with pytest.raises(BadInputError, match="rows 7, 9"):
        w.partial_fit(bad)
    assert w.n_samples_seen_ == before[0]
    np.testing.assert_array_equal(w.mean_, before[1])
    np.testing.assert_array_equal(w.scatter_, before[2])
    # transform finds NaN/inf from its output chunks; the message still names the input rows, in any precision.
    for precision in ("float64", "float32"):
        fitted = Whitening(precision=precision).fit(X)
        for dtype in (np.float64, np.float32):
            with pytest.raises(BadInputError, match="rows 7, 9"):
                fitted.transform(bad.astype(dtype))
    with pytest.raises(BadInputError, match="overflow"):
        w.transform(np.full((2, X.shape[1]), 1e300))
    # Finite float32 values whose squares overflow float32: named as such, not as NaN rows.
    huge = (anisotropic() * 1e22).astype(np.float32)
    with pytest.raises(BadInputError, match="too large"):
        Whitening(precision="float32").fit(huge)
    with pytest.raises(DimensionMismatchError, match=r"X has 5 features, but Whitening is expecting 12"):
        w.transform(np.zeros((3, 5)))
    with pytest.raises(DimensionMismatchError):
        w.partial_fit(np.zeros((3, 5)))
    with pytest.raises(BadInputError, match="n_components"):
        Whitening(n_components=13).fit(X)
    with pytest.raises(BadInputError, match="merge"):
        w.merge(Whitening().fit(anisotropic(d=5)))


def test_parameters_are_checked_before_the_data() -> None:
    X = anisotropic()  # 12 dimensions
    for method in ("fit", "partial_fit"):
        w = Whitening(n_components=13)
        with pytest.raises(BadInputError, match=r"n_components .*1\.\.12"):
            getattr(w, method)(X)
        assert not hasattr(w, "n_features_in_") and not hasattr(w, "mean_")  # left unfitted, not half-fitted
    empty = Whitening(n_components=13)
    with pytest.raises(BadInputError, match="n_components"):
        empty.merge(Whitening().fit(X))
    assert not hasattr(empty, "n_features_in_")
    # Each parameter is named before X is looked at (X here is not vectors at all).
    for name, value in [("precision", "float16"), ("beta", np.nan), ("gamma", np.inf), ("eps", 0.0)]:
        with pytest.raises(BadInputError, match=name):
            Whitening(**{name: value}).fit("not vectors")
    with pytest.raises(BadInputError, match="n_components"):
        Whitening(n_components=True).partial_fit("not vectors")
    # Whitening reads its parameters when it applies: one changed since the fit is checked then.
    fitted = Whitening().fit(X).set_params(n_components=13)
    with pytest.raises(BadInputError, match="n_components"):
        fitted.transform(X)


def test_sklearn_clone_and_pipeline() -> None:
    from sklearn.base import clone
    from sklearn.pipeline import Pipeline

    X = anisotropic()
    w = Whitening(n_components=4, beta=0.5).fit(X)
    fresh = clone(w)
    assert fresh.get_params() == w.get_params()
    assert not hasattr(fresh, "mean_")
    pipe = Pipeline([("white", Whitening(n_components=6))])
    np.testing.assert_array_equal(pipe.fit_transform(X), Whitening(n_components=6).fit(X).transform(X))


def _weighted_reference(X: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean and frequency-weighted covariance computed directly: sum w x / W, sum w (x-mu)(x-mu)^T /
    (W - 1)."""
    total = w.sum()
    mu = (w[:, None] * X).sum(axis=0) / total
    centred = X - mu
    return mu, (centred.T * w) @ centred / (total - 1)


def test_weighted_moments_are_exact_and_merge() -> None:
    X = anisotropic(n=900)
    rng = np.random.default_rng(5)
    w = rng.uniform(0.0, 3.0, size=len(X))
    w[rng.choice(len(X), 50, replace=False)] = 0.0  # rows that must not count at all
    mean, cov = _weighted_reference(X, w)
    one = Whitening().fit(X, sample_weight=w)
    stream = Whitening()
    for a, b in itertools.pairwise([0, 1, 7, 300, 301, 900]):
        stream.partial_fit(X[a:b], sample_weight=w[a:b])
    shard_a = (
        Whitening().partial_fit(X[:200], sample_weight=w[:200]).partial_fit(X[200:450], sample_weight=w[200:450])
    )
    shard_b = Whitening().partial_fit(X[450:], sample_weight=w[450:])
    merged = shard_a.merge(shard_b)
    for fitted in (one, stream, merged):
        assert fitted.n_samples_seen_ == pytest.approx(w.sum(), rel=1e-12)
        np.testing.assert_allclose(fitted.mean_, mean, rtol=0, atol=1e-8)
        np.testing.assert_allclose(fitted.covariance_, cov, rtol=0, atol=1e-8)
        np.testing.assert_allclose(fitted.components_, one.components_, rtol=0, atol=1e-8)
    # The weights change the moments (so the checks above could fail), and integer weights repeat rows.
    assert np.max(np.abs(cov - np.cov(X.T))) > 0.1
    counts = rng.integers(0, 4, size=len(X))
    repeated = np.repeat(X, counts, axis=0)
    by_count = Whitening().fit(X, sample_weight=counts)
    np.testing.assert_allclose(by_count.mean_, repeated.mean(axis=0), rtol=0, atol=1e-8)
    np.testing.assert_allclose(by_count.covariance_, np.cov(repeated.T), rtol=0, atol=1e-8)
    # Unit weights are the unweighted fit.
    np.testing.assert_allclose(
        Whitening().fit(X, sample_weight=np.ones(len(X))).scatter_, Whitening().fit(X).scatter_, rtol=0, atol=1e-8
    )


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (lambda n: np.r_[np.ones(n - 1), -1.0], "negative weights at positions 399"),
        (lambda n: np.r_[np.nan, np.ones(n - 1)], "NaN or inf weights at positions 0"),
        (lambda n: np.r_[np.ones(n - 1), np.inf], "NaN or inf weights at positions 399"),
        (lambda n: np.ones(n + 1), "401 weights but X has 400 rows"),
        (lambda n: np.ones((n, 2)), "must be 1-D"),
        (lambda n: np.zeros(n), "sums to zero"),
        (lambda n: ["a"] * n, "must be numbers"),
    ],
)
def test_bad_sample_weight_is_refused_before_the_moments(
    weights: object, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import whitevec.transforms.whitening as module

    X = anisotropic()
    w = weights(len(X))  # type: ignore[operator]
    fitted = Whitening().fit(X[:100])
    before = (fitted.n_samples_seen_, fitted.mean_.copy(), fitted.scatter_.copy())

    def unreachable(*args: object, **kwargs: object) -> None:
        raise AssertionError("the moments were computed before the weights were checked")

    monkeypatch.setattr(module, "moments", unreachable)
    fresh = Whitening()
    with pytest.raises(BadInputError, match=message):
        fresh.fit(X, sample_weight=w)
    assert not hasattr(fresh, "mean_") and not hasattr(fresh, "n_features_in_")
    for method in ("fit", "partial_fit"):
        with pytest.raises(BadInputError, match=message):
            getattr(fitted, method)(X, sample_weight=w)
        assert fitted.n_samples_seen_ == before[0]
        np.testing.assert_array_equal(fitted.mean_, before[1])
        np.testing.assert_array_equal(fitted.scatter_, before[2])


def test_fit_needs_weights_summing_above_one() -> None:
    X = anisotropic()
    with pytest.raises(BadInputError, match=r"sums to 0\.5.*more than 1"):
        Whitening().fit(X, sample_weight=np.full(len(X), 0.5 / len(X)))
    # partial_fit accepts a small total (more may follow); only the covariance needs it above 1.
    w = Whitening().partial_fit(X, sample_weight=np.full(len(X), 0.5 / len(X)))
    with pytest.raises(BadInputError, match="total sample_weight above 1"):
        w.transform(X)
