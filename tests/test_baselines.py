"""Center, Normalize and All-but-the-Top against direct numpy computations."""

from __future__ import annotations

import numpy as np
import pytest

from whitevec.errors import BadInputError, DimensionMismatchError
from whitevec.transforms import AllButTheTop, Center, Normalize, Transform, Whitening, make_transform


def vectors(n: int = 300, d: int = 20, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ (rng.normal(size=(d, d)) * np.linspace(4, 0.5, d)[:, None]) + 3.0


def test_center() -> None:
    X = vectors()
    c = Center().fit(X)
    Z = c.transform(X)
    assert Z.dtype == np.float32
    np.testing.assert_allclose(Z, X - X.mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(c.inverse_transform(Z), X, atol=1e-4)


def test_normalize() -> None:
    X = vectors()
    X[4] = 0.0
    Z = Normalize().fit(X).transform(X)
    norms = np.linalg.norm(Z, axis=1)
    np.testing.assert_allclose(np.delete(norms, 4), 1.0, atol=1e-6)
    assert np.all(Z[4] == 0)
    np.testing.assert_allclose(Z[0], X[0] / np.sqrt(np.sum(X[0] ** 2)), atol=1e-6)
    assert Normalize().transform(X[:3]).shape == (3, 20)  # stateless: works unfitted
    with pytest.raises(DimensionMismatchError):
        Normalize().fit(X).transform(np.ones((2, 3)))


def test_abtt_removes_top_directions() -> None:
    X = vectors()
    D = 3
    abtt = AllButTheTop(n_remove=D).fit(X)
    Z = abtt.transform(X).astype(np.float64)
    # independent top directions: right singular vectors of the centred data
    _, _, Vt = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)
    top = Vt[:D]
    np.testing.assert_allclose(Z @ top.T, 0, atol=1e-4)
    expected = (X - X.mean(0)) - (X - X.mean(0)) @ top.T @ top
    np.testing.assert_allclose(Z, expected, atol=1e-4)
    # the rest of the spectrum is untouched
    np.testing.assert_allclose(Z @ Vt[D:].T, (X - X.mean(0)) @ Vt[D:].T, atol=1e-4)
    assert abtt.directions_.shape == (D, 20) and abtt.n_remove_ == D


def test_abtt_default_and_bad_values() -> None:
    assert AllButTheTop().fit(vectors(d=20)).n_remove_ == 1  # max(1, round(20/100))
    assert AllButTheTop().fit(vectors(n=400, d=250)).n_remove_ == 2  # round(2.5) -> 2 (banker's)
    with pytest.raises(BadInputError, match="n_remove"):
        AllButTheTop(n_remove=21).fit(vectors())
    with pytest.raises(BadInputError, match="rows 2"):
        bad = vectors()
        bad[2, 0] = np.nan
        AllButTheTop().fit(bad)


def test_sklearn_clone_and_pipeline() -> None:
    from sklearn.base import clone
    from sklearn.pipeline import Pipeline

    X = vectors()
    for t in (Center(), Normalize(), AllButTheTop(n_remove=2)):
        assert clone(t.fit(X)).get_params() == t.get_params()
    pipe = Pipeline(
        [("abtt", AllButTheTop(n_remove=2)), ("white", Whitening(n_components=8)), ("norm", Normalize())]
    )
    Z = pipe.fit_transform(X)
    assert Z.shape == (300, 8)
    np.testing.assert_allclose(np.linalg.norm(Z, axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("transform", [Whitening(), Center(), Normalize(), AllButTheTop()], ids=repr)
def test_parameter_constraints(transform: Transform) -> None:
    # scikit-learn's own check: a constraint for every parameter, and fit, partial_fit and fit_transform refuse
    # a bad type or value (with InvalidParameterError, which BadParameterError is) before using the data.
    from sklearn.utils.estimator_checks import check_param_validation

    check_param_validation(type(transform).__name__, transform)


@pytest.mark.parametrize(
    ("spec", "kind", "params"),
    [
        ("whitening", Whitening, {"n_components": None, "gamma": 1.0}),
        ("Whitening-256", Whitening, {"n_components": 256}),
        (" rotation ", Whitening, {"gamma": 0.0, "n_components": None}),
        ("center", Center, {}),
        ("normalize", Normalize, {}),
        ("abtt", AllButTheTop, {"n_remove": None}),
        ("abtt-3", AllButTheTop, {"n_remove": 3}),
    ],
)
def test_make_transform(spec: str, kind: type, params: dict[str, object]) -> None:
    t = make_transform(spec)
    assert t is not None and type(t) is kind
    for key, value in params.items():
        assert t.get_params()[key] == value


def test_make_transform_none_and_bad() -> None:
    assert make_transform("none") is None
    assert make_transform("raw") is None
    for bad in ("whitening-0", "whitening-x", "whitening-", "abtt-3-4", "center-2", "pca", "", "flow-2"):
        with pytest.raises(BadInputError, match="valid forms: none"):
            make_transform(bad)


def test_make_transform_flow() -> None:
    pytest.importorskip("whitevec.transforms.flow")
    from whitevec.transforms import Flow

    assert type(make_transform("flow")) is Flow
    assert make_transform("flow").get_params()["mixing_init"] == "pca"


def test_flow_random_selects_the_random_start() -> None:
    # The README's and results pages' flow figures were measured from a random start: a spec must select it.
    pytest.importorskip("whitevec.transforms.flow")
    from whitevec.transforms import AFFINE_SPEC_FORMS, Flow

    flow = make_transform(" Flow-Random ")
    assert type(flow) is Flow and flow.get_params()["mixing_init"] == "random"
    assert "flow-random" not in AFFINE_SPEC_FORMS
    with pytest.raises(BadInputError, match=r"valid forms: .*flow-random"):
        make_transform("flow-pca")
