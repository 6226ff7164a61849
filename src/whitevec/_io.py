"""Safe writes and file checksums shared by every piece that puts something on disk."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is flushed and renamed over ``path``.

    A crash or exception leaves any earlier file at ``path`` untouched and removes the temporary one.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target)
    fd, tmp_name = tempfile.mkstemp(prefix=_prefix(target), suffix=suffix + ".tmp", dir=target.parent)
    os.close(fd)
    os.chmod(tmp_name, 0o666 & ~_UMASK)  # mkstemp makes 0600; a written file should look like any other
    tmp = Path(tmp_name)
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it replaces ``path`` as a whole.

    An older folder at ``path`` survives until the new one is complete; an interrupted build leaves it intact.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target)
    tmp = Path(tempfile.mkdtemp(prefix=_prefix(target), suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=_prefix(target), suffix=".old", dir=target.parent))
            os.replace(target, old / "previous")
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


# Temporaries are named .NAME.HOST-PID.RANDOM.tmp (or .old): the owner's host and process id let a later write
# remove what a killed process left behind (SIGKILL and power loss skip every finally block).
_HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def _prefix(target: Path) -> str:
    return f".{target.name}.{_HOST}-{os.getpid()}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Delete temporaries beside ``target`` whose writer, a process on this host, no longer exists.

    A folder moved aside by a replace that was killed halfway is moved back when ``target`` is missing.
    Temporaries of live processes, of other hosts (a shared filesystem) and of unknown owners (no host and pid in
    the name) are left alone. POSIX only: elsewhere a process cannot be probed without side effects.
    """
    if os.name != "posix":
        return []
    removed = []
    mine = f".{target.name}.{_HOST}-"
    for kind in ("tmp", "old"):
        for entry in target.parent.glob(f".{glob.escape(target.name)}.*.{kind}"):
            if not entry.name.startswith(mine):
                continue
            pid = entry.name[len(mine) :].split(".", 1)[0]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            previous = entry / "previous"
            if kind == "old" and previous.exists() and not target.exists():
                # Killed between moving the old folder aside and moving the new one in: put the old one back.
                os.replace(previous, target)
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
            removed.append(entry)
    return removed


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once at import: os.umask can only be read by setting it, which would race with other threads later.
_UMASK = _read_umask()


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()
