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
``binary``           1 bit a dimension: the sign at the stored mean         ceil(d / 8)
``binary-rr``        the sign after the mean and a seeded random rotation   ceil(d / 8)
``itq``              the sign after ITQ's learned rotation (faiss)          ceil(d / 8)
``rabitq[-qbN]``     RaBitQ (faiss): 1 bit a dimension after a random       ceil(d / 8) + 8
                     rotation, two float corrections; queries of N bits
``faiss:STRING``     any faiss index-factory string (experts; kind flat)    measured after the build
===================  =====================================================  ===================================

Any of them (but ``faiss:``) may end in ``+refine``: the stored float32 vectors re-rank the top
``refine_factor * k`` candidates exactly (faiss ``IndexRefineFlat``), at 4 d more bytes a vector in memory.
Any lossy one may end in ``+rescore[=K][:fp16|:int8]`` instead: the top ``K * k`` candidates (K defaults to
:data:`DEFAULT_SIGN_RESCORE` for sign codes, :data:`DEFAULT_RESCORE` for the others) are re-ranked by the
float query against the vectors kept in a file on disk and read on demand (half precision, 2 d bytes a vector,
or int8 with one float32 scale, d + 4): memory holds the codes only (:mod:`whitevec.index.encodings.rescore`). The
sign codes (:mod:`whitevec.index.encodings.sign_codes`) are searched by Hamming distance (faiss ``IndexBinaryFlat``
/ ``IndexBinaryIVF`` / ``IndexBinaryHNSW``).

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
ID_BYTES = 8  # an int64 id per vector: the IndexIDMap's ids, and an IVF list's ids
SIGN_CODECS = ("binary", "binary-rr", "itq")  # whitevec.index.encodings.sign_codes, searched by Hamming distance
RABITQ_CORRECTION_BYTES = 8  # faiss's RaBitQ keeps two float32 factors per vector beside its bits
DEFAULT_RABITQ_QB = 4  # faiss's own default: queries quantized to 4 bits a dimension (0: float queries)
MAX_RABITQ_QB = 8
# The top K x k candidates a "+rescore" re-ranks when K is not given: the smallest K of 1, 2, 4, 10 keeping a
# code within 1% of float32 nDCG@10 on Cranfield for both all-MiniLM-L6-v2 (float32 37.36) and all-mpnet-base-v2
# (39.14), with a step of margin where one was reached early (benchmarks/investigations/one_bit_cranfield.py,
# docs/notes/one-bit-codes.md). Sign codes (binary-rr) need 10: 99.2% / 98.7% at 4, 100.1% / 99.7% at 10.
# RaBitQ is there from 2 (99.9% / 99.9%), and so is PQ (pqM, M = d / 8: 99.5% / 99.7% at 2; SQ already is at 1;
# benchmarks/investigations/rescore_cranfield.py); 4 keeps a margin for them all.
DEFAULT_RESCORE = 4
DEFAULT_SIGN_RESCORE = 10
RESCORE_FORMS = {"fp16": "half precision, 2 d bytes", "int8": "int8 with one float32 scale a vector, d + 4 bytes"}

FORMS = (
    "float32",
    "fp16",
    "sq8",
    "sq4",
    "pqM",
    "pqMxB",
    "opqM,pqM[xB]",
    "binary",
    "binary-rr",
    "itq",
    "rabitq[-qbN]",
    "faiss:FACTORY",
    "<any>+refine",
    "<lossy>+rescore[=K][:fp16|:int8]",
)

_PQ = re.compile(r"(?:opq(\d+),)?pq(\d+)(?:x(\d+))?")
_RABITQ = re.compile(r"rabitq(?:-qb(\d+))?")
_RESCORE = re.compile(r"rescore(?:=(\d+))?(?::(\w+))?")


@dataclass(frozen=True)
class Encoding:
    """A parsed encoding spec; ``codec`` is one of float32, fp16, sq8, sq4, pq, opq, binary, binary-rr, itq,
    rabitq or factory."""

    codec: str
    m: int | None = None  # PQ sub-quantizers
    nbits: int | None = None  # PQ bits per sub-quantizer
    refine: bool = False
    factory: str | None = None  # the expert's faiss factory string (codec "factory")
    qb: int | None = None  # RaBitQ's query bits
    rescore: int | None = None  # "+rescore=K": the multiplier K; None without rescoring
    rescore_form: str = "fp16"  # how the rescoring vectors are kept on disk (RESCORE_FORMS)

    @property
    def spec(self) -> str:
        """The canonical spec string (what the manifest records; a rescoring multiplier always written)."""
        if self.codec == "factory":
            return f"faiss:{self.factory}"
        if self.codec in ("pq", "opq"):
            pq = f"pq{self.m}" + ("" if self.nbits == DEFAULT_PQ_BITS else f"x{self.nbits}")
            base = pq if self.codec == "pq" else f"opq{self.m},{pq}"
        elif self.codec == "rabitq":
            base = "rabitq" + ("" if self.qb == DEFAULT_RABITQ_QB else f"-qb{self.qb}")
        else:
            base = self.codec
        if self.rescore is not None:
            base += f"+rescore={self.rescore}" + ("" if self.rescore_form == "fp16" else f":{self.rescore_form}")
        return base + ("+refine" if self.refine else "")

    def __str__(self) -> str:
        return self.spec

    @property
    def trained(self) -> bool:
        """Whether the codes need training vectors (SQ ranges, PQ centroids, a mean, expert strings)."""
        return self.codec not in ("float32", "fp16")

    @property
    def sign(self) -> bool:
        """Sign codes searched by Hamming distance (a faiss binary index): binary, binary-rr, itq."""
        return self.codec in SIGN_CODECS

    @property
    def scoring(self) -> str:
        """How eval and tune score this encoding without building an index: ``decoded`` (the stored vectors
        replaced by their decoded codes), ``signs`` (every vector, queries too, by its +-1 sign code: the
        Hamming ranking exactly) or ``search`` (a flat store's own search: RaBitQ's estimator, rescoring and
        refinement cannot be reproduced from decoded vectors)."""
        if self.rescore is not None or self.refine or self.codec in ("rabitq", "factory"):
            return "search"
        return "signs" if self.sign else "decoded"

    def check_dim(self, dim: int) -> None:
        """Refuse a dimension this encoding cannot split (PQ's M must divide d), naming d and the valid M."""
        if self.codec in ("pq", "opq") and self.m is not None and dim % self.m:
            valid = [m for m in range(1, dim + 1) if dim % m == 0]
            raise BadInputError(
                f"{self.spec}: PQ with M={self.m} sub-quantizers needs M to divide the dimension d={dim}; "
                f"valid M for d={dim}: {', '.join(map(str, valid))}"
            )

    def check_kind(self, kind: str, metric: str) -> None:
        """Refuse a combination faiss cannot search: HNSW over RaBitQ codes takes squared L2 only (a cosine
        index of lossy codes is searched by L2 anyway; ``ip`` is not)."""
        if self.codec == "rabitq" and kind == "hnsw" and metric == "ip":
            raise BadInputError(
                f"{self.spec} with --kind hnsw: faiss's HNSW over RaBitQ codes (IndexHNSWRaBitQ) searches by L2 "
                "only; use --metric cosine or l2, or --kind flat / ivf for ip"
            )

    def code_bytes(self, dim: int) -> int:
        """Bytes of one vector's code in memory (the refine copy included, the rescoring vectors on disk not:
        :meth:`disk_bytes`); 0 when unknown before a build (factory)."""
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
        elif self.sign:
            code = (dim + 7) // 8
        elif self.codec == "rabitq":
            code = (dim + 7) // 8 + RABITQ_CORRECTION_BYTES
        else:
            return 0
        return code + (4 * dim if self.refine else 0)

    def disk_bytes(self, dim: int) -> int:
        """Bytes a vector costs on disk beyond its code: the rescoring vector (0 without ``+rescore``)."""
        if self.rescore is None:
            return 0
        return 2 * dim if self.rescore_form == "fp16" else dim + 4

    def codec_factory(self) -> str:
        """The factory fragment of the codes alone (``SQ8``, ``PQ48x8``, ``RaBitQ``, ...)."""
        return {"float32": "Flat", "fp16": "SQfp16", "sq8": "SQ8", "sq4": "SQ4", "rabitq": "RaBitQ"}.get(
            self.codec, f"PQ{self.m}x{self.nbits}"
        )

    def min_training(self, dim: int | None = None) -> int:
        """Training vectors the codes need at the smallest setting :func:`fit_to_training` may choose (ITQ's
        principal axes: ``dim``)."""
        if self.codec in ("pq", "opq"):
            return POINTS_PER_CENTROID * 2 ** min(MIN_PQ_BITS, self.nbits or MIN_PQ_BITS)
        if self.codec == "itq" and dim is not None:
            return dim
        return 1 if self.trained else 0


def parse_encoding(spec: str | Encoding | None) -> Encoding:
    """An :class:`Encoding` from a spec string (case-insensitive; None is float32); BadInputError listing the
    valid forms for anything else, and naming the fault of a suffix that cannot apply (``+rescore`` on float32
    codes is redundant; ``+refine`` and ``+rescore`` both re-rank)."""
    if spec is None:
        return Encoding("float32")
    if isinstance(spec, Encoding):
        return spec
    if not isinstance(spec, str):
        raise BadInputError(f"an encoding is a spec string, got {type(spec).__name__}")
    text = spec.strip()
    if text.lower().startswith("faiss:"):
        return _parse_factory(text[len("faiss:") :].strip(), spec)
    key, *suffixes = text.lower().replace(" ", "").split("+")
    base = _parse_base(key, spec)
    return _with_suffixes(base, suffixes, spec)


def _parse_base(key: str, spec: str) -> Encoding:
    if key in ("float32", "fp16", "sq8", "sq4", *SIGN_CODECS):
        return Encoding(key)
    rabitq = _RABITQ.fullmatch(key)
    if rabitq:
        qb = DEFAULT_RABITQ_QB if rabitq.group(1) is None else int(rabitq.group(1))
        if qb > MAX_RABITQ_QB:
            raise BadInputError(
                f"encoding {spec!r}: RaBitQ quantizes queries to 0-{MAX_RABITQ_QB} bits (0: float queries)"
            )
        return Encoding("rabitq", qb=qb)
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
        return Encoding("opq" if opq_m is not None else "pq", m=m, nbits=nbits)
    raise BadInputError(
        f"unknown encoding {spec!r}; valid: {', '.join(FORMS)} (M, B, K positive integers, e.g. sq8, pq48, "
        "opq32,pq32, pq96x4, sq8+refine, binary-rr+rescore, rabitq+rescore=10:int8)"
    )


def _with_suffixes(base: Encoding, suffixes: list[str], spec: str) -> Encoding:
    """``base`` with its ``+refine`` / ``+rescore[=K][:FORM]`` suffixes, each checked against the codes."""
    encoding = base
    for suffix in suffixes:
        rescore = _RESCORE.fullmatch(suffix)
        if suffix == "refine" and not encoding.refine:
            if encoding.sign:
                raise BadInputError(
                    f"encoding {spec!r}: +refine keeps float32 vectors in a faiss float index, which sign codes "
                    f"do not have; use {base.spec}+rescore (the float vectors then stay on disk)"
                )
            encoding = replace(encoding, refine=True)
        elif rescore and encoding.rescore is None:
            default = DEFAULT_SIGN_RESCORE if encoding.sign else DEFAULT_RESCORE
            multiplier = default if rescore.group(1) is None else int(rescore.group(1))
            form = rescore.group(2) or "fp16"
            if multiplier < 1:
                raise BadInputError(f"encoding {spec!r}: +rescore=K needs K >= 1 (the top K x k are re-ranked)")
            if form not in RESCORE_FORMS:
                raise BadInputError(
                    f"encoding {spec!r}: rescoring vectors are kept as {' or '.join(RESCORE_FORMS)}, not {form!r}"
                )
            encoding = replace(encoding, rescore=multiplier, rescore_form=form)
        else:
            raise BadInputError(
                f"encoding {spec!r}: unknown or repeated suffix '+{suffix}'; valid: +refine, "
                "+rescore[=K][:fp16|:int8]"
            )
    if encoding.refine and encoding.rescore is not None:
        raise BadInputError(
            f"encoding {spec!r}: +refine and +rescore both re-rank the candidates (refine from float32 vectors in "
            "memory, rescore from vectors on disk); choose one"
        )
    if encoding.rescore is not None and (
        encoding.codec == "float32" or (encoding.codec == "fp16" and encoding.rescore_form == "fp16")
    ):
        raise BadInputError(
            f"encoding {spec!r}: +rescore is redundant on {base.spec} codes, which are already as precise as the "
            f"rescoring vectors; drop +rescore (it re-ranks lossy codes: sq8, pqM, binary, rabitq, ...)"
        )
    return encoding


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


def factory_string(encoding: Encoding, kind: str, params: dict[str, Any], dim: int) -> str:
    """The faiss index-factory string for ``encoding`` in an index of ``kind`` (``params``: M, nlist) of
    ``dim``-dimensional vectors; for sign codes the string of faiss's binary factory (``BFlat``, ``BIVFn``,
    ``BHNSWm``), for ``index_binary_factory``. RaBitQ gets a random rotation first (``RRd``): its error bound
    assumes rotated vectors, and faiss's IndexRaBitQ does not rotate (on Cranfield with all-MiniLM-L6-v2,
    nDCG@10 35.75 with the rotation against 34.13 without)."""
    if encoding.codec == "factory":
        assert encoding.factory is not None
        return encoding.factory
    if encoding.sign:
        return {"flat": "BFlat", "hnsw": f"BHNSW{params.get('M')}"}.get(kind, f"BIVF{params.get('nlist')}")
    rotation = {"opq": f"OPQ{encoding.m},", "rabitq": f"RR{dim},"}.get(encoding.codec, "")
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
    """Concrete encoding specs valid for dimension ``dim`` (PQ M dividing d, 1 <= d / M <= 32; the 1-bit codes),
    with at most ``max_bytes`` code bytes a vector when given; fewest bytes first. For searches over encodings
    (``tune``)."""
    specs: list[Encoding] = [Encoding(c) for c in ("float32", "fp16", "sq8", "sq4", *SIGN_CODECS)]
    specs.append(Encoding("rabitq", qb=DEFAULT_RABITQ_QB))
    for m in _divisors(dim):
        if dim // m <= 32:
            specs.append(Encoding("pq", m=m, nbits=DEFAULT_PQ_BITS))
            specs.append(Encoding("opq", m=m, nbits=DEFAULT_PQ_BITS))
    if refine:
        specs += [replace(e, refine=True) for e in specs if e.codec != "float32" and not e.sign]
    chosen = [e for e in specs if max_bytes is None or e.code_bytes(dim) <= max_bytes]
    return [e.spec for e in sorted(chosen, key=lambda e: (e.code_bytes(dim), e.spec))]


def _divisors(n: int) -> Iterable[int]:
    return (m for m in range(1, n + 1) if n % m == 0)


def storage_estimate(encoding: Encoding, kind: str, params: dict[str, Any], dim: int) -> tuple[float, int]:
    """``(bytes per vector, fixed bytes)`` of a whitevec FAISS index file: per vector the code, the id map's
    int64 id, an IVF list's id, HNSW's links (2M at level 0, M per upper level, 1/(M-1) upper levels on
    average, plus a level and an offset); fixed the trained parts (SQ ranges, PQ centroids, OPQ rotation, IVF
    centroids, RaBitQ's rotation). ``index bytes ~ fixed + n * per vector`` (the tests hold faiss's files to it
    within 5%). Sign codes keep their mean and rotation in a file of their own, and rescoring vectors theirs
    (:meth:`Encoding.disk_bytes`); neither is counted here."""
    if encoding.codec == "factory":
        raise BadInputError("the size of an expert faiss index is measured after the build, not estimated")
    per = float(encoding.code_bytes(dim) + ID_BYTES)
    fixed = 0
    if encoding.codec in ("sq8", "sq4"):
        fixed += 2 * dim * 4  # per-dimension minimum and range
    if encoding.codec == "rabitq":
        fixed += dim * dim * 4 + dim * 4  # the random rotation, and the centre of the codes
    if encoding.codec in ("pq", "opq"):
        assert encoding.nbits is not None
        fixed += 2**encoding.nbits * dim * 4  # M sub-quantizers x 2^B centroids x d/M floats
    if encoding.codec == "opq":
        fixed += dim * dim * 4 + dim * 4  # the rotation matrix and its bias
    if kind == "ivf":
        per += ID_BYTES
        centroid = encoding.code_bytes(dim) if encoding.sign else dim * 4  # binary IVF: binary centroids
        fixed += int(params["nlist"]) * (centroid + 16)  # centroids; per list its size and offset
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
