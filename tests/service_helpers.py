"""Shared by the service tests and the serve benchmark (no tests here): waiting for a server to answer."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx


def wait_until_healthy(
    base: str,
    what: str,
    timeout_s: float,
    process: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
    poll_s: float = 0.1,
    path: str = "/health",
) -> None:
    """Poll ``base`` + ``path`` (/health) until it answers 200. RuntimeError naming ``what`` when ``timeout_s``
    passes or ``process`` exits first (with the tail of ``log``, where the server writes: a file, never an
    unread pipe)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process is not None and process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log is not None else ""
            raise RuntimeError(f"{what}: the server exited with {process.returncode}\n{tail}")
        try:
            if httpx.get(f"{base}{path}", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: no answer from {base}{path} within {timeout_s:.0f} s")
        time.sleep(poll_s)
