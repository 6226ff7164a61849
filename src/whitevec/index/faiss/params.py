"""The FAISS store's index parameters: each kind's defaults, IVF's list count from the corpus size, and the check
of an encoding against the kind and parameters it is given with."""

from __future__ import annotations

import math
from typing import Any

from whitevec.errors import BadInputError
from whitevec.index.encodings.spec import factory_kind, parse_encoding
from whitevec.index.stores.vector import ENCODING

# Defaults: HNSW M=32/efConstruction=40 are faiss's own; efSearch 64 (faiss: 16) trades a little speed for
# recall close to exact on corpora of this size. IVF nprobe 8; nlist chosen from the corpus size on first add.
# Every kind takes an encoding; train_sample (None: all vectors of the first add) is how many of them, drawn with
# a fixed seed, train SQ/PQ/IVF; refine_factor * k candidates are re-ranked exactly by a "+refine" encoding.
_ENCODING_PARAMS: dict[str, Any] = {ENCODING: "float32", "train_sample": None, "refine_factor": 4}
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "flat": {**_ENCODING_PARAMS},
    "hnsw": {"M": 32, "efConstruction": 40, "efSearch": 64, **_ENCODING_PARAMS},
    "ivf": {"nlist": None, "nprobe": 8, **_ENCODING_PARAMS},
}


def default_nlist(n: int) -> int:
    """About 4*sqrt(n) lists, at most one per 39 training vectors (faiss's minimum), at least 1."""
    return max(1, min(round(4 * math.sqrt(n)), n // 39))


def check_encoding(kind: str, params: dict[str, Any], dim: int | None, metric: str | None = None) -> None:
    """Refuse an encoding that cannot work with ``kind`` and ``params`` (and the dimension and metric, when
    known) before any data is read: PQ's M must divide d; HNSW over RaBitQ searches by L2 only; an expert factory
    string sets its own structure, so it must match ``kind`` and leave nlist / M to the string."""
    encoding = parse_encoding(params.get(ENCODING))
    if dim is not None:
        encoding.check_dim(dim)
    if metric is not None:
        encoding.check_kind(kind, metric)
    if encoding.codec != "factory":
        return
    structure = factory_kind(encoding)
    if structure != kind:
        raise BadInputError(
            f"the faiss factory string {encoding.factory!r} builds a {structure} index; give --kind {structure} "
            "with it (the kind chooses which search parameters apply)"
        )
    for name in ("nlist", "M"):
        if (
            params.get(name) is not None
            and name in DEFAULT_PARAMS[kind]
            and DEFAULT_PARAMS[kind][name] != params[name]
        ):
            raise BadInputError(f"the faiss factory string {encoding.factory!r} sets {name}; do not give it too")
