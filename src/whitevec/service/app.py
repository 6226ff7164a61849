"""The HTTP face of a Retriever: /health, /info, /search, /embed, OpenAPI docs at /docs, a search page at /.

The app holds no retrieval logic: it checks requests against the limits in :class:`ServeSettings`, hands the
texts to one worker thread that owns the retriever (see :class:`EncoderWorker`), and shapes the answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hmac
import ipaddress
import logging
import os
import queue
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.security import APIKeyHeader
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field

from whitevec._version import __version__
from whitevec.errors import BadInputError, DataNotFoundError, DimensionMismatchError, WhitevecError
from whitevec.service.settings import API_KEY_ENV, API_KEY_HEADER, INDEX_ENV, ServeSettings

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


# ---- what the app needs from a retriever ---------------------------------------------------------------
class HitLike(Protocol):
    id: str
    score: float
    text: str
    metadata: dict[str, Any] | None


class RetrieverLike(Protocol):
    """The part of :class:`whitevec.index.Retriever` the service uses (a fake one serves in tests)."""

    @property
    def manifest(self) -> dict[str, Any]: ...

    @property
    def count(self) -> int: ...

    def search(self, queries: list[str], k: int = 10) -> Sequence[Sequence[HitLike]]: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


# ---- sharing one encoder between requests -----------------------------------------------------------------
@dataclass
class _Job:
    kind: Literal["search", "embed"]
    texts: list[str]
    k: int
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)


class EncoderWorker:
    """One thread owns the retriever; requests queue for it, so the model, tokenizer and any SQLite handles
    are only ever touched from that thread.

    ``lock`` mode runs the queued jobs one by one. ``batch`` mode takes every job waiting when the thread gets
    free (after an optional ``wait_ms`` for more, up to ``max_texts`` texts) and runs one search per distinct k
    and one embed: one forward pass for many small requests. When a batched call fails, its jobs run again one
    by one so a bad request cannot fail its neighbours.
    """

    def __init__(self, retriever: RetrieverLike, mode: str = "batch", max_texts: int = 64, wait_ms: float = 0.0):
        self.retriever = retriever
        self.mode = mode
        self.max_texts = max_texts
        self.wait_s = wait_ms / 1000.0
        self.calls = 0  # encoder calls made, for the benchmark and tests (how much batching happened)
        self.jobs = 0
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="whitevec-encoder", daemon=True)
        self._thread.start()

    def submit(self, kind: Literal["search", "embed"], texts: list[str], k: int = 0) -> Awaitable[Any]:
        if not self.alive:
            raise RuntimeError("the encoder worker has stopped")
        job = _Job(kind, texts, k)
        self._queue.put(job)
        return asyncio.wrap_future(job.future)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self, timeout: float = 10.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            if self.mode == "batch":
                stop = self._gather(batch)
            try:
                self._execute(batch)
            except BaseException as exc:  # keep the thread alive: one broken batch must not stop the service
                logger.exception("encoder worker failed on a batch")
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(exc)
            if stop:
                return

    def _gather(self, batch: list[_Job]) -> bool:
        """Add waiting jobs to ``batch`` up to max_texts; True when the stop signal was met."""
        n_texts = len(batch[0].texts)
        deadline = None
        while n_texts < self.max_texts:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                if self.wait_s <= 0:
                    break
                if deadline is None:
                    deadline = time.monotonic() + self.wait_s
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    job = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
            if job is None:
                return True
            batch.append(job)
            n_texts += len(job.texts)
        return False

    def _execute(self, batch: list[_Job]) -> None:
        groups: dict[tuple[str, int], list[_Job]] = {}
        for job in batch:
            if job.future.set_running_or_notify_cancel():
                groups.setdefault((job.kind, job.k), []).append(job)
        for (kind, k), jobs in groups.items():
            try:
                self._call(kind, k, jobs)
            except Exception:
                if len(jobs) == 1:
                    raise
                for job in jobs:  # a batched call failed: find the job at fault by running each alone
                    self._call_one(job)

    def _call(self, kind: str, k: int, jobs: list[_Job]) -> None:
        texts = [t for job in jobs for t in job.texts]
        if len(jobs) == 1:
            self._call_one(jobs[0])
            return
        self.calls += 1
        self.jobs += len(jobs)
        out: Any = self.retriever.search(texts, k=k) if kind == "search" else self.retriever.embed(texts)
        start = 0
        for job in jobs:
            job.future.set_result(out[start : start + len(job.texts)])
            start += len(job.texts)

    def _call_one(self, job: _Job) -> None:
        self.calls += 1
        self.jobs += 1
        try:
            if job.kind == "search":
                result: Any = self.retriever.search(job.texts, k=job.k)
            else:
                result = self.retriever.embed(job.texts)
        except BaseException as exc:
            job.future.set_exception(exc)
        else:
            job.future.set_result(result)


# ---- request and response shapes ------------------------------------------------------------------------
class SearchRequest(BaseModel):
    """Queries to search for; the response gives, per query, the k best documents."""

    model_config = ConfigDict(extra="forbid", strict=True)
    queries: list[str] = Field(min_length=1, description="Query texts, one search each.")
    k: int = Field(10, description="Documents per query (1 to the server's max_k; clamped to the index size).")


class EmbedRequest(BaseModel):
    """Texts to turn into vectors with the index's encoder and transform."""

    model_config = ConfigDict(extra="forbid", strict=True)
    texts: list[str] = Field(min_length=1, description="Texts to embed.")


class QueryResult(BaseModel):
    query: str
    ids: list[str]
    scores: list[float]
    texts: list[str]
    metadata: list[dict[str, Any] | None]


class SearchResponse(BaseModel):
    k: int = Field(description="Documents asked per query after clamping to the index size.")
    results: list[QueryResult]


class EmbedResponse(BaseModel):
    dim: int
    vectors: list[list[float]]


class HealthResponse(BaseModel):
    status: str
    count: int


# ---- helpers --------------------------------------------------------------------------------------------
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


class BodyLimitMiddleware:
    """Reads at most ``max_bytes`` of a request body before the app sees it; more gives 413 at once, bytes
    that are not UTF-8 give 400.

    Chunked bodies carry no Content-Length, so the count is made on the bytes themselves.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        too_big = JSONResponse(
            {"detail": f"request body is larger than the limit max_body_bytes ({self.max_bytes} bytes)"},
            status_code=413,
            headers={"Connection": "close"},
        )
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    await too_big(scope, receive, send)
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await too_big(scope, receive, send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        data = b"".join(chunks)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            # JSON bodies must be UTF-8 (RFC 8259); say so rather than a generic parse failure.
            await JSONResponse(
                {"detail": f"request body is not valid UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start})"},
                status_code=400,
            )(scope, receive, send)
            return
        replay = {"type": "http.request", "body": data, "more_body": False}
        sent = False

        async def replay_receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return replay
            return dict(await receive())

        await self.app(scope, replay_receive, send)


# ---- the app --------------------------------------------------------------------------------------------
def create_app(retriever: RetrieverLike, settings: ServeSettings | None = None) -> FastAPI:
    """A FastAPI app serving ``retriever`` under ``settings`` (default: :meth:`ServeSettings.from_env`)."""
    settings = settings if settings is not None else ServeSettings.from_env()
    worker = EncoderWorker(retriever, settings.concurrency, settings.batch_max_texts, settings.batch_wait_ms)
    manifest = public_manifest(dict(retriever.manifest))

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await asyncio.to_thread(worker.close)

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
    expected = settings.api_key.encode("utf-8") if settings.api_key is not None else None

    def require_key(given: str | None = Depends(key_header)) -> None:
        if expected is None:
            return
        # compare_digest takes time independent of where the strings differ.
        if given is None or not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected):
            raise HTTPException(
                401,
                f"missing or wrong {API_KEY_HEADER} header (this server needs the key it was started with)",
                headers={"WWW-Authenticate": API_KEY_HEADER},
            )

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

    @app.get("/health", response_model=HealthResponse, tags=["service"])
    async def health() -> HealthResponse:
        """Liveness: ok while the encoder thread runs (no key needed)."""
        if not worker.alive:
            raise HTTPException(503, "the encoder worker has stopped")
        return HealthResponse(status="ok", count=int(retriever.count))

    @app.get("/info", dependencies=[Depends(require_key)], tags=["service"])
    async def info() -> dict[str, Any]:
        """The index manifest (model, pooling, transform, dims, metric, kind, count, versions, checksums),
        without file paths, and the request limits."""
        return {"manifest": manifest, "count": int(retriever.count), "limits": settings.public()}

    @app.post("/search", response_model=SearchResponse, dependencies=[Depends(require_key)], tags=["recall"])
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

    @app.post("/embed", response_model=EmbedResponse, dependencies=[Depends(require_key)], tags=["recall"])
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

    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    return app


def load_retriever(index_dir: str | os.PathLike[str]) -> RetrieverLike:
    """``Retriever.load`` with a clear error for a folder that is not there."""
    folder = Path(index_dir)
    if not folder.is_dir():
        raise DataNotFoundError(f"index folder {folder} does not exist; build one with `whitevec index build`")
    from whitevec.index import Retriever

    # No vector cache: a server would otherwise write every query anyone sends into a cache on disk.
    retriever: RetrieverLike = Retriever.load(folder, cache=False)
    return retriever


def app_from_env() -> FastAPI:
    """App factory for ``uvicorn --factory`` (several workers): serves the index in $WHITEVEC_SERVE_INDEX."""
    index_dir = os.environ.get(INDEX_ENV)
    if not index_dir:
        raise BadInputError(f"set {INDEX_ENV} to the index folder to serve")
    return create_app(load_retriever(index_dir), ServeSettings.from_env())


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    index_dir: str | os.PathLike[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    settings: ServeSettings | None = None,
    log_level: str = "info",
) -> None:
    """Load the index (failing before any socket opens when it is missing or corrupt) and serve it."""
    import uvicorn

    if workers < 1:
        raise BadInputError(f"--workers must be at least 1, got {workers}")
    if not 0 <= port <= 65535:
        raise BadInputError(f"--port must be in 0..65535, got {port}")
    settings = settings if settings is not None else ServeSettings.from_env()
    if workers == 1:
        retriever: RetrieverLike | None = load_retriever(index_dir)
    else:
        # Every worker loads the index itself; here only check what fails fast and cheaply (the folder, its
        # checksums, the model's presence), so a bad index stops the command before any process starts.
        from whitevec.index import read_manifest
        from whitevec.models import resolve_model

        read_manifest(Path(index_dir).expanduser(), verify=True)
        resolve_model(read_manifest(Path(index_dir).expanduser(), verify=False)["model"])
        retriever = None
    if not _is_loopback(host) and settings.api_key is None:
        logger.warning(
            "serving on %s without an API key: anyone who reaches this port can query the index; "
            "set %s before binding beyond 127.0.0.1",
            host,
            API_KEY_ENV,
        )
    if retriever is not None:
        uvicorn.run(create_app(retriever, settings), host=host, port=port, log_level=log_level)
        return
    # Each worker process loads its own copy of the index from the folder named in the environment.
    os.environ[INDEX_ENV] = str(Path(index_dir).resolve())
    uvicorn.run(
        "whitevec.service.app:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
    )
