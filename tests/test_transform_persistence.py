"""Save/load of every transform: exact round trip, continued streaming, refusal of damaged files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError
from whitevec.transforms import AllButTheTop, Center, Normalize, Transform, Whitening


def rewrite_header(path: Path, **changes: object) -> None:
    """Rewrite the whitevec header of a saved transform, arrays untouched (the checksum is not updated)."""
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    with safe_open(str(path), "np") as handle:
        header = json.loads(handle.metadata()["whitevec"])
    header.update(changes)
    save_file(load_file(str(path)), str(path), metadata={"whitevec": json.dumps(header)})


def vectors(n: int = 200, d: int = 10, seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 1.0


TRANSFORMS = [
    Whitening(),
    Whitening(n_components=4, beta=0.5, gamma=0.7, eps=1e-5),
    Whitening(gamma=0.0),
    Center(),
    Normalize(),
    AllButTheTop(),
    AllButTheTop(n_remove=3),
    AllButTheTop(n_remove=np.int64(2)),  # numpy integers are valid parameters and save as JSON integers
]


@pytest.mark.parametrize("transform", TRANSFORMS, ids=lambda t: repr(t))
def test_round_trip_is_exact(transform: Transform, tmp_path: Path) -> None:
    X = vectors()
    transform.fit(X)
    path = transform.save(tmp_path / "t.safetensors")
    loaded = Transform.load(path)
    assert type(loaded) is type(transform)
    assert loaded.get_params() == transform.get_params()
    np.testing.assert_array_equal(loaded.transform(X), transform.transform(X))
    assert type(transform).load(path).get_params() == transform.get_params()


def test_partial_fit_continues_after_load(tmp_path: Path) -> None:
    X = vectors(n=600)
    w = Whitening().partial_fit(X[:250])
    w.save(tmp_path / "w.safetensors")
    resumed = Whitening.load(tmp_path / "w.safetensors").partial_fit(X[250:])
    assert resumed.n_samples_seen_ == 600
    np.testing.assert_allclose(resumed.covariance_, np.cov(X.T), rtol=0, atol=1e-8)
    np.testing.assert_allclose(resumed.mean_, X.mean(axis=0), rtol=0, atol=1e-8)


def test_single_row_partial_state_saves(tmp_path: Path) -> None:
    X = vectors()
    Whitening().partial_fit(X[:1]).save(tmp_path / "w.safetensors")
    w = Whitening.load(tmp_path / "w.safetensors").partial_fit(X[1:])
    np.testing.assert_allclose(w.covariance_, np.cov(X.T), rtol=0, atol=1e-8)


def test_loaded_rank_deficient_does_not_warn_again(tmp_path: Path, recwarn: pytest.WarningsRecorder) -> None:
    X = vectors(n=4)
    with pytest.warns(UserWarning):
        Whitening().fit(X).save(tmp_path / "w.safetensors")
    recwarn.clear()
    Whitening.load(tmp_path / "w.safetensors").transform(X)
    assert not recwarn.list


def test_truncated_file_is_refused(tmp_path: Path) -> None:
    path = Whitening().fit(vectors()).save(tmp_path / "w.safetensors")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 100])
    with pytest.raises(CorruptFileError, match="not a readable"):
        Transform.load(path)


def test_edited_tensor_byte_is_refused(tmp_path: Path) -> None:
    path = Whitening().fit(vectors()).save(tmp_path / "w.safetensors")
    data = bytearray(path.read_bytes())
    data[-17] ^= 0x01  # inside the last tensor's bytes
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match="checksum"):
        Transform.load(path)


def test_edited_header_is_refused(tmp_path: Path) -> None:
    path = Whitening().fit(vectors()).save(tmp_path / "w.safetensors")
    rewrite_header(path, params={**Whitening().get_params(), "beta": 0.5})
    with pytest.raises(CorruptFileError, match="checksum"):
        Transform.load(path)


def test_format_1_is_refused(tmp_path: Path) -> None:
    path = Whitening().fit(vectors()).save(tmp_path / "w.safetensors")
    rewrite_header(path, format_version=1, **{"class": "Whitening"})
    with pytest.raises(CorruptFileError, match=r"format 1; .* reads format 2: fit the transform again"):
        Transform.load(path)


def test_registry_key_is_qualified(tmp_path: Path) -> None:
    users_whitening = type("Whitening", (Center,), {})  # a user's class that shares a built-in's name
    X = vectors()
    builtin = Transform.load(Whitening().fit(X).save(tmp_path / "builtin.safetensors"))
    assert type(builtin) is Whitening
    mine = Transform.load(users_whitening().fit(X).save(tmp_path / "mine.safetensors"))
    assert type(mine) is users_whitening
    from safetensors import safe_open

    with safe_open(str(tmp_path / "builtin.safetensors"), "np") as handle:
        assert json.loads(handle.metadata()["whitevec"])["class"] == "whitevec.transforms.whitening:Whitening"


def test_wrong_class_and_missing_file(tmp_path: Path) -> None:
    path = Center().fit(vectors()).save(tmp_path / "c.safetensors")
    with pytest.raises(BadInputError, match="not a Whitening"):
        Whitening.load(path)
    with pytest.raises(DataNotFoundError):
        Transform.load(tmp_path / "missing.safetensors")
    other = tmp_path / "plain.safetensors"
    from safetensors.numpy import save_file

    save_file({"x": np.zeros(3)}, str(other))
    with pytest.raises(CorruptFileError, match="no whitevec header"):
        Transform.load(other)


def test_declared_state_is_checked_on_load() -> None:
    arrays, values = AllButTheTop(n_remove=3).fit(vectors())._get_state()
    with pytest.raises(CorruptFileError, match="lacks the value 'n_remove_'"):
        AllButTheTop()._set_state(arrays, {"n_features_in_": 10})
    with pytest.raises(CorruptFileError, match=r"n_remove_ = 3\.0, not of type int"):
        AllButTheTop()._set_state(arrays, {**values, "n_remove_": 3.0})
    with pytest.raises(CorruptFileError, match=r"'directions_' has shape \(3, 10\), not \(2, 10\)"):
        AllButTheTop()._set_state(arrays, {**values, "n_remove_": 2})
    with pytest.raises(CorruptFileError, match="lacks the array 'mean_'"):
        AllButTheTop()._set_state({"directions_": arrays["directions_"]}, values)
    with pytest.raises(CorruptFileError, match="undeclared arrays extra_"):
        AllButTheTop()._set_state({**arrays, "extra_": np.zeros(2)}, values)
    with pytest.raises(CorruptFileError, match="does not fit its own parameters"):
        AllButTheTop(n_remove=11)._set_state(arrays, values)


def test_unfitted_save_refused(tmp_path: Path) -> None:
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        Whitening().save(tmp_path / "w.safetensors")
