"""The work folder ``.<out>.ray-build/`` beside the output: its lock, ``state.json`` (what the build is, so a
rerun resumes only the same build), the logs of finished units, and its removal."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from whitevec.errors import BadInputError
from whitevec.index.milvus.store import MilvusStore
from whitevec.utils.io import write_json

logger = logging.getLogger(__name__)

STATE = "state.json"
ENCODED_LOG = "encoded.log"
INSERTED_LOG = "inserted.log"


def work_folder(out: Path) -> Path:
    return out.parent / f".{out.name}.ray-build"


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """Hold ``.<out>.ray-build.lock`` beside ``out`` (an exclusive ``flock``, released when the process ends,
    SIGKILL included) for a whole build, or BadInputError at once when another build of ``out`` holds it: two
    builds in one work folder would undo each other's shards and logs. The file is removed on the way out; an
    opener that locked it just before was left holding a removed file, so it checks and tries again."""
    import fcntl

    path = out.parent / f".{out.name}.ray-build.lock"
    out.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BadInputError(
                f"another build of {out} is running (it holds {path}); wait for it to end or write another --out"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(fd)


def read_log(path: Path) -> dict[int, int]:
    """``{unit: rows}`` of a log of finished units (one JSON object a line); a torn last line is ignored."""
    done: dict[int, int] = {}
    if not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").split("\n"):
        try:
            entry = json.loads(line)
            done[int(entry["unit"])] = int(entry["count"])
        except (ValueError, KeyError, TypeError):
            continue
    return done


def append_log(path: Path, unit: int, count: int) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"unit": unit, "count": count}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def file_fingerprint(files: list[Path]) -> list[dict[str, Any]]:
    return [{"file": str(f.resolve()), "bytes": f.stat().st_size, "mtime_ns": f.stat().st_mtime_ns} for f in files]


def open_work(folder: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The state of an earlier run of the same build in ``folder`` (resumed), or a fresh one (anything left by
    another build there is removed first)."""
    state_file = folder / STATE
    if state_file.exists():
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except ValueError:
            state = {}
        if state.get("config") == config:
            return dict(state)
        logger.warning("%s holds another build (other files or settings); starting over", folder)
        discard_work(folder, state)
    folder.mkdir(parents=True, exist_ok=True)
    state = {"config": config, "collection": None}
    write_json(state_file, state)
    return state


def discard_work(folder: Path, state: dict[str, Any] | None) -> None:
    """Remove a work folder and the collection its build started on a server or a Lite file elsewhere."""
    config = (state or {}).get("config") or {}
    uri, collection = config.get("uri"), (state or {}).get("collection")
    if uri and collection:
        MilvusStore.discard({"backend_uri": uri, "milvus_collection": collection})
    remove_folder(folder)


def remove_folder(folder: Path, attempts: int = 50) -> None:
    """Remove ``folder`` though an actor call still running writes into it: such a call (left over by a build
    that stopped on a bad input) can add a file between rmtree's listing and its rmdir, which then fails and
    leaves the folder; it cannot bring back a folder that is gone (its writes never create one), so trying
    again ends it. A folder still there after ``attempts`` tries is left, with a warning."""
    for _ in range(attempts):
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            return
        time.sleep(0.05)
    logger.warning("could not remove %s; remove it by hand", folder)
