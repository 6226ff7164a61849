"""The HTTP face of a Retriever: /health, /info, /search, /embed, OpenAPI docs at /docs, a search page at /.

The app holds no retrieval logic: it checks requests against the limits in :class:`ServeSettings`, hands the
texts to one worker thread that owns the retriever (see :class:`RetrieverWorker`), and shapes the answer.
Starting a server is :mod:`whitevec.service.run`'s job.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson
from fastapi import FastAPI, HTTPException, Request, Security
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.security import APIKeyHeader
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from whitevec._version import __version__
from whitevec.errors import BadInputError, DimensionMismatchError, IndexDamagedError, WhitevecError
from whitevec.preflight import describe_fault
from whitevec.service.manifest import public_manifest, search_choices
from whitevec.service.middleware import (
    ApiKeyMiddleware,
    BodyLimitMiddleware,
    BugMiddleware,
    HostCheckMiddleware,
    ReadOnlyMiddleware,
)
from whitevec.service.schemas import (
    EmbedResponse,
    ErrorResponse,
    HealthErrorResponse,
    HealthResponse,
    InfoResponse,
    SearchResponse,
    UniqueKeysRoute,
    ValidationErrorResponse,
    request_models,
)
from whitevec.service.settings import API_KEY_ENV, API_KEY_HEADER, ServeSettings
from whitevec.service.worker import HitLike, RetrieverLike, RetrieverWorker, SearchOptions, WorkerStoppedError
from whitevec.service.writes import WRITE_PATHS, add_write_routes, index_info, public_text, write_limit_message


def _swagger_ui_dir() -> Path | None:
    """Swagger UI's files (5.x, which reads OpenAPI 3.1), served from this machine: the serve extra installs
    them with fastapi-offline; only its static folder is used."""
    try:
        folder = Path(str(resources.files("fastapi_offline") / "static"))
    except ModuleNotFoundError:  # pragma: no cover - the serve extra always has it
        return None
    return folder if (folder / "swagger-ui-bundle.js").is_file() else None


SWAGGER_UI_DIR = _swagger_ui_dir()

logger = logging.getLogger(__name__)

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

# Requests still running after the shutdown grace are cancelled; the worker thread may be inside a long encoder
# call then, and a daemon thread need not be waited for long.
WORKER_CLOSE_S = 2.0

# Responses with more hits than this are turned into JSON in a thread, one query at a time, so the event loop
# keeps serving other clients between the pieces (k=1000 for 64 queries is tens of MB).
LARGE_RESPONSE_HITS = 500

_ERRORS = {
    400: "The Host header names another server (a defence against DNS rebinding), or the body is not UTF-8.",
    401: f"Missing or wrong {API_KEY_HEADER} header (servers started with {API_KEY_ENV} only).",
    405: "A write to a server started without --writable (refused before the body is read).",
    408: "The body did not arrive within body_timeout_s.",
    409: "A document id the index already holds, under on_existing 'error' (named; nothing written), or an "
    "index another process wrote to since the server loaded it.",
    413: "The body is larger than max_body_bytes.",
    422: "The body is not JSON or breaks the schema (whose limits are this server's max_queries, max_texts, "
    "max_text_chars, max_k and max_ids), or a write the index cannot take (an id with white space at either end, "
    "a document with no token the model knows).",
    500: "A fault on the server (logged there; the answer does not describe it).",
    503: "The worker thread that owns the retriever has stopped, the server has max_connections open, the "
    "index is damaged (a file unreadable since the server loaded it; /health then says so), or another fault of "
    "the server's environment (a read-only folder, no permission: the one line the CLI prints, its paths from "
    "the index's name on).",
    507: "No space left on the server's disk or in its quota for a write (the one line the CLI prints, its paths "
    "from the index's name on).",
}
_HEALTH_503 = (
    "status 'damaged': a search met an index file truncated or unreadable since the load (logged on the server; "
    "repair or rebuild the index and restart); status 'stopped': the worker thread has stopped."
)
# What a search that met a damaged index answers (the file's path stays in the server's log).
DAMAGED_DETAIL = "the index is damaged: a file became unreadable since the server loaded it (logged on the server)"


# What a full disk or quota says, as an OSError's errno or SQLite's primary result code (SQLITE_FULL).
_NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_SQLITE_FULL = 13


def no_space(exc: BaseException) -> bool:
    """Whether ``exc`` (an environment fault) says the disk or the quota is full."""
    if isinstance(exc, OSError):
        return exc.errno in _NO_SPACE_ERRNOS
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_FULL


def _responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error answers a route can give."""
    return {
        code: {"model": ValidationErrorResponse if code == 422 else ErrorResponse, "description": _ERRORS[code]}
        for code in codes
    }


# ---- errors ---------------------------------------------------------------------------------------------
def _unprocessable(message: str, errors: list[dict[str, Any]]) -> JSONResponse:
    return JSONResponse({"detail": message, "errors": errors}, status_code=422)


# The limit (a ServeSettings field) behind each constrained field of the request schemas.
_COUNT_LIMITS = {"queries": "max_queries", "texts": "max_texts"}
# The search choices' wording (whitevec.index.search.fusion's; the request schema gives each index's own modes).
_FUSION_FORMS = "rrf, rrf:K (K an integer >= 1), convex or convex:ALPHA (0 <= ALPHA <= 1, the dense weight)"
_MODES_OF_INDEX = "those the schema lists (dense; lexical and hybrid need an index with a lexical part)"
_ADD_LEXICAL = "rebuild it with --lexical bm25"


def _limit_message(error: dict[str, Any], loc: list[str], settings: ServeSettings) -> str | None:
    """Our wording, naming the setting, for a broken schema constraint; None for the others."""
    kind = str(error.get("type", ""))
    fields = [p for p in loc if p != "body"]
    value = error.get("input")
    if len(fields) == 1 and fields[0] in _COUNT_LIMITS:
        name = fields[0]
        if kind == "too_long":
            limit = _COUNT_LIMITS[name]
            given = len(value) if isinstance(value, list) else "more"
            return f"too many {name}: {given} given, the limit {limit} is {getattr(settings, limit)}"
        if kind == "too_short":
            return f"{name} is empty; give at least one text"
    if len(fields) == 2 and fields[0] in _COUNT_LIMITS:
        where = f"{fields[0]}[{fields[1]}]"
        if kind == "string_too_long" and isinstance(value, str):
            return f"{where} has {len(value)} characters, the limit max_text_chars is {settings.max_text_chars}"
        if kind in ("string_too_short", "string_pattern_mismatch"):
            return f"{where} is empty or only whitespace"
        if kind == "string_unicode":  # the text pattern is matched on valid Unicode only
            return f"{where} holds an unpaired surrogate escape (\\ud800-\\udfff); send valid text"
    if fields == ["k"] and kind in ("greater_than_equal", "less_than_equal"):
        return f"k must be between 1 and the limit max_k ({settings.max_k}), got {value}"
    return _search_choice_message(kind, fields, value) or write_limit_message(kind, fields, value, settings)


def _search_choice_message(kind: str, fields: list[str], value: Any) -> str | None:
    """Our wording for a bad mode, fusion or candidates (whose valid values depend on the index); None for the
    other fields."""
    if fields == ["mode"] and kind == "literal_error":
        return f"unknown search mode {value!r} for this index; valid: {_MODES_OF_INDEX}"
    if fields == ["fusion"] and kind in ("string_pattern_mismatch", "string_type"):
        return f"unknown fusion {value!r}; valid: {_FUSION_FORMS}"
    if fields == ["candidates"] and kind in ("greater_than_equal", "int_type"):
        return f"candidates must be an integer >= 1 (each ranker's top candidates x k), got {value!r}"
    if len(fields) == 1 and fields[0] in ("fusion", "candidates") and kind == "extra_forbidden":
        return f"{fields[0]} applies to hybrid search, and this index has no lexical part; {_ADD_LEXICAL}"
    return None


def _error_message(
    errors: Sequence[Any], settings: ServeSettings | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """A one-line message and a JSON-safe list from pydantic/FastAPI validation errors (whose ``input`` may be
    raw bytes that JSON cannot hold)."""
    clean: list[dict[str, Any]] = []
    parts: list[str] = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ())]
        msg = str(error.get("msg", "invalid"))
        kind = str(error.get("type", ""))
        where = ".".join(p for p in loc if p != "body") or "body"
        limit = _limit_message(error, loc, settings) if settings is not None else None
        if kind == "json_invalid":
            msg = f"body is not valid JSON ({error.get('ctx', {}).get('error', msg)})"
            where = "body"
        elif limit is not None:
            msg, where = limit, ""
        elif kind == "extra_forbidden":
            msg = "unknown field; a request may only hold the documented fields"
        clean.append({"loc": loc, "msg": msg, "type": kind})
        parts.append(f"{where}: {msg}" if where else msg)
    return "invalid request: " + "; ".join(parts), clean


# ---- answers as JSON bytes ---------------------------------------------------------------------------------
def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:  # integers beyond 64 bits in metadata, unpaired surrogates in stored text
        return json.dumps(value, ensure_ascii=True).encode("ascii")


def search_json(
    k: int, queries: Sequence[str], hits: Sequence[Sequence[HitLike]], plan: SearchRun | None = None
) -> bytes:
    """A SearchResponse as JSON, built straight from the hits (no model objects), one query at a time; ``plan``:
    the mode, fusion and candidates the search ran with (None: dense)."""
    run = plan if plan is not None else SearchRun("dense", None, None)
    head = {"k": int(k), "mode": run.mode, "fusion": run.fusion, "candidates": run.candidates}
    pieces = [_dumps(head)[:-1], b',"results":[']
    for i, (query, row) in enumerate(zip(queries, hits, strict=True)):
        if i:
            pieces.append(b",")
        pieces.append(
            _dumps(
                {
                    "query": query,
                    "ids": [str(h.id) for h in row],
                    "scores": [float(h.score) for h in row],
                    "texts": [str(h.text) for h in row],
                    "metadata": [h.metadata for h in row],
                    "rankers": [getattr(h, "rankers", None) for h in row],
                    "note": getattr(row, "note", None),
                }
            )
        )
    pieces.append(b"]}")
    return b"".join(pieces)


@dataclass(frozen=True)
class SearchRun:
    """What a /search ran: its ``mode``, and a hybrid one's ``fusion`` spec and ``candidates`` (else None)."""

    mode: str
    fusion: str | None
    candidates: int | None


def embed_json(vectors: np.ndarray, known: np.ndarray) -> bytes:
    """An EmbedResponse as JSON (float32 values written in their shortest exact form); ``known``: a bool per
    text, False where it has no token the model knows."""
    return _dumps(
        {
            "dim": int(vectors.shape[1]),
            "vectors": np.ascontiguousarray(vectors, dtype=np.float32),
            "unknown": np.flatnonzero(~np.asarray(known, dtype=bool)).tolist(),
        }
    )


def _json_response(body: bytes) -> Response:
    return Response(body, media_type="application/json")


# ---- ASGI wrappers -----------------------------------------------------------------------------------------
Scope = MutableMapping[str, Any]


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


class ArrivalMiddleware:
    """Counts POST /search and /embed requests from their arrival to their job's submission, so the worker's
    batching knows which requests are on their way (:meth:`RetrieverWorker.arrived`)."""

    def __init__(self, app: Any, worker: RetrieverWorker, paths: frozenset[str]) -> None:
        self.app = app
        self.worker = worker
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") not in self.paths:
            await self.app(scope, receive, send)
            return
        self.worker.arrived(scope)
        try:
            await self.app(scope, receive, send)
        finally:
            self.worker.departed(scope)


# ---- the app --------------------------------------------------------------------------------------------
def create_app(retriever: RetrieverLike, settings: ServeSettings | None = None) -> FastAPI:
    """A FastAPI app serving ``retriever`` under ``settings`` (default: :meth:`ServeSettings.from_env`)."""
    settings = settings if settings is not None else ServeSettings.from_env()
    worker = RetrieverWorker(
        retriever,
        settings.concurrency,
        settings.batch_max_texts,
        settings.batch_wait_ms,
        settings.batch_regroup_fraction,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await asyncio.to_thread(worker.close, WORKER_CLOSE_S)

    app = FastAPI(
        title="whitevec",
        version=__version__,
        summary="Search an index of whitened sentence vectors.",
        lifespan=lifespan,
        docs_url=None,  # served by _add_page_routes from local files, under the page's CSP
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    app.router.route_class = UniqueKeysRoute
    app.state.settings = settings
    app.state.worker = worker
    app.state.retriever = retriever
    _add_error_handlers(app, settings)
    guard = _key_guard(settings)
    _add_service_routes(app, retriever, worker, settings, guard)
    _add_recall_routes(app, retriever, worker, settings, guard)
    add_write_routes(app, retriever, worker, settings, guard[0], _responses, guard[1])
    _add_page_routes(app)
    _add_middleware(app, worker, settings)
    return app


# The dependencies of a keyed route (which document the API key header in OpenAPI) and its refusals (401).
KeyGuard = tuple[list[Any], tuple[int, ...]]


def _key_guard(settings: ServeSettings) -> KeyGuard:
    """The dependencies that document the API key header in OpenAPI (ApiKeyMiddleware checks it, before any body
    is read), and the refusal (401) a keyed route can give; neither without a key."""
    if settings.api_key is None:
        return [], ()
    key_header = APIKeyHeader(
        name=API_KEY_HEADER,
        auto_error=False,
        description=f"Needed when the server was started with {API_KEY_ENV} set.",
    )
    return [Security(key_header)], (401,)


def _add_error_handlers(app: FastAPI, settings: ServeSettings) -> None:
    """Bad requests as 422 with one line naming the limit, a stopped worker as 503, faults of the environment as
    507 (no space) or 503 with the CLI's line; bugs are :class:`BugMiddleware`'s logged 500."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _unprocessable(*_error_message(exc.errors(), settings))

    @app.exception_handler(WorkerStoppedError)
    async def _stopped(_: Request, exc: WorkerStoppedError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.exception_handler(IndexDamagedError)
    async def _damaged(_: Request, exc: IndexDamagedError) -> JSONResponse:
        logger.error("index damaged: %s", exc)  # one line naming the file
        return JSONResponse({"detail": DAMAGED_DETAIL}, status_code=503)

    @app.exception_handler(WhitevecError)
    async def _whitevec_error(_: Request, exc: WhitevecError) -> JSONResponse:
        if isinstance(exc, BadInputError | DimensionMismatchError):
            return _unprocessable(str(exc), [{"loc": ["body"], "msg": str(exc), "type": "value_error"}])
        logger.error("request failed: %s", exc)  # the message may name server files: keep it in the log
        return JSONResponse({"detail": "server error (logged on the server)"}, status_code=500)

    @app.exception_handler(OSError)
    @app.exception_handler(sqlite3.Error)
    async def _environment(_: Request, exc: Exception) -> JSONResponse:
        line = describe_fault(exc)
        if line is None:  # a SQLite error that no disk explains: a bug, for BugMiddleware
            raise exc
        status = 507 if no_space(exc) else 503
        logger.error("environment fault, answered %d: %s", status, line)  # the CLI's line (exit 3), no traceback
        path = getattr(app.state.retriever, "path", None)
        return JSONResponse({"detail": line if path is None else public_text(line, Path(path))}, status)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if isinstance(exc.__cause__, RecursionError):  # json.loads gave up on a body nested too deep
            message = f"invalid request: body: JSON nested too deeply to parse ({exc.__cause__})"
            return _unprocessable(message, [{"loc": ["body"], "msg": message, "type": "json_invalid"}])
        return await http_exception_handler(request, exc)


def _unhealthy(status: Literal["damaged", "stopped"], detail: str) -> JSONResponse:
    return JSONResponse(HealthErrorResponse(status=status, detail=detail).model_dump(), status_code=503)


def _add_service_routes(
    app: FastAPI, retriever: RetrieverLike, worker: RetrieverWorker, settings: ServeSettings, guard: KeyGuard
) -> None:
    """/health (open) and /info."""
    search_info = search_choices(dict(retriever.manifest))[1]
    secured, key_refusal = guard

    @app.get(
        "/health",
        response_model=HealthResponse,
        responses={**_responses(400, 500), 503: {"model": HealthErrorResponse, "description": _HEALTH_503}},
        tags=["service"],
    )
    async def health() -> HealthResponse | JSONResponse:
        """Liveness: ok while the encoder thread runs and no search has met a damaged index file (no key
        needed); 503 with the status otherwise."""
        if not worker.alive:
            return _unhealthy("stopped", "the encoder worker has stopped")
        if worker.damage is not None:
            return _unhealthy("damaged", DAMAGED_DETAIL)
        return HealthResponse(
            status="ok",
            count=int(retriever.count),
            encoder_calls=worker.calls,
            encoder_texts=worker.texts,
            encoder_busy_s=round(worker.busy_s, 6),
        )

    @app.get(
        "/info",
        response_model=InfoResponse,
        dependencies=secured,
        responses=_responses(400, *key_refusal, 500, 503),
        tags=["service"],
    )
    async def info() -> InfoResponse:
        """The index manifest (model, pooling, transform, dims, metric, kind, count, versions, checksums),
        without file paths; the version served now (live and deleted counts, segments, version: writes change
        them); what /search can do (its modes, defaults, and the lexical part's analyzer, k1 and b); and the
        request limits."""
        manifest = retriever.manifest  # read once: one version, whatever a write swaps in meanwhile
        version = index_info(manifest, retriever.count)
        return InfoResponse(
            manifest=public_manifest(dict(manifest)),
            count=version.count,
            index=version,
            search=search_info,
            limits=settings.public(),
        )


def _add_recall_routes(
    app: FastAPI, retriever: RetrieverLike, worker: RetrieverWorker, settings: ServeSettings, guard: KeyGuard
) -> None:
    """POST /search and /embed: the texts go to the worker thread, the answer is shaped here."""
    from whitevec.index.filters.language import parse_filter
    from whitevec.index.search.modes import plan_search, search_defaults

    choices = search_choices(dict(retriever.manifest))[0]
    defaults = search_defaults(dict(retriever.manifest))
    own_plan = plan_search(None, None, None, defaults=defaults, has_lexical=choices.hybrid)
    SearchRequest, EmbedRequest = request_models(settings, choices)
    secured, key_refusal = guard

    async def search(body: Any, request: Request) -> Response:
        """The k best documents for each query: ids, scores and texts, best first, and for a lexical or hybrid
        search the rankers that found each. ``mode`` (dense, lexical, hybrid), ``fusion`` and ``candidates``
        left out: the index's own (/info shows them). A query one ranker cannot search (no token the model
        knows; no term left after analysis) gets the other ranking alone, or no hits, and a note. ``filter``: a
        metadata filter; the hits are the k best of the documents that pass."""
        queries: list[str] = list(body.queries)
        given = {name: getattr(body, name, None) for name in ("mode", "fusion", "candidates")}
        # Checked here, before the job queues: a fusion beside another mode is one line, as in the CLI.
        plan = plan_search(**given, defaults=defaults, has_lexical=choices.hybrid)
        hybrid = plan.mode == "hybrid"
        run = SearchRun(plan.mode, plan.fusion.spec if hybrid else None, plan.candidates if hybrid else None)
        # The index's own search goes as a plain one (a retriever without modes serves it); another as its
        # resolved plan, so requests asking the same thing in other words share a batch.
        options: SearchOptions = ()
        if plan != own_plan:
            options = (("mode", plan.mode),)
            if hybrid:
                options += (("fusion", plan.fusion.spec), ("candidates", plan.candidates))
        if body.filter is not None:  # its syntax checked here; its fields by the search (both a one-line 422)
            options += (("filter", parse_filter(body.filter)),)
        k, hits = await worker.search(queries, int(body.k), request.scope, options)
        if len(queries) * k > LARGE_RESPONSE_HITS:
            return _json_response(await asyncio.to_thread(search_json, k, queries, hits, run))
        return _json_response(search_json(k, queries, hits, run))

    async def embed(body: Any, request: Request) -> Response:
        """Vectors for texts, encoded and transformed exactly as the index's documents were; a text with no token
        the model knows gets zeros, and its position is listed in ``unknown``."""
        texts: list[str] = list(body.texts)
        vectors, known = await worker.submit("embed", texts, 0, request.scope)
        return _json_response(embed_json(vectors, known))

    # The request models are made for these settings' limits: name them as the body's type for FastAPI (the
    # string annotations of this module cannot reach a local class).
    search.__annotations__["body"] = SearchRequest
    embed.__annotations__["body"] = EmbedRequest
    for path, endpoint, answer in (("/search", search, SearchResponse), ("/embed", embed, EmbedResponse)):
        app.post(
            path,
            response_model=answer,
            dependencies=secured,
            responses=_responses(400, *key_refusal, 408, 413, 422, 500, 503),
            tags=["recall"],
        )(endpoint)


def _add_page_routes(app: FastAPI) -> None:
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


def _add_middleware(app: FastAPI, worker: RetrieverWorker, settings: ServeSettings) -> None:
    """The checks before a route runs. Added last runs first: the answer to a bug, the arrival count, the Host,
    the key, a read-only server's refusal of writes, then the body."""
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s)
    if not settings.writable:
        app.add_middleware(ReadOnlyMiddleware, paths=WRITE_PATHS)
    if settings.api_key is not None:
        open_paths = {"/health", "/", "/docs", app.openapi_url}
        app.add_middleware(
            ApiKeyMiddleware,
            api_key=settings.api_key,
            open_paths={p for p in open_paths if p},
            open_prefixes=("/static/", "/docs/assets/"),
        )
    hosts = settings.host_list()
    # Without a key the Host check is the defence against DNS rebinding; with one, the key is, and the Host is
    # checked only when allowed_hosts is given.
    if "*" not in hosts and (settings.api_key is None or hosts):
        app.add_middleware(HostCheckMiddleware, allowed=hosts)
    app.add_middleware(ArrivalMiddleware, worker=worker, paths=frozenset({"/search", "/embed"}))
    app.add_middleware(BugMiddleware)
