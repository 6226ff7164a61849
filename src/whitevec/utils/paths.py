"""Where whitevec keeps its own files in the user's cache. Standard library only: the light modules
(``whitevec.encoders.models.resolution``, ``whitevec.preflight``) import it before anything heavy loads."""

from __future__ import annotations

import os
from pathlib import Path


def whitevec_cache_folder(name: str, override_env: str) -> Path:
    """``$<override_env>`` when set, else ``$XDG_CACHE_HOME/whitevec/<name>`` (unset: ``~/.cache``).

    ``whitevec_cache_folder("models", "WHITEVEC_MODELS")`` is where fetched models live,
    ``whitevec_cache_folder("vectors", "WHITEVEC_CACHE")`` the default vector cache.
    """
    if env := os.environ.get(override_env):
        return Path(env).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")).expanduser()
    return cache / "whitevec" / name
