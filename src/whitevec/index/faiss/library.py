"""The faiss library as the FAISS store uses it: the module, imported on first use (importing whitevec.index loads
no faiss), its version, its OpenMP threads held to one on the calling thread, and a binary index's layers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

INDEX_FILE = "index.faiss"  # a FAISS index's file in a version folder (a segment's: with its prefix)


def faiss_module() -> Any:
    import faiss

    return faiss


def faiss_version() -> str:
    return str(getattr(faiss_module(), "__version__", "unknown"))


@contextlib.contextmanager
def one_faiss_thread() -> Iterator[None]:
    """Run faiss on one OpenMP thread inside the block, on the calling thread only.

    ``omp_set_num_threads`` sets the calling thread's own nthreads ICV (OpenMP's per-task data environment), so
    this does not change searches that other Python threads run at the same time (tested).
    """
    faiss = faiss_module()
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(threads)


def binary_layers(index: Any) -> list[Any]:
    """A faiss binary index and the one inside its id map, each downcast to its class."""
    faiss = faiss_module()
    outer = faiss.downcast_IndexBinary(index)
    inner = getattr(outer, "index", None)
    return [outer] if inner is None else [outer, faiss.downcast_IndexBinary(inner)]
