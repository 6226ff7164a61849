"""The search space of ``whitevec tune``: a candidate is model x pooling x transform x encoding.

Transforms are the spec strings of :func:`whitevec.transforms.make_transform`. The default grid is ``none``,
``center``, ``normalize``, ``abtt-D`` for a few D, whitening over k x beta in {0, 1} x gamma in {0, 0.25, 0.5, 1},
and ``flow``. Two grid points equal ones already in it and are left out: whitening with gamma 0 and all d
dimensions is a rotation (beta 0: cosines exactly those of ``none``) or a centring (beta 1: ``center``).

Encodings (how the index stores each vector) are the last axis. Only ``float32`` exists today; an encoding
declares its bits per dimension, so a candidate's bytes per vector follow from its output dimension and
``max_bytes_per_vector`` can filter on it. The index compression work adds entries to :data:`ENCODINGS` (and
:func:`whitevec.tuning.run.encoded_vectors` applies them before scoring); nothing else here changes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from whitevec.errors import BadInputError
from whitevec.transforms import SPEC_FORMS, AllButTheTop, Whitening, make_transform, whitening_spec


@dataclass(frozen=True)
class Encoding:
    """How an index stores one vector: ``bits_per_dim`` bits per dimension (plus ``overhead_bytes``). A code
    whose size does not follow the dimension (PQ: M bytes) is a subclass overriding :meth:`bytes_per_vector`."""

    name: str
    bits_per_dim: float
    overhead_bytes: int = 0

    def bytes_per_vector(self, dim: int) -> int:
        """Bytes one stored vector of dimension ``dim`` takes."""
        return math.ceil(dim * self.bits_per_dim / 8) + self.overhead_bytes


ENCODINGS: dict[str, Encoding] = {"float32": Encoding("float32", 32.0)}
"""The encodings tune can search. The index compression work adds fp16, SQ8, SQ4, PQ, OPQ, IVF-PQ here."""

# Tie-breaking cost of a transform family: no transform, then linear maps, then the non-linear flow.
_FAMILY_RANK = {"none": 0, "linear": 1, "flow": 2}

WHITENING_BETAS = (0.0, 1.0)
WHITENING_GAMMAS = (0.0, 0.25, 0.5, 1.0)


@dataclass(frozen=True)
class Candidate:
    """One configuration tune scores: a model, a pooling, a transform spec and an encoding."""

    model: str
    pooling: str
    transform: str
    encoding: str = "float32"

    @property
    def family(self) -> str:
        """``none``, ``linear`` or ``flow``: the cheaper family wins a tie."""
        if self.transform == "none":
            return "none"
        return "flow" if self.transform.startswith("flow") else "linear"

    @property
    def label(self) -> str:
        return f"{self.model} / {self.pooling} / {self.transform} / {self.encoding}"


def canonical_transform(spec: str) -> str:
    """The one spelling of a transform spec (``raw`` -> ``none``, ``whitening-beta1`` -> ``whitening``, ...);
    raises BadInputError listing the valid forms for an unknown one."""
    transform = make_transform(spec)
    text = spec.strip().lower()
    if transform is None:
        return "none"
    if isinstance(transform, Whitening):
        return whitening_spec(transform.n_components, float(transform.beta), float(transform.gamma))
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
                specs.append(whitening_spec(k, beta, gamma))
    if include_flow:
        specs.append("flow")
    return specs


def check_encodings(names: Sequence[str]) -> list[str]:
    """Known encoding names, lower-cased; raises BadInputError listing the valid ones."""
    out = []
    for name in names:
        key = name.strip().lower()
        if key not in ENCODINGS:
            raise BadInputError(f"unknown encoding {name!r}; valid encodings: {', '.join(ENCODINGS)}")
        out.append(key)
    if not out:
        raise BadInputError(f"give at least one encoding; valid encodings: {', '.join(ENCODINGS)}")
    return list(dict.fromkeys(out))


def check_transforms(specs: Sequence[str]) -> list[str]:
    """Canonical, de-duplicated transform specs with ``none`` first (it is always scored: it is the baseline)."""
    out = ["none"]
    for spec in specs:
        if not isinstance(spec, str) or not spec.strip():
            raise BadInputError(f"empty transform candidate; valid forms: {', '.join(SPEC_FORMS)}")
        out.append(canonical_transform(spec))
    return list(dict.fromkeys(out))


def cost_key(candidate: Candidate, dim: int) -> tuple[int, int]:
    """What a tie is broken on, cheapest first: bytes per stored vector, then none < linear < flow."""
    return ENCODINGS[candidate.encoding].bytes_per_vector(dim), _FAMILY_RANK[candidate.family]
