"""How an index stores each vector: the encoding, a store parameter (``index_params["encoding"]``).

One spec string names it; :func:`parse_encoding` checks it once, before any data is read, and everything else
(the FAISS factory string, the bytes a vector costs, the training vectors it needs) derives from the parsed
:class:`Encoding`:

===================  =====================================================  ===================================
spec                 what is stored per vector (d = stored dimension)       code bytes / vector
===================  =====================================================  ===================================
``float32``          the vector (default)                                   4 d
``fp16``             the vector in half precision (faiss SQfp16)            2 d
``sq8`` / ``sq4``    8 / 4 bits per component, per-dimension ranges         d / ceil(d / 2)
``pqM``, ``pqMxB``   product quantization: M sub-vectors, B bits each (8)  ceil(M B / 8)
``opqM,pqM[xB]``     faiss's learned rotation (OPQ) then PQ                 ceil(M B / 8)
``faiss:STRING``     any faiss index-factory string (experts; kind flat)    measured after the build
===================  =====================================================  ===================================

Any of them (but ``faiss:``) may end in ``+refine``: the stored float32 vectors re-rank the top
``refine_factor * k`` candidates exactly (faiss ``IndexRefineFlat``), at 4 d more bytes a vector.

The encoding composes with every index kind: ``flat`` searches all codes, ``ivf`` gives IVF-SQ / IVF-PQ
(residuals encoded), ``hnsw`` gives HNSW-SQ / HNSW-PQ. PQ and IVF learn centroids, and k-means wants about
:data:`POINTS_PER_CENTROID` training vectors per centroid; :func:`fit_to_training` lowers the bits of PQ or
the IVF lists to what the training vectors support (with one warning), and refuses below the smallest setting.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from whitevec.errors import BadInputError

POINTS_PER_CENTROID = 39  # faiss's k-means warns below 39 training points per centroid
MIN_PQ_BITS = 4  # below 16 centroids per sub-quantizer PQ codes carry too little to be worth it
DEFAULT_PQ_BITS = 8
ID_BYTES = 8  # an int64 id per vector: IndexIDMap2's map, and an IVF list's ids

FORMS = ("float32", "fp16", "sq8", "sq4", "pqM", "pqMxB", "opqM,pqM[xB]", "faiss:FACTORY", "<any>+refine")

_PQ = re.compile(r"(?:opq(\d+),)?pq(\d+)(?:x(\d+))?")


@dataclass(frozen=True)
class Encoding:
    """A parsed encoding spec; ``codec`` is one of float32, fp16, sq8, sq4, pq, opq or factory."""

    codec: str
    m: int | None = None  # PQ sub-quantizers
    nbits: int | None = None  # PQ bits per sub-quantizer
    refine: bool = False
    factory: str | None = None  # the expert's faiss factory string (codec "factory")

    @property
    def spec(self) -> str:
        """The canonical spec string (what the manifest records)."""
        if self.codec == "factory":
            return f"faiss:{self.factory}"
        if self.codec in ("pq", "opq"):
            pq = f"pq{self.m}" + ("" if self.nbits == DEFAULT_PQ_BITS else f"x{self.nbits}")
            base = pq if self.codec == "pq" else f"opq{self.m},{pq}"
        else:
            base = self.codec
        return base + ("+refine" if self.refine else "")

    def __str__(self) -> str:
        return self.spec

    @property
    def trained(self) -> bool:
        """Whether the codes need training vectors (SQ ranges, PQ centroids, expert strings)."""
        return self.codec not in ("float32", "fp16")

    def check_dim(self, dim: int) -> None:
        """Refuse a dimension this encoding cannot split (PQ's M must divide d), naming d and the valid M."""
        if self.codec in ("pq", "opq") and self.m is not None and dim % self.m:
            valid = [m for m in range(1, dim + 1) if dim % m == 0]
            raise BadInputError(
                f"{self.spec}: PQ with M={self.m} sub-quantizers needs M to divide the dimension d={dim}; "
                f"valid M for d={dim}: {', '.join(map(str, valid))}"
            )

    def code_bytes(self, dim: int) -> int:
        """Bytes of one vector's code (the refine copy included); 0 when unknown before a build (factory)."""
        if self.codec == "float32":
            code = 4 * dim
        elif self.codec == "fp16":
            code = 2 * dim
        elif self.codec == "sq8":
            code = dim
        elif self.codec == "sq4":
            code = (dim + 1) // 2
        elif self.codec in ("pq", "opq"):
            assert self.m is not None and self.nbits is not None
            code = math.ceil(self.m * self.nbits / 8)
        else:
            return 0
        return code + (4 * dim if self.refine else 0)

    def codec_factory(self) -> str:
        """The factory fragment of the codes alone (``SQ8``, ``PQ48x8``, ...)."""
        return {"float32": "Flat", "fp16": "SQfp16", "sq8": "SQ8", "sq4": "SQ4"}.get(
            self.codec, f"PQ{self.m}x{self.nbits}"
        )

    def min_training(self) -> int:
        """Training vectors the codes need at the smallest setting :func:`fit_to_training` may choose."""
        if self.codec in ("pq", "opq"):
            return POINTS_PER_CENTROID * 2 ** min(MIN_PQ_BITS, self.nbits or MIN_PQ_BITS)
        return 1 if self.trained else 0


def parse_encoding(spec: str | Encoding | None) -> Encoding:
    """An :class:`Encoding` from a spec string (case-insensitive; None is float32); BadInputError listing the
    valid forms for anything else."""
    if spec is None:
        return Encoding("float32")
    if isinstance(spec, Encoding):
        return spec
    if not isinstance(spec, str):
        raise BadInputError(f"an encoding is a spec string, got {type(spec).__name__}")
    text = spec.strip()
    if text.lower().startswith("faiss:"):
        return _parse_factory(text[len("faiss:") :].strip(), spec)
    key = text.lower().replace(" ", "")
    refine = key.endswith("+refine")
    if refine:
        key = key[: -len("+refine")]
    if key in ("float32", "fp16", "sq8", "sq4"):
        return Encoding(key, refine=refine)
    match = _PQ.fullmatch(key)
    if match:
        opq_m, m, nbits = (int(g) if g is not None else None for g in match.groups())
        assert m is not None
        nbits = DEFAULT_PQ_BITS if nbits is None else nbits
        if m < 1 or not 1 <= nbits <= 16:
            raise BadInputError(f"encoding {spec!r}: PQ needs M >= 1 and 1 <= bits <= 16")
        if opq_m is not None and opq_m != m:
            raise BadInputError(
                f"encoding {spec!r}: OPQ rotates for the PQ that follows it, so write opq{m},pq{m}"
            )
        return Encoding("opq" if opq_m is not None else "pq", m=m, nbits=nbits, refine=refine)
    raise BadInputError(
        f"unknown encoding {spec!r}; valid: {', '.join(FORMS)} (M, B positive integers, e.g. sq8, pq48, "
        "opq32,pq32, pq96x4, sq8+refine)"
    )


def _parse_factory(factory: str, spec: str) -> Encoding:
    if not factory:
        raise BadInputError(f"encoding {spec!r}: give a faiss index-factory string after 'faiss:'")
    if "IDMap" in factory:
        raise BadInputError(f"encoding {spec!r}: whitevec wraps the index in its own id map; drop IDMap")
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - faiss is a dependency
        raise BadInputError("faiss factory strings need faiss-cpu") from exc
    # The factory syntax is checked here on a dimension most sub-quantizer counts divide; the real dimension is
    # checked by check_factory_dim once it is known.
    try:
        faiss.index_factory(_PROBE_DIM, factory)
    except RuntimeError as exc:
        raise BadInputError(
            f"encoding {spec!r} is not a faiss index-factory string faiss accepts: {_first(exc)}"
        ) from None
    return Encoding("factory", factory=factory)


_PROBE_DIM = 2**6 * 3**2 * 5  # 2880: divisible by every usual PQ M


def _first(exc: Exception) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def check_factory_dim(encoding: Encoding, dim: int, metric: int) -> Any:
    """The faiss index an expert factory string builds for ``dim`` (BadInputError if faiss refuses it)."""
    import faiss

    assert encoding.factory is not None
    try:
        return faiss.index_factory(dim, encoding.factory, metric)
    except RuntimeError as exc:
        raise BadInputError(f"encoding {encoding.spec!r} does not build for d={dim}: {_first(exc)}") from None


def factory_string(encoding: Encoding, kind: str, params: dict[str, Any]) -> str:
    """The faiss index-factory string for ``encoding`` in an index of ``kind`` (``params``: M, nlist)."""
    if encoding.codec == "factory":
        assert encoding.factory is not None
        return encoding.factory
    rotation = f"OPQ{encoding.m}," if encoding.codec == "opq" else ""
    codes = encoding.codec_factory()
    if kind == "flat":
        body = codes
    elif kind == "hnsw":
        body = f"HNSW{params['M']},{codes}"
    else:
        body = f"IVF{params['nlist']},{codes}"
    return rotation + body + (",RFlat" if encoding.refine else "")


def fit_to_training(
    encoding: Encoding, kind: str, params: dict[str, Any], n_train: int
) -> tuple[Encoding, dict[str, Any], list[str]]:
    """The encoding and index parameters that ``n_train`` training vectors support, and what was lowered.

    PQ with B bits learns 2^B centroids per sub-quantizer and IVF ``nlist`` centroids; k-means wants
    :data:`POINTS_PER_CENTROID` training vectors per centroid. A setting asking for more is lowered to the
    largest that fits (PQ bits down to :data:`MIN_PQ_BITS`, ``nlist`` down to 1), and each change is described
    in the returned notes (the store warns once with them). Below the smallest setting: BadInputError naming
    the minimum.
    """
    notes: list[str] = []
    params = dict(params)
    if encoding.codec in ("pq", "opq") and encoding.nbits is not None:
        need = POINTS_PER_CENTROID * 2**encoding.nbits
        if n_train < need:
            floor = encoding.min_training()
            if n_train < floor:
                raise BadInputError(
                    f"{encoding.spec} needs at least {floor} training vectors ({POINTS_PER_CENTROID} per centroid "
                    f"at {min(MIN_PQ_BITS, encoding.nbits)} bits); got {n_train}. Use sq8, fp16 or float32, or "
                    "more vectors."
                )
            bits = math.floor(math.log2(n_train / POINTS_PER_CENTROID))
            lowered = replace(encoding, nbits=bits)
            notes.append(
                f"{encoding.spec} needs {need} training vectors ({POINTS_PER_CENTROID} per centroid, "
                f"{2**encoding.nbits} centroids); got {n_train}, so using {lowered.spec} "
                f"({POINTS_PER_CENTROID * 2**bits} needed; PQ codes of {math.ceil((lowered.m or 0) * bits / 8)} "
                "bytes a vector)"
            )
            encoding = lowered
    if kind == "ivf" and params.get("nlist") is not None:
        nlist = int(params["nlist"])
        if n_train < POINTS_PER_CENTROID * nlist:
            lowered_nlist = max(1, n_train // POINTS_PER_CENTROID)
            if lowered_nlist < nlist:
                notes.append(
                    f"IVF with nlist={nlist} needs {POINTS_PER_CENTROID * nlist} training vectors "
                    f"({POINTS_PER_CENTROID} per list); got {n_train}, so using nlist={lowered_nlist}"
                )
                params["nlist"] = lowered_nlist
    return encoding, params, notes


def list_encodings(dim: int, max_bytes: float | None = None, *, refine: bool = False) -> list[str]:
    """Concrete encoding specs valid for dimension ``dim`` (PQ M dividing d, 1 <= d / M <= 32), with at most
    ``max_bytes`` code bytes a vector when given; fewest bytes first. For searches over encodings (``tune``)."""
    specs: list[Encoding] = [Encoding(c) for c in ("float32", "fp16", "sq8", "sq4")]
    for m in _divisors(dim):
        if dim // m <= 32:
            specs.append(Encoding("pq", m=m, nbits=DEFAULT_PQ_BITS))
            specs.append(Encoding("opq", m=m, nbits=DEFAULT_PQ_BITS))
    if refine:
        specs += [replace(e, refine=True) for e in specs if e.codec != "float32"]
    chosen = [e for e in specs if max_bytes is None or e.code_bytes(dim) <= max_bytes]
    return [e.spec for e in sorted(chosen, key=lambda e: (e.code_bytes(dim), e.spec))]


def _divisors(n: int) -> Iterable[int]:
    return (m for m in range(1, n + 1) if n % m == 0)


def storage_estimate(encoding: Encoding, kind: str, params: dict[str, Any], dim: int) -> tuple[float, int]:
    """``(bytes per vector, fixed bytes)`` of a whitevec FAISS index file: per vector the code, the id map's
    int64 id, an IVF list's id, HNSW's links (2M at level 0, M per upper level, 1/(M-1) upper levels on
    average, plus a level and an offset); fixed the trained parts (SQ ranges, PQ centroids, OPQ rotation, IVF
    centroids). ``index bytes ~ fixed + n * per vector`` (the tests hold faiss's files to it within 5%)."""
    if encoding.codec == "factory":
        raise BadInputError("the size of an expert faiss index is measured after the build, not estimated")
    per = float(encoding.code_bytes(dim) + ID_BYTES)
    fixed = 0
    if encoding.codec in ("sq8", "sq4"):
        fixed += 2 * dim * 4  # per-dimension minimum and range
    if encoding.codec in ("pq", "opq"):
        assert encoding.nbits is not None
        fixed += 2**encoding.nbits * dim * 4  # M sub-quantizers x 2^B centroids x d/M floats
    if encoding.codec == "opq":
        fixed += dim * dim * 4 + dim * 4  # the rotation matrix and its bias
    if kind == "ivf":
        per += ID_BYTES
        fixed += int(params["nlist"]) * (dim * 4 + 16)  # centroids; per list its size and offset
    elif kind == "hnsw":
        M = int(params["M"])
        per += 4 + 8 + 4 * (2 * M + M / (M - 1))
    return per, fixed


def index_layers(index: Any) -> list[Any]:
    """``index`` and the indexes inside it, outermost first, each downcast to its class: through id maps,
    pre-transforms (OPQ, whitening) and refinement to the index that holds the codes."""
    import faiss

    layers = []
    current = faiss.downcast_index(index)
    while current is not None:
        layers.append(current)
        if isinstance(current, faiss.IndexIDMap | faiss.IndexIDMap2 | faiss.IndexPreTransform):
            inner = current.index
        elif isinstance(current, faiss.IndexRefine):
            inner = current.base_index
        else:
            break
        current = faiss.downcast_index(inner)
    return layers


def factory_kind(encoding: Encoding) -> str:
    """The index kind (flat, hnsw, ivf) an expert factory string builds."""
    import faiss

    assert encoding.factory is not None
    for layer in index_layers(faiss.index_factory(_PROBE_DIM, encoding.factory)):
        if isinstance(layer, faiss.IndexIVF):
            return "ivf"
        if hasattr(layer, "hnsw"):
            return "hnsw"
    return "flat"


def split_encoding_list(text: str) -> list[str]:
    """A command line's list of encodings: ``float32,sq8,opq32,pq32`` -> ``[float32, sq8, opq32,pq32]`` (an
    ``opqM`` joins the ``pq`` after it). Factory strings hold commas themselves: separate a list holding one
    with ``;`` (``sq8;faiss:IVF64,PQ16``); a single ``faiss:...`` needs no separator."""
    if ";" in text:
        return [item.strip() for item in text.split(";") if item.strip()]
    if text.strip().lower().startswith("faiss:"):
        return [text.strip()]
    items: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if items and re.fullmatch(r"opq\d+", items[-1].lower()):
            items[-1] = f"{items[-1]},{item}"
        else:
            items.append(item)
    return items
