"""File-level vector jobs behind ``whitevec encode`` and ``whitevec fit``: texts or .npy in, files out."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError
from whitevec.preflight import check_output
from whitevec.transforms import Transform, make_transform
from whitevec.utils.io import atomic_path

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder


def load_vectors(path: str | os.PathLike[str]) -> np.ndarray:
    """Read a 2-D .npy matrix (never pickled objects)."""
    source = Path(path)
    if not source.is_file():
        raise DataNotFoundError(f"no vector file at {source}")
    try:
        array = np.load(source, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise CorruptFileError(f"{source} is not a readable .npy matrix ({exc})") from exc
    if array.ndim != 2:
        raise BadInputError(f"{source} holds an array of shape {array.shape}; a 2-D (n, dim) matrix is needed")
    return array


def save_vectors(path: str | os.PathLike[str], vectors: np.ndarray) -> Path:
    """Write a float32 .npy matrix atomically."""
    target = Path(path)
    with atomic_path(target, suffix=".npy") as tmp, open(tmp, "wb") as handle:
        np.save(handle, np.ascontiguousarray(vectors, dtype=np.float32))
    return target


def encode_to_file(
    encoder: AnyEncoder,
    texts: list[str],
    out: str | os.PathLike[str],
    transform_path: str | os.PathLike[str] | None = None,
    show_progress: bool | None = None,
) -> tuple[int, int]:
    """Encode ``texts`` (then apply a saved transform, if given) and write them to ``out``; returns the shape.

    The transform is read and ``out``'s folder proved writable (with room for the matrix) before any encoding.
    """
    transform = Transform.load(transform_path) if transform_path is not None else None
    check_output(out, "output file", need_bytes=len(texts) * encoder.dim * 4)
    vectors = encoder.encode(texts, show_progress=show_progress)
    if transform is not None:
        vectors = np.asarray(transform.transform(vectors), dtype=np.float32)
    save_vectors(out, vectors)
    return int(vectors.shape[0]), int(vectors.shape[1])


def fit_transform_file(
    spec: str,
    out: str | os.PathLike[str],
    *,
    vectors: str | os.PathLike[str] | None = None,
    texts: str | os.PathLike[str] | None = None,
    encoder: AnyEncoder | None = None,
    show_progress: bool | None = None,
) -> tuple[str, int]:
    """Fit the transform ``spec`` on a .npy matrix or on texts encoded by ``encoder``; save it to ``out``.

    The spec is parsed and ``out``'s folder proved writable before any vectors are read or encoded.
    """
    from whitevec.datasets import read_texts_file

    transform = make_transform(spec)
    if transform is None:
        raise BadInputError(f"transform {spec!r} has nothing to fit; choose e.g. whitening or whitening-256")
    check_output(out, "transform file")
    if vectors is not None:
        matrix = load_vectors(vectors)
    elif texts is not None and encoder is not None:
        matrix = encoder.encode(read_texts_file(texts), show_progress=show_progress)
    else:
        raise BadInputError("give a .npy matrix, or texts and an encoder, to fit on")
    transform.fit(matrix)
    transform.save(out)
    return spec, int(matrix.shape[0])
