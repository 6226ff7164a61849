"""The HTTP face of a Retriever: /health, /info, /search, /embed, OpenAPI docs at /docs, a search page at /.

The app holds no retrieval logic: it checks requests against the limits in :class:`ServeSettings`, hands the
texts to one worker thread that owns the retriever (see :class:`RetrieverWorker`), and shapes the answer.
This module builds the app from its parts: the routes (:mod:`~whitevec.service.routes`,
:mod:`~whitevec.service.writes`), the pages (:mod:`~whitevec.service.pages`), the error answers
(:mod:`~whitevec.service.error_answers`) and the middleware. Starting a server is :mod:`whitevec.service.run`'s
job.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from fastapi import FastAPI

from whitevec._version import __version__
from whitevec.service.error_answers import add_error_handlers
from whitevec.service.middleware import (
    ApiKeyMiddleware,
    ArrivalMiddleware,
    BodyLimitMiddleware,
    BugMiddleware,
    HostCheckMiddleware,
    ReadOnlyMiddleware,
)
from whitevec.service.pages import OPEN_PATHS, OPEN_PREFIXES, PAGE_HEADERS, add_page_routes
from whitevec.service.routes import add_recall_routes, add_service_routes, key_guard
from whitevec.service.schemas import UniqueKeysRoute
from whitevec.service.settings import ServeSettings
from whitevec.service.worker import RetrieverLike, RetrieverWorker
from whitevec.service.writes import WRITE_PATHS, add_write_routes

# PAGE_HEADERS: named here too, where the service contract test has always read it.
__all__ = ["PAGE_HEADERS", "create_app"]

# Requests still running after the shutdown grace are cancelled; the worker thread may be inside a long encoder
# call then, and a daemon thread need not be waited for long.
WORKER_CLOSE_S = 2.0


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
        docs_url=None,  # served by add_page_routes from local files, under the page's CSP
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
    )
    app.router.route_class = UniqueKeysRoute
    app.state.settings = settings
    app.state.worker = worker
    app.state.retriever = retriever
    add_error_handlers(app, settings)
    guard = key_guard(settings)
    add_service_routes(app, retriever, worker, settings, guard)
    add_recall_routes(app, retriever, worker, settings, guard)
    add_write_routes(app, retriever, worker, settings, guard)
    add_page_routes(app)
    _add_middleware(app, worker, settings)
    return app


def _add_middleware(app: FastAPI, worker: RetrieverWorker, settings: ServeSettings) -> None:
    """The checks before a route runs. Added last runs first: the answer to a bug, the arrival count, the Host,
    the key, a read-only server's refusal of writes, then the body."""
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes, timeout_s=settings.body_timeout_s)
    if not settings.writable:
        app.add_middleware(ReadOnlyMiddleware, paths=WRITE_PATHS)
    if settings.api_key is not None:
        open_paths = {"/health", *OPEN_PATHS, app.openapi_url}
        app.add_middleware(
            ApiKeyMiddleware,
            api_key=settings.api_key,
            open_paths={p for p in open_paths if p},
            open_prefixes=OPEN_PREFIXES,
        )
    hosts = settings.host_list()
    # Without a key the Host check is the defence against DNS rebinding; with one, the key is, and the Host is
    # checked only when allowed_hosts is given.
    if "*" not in hosts and (settings.api_key is None or hosts):
        app.add_middleware(HostCheckMiddleware, allowed=hosts)
    app.add_middleware(ArrivalMiddleware, worker=worker, paths=frozenset({"/search", "/embed"}))
    app.add_middleware(BugMiddleware)
