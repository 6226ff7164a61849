"""Vectors the caller gives (an embedding API's, another library's, or the index's own model's made elsewhere):
an array or a file (``.npy``, or a ``.safetensors`` file holding one tensor), checked in one line each before
anything is written or searched: a 2-d array of finite numbers, one row per document or query, of the dimension
the index takes (its encoder's, before the transform: :attr:`whitevec.index.Retriever.input_dim`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from whitevec.encoders.protocol import ExternalEncoder
from whitevec.errors import BadInputError, DataNotFoundError, DimensionMismatchError
from whitevec.preflight import check_texts

if TYPE_CHECKING:
    from whitevec.encoders.protocol import EncoderLike

VECTOR_FILES = (".npy", ".safetensors")  # the files a caller's vectors may come in
_NAMED_ROWS = 5  # rows a message about non-finite values names


def read_vectors(source: Any, what: str = "vectors") -> np.ndarray:
    """``source`` as a float32 (n, d) array: an array as given, or a ``.npy`` / one-tensor ``.safetensors`` file
    read; ``what`` names it in messages. A one-line BadInputError otherwise (see :func:`checked_vectors`)."""
    if isinstance(source, str | os.PathLike):
        source = _read_file(Path(source).expanduser(), what)
    return checked_vectors(source, what)


def checked_vectors(
    array: Any, what: str = "vectors", *, rows: int | None = None, dim: int | None = None, of: str = "documents"
) -> np.ndarray:
    """``array`` as a contiguous float32 (n, d) array, checked: 2-d, numbers, finite (in float32), ``rows`` rows
    (one per one of ``of``) and ``dim`` columns where given; a one-line BadInputError (DimensionMismatchError for
    the dimension) naming ``what`` otherwise."""
    if isinstance(array, np.ndarray):
        x = array
    else:
        try:
            x = np.asarray(array)
        except (ValueError, TypeError):  # ragged lists
            raise BadInputError(
                f"{what} must be a 2-d array of numbers (one row each, all of one length)"
            ) from None
    if x.dtype.kind not in "fiu":
        raise BadInputError(f"{what} must be numbers, got an array of {x.dtype}")
    if x.ndim != 2 or x.shape[1] == 0:
        raise BadInputError(f"{what} must be a 2-d array (one row each), got shape {tuple(x.shape)}")
    with np.errstate(over="ignore"):  # a number past float32's range becomes infinite, refused below
        out = np.ascontiguousarray(x, dtype=np.float32)
    finite = np.isfinite(out).all(axis=1)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        named = ", ".join(map(str, bad[:_NAMED_ROWS])) + (", ..." if bad.size > _NAMED_ROWS else "")
        raise BadInputError(f"{what} hold NaN or infinite values (in float32) in {bad.size} row(s): {named}")
    if rows is not None and out.shape[0] != rows:
        raise BadInputError(f"{out.shape[0]} {what} for {rows} {of}; give one row for each, in their order")
    if dim is not None and out.shape[1] != dim:
        raise DimensionMismatchError(f"{what} are {out.shape[1]}-d; this index takes {dim}-d vectors")
    return out


def check_vectors_file(path: str | os.PathLike[str], what: str = "vectors") -> Path:
    """``path`` checked as a caller's vectors file by its name and presence (before any model loads or file is
    read in full); a one-line BadInputError or DataNotFoundError."""
    file = Path(path).expanduser()
    if file.suffix.lower() not in VECTOR_FILES:
        raise BadInputError(f"{what} file {str(file)!r} must be .npy or .safetensors (one float tensor)")
    if not file.is_file():
        raise DataNotFoundError(f"{what} file {str(file)!r} does not exist")
    return file


def _read_file(path: Path, what: str) -> np.ndarray:
    """The one array of a ``.npy`` file, or the one tensor of a ``.safetensors`` file."""
    file = check_vectors_file(path, what)
    if file.suffix.lower() == ".npy":
        try:
            return np.asarray(np.load(file, allow_pickle=False))
        except (ValueError, EOFError) as exc:  # not an .npy file, or an object array (pickled)
            raise BadInputError(f"{what} file {str(file)!r} is not a readable .npy array ({exc})") from None
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        tensors = load_file(file)
    except (SafetensorError, ValueError, TypeError) as exc:
        raise BadInputError(f"{what} file {str(file)!r} is not a readable .safetensors file ({exc})") from None
    if len(tensors) != 1:
        names = ", ".join(sorted(tensors)) or "none"
        raise BadInputError(f"{what} file {str(file)!r} must hold one tensor; it holds {len(tensors)} ({names})")
    return next(iter(tensors.values()))


def encoder_for(
    encoder: EncoderLike | None, vectors: Any, encoder_name: str | None, dim: int | None = None
) -> tuple[EncoderLike, np.ndarray | None]:
    """The encoder a build or an empty index records and the vectors it indexes (None: encode): ``encoder``,
    the vectors read as its own; without one, an :class:`ExternalEncoder` named ``encoder_name`` of the
    vectors' dimension (or ``dim``, for an empty index)."""
    if encoder is not None and encoder_name is not None:
        raise BadInputError("encoder_name names the encoder of given vectors; an encoder names itself")
    given = None if vectors is None else read_vectors(vectors)
    if encoder is None:
        size = dim if given is None else int(given.shape[1])
        if size is None:
            raise BadInputError("give an encoder, or the documents' vectors (vectors=; dim= for an empty index)")
        encoder = ExternalEncoder(size, encoder_name)
    return encoder, given


def query_input(
    queries: Any, query_vectors: Any, mode: str, dim: int, encodes: bool, external: Callable[[], str]
) -> tuple[list[str], np.ndarray | None]:
    """A search's query texts (checked; empty when none are given) and vectors (``dim`` columns, one row per
    text where both are given), refused in one line where ``mode`` needs what is missing (texts for the lexical
    part; vectors, where the index ``encodes`` no text: ``external()`` says whose they are)."""
    if queries is None and query_vectors is None:
        raise BadInputError("give a search queries (texts) or query_vectors, or both")
    items = [] if queries is None else check_texts(queries, "queries")
    given = None
    if query_vectors is not None:
        rows = None if queries is None else len(items)
        given = checked_vectors(
            read_vectors(query_vectors, "query_vectors"), "query_vectors", rows=rows, dim=dim, of="queries"
        )
        if not given.shape[0]:
            raise BadInputError("query_vectors holds no rows; give at least one query")
    if mode != "dense" and queries is None:
        raise BadInputError(f"a {mode} search needs the query texts (queries) for its lexical part")
    if mode != "lexical" and given is None and not encodes:
        also = " beside the query texts" if mode == "hybrid" else ""
        raise BadInputError(
            f"{external()} and encodes no text: a {mode} search needs the queries' vectors{also} (query_vectors; "
            'CLI --query-vectors; HTTP "vectors"); a lexical search takes texts alone'
        )
    return items, given
