"""The small protocol every vector backend follows, and the shared vocabulary (metrics, index kinds).

Ids are int64 row numbers that whitevec assigns (0, 1, 2, ...); the document store maps them to the user's
string ids. Vectors arrive already transformed and, for the cosine metric, already L2-normalised, so a backend
only ever does inner product (``cosine``, ``ip``) or squared Euclidean distance (``l2``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from whitevec.errors import BadInputError

METRICS = ("cosine", "ip", "l2")
KINDS = ("flat", "hnsw", "ivf")
BACKENDS = ("faiss", "milvus")


@runtime_checkable
class VectorBackend(Protocol):
    """What the Retriever needs from a vector store."""

    dim: int
    metric: str
    kind: str

    @property
    def count(self) -> int:
        """Number of vectors stored."""
        ...

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Store ``vectors`` (float32, n x dim) under ``ids`` (int64, n)."""
        ...

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, ids)``, each (n, k), best first; ids -1 where fewer than k results exist.

        Scores are inner products for ``cosine``/``ip`` (higher is closer) and squared L2 distances for ``l2``
        (lower is closer).
        """
        ...

    def params(self) -> dict[str, object]:
        """The index parameters to record in the manifest (kind-specific: M, efSearch, nlist, nprobe, ...)."""
        ...

    def save(self, folder: Path) -> list[str]:
        """Write what the backend keeps in the index folder; return the file names written."""
        ...

    def close(self) -> None:
        """Release connections or handles."""
        ...


def check_choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    """``value`` lower-cased if it is one of ``allowed``; BadInputError listing the valid values otherwise."""
    key = str(value).strip().lower()
    if key not in allowed:
        raise BadInputError(f"unknown {what} {value!r}; valid: {', '.join(allowed)}")
    return key


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), float32: what the cosine metric stores and searches."""
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.where(norms > 0, norms, 1.0), dtype=np.float32)
