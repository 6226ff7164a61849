"""whitevec: semantic vector recall on isotropic sentence embeddings.

text --Encoder--> vectors --Transform--> index | evaluation | diagnostics
"""

from typing import Any

from whitevec._version import __version__
from whitevec.errors import (
    BadInputError,
    CorruptFileError,
    DataNotFoundError,
    DimensionMismatchError,
    ModelNotFoundError,
    WhitevecError,
)

__all__ = [
    "BadInputError",
    "CorruptFileError",
    "DataNotFoundError",
    "DimensionMismatchError",
    "ModelNotFoundError",
    "TunedConfig",
    "WhitevecError",
    "__version__",
    "apply_config",
    "tune",
]

_LAZY = {"tune", "TunedConfig", "apply_config"}


def __getattr__(name: str) -> Any:
    # whitevec.tune and the configuration it writes, without importing torch at ``import whitevec``.
    if name in _LAZY:
        import whitevec.tuning

        return getattr(whitevec.tuning, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
