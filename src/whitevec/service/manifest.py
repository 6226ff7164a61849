"""What /info may show of an index manifest: nothing that tells where files live on the server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_PATH_KEYS = ("path", "dir", "folder", "file", "uri", "root")


def public_manifest(manifest: Any) -> Any:
    """The manifest without anything that tells where files live: path-like keys are dropped, absolute paths
    in values are cut to their last part (a model loaded from /home/x/models/m shows as ``m``)."""
    if isinstance(manifest, dict):
        out: dict[str, Any] = {}
        for key, value in manifest.items():
            name = str(key).lower()
            if any(name == p or name.endswith("_" + p) for p in _PATH_KEYS):
                continue
            out[str(key)] = public_manifest(value)
        return out
    if isinstance(manifest, list | tuple):
        return [public_manifest(v) for v in manifest]
    if isinstance(manifest, str) and _looks_like_path(manifest):
        return Path(manifest).name or manifest
    return manifest


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "~", "\\\\", "file:")) or (len(value) > 2 and value[1:3] in (":\\", ":/"))
