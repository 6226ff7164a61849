"""Where a workflow runs (``local``: this process; ``ray``: an actor pool on a Ray cluster) and how it makes its
encoder once every check has passed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from whitevec.errors import BadInputError

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder

ENGINES = ("local", "ray")


def check_engine(engine: str) -> bool:
    """True for ``ray``, False for ``local``; BadInputError for anything else."""
    value = engine.strip().lower()
    if value not in ENGINES:
        raise BadInputError(f"unknown --engine {engine!r}; valid: {', '.join(ENGINES)}")
    return value == "ray"


def make(encoder: Mapping[str, Any], make_encoder: Callable[..., AnyEncoder] | None = None) -> AnyEncoder:
    """``make_encoder(**encoder)``; by default :func:`whitevec.encoders.loading.load_encoder` (an Encoder, torch
    imported
    only now, or a StaticEncoder for a static folder)."""
    if make_encoder is None:
        from whitevec.encoders.loading import load_encoder

        make_encoder = load_encoder
    return make_encoder(**encoder)
