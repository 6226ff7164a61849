"""One version of an index folder, read as a whole even while another process replaces the folder.

A build or an add never changes a published index folder in place: it writes a new folder and swaps it in
(``whitevec.utils.io.atomic_dir``). A reader that opened file after file by path could still mix two versions (the
manifest and transform of one build with the vectors and documents of the next). So a reader pins one version:

1. it opens the folder itself once (a descriptor), then the manifest and every file the manifest lists through
   that descriptor, all at once: whatever happens to the path afterwards, these are one version;
2. libraries that only take a path (SQLite, Milvus Lite) open ``folder/name`` while the path is checked to name
   the pinned folder before and after (:meth:`IndexSnapshot.by_path`);
3. a file that vanished because its folder was swapped out (the writer removes the old version) or a path that
   moved on restarts the read with the new version (:func:`read_consistent`), so a reader sees the old index or
   the new one, never a mix and never a false "missing" or checksum error.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from whitevec.errors import CorruptFileError, DataNotFoundError, WhitevecError
from whitevec.index.folder.manifest import MANIFEST, MAX_MANIFEST_BYTES, parse_manifest

T = TypeVar("T")
_CHUNK = 1 << 20
_ATTEMPTS = 50
# Where the system cannot open relative to a folder descriptor (Windows), files are opened by path; the
# before/after check of ``by_path`` then guards every file.
_DIR_FD = os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")


class SnapshotReplacedError(Exception):
    """The index folder was replaced while this version was being read: read again (internal signal)."""


class IndexSnapshot:
    """A pinned version of an index folder: its checked manifest and an open handle on every listed file.

    Use :func:`read_consistent` to read through one; handles close with the snapshot.
    """

    def __init__(self, folder: Path, dir_fd: int | None, identity: tuple[int, int]) -> None:
        self.folder = folder
        self._dir_fd = dir_fd
        self._identity = identity
        self._handles: dict[str, BinaryIO] = {}
        self.manifest: dict[str, Any] = {}

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> IndexSnapshot:
        """Pin the version now at ``folder`` (raises SnapshotReplacedError if it was swapped out meanwhile).

        Raises:
            DataNotFoundError: no folder, or no manifest.json in it (not an index).
            CorruptFileError: a bad manifest, or a listed file that is missing or not a regular file.
        """
        path = Path(folder).expanduser()
        try:
            if _DIR_FD:
                dir_fd: int | None = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
                info = os.fstat(dir_fd)  # type: ignore[arg-type]
            else:
                dir_fd, info = None, os.stat(path)
        except FileNotFoundError:
            raise DataNotFoundError(f"no index folder at {path}") from None
        except NotADirectoryError:
            raise DataNotFoundError(f"{path} is not a folder; an index is a folder") from None
        if not stat.S_ISDIR(info.st_mode):
            raise DataNotFoundError(f"{path} is not a folder; an index is a folder")
        snapshot = cls(path, dir_fd, (info.st_dev, info.st_ino))
        try:
            snapshot._pin()
        except BaseException:
            snapshot.close()
            raise
        return snapshot

    # --- pinning --------------------------------------------------------------------------------------------
    def _open_member(self, name: str) -> BinaryIO:
        # O_NONBLOCK: a FIFO planted under a member's name would otherwise block the open forever, before the
        # regular-file check below could refuse it (regular files ignore the flag).
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0)
        if self._dir_fd is not None:
            fd = os.open(name, flags, dir_fd=self._dir_fd)
        else:
            fd = os.open(self.folder / name, flags)
        handle = os.fdopen(fd, "rb")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            handle.close()
            raise CorruptFileError(f"{self.folder / name} is not a regular file; rebuild the index")
        return handle

    def _pin(self) -> None:
        try:
            with self._open_member(MANIFEST) as handle:
                raw = handle.read(MAX_MANIFEST_BYTES + 1)
        except FileNotFoundError:
            self._raise_if_replaced()
            raise DataNotFoundError(
                f"{self.folder} is not a whitevec index (no {MANIFEST}); build one with `whitevec index build`"
            ) from None
        except OSError as exc:  # ELOOP: a symbolic link planted in the folder
            raise CorruptFileError(f"{self.folder / MANIFEST} cannot be opened ({exc.strerror})") from None
        self.manifest = parse_manifest(raw, self.folder / MANIFEST)
        for name in self.manifest["files"]:
            try:
                self._handles[name] = self._open_member(name)
            except FileNotFoundError:
                self._raise_if_replaced()
                raise CorruptFileError(f"index file {self.folder / name} is missing; rebuild the index") from None
            except OSError as exc:
                raise CorruptFileError(
                    f"index file {self.folder / name} cannot be opened ({exc.strerror})"
                ) from None

    def is_current(self) -> bool:
        """Whether the path still names the pinned folder."""
        try:
            info = os.stat(self.folder)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == self._identity

    def _raise_if_replaced(self) -> None:
        if not self.is_current():
            raise SnapshotReplacedError(str(self.folder))

    # --- reading --------------------------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self._handles

    def _handle(self, name: str) -> BinaryIO:
        try:
            handle = self._handles[name]
        except KeyError:
            raise CorruptFileError(f"{self.folder / MANIFEST} does not list {name}; rebuild the index") from None
        size, listed = os.fstat(handle.fileno()).st_size, self.manifest["files"][name]["bytes"]
        if size != listed:
            # Before any hashing: a truncated file says so (a file rows are read from later must not be short).
            raise CorruptFileError(
                f"index file {self.folder / name} is {size} bytes, the manifest says {listed} (truncated or "
                "damaged since the build); rebuild the index"
            )
        handle.seek(0)
        return handle

    def path_of(self, name: str) -> Path:
        """Where a file of this version lies, as messages name it."""
        return self.folder / name

    def pinned(self, name: str) -> BinaryIO:
        """The open handle of a listed file of this version, at its start, for a reader that keeps reading it after
        the load: it stays open until the snapshot closes, so such a reader keeps a duplicate of its descriptor
        (``rescore.npy``'s reader does)."""
        return self._handle(name)

    def _check_digest(self, name: str, digest: str) -> None:
        if digest != self.manifest["files"][name]["sha256"]:
            raise CorruptFileError(
                f"index file {self.folder / name} fails its checksum (edited or damaged since the build); "
                "rebuild the index"
            )

    def verify(self, name: str) -> None:
        """Check one file's sha256 against the manifest (read through the pinned handle)."""
        digest = hashlib.sha256()
        handle = self._handle(name)
        while block := handle.read(_CHUNK):
            digest.update(block)
        self._check_digest(name, digest.hexdigest())

    def verify_all(self) -> None:
        for name in self._handles:
            self.verify(name)

    def read_bytes(self, name: str) -> bytes:
        """A file's bytes, checked against its sha256."""
        data = self._handle(name).read()
        self._check_digest(name, hashlib.sha256(data).hexdigest())
        return data

    @contextlib.contextmanager
    def reader(self, name: str) -> Iterator[Callable[[int], bytes]]:
        """A ``read(n)`` function over a file that hashes what it gives; on leaving, the rest is hashed too and
        the sha256 checked (one pass for a large file that a library reads as a stream)."""
        digest = hashlib.sha256()
        handle = self._handle(name)

        def read(size: int) -> bytes:
            block = handle.read(size)
            digest.update(block)
            return block

        yield read
        while block := handle.read(_CHUNK):
            digest.update(block)
        self._check_digest(name, digest.hexdigest())

    def by_path(self, name: str, opener: Callable[[Path], T]) -> T:
        """``opener(folder / name)`` for a library that takes only a path, checked to have opened this version.

        The path must name the pinned folder before and after the call: a folder, once swapped out, never comes
        back (the writer deletes it), so equal before and after means unchanged throughout. Otherwise the
        result is closed (if it can be) and SnapshotReplacedError restarts the read.
        """
        self._raise_if_replaced()
        try:
            result = opener(self.folder / name)
        except Exception:
            self._raise_if_replaced()  # the folder moved while the library opened it: read the new version
            raise
        if not self.is_current():
            close = getattr(result, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
            raise SnapshotReplacedError(str(self.folder))
        return result

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    def __enter__(self) -> IndexSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_consistent(folder: str | os.PathLike[str], read: Callable[[IndexSnapshot], T]) -> T:
    """``read(snapshot)`` on one pinned version of the index at ``folder``, again on the newer version when the
    folder was replaced in the middle (see the module docstring)."""
    for _ in range(_ATTEMPTS):
        try:
            with IndexSnapshot.open(folder) as snapshot:
                return read(snapshot)
        except SnapshotReplacedError:
            continue
    raise WhitevecError(
        f"the index at {folder} was replaced {_ATTEMPTS} times while being read; is something rebuilding it in "
        "a loop? Try again."
    )


def changed_message(path: Path) -> str:
    """Why a write is refused when the folder no longer holds the version it was to follow (the service answers
    409 for exactly this message)."""
    return (
        f"the index at {path} was rebuilt or written to by another writer since it was loaded; load it again and "
        "repeat the write"
    )


def read_manifest(folder: str | os.PathLike[str], verify: bool = True) -> dict[str, Any]:
    """The checked manifest of the index at ``folder``; with ``verify``, every listed file's sha256 too (one
    consistent version even while another process replaces the index).

    Raises:
        DataNotFoundError: ``folder`` is not there or holds no manifest.json (not an index).
        CorruptFileError: a bad or edited manifest, a missing file or a checksum mismatch (the file is named).
    """

    def read(snapshot: IndexSnapshot) -> dict[str, Any]:
        if verify:
            snapshot.verify_all()
        return snapshot.manifest

    return read_consistent(folder, read)
