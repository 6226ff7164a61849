"""Post-processing transforms for sentence vectors: whitening, baselines and Flow.

``make_transform(spec)`` turns a CLI spec such as ``"whitening-256"`` into an unfitted transform.

The classes are scikit-learn estimators (Flow a torch one too), so their names load on first use: importing
this package, or ``saved``, ``arithmetic`` or ``frozen`` (a saved whitening applied to a search's queries),
brings in no scikit-learn and no torch.
"""

from __future__ import annotations

import importlib
import math
import re
from typing import TYPE_CHECKING, Any

from whitevec.errors import BadInputError, WhitevecWarning

if TYPE_CHECKING:
    from whitevec.transforms.base import NotAffineError, Transform, is_affine
    from whitevec.transforms.baselines import AllButTheTop, Center, CommonComponentRemoval, Normalize
    from whitevec.transforms.flow import Flow
    from whitevec.transforms.validation import check_vectors
    from whitevec.transforms.whitening import Whitening

__all__ = [
    "AFFINE_SPEC_FORMS",
    "AllButTheTop",
    "Center",
    "CommonComponentRemoval",
    "Flow",
    "Normalize",
    "NotAffineError",
    "Transform",
    "Whitening",
    "WhitevecWarning",
    "check_vectors",
    "is_affine",
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
    "flow-random",
    "sif-pc",
    "usif-pc",
    "usif-pc-M",
    "pca-K",
    "<whitening form>:gamma=G:beta=B",
)
# The forms whose transform is affine (x A + b: Transform.affine), so it folds into a linear step before it.
AFFINE_SPEC_FORMS = tuple(
    form for form in SPEC_FORMS if form not in ("none", "raw", "normalize", "flow", "flow-random")
)
# Knobs a whitening-family spec may set after a colon: "whitening-128:gamma=0.5", "pca-64:beta=0".
_WHITENING_KNOBS = ("gamma", "beta")

# whitening[-K][-betaB][-gammaG]: B and G plain non-negative decimals (0, 0.25, 1), in that order.
_WHITENING_SPEC = re.compile(r"whitening(?:-(\d+))?(?:-beta(\d+(?:\.\d+)?))?(?:-gamma(\d+(?:\.\d+)?))?")


_HOMES = {
    "NotAffineError": "base",
    "Transform": "base",
    "is_affine": "base",
    "AllButTheTop": "baselines",
    "Center": "baselines",
    "CommonComponentRemoval": "baselines",
    "Normalize": "baselines",
    "Flow": "flow",
    "check_vectors": "validation",
    "Whitening": "whitening",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
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

    Forms: ``none``, ``raw``, ``whitening``, ``whitening-K`` (keep K dimensions), ``rotation`` (whitening with
    gamma=0), ``pca-K`` (centred PCA without scaling: rotation keeping K dimensions), ``center``,
    ``normalize``, ``abtt`` (All-but-the-Top, default D), ``abtt-D``, ``flow``, ``flow-random`` (the flow
    started at a random rotation, ``Flow(mixing_init="random")``, as before issue 33), ``sif-pc`` (SIF's removal of
    the first uncentred principal component), ``usif-pc`` / ``usif-pc-M`` (uSIF's soft removal of M = 5 or M
    components; :class:`CommonComponentRemoval`). A whitening, rotation or pca-K
    form may end in ``:gamma=G`` and/or ``:beta=B`` (``whitening-128:gamma=0.5`` is soft whitening,
    ``whitening:beta=0`` skips centring). ``whitening[-K]-betaB-gammaG``, the form :func:`whitening_spec`
    writes, is the same thing spelt without colons (``whitening-256-gamma0.5`` = ``whitening-256:gamma=0.5``).
    """
    from whitevec.transforms.baselines import AllButTheTop, Center, CommonComponentRemoval, Normalize
    from whitevec.transforms.whitening import Whitening

    text = spec.strip().lower() if isinstance(spec, str) else ""
    if text in ("flow", "flow-random"):
        from whitevec.transforms.flow import Flow

        return Flow(mixing_init="random") if text == "flow-random" else Flow()
    suffixed = _WHITENING_SPEC.fullmatch(text)
    if suffixed is not None and (suffixed.group(2) is not None or suffixed.group(3) is not None):
        k, beta, gamma = suffixed.groups()
        knobs = [f"{name}={value}" for name, value in (("beta", beta), ("gamma", gamma)) if value is not None]
        text = ":".join(["whitening" + (f"-{k}" if k is not None else ""), *knobs])
    common = re.fullmatch(r"(u?sif)-pc(?:-(\d+))?", text)
    if common is not None and (common.group(1) == "usif" or common.group(2) is None):
        m = int(common.group(2)) if common.group(2) is not None else (5 if common.group(1) == "usif" else 1)
        if m > 0:
            return CommonComponentRemoval(n_components=m, soft=common.group(1) == "usif")
    text, _, knob_text = text.partition(":")
    if knob_text:
        return _with_knobs(spec, make_transform(text), knob_text)
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
    elif value is not None and value > 0:
        if name == "whitening":
            return Whitening(n_components=value)
        if name == "pca":
            return Whitening(n_components=value, gamma=0.0)
        if name == "abtt":
            return AllButTheTop(n_remove=value)
    raise BadInputError(
        f"unknown transform spec {spec!r}; valid forms: {', '.join(SPEC_FORMS)} (K, D positive integers; B, G "
        "non-negative decimals)"
    )


def _with_knobs(spec: str, transform: Transform | None, knob_text: str) -> Whitening:
    """``transform`` (a whitening form) with the ``gamma=G:beta=B`` settings of ``knob_text``."""
    from whitevec.transforms.whitening import Whitening

    if not isinstance(transform, Whitening):
        raise BadInputError(
            f"transform spec {spec!r}: only whitening, whitening-K, rotation and pca-K take :gamma= / :beta="
        )
    settings: dict[str, float] = {}
    for part in knob_text.split(":"):
        name, _, value = part.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if name not in _WHITENING_KNOBS or not math.isfinite(number):
            allowed = ", ".join(k + "=NUMBER" for k in _WHITENING_KNOBS)
            raise BadInputError(f"transform spec {spec!r}: {part!r} is not one of {allowed}")
        settings[name] = number
    return transform.set_params(**settings)
