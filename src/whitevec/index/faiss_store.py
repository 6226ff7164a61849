"""FAISS (faiss-cpu) store: exact flat, HNSW or IVF-flat index, wrapped in an id map, saved as index.faiss."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError
from whitevec.index.layout import INDEX_FILE
from whitevec.index.store import KINDS, METRICS, check_choice, check_vectors_for, register_store, resolve_params

if TYPE_CHECKING:
    from whitevec.index.snapshot import IndexSnapshot

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


def default_nlist(n: int) -> int:
    """About 4*sqrt(n) lists, at most one per 39 training vectors (faiss's minimum), at least 1."""
    return max(1, min(round(4 * math.sqrt(n)), n // 39))


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run faiss on one OpenMP thread inside the block, on the calling thread only.

    ``omp_set_num_threads`` sets the calling thread's own nthreads ICV (OpenMP's per-task data environment), so
    this does not change searches that other Python threads run at the same time (tested).
    """
    faiss = _faiss()
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(threads)


@register_store
class FaissStore:
    """A FAISS index of ``dim``-dimensional vectors; ``cosine``/``ip`` use inner product, ``l2`` squared L2.

    The index lives in memory and is written to ``index.faiss`` in the version folder; an add works on a copy,
    so the live index never changes under its readers.
    """

    name: ClassVar[str] = "faiss"
    files: ClassVar[tuple[str, ...]] = (INDEX_FILE,)

    def __init__(self, dim: int, metric: str, kind: str = "flat", params: dict[str, Any] | None = None) -> None:
        self.dim = int(dim)
        self.metric = check_choice(metric, METRICS, "metric")
        self.kind = check_choice(kind, KINDS, "index kind")
        self._params = resolve_params(self.kind, params, DEFAULT_PARAMS)
        self.index: Any = None  # created on the first add (IVF needs the vectors to train)

    # --- life cycle -----------------------------------------------------------------------------------------
    @classmethod
    def check_options(cls, kind: str, params: dict[str, Any] | None, uri: str | None) -> None:
        if uri is not None:
            raise BadInputError("--uri applies to the milvus backend only")
        resolve_params(check_choice(kind, KINDS, "index kind"), params, DEFAULT_PARAMS)

    @classmethod
    def create(
        cls, folder: Path, dim: int, metric: str, kind: str, params: dict[str, Any] | None, uri: str | None
    ) -> FaissStore:
        cls.check_options(kind, params, uri)
        return cls(dim, metric, kind, params)

    @classmethod
    def open(cls, snapshot: IndexSnapshot) -> FaissStore:
        manifest = snapshot.manifest
        with snapshot.reader(INDEX_FILE) as read:
            return cls.read(
                read,
                snapshot.folder / INDEX_FILE,
                manifest["dim"],
                manifest["metric"],
                manifest["index_kind"],
                manifest["index_params"],
            )

    @classmethod
    def read(
        cls, read: Callable[[int], bytes], source: Path, dim: int, metric: str, kind: str, params: dict[str, Any]
    ) -> FaissStore:
        """An index from a ``read(n)`` stream of a file written by :meth:`save` (``source`` names it in errors)."""
        store = cls(dim, metric, kind, None)
        store._params = dict(params)
        faiss = _faiss()
        try:
            store.index = faiss.read_index(faiss.PyCallbackIOReader(read))
        except RuntimeError as exc:
            raise CorruptFileError(f"{source} is not a readable FAISS index ({exc})") from exc
        if store.index.d != dim:
            raise CorruptFileError(f"{source} holds {store.index.d}-d vectors, manifest says {dim}")
        store._apply_search_params(store.index)
        return store

    @classmethod
    def discard(cls, manifest: dict[str, Any]) -> None:
        return None  # everything lived in the replaced folder

    def stage_add(self, folder: Path) -> FaissStore:
        """An independent copy (so that adding can fail without touching the live index)."""
        other = FaissStore(self.dim, self.metric, self.kind, None)
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

    def reopen(self, folder: Path, manifest: dict[str, Any]) -> FaissStore:
        return self

    def abandon(self, ids: np.ndarray) -> None:
        return None  # the staged copy is simply dropped

    def drop(self) -> None:
        self.index = None

    def close(self) -> None:
        return None

    # --- data -----------------------------------------------------------------------------------------------
    def _faiss_metric(self) -> int:
        faiss = _faiss()
        return int(faiss.METRIC_L2 if self.metric == "l2" else faiss.METRIC_INNER_PRODUCT)

    def _create_index(self, first: np.ndarray) -> Any:
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

    def location(self) -> dict[str, Any]:
        return {"backend_uri": None, "milvus_collection": None}

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids64, x = check_vectors_for(self, ids, vectors)
        if self.index is None:
            self.index = self._create_index(x)
        self.index.add_with_ids(x, ids64)

    def delete(self, ids: np.ndarray) -> None:
        if self.index is not None:
            self.index.remove_ids(np.ascontiguousarray(ids, dtype=np.int64))

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.index is None:
            return np.zeros((x.shape[0], k), np.float32), np.full((x.shape[0], k), -1, np.int64)
        if x.shape[0] >= _SMALL_BATCH:
            scores, ids = self.index.search(x, k)
            return scores, ids
        # A few queries: faiss's OpenMP pool costs more than it saves (measured 13 ms vs 0.02 ms for one query
        # on 1400 x 32 while torch held its own threads), so search these on one thread.
        with _one_thread():
            scores, ids = self.index.search(x, k)
        return scores, ids
