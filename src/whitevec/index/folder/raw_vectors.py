"""The encoder's vectors before the transform, kept beside an index's codes when its build was asked to
(``--keep-raw-vectors``), so that a refit fits the transform on them and rewrites the codes without encoding a
document again (:meth:`whitevec.index.Retriever.refit`).

Each segment keeps its own ``raw_vectors.npy`` (led by the segment's prefix, as its other files), a float32 row
per row of the segment, deleted rows included until a merge drops them; the manifest lists it with its checksum
like every file, and its ``raw_vectors`` record (``{"dtype": "float32"}``) says the index keeps them. Adds write
the raw vectors of their new segment (they encode anyway), merges carry the kept rows' vectors into the merged
segment, deletes change nothing (tombstones).

float32 rather than float16: a refit then fits on exactly the vectors a fresh build of the live documents would
encode, so it is that build (the same transform, the same codes), which a test can hold it to; float16 keeps 11
bits of mantissa, an error of about 5e-4 of each value, which whitening multiplies by up to 1/sqrt of the
smallest eigenvalue it keeps. The cost is 4 bytes per dimension per document (docs/results/staleness.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError
from whitevec.index.folder.layout import RAW_VECTORS_FILE
from whitevec.index.folder.manifest import SELF_CHECKSUM
from whitevec.index.folder.snapshot import IndexSnapshot, changed_message, read_consistent
from whitevec.utils.io import writing_to

RAW_FIELD = "raw_vectors"  # the manifest's record: present exactly when every segment keeps its raw vectors
RAW_DTYPE = np.dtype("<f4")


class _SegmentRows(Protocol):
    """What reading a segment's raw vectors needs of it (:class:`whitevec.index.segments.view.Segment` has it)."""

    prefix: str
    base: int
    rows: int


def keeps_raw_vectors(manifest: dict[str, Any]) -> bool:
    """Whether the index of ``manifest`` keeps its raw vectors."""
    return RAW_FIELD in manifest


def raw_record() -> dict[str, str]:
    """The manifest's ``raw_vectors`` record."""
    return {"dtype": "float32"}


def check_keep_raw_vectors(keep: bool, backend: str) -> None:
    """Refuse ``keep`` on a backend whose vectors live outside the folder: only the segments of a FAISS index are
    refitted from kept vectors (a one-line BadInputError)."""
    if keep and backend.strip().lower() != "faiss":
        raise BadInputError(
            f"--keep-raw-vectors is for --backend faiss (segments in the index folder); a {backend} index keeps "
            "none: leave the flag out"
        )


def write_raw_vectors(folder: Path, vectors: np.ndarray, prefix: str = "") -> str:
    """``vectors`` (n x d, float32) written as the raw vectors of the segment ``prefix`` into ``folder`` (a
    version's temporary folder: the version is swapped in whole); the name written."""
    name = prefix + RAW_VECTORS_FILE
    rows = np.ascontiguousarray(vectors, dtype=RAW_DTYPE)
    with writing_to(folder / name), open(folder / name, "wb") as out:
        np.save(out, rows, allow_pickle=False)
    return name


class _Stream:
    """A file object over a snapshot's checked ``read(n)`` (numpy's reader asks only ``read``)."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self.read = read


def read_raw_vectors(snapshot: IndexSnapshot, prefix: str, rows: int) -> np.ndarray:
    """The raw vectors of the segment ``prefix`` of a pinned version (``rows`` x the encoder's dimension,
    float32), its checksum checked; CorruptFileError (one line) for a damaged file or one of another shape."""
    name = prefix + RAW_VECTORS_FILE
    where = snapshot.folder / name
    dim = int(snapshot.manifest["encoder_dim"])
    try:
        with snapshot.reader(name) as read:
            vectors = np.lib.format.read_array(_Stream(read), allow_pickle=False)  # type: ignore[arg-type]
    except (ValueError, EOFError) as exc:
        raise CorruptFileError(f"{where} is not a readable .npy matrix ({exc}); rebuild the index") from None
    if vectors.dtype != RAW_DTYPE or vectors.shape != (rows, dim):
        raise CorruptFileError(
            f"{where} holds {vectors.dtype} {vectors.shape}; the segment's raw vectors are float32 "
            f"({rows}, {dim}). Rebuild the index."
        )
    return vectors


def live_raw_vectors(
    path: Path, manifest: dict[str, Any], segments: Sequence[_SegmentRows], live: np.ndarray
) -> np.ndarray:
    """The raw vectors of the rows of ``segments`` that ``live`` (a bool per row of the index) keeps, in row
    order, read from the version ``manifest`` of the folder ``path`` (a BadInputError when the folder holds
    another version now: a writer changed it since)."""

    def read(snapshot: IndexSnapshot) -> np.ndarray:
        if snapshot.manifest[SELF_CHECKSUM] != manifest[SELF_CHECKSUM]:
            raise BadInputError(changed_message(path))
        parts = [np.zeros((0, int(manifest["encoder_dim"])), dtype=RAW_DTYPE)]
        for segment in segments:
            kept = np.flatnonzero(live[segment.base : segment.base + segment.rows])
            if kept.size:
                parts.append(read_raw_vectors(snapshot, segment.prefix, segment.rows)[kept])
        return np.concatenate(parts)

    return read_consistent(path, read)


def raw_vectors_state(manifest: dict[str, Any]) -> dict[str, Any]:
    """What ``index info`` shows of them: ``kept``, their ``dtype``, ``bytes`` on disk (every segment's file) and
    ``bytes_per_row`` (deleted rows cost until a merge)."""
    if not keeps_raw_vectors(manifest):
        return {"kept": False, "dtype": None, "bytes": 0, "bytes_per_row": None}
    files = manifest["files"]
    size = sum(int(info["bytes"]) for name, info in files.items() if name.endswith(RAW_VECTORS_FILE))
    rows = int(manifest["count"]) + int(manifest.get("deleted", 0))
    per_row = round(size / rows, 2) if rows else None
    return {"kept": True, "dtype": manifest[RAW_FIELD]["dtype"], "bytes": size, "bytes_per_row": per_row}
