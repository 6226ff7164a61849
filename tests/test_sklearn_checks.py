"""Every transform against scikit-learn's own estimator checks, with no check skipped.

Deliberate departures are declared in each estimator's ``__sklearn_tags__`` (float32 output for every
transform: ``preserves_dtype = ["float32"]``; Normalize is stateless: ``requires_fit = False``), which the checks
read. One check is expected to fail, with its reason in ``_expected_failures``: Whitening's sample-weight
equivalence on the check's rank-deficient data. The Flow runs with a one-level, one-step flow of width 8 and
batches of 2 so that its fits on the checks' small arrays take milliseconds; its default shape is exercised in
tests/test_flow.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from whitevec.errors import BadInputError
from whitevec.transforms import AllButTheTop, Center, Flow, Normalize, Whitening
from whitevec.transforms.base import BadParameterError

ESTIMATORS = [
    Center(),
    Normalize(),
    AllButTheTop(),
    Whitening(),
    Whitening(gamma=0.0, precision="float32"),
    Flow(levels=1, depth=1, width=8, batch_size=2, validation_fraction=0.0, max_steps=20, show_progress=False),
]


def _expected_failures(estimator: Any) -> dict[str, str]:
    # The one departure no tag can declare. The check fits 15 rows of 30 dimensions (total weight ~27), so the
    # covariance has ~22 zero eigenvalues; their eigenvectors are any basis of that null space, and the two fits
    # (weights, repeated rows) differ by rounding, so eigh returns different bases there and the floored
    # directions' outputs differ. The weighted moments themselves equal the repeated rows' to 1e-8
    # (tests/test_whitening.py::test_weighted_moments_are_exact_and_merge).
    if isinstance(estimator, Whitening):
        return {"check_sample_weight_equivalence_on_dense_data": "rank-deficient covariance: null-space basis"}
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
def test_sklearn_estimator_check(estimator: Any, check: Any) -> None:
    check(estimator)


def test_float32_output_is_declared_in_the_tags() -> None:
    for estimator in ESTIMATORS:
        assert estimator.__sklearn_tags__().transformer_tags.preserves_dtype == ["float32"]
    assert Normalize().__sklearn_tags__().requires_fit is False
    assert Whitening().__sklearn_tags__().requires_fit is True


class _Unread:
    """An array-like that knows its shape and records whether anyone read its values."""

    def __init__(self, data: np.ndarray) -> None:
        self._data = data
        self.shape = data.shape
        self.dtype = data.dtype
        self.ndim = data.ndim
        self.read = False

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        self.read = True
        return self._data if dtype is None else self._data.astype(dtype)

    def __len__(self) -> int:
        return len(self._data)


@pytest.mark.parametrize(
    ("estimator", "good", "bad"),
    [
        (Whitening(), {"n_components": None}, {"n_components": 13}),
        (AllButTheTop(), {"n_remove": 2}, {"n_remove": 13}),
        (
            Flow(depth=1, width=4, batch_size=8, validation_fraction=0.0, show_progress=False),
            {"levels": 1},
            {"levels": 5},
        ),
    ],
)
def test_a_parameter_too_large_for_the_data_fails_before_any_value_is_read(
    estimator: Any, good: dict[str, Any], bad: dict[str, Any]
) -> None:
    data = np.random.default_rng(0).standard_normal((40, 12))
    fitted = clone(estimator).set_params(**good).fit(data)
    before = fitted.transform(data[:3])
    spy = _Unread(data)
    with pytest.raises(BadParameterError, match="12"):
        fitted.set_params(**bad).fit(spy)
    assert not spy.read
    # Nothing of the earlier fit was dropped or half replaced.
    np.testing.assert_array_equal(fitted.set_params(**good).transform(data[:3]), before)


def test_partial_fit_checks_the_dimension_before_reading() -> None:
    spy = _Unread(np.ones((5, 12)))
    with pytest.raises(BadParameterError):
        Whitening(n_components=13).partial_fit(spy)
    assert not spy.read


def test_wrong_type_is_a_type_error_and_a_bad_input_error() -> None:
    X = np.ones((4, 3), dtype=object)
    X[0, 0] = {"a": 1}
    with pytest.raises(TypeError) as caught:
        Center().fit(X)
    assert isinstance(caught.value, BadInputError)
