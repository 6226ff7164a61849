"""What the index asks of an encoder, as a protocol: importable without torch, so code that only passes an
encoder along (the index, tests' stand-ins) can name the type at run time for free."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

# The arithmetic an Encoder computes in (its ``backend=``; CLI ``--compute``): float32, bfloat16 or int8.
COMPUTE_BACKENDS = ("torch", "bf16", "int8")


@runtime_checkable
class EncoderLike(Protocol):
    """Texts to vectors, and a record of how. :class:`whitevec.encoder.Encoder` is one; so is any object with
    these two methods (the tests' hash encoder, a remote model's client).

    ``describe()`` holds ``model`` (name), ``pooling`` (name), ``max_length`` and ``dim`` (vector size); it may
    add ``model_fingerprint`` (same model, same string), ``layers`` (hidden_states indices) and ``backend`` (the
    arithmetic, ``"torch"`` when absent). An index manifest records them, and loading compares them.
    """

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> np.ndarray:
        """float32 vectors, one row per text, in input order."""
        ...

    def describe(self) -> dict[str, Any]:
        """How the vectors are made (see the class docstring for the keys)."""
        ...
