"""The Transform base class and its file format.

A saved transform is one ``.safetensors`` file: the learned arrays as tensors, and in the safetensors metadata a
JSON header ``{"class", "params", "extra", "format_version", "whitevec", "sha256"}``. ``sha256`` covers every
tensor's bytes, so an edited file is refused on load; a truncated one fails to parse. Nothing is pickled, so a
file from a stranger is safe to load.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as load_bytes
from safetensors.numpy import save_file
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import Interval, InvalidParameterError, validate_parameter_constraints
from sklearn.utils.validation import check_is_fitted

from whitevec._io import atomic_path
from whitevec._version import __version__
from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError

FORMAT_VERSION = 1
_REGISTRY: dict[str, type[Transform]] = {}


class BadParameterError(BadInputError, InvalidParameterError):  # type: ignore[misc]
    """A transform parameter is of the wrong type or out of range. A :class:`BadInputError` like every input
    fault, and scikit-learn's ``InvalidParameterError``, which its estimator checks expect."""


class Count(Interval):  # type: ignore[misc]
    """scikit-learn's ``Interval`` of integers, without ``bool``: ``True`` is not a number of components."""

    def is_satisfied_by(self, val: Any) -> bool:
        return not isinstance(val, bool) and bool(super().is_satisfied_by(val))


def _digest(arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for key in sorted(arrays):
        array = np.ascontiguousarray(arrays[key])
        digest.update(key.encode())
        digest.update(str(array.dtype).encode())
        digest.update(str(array.shape).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _safetensors_metadata(data: bytes) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors file in memory: an 8-byte little-endian header length, then the
    JSON header."""
    if len(data) < 8:
        raise ValueError("file too short for a safetensors header")
    size = int.from_bytes(data[:8], "little")
    if size > len(data) - 8:
        raise ValueError("header length beyond the end of the file")
    header = json.loads(data[8 : 8 + size])
    metadata = header.get("__metadata__") if isinstance(header, dict) else None
    return metadata if isinstance(metadata, dict) else {}


class Transform(TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """Base of every whitevec transform: a scikit-learn estimator that saves to safetensors.

    The constructor stores its parameters and nothing else. Every subclass declares a scikit-learn constraint
    list for each constructor parameter in ``_parameter_constraints``, and, when a parameter is bounded by the
    input dimension, overrides ``_check_dimension_params``. ``fit``/``partial_fit`` call ``_validate_params``
    before touching the data and ``_check_dimension_params`` as soon as the data's shape is known, before any
    pass over it, so a bad parameter leaves the transform as it was. Both raise :class:`BadParameterError`.

    Subclasses list their learned array attributes in ``_state_arrays`` (names ending in ``_``) and any other
    learned JSON-serialisable values in ``_state_values``; ``save``/``load`` need nothing more. Subclasses that
    hold state in another form (a torch module) override ``_get_state``/``_set_state``.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    _state_arrays: ClassVar[tuple[str, ...]] = ()
    _state_values: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[cls.__name__] = cls

    # --- parameters ------------------------------------------------------------------------------------
    def _validate_params(self) -> None:
        """Check every parameter against ``_parameter_constraints``; raise :class:`BadParameterError`."""
        try:
            validate_parameter_constraints(
                self._parameter_constraints, self.get_params(deep=False), caller_name=type(self).__name__
            )
        except InvalidParameterError as exc:
            raise BadParameterError(str(exc)) from None

    def _check_dimension_params(self, n_features: int) -> None:
        """Check the parameters bounded by the input dimension ``n_features`` (already validated by
        ``_validate_params``); raise :class:`BadParameterError`. No such parameter by default."""

    # --- state -----------------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        """Raise NotFittedError before a fit, and BadParameterError for a parameter changed since to a value
        that does not fit (a transform may read its parameters when it applies, as Whitening does)."""
        check_is_fitted(self, self._fitted_marker())
        self._validate_params()
        self._check_dimension_params(int(self.n_features_in_))

    def _fitted_marker(self) -> str:
        return self._state_arrays[0] if self._state_arrays else "n_features_in_"

    def _get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        arrays = {name: np.asarray(getattr(self, name)) for name in self._state_arrays}
        values = {name: getattr(self, name) for name in self._state_values}
        return arrays, values

    def _set_state(self, arrays: dict[str, np.ndarray], values: dict[str, Any]) -> None:
        for name in self._state_arrays:
            if name not in arrays:
                raise CorruptFileError(f"saved {type(self).__name__} lacks the array {name!r}")
            setattr(self, name, arrays[name])
        for name, value in values.items():
            setattr(self, name, value)

    # --- persistence -----------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the fitted transform to ``path`` (a ``.safetensors`` file), atomically."""
        self._check_fitted()
        arrays, values = self._get_state()
        arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
        header = {
            "class": type(self).__name__,
            "params": self.get_params(deep=False),
            "extra": values,
            "format_version": FORMAT_VERSION,
            "whitevec": __version__,
            "sha256": _digest(arrays),
        }
        target = Path(path)
        with atomic_path(target) as tmp:
            save_file(arrays, str(tmp), metadata={"whitevec": json.dumps(header)})
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Self:
        """Read a transform saved by :meth:`save`; ``Transform.load`` returns whichever class was saved."""
        source = Path(path)
        if not source.is_file():
            raise DataNotFoundError(f"no saved transform at {source}")
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise CorruptFileError(f"{source} is not a readable whitevec transform ({exc.strerror})") from exc
        return cls.from_bytes(data, str(source))

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<bytes>") -> Self:
        """:meth:`load` from the bytes of a saved file (``source`` names it in errors), e.g. a file a caller has
        already opened and checked."""
        try:
            metadata = _safetensors_metadata(data)
            arrays = load_bytes(data)
        except (SafetensorError, ValueError) as exc:
            raise CorruptFileError(f"{source} is not a readable whitevec transform ({exc})") from exc
        try:
            header = json.loads(metadata["whitevec"])
        except (KeyError, json.JSONDecodeError) as exc:
            raise CorruptFileError(f"{source} has no whitevec header; it was not written by whitevec") from exc
        if header.get("format_version") != FORMAT_VERSION:
            raise CorruptFileError(
                f"{source} has transform format {header.get('format_version')}; this whitevec "
                f"({__version__}) reads format {FORMAT_VERSION}"
            )
        if header.get("sha256") != _digest(arrays):
            raise CorruptFileError(f"{source} fails its checksum: the file was edited or damaged")
        name = header.get("class")
        if name not in _REGISTRY:
            # Some classes (Flow, which needs torch) register only when imported; the package imports them lazily.
            import whitevec.transforms

            with contextlib.suppress(AttributeError, ImportError):
                getattr(whitevec.transforms, str(name))
        klass = _REGISTRY.get(name or "")
        if klass is None:
            raise CorruptFileError(f"{source} holds an unknown transform class {name!r}")
        if not issubclass(klass, cls):
            raise BadInputError(f"{source} holds a {name}, not a {cls.__name__}")
        obj = klass(**header.get("params", {}))
        obj._set_state(arrays, header.get("extra", {}))
        return obj  # type: ignore[return-value]
