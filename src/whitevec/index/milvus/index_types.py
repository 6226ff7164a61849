"""Which Milvus index type stores each index kind and encoding, on a Milvus server and on Milvus Lite (which has
fewer), with its extra build parameters."""

from __future__ import annotations

from typing import Any

from whitevec.errors import BadInputError
from whitevec.index.encodings.spec import SIGN_CODECS, Encoding
from whitevec.index.milvus.lite_servers import is_local_uri

# The Milvus index type (and its extra build parameters) for each (kind, encoding codec). A Milvus server has
# them all; Milvus Lite only the types in LITE_INDEX_TYPES (milvus_lite.index.factory: IVF_PQ is "reserved for
# a future phase" there, and HNSW_PQ is unknown: both fail to build and Lite then searches every vector
# silently, so whitevec refuses them up front). Milvus Lite's HNSW_SQ always uses 8-bit codes.
_MILVUS_TYPES: dict[tuple[str, str], str] = {
    ("flat", "float32"): "FLAT",
    ("ivf", "float32"): "IVF_FLAT",
    ("ivf", "sq8"): "IVF_SQ8",
    ("ivf", "pq"): "IVF_PQ",
    ("hnsw", "float32"): "HNSW",
    ("hnsw", "sq8"): "HNSW_SQ",
    ("hnsw", "fp16"): "HNSW_SQ",
    ("hnsw", "sq4"): "HNSW_SQ",
    ("hnsw", "pq"): "HNSW_PQ",
    **{("flat", codec): "BIN_FLAT" for codec in SIGN_CODECS},
    **{("ivf", codec): "BIN_IVF_FLAT" for codec in SIGN_CODECS},
    ("ivf", "rabitq"): "IVF_RABITQ",
}
_HNSW_SQ_TYPES = {"sq8": "SQ8", "fp16": "FP16", "sq4": "SQ4U"}
LITE_INDEX_TYPES: dict[tuple[str, str], str] = {
    key: value
    for key, value in _MILVUS_TYPES.items()
    if value in ("FLAT", "IVF_FLAT", "IVF_SQ8", "HNSW") or key == ("hnsw", "sq8")
}


def milvus_index_type(kind: str, encoding: Encoding, uri: str | None) -> tuple[str, dict[str, Any]]:
    """The Milvus index type for ``kind`` with ``encoding`` and its extra build parameters; BadInputError
    naming what this Milvus supports when it has none (``uri``: None or a local file is Milvus Lite)."""
    lite = uri is None or is_local_uri(uri)
    table = LITE_INDEX_TYPES if lite else _MILVUS_TYPES
    key = (kind, encoding.codec)
    if encoding.rescore is not None:
        raise BadInputError(
            f"encoding {encoding.spec!r}: the Milvus backend does not rescore (Milvus would keep the rescoring "
            "vectors in its own memory); use --backend faiss for +rescore, or drop it"
        )
    if encoding.refine or key not in table:
        where = "Milvus Lite" if lite else "the Milvus backend"
        supported = ", ".join(f"{k}+{c} ({t})" for (k, c), t in table.items())
        raise BadInputError(
            f"{where} has no index for kind {kind!r} with encoding {encoding.spec!r}; it supports "
            f"(kind+encoding): {supported}. Use --backend faiss for the other encodings."
        )
    extra: dict[str, Any] = {}
    if table[key] == "HNSW_SQ":
        extra["sq_type"] = _HNSW_SQ_TYPES[encoding.codec]
    elif encoding.codec == "pq":
        extra.update(m=encoding.m, nbits=encoding.nbits)
    return table[key], extra
