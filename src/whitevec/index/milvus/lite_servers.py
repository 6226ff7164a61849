"""Milvus Lite in this process: one in-process server per data folder, shared by the handles open on it and
stopped with the last; the checks before a handle opens a data path, and the lock another process holds."""

from __future__ import annotations

import collections
import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from whitevec.errors import BadInputError, DataNotFoundError, WhitevecError


def is_local_uri(uri: str) -> bool:
    """A file path (Milvus Lite) rather than a server address."""
    return "://" not in uri


def index_params_as_read(uri: str, build: dict[str, Any]) -> dict[str, Any]:
    """An index's build parameters as the Milvus at ``uri`` reads them: pymilvus sends flat pairs, which a server
    reads; Milvus Lite 3.2 reads only a nested ``params`` pair and else silently builds with its defaults (IVF:
    nlist 128 whatever was asked; BM25: k1 1.5; docs/notes/milvus-lite-params.md)."""
    return {"params": build} if is_local_uri(uri) else build


def check_lite_uri(uri: str, create: bool) -> None:
    """A Milvus Lite data path a handle may open: a ``.db`` name, present unless ``create`` (its parent made
    then), and not an older version of the data a handle in this process still has open."""
    if not uri.endswith(".db"):
        raise BadInputError(f"a local Milvus Lite URI must be a file name ending in .db, got {uri!r}")
    if create:
        Path(uri).parent.mkdir(parents=True, exist_ok=True)
    elif not os.path.exists(uri):
        # Opening would create an empty database there: say what is missing instead.
        raise DataNotFoundError(f"the Milvus Lite data {uri} does not exist; rebuild the index")
    _check_same_lite_data(uri)


@contextlib.contextmanager
def dropping_records(logger_name: str, starting: str = "") -> Iterator[None]:
    """The records logged on ``logger_name`` whose message starts with ``starting`` (all by default) dropped for
    the block: what a library logs that whitevec says itself, or that asks nothing of the user."""

    def keep(record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(starting)

    named = logging.getLogger(logger_name)
    named.addFilter(keep)
    try:
        yield
    finally:
        named.removeFilter(keep)


def quiet_lite_start() -> contextlib.AbstractContextManager[None]:
    """Milvus Lite logs a full traceback when it cannot start (its data folder locked by another process);
    the error whitevec raises says the same in one line, so drop that log record while connecting."""
    return dropping_records("milvus_lite.server_manager")


def lite_locked(uri: str) -> bool:
    """Whether another open file holds Milvus Lite's advisory lock (``LOCK`` in the data folder)."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fd = os.open(os.path.join(uri, "LOCK"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the probe's own lock
    return False


def lite_opened(uri: str) -> None:
    """Count a new handle on the Milvus Lite data ``uri``; the first records which folder its server opened."""
    key = os.path.abspath(uri)
    _LITE_HANDLES[key] += 1
    _LITE_DATA.setdefault(key, _identity(key))


def lite_closed(uri: str) -> None:
    """Count a handle on ``uri`` closed; the last one stops the server, so another process can open the data."""
    key = os.path.abspath(uri)
    _LITE_HANDLES[key] -= 1
    if _LITE_HANDLES[key] <= 0:
        del _LITE_HANDLES[key]
        _LITE_DATA.pop(key, None)
        stop_lite_server(key)


# Open MilvusStore handles per Milvus Lite data folder in this process (its server is shared between them).
_LITE_HANDLES: collections.Counter[str] = collections.Counter()


# The data folder (st_dev, st_ino) each of those servers opened: Milvus Lite keys its servers by path, so a path
# that now names another folder (a newer index version) must not be served by the old server.
_LITE_DATA: dict[str, tuple[int, int] | None] = {}


def _identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _check_same_lite_data(uri: str) -> None:
    key = os.path.abspath(uri)
    if _LITE_HANDLES.get(key, 0) > 0 and _LITE_DATA.get(key) != _identity(key):
        raise WhitevecError(
            f"this process still has an older version of the Milvus Lite data {uri} open (Milvus Lite runs one "
            "server per path); close the Retriever(s) opened before the index was rebuilt, then load it again"
        )


def stop_lite_server(path: str) -> None:
    """Stop this process's Milvus Lite server on the data folder ``path``, if one runs (unlocking it)."""
    with contextlib.suppress(Exception):
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(path)
