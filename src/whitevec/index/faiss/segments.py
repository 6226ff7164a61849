"""What a new or merged segment (:mod:`whitevec.index.segments.writing`) asks of a FAISS store, the work behind
:class:`~whitevec.index.faiss.store.FaissStore`'s segment hooks: a copy of its training without its vectors, the
vectors it keeps of some rows, and those added again to another copy."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from whitevec.errors import BadInputError
from whitevec.index.faiss.filtered import DIRECT_MAPS
from whitevec.index.faiss.library import faiss_module

if TYPE_CHECKING:
    from whitevec.index.faiss.store import FaissStore


def empty_copy(store: FaissStore) -> FaissStore:
    """A store with ``store``'s trained codes (IVF lists' centroids, codebooks, the sign step) and no vector:
    what a new segment of the index is made from. Copies the index once (a template is kept after that)."""
    if store.index is None:
        raise BadInputError("cannot copy the training of an empty index")
    other = store.stage_add(Path())
    other.index.reset()
    other.rescore = other._new_rescore()
    return other


def kept_vectors(store: FaissStore, ids: np.ndarray) -> np.ndarray:
    """What ``store`` keeps of the rows ``ids`` (distinct, ascending), as a segment merge adds it again: the
    rescoring vectors where the encoding keeps them, else the codes (sign codes as their bytes, others decoded).
    BadInputError where faiss cannot give this encoding's codes back."""
    ids64 = np.ascontiguousarray(ids, dtype=np.int64)
    if store.rescore is not None:
        return store.rescore.vectors(ids64)
    faiss = faiss_module()
    positions = np.searchsorted(faiss.vector_to_array(store.index.id_map), ids64)  # a segment's ids ascend
    inner = store.index.index
    try:
        if store.signs is not None:
            codes = [inner.reconstruct(int(p)) for p in positions]
            return np.stack(codes) if codes else np.zeros((0, inner.code_size), np.uint8)
        # An IVF index gives vectors back through its direct map (made once: a search may ask for it meanwhile).
        with DIRECT_MAPS, contextlib.suppress(RuntimeError):
            faiss.extract_index_ivf(inner).make_direct_map()
        return np.asarray(inner.reconstruct_batch(positions), dtype=np.float32)
    except RuntimeError as exc:
        raise BadInputError(
            f"faiss cannot give back the vectors of encoding {store.encoding.spec!r} ({exc}); rebuild the index "
            "instead of compacting it"
        ) from None


def add_kept(store: FaissStore, ids: np.ndarray, kept: np.ndarray) -> None:
    """Add what :func:`kept_vectors` gave (sign codes as they are, vectors encoded) under ``ids``."""
    if store.signs is not None and store.rescore is None:
        store.index.add_with_ids(np.ascontiguousarray(kept, dtype=np.uint8), np.ascontiguousarray(ids, np.int64))
        return
    store.add(ids, kept)
