"""Rescoring from disk: the vectors a ``+rescore`` index re-ranks its candidates with, kept in ``rescore.npy``.

The codes in memory (1-bit, RaBitQ, SQ, PQ) find ``K * k`` candidates; their vectors are read from the file, not
loaded, and the float query's score against each (inner product, or squared L2 for ``l2``) orders them; the best
``k`` are returned. Memory holds the codes; the page cache holds whichever rows queries touch.

The rows are read with ``pread`` on a descriptor of the pinned file, not through a memory map: a file truncated
or unreadable under a running process then fails that read with :class:`IndexDamagedError` naming the file,
where a mapped page beyond the end would end the process with SIGBUS. Each read also checks the descriptor's
size against the loaded one (``fstat``), so a shrunken file is refused even where the rows asked still exist.
A file deleted or replaced by path is no fault: the descriptor keeps the pinned version readable.

The file is a ``.npy`` array with one record per id (whitevec's ids are row numbers 0, 1, 2, ...), in one of
two forms:

- ``fp16``: the vector in half precision (``2 d`` bytes);
- ``int8``: ``round(x / s)`` in int8 with ``s = max |x_i| / 127`` kept as a float32 per vector (``d + 4``).

The row of a deleted id is zeroed when its version is written (the codes no longer find it). A published file
never changes: an add writes the next version's file (the rows kept, then the new ones) in the new folder.
"""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path
from typing import BinaryIO

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError, IndexDamagedError
from whitevec.utils.io import writing_to

RESCORE_FILE = "rescore.npy"
_COPY_ROWS = 1 << 16  # rows copied at a time when a version's file is written
_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def record_dtype(form: str, dim: int) -> np.dtype:
    """One record of the file: ``vector`` (fp16), or ``scale`` and ``codes`` (int8)."""
    if form == "fp16":
        return np.dtype([("vector", "<f2", (dim,))])
    return np.dtype([("scale", "<f4"), ("codes", "i1", (dim,))])


def encode_rows(vectors: np.ndarray, form: str) -> np.ndarray:
    """``vectors`` (n, d) as records of ``form``; BadInputError for values half precision cannot hold."""
    x = np.asarray(vectors, dtype=np.float32)
    out = np.zeros(x.shape[0], dtype=record_dtype(form, x.shape[1]))
    if form == "fp16":
        half = x.astype(np.float16)
        if not np.isfinite(half).all():
            raise BadInputError(
                "a vector holds values beyond half precision's range (65504); keep rescoring vectors as int8 "
                "(+rescore:int8), which scales each vector"
            )
        out["vector"] = half
        return out
    peak = np.abs(x).max(axis=1) if x.shape[1] else np.zeros(x.shape[0], np.float32)
    scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    out["scale"] = scale
    out["codes"] = np.clip(np.rint(x / scale[:, None]), -127, 127).astype(np.int8)
    return out


_SEEK_LOCK = threading.Lock()


def _pread_by_seek(fd: int, length: int, offset: int) -> bytes:
    """``os.pread`` where the system has none (Windows): a seek and a read, one thread at a time."""
    with _SEEK_LOCK:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, length)


_pread = getattr(os, "pread", _pread_by_seek)


class RecordFile:
    """The saved records of one version: ``rows`` records of ``dtype`` from byte ``offset`` of a descriptor of
    their own (closed when the last :class:`RescoreVectors` sharing it is gone), read with ``pread``."""

    def __init__(self, fd: int, source: str, offset: int, rows: int, dtype: np.dtype) -> None:
        self.fd = fd
        self.source = source
        self.offset = offset
        self.rows = rows
        self.dtype = dtype
        self.size = offset + rows * dtype.itemsize
        weakref.finalize(self, os.close, fd)

    def _damaged(self, what: str) -> IndexDamagedError:
        return IndexDamagedError(
            f"{self.source} {what} since the index was loaded (truncated or damaged on storage); this index "
            "cannot rescore until it is repaired or rebuilt and loaded again"
        )

    def check_size(self) -> None:
        """IndexDamagedError when the file is no longer the size it had when loaded."""
        try:
            size = os.fstat(self.fd).st_size
        except OSError as exc:
            raise self._damaged(f"cannot be examined ({exc.strerror})") from None
        if size != self.size:
            raise self._damaged(f"is {size} bytes, {self.size} when loaded,")

    def read(self, ids: np.ndarray) -> np.ndarray:
        """The records of ``ids`` (< rows; ascending, so the reads move forward through the file): one ``pread``
        each, the bytes joined once, checked to be whole. A system call per record costs about 0.9 us more than a
        mapped row (docs/notes/one-bit-codes.md); candidates are rarely neighbours, so merging runs saved nothing,
        and a list of ``pread`` calls costs less than ``preadv`` into memoryview slices."""
        self.check_size()
        width, fd = self.dtype.itemsize, self.fd
        offsets = (self.offset + ids.astype(np.int64) * width).tolist()
        try:
            parts = [_pread(fd, width, at) for at in offsets]
        except OSError as exc:
            raise self._damaged(f"cannot be read ({exc.strerror})") from None
        data = b"".join(parts)
        if len(data) != width * len(parts):
            short = next(i for i, part in enumerate(parts) if len(part) != width)
            raise self._damaged(f"gave {len(parts[short])} of {width} bytes at offset {offsets[short]}")
        return np.frombuffer(data, dtype=self.dtype)

    def read_range(self, start: int, stop: int) -> np.ndarray:
        """Records ``start`` to ``stop`` (excluded) in one read, checked as :meth:`read` checks."""
        self.check_size()
        length = (stop - start) * self.dtype.itemsize
        at = self.offset + start * self.dtype.itemsize
        try:
            data = _pread(self.fd, length, at)
        except OSError as exc:
            raise self._damaged(f"cannot be read ({exc.strerror})") from None
        if len(data) != length:
            raise self._damaged(f"gave {len(data)} of {length} bytes at offset {at}")
        return np.frombuffer(data, dtype=self.dtype)


def decode_rows(records: np.ndarray, form: str) -> np.ndarray:
    """Records back to float32 vectors (n, d)."""
    if form == "fp16":
        return np.asarray(records["vector"], dtype=np.float32)
    return records["codes"].astype(np.float32) * records["scale"][:, None]


class RescoreVectors:
    """The rescoring records of one index version: the file it was opened from (read on demand) and what was
    added or deleted since, until :meth:`save` writes the next version's file."""

    def __init__(self, form: str, dim: int) -> None:
        self.form = form
        self.dim = int(dim)
        self.disk: RecordFile | None = None  # the saved records, read from their file on demand (public: a
        # benchmark swaps in another reader of the same records to compare read paths)
        self._source: str = RESCORE_FILE
        self._added_ids = np.zeros(0, dtype=np.int64)  # sorted
        self._added = np.zeros(0, dtype=record_dtype(form, dim))
        self._deleted = np.zeros(0, dtype=np.int64)

    # --- opening --------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, handle: BinaryIO, source: Path, form: str, dim: int) -> RescoreVectors:
        """The records of the file open as ``handle`` (a pinned version's; ``source`` names it in errors), read
        later through a duplicate of its descriptor; CorruptFileError for a file of another form or dimension,
        or truncated."""
        vectors = cls(form, dim)
        vectors._source = str(source)
        expected = record_dtype(form, dim)
        try:
            handle.seek(0)
            version = np.lib.format.read_magic(handle)
            read_header = _HEADER_READERS.get(version)
            if read_header is None:
                raise ValueError(f"npy format {version}")
            shape, fortran, dtype = read_header(handle)
        except (ValueError, OSError) as exc:
            raise CorruptFileError(f"{source} is not a readable rescoring file ({exc}); rebuild it") from None
        if dtype != expected or len(shape) != 1 or fortran:
            raise CorruptFileError(
                f"{source} holds {dtype} records of shape {shape}; this index keeps {form} vectors of d={dim}. "
                "Rebuild the index."
            )
        offset = handle.tell()
        size = os.fstat(handle.fileno()).st_size
        if size != offset + shape[0] * expected.itemsize:
            raise CorruptFileError(
                f"{source} is {size} bytes; its {shape[0]} records need {offset + shape[0] * expected.itemsize} "
                "(truncated or damaged); rebuild the index"
            )
        if shape[0]:
            # A descriptor of its own: the snapshot closes the handle once the index is loaded.
            vectors.disk = RecordFile(os.dup(handle.fileno()), str(source), offset, int(shape[0]), expected)
        return vectors

    @classmethod
    def open_path(cls, path: Path, form: str, dim: int) -> RescoreVectors:
        """:meth:`open` by path (a version this process has just written)."""
        with open(path, "rb") as handle:
            return cls.open(handle, path, form, dim)

    @property
    def rows(self) -> int:
        """Records a saved file of this state holds: one per id up to the largest."""
        disk = 0 if self.disk is None else self.disk.rows
        return max(disk, int(self._added_ids[-1]) + 1 if self._added_ids.size else 0)

    # --- changes --------------------------------------------------------------------------------------------
    def staged(self) -> RescoreVectors:
        """A copy to add to and delete from for the next version (the file stays shared, read-only)."""
        other = RescoreVectors(self.form, self.dim)
        other.disk, other._source = self.disk, self._source
        other._added_ids, other._added, other._deleted = self._added_ids, self._added, self._deleted
        return other

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Keep the rescoring records of ``vectors`` under ``ids`` (>= 0; an id given again is replaced)."""
        ids64 = np.asarray(ids, dtype=np.int64)
        if ids64.size and int(ids64.min()) < 0:
            raise BadInputError("rescoring keeps one record per id (a row number), so ids must be >= 0")
        records = encode_rows(vectors, self.form)
        keep = ~np.isin(self._added_ids, ids64)
        all_ids = np.concatenate([self._added_ids[keep], ids64])
        order = np.argsort(all_ids, kind="stable")
        self._added_ids = all_ids[order]
        self._added = np.concatenate([self._added[keep], records])[order]
        self._deleted = self._deleted[~np.isin(self._deleted, ids64)]

    def delete(self, ids: np.ndarray) -> None:
        """Forget ``ids``: their records are zeroed in the next version's file."""
        ids64 = np.asarray(ids, dtype=np.int64)
        keep = ~np.isin(self._added_ids, ids64)
        self._added_ids, self._added = self._added_ids[keep], self._added[keep]
        self._deleted = np.union1d(self._deleted, ids64)

    def save(self, path: Path) -> None:
        """Write the records as the ``.npy`` file ``path`` (inside a version folder being written): the saved
        ones copied a block at a time, the added ones in their rows, the deleted ones zeroed."""
        dtype = record_dtype(self.form, self.dim)
        with writing_to(path):
            out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(self.rows,))
            saved = 0 if self.disk is None else self.disk.rows
            for start in range(0, saved, _COPY_ROWS):
                stop = min(start + _COPY_ROWS, saved)
                out[start:stop] = self.disk.read_range(start, stop)  # type: ignore[union-attr]
            if self._added_ids.size:
                out[self._added_ids] = self._added
            gone = self._deleted[self._deleted < self.rows]
            if gone.size:
                out[gone] = np.zeros(gone.size, dtype=dtype)
            out.flush()
            del out

    # --- rescoring ------------------------------------------------------------------------------------------
    def vectors(self, ids: np.ndarray) -> np.ndarray:
        """The float32 vectors of ``ids`` (distinct, ascending), from the file or from what was added since."""
        out = np.zeros((ids.size, self.dim), dtype=np.float32)
        if ids.size and int(ids[-1]) >= self.rows:
            raise CorruptFileError(
                f"{self._source} holds {self.rows} rescoring records; the index returned id {int(ids[-1])}. "
                "Rebuild the index."
            )
        added = np.zeros(ids.size, dtype=bool)
        where = np.searchsorted(self._added_ids, ids)
        if self._added_ids.size:
            added = self._added_ids[np.minimum(where, self._added_ids.size - 1)] == ids
        if added.any():
            out[added] = decode_rows(self._added[where[added]], self.form)
        on_disk = ~added
        if on_disk.any():
            assert self.disk is not None, "an id neither added nor saved"
            out[on_disk] = decode_rows(self.disk.read(ids[on_disk]), self.form)
        return out

    def rescore(
        self, queries: np.ndarray, candidates: np.ndarray, k: int, metric: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """The best ``k`` of each query's ``candidates`` (ids, -1 for none) by the float query against the
        records: inner product (``cosine``, ``ip``; higher first) or squared L2 (``l2``; lower first). Equal
        scores keep the codes' order."""
        valid = candidates >= 0
        unique, inverse = np.unique(candidates[valid], return_inverse=True)
        stored = self.vectors(unique)
        query_of = np.nonzero(valid)[0]
        q = np.asarray(queries, dtype=np.float32)[query_of]
        v = stored[inverse]
        products = np.einsum("ij,ij->i", q, v)
        worst = np.inf if metric == "l2" else -np.inf
        scores = np.full(candidates.shape, worst, dtype=np.float32)
        if metric == "l2":
            scores[valid] = np.einsum("ij,ij->i", q, q) - 2 * products + np.einsum("ij,ij->i", v, v)
            order = np.argsort(scores, axis=1, kind="stable")[:, :k]
        else:
            scores[valid] = products
            order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(scores, order, axis=1), np.take_along_axis(candidates, order, axis=1)
