"""Ray itself: the import (an optional extra), the cluster address checked within seconds, and a connected
session."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import urllib.parse
from collections.abc import Iterator
from typing import Any

from whitevec.errors import BadInputError

RAY_HINT = "pip install 'whitevec[ray]'"
_CONNECT_TIMEOUT_S = 5.0
# Seconds ray.init may spend asking a GCS for its cluster id (one attempt a second; Ray's default is ~20).
_GCS_ATTEMPTS = "5"


class RayConnectionError(BadInputError):
    """The Ray cluster named by --ray-address cannot be reached (a resumable build keeps its work)."""


def require_ray() -> Any:
    """The ``ray`` module with Ray Data, or BadInputError saying how to install it."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise BadInputError(f"--engine ray needs Ray, which is not installed: {RAY_HINT}") from None
    return ray


def check_address(address: str) -> None:
    """Fail within seconds when nothing answers at a Ray address (``host:port`` or ``ray://host:port``);
    ``auto`` and ``local`` are left to Ray."""
    if address in ("auto", "local"):
        return
    parsed = urllib.parse.urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = parsed.hostname, parsed.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise BadInputError(f"--ray-address {address!r} is not host:port or ray://host:port")
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise RayConnectionError(
            f"cannot reach the Ray cluster at --ray-address {address} ({reason}); start it with "
            "`ray start --head` or give the head node's address"
        ) from None


@contextlib.contextmanager
def ray_session(address: str | None = None, *, quiet: bool = True) -> Iterator[Any]:
    """Ray, connected: a Ray already initialised in this process is used as it is (and left running); else
    ``ray.init(address=...)`` or, without an address, a local instance with this machine's CPUs, shut down
    on leaving."""
    ray = require_ray()
    if address:
        check_address(address)
    _quiet_ray_data(quiet)
    if ray.is_initialized():
        yield ray
        return
    if address:
        _connect(ray, address, quiet)
    else:
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=not quiet)
    try:
        yield ray
    finally:
        ray.shutdown()


def _connect(ray: Any, address: str, quiet: bool) -> None:
    """``ray.init(address=...)`` with a short GCS wait; a failure is a BadInputError naming the address."""
    key = "RAY_gcs_server_port_wait_time_s"
    before = os.environ.get(key)
    os.environ.setdefault(key, _GCS_ATTEMPTS)
    try:
        ray.init(address=address, log_to_driver=not quiet)
    except (ConnectionError, RuntimeError, TimeoutError) as exc:
        raise RayConnectionError(
            f"cannot connect to the Ray cluster at --ray-address {address} ({exc}); is a Ray head node running "
            "there (`ray start --head`), and is it the same Ray version?"
        ) from None
    finally:
        if before is None:
            os.environ.pop(key, None)


def _quiet_ray_data(quiet: bool) -> None:
    import ray.data

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = not quiet
    if quiet:
        for name in ("ray.data", "ray"):
            logging.getLogger(name).setLevel(logging.WARNING)


def default_workers(ray: Any, cpus_per_worker: float) -> int:
    """As many actors as the cluster's CPUs hold at ``cpus_per_worker`` each (at least one)."""
    cpus = float(ray.cluster_resources().get("CPU", 1))
    return max(1, int(cpus // max(cpus_per_worker, 1e-9)))
