"""Limits and switches of the HTTP service, each with a default and an environment variable to change it."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from typing import Any, Literal

from whitevec.encoders.protocol import COMPUTE_BACKENDS
from whitevec.errors import BadInputError

ENV_PREFIX = "WHITEVEC_SERVE_"
API_KEY_ENV = "WHITEVEC_API_KEY"
INDEX_ENV = "WHITEVEC_SERVE_INDEX"
MODEL_ENV = "WHITEVEC_SERVE_MODEL"  # serve --model, passed to worker processes
API_KEY_HEADER = "X-API-Key"
# A document id in a write, on every surface serve's limits govern (HTTP, MCP): the library takes any non-empty
# string; the bound keeps a body's size in step with max_body_bytes (max_ids ids of this length, \u-escaped, fit
# in the default).
MAX_ID_CHARS = 256

Concurrency = Literal["lock", "batch"]

# A DNS name or an IPv4 address, optionally with a port, or a bracketed IPv6 address: what a Host header holds.
_HOST_NAME = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?)(:[0-9]{1,5})?")


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """What one server accepts. Every field but ``api_key`` is read from ``WHITEVEC_SERVE_<FIELD>``.

    ``api_key`` comes from ``WHITEVEC_API_KEY``: when set, /info, /search, /embed and the write routes need it in
    the ``X-API-Key`` header. ``writable`` (``serve --writable``; off by default) opens the write routes
    (POST /documents, /documents/delete, /compact); without it they answer 405. ``max_ids`` bounds the ids of one
    delete. ``concurrency`` picks how requests share the one encoder: ``batch`` (default, chosen by
    the load benchmark in docs/results/serve.md) gathers the requests waiting at that moment into one encoder
    call, waiting up to ``batch_wait_ms`` for requests already received and up to ``batch_regroup_fraction`` of
    the previous call's duration for as many texts as it carried (see :class:`RetrieverWorker`); ``lock`` runs
    them one at a time. ``compute`` is the encoder's arithmetic for queries: ``index`` (the
    one the index was built with), or ``torch`` (float32), ``bf16`` or ``int8`` (see ``whitevec encode
    --compute``).

    Connections: a client gets ``header_timeout_s`` to send a request's headers (counted from the connection, or
    from the previous response) and ``body_timeout_s`` for its whole body; an idle kept-alive connection closes
    after ``keepalive_s``. At most ``max_connections`` are open per worker process; more are refused with 503.
    ``http`` picks uvicorn's HTTP/1.1 parser, both with these guards: ``httptools`` (in C), ``h11`` (pure
    Python), or ``auto`` (httptools where it is installed: the serve extra installs it).
    On SIGINT/SIGTERM, requests being answered get ``shutdown_grace_s`` to finish.

    ``allowed_hosts`` (comma-separated names, ``*`` for any) extends the ``Host`` headers accepted: without an API
    key, only localhost, loopback addresses and the server's own address are accepted otherwise, against DNS
    rebinding. With a key, the Host is checked only when ``allowed_hosts`` is set.
    """

    max_queries: int = 64
    max_texts: int = 64
    max_text_chars: int = 2000
    max_k: int = 1000
    max_body_bytes: int = 2 << 20  # room for the largest body the default limits allow, even \u-escaped
    concurrency: Concurrency = "batch"
    batch_max_texts: int = 64
    batch_wait_ms: float = 2.0
    batch_regroup_fraction: float = 0.25
    compute: str = "index"
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    keepalive_s: int = 5  # whole seconds: uvicorn's timeout_keep_alive
    shutdown_grace_s: int = 5  # whole seconds: uvicorn's timeout_graceful_shutdown
    max_connections: int = 256
    http: str = "auto"
    allowed_hosts: str = ""
    writable: bool = False
    max_ids: int = 1000
    api_key: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        positive = (
            "max_queries",
            "max_texts",
            "max_text_chars",
            "max_k",
            "max_body_bytes",
            "batch_max_texts",
            "max_ids",
        )
        for name in (*positive, "keepalive_s", "max_connections"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BadInputError(f"serve setting {name} must be a positive integer, got {value!r}")
        for name in ("header_timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 3600:
                raise BadInputError(
                    f"serve setting {name} must be a number of seconds in (0, 3600], got {value!r}"
                )
        grace = self.shutdown_grace_s
        if isinstance(grace, bool) or not isinstance(grace, int) or not 0 <= grace <= 60:
            raise BadInputError(f"serve setting shutdown_grace_s must be a whole number in [0, 60], got {grace!r}")
        for host in self.host_list():
            if host != "*" and not _HOST_NAME.fullmatch(host):
                raise BadInputError(
                    f"serve setting allowed_hosts holds {host!r}, which is not a host name (give names like "
                    "search.example.org or 10.0.0.5, separated by commas, or * for any)"
                )
        if self.http not in ("auto", "h11", "httptools"):
            raise BadInputError(f"serve setting http must be 'auto', 'h11' or 'httptools', got {self.http!r}")
        if self.concurrency not in ("lock", "batch"):
            raise BadInputError(f"serve setting concurrency must be 'lock' or 'batch', got {self.concurrency!r}")
        if not 0 <= self.batch_wait_ms <= 1000:
            raise BadInputError(f"serve setting batch_wait_ms must be in [0, 1000], got {self.batch_wait_ms!r}")
        if not 0 <= self.batch_regroup_fraction <= 1:
            raise BadInputError(
                f"serve setting batch_regroup_fraction must be in [0, 1], got {self.batch_regroup_fraction!r}"
            )
        if self.compute not in ("index", *COMPUTE_BACKENDS):
            raise BadInputError(
                f"serve setting compute must be 'index' or one of {', '.join(COMPUTE_BACKENDS)}, "
                f"got {self.compute!r}"
            )
        if not isinstance(self.writable, bool):
            raise BadInputError(f"serve setting writable must be true or false, got {self.writable!r}")
        if self.api_key is not None and not self.api_key.strip():
            raise BadInputError(f"{API_KEY_ENV} is set but empty; unset it or give a real key")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServeSettings:
        """Defaults, overridden by ``WHITEVEC_SERVE_*`` and ``WHITEVEC_API_KEY`` where they are set."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            if field.name == "api_key":
                continue
            raw = env.get(ENV_PREFIX + field.name.upper())
            if raw is None or raw == "":
                continue
            kind: type[Any] = type(field.default)
            try:
                values[field.name] = _switch(raw) if kind is bool else kind(raw) if kind is not str else raw
            except ValueError:
                what = "switch: give true or false" if kind is bool else f"valid {kind.__name__}"
                raise BadInputError(f"{ENV_PREFIX}{field.name.upper()}={raw!r} is not a {what}") from None
        key = env.get(API_KEY_ENV)
        values["api_key"] = key if key else None
        return cls(**values)  # type: ignore[arg-type]

    def host_list(self) -> tuple[str, ...]:
        """``allowed_hosts`` split at commas, lower-cased, without empty entries."""
        return tuple(h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip())

    def public(self) -> dict[str, object]:
        """The limits as /info shows them (never the key itself, nor the host names the server answers to)."""
        shown: dict[str, object] = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("api_key", "allowed_hosts")
        }
        shown["api_key_required"] = self.api_key is not None
        return shown


_SWITCH_VALUES = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}


def _switch(raw: str) -> bool:
    """A switch from the environment (``bool("false")`` would be True); ValueError for anything else."""
    value = _SWITCH_VALUES.get(raw.strip().lower())
    if value is None:
        raise ValueError(raw)
    return value
