"""The search space of ``whitevec tune``: a candidate is model x pooling x transform x encoding.

Transforms are the spec strings of :func:`whitevec.transforms.make_transform`. The default grid is ``none``,
``center``, ``normalize``, ``abtt-D`` for a few D, whitening over k x beta in {0, 1} x gamma in {0, 0.25, 0.5, 1},
and ``flow``. Two grid points equal ones already in it and are left out: whitening with gamma 0 and all d
dimensions is a rotation (beta 0: cosines exactly those of ``none``) or a centring (beta 1: ``center``).

Encodings (how the index stores each vector) are the last axis: the index's own encoding specs
(:func:`whitevec.index.encodings.spec.parse_encoding`: ``float32``, ``fp16``, ``sq8``, ``sq4``, ``pqM``, ``pqMxB``,
``opqM,pqM``, the 1-bit ``binary``, ``binary-rr``, ``itq``, ``rabitq``, any lossy one with ``+rescore``), or
``all``: every spec :func:`whitevec.index.encodings.spec.list_encodings` gives a candidate's output dimension. A
candidate's bytes per vector are the encoding's code bytes in memory at its output dimension
(:meth:`whitevec.index.encodings.spec.Encoding.code_bytes`, the figure ``whitevec index info`` reports as
``code_bytes_per_vector`` and the compression frontier's x axis; the 8-byte id every index keeps per vector is
the same for all candidates and left out); a ``+rescore`` encoding's vectors on disk are reported beside them
(:meth:`whitevec.index.encodings.spec.Encoding.disk_bytes`), not counted. ``float32`` is always scored: ``none``
stored as float32 is the baseline.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from whitevec.errors import BadInputError
from whitevec.index.encodings.spec import FORMS, parse_encoding
from whitevec.transforms import SPEC_FORMS, AllButTheTop, Whitening, make_transform, whitening_spec

# Tie-breaking cost of a transform family: no transform, then linear maps, then the non-linear flow.
_FAMILY_RANK = {"none": 0, "linear": 1, "flow": 2}

WHITENING_BETAS = (0.0, 1.0)
WHITENING_GAMMAS = (0.0, 0.25, 0.5, 1.0)


@dataclass(frozen=True)
class Candidate:
    """One configuration tune scores: a model, a pooling, a transform spec and an encoding, searched in a
    ``mode`` (:data:`whitevec.index.search.modes.MODES`) with, for ``hybrid``, a ``fusion`` spec (``rrf:60``,
    ``convex:0.5``; empty otherwise)."""

    model: str
    pooling: str
    transform: str
    encoding: str = "float32"
    mode: str = "dense"
    fusion: str = ""

    @property
    def family(self) -> str:
        """``none``, ``linear`` or ``flow``: the cheaper family wins a tie."""
        if self.transform == "none":
            return "none"
        return "flow" if self.transform.startswith("flow") else "linear"

    @property
    def label(self) -> str:
        searched = "" if self.mode == "dense" else f" / {self.mode}{' ' + self.fusion if self.fusion else ''}"
        return f"{self.model} / {self.pooling} / {self.transform} / {self.encoding}{searched}"


def canonical_transform(spec: str) -> str:
    """The one spelling of a transform spec (``raw`` -> ``none``, ``whitening-beta1`` -> ``whitening``,
    ``whitening-128-gamma0`` -> ``pca-128``, ...); raises BadInputError listing the valid forms for an unknown
    one."""
    transform = make_transform(spec)
    text = spec.strip().lower()
    if transform is None:
        return "none"
    if isinstance(transform, Whitening):
        k, beta, gamma = transform.n_components, float(transform.beta), float(transform.gamma)
        if (beta, gamma) == (1.0, 0.0):  # centred, not scaled: the named forms, as a user writes them
            return "rotation" if k is None else f"pca-{int(k)}"
        return whitening_spec(k, beta, gamma)
    if isinstance(transform, AllButTheTop) and transform.n_remove is not None:
        return f"abtt-{transform.n_remove}"
    return re.sub(r"\s+", "", text)


def output_dim(spec: str, dim: int) -> int:
    """The dimension a transform spec gives to vectors of dimension ``dim``."""
    transform = make_transform(spec)
    if isinstance(transform, Whitening) and transform.n_components is not None:
        return min(int(transform.n_components), dim)
    return dim


def check_transform_for_dim(spec: str, dim: int) -> None:
    """Refuse a spec the model's dimension cannot take (``whitening-512`` on 384-d vectors, ``abtt-400``)."""
    transform = make_transform(spec)
    limit = None
    if isinstance(transform, Whitening):
        limit = transform.n_components
    elif isinstance(transform, AllButTheTop):
        limit = transform.n_remove
    if limit is not None and limit > dim:
        raise BadInputError(f"candidate {spec!r} needs at least {limit} dimensions; the model gives {dim}")


def default_transforms(dim: int, *, include_flow: bool = True) -> list[str]:
    """The default transform grid for vectors of dimension ``dim`` (see the module docstring)."""
    specs = ["none", "center", "normalize"]
    specs += [f"abtt-{D}" for D in (1, 2, 4, 8) if dim > D]
    sizes: list[int | None] = [None, *(k for k in (256, 128, 64) if k < dim)]
    for k in sizes:
        for beta in WHITENING_BETAS:
            for gamma in WHITENING_GAMMAS:
                if k is None and gamma == 0.0:
                    continue  # a rotation (= none) or a centring (= center)
                specs.append(canonical_transform(whitening_spec(k, beta, gamma)))  # pca-K, not whitening-K-gamma0
    if include_flow:
        specs.append("flow")
    return specs


ALL_ENCODINGS = "all"
"""The ``encodings`` entry standing for every spec :func:`whitevec.index.encodings.spec.list_encodings` gives a
candidate's output dimension (within ``max_bytes_per_vector``)."""


def check_encodings(names: Sequence[str]) -> list[str]:
    """Canonical, de-duplicated encoding specs with ``float32`` first (the baseline stores float32), or ``all``;
    raises BadInputError listing the valid forms for an unknown spec, and for the two tune does not score: an
    expert ``faiss:`` string (its size is known only after a build) and ``+refine`` (float32 vectors in memory
    beside the codes)."""
    out = ["float32"]
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise BadInputError(f"empty encoding; valid forms: {', '.join(FORMS)}, or {ALL_ENCODINGS}")
        if name.strip().lower() == ALL_ENCODINGS:
            out.append(ALL_ENCODINGS)
            continue
        encoding = parse_encoding(name)
        if encoding.codec == "factory":
            raise BadInputError(
                f"encoding {name!r}: tune searches whitevec's encodings (float32, fp16, sq8, sq4, pqM, pqMxB, "
                "opqM,pqM, binary, binary-rr, itq, rabitq, +rescore); an expert faiss string's size is known only "
                "after a build"
            )
        if encoding.refine:
            raise BadInputError(
                f"encoding {name!r}: tune does not score +refine (float32 vectors in memory beside the codes); "
                f"tune {encoding.spec.removesuffix('+refine')} or its +rescore form (vectors on disk), and add "
                "+refine when you build the index"
            )
        out.append(encoding.spec)
    return list(dict.fromkeys(out))


def check_pair_encodings(names: Sequence[str]) -> None:
    """Refuse, for scored pairs, the encodings only an index's search can score (RaBitQ, ``+rescore``): a pair
    needs one score between its two sentences, which a search over stored codes does not give."""
    for name in names:
        if name != ALL_ENCODINGS and parse_encoding(name).scoring == "search":
            raise BadInputError(
                f"encoding {name!r} is scored through an index's search (RaBitQ's estimator, rescoring), which "
                "ranks documents for queries; scored pairs need one score per pair. Tune it on retrieval data "
                "(--dataset), or give binary, binary-rr or itq (scored as their sign codes)"
            )


def encoding_bytes(encoding: str, dim: int) -> int:
    """Code bytes one vector of dimension ``dim`` takes in memory under ``encoding`` (see the module docstring;
    what ``--max-bytes-per-vector`` counts)."""
    return parse_encoding(encoding).code_bytes(dim)


def encoding_disk_bytes(encoding: str, dim: int) -> int:
    """Bytes one vector of dimension ``dim`` takes on disk beyond its code: a ``+rescore`` rescoring vector."""
    return parse_encoding(encoding).disk_bytes(dim)


def check_transforms(specs: Sequence[str]) -> list[str]:
    """Canonical, de-duplicated transform specs with ``none`` first (it is always scored: it is the baseline)."""
    out = ["none"]
    for spec in specs:
        if not isinstance(spec, str) or not spec.strip():
            raise BadInputError(f"empty transform candidate; valid forms: {', '.join(SPEC_FORMS)}")
        out.append(canonical_transform(spec))
    return list(dict.fromkeys(out))


def cost_key(candidate: Candidate, dim: int) -> tuple[int, int, int]:
    """What a tie is broken on, cheapest first: bytes per stored vector, then none < linear < flow, then dense
    before a mode that keeps and searches a lexical index too."""
    return encoding_bytes(candidate.encoding, dim), _FAMILY_RANK[candidate.family], int(candidate.mode != "dense")
