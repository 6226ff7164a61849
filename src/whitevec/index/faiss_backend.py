"""FAISS (faiss-cpu) backend: exact flat, HNSW or IVF-flat index, wrapped in an id map, saved as index.faiss."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError
from whitevec.index.backend import check_choice

INDEX_FILE = "index.faiss"
_SMALL_BATCH = 16

# Defaults: HNSW M=32/efConstruction=40 are faiss's own; efSearch 64 (faiss: 16) trades a little speed for
# recall close to exact on corpora of this size. IVF nprobe 8; nlist chosen from the corpus size on first add.
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "flat": {},
    "hnsw": {"M": 32, "efConstruction": 40, "efSearch": 64},
    "ivf": {"nlist": None, "nprobe": 8},
}


def _faiss() -> Any:
    import faiss

    return faiss


def faiss_version() -> str:
    return str(getattr(_faiss(), "__version__", "unknown"))


def resolve_params(kind: str, given: dict[str, Any] | None) -> dict[str, Any]:
    """The defaults for ``kind`` updated with ``given``; unknown names or non-positive values are refused."""
    defaults = DEFAULT_PARAMS[kind]
    params = dict(defaults)
    for name, value in (given or {}).items():
        if name not in defaults:
            valid = ", ".join(defaults) or "none"
            raise BadInputError(f"index parameter {name!r} does not apply to kind {kind!r} (valid: {valid})")
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise BadInputError(f"index parameter {name} must be a positive integer, got {value!r}")
        params[name] = value
    return params


def default_nlist(n: int) -> int:
    """About 4*sqrt(n) lists, at most one per 39 training vectors (faiss's minimum), at least 1."""
    return max(1, min(round(4 * math.sqrt(n)), n // 39))


class FaissBackend:
    """A FAISS index of ``dim``-dimensional vectors; ``cosine``/``ip`` use inner product, ``l2`` squared L2."""

    def __init__(self, dim: int, metric: str, kind: str = "flat", params: dict[str, Any] | None = None) -> None:
        self.dim = int(dim)
        self.metric = check_choice(metric, ("cosine", "ip", "l2"), "metric")
        self.kind = check_choice(kind, ("flat", "hnsw", "ivf"), "index kind")
        self._params = resolve_params(self.kind, params)
        self.index: Any = None  # created on the first add (IVF needs the vectors to train)

    def _faiss_metric(self) -> int:
        faiss = _faiss()
        return int(faiss.METRIC_L2 if self.metric == "l2" else faiss.METRIC_INNER_PRODUCT)

    def _create(self, first: np.ndarray) -> Any:
        faiss = _faiss()
        metric = self._faiss_metric()
        if self.kind == "flat":
            inner = faiss.IndexFlat(self.dim, metric)
        elif self.kind == "hnsw":
            inner = faiss.IndexHNSWFlat(self.dim, self._params["M"], metric)
            inner.hnsw.efConstruction = self._params["efConstruction"]
        else:
            nlist = self._params["nlist"] or default_nlist(first.shape[0])
            if nlist > first.shape[0]:
                raise BadInputError(
                    f"IVF with nlist={nlist} needs at least {nlist} vectors to train; got {first.shape[0]}. "
                    "Lower nlist or use kind 'flat'."
                )
            self._params["nlist"] = nlist
            quantizer = faiss.IndexFlat(self.dim, metric)
            inner = faiss.IndexIVFFlat(quantizer, self.dim, nlist, metric)
            inner.train(first)
        index = faiss.IndexIDMap2(inner)
        self._apply_search_params(index)
        return index

    def _apply_search_params(self, index: Any) -> None:
        faiss = _faiss()
        if self.kind == "hnsw":
            faiss.downcast_index(faiss.downcast_index(index).index).hnsw.efSearch = self._params["efSearch"]
        elif self.kind == "ivf":
            faiss.extract_index_ivf(index).nprobe = self._params["nprobe"]

    @property
    def count(self) -> int:
        return 0 if self.index is None else int(self.index.ntotal)

    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        ids64 = np.ascontiguousarray(ids, dtype=np.int64)
        if x.ndim != 2 or x.shape[1] != self.dim or ids64.shape != (x.shape[0],):
            raise BadInputError(f"expected {len(ids64)} vectors of dimension {self.dim}, got shape {x.shape}")
        if self.index is None:
            self.index = self._create(x)
        self.index.add_with_ids(x, ids64)

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.index is None:
            return np.zeros((x.shape[0], k), np.float32), np.full((x.shape[0], k), -1, np.int64)
        if x.shape[0] >= _SMALL_BATCH:
            scores, ids = self.index.search(x, k)
            return scores, ids
        # A few queries: faiss's OpenMP pool costs more than it saves (measured 13 ms vs 0.02 ms for one query
        # on 1400 x 32 while torch held its own threads), so search these on one thread.
        faiss = _faiss()
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            scores, ids = self.index.search(x, k)
        finally:
            faiss.omp_set_num_threads(threads)
        return scores, ids

    def copy(self) -> FaissBackend:
        """An independent copy (so that adding can fail without touching the live index)."""
        other = FaissBackend(self.dim, self.metric, self.kind, None)
        other._params = dict(self._params)
        if self.index is not None:
            other.index = _faiss().clone_index(self.index)
            other._apply_search_params(other.index)
        return other

    def save(self, folder: Path) -> list[str]:
        if self.index is None:
            raise BadInputError("cannot save an empty index; add vectors first")
        _faiss().write_index(self.index, str(folder / INDEX_FILE))
        return [INDEX_FILE]

    @classmethod
    def read(
        cls, read: Callable[[int], bytes], source: Path, dim: int, metric: str, kind: str, params: dict[str, Any]
    ) -> FaissBackend:
        """An index from a ``read(n)`` stream of a file written by :meth:`save` (``source`` names it in errors)."""
        backend = cls(dim, metric, kind, None)
        backend._params = dict(params)
        faiss = _faiss()
        try:
            backend.index = faiss.read_index(faiss.PyCallbackIOReader(read))
        except RuntimeError as exc:
            raise CorruptFileError(f"{source} is not a readable FAISS index ({exc})") from exc
        if backend.index.d != dim:
            raise CorruptFileError(f"{source} holds {backend.index.d}-d vectors, manifest says {dim}")
        backend._apply_search_params(backend.index)
        return backend

    def close(self) -> None:
        return None
