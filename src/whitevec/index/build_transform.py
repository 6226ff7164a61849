"""The transform a build stores: a spec made, a saved file loaded or a Transform taken as given
(:func:`resolve_transform`), fitted on the corpus or another file unless it came fitted (:func:`fit_transform`),
and its manifest entry (:func:`transform_info`). The classes load here, at build time only: reading and
searching an index apply a saved transform without them (:mod:`whitevec.transforms.frozen`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from whitevec.errors import BadInputError
from whitevec.index.folder.layout import LINEAR_TRANSFORMS, TRANSFORM_FILE

if TYPE_CHECKING:
    from whitevec.encoders.protocol import EncoderLike
    from whitevec.transforms import Transform


def is_fitted(transform: Transform) -> bool:
    """Whether ``transform`` holds a fit (loaded from a file, or given fitted)."""
    try:
        transform._check_fitted()
    except Exception:  # sklearn's NotFittedError, or a missing attribute
        return False
    return True


def resolve_transform(transform: str | Transform | None) -> tuple[Transform | None, str | None]:
    """``(object, spec)`` for a build's transform: a saved ``.safetensors`` file loaded, a spec string made
    (unfitted), a Transform as given; ``(None, None)`` for none (``None`` or the spec ``none``)."""
    if transform is None:
        return None, None
    from whitevec.transforms import Transform, make_transform

    obj: Transform | None
    if isinstance(transform, str) and transform.strip().lower().endswith(".safetensors"):
        obj, spec = Transform.load(transform), str(transform)
    elif isinstance(transform, str):
        obj, spec = make_transform(transform), transform.strip().lower()
    elif isinstance(transform, Transform):
        obj, spec = transform, type(transform).__name__
    else:
        raise BadInputError(
            f"transform must be a spec string, a Transform or None, got {type(transform).__name__}"
        )
    return (None, None) if obj is None else (obj, spec)


def fit_transform(
    transform: str | Transform | None,
    fit_on: str | os.PathLike[str],
    vectors: np.ndarray,
    encoder: EncoderLike,
    show_progress: bool | None,
) -> tuple[Transform | None, dict[str, Any] | None]:
    """The transform a build stores (fitted on ``vectors`` or on the texts of the file ``fit_on``, unless it
    came fitted) and its manifest entry; ``(None, None)`` for no transform."""
    obj, spec = resolve_transform(transform)
    if obj is None or spec is None:
        return None, None
    source = "given"
    rows = 0
    if not is_fitted(obj):
        if str(fit_on) == "corpus":
            fit_vectors, source = vectors, "corpus"
        else:
            from whitevec.datasets import read_texts_file

            fit_vectors = encoder.encode(read_texts_file(fit_on), show_progress=show_progress)
            source = str(Path(fit_on).expanduser().resolve())
        obj.fit(fit_vectors)
        rows = int(fit_vectors.shape[0])
    return obj, transform_info(obj, spec, source, rows)


def transform_info(obj: Transform, spec: str, source: str, rows: int) -> dict[str, Any]:
    """The manifest's entry for a stored transform: its spec, class, parameters and what it was fitted on."""
    import whitevec.transforms as transforms
    from whitevec.transforms.base import class_key

    linear = tuple(getattr(transforms, name) for name in LINEAR_TRANSFORMS)
    return {
        "spec": spec,
        "class": class_key(type(obj)),
        "params": {k: v for k, v in obj.get_params(deep=False).items() if _jsonable(v)},
        "fit_on": source,
        "fit_rows": rows,
        "linear": isinstance(obj, linear),
        "file": TRANSFORM_FILE,
    }


def _jsonable(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)
