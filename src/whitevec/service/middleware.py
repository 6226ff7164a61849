"""ASGI middleware that guards the app before any route runs, outermost first: the Host check, the API key,
then the body's size, time and encoding. Each refuses with a JSON ``{"detail": ...}`` and closes the connection.
Around them all, :class:`BugMiddleware` answers what no handler took with a 500 that keeps the connection, and
:class:`ArrivalMiddleware` tells the worker of each search on its way.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
from collections.abc import Collection, MutableMapping, Sequence
from typing import Any

from fastapi.responses import JSONResponse

from whitevec.service.settings import API_KEY_HEADER, ENV_PREFIX
from whitevec.service.worker import RetrieverWorker

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]


def _refusal(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    # Closing after a refusal: whatever the client still sends is not read, and a stranger keeps no connection.
    return JSONResponse({"detail": detail}, status_code=status, headers={**(headers or {}), "Connection": "close"})


def _header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower case), as sent."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value)
    return None


def peer(address: Sequence[Any] | None) -> str:
    """A client's ``host:port`` for the log."""
    return f"{address[0]}:{address[1]}" if address else "a client"


def host_name(value: str) -> str:
    """The name in a Host header or an allowed_hosts entry, lower case, without port or IPv6 brackets:
    ``Example.org:8000`` -> ``example.org``, ``[::1]:8000`` -> ``::1``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") > 1:  # a bare IPv6 address
        return value
    return value.partition(":")[0]


def is_loopback(name: str) -> bool:
    """``localhost`` or a loopback IP address (127.0.0.0/8, ::1)."""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostCheckMiddleware:
    """Answers 400 to requests whose ``Host`` names neither localhost (or a loopback address), nor the address
    the connection arrived on, nor one of ``allowed``.

    Against DNS rebinding: a web page on a name its owner points at 127.0.0.1 could otherwise read a keyless
    server from the visitor's browser; the browser still sends that name as the Host. An IP address the
    connection really arrived on cannot be rebound, so it is always accepted.
    """

    def __init__(self, app: Any, allowed: Collection[str]) -> None:
        self.app = app
        self.allowed = frozenset(host_name(h) for h in allowed)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = _header(scope, b"host")
        name = host_name(raw.decode("latin-1")) if raw is not None else ""
        server = scope.get("server")
        local = str(server[0]).lower() if server else None
        if name and (is_loopback(name) or name == local or name in self.allowed):
            await self.app(scope, receive, send)
            return
        shown = raw.decode("latin-1")[:100] if raw is not None else "(none)"
        await _refusal(
            400,
            f"Host header {shown!r} is not accepted: this server answers requests addressed to localhost, its own "
            f"IP address or a name in {ENV_PREFIX}ALLOWED_HOSTS (a defence against DNS rebinding)",
        )(scope, receive, send)


class ApiKeyMiddleware:
    """Answers 401 to requests without the right ``X-API-Key`` header before any of their body is read, so a
    stranger learns nothing of the request schema and costs no parsing. Paths in ``open_paths`` or under
    ``open_prefixes`` (liveness, the page, its files, the docs) need no key."""

    def __init__(
        self, app: Any, api_key: str, open_paths: Collection[str], open_prefixes: tuple[str, ...]
    ) -> None:
        self.app = app
        self.expected = api_key.encode("utf-8")
        self.open_paths = frozenset(open_paths)
        self.open_prefixes = open_prefixes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or path in self.open_paths or path.startswith(self.open_prefixes):
            await self.app(scope, receive, send)
            return
        given = _header(scope, API_KEY_HEADER.lower().encode("ascii"))
        # compare_digest takes time independent of where the keys differ.
        if given is not None and hmac.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
            return
        await _refusal(
            401,
            f"missing or wrong {API_KEY_HEADER} header (this server needs the key it was started with)",
            {"WWW-Authenticate": API_KEY_HEADER},
        )(scope, receive, send)


class ReadOnlyMiddleware:
    """Answers 405 to the write routes (``paths``) of a server started without ``--writable``, before any of
    their body is read: a read-only server says so whatever the body holds."""

    def __init__(self, app: Any, paths: Collection[str]) -> None:
        self.app = app
        self.paths = frozenset(paths)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") not in self.paths:
            await self.app(scope, receive, send)
            return
        # An empty Allow: no method writes here (RFC 9110 allows it for a resource that takes none now).
        await _refusal(405, READ_ONLY_DETAIL, {"Allow": ""})(scope, receive, send)


READ_ONLY_DETAIL = "this server is read-only: start it with `whitevec serve --writable` to add or delete documents"


class BodyLimitMiddleware:
    """Reads at most ``max_bytes`` of a request body, within ``timeout_s`` in all, before the app sees it; more
    bytes give 413 at once, a body still unfinished after ``timeout_s`` gives 408, bytes that are not UTF-8 give
    400.

    Chunked bodies carry no Content-Length, so the count is made on the bytes themselves. The time limit is for
    the whole body, not per chunk, so a client trickling a byte at a time cannot hold the request open.
    """

    def __init__(self, app: Any, max_bytes: int, timeout_s: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        too_big = _refusal(413, f"request body is larger than the limit max_body_bytes ({self.max_bytes} bytes)")
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await too_big(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                logger.info(
                    "request body from %s not complete within body_timeout_s (%s s): answered 408, closed",
                    peer(scope.get("client")),
                    self.timeout_s,
                )
                await _refusal(
                    408, f"request body not complete within the limit body_timeout_s ({self.timeout_s} s)"
                )(scope, receive, send)
                return
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


BUG_DETAIL = "internal server error (logged on the server)"


class BugMiddleware:
    """Answers an exception no handler took (a bug) with a logged 500 and keeps the connection: Starlette's own
    last resort re-raises after answering, and uvicorn then drops the connection, so the client's next request on
    it would fail. An exception after the answer began is raised on: only closing ends half an answer."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracked(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_tracked)
        except Exception:
            if started:
                raise
            logger.exception("unexpected error while serving a request")
            await JSONResponse({"detail": BUG_DETAIL}, status_code=500)(scope, receive, send)


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
