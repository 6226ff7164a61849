"""The Transform base class: a scikit-learn estimator that saves to one ``.safetensors`` file (the format and its
checks: ``saved.py``, which reads a file without scikit-learn).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
from safetensors.numpy import save_file
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import Interval, InvalidParameterError, validate_parameter_constraints
from sklearn.utils.validation import check_is_fitted

from whitevec._version import __version__
from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError
from whitevec.transforms.saved import FORMAT_VERSION, digest, read_saved
from whitevec.transforms.saved import safetensors_metadata as _safetensors_metadata  # noqa: F401  (index/ reads it here)
from whitevec.transforms.validation import check_vectors
from whitevec.utils.io import atomic_path

# Every Transform subclass, built-in or a user's, under its class_key; defining a class registers it.
_REGISTRY: dict[str, type[Transform]] = {}
_BUILTIN_PACKAGE = "whitevec.transforms"
# A learned array's shape, axis by axis: a fixed length, the name of an integer learned value, or None (any).
Shape = tuple[int | str | None, ...]


class BadParameterError(BadInputError, InvalidParameterError):  # type: ignore[misc]
    """A transform parameter is of the wrong type or out of range. A :class:`BadInputError` like every input
    fault, and scikit-learn's ``InvalidParameterError``, which its estimator checks expect."""


class NotAffineError(BadInputError):
    """A transform asked for its affine form (``x A + b``) that has none: it cannot fold into a linear map."""


class Count(Interval):  # type: ignore[misc]
    """scikit-learn's ``Interval`` of integers, without ``bool``: ``True`` is not a number of components."""

    def is_satisfied_by(self, val: Any) -> bool:
        return not isinstance(val, bool) and bool(super().is_satisfied_by(val))


def class_key(cls: type) -> str:
    """The name a class is registered and saved under: ``module:qualname``, unique per class in a process."""
    return f"{cls.__module__}:{cls.__qualname__}"


def _plain(value: Any) -> Any:
    """A parameter or learned value as plain JSON: numpy scalars become Python ones."""
    return value.item() if isinstance(value, np.generic) else value


def _shape_fits(shape: tuple[int, ...], expected: tuple[int | None, ...]) -> bool:
    return len(shape) == len(expected) and all(e is None or e == n for e, n in zip(expected, shape, strict=True))


def _allows_bool(types: type | tuple[type, ...]) -> bool:
    return bool in (types if isinstance(types, tuple) else (types,))


def _type_names(types: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))


class Transform(TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """Base of every whitevec transform: a scikit-learn estimator that saves to safetensors.

    The constructor stores its parameters and nothing else. Every subclass declares a scikit-learn constraint
    list for each constructor parameter in ``_parameter_constraints``, and, when a parameter is bounded by the
    input dimension, overrides ``_check_dimension_params``. ``fit``/``partial_fit`` call ``_validate_params``
    before touching the data and ``_check_dimension_params`` as soon as the data's shape is known, before any
    pass over it, so a bad parameter leaves the transform as it was. Both raise :class:`BadParameterError`.

    Learned state is declared too, by attribute name, and ``save``/``load`` need nothing more: ``_state_arrays``
    maps each learned array (names ending in ``_``) to its :data:`Shape`, ``_cached_arrays`` likewise for arrays
    derived from those, saved when computed (``None`` until then) so that a reload is bitwise the same, and
    ``_state_values`` maps each other learned value to its JSON type(s). ``_fitted_attribute`` names the
    attribute a fit sets. A loaded array of another shape or a value of another type is refused as corrupt.
    The one exception is state held in another form: Flow's torch module, which Flow writes and rebuilds through
    the ``_get_module_state``/``_set_module_state`` hook (no other class overrides it).
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    _state_arrays: ClassVar[dict[str, Shape]] = {}
    _cached_arrays: ClassVar[dict[str, Shape]] = {}
    _state_values: ClassVar[dict[str, type | tuple[type, ...]]] = {}
    _fitted_attribute: ClassVar[str] = "n_features_in_"
    # The fewest input dimensions a fit accepts (scikit-learn's ensure_min_features).
    _min_features: ClassVar[int] = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _REGISTRY[class_key(cls)] = cls

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

    def _fit_input(
        self, X: Any, *, min_rows: int, dtype: type = np.float64, finite: bool = True, reset: bool = True
    ) -> np.ndarray:
        """The one place a fit checks its parameters and its input, in this order, before anything is learned:

        1. every parameter against ``_parameter_constraints`` (no data touched);
        2. the parameters bounded by the input dimension against the width of ``X``, read from its ``shape``
           where it has one (an array, a memory map), so a bad ``n_components`` fails before a value is read;
        3. ``X`` itself: converted to ``dtype``, checked (``min_rows``, ``_min_features``, NaN/inf unless
           ``finite=False``) and, when ``reset`` is False, its width against the fitted one.
        """
        self._validate_params()
        shape, dtype_in = getattr(X, "shape", None), getattr(X, "dtype", None)
        if (
            isinstance(shape, tuple)
            and len(shape) == 2
            and isinstance(shape[1], int | np.integer)
            and shape[1] >= self._min_features  # too few: step 3 says so in scikit-learn's words
            and not (isinstance(dtype_in, np.dtype) and dtype_in.kind == "c")  # complex: refused in step 3
        ):
            self._check_dimension_params(int(shape[1]))
        data = check_vectors(
            X,
            min_rows=min_rows,
            min_features=self._min_features,
            dtype=dtype,
            finite=finite,
            expected_dim=None if reset else getattr(self, "n_features_in_", None),
            owner=type(self).__name__,
        )
        self._check_dimension_params(data.shape[1])
        return data

    def _apply_input(
        self, X: Any, *, name: str = "X", dtype: type = np.float64, finite: bool = True
    ) -> np.ndarray:
        """What ``transform`` and the like check first: fitted (parameters still valid), then ``X`` converted
        to ``dtype`` and of the fitted width."""
        self._check_fitted()
        return check_vectors(
            X, expected_dim=self.n_features_in_, name=name, dtype=dtype, finite=finite, owner=type(self).__name__
        )

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        # Deliberate departure from scikit-learn's default (float64 preserved): every transform computes in
        # float64 where precision needs it and returns float32, the dtype the encoder produces and FAISS, torch
        # and the vector cache work in; a float64 result would double the memory of a corpus for no gain in the
        # digits the vectors carry. check_transformer_preserve_dtypes reads this list.
        tags.transformer_tags.preserves_dtype = ["float32"]
        return tags

    # --- affine form -----------------------------------------------------------------------------------
    def affine(self) -> tuple[np.ndarray, np.ndarray]:
        """``(A, b)``, float64 of shapes (d, k) and (k,), with ``transform(X) == X @ A + b`` for every ``X``
        (up to float32 rounding of the output): the form in which a fitted transform folds into whatever is
        linear before it, such as a static encoder's token table. Affine transforms override this; the rest
        raise :class:`NotAffineError`."""
        for module in ("baselines", "whitening"):  # the built-in affine classes, registered to be named below
            importlib.import_module(f"{_BUILTIN_PACKAGE}.{module}")
        affine = ", ".join(sorted(klass.__name__ for klass in _REGISTRY.values() if is_affine(klass)))
        raise NotAffineError(
            f"{type(self).__name__} is not an affine map x A + b, so it has no affine form (affine transforms: "
            f"{affine})"
        )

    # --- state -----------------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        """Raise NotFittedError before a fit, and BadParameterError for a parameter changed since to a value
        that does not fit (a transform may read its parameters when it applies, as Whitening does)."""
        check_is_fitted(self, self._fitted_attribute)
        self._validate_params()
        self._check_dimension_params(int(self.n_features_in_))

    def _get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The declared learned arrays (cached ones when computed, and the module's) and values."""
        arrays = {name: np.asarray(getattr(self, name)) for name in self._state_arrays}
        for name in self._cached_arrays:
            if (cached := getattr(self, name, None)) is not None:
                arrays[name] = np.asarray(cached)
        arrays.update(self._get_module_state())
        values = {name: _plain(getattr(self, name)) for name in self._state_values}
        return arrays, values

    def _set_state(self, arrays: dict[str, np.ndarray], values: dict[str, Any], device: str = "cpu") -> None:
        """Restore what :meth:`_get_state` gave, checking each declared value's type and array's shape; a torch
        module goes onto ``device``."""
        kind = type(self).__name__
        for name, types in self._state_values.items():
            if name not in values:
                raise CorruptFileError(f"saved {kind} lacks the value {name!r}")
            value = values[name]
            if not isinstance(value, types) or (isinstance(value, bool) and not _allows_bool(types)):
                raise CorruptFileError(f"saved {kind} has {name} = {value!r}, not of type {_type_names(types)}")
        for name in self._state_values:
            setattr(self, name, values[name])
        rest = dict(arrays)
        for name, shape in (self._state_arrays | self._cached_arrays).items():
            array = rest.pop(name, None)
            if array is None and name in self._state_arrays:
                raise CorruptFileError(f"saved {kind} lacks the array {name!r}")
            expected = tuple(values[axis] if isinstance(axis, str) else axis for axis in shape)
            if array is not None and not _shape_fits(array.shape, expected):
                raise CorruptFileError(f"saved {kind} array {name!r} has shape {array.shape}, not {expected}")
            setattr(self, name, array)
        if "n_features_in_" in self._state_values:
            try:
                self._check_dimension_params(self.n_features_in_)
            except BadParameterError as exc:
                raise CorruptFileError(f"saved {kind} does not fit its own parameters: {exc}") from exc
        self._set_module_state(rest, device)

    def _get_module_state(self) -> dict[str, np.ndarray]:
        """Arrays of state held in another form than declared attributes; none here. Only Flow overrides
        this pair: its state is a torch module."""
        return {}

    def _set_module_state(self, arrays: dict[str, np.ndarray], device: str) -> None:
        """Rebuild that state on ``device`` from the arrays :meth:`_get_module_state` gave (the file's undeclared
        arrays)."""
        if arrays:
            raise CorruptFileError(
                f"saved {type(self).__name__} has undeclared arrays {', '.join(sorted(arrays))}"
            )

    # --- persistence -----------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the fitted transform to ``path`` (a ``.safetensors`` file), atomically."""
        self._check_fitted()
        arrays, values = self._get_state()
        arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
        header = {
            "class": class_key(type(self)),
            "params": {name: _plain(value) for name, value in self.get_params(deep=False).items()},
            "extra": values,
            "format_version": FORMAT_VERSION,
            "whitevec": __version__,
        }
        header["sha256"] = digest(header, arrays)
        target = Path(path)
        with atomic_path(target) as tmp:
            save_file(arrays, str(tmp), metadata={"whitevec": json.dumps(header, allow_nan=False)})
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str], device: str = "cpu") -> Self:
        """Read a transform saved by :meth:`save`; ``Transform.load`` returns whichever class was saved.

        A transform that computes with torch (Flow) loads onto ``device``, whatever device it was fitted on (its
        ``device`` parameter becomes this one); the others compute with numpy on the CPU whatever ``device``.
        """
        source = Path(path)
        if not source.is_file():
            raise DataNotFoundError(f"no saved transform at {source}")
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise CorruptFileError(f"{source} is not a readable whitevec transform ({exc.strerror})") from exc
        return cls.from_bytes(data, str(source), device)

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<bytes>", device: str = "cpu") -> Self:
        """:meth:`load` from the bytes of a saved file (``source`` names it in errors), e.g. a file a caller has
        already opened and checked."""
        saved = read_saved(data, source)
        key = saved.key
        module = key.partition(":")[0]
        if key not in _REGISTRY and (module == _BUILTIN_PACKAGE or module.startswith(f"{_BUILTIN_PACKAGE}.")):
            # Flow registers only once its module is imported (it needs torch, which whitevec imports lazily).
            # Only whitevec's own modules are imported on a file's say-so; a user's must be imported already.
            with contextlib.suppress(ImportError):
                importlib.import_module(module)
        klass = _REGISTRY.get(key)
        if klass is None:
            raise CorruptFileError(
                f"{source} holds an unknown transform class {key!r}; import the module that defines it first"
            )
        if not issubclass(klass, cls):
            raise BadInputError(f"{source} holds a {klass.__name__} ({key}), not a {cls.__name__}")
        params, values = saved.params, saved.values
        if not isinstance(params, dict) or not isinstance(values, dict):
            raise CorruptFileError(f"{source} has a malformed whitevec header")
        try:
            obj = klass(**params)
            obj._validate_params()
        except (TypeError, BadParameterError) as exc:
            raise CorruptFileError(f"{source} holds parameters {klass.__name__} cannot take: {exc}") from exc
        obj._set_state(saved.arrays, values, device)
        return obj  # type: ignore[return-value]


def is_affine(transform: Transform | type[Transform]) -> bool:
    """Whether a transform (or class) has an affine form :meth:`Transform.affine`, known before any fit."""
    klass: Any = transform if isinstance(transform, type) else type(transform)
    return bool(klass.affine is not Transform.affine)
