"""whitevec: semantic vector recall on isotropic sentence embeddings.

text --Encoder--> vectors --Transform--> index | evaluation | diagnostics
"""

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
    "WhitevecError",
    "__version__",
]
