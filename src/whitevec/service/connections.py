"""Connection-level protections that uvicorn lacks: a time limit on request headers, a cap on open
connections, and a shutdown that does not wait for clients still sending a body.

uvicorn closes idle connections only after a response (``timeout_keep_alive``); a client that connects and
then sends nothing, or its headers a byte at a time, would hold its connection (and a file descriptor)
forever. :class:`GuardedH11Protocol` and ``GuardedHttpToolsProtocol`` are uvicorn's two HTTP/1.1 protocols (pure
Python h11, and httptools) with those limits added; :class:`ServerConfig` is uvicorn's Config that selects one
(``ServeSettings.http``) and carries the limits from :class:`ServeSettings`.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import logging
import time
from typing import Any, ClassVar

import uvicorn
from uvicorn.config import LOG_LEVELS
from uvicorn.protocols.http.h11_impl import H11Protocol

from whitevec.errors import BadInputError
from whitevec.service.middleware import peer
from whitevec.service.settings import ServeSettings

logger = logging.getLogger(__name__)


@functools.cache
def _settings_from_env() -> ServeSettings:
    return ServeSettings.from_env()


# How long a client refused with 503 may take to close its side before the server closes the connection anyway.
_LINGER_S = 5.0


def _busy_response(limit: int) -> bytes:
    body = json.dumps(
        {"detail": f"the server has as many open connections as the limit max_connections ({limit}); try later"}
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _ConnectionGuards:
    """``header_timeout_s``, ``max_connections`` and a quick shutdown, for either of uvicorn's HTTP/1.1 protocols.

    The header timer runs from the connection's start, and again from each response, until the next request's
    headers are complete; when it fires the connection is closed (logged at info: it is the client's doing, not
    a server error). Slow bodies are the body middleware's business (408).
    """

    _last_busy_warning: ClassVar[float] = 0.0
    # Provided by the uvicorn protocol this is mixed into.
    connections: set[Any]
    cycle: Any
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    client: tuple[str, int] | None

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: Any,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)  # type: ignore[call-arg]
        # Worker processes started by uvicorn get a plain Config: their limits come from the environment, as
        # their app's do (see run.app_from_env).
        settings = getattr(config, "serve_settings", None)
        self.limits: ServeSettings = settings if isinstance(settings, ServeSettings) else _settings_from_env()
        self.header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        self.refused = False
        super().connection_made(transport)  # type: ignore[misc]
        if len(self.connections) > self.limits.max_connections:
            self._refuse_busy()
            return
        self._start_header_timer()

    def data_received(self, data: bytes) -> None:
        if self.refused:  # the request of a client refused with 503: read only to be dropped (see _refuse_busy)
            return
        super().data_received(data)  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def on_response_complete(self) -> None:
        if not self.transport.is_closing() and not getattr(self, "pipeline", None):
            # The next request's headers must come in time too: uvicorn's keep-alive timer stops at their first
            # byte. (A pipelined request already queued has its headers.)
            self._start_header_timer()
        super().on_response_complete()  # type: ignore[misc]

    def shutdown(self) -> None:
        cycle = self.cycle
        if cycle is not None and not cycle.response_started and cycle.more_body:
            # Still sending its body: the app has not acted on the request, so nothing is lost by closing now,
            # and waiting would let a slow client hold up the shutdown.
            self.transport.close()
            return
        super().shutdown()  # type: ignore[misc]

    def _start_header_timer(self) -> None:
        self._stop_header_timer()
        self.header_timer = self.loop.call_later(self.limits.header_timeout_s, self._header_timeout)

    def _stop_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _header_timeout(self) -> None:
        self.header_timer = None
        if self.transport.is_closing():
            return
        logger.info(
            "closed the connection from %s: no complete request headers within header_timeout_s (%s s)",
            peer(self.client),
            self.limits.header_timeout_s,
        )
        self.transport.close()

    def _refuse_busy(self) -> None:
        now = time.monotonic()
        if now - _ConnectionGuards._last_busy_warning > 10:  # one line per 10 s, not one per refused client
            _ConnectionGuards._last_busy_warning = now
            logger.warning(
                "refusing connections: max_connections (%d) are open in this process", self.limits.max_connections
            )
        # A refused client does not hold one of the places, while it lingers below.
        self.refused = True
        self.connections.discard(self)
        self.transport.write(_busy_response(self.limits.max_connections))
        # Closing at once, with the client's request unread or still arriving, makes the kernel answer with a
        # reset, which discards the 503 before the client reads it. So half-close (the 503, then end of data) and
        # read until the client closes its side (eof_received: the transport then closes), as nginx's lingering
        # close does; a client that never closes is cut off after _LINGER_S.
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.header_timer = self.loop.call_later(_LINGER_S, self.transport.close)  # connection_lost cancels it


class GuardedH11Protocol(_ConnectionGuards, H11Protocol):
    """uvicorn's pure-Python h11 protocol with the guards (:class:`_ConnectionGuards`)."""

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a new request cycle began: its headers are complete
            self._stop_header_timer()


def _httptools_protocol() -> type | None:
    """uvicorn's httptools protocol with the guards, or None where httptools is not installed."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None

    class GuardedHttpToolsProtocol(_ConnectionGuards, HttpToolsProtocol):
        """uvicorn's protocol on httptools (llhttp, in C) with the guards: about 0.1 ms less CPU per request
        than h11 (benchmarks/results/serve_overhead.md)."""

        def on_headers_complete(self) -> None:
            self._stop_header_timer()
            super().on_headers_complete()

    # uvicorn pickles its Config, this class with it, to start worker processes (--workers N); pickle finds a
    # class by its qualified name, so it must be the module-level name the class is bound to below.
    GuardedHttpToolsProtocol.__qualname__ = "GuardedHttpToolsProtocol"
    return GuardedHttpToolsProtocol


GuardedHttpToolsProtocol = _httptools_protocol()


def http_protocol(choice: str) -> type:
    """The guarded protocol class for ServeSettings.http: ``auto`` takes httptools where it is installed."""
    if choice == "h11" or (choice == "auto" and GuardedHttpToolsProtocol is None):
        return GuardedH11Protocol
    if GuardedHttpToolsProtocol is None:
        raise BadInputError(
            "serve setting http is 'httptools' but httptools is not installed (pip install httptools)"
        )
    return GuardedHttpToolsProtocol


def server_options(settings: ServeSettings, log_level: str = "info") -> dict[str, Any]:
    """The uvicorn options that enforce ``settings``' connection limits (for ``uvicorn.run`` or a Config), and a
    logging setup that prints the service's own lines (timeouts, refusals, failed requests) beside uvicorn's."""
    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    log_config["loggers"]["whitevec.service"] = {"handlers": ["default"], "level": LOG_LEVELS[log_level]}
    return {
        "http": http_protocol(settings.http),
        "ws": "none",  # the API has no websocket routes
        "timeout_keep_alive": settings.keepalive_s,
        "timeout_graceful_shutdown": settings.shutdown_grace_s,
        "log_config": log_config,
        "log_level": log_level,
    }


class ServerConfig(uvicorn.Config):
    """uvicorn's Config with :func:`server_options` and the settings themselves, which the protocol reads."""

    def __init__(self, app: Any, settings: ServeSettings, log_level: str = "info", **kwargs: Any) -> None:
        super().__init__(app, **server_options(settings, log_level), **kwargs)
        self.serve_settings = settings
