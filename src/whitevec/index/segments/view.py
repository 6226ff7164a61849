"""The segments of an index written to since its build: opening them from one pinned version.

An index folder written to after its build holds immutable segments (the layout is in
:mod:`whitevec.index.folder.layout`): each has its own vector store, documents and lexical part over its own rows
``0..rows-1``, which are the index's rows ``base..base+rows-1``; deleted rows are listed in ``deleted.npy``. A
write adds a segment (an add), a new tombstone list (a delete) or both (an upsert), and links every file it does
not change into the new version folder (:mod:`whitevec.index.segments.writing`): nothing already written is
rewritten.

A segment is opened through :class:`SegmentView`, the pinned version seen as if it held that segment alone, so
every store and document store opens a segment exactly as it opens a whole index built before segments.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import numpy as np

from whitevec.errors import CorruptFileError
from whitevec.index.folder.layout import DELETED_FILE, LEXICAL_COUNTS, TEMPLATE_PREFIX, segment_entries, total_rows
from whitevec.index.folder.snapshot import IndexSnapshot
from whitevec.index.lexical.bm25 import LexicalIndex
from whitevec.index.lexical.counts import TermCounts
from whitevec.index.stores.documents import DocumentStore, documents_of
from whitevec.index.stores.vector import VectorStore, store_class

T = TypeVar("T")


class SegmentView(IndexSnapshot):
    """One segment of a pinned version: its files under their names without the segment's prefix, and a
    manifest whose ``count`` and ``lexical`` are the segment's. It shares the version's open handles (closing
    it closes nothing)."""

    def __init__(self, snapshot: IndexSnapshot, prefix: str, manifest: dict[str, Any]) -> None:
        # No IndexSnapshot.__init__: this view owns no descriptor; every read goes through ``snapshot``.
        self._snapshot = snapshot
        self._prefix = prefix
        self.folder = snapshot.folder
        self.manifest = manifest

    def has(self, name: str) -> bool:
        return self._snapshot.has(self._prefix + name)

    def path_of(self, name: str) -> Path:
        return self._snapshot.path_of(self._prefix + name)

    def pinned(self, name: str) -> BinaryIO:
        return self._snapshot.pinned(self._prefix + name)

    def verify(self, name: str) -> None:
        self._snapshot.verify(self._prefix + name)

    def read_bytes(self, name: str) -> bytes:
        return self._snapshot.read_bytes(self._prefix + name)

    @contextlib.contextmanager
    def reader(self, name: str) -> Iterator[Callable[[int], bytes]]:
        with self._snapshot.reader(self._prefix + name) as read:
            yield read

    def by_path(self, name: str, opener: Callable[[Any], T]) -> T:
        return self._snapshot.by_path(self._prefix + name, opener)

    def close(self) -> None:
        return None


@dataclass
class Segment:
    """One segment, open: its rows are the index's ``base .. base + rows - 1``."""

    prefix: str
    base: int
    rows: int
    store: VectorStore
    docs: DocumentStore
    lexical: LexicalIndex | None
    counts: TermCounts | None = None  # the lexical part's term counts (every segment of a written index has them)

    def entry(self) -> dict[str, Any]:
        """Its record in the manifest's ``segments``."""
        found = {"prefix": self.prefix, "base": self.base, "rows": self.rows}
        return found if self.lexical is None else {**found, "lexical": self.lexical.record()}

    def close(self) -> None:
        self.docs.close()
        self.store.close()


def segment_manifest(manifest: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """The manifest a segment's stores see: the index's, with the segment's row count and lexical record."""
    seen = {k: v for k, v in manifest.items() if k not in ("segments", "deleted", "lexical")}
    seen["count"] = int(entry["rows"])
    lexical = entry.get("lexical", manifest.get("lexical"))
    return seen if lexical is None else {**seen, "lexical": lexical}


def open_segment(
    snapshot: IndexSnapshot, manifest: dict[str, Any], entry: dict[str, Any], docs: DocumentStore | None = None
) -> Segment:
    """One segment of a pinned version, its parts checked against its row count (``docs``: its documents,
    opened already)."""
    view = SegmentView(snapshot, entry["prefix"], segment_manifest(manifest, entry))
    docs = documents_of(manifest).open(view) if docs is None else docs
    store: VectorStore | None = None
    try:
        store = store_class(manifest["backend"]).open(view)
        lexical = LexicalIndex.from_snapshot(view) if "lexical" in view.manifest else None
        counts = None
        if lexical is not None and snapshot.has(entry["prefix"] + LEXICAL_COUNTS):
            where = snapshot.folder / (entry["prefix"] + LEXICAL_COUNTS)
            counts = TermCounts.from_bytes(view.read_bytes(LEXICAL_COUNTS), where, lexical)
        rows = int(entry["rows"])
        if docs.count != rows or store.count != rows or (lexical is not None and lexical.count != rows):
            raise CorruptFileError(
                f"segment {entry['prefix'] or '(the build)'} of the index at {snapshot.folder} is inconsistent: "
                f"{rows} rows, documents {docs.count}, vectors {store.count}"
                f"{'' if lexical is None else f', lexical rows {lexical.count}'}; rebuild the index"
            )
    except BaseException:
        docs.close()
        if store is not None:
            store.close()
        raise
    return Segment(entry["prefix"], int(entry["base"]), rows, store, docs, lexical, counts)


def open_segments(snapshot: IndexSnapshot) -> list[Segment]:
    """Every segment of a pinned version, in row order.

    Every segment's documents are opened first: SQLite opens a path, checked to still name the pinned version
    (:meth:`IndexSnapshot.by_path`), so those opens come before the long reads of vectors, which go through
    pinned handles and cannot be disturbed. Opened after them, a write swapped in meanwhile would restart the
    load, and a stream of writes could keep restarting it."""
    entries = segment_entries(snapshot.manifest)
    opened_docs = open_segment_documents(snapshot)
    opened: list[Segment] = []
    try:
        for entry, docs in zip(entries, opened_docs, strict=True):
            opened.append(open_segment(snapshot, snapshot.manifest, entry, docs))
    except BaseException:
        for docs in opened_docs[len(opened) :]:
            docs.close()
        for segment in opened:
            segment.close()
        raise
    return opened


def open_segment_documents(snapshot: IndexSnapshot) -> list[DocumentStore]:
    """The documents of each segment of a pinned version (:func:`segment_entries`' order), opened alone."""
    opened: list[DocumentStore] = []
    try:
        for entry in segment_entries(snapshot.manifest):
            view = SegmentView(snapshot, entry["prefix"], segment_manifest(snapshot.manifest, entry))
            opened.append(documents_of(snapshot.manifest).open(view))
    except BaseException:
        for docs in opened:
            docs.close()
        raise
    return opened


def gathered_metadata(parts: Iterable[tuple[int, DocumentStore]], live: np.ndarray | None) -> dict[int, Any]:
    """``{row: metadata}`` of segments' documents (each given with its base row) by the index's rows, the rows
    ``live`` (None: every row) marks False left out: what a filtered search reads."""
    out: dict[int, Any] = {}
    for base, docs in parts:
        for row, meta in docs.metadata().items():
            if live is None or live[base + row]:
                out[base + row] = meta
    return out


def live_metadata(snapshot: IndexSnapshot) -> dict[int, Any]:
    """:func:`gathered_metadata` of every segment of a pinned version, deleted rows left out: its documents
    opened alone (no vectors), for a filter's check before a model loads."""
    manifest = snapshot.manifest
    opened = open_segment_documents(snapshot)
    try:
        live = None
        if "segments" in manifest:
            live = np.ones(total_rows(manifest), dtype=bool)
            live[read_deleted(snapshot)] = False
        bases = [int(entry["base"]) for entry in segment_entries(manifest)]
        return gathered_metadata(zip(bases, opened, strict=True), live)
    finally:
        for docs in opened:
            docs.close()


def open_template(snapshot: IndexSnapshot) -> VectorStore:
    """The trained, empty store a new segment is made from (indexes written to since their build keep one)."""
    manifest = snapshot.manifest
    view = SegmentView(snapshot, TEMPLATE_PREFIX, {**segment_manifest(manifest, {"rows": 0}), "count": 0})
    return store_class(manifest["backend"]).open(view)


def read_deleted(snapshot: IndexSnapshot) -> np.ndarray:
    """The deleted rows of a pinned version, ascending int64 (none for an index without deletes), checked
    against the manifest's count and the rows its segments hold."""
    manifest = snapshot.manifest
    expected = int(manifest.get("deleted", 0))
    if not expected:
        return np.zeros(0, dtype=np.int64)
    where = snapshot.folder / DELETED_FILE
    try:
        rows = np.load(io.BytesIO(snapshot.read_bytes(DELETED_FILE)), allow_pickle=False)
    except ValueError as exc:
        raise CorruptFileError(f"{where} is not a readable list of rows ({exc}); rebuild the index") from None
    if (
        rows.dtype != np.int64
        or rows.shape != (expected,)
        or (rows.size and (rows[0] < 0 or rows[-1] >= total_rows(manifest)))
        or np.any(np.diff(rows) <= 0)
    ):
        raise CorruptFileError(
            f"{where} must hold {expected} distinct ascending rows below {total_rows(manifest)}; rebuild the index"
        )
    return rows
