"""HTTP service for a whitevec index (needs the ``serve`` extra: fastapi, uvicorn)."""

import importlib

from whitevec.service.settings import ServeSettings

__all__ = ["ServeSettings", "create_app", "serve"]

# name -> the module that defines it
_LAZY = {"create_app": "app", "public_manifest": "manifest", "serve": "run", "app_from_env": "run"}


def __getattr__(name: str) -> object:
    # fastapi is an optional extra: import it only when the app itself is asked for.
    if name in _LAZY:
        module = importlib.import_module(f"whitevec.service.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(name)
