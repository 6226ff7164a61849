"""manifest.json of an index folder: what built it, and a sha256 of every file, checked on load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from whitevec._io import atomic_path, sha256_file
from whitevec._version import __version__
from whitevec.errors import CorruptFileError, DataNotFoundError

MANIFEST = "manifest.json"
FORMAT_VERSION = 1


def write_manifest(folder: Path, manifest: dict[str, Any], files: list[str]) -> dict[str, Any]:
    """Add format/version fields and the checksums of ``files`` (names inside ``folder``); write atomically."""
    data = dict(manifest)
    data["format_version"] = FORMAT_VERSION
    data["whitevec"] = __version__
    data["files"] = {
        name: {"sha256": sha256_file(folder / name), "bytes": (folder / name).stat().st_size}
        for name in sorted(files)
    }
    with atomic_path(folder / MANIFEST) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return data


def read_manifest(folder: Path, verify: bool = True) -> dict[str, Any]:
    """Read and check a manifest: format version, and (``verify``) every listed file's presence and sha256.

    Raises:
        DataNotFoundError: ``folder`` is not there or holds no manifest.json (not an index).
        CorruptFileError: unreadable manifest, unknown format version, a missing file or a checksum mismatch
            (the file is named).
    """
    if not folder.is_dir():
        raise DataNotFoundError(f"no index folder at {folder}")
    path = folder / MANIFEST
    if not path.is_file():
        raise DataNotFoundError(
            f"{folder} is not a whitevec index (no {MANIFEST}); build one with `whitevec index build`"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptFileError(f"{path} is not readable JSON ({exc}); rebuild the index") from exc
    if not isinstance(data, dict) or data.get("format_version") != FORMAT_VERSION:
        found = data.get("format_version") if isinstance(data, dict) else None
        raise CorruptFileError(
            f"{path} has index format {found!r}; this whitevec ({__version__}) reads format {FORMAT_VERSION}"
        )
    files = data.get("files")
    if not isinstance(files, dict):
        raise CorruptFileError(f"{path} lists no files; rebuild the index")
    if verify:
        for name, info in files.items():
            file = folder / name
            if not file.is_file():
                raise CorruptFileError(f"index file {file} is missing; rebuild the index")
            if sha256_file(file) != info.get("sha256"):
                raise CorruptFileError(
                    f"index file {file} fails its checksum (edited or damaged since the build); rebuild the index"
                )
    return data
