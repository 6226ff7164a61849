"""Post-processing transforms for sentence vectors: whitening, baselines and (lazily, it needs torch) Flow.

``make_transform(spec)`` turns a CLI spec such as ``"whitening-256"`` into an unfitted transform.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from whitevec.errors import BadInputError, WhitevecWarning
from whitevec.transforms.base import Transform
from whitevec.transforms.baselines import AllButTheTop, Center, Normalize
from whitevec.transforms.validation import check_vectors
from whitevec.transforms.whitening import Whitening

if TYPE_CHECKING:
    from whitevec.transforms.flow import Flow

__all__ = [
    "AllButTheTop",
    "Center",
    "Flow",
    "Normalize",
    "Transform",
    "Whitening",
    "WhitevecWarning",
    "check_vectors",
    "make_transform",
    "whitening_spec",
]

SPEC_FORMS = (
    "none",
    "raw",
    "whitening",
    "whitening-K",
    "whitening[-K]-betaB-gammaG",
    "rotation",
    "center",
    "normalize",
    "abtt",
    "abtt-D",
    "flow",
)

# whitening[-K][-betaB][-gammaG]: B and G plain non-negative decimals (0, 0.25, 1), in that order.
_WHITENING_SPEC = re.compile(r"whitening(?:-(\d+))?(?:-beta(\d+(?:\.\d+)?))?(?:-gamma(\d+(?:\.\d+)?))?")


def __getattr__(name: str) -> Any:
    # Flow pulls in torch; import it only when someone asks for it.
    if name == "Flow":
        from whitevec.transforms.flow import Flow

        return Flow
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def whitening_spec(n_components: int | None = None, beta: float = 1.0, gamma: float = 1.0) -> str:
    """The spec :func:`make_transform` reads back as ``Whitening(n_components, beta, gamma)``: defaults are left
    out, so ``whitening_spec(256)`` is ``"whitening-256"`` and ``whitening_spec(None, 0, 0.5)`` is
    ``"whitening-beta0-gamma0.5"``."""
    if beta < 0 or gamma < 0:
        raise BadInputError(f"a whitening spec holds beta, gamma >= 0; got beta={beta}, gamma={gamma}")
    parts = ["whitening"]
    if n_components is not None:
        parts.append(str(int(n_components)))
    if beta != 1.0:
        parts.append(f"beta{beta:g}")
    if gamma != 1.0:
        parts.append(f"gamma{gamma:g}")
    return "-".join(parts)


def make_transform(spec: str) -> Transform | None:
    """Parse a CLI transform spec into an unfitted transform; ``"none"``/``"raw"`` give ``None``.

    Forms: ``none``, ``raw``, ``whitening``, ``whitening-K`` (keep K dimensions), ``whitening[-K]-betaB-gammaG``
    (either suffix may be left out: ``whitening-256-gamma0.5`` is ``Whitening(256, beta=1, gamma=0.5)``;
    :func:`whitening_spec` writes them), ``rotation`` (whitening with gamma=0), ``center``, ``normalize``,
    ``abtt`` (All-but-the-Top, default D), ``abtt-D``, ``flow``.
    """
    text = spec.strip().lower() if isinstance(spec, str) else ""
    whitening = _WHITENING_SPEC.fullmatch(text)
    if whitening is not None and (whitening.group(2) is not None or whitening.group(3) is not None):
        k, beta, gamma = whitening.groups()
        if k is None or int(k) > 0:
            return Whitening(
                n_components=None if k is None else int(k),
                beta=1.0 if beta is None else float(beta),
                gamma=1.0 if gamma is None else float(gamma),
            )
    match = re.fullmatch(r"([a-z]+)(?:-(\d+))?", text)
    name, number = (match.group(1), match.group(2)) if match else ("", None)
    value = int(number) if number is not None else None
    if number is None:
        if name in ("none", "raw"):
            return None
        if name == "whitening":
            return Whitening()
        if name == "rotation":
            return Whitening(gamma=0.0)
        if name == "center":
            return Center()
        if name == "normalize":
            return Normalize()
        if name == "abtt":
            return AllButTheTop()
        if name == "flow":
            from whitevec.transforms.flow import Flow

            return Flow()
    elif value is not None and value > 0:
        if name == "whitening":
            return Whitening(n_components=value)
        if name == "abtt":
            return AllButTheTop(n_remove=value)
    raise BadInputError(
        f"unknown transform spec {spec!r}; valid forms: {', '.join(SPEC_FORMS)} (K, D positive integers; B, G "
        "non-negative decimals)"
    )
