"""FAISS indexes written to files through Python's file object. Given a path, faiss's own writer reports a
failed close (a full disk: the buffered bytes never written) only as a line on stderr, and the caller goes on
with an empty or short file; through a callback, the failed write or close raises OSError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whitevec.utils.io import writing_to


def write_faiss_index(index: Any, path: Path, *, binary: bool = False) -> None:
    """Write ``index`` (a binary one with ``binary``) to ``path``; a storage fault is an OSError naming it."""
    import faiss as faiss_module

    faiss: Any = faiss_module  # its stubs lack the callback writer
    write = faiss.write_index_binary if binary else faiss.write_index
    with writing_to(path), open(path, "wb") as file:
        write(index, faiss.PyCallbackIOWriter(file.write))
