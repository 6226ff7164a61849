"""The HTTP face of a Retriever: /health, /info, /search, /embed, OpenAPI docs at /docs, a search page at /.

The app holds no retrieval logic: it checks requests against the limits in :class:`ServeSettings`, hands the
texts to one worker thread that owns the retriever (see :class:`RetrieverWorker`), and shapes the answer.
Starting a server is :mod:`whitevec.service.run`'s job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI, HTTPException, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.security import APIKeyHeader
from fastapi.staticfiles import StaticFiles

from whitevec._version import __version__
from whitevec.errors import BadInputError, DimensionMismatchError, WhitevecError
from whitevec.service.manifest import public_manifest
from whitevec.service.middleware import ApiKeyMiddleware, BodyLimitMiddleware, HostCheckMiddleware
from whitevec.service.schemas import (
    EmbedRequest,
    EmbedResponse,
    ErrorResponse,
    HealthResponse,
    QueryResult,
    SearchRequest,
    SearchResponse,
    ValidationErrorResponse,
)
from whitevec.service.settings import API_KEY_ENV, API_KEY_HEADER, ServeSettings
from whitevec.service.worker import RetrieverLike, RetrieverWorker

logger = logging.getLogger(__name__)

STATIC_DIR = Path(str(resources.files("whitevec.service") / "static"))

# The page runs only its own script and stylesheet: document text can never become code (defence in depth
# beside app.js writing text with textContent only).
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


# Requests still running after the shutdown grace are cancelled; the worker thread may be inside a long encoder
# call then, and a daemon thread need not be waited for long.
WORKER_CLOSE_S = 2.0

_ERRORS = {
    400: "The Host header names another server (a defence against DNS rebinding), or the body is not UTF-8.",
    401: f"Missing or wrong {API_KEY_HEADER} header (servers started with {API_KEY_ENV} only).",
    408: "The body did not arrive within body_timeout_s.",
    413: "The body is larger than max_body_bytes.",
    422: "The body breaks the schema or a limit (max_queries, max_texts, max_text_chars, max_k).",
    503: "The worker thread that owns the retriever has stopped.",
}


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error answers a route can give."""
    return {
        code: {"model": ValidationErrorResponse if code == 422 else ErrorResponse, "description": _ERRORS[code]}
        for code in codes
    }


# ---- helpers --------------------------------------------------------------------------------------------
def _check_texts(texts: list[str], field_name: str, max_count: int, count_setting: str, max_chars: int) -> None:
    if len(texts) > max_count:
        raise HTTPException(
            422, f"too many {field_name}: {len(texts)} given, the limit {count_setting} is {max_count}"
        )
    for i, text in enumerate(texts):
        if not text.strip():
            raise HTTPException(422, f"{field_name}[{i}] is empty or only whitespace")
        if len(text) > max_chars:
            raise HTTPException(
                422,
                f"{field_name}[{i}] has {len(text)} characters, the limit max_text_chars is {max_chars}",
            )
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise HTTPException(
                422, f"{field_name}[{i}] holds an unpaired surrogate escape (\\ud800-\\udfff); send valid text"
            ) from None


def _error_message(errors: Sequence[Any]) -> tuple[str, list[dict[str, Any]]]:
    """A one-line message and a JSON-safe list from pydantic/FastAPI validation errors (whose ``input`` may be
    raw bytes that JSON cannot hold)."""
    clean: list[dict[str, Any]] = []
    parts: list[str] = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ())]
        msg = str(error.get("msg", "invalid"))
        kind = str(error.get("type", ""))
        where = ".".join(p for p in loc if p != "body") or "body"
        if kind == "json_invalid":
            msg = f"body is not valid JSON ({error.get('ctx', {}).get('error', msg)})"
            where = "body"
        elif kind == "extra_forbidden":
            msg = "unknown field; a request may only hold the documented fields"
        clean.append({"loc": loc, "msg": msg, "type": kind})
        parts.append(f"{where}: {msg}")
    return "invalid request: " + "; ".join(parts), clean


# ---- the app --------------------------------------------------------------------------------------------
def create_app(retriever: RetrieverLike, settings: ServeSettings | None = None) -> FastAPI:
    """A FastAPI app serving ``retriever`` under ``settings`` (default: :meth:`ServeSettings.from_env`)."""
    settings = settings if settings is not None else ServeSettings.from_env()
    worker = RetrieverWorker(retriever, settings.concurrency, settings.batch_max_texts, settings.batch_wait_ms)
    manifest = public_manifest(dict(retriever.manifest))

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await asyncio.to_thread(worker.close, WORKER_CLOSE_S)

    app = FastAPI(
        title="whitevec",
        version=__version__,
        summary="Search an index of whitened sentence vectors.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.worker = worker
    app.state.retriever = retriever

    key_header = APIKeyHeader(
        name=API_KEY_HEADER,
        auto_error=False,
        description=f"Needed when the server was started with {API_KEY_ENV} set.",
    )
    # Only documents the header in OpenAPI; ApiKeyMiddleware checks it before any body is read.
    secured = [Security(key_header)] if settings.api_key is not None else []

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, errors = _error_message(exc.errors())
        return JSONResponse({"detail": message, "errors": errors}, status_code=422)

    @app.exception_handler(WhitevecError)
    async def _whitevec_error(_: Request, exc: WhitevecError) -> JSONResponse:
        if isinstance(exc, BadInputError | DimensionMismatchError):
            return JSONResponse({"detail": str(exc)}, status_code=422)
        logger.error("request failed: %s", exc)  # the message may name server files: keep it in the log
        return JSONResponse({"detail": "server error (logged on the server)"}, status_code=500)

    @app.exception_handler(Exception)
    async def _bug(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error while serving a request")
        return JSONResponse({"detail": "internal server error (logged on the server)"}, status_code=500)

    @app.get("/health", response_model=HealthResponse, responses=_responses(400, 503), tags=["service"])
    async def health() -> HealthResponse:
        """Liveness: ok while the encoder thread runs (no key needed)."""
        if not worker.alive:
            raise HTTPException(503, "the encoder worker has stopped")
        return HealthResponse(status="ok", count=int(retriever.count))

    @app.get("/info", dependencies=secured, responses=_responses(400, 401), tags=["service"])
    async def info() -> dict[str, Any]:
        """The index manifest (model, pooling, transform, dims, metric, kind, count, versions, checksums),
        without file paths, and the request limits."""
        return {"manifest": manifest, "count": int(retriever.count), "limits": settings.public()}

    @app.post(
        "/search",
        response_model=SearchResponse,
        dependencies=secured,
        responses=_responses(400, 401, 408, 413, 422),
        tags=["recall"],
    )
    async def search(request: SearchRequest) -> SearchResponse:
        """The k documents nearest each query: ids, scores and texts, best first."""
        _check_texts(request.queries, "queries", settings.max_queries, "max_queries", settings.max_text_chars)
        if request.k < 1 or request.k > settings.max_k:
            raise HTTPException(
                422, f"k must be between 1 and the limit max_k ({settings.max_k}), got {request.k}"
            )
        k = max(1, min(request.k, int(retriever.count)))
        hits = await worker.submit("search", list(request.queries), k)
        results = [
            QueryResult(
                query=query,
                ids=[str(h.id) for h in row],
                scores=[float(h.score) for h in row],
                texts=[str(h.text) for h in row],
                metadata=[h.metadata for h in row],
            )
            for query, row in zip(request.queries, hits, strict=True)
        ]
        return SearchResponse(k=k, results=results)

    @app.post(
        "/embed",
        response_model=EmbedResponse,
        dependencies=secured,
        responses=_responses(400, 401, 408, 413, 422),
        tags=["recall"],
    )
    async def embed(request: EmbedRequest) -> EmbedResponse:
        """Vectors for texts, encoded and transformed exactly as the index's documents were."""
        _check_texts(request.texts, "texts", settings.max_texts, "max_texts", settings.max_text_chars)
        vectors = np.asarray(await worker.submit("embed", list(request.texts)), dtype=np.float32)
        return EmbedResponse(dim=int(vectors.shape[1]), vectors=vectors.tolist())

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html", headers=PAGE_HEADERS)

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.middleware("http")
    async def _page_headers(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        response = await call_next(request)
        if request.url.path.startswith("/static/"):
            response.headers.update(PAGE_HEADERS)
        return response

    # Added last runs first: the Host, then the key, then the body.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s)
    if settings.api_key is not None:
        open_paths = {
            "/health",
            "/",
            app.docs_url,
            app.redoc_url,
            app.openapi_url,
            app.swagger_ui_oauth2_redirect_url,
        }
        app.add_middleware(
            ApiKeyMiddleware,
            api_key=settings.api_key,
            open_paths={p for p in open_paths if p},
            open_prefixes=("/static/",),
        )
    hosts = settings.host_list()
    # Without a key the Host check is the defence against DNS rebinding; with one, the key is, and the Host is
    # checked only when allowed_hosts is given.
    if "*" not in hosts and (settings.api_key is None or hosts):
        app.add_middleware(HostCheckMiddleware, allowed=hosts)
    return app
