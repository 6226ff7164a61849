"""A saved transform's file read and checked with numpy and safetensors alone (no scikit-learn, no torch), so that
a search can read the transform of its index without loading the estimator classes (see ``frozen.py``).

A saved transform is one ``.safetensors`` file: the learned arrays as tensors, and in the safetensors metadata a
JSON header ``{"class", "params", "extra", "format_version", "whitevec", "sha256"}``. ``class`` is the class's
registry key, ``module:qualname``; ``extra`` holds the learned values. ``sha256`` covers the rest of the header
and every tensor's bytes, so an edited file is refused on load; a truncated one fails to parse. Nothing is
pickled, so a file from a stranger is safe to load.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as load_bytes

from whitevec._version import __version__
from whitevec.errors import CorruptFileError

# Format 1 named the class bare ("Whitening"), so any subclass of that name could stand in for a built-in one.
# No release wrote format 1, so it is refused with a clear message rather than kept readable by a second lookup.
FORMAT_VERSION = 2


@dataclass(frozen=True)
class SavedTransform:
    """What a checked file holds: the class key, constructor parameters, learned values and arrays (parameters
    and values as the header gives them: a reader checks that each is a dict, after the class)."""

    key: str
    params: Any
    values: Any
    arrays: dict[str, np.ndarray]


def digest(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
    """sha256 of the header (less its checksum) as canonical JSON and of every array."""
    hasher = hashlib.sha256(json.dumps(header, sort_keys=True, allow_nan=False).encode())
    for key in sorted(arrays):
        array = np.ascontiguousarray(arrays[key])
        hasher.update(key.encode())
        hasher.update(str(array.dtype).encode())
        hasher.update(str(array.shape).encode())
        hasher.update(array.tobytes())
    return hasher.hexdigest()


def safetensors_metadata(data: bytes) -> dict[str, str]:
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


def read_saved(data: bytes, source: str = "<bytes>") -> SavedTransform:
    """The bytes of a saved transform, checked (parsable, whitevec's header, this format, the checksum) and
    parsed; ``source`` names the file in the :class:`CorruptFileError` raised otherwise."""
    try:
        metadata = safetensors_metadata(data)
        arrays = load_bytes(data)
    except (SafetensorError, ValueError) as exc:
        raise CorruptFileError(f"{source} is not a readable whitevec transform ({exc})") from exc
    try:
        header = json.loads(metadata["whitevec"])
    except (KeyError, json.JSONDecodeError) as exc:
        raise CorruptFileError(f"{source} has no whitevec header; it was not written by whitevec") from exc
    if not isinstance(header, dict):
        raise CorruptFileError(f"{source} has a malformed whitevec header")
    version = header.get("format_version")
    if version != FORMAT_VERSION:
        advice = (
            "fit the transform again and save it with this version"
            if isinstance(version, int) and version < FORMAT_VERSION
            else "a newer whitevec wrote it"
        )
        raise CorruptFileError(
            f"{source} has transform format {version}; this whitevec ({__version__}) reads format "
            f"{FORMAT_VERSION}: {advice}"
        )
    if header.get("sha256") != digest({k: v for k, v in header.items() if k != "sha256"}, arrays):
        raise CorruptFileError(f"{source} fails its checksum: the file was edited or damaged")
    return SavedTransform(str(header.get("class")), header.get("params", {}), header.get("extra", {}), arrays)
