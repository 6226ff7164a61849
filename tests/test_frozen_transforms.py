"""Saved transforms applied without scikit-learn (transforms/frozen.py): a saved Whitening or Center gives bitwise
the class's vectors through its frozen form, any other file is loaded by its class, and applying one loads no
scikit-learn (what a search of a whitened index does to its queries)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from whitevec.errors import CorruptFileError
from whitevec.transforms import AllButTheTop, Center, Transform, Whitening
from whitevec.transforms.frozen import FrozenCenter, FrozenWhitening, load_to_apply
from whitevec.transforms.saved import digest
from whitevec.transforms.validation import check_vectors

SRC = Path(__file__).resolve().parents[1] / "src"
SAVED = Path(__file__).parent / "fixtures" / "saved" / "transforms"


def _rows(n: int, d: int = 12, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, d)) * rng.uniform(0.1, 3.0, d) + 2.0).astype(np.float32)


FROZEN = [Whitening(), Whitening(n_components=5, gamma=0.5), Whitening(beta=0.0), Whitening(precision="float32")]


@pytest.mark.parametrize("transform", [*FROZEN, Center()], ids=repr)
def test_the_frozen_form_gives_the_class_vectors_bitwise(transform: Transform, tmp_path: Path) -> None:
    path = transform.fit(_rows(200)).save(tmp_path / "t.safetensors")
    frozen = load_to_apply(path.read_bytes(), str(path))
    assert isinstance(frozen, FrozenCenter if isinstance(transform, Center) else FrozenWhitening)
    for queries in (_rows(9, seed=1), _rows(3, seed=2).astype(np.float64)):
        assert np.array_equal(frozen.transform(queries), Transform.load(path).transform(queries))


def _rewritten(path: Path, change: dict[str, object]) -> bytes:
    """The saved file with ``change`` made to its parameters and its checksum made to match (a file the checksum
    passes, so only the class's own checks can refuse it)."""
    from safetensors.numpy import load_file, save_file

    from whitevec.transforms.saved import read_saved, safetensors_metadata

    data = path.read_bytes()
    header = json.loads(safetensors_metadata(data)["whitevec"])
    header["params"].update(change)
    header["sha256"] = digest({k: v for k, v in header.items() if k != "sha256"}, read_saved(data).arrays)
    save_file(load_file(str(path)), str(path), metadata={"whitevec": json.dumps(header)})
    return path.read_bytes()


def test_a_file_without_a_frozen_form_is_loaded_by_its_class(tmp_path: Path) -> None:
    """A Whitening never decomposed (partial_fit alone), another class, or parameters the class refuses: the
    class's own load decides, with its own message."""
    partial = Whitening().partial_fit(_rows(50)).save(tmp_path / "partial.safetensors")
    assert type(load_to_apply(partial.read_bytes())) is Whitening
    abtt = AllButTheTop().fit(_rows(50)).save(tmp_path / "abtt.safetensors")
    assert type(load_to_apply(abtt.read_bytes())) is AllButTheTop
    wide = Whitening().fit(_rows(50)).save(tmp_path / "wide.safetensors")
    with pytest.raises(CorruptFileError, match="does not fit its own parameters"):
        load_to_apply(_rewritten(wide, {"n_components": 13}), "wide")  # 13 of 12 dimensions
    damaged = partial.read_bytes()[:-3]
    with pytest.raises(CorruptFileError, match="is not a readable whitevec transform"):
        load_to_apply(damaged, "damaged")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 3), (0, 3), (1, 1)])
def test_plain_float_rows_convert_as_check_array_converts_them(shape: tuple[int, int], dtype: type) -> None:
    """check_vectors converts a plain 2-D float array with numpy alone: the same array as scikit-learn's."""
    from sklearn.utils.validation import check_array

    rows = np.asfortranarray(np.arange(np.prod(shape), dtype=dtype).reshape(shape))
    for want in (np.float32, np.float64):
        ours = check_vectors(rows, dtype=want, finite=False)
        theirs = check_array(rows, dtype=want, order="C", ensure_all_finite=False, ensure_min_samples=0)
        assert ours.dtype == theirs.dtype and ours.flags.c_contiguous and np.array_equal(ours, theirs)


def test_applying_a_saved_whitening_loads_no_sklearn() -> None:
    """The saved-files fixture (whitening-4), applied in a fresh interpreter: its expected vectors, bitwise, and
    neither scikit-learn nor torch loaded."""
    code = (
        "import sys, numpy as np; from whitevec.transforms.frozen import load_to_apply; "
        f"saved = {str(SAVED)!r}; "
        "out = load_to_apply(open(saved + '/whitening-4.safetensors', 'rb').read()).transform(np.load(saved + "
        "'/input.npy')); assert np.array_equal(out, np.load(saved + '/whitening-4.expected.npy')); "
        "print(sorted(m for m in ('sklearn', 'scipy', 'torch') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
