"""Direct tests of the rescoring records (index/rescore.py): tiny arrays, no model, no faiss.

What the rescoring tests of test_one_bit.py and the damage tests of test_rescore_faults.py leave open: the int8
codes at the edges of their range, records of float32 vectors whatever the caller's dtype, ids kept as integers
through empty writes, a saved file copied once, descriptors closed with their records.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pytest

from whitevec.errors import CorruptFileError
from whitevec.index.encodings import rescore
from whitevec.index.encodings.rescore import RescoreVectors, decode_rows, encode_rows


def test_int8_codes_stay_within_127_with_their_sign_at_the_edges() -> None:
    # A peak so small that its scale (peak / 127) rounds to the smallest subnormal float32: x / scale is then
    # +-178, and the clip keeps the codes at +-127 with their sign (int8 would wrap 178 to -78).
    smallest = np.nextafter(np.float32(0), np.float32(1))
    tiny = np.float32(178) * smallest
    records = encode_rows(np.array([[tiny, -tiny, 0.0]], dtype=np.float32), "int8")
    assert records["scale"][0] == smallest  # what the case needs: a platform that keeps subnormals
    np.testing.assert_array_equal(records["codes"][0], [127, -127, 0])
    np.testing.assert_array_equal(decode_rows(records, "int8")[0], [127 * smallest, -127 * smallest, 0.0])
    # A zero vector keeps scale 1 and zero codes; vectors of no dimensions, one record each with scale 1.
    zero = encode_rows(np.zeros((1, 3), dtype=np.float32), "int8")
    assert zero.tobytes() == np.array([(1.0, [0, 0, 0])], dtype=zero.dtype).tobytes()
    empty = encode_rows(np.zeros((2, 0), dtype=np.float32), "int8")
    assert empty["scale"].tolist() == [1.0, 1.0] and empty["codes"].shape == (2, 0)


def test_records_are_of_the_float32_vectors_whatever_the_dtype_given() -> None:
    # 1 + 2^-11 + 2^-40 is 1 + 2^-11 in float32, a tie that half precision rounds to even (1.0); straight from
    # float64 it would round up to 1 + 2^-10: the file keeps what the index keeps, the float32 vector.
    x64 = np.array([[1 + 2**-11 + 2**-40, 0.5]], dtype=np.float64)
    for form in ("fp16", "int8"):
        assert encode_rows(x64, form).tobytes() == encode_rows(x64.astype(np.float32), form).tobytes()
    np.testing.assert_array_equal(decode_rows(encode_rows(x64, "fp16"), "fp16"), [[1.0, 0.5]])


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_rescoring_scores_are_float32_of_the_float32_query(metric: str) -> None:
    # A float64 query scores as its float32 values do, and the scores are float32 as every search path answers.
    rng = np.random.default_rng(21)
    records = RescoreVectors("fp16", 16)
    records.add(np.arange(30), rng.standard_normal((30, 16)).astype(np.float32))
    candidates = np.stack([rng.permutation(30)[:12] for _ in range(4)])
    candidates[1, 9:] = -1
    query = rng.standard_normal((4, 16))
    scores, ids = records.rescore(query, candidates, 5, metric)
    want_scores, want_ids = records.rescore(query.astype(np.float32), candidates, 5, metric)
    assert scores.dtype == np.float32
    np.testing.assert_array_equal(scores, want_scores)
    np.testing.assert_array_equal(ids, want_ids)


def test_ids_stay_integers_through_empty_adds_and_deletes(tmp_path: Path) -> None:
    # An empty list of ids (a float64 array to numpy) must not turn the kept ids into floats: the save indexes
    # the file's rows with them.
    x = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)
    records = RescoreVectors("fp16", 2)
    records.add(np.array([]), np.zeros((0, 2), dtype=np.float32))
    records.add(np.arange(3), x)
    records.delete(np.array([]))
    records.delete(np.array([1]))
    records.save(tmp_path / "r.npy")
    again = RescoreVectors.open_path(tmp_path / "r.npy", "fp16", 2)
    np.testing.assert_array_equal(again.vectors(np.arange(3)), [[1, 2], [0, 0], [5, 6]])


def test_records_never_saved_are_named_as_the_rescoring_file() -> None:
    records = RescoreVectors("fp16", 2)
    records.add(np.array([0]), np.array([[1.0, 0.0]], dtype=np.float32))
    with pytest.raises(CorruptFileError) as caught:
        records.vectors(np.array([0, 3]))
    assert (
        str(caught.value) == "rescore.npy holds 1 rescoring records; the index returned id 3. Rebuild the index."
    )


def test_a_save_reads_each_saved_record_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Blocks of 2 records over a file of 5: three reads, 5 records in all, whatever the block size.
    monkeypatch.setattr(rescore, "_COPY_ROWS", 2)
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    first = RescoreVectors("fp16", 2)
    first.add(np.arange(5), x)
    first.save(tmp_path / "a.npy")
    opened = RescoreVectors.open_path(tmp_path / "a.npy", "fp16", 2)
    read: list[int] = []
    pread = rescore._pread

    def counted(fd: int, length: int, offset: int) -> bytes:
        read.append(length)
        return pread(fd, length, offset)

    monkeypatch.setattr(rescore, "_pread", counted)
    opened.staged().save(tmp_path / "b.npy")
    assert sum(read) == 5 * opened.disk.dtype.itemsize  # type: ignore[union-attr]
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy")["vector"], x)


def test_records_let_go_close_their_descriptor(tmp_path: Path) -> None:
    # A server reloads versions for as long as it runs: each version's descriptor is closed with its records.
    records = RescoreVectors("fp16", 2)
    records.add(np.arange(2), np.array([[1, 0], [0, 1]], dtype=np.float32))
    records.save(tmp_path / "r.npy")
    opened = RescoreVectors.open_path(tmp_path / "r.npy", "fp16", 2)
    assert opened.disk is not None
    fd = opened.disk.fd
    os.fstat(fd)  # open while the records live
    del opened
    gc.collect()
    with pytest.raises(OSError):
        os.fstat(fd)
