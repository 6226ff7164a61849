"""The vector cache: sentence vectors kept on disk in SQLite, so the same text is never encoded twice with the
same settings."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from whitevec.errors import WhitevecWarning
from whitevec.preflight import sqlite_fault


class VectorCache:
    """Sentence vectors on disk, one SQLite table per (model, pooling, max_length) namespace.

    Keys are sha256 digests of the text, so the same text is never encoded twice with the same settings.

    The cache only saves work, so its faults never stop an encode: a damaged file (overwritten, truncated) is
    moved aside as ``<name>.corrupt-<time>`` with a warning and an empty cache takes its place; a write that
    fails (disk full, read-only, I/O error) warns once and turns this cache off, and the vectors are still
    returned.
    """

    def __init__(self, folder: Path, namespace: str, dim: int) -> None:
        self.path = folder / f"{namespace}.sqlite"
        self.dim = dim
        self._db: sqlite3.Connection | None = None
        try:
            self._open()
        except (sqlite3.Error, OSError) as exc:
            if not self._recover(exc, "open"):
                raise

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        except BaseException:
            db.close()
            raise
        self._db = db

    @property
    def enabled(self) -> bool:
        """False once a fault turned the cache off (then ``get`` finds nothing and ``put`` keeps nothing)."""
        return self._db is not None

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    def get(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        if self._db is None:
            return found
        unique = list(dict.fromkeys(keys))
        try:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk)
                for key, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape[0] == self.dim:
                        found[key] = vector
        except (sqlite3.Error, OSError) as exc:
            if not self._recover(exc, "read"):
                raise
            return {}  # whatever a damaged file gave is not trusted
        return found

    def put(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        if self._db is None:
            return
        rows = [
            (k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in zip(keys, vectors, strict=True)
        ]
        try:
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", rows)
        except (sqlite3.Error, OSError) as exc:
            if not self._recover(exc, "write"):
                raise

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _recover(self, exc: BaseException, action: str) -> bool:
        """After a failed open, read or write: a damaged file is moved aside and replaced by an empty cache; a
        failing disk or system turns the cache off, with one warning. False for other errors (bugs: re-raise)."""
        kind = "environment" if isinstance(exc, OSError) else sqlite_fault(exc)
        if kind is None:
            return False
        self.close()
        if kind == "corrupt":
            aside = self._move_aside()
            try:
                self._open()
            except (sqlite3.Error, OSError) as again:
                exc, action = again, "rebuild"
            else:
                warnings.warn(
                    f"the vector cache {self.path} was damaged ({exc}); moved it to {aside.name} and started an "
                    "empty one",
                    WhitevecWarning,
                    stacklevel=4,
                )
                return True
        warnings.warn(
            f"could not {action} the vector cache {self.path} ({exc}); the vectors are still returned, but "
            "not cached for the rest of this run",
            WhitevecWarning,
            stacklevel=4,
        )
        return True

    def _move_aside(self) -> Path:
        """Rename the damaged file (and SQLite's -wal/-shm files beside it) to ``<name>.corrupt-<time>``."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while aside.exists():
            n += 1
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        for suffix in ("", "-wal", "-shm"):
            source = self.path.with_name(self.path.name + suffix)
            with contextlib.suppress(FileNotFoundError):
                os.replace(source, aside.with_name(aside.name + suffix))
        return aside
