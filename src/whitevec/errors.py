"""The exceptions whitevec raises on purpose: one base class, a subclass per kind of fault.

The CLI catches :class:`WhitevecError` and prints its message as one line; anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations


class WhitevecError(Exception):
    """Base class of every error whitevec raises deliberately."""


class BadInputError(WhitevecError, ValueError):
    """An argument or input value is not acceptable (wrong type, empty, NaN, out of range)."""


class BadInputTypeError(BadInputError, TypeError):
    """An input of a type whitevec cannot take at all (sparse matrices, non-numbers among vectors): a
    :class:`BadInputError`, and a ``TypeError`` as scikit-learn's estimator checks expect."""


class ModelNotFoundError(WhitevecError, LookupError):
    """A model name could not be resolved to a local folder."""


class DataNotFoundError(WhitevecError, FileNotFoundError):
    """A data set, file or folder that was asked for does not exist."""


class CorruptFileError(WhitevecError):
    """A file whitevec wrote earlier is truncated, edited, or of a format this version cannot read."""


class IndexDamagedError(CorruptFileError):
    """A file of a loaded index became unreadable under it (truncated, shrunk, an I/O error of the storage):
    a fault of the environment, not of the request. The CLI exits 3 for it, the HTTP service answers 503."""


class DimensionMismatchError(WhitevecError, ValueError):
    """Vectors have a different dimension from the one a fitted object expects."""


class WhitevecWarning(UserWarning):
    """whitevec adjusted something to keep going (floored near-zero eigenvalues, an emulated bf16 path)."""
