"""Safe writes and file checksums shared by every piece that puts something on disk; storage faults of any
writer as one OSError naming the file (``writing_to``)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import glob
import hashlib
import json
import os
import re
import shutil
import socket
import sqlite3
import stat
import tempfile
import threading
import urllib.parse
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from whitevec.errors import BadInputError, WhitevecError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = "", *, create_parent: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is flushed and renamed over ``path``.

    A crash or exception leaves any earlier file at ``path`` untouched and removes the temporary one. The file
    gets the permissions of a newly created one (0666 less the umask), whatever the writer made it with. The
    write runs inside :func:`writing_to`: a full disk, whichever library met it, leaves as an OSError naming
    ``path``. A failed rename names ``path``, never the temporary (a folder at ``path``: ``path: Is a directory``).
    A symbolic link at ``path`` stays one: the file it names is replaced (:func:`write_target`).
    ``create_parent=False``: a missing folder is a FileNotFoundError, for a writer that must not bring back a
    folder someone removed (a Ray actor still running after its build was discarded).
    """
    target = cleared_target(path)
    if create_parent:
        target.parent.mkdir(parents=True, exist_ok=True)
    with _naming(target):
        fd, tmp_name = tempfile.mkstemp(prefix=_prefix(target), suffix=suffix + ".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with writing_to(target):
            yield tmp
            # After the writer: some (safetensors) recreate the file with 0600 of their own.
            os.chmod(tmp, 0o666 & ~_UMASK)
            _fsync_path(tmp)
        with _naming_target(target):
            os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


@contextlib.contextmanager
def atomic_dir(
    path: str | os.PathLike[str],
    before_swap: Callable[[], None] | None = None,
    *,
    owned: Callable[[], Collection[str] | None] | None = None,
) -> Iterator[Path]:
    """Yield a temporary folder beside ``path``; on success it replaces ``path`` as a whole.

    An older folder at ``path`` survives until the new one is complete; an interrupted build leaves it intact.
    The new folder's files are flushed to disk before the swap, so a power loss leaves one whole version too, and
    every file and folder in it gets the permissions a new one would (the umask), whatever its writer chose.
    A fault of the storage met inside names the file by the path it would have had (``path/...``).
    Where the system can (Linux), the two folders are exchanged in one step, so ``path`` never goes missing and
    a reader that opened the older folder keeps a whole version until it is done (see ``swap_in``).
    ``before_swap`` runs just before the swap, under :func:`writers_lock` on the parent folder (no other writer
    can swap meanwhile): a check that what is at ``path`` is still what the new folder was made from.
    ``owned``, called next (under the same lock), names the entries of the folder now at ``path`` that the new
    folder replaces; every other entry there (a user's notes, a folder of theirs) is carried into the new folder
    by hard links (:func:`_carry_others`), so a write never deletes what it did not make. None, or no ``owned``:
    the whole folder is replaced.
    A symbolic link at ``path`` stays one: the folder it names is replaced (:func:`write_target`).
    """
    target = cleared_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _naming(target):
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(target), suffix=".tmp", dir=target.parent))
    try:
        # The writes inside are wrapped in writing_to where they happen, naming their file; this names the folder
        # for any that is not.
        with writing_to(target):
            yield tmp
            _seal_tree(tmp)
        with writers_lock(target.parent):
            if before_swap is not None:
                before_swap()
            replaced = None if owned is None else owned()
            if replaced is not None:
                with writing_to(target):
                    _carry_others(target, tmp, replaced)
            swap_in(tmp, target)
            _fsync_path(target.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_target(path: str | os.PathLike[str]) -> Path:
    """What a write of ``path`` replaces: ``path``, or where a symbolic link there leads (resolved once, chains
    and relative links included). Swapped at the link itself, a new version would take the link's place as a
    real folder, the folder it named left as it was (and a server of that folder never seeing the write)."""
    given = folder_path(path)
    return Path(os.path.realpath(given)) if given.is_symlink() else given


def folder_path(path: str | os.PathLike[str]) -> Path:
    """``path``, absolute where its last part is ``.`` or ``..``: such a path has no name to swap a new version in
    under, and once the folder is swapped out it still names the old one (the process's current folder)."""
    given = Path(path)
    return Path(os.path.abspath(given)) if given.name in ("", ".", "..") else given


@contextlib.contextmanager
def writing_folder(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the writers' lock that :func:`atomic_dir` swaps ``path`` under; yield the folder the write changes
    (:func:`write_target`). A writer that checks the version at the yielded path and writes it through
    ``atomic_dir`` in here cannot swap over another writer's version."""
    target = cleared_target(path)
    with writers_lock(target.parent):
        yield target


def _carry_others(old: Path, new: Path, replaced: Collection[str]) -> None:
    """Carry every entry of the folder ``old`` but those named in ``replaced`` into the new version ``new``:
    files hard-linked (copied where the file system has no hard links), folders made again with their files
    linked, symbolic links made again. One the new version holds a file of the same name as is refused in one
    line naming it: the write would replace it."""
    if not old.is_dir():
        return
    for entry in sorted(os.scandir(old), key=lambda found: found.name):
        if entry.name in replaced:
            continue
        there = new / entry.name
        if os.path.lexists(there):
            raise BadInputError(
                f"{entry.path} is not one of whitevec's files in {old}, and this write makes one of that name; "
                "move it out of the folder and write again"
            )
        if entry.is_dir(follow_symlinks=False):
            try:
                shutil.copytree(entry.path, there, symlinks=True, copy_function=_link_or_copy)
            except shutil.Error as exc:  # one error per entry it could not copy: the first, as one line
                source, _, why = exc.args[0][0]
                raise OSError(f"cannot carry {source} into the index's new version: {why}") from None
            for root, _, _ in os.walk(there):
                _fsync_path(Path(root))
        elif entry.is_symlink():
            os.symlink(os.readlink(entry.path), there)
        else:
            _link_or_copy(entry.path, there)
    _fsync_path(new)


def _link_or_copy(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> str:
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:  # no hard links on this file system, or not allowed on another user's file
        shutil.copy2(source, target, follow_symlinks=False)
    return os.fspath(target)


@contextlib.contextmanager
def scratch_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary folder beside ``path`` for working files (arrays spilled to disk), removed on exit.

    It is named as :func:`atomic_dir` names its temporaries, so one a killed process left behind is removed by
    the next write to ``path``. Beside the output rather than in the system's temporary folder, which may be
    held in memory.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _naming(target):
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(target), suffix=".scratch.tmp", dir=target.parent))
    try:
        with writing_to(tmp):
            yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# Faults of the storage: a full disk (or quota), a read-only file system, a refused permission, a failing disk.
_STORAGE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO, errno.EFBIG)
# Rust's io::Error ends its text with the code: safetensors' "I/O error: No space left on device (os error 28)".
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")
# SQLite result codes (low byte) of the same faults: PERM, READONLY, IOERR, FULL.
SQLITE_STORAGE = {3: errno.EACCES, 8: errno.EROFS, 10: errno.EIO, 13: errno.ENOSPC}


def storage_errno(exc: BaseException) -> int | None:
    """The errno of a storage fault reported by a library that raises its own exception type, else None:
    safetensors' SafetensorError (``... (os error 28)``), faiss's RuntimeError (``... write error in PATH: ...
    (No space left on device)``), a SQLite error whose code is FULL, READONLY, IOERR or PERM."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        return SQLITE_STORAGE.get(code & 0xFF) if isinstance(code, int) else None
    text = str(exc)
    found = _RUST_OS_ERROR.search(text)
    if found is not None and int(found[1]) in _STORAGE_ERRNOS:
        return int(found[1])
    return next((code for code in _STORAGE_ERRNOS if os.strerror(code) in text), None)


@contextlib.contextmanager
def writing_to(path: str | os.PathLike[str]) -> Iterator[None]:
    """Around a write of ``path`` by any writer (Python, numpy, safetensors, faiss, SQLite): a fault of the
    storage leaves as an OSError with its errno, naming ``path``, which the command line prints as one line
    (exit 3), whichever library met it; any other exception passes unchanged.

    Python's own writes raise OSError, often naming no file (a failed ``write()``): ``path`` is named. A name of
    one of ``path``'s temporaries (see ``atomic_path``), or of a file inside one, is given as the path it would
    have had: the user knows the file by that name.
    """
    with _naming(Path(path)):
        try:
            yield
        except (OSError, WhitevecError):  # already a fault of the environment, or whitevec's own message
            raise
        except Exception as exc:
            code = storage_errno(exc)
            if code is None:
                raise
            raise OSError(code, os.strerror(code), os.fspath(path)) from exc


@contextlib.contextmanager
def _naming(target: Path) -> Iterator[None]:
    """An OSError from inside names ``target`` when it names no file, and ``target/...`` where it names one of
    ``target``'s temporaries or a file inside one."""
    try:
        yield
    except OSError as exc:
        if exc.errno is None or isinstance(exc, WhitevecError):  # DataNotFoundError: a message, not a fault
            raise
        if exc.filename is None:
            exc.filename = os.fspath(target)
        for attribute in ("filename", "filename2"):
            name = getattr(exc, attribute)
            if name is not None:
                setattr(exc, attribute, _final_name(os.fsdecode(name), target))
        raise


def _final_name(name: str, target: Path) -> str:
    """``name`` with a temporary of ``target`` (``.NAME.HOST-PID.RANDOM.tmp``) replaced by ``target``."""
    try:
        relative = os.path.relpath(os.path.abspath(name), os.path.abspath(target.parent))
    except ValueError:  # another drive (Windows)
        return name
    first, _, rest = relative.partition(os.sep)
    if relative.startswith(os.pardir) or not first.startswith(_prefix(target)):
        return name
    return os.path.join(target, rest) if rest else os.fspath(target)


@contextlib.contextmanager
def _naming_target(target: Path) -> Iterator[None]:
    """Around a rename or swap of temporaries into ``target``: an OSError from inside names ``target`` alone, with
    its errno and reason kept (the temporaries' names mean nothing to the user)."""
    try:
        yield
    except OSError as exc:
        if exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(target)) from exc


def _fsync_path(path: Path) -> None:
    """Flush ``path`` to disk. A file's failure (a full disk met only now, an I/O error) raises OSError naming
    it: the data may not be there. A folder's is ignored: some file systems refuse fsync on a folder."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        # Only a fault of the storage: some file systems (FUSE, network) answer EINVAL or ENOTSUP to any fsync.
        if exc.errno in _STORAGE_ERRNOS and not stat.S_ISDIR(os.fstat(fd).st_mode):
            exc.filename = os.fspath(path)
            raise
    finally:
        os.close(fd)


def _seal_tree(folder: Path) -> None:
    """Give every file and folder under ``folder`` (itself included) the permissions a new one gets under the
    umask, as ``open()`` and ``mkdir()`` would (mkdtemp makes 0700, safetensors 0600: another account could not
    read the index), and flush them to disk (before the folder is published by a rename)."""
    for root, folders, names in os.walk(folder):
        for name in names:
            path = Path(root) / name
            # A file with other links is one an earlier version sealed, linked in unchanged (an index write's
            # files: whitevec.index.segments.writing): its mode and data are settled, and a chmod would dirty its
            # inode.
            if path.is_file() and not path.is_symlink() and path.stat().st_nlink == 1:
                os.chmod(path, 0o666 & ~_UMASK)
                _fsync_path(path)
        for name in folders:
            if not (Path(root) / name).is_symlink():  # chmod would follow it out of the folder
                os.chmod(Path(root) / name, 0o777 & ~_UMASK)
        _fsync_path(Path(root))
    os.chmod(folder, 0o777 & ~_UMASK)


# One lock per folder in this process: flock locks belong to an open file, so a second flock from this process
# (another thread, or a writer already holding it) would wait on itself. The RLock makes the lock reentrant for
# the thread that holds it and makes other threads wait; the flock keeps other processes out.
_LOCKS_GUARD = threading.Lock()
_FOLDER_LOCKS: dict[str, list[Any]] = {}  # real path -> [RLock, flock fd or None, depth]


@contextlib.contextmanager
def writers_lock(folder: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the writers' lock of ``folder``: an exclusive advisory ``flock`` (POSIX; a no-op elsewhere) that every
    swap of a folder inside it takes. Reentrant for the thread holding it."""
    key = os.path.realpath(folder)
    with _LOCKS_GUARD:
        entry = _FOLDER_LOCKS.setdefault(key, [threading.RLock(), None, 0])
    with entry[0]:
        if entry[2] == 0:
            entry[1] = _flock(key)
        entry[2] += 1
        try:
            yield
        finally:
            entry[2] -= 1
            if entry[2] == 0 and entry[1] is not None:
                os.close(entry[1])  # closing releases the flock
                entry[1] = None


def _flock(folder: str) -> int | None:
    try:
        import fcntl
    except ImportError:
        return None
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def swap_in(new: Path, target: Path) -> None:
    """Put the folder ``new`` at ``target``; an older ``target`` ends up at ``new`` (the caller removes it).

    With ``renameat2(RENAME_EXCHANGE)`` one system call swaps the two, so no reader ever finds ``target``
    missing and two writers cannot collide; with ``RENAME_NOREPLACE`` a first build never overwrites a folder
    another writer put there meanwhile. Elsewhere: move the old folder aside, then the new one in (a crash
    between the two is repaired by the next write, see ``remove_stale_temporaries``). A failure names
    ``target``.
    """
    with _naming_target(target):
        _swap_in(new, target)


def _swap_in(new: Path, target: Path) -> None:
    for _ in range(100):  # each turn loses only to another writer that finished in between
        if _rename2(new, target, _RENAME_EXCHANGE):
            return
        if not target.exists() and _rename2(new, target, _RENAME_NOREPLACE):
            return
        if _RENAME2 is None or not _rename2_supported(target.parent):
            break
    else:
        raise OSError(errno.EBUSY, "other writers kept replacing the folder", str(target))
    # No atomic exchange here: two renames.
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=_prefix(target), suffix=".old", dir=target.parent))
        os.replace(target, old / "previous")
        os.replace(new, target)
        os.replace(old / "previous", new)  # the caller removes ``new`` as with an exchange
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(new, target)


_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _load_rename2() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function = libc.renameat2
    except (OSError, AttributeError):  # not glibc >= 2.28, or not Linux
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_RENAME2 = _load_rename2()
_UNSUPPORTED: set[int] = set()  # st_dev of filesystems that refused the flags


def _rename2_supported(folder: Path) -> bool:
    return os.stat(folder).st_dev not in _UNSUPPORTED


def _rename2(source: Path, target: Path, flags: int) -> bool:
    """``renameat2(source, target, flags)``; False when the flag cannot apply (target missing for an exchange,
    present for no-replace) or the system or filesystem lacks it; other errors raise OSError."""
    if _RENAME2 is None or not _rename2_supported(target.parent):
        return False
    if _RENAME2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        _UNSUPPORTED.add(os.stat(target.parent).st_dev)
        return False
    if code in (errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY) and os.path.lexists(source):
        return False
    raise OSError(code, os.strerror(code), str(source), None, str(target))


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


def cleared_target(path: str | os.PathLike[str]) -> Path:
    """What a write of ``path`` changes (:func:`write_target`), dead writers' temporaries removed beside it, and
    beside ``path`` when that is a link to it (a write through a link, before links were followed, swapped the
    link out to a temporary of the link's name)."""
    target = write_target(path)
    remove_stale_temporaries(target)
    if Path(path) != target:
        remove_stale_temporaries(Path(path))
    return target


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
            if kind == "old" and previous.exists():
                # Killed between moving the old folder aside and moving the new one in: put the old one back
                # (under the writers' lock, so two cleaners or a new first build cannot collide with it).
                with writers_lock(target.parent), contextlib.suppress(FileNotFoundError):
                    if not target.exists():
                        os.replace(previous, target)
            if entry.is_dir() and not entry.is_symlink():  # a link (an older whitevec swapped one): itself alone
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
            removed.append(entry)
    return removed


def check_writable_parent(target: Path) -> None:
    """Create ``target``'s parent folder if needed and prove a file can be made there (raises OSError if not).

    Trying is the only honest test: permission bits say nothing of a read-only mount, a full disk's inode
    table, or root's view of either. A symbolic link at ``target``: the folder probed is the parent of what it
    names, where the write goes (:func:`write_target`).
    """
    target = write_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _naming(target):  # the probe's own name is noise
        fd, probe = tempfile.mkstemp(prefix=_prefix(target), suffix=".tmp", dir=target.parent)
    os.close(fd)
    os.unlink(probe)


def sqlite_uri(path: str | os.PathLike[str], **params: str) -> str:
    """A ``file:`` URI for SQLite naming exactly ``path``: ``%``, ``?`` and ``#`` in a folder name are escaped,
    where a bare f-string would read them as escapes, the query or a fragment."""
    quoted = urllib.parse.quote(os.fsdecode(os.path.abspath(path)), safe="/")
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return f"file:{quoted}" + (f"?{query}" if query else "")


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once at import: os.umask can only be read by setting it, which would race with other threads later.
_UMASK = _read_umask()


def write_json(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as indented UTF-8 JSON, atomically; strict JSON (NaN or Infinity is refused with a
    ValueError rather than written as bare ``NaN``, which strict parsers reject). Returns the path."""
    target = Path(path)
    text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return target


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()
