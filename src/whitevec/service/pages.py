"""The service's pages: the search page at /, the API docs at /docs (Swagger UI from this machine's files), and
their static files (``static/``), all under one Content-Security-Policy."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from whitevec.service.middleware import Scope


def _swagger_ui_dir() -> Path | None:
    """Swagger UI's files (5.x, which reads OpenAPI 3.1), served from this machine: the serve extra installs
    them with fastapi-offline; only its static folder is used."""
    try:
        folder = Path(str(resources.files("fastapi_offline") / "static"))
    except ModuleNotFoundError:  # pragma: no cover - the serve extra always has it
        return None
    return folder if (folder / "swagger-ui-bundle.js").is_file() else None


SWAGGER_UI_DIR = _swagger_ui_dir()

STATIC_DIR = Path(str(resources.files("whitevec.service") / "static"))

# The search page and the API docs run only their own scripts and stylesheets: document text can never become
# code (defence in depth beside app.js writing text with textContent only). Images may be data: URIs (Swagger
# UI's stylesheet draws its icons so); an image cannot run code.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# The Swagger UI files /docs needs (the package holds more, such as ReDoc, which /docs does not use).
SWAGGER_FILES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon.png": "image/png",
}
# The pages' paths, open without the API key (the key guards the data, not the pages).
OPEN_PATHS = ("/", "/docs")
OPEN_PREFIXES = ("/static/", "/docs/assets/")


def with_headers(app: Any, headers: dict[str, str]) -> Callable[[Scope, Any, Any], Any]:
    """``app`` (an ASGI app) with ``headers`` added to every response it starts."""
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]

    async def wrapped(scope: Scope, receive: Any, send: Any) -> None:
        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *raw]
            await send(message)

        await app(scope, receive, send_with_headers)

    return wrapped


def add_page_routes(app: FastAPI) -> None:
    """The search page at /, the API docs at /docs (Swagger UI from local files), and their static files."""

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html", headers=PAGE_HEADERS)

    @app.get("/docs", include_in_schema=False)
    async def docs() -> Response:
        if SWAGGER_UI_DIR is None:
            return JSONResponse(
                {"detail": "Swagger UI is not installed (pip install fastapi-offline); see /openapi.json"}, 404
            )
        return FileResponse(STATIC_DIR / "docs.html", media_type="text/html", headers=PAGE_HEADERS)

    @app.get("/docs/assets/{name}", include_in_schema=False)
    async def docs_asset(name: str) -> FileResponse:
        if SWAGGER_UI_DIR is None or name not in SWAGGER_FILES:
            raise HTTPException(404, "not found")
        return FileResponse(SWAGGER_UI_DIR / name, media_type=SWAGGER_FILES[name], headers=PAGE_HEADERS)

    app.mount("/static", with_headers(StaticFiles(directory=STATIC_DIR), PAGE_HEADERS), name="static")
