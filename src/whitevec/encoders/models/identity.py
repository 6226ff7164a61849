"""Which model an index was built with, so that its queries are encoded by that model and no other.

A build records three things (:func:`model_record`): the model's resolved folder (``model_path``, absolute), the
name that finds it on any machine (``model_id``: an alias such as ``all-MiniLM-L6-v2`` or a hub id; null when the
model was given as a folder) and a checksum of its contents (``model_sha256``: the weight files and
``tokenizer.json``, by name and bytes). Loading finds the folder again (:func:`index_model_folder`: a folder given
by the user, the recorded folder, or the portable name) and refuses one whose checksum differs, in one line
naming both.

Hashing all-mpnet-base-v2's 420 MB takes a noticeable part of a second, on every ``whitevec search``. Each file's
sha256 is therefore kept in a small JSON cache (``$WHITEVEC_CHECKSUMS`` or ``~/.cache/whitevec/checksums``),
keyed on the file's resolved path, size, mtime_ns, ctime_ns and inode: any write, copy or rename over the file
changes its ctime or inode (which no user tool can set back), so a replaced file is hashed again. The cache is
a convenience: when it cannot be read or written, files are hashed every time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from whitevec.encoders.models.resolution import resolve_model
from whitevec.errors import BadInputError, ModelNotFoundError
from whitevec.utils.io import atomic_path, sha256_file
from whitevec.utils.paths import whitevec_cache_folder

logger = logging.getLogger(__name__)

# What the checksum covers: the tensors, and the tokenizer that maps text to their rows.
_HASHED_PATTERNS = ("*.safetensors", "*.bin", "tokenizer.json")
_CACHE_FILE = "checksums.json"
_CACHE_LIMIT = 4096  # entries kept; a model folder holds a handful of files
# This process's checksums by file identity, before the JSON cache (clearing it starts as a new process would).
checksum_memo: dict[tuple[str, int, int, int, int], str] = {}


def checksum_cache_folder() -> Path:
    """Where verified file checksums are kept: ``$WHITEVEC_CHECKSUMS`` or ``~/.cache/whitevec/checksums``."""
    return whitevec_cache_folder("checksums", "WHITEVEC_CHECKSUMS")


def hashed_files(folder: Path) -> list[Path]:
    """The files of a model folder the checksum covers (see ``_HASHED_PATTERNS``), sorted by name."""
    found = {path for pattern in _HASHED_PATTERNS for path in folder.glob(pattern) if path.is_file()}
    return sorted(found, key=lambda path: path.name)


def model_checksum(folder: Path) -> str:
    """sha256 over the names and contents of a model folder's weight files and tokenizer.json."""
    digest = hashlib.sha256()
    for path in hashed_files(folder):
        digest.update(f"{path.name}:{file_checksum(path)}\n".encode())
    return digest.hexdigest()


def file_checksum(path: Path) -> str:
    """sha256 of a file's bytes, taken from the checksum cache while the file is unchanged (see the module
    docstring for what counts as unchanged), else computed and remembered."""
    resolved = path.resolve()
    info = resolved.stat()
    key = (str(resolved), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
    if key in checksum_memo:
        return checksum_memo[key]
    stamp = {"size": key[1], "mtime_ns": key[2], "ctime_ns": key[3], "inode": key[4]}
    cache = _read_cache()
    entry = cache.get(key[0])
    if isinstance(entry, dict) and all(entry.get(name) == value for name, value in stamp.items()):
        checksum = str(entry.get("sha256"))
    else:
        checksum = sha256_file(resolved)
        cache.pop(key[0], None)  # re-inserted last: the oldest entries are dropped first
        cache[key[0]] = {**stamp, "sha256": checksum}
        _write_cache(cache)
    checksum_memo[key] = checksum
    return checksum


def _read_cache() -> dict[str, Any]:
    try:
        data = json.loads((checksum_cache_folder() / _CACHE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(cache: dict[str, Any]) -> None:
    kept = dict(list(cache.items())[-_CACHE_LIMIT:])
    try:
        with atomic_path(checksum_cache_folder() / _CACHE_FILE) as tmp:
            tmp.write_text(json.dumps(kept, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:  # a read-only home: hash again next time
        logger.debug("checksum cache not written: %s", exc)


def portable_name(name: str) -> str | None:
    """The name that finds a model on another machine: ``name`` itself when it is an alias or hub id, None
    when it names a local folder (relative or absolute)."""
    path = Path(name).expanduser()
    if path.exists() or name.startswith((".", "/", "~")):
        return None
    return name


def model_record(name: str, folder: Path) -> dict[str, Any]:
    """What an index manifest records of the model ``name`` found at ``folder`` (see the module docstring)."""
    return {
        "model_path": str(folder.resolve()),
        "model_id": portable_name(name),
        "model_sha256": model_checksum(folder),
    }


def index_model_folder(manifest: dict[str, Any], model: str | os.PathLike[str] | None = None) -> Path:
    """The folder holding the model an index was built with, checked against the manifest's checksum.

    ``model`` (a folder, alias or hub id) is where the user says it is now; without it, the manifest's folder
    (``model_path``), else its portable name (``model_id``). A manifest written before these were recorded
    resolves its ``model`` as given, as it always did.

    Raises:
        ModelNotFoundError: the recorded folder is gone and no portable name finds the model.
        BadInputError: the folder found holds another model (its checksum differs).
    """
    recorded = manifest.get("model_path")
    if model is not None:
        folder = resolve_model(model)
    elif recorded is None:  # an index built before the location was recorded
        return resolve_model(manifest["model"])
    elif Path(recorded).is_dir():
        folder = Path(recorded)
    elif manifest.get("model_id"):
        folder = resolve_model(manifest["model_id"])
    else:
        raise ModelNotFoundError(
            f"the index's model folder {recorded} is gone; give the folder it moved to (--model PATH, or "
            "model= in Python)"
        )
    check_model_checksum(folder, manifest)
    return folder


def check_model_checksum(folder: Path, manifest: dict[str, Any]) -> None:
    """Refuse a model folder whose contents differ from those the index recorded (nothing recorded: no check)."""
    expected = manifest.get("model_sha256")
    if expected is None:
        return
    found = model_checksum(folder)
    if found != expected:
        raise BadInputError(
            f"the model at {folder} (weights sha256 {found[:12]}) is not the one the index was built with "
            f"({manifest.get('model_path') or manifest['model']}, weights sha256 {expected[:12]}); give --model "
            "the folder of that model, or rebuild the index"
        )
