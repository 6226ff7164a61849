"""Limits and switches of the HTTP service, each with a default and an environment variable to change it."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, Literal

from whitevec.errors import BadInputError

ENV_PREFIX = "WHITEVEC_SERVE_"
API_KEY_ENV = "WHITEVEC_API_KEY"
INDEX_ENV = "WHITEVEC_SERVE_INDEX"
API_KEY_HEADER = "X-API-Key"

Concurrency = Literal["lock", "batch"]


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """What one server accepts. Every field but ``api_key`` is read from ``WHITEVEC_SERVE_<FIELD>``.

    ``api_key`` comes from ``WHITEVEC_API_KEY``: when set, /info, /search and /embed need it in the
    ``X-API-Key`` header. ``concurrency`` picks how requests share the one encoder: ``batch`` (default, chosen by
    the load benchmark in docs/results/serve.md) gathers the requests waiting at that moment into one encoder
    call; ``lock`` runs them one at a time.
    """

    max_queries: int = 64
    max_texts: int = 64
    max_text_chars: int = 2000
    max_k: int = 1000
    max_body_bytes: int = 1 << 20
    concurrency: Concurrency = "batch"
    batch_max_texts: int = 64
    batch_wait_ms: float = 2.0
    api_key: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("max_queries", "max_texts", "max_text_chars", "max_k", "max_body_bytes", "batch_max_texts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise BadInputError(f"serve setting {name} must be a positive integer, got {value!r}")
        if self.concurrency not in ("lock", "batch"):
            raise BadInputError(f"serve setting concurrency must be 'lock' or 'batch', got {self.concurrency!r}")
        if not 0 <= self.batch_wait_ms <= 1000:
            raise BadInputError(f"serve setting batch_wait_ms must be in [0, 1000], got {self.batch_wait_ms!r}")
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
                values[field.name] = kind(raw) if kind is not str else raw
            except ValueError:
                raise BadInputError(
                    f"{ENV_PREFIX}{field.name.upper()}={raw!r} is not a valid {kind.__name__}"
                ) from None
        key = env.get(API_KEY_ENV)
        values["api_key"] = key if key else None
        return cls(**values)  # type: ignore[arg-type]

    def public(self) -> dict[str, object]:
        """The limits as /info shows them (never the key itself)."""
        shown: dict[str, object] = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "api_key"
        }
        shown["api_key_required"] = self.api_key is not None
        return shown
