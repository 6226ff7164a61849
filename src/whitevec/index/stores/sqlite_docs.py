"""docs.sqlite: the documents of an index, the document store every local build writes (``sqlite`` in the
registry of :mod:`whitevec.index.stores.documents`). ``row`` (int64, the id the vector backend knows) -> user
``id``, ``text`` and ``metadata`` (JSON text or NULL). ``id`` is UNIQUE, so SQLite itself refuses a duplicate."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError, CorruptFileError
from whitevec.index.folder.layout import DOCS_FILE
from whitevec.index.stores.documents import register_document_store
from whitevec.utils.io import sqlite_uri, writing_to

if TYPE_CHECKING:
    from whitevec.index.folder.snapshot import IndexSnapshot

_SCHEMA = "CREATE TABLE docs (row INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, text TEXT NOT NULL, metadata TEXT)"


def write_docs(path: Path, docs: Iterable[Document], start_row: int = 0) -> int:
    """Create ``path`` (if new) and append ``docs`` with rows ``start_row, start_row + 1, ...``; return the count.

    The journal is the default rollback journal, so once this returns only ``path`` itself is on disk.
    """
    new = not path.exists()
    rows = [(start_row + offset, doc.id, doc.text, metadata_json(doc)) for offset, doc in enumerate(docs)]
    with writing_to(path):
        db = sqlite3.connect(path)
        try:
            # The file is written in a version folder being made, flushed and published whole by its writer
            # (atomic_dir): a journal and SQLite's own syncs would only add writes (a third of a small add's time).
            db.execute("PRAGMA journal_mode=OFF")
            db.execute("PRAGMA synchronous=OFF")
            if new:
                db.execute(_SCHEMA)
            try:
                with db:
                    db.executemany("INSERT INTO docs (row, id, text, metadata) VALUES (?, ?, ?, ?)", rows)
            except sqlite3.IntegrityError as exc:
                raise BadInputError(f"duplicate document id while writing the index ({exc})") from exc
            return len(rows)
        finally:
            db.close()


def metadata_json(doc: Document) -> str | None:
    """Metadata as strict JSON: NaN or Infinity would come back out of ``search --json`` and the service as bare
    ``NaN``, which strict JSON parsers refuse."""
    if doc.metadata is None:
        return None
    try:
        text = json.dumps(doc.metadata, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")  # SQLite stores UTF-8, which a lone surrogate (\ud800-\udfff) is not
    except UnicodeEncodeError:
        raise BadInputError(
            f"document {doc.id!r} has metadata holding a lone surrogate (\\ud800-\\udfff), not text; fix it"
        ) from None
    except ValueError as exc:
        raise BadInputError(
            f"document {doc.id!r} has metadata JSON cannot hold ({exc}); use finite numbers"
        ) from None
    except TypeError as exc:
        raise BadInputError(f"document {doc.id!r} has metadata that is not JSON ({exc})") from None
    except RecursionError:
        raise BadInputError(f"document {doc.id!r} has metadata nested too deep to write as JSON") from None
    found = _key_not_a_string(doc.metadata)
    if found is not None:
        (key,) = found
        raise BadInputError(
            f"document {doc.id!r} has the metadata key {key!r} of type {type(key).__name__}; keys are strings "
            "(JSON would write it as one, and {1: 'a', '1': 'b'} would keep only one value)"
        )
    return text


def _key_not_a_string(metadata: Any) -> tuple[Any] | None:
    """``(key,)``: a key of a (nested) object in ``metadata`` that is not a str (None is one), or None. Walked
    after json.dumps succeeded: no cycle, no depth past what it wrote."""
    stack = [metadata]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    return (key,)
                stack.append(item)
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return None


def rewrite_docs(
    path: Path, deleted: Iterable[int], replaced: dict[int, Document], added: Sequence[Document], start_row: int
) -> None:
    """Change the documents of ``path`` (a copy being written into a new version): ``deleted`` rows removed,
    ``replaced`` rows given their new document, ``added`` appended at rows ``start_row, ...``."""
    changes = [(doc.id, doc.text, metadata_json(doc), int(row)) for row, doc in replaced.items()]
    with writing_to(path):
        db = sqlite3.connect(path)
        try:
            db.execute("PRAGMA journal_mode=OFF")  # as write_docs: the version folder is published whole
            db.execute("PRAGMA synchronous=OFF")
            with db:
                db.executemany("DELETE FROM docs WHERE row = ?", [(int(r),) for r in deleted])
                db.executemany("UPDATE docs SET id = ?, text = ?, metadata = ? WHERE row = ?", changes)
        finally:
            db.close()
    write_docs(path, added, start_row=start_row)


@register_document_store
class DocStore:
    """Read access to docs.sqlite (thread-safe: one connection behind a lock); adds write a new file.

    Opened read-only and ``immutable``: a published index's files are never changed in place (a new version
    is written beside and swapped in), so SQLite needs no locks or journal look-ups, and the open file stays
    readable after a newer build has replaced and removed it.
    """

    name: ClassVar[str] = "sqlite"
    files: ClassVar[tuple[str, ...]] = (DOCS_FILE,)

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = sqlite3.connect(
                sqlite_uri(path, mode="ro", immutable="1"), uri=True, check_same_thread=False
            )
        except sqlite3.DatabaseError as exc:
            raise CorruptFileError(f"{path} is not a readable document store ({exc})") from exc
        try:
            self._db.execute("SELECT count(*) FROM docs").fetchone()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise CorruptFileError(f"{path} is not a readable document store ({exc})") from exc
        self._lock = threading.Lock()

    # --- life cycle -----------------------------------------------------------------------------------------
    @classmethod
    def check_manifest(cls, manifest: dict[str, Any]) -> str | None:
        return None  # beside any vector store

    @classmethod
    def open(cls, snapshot: IndexSnapshot) -> DocStore:
        """SQLite opens only a path: checked to be the pinned version's (:meth:`IndexSnapshot.by_path`); the
        file's checksum is checked through the pinned handle."""
        docs = snapshot.by_path(DOCS_FILE, cls)
        try:
            snapshot.verify(DOCS_FILE)
        except BaseException:
            docs.close()
            raise
        return docs

    def stage_add(self, folder: Path, docs: Sequence[Document], start_row: int) -> list[str]:
        self.copy_to(folder / DOCS_FILE)
        write_docs(folder / DOCS_FILE, docs, start_row=start_row)
        return [DOCS_FILE]

    def reopen(self, folder: Path) -> DocStore:
        return DocStore(folder / DOCS_FILE)

    def copy_to(self, path: Path) -> None:
        """Write this store's documents to a new file ``path`` (SQLite's online backup: a consistent copy)."""
        with writing_to(path):
            target = sqlite3.connect(path)
            try:
                with self._lock:
                    self._db.backup(target)
            finally:
                target.close()

    # --- data -----------------------------------------------------------------------------------------------
    @property
    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM docs").fetchone()[0])

    def next_row(self) -> int:
        with self._lock:
            value = self._db.execute("SELECT max(row) FROM docs").fetchone()[0]
        return 0 if value is None else int(value) + 1

    def existing_ids(self, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` already stored."""
        return list(self.rows_of(ids))

    def rows_of(self, ids: Sequence[str]) -> dict[str, int]:
        """``{id: row}`` of those of ``ids`` stored."""
        found: dict[str, int] = {}
        with self._lock:
            for start in range(0, len(ids), 500):
                chunk = list(ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                query = f"SELECT id, row FROM docs WHERE id IN ({marks})"
                found.update((doc_id, int(row)) for doc_id, row in self._db.execute(query, chunk))
        return found

    def metadata(self) -> dict[int, dict[str, Any] | None]:
        """``{row: metadata}`` of every document, in one pass over the file."""
        with self._lock:
            found = self._db.execute("SELECT row, metadata FROM docs").fetchall()
        return {int(row): None if meta is None else json.loads(meta) for row, meta in found}

    def get(self, rows: Sequence[int]) -> dict[int, Document]:
        """``{row: Document}`` for the given internal rows (unknown rows are left out)."""
        out: dict[int, Document] = {}
        wanted = sorted({int(r) for r in rows if r >= 0})
        with self._lock:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT row, id, text, metadata FROM docs WHERE row IN ({marks})"
                for row, doc_id, text, meta in self._db.execute(query, chunk):
                    out[int(row)] = Document(doc_id, text, None if meta is None else json.loads(meta))
        return out

    def close(self) -> None:
        with self._lock:
            self._db.close()
