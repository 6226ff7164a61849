"""HTTP service for a whitevec index (needs the ``serve`` extra: fastapi, uvicorn)."""

from whitevec.service.settings import ServeSettings

__all__ = ["ServeSettings", "create_app", "serve"]


def __getattr__(name: str) -> object:
    # fastapi is an optional extra: import it only when the app itself is asked for.
    if name in ("create_app", "serve", "app_from_env", "public_manifest"):
        from whitevec.service import app

        return getattr(app, name)
    raise AttributeError(name)
