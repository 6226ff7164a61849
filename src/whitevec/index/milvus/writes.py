"""Writes to an index whose vectors live in Milvus (``--backend milvus``): add, upsert, delete, compact and refit
through Milvus's own insert, upsert, delete and compaction, the documents included.

Each write is one new version of the index folder, swapped in whole, as on FAISS
(:mod:`whitevec.index.segments.writing`); what differs is where the rows are. Rows keep their int64 ids for good
(the manifest's ``next_row`` is the next one to give, so a reader of an older version, held to ``id < next_row`` of
its version, never sees a later add):

- an add inserts new rows (their text too, which Milvus's BM25 function turns into the sparse field, and the
  document's id and metadata in a collection that keeps the documents: ``--engine ray``);
- a replaced document (``on_existing="replace"``) is upserted in place, on its row: vector, text and document;
- a delete is Milvus's delete by row id; ``docs.sqlite``, where the documents are there, is written anew without
  those rows;
- compaction is Milvus's (it drops the deleted rows from its segments); no new version is written.

In-folder Milvus Lite data (``milvus.db/``) is copied into the next version's folder and written there, so a failed
write leaves the index as it was. A collection outside the folder (a Milvus server, or a Lite file elsewhere) is
written in place: readers of the older version see its deletes and upserts at once (Milvus keeps no versions),
and a write that fails after its first Milvus call leaves those calls done (its inserts are deleted again).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError
from whitevec.index.folder.layout import DOCS_FILE, TRANSFORM_FILE
from whitevec.index.folder.manifest import SELF_CHECKSUM, write_manifest
from whitevec.index.folder.snapshot import IndexSnapshot, changed_message, read_consistent
from whitevec.index.milvus.bm25 import MILVUS_BM25, TEXT_FIELD
from whitevec.index.milvus.lite_servers import dropping_records
from whitevec.index.milvus.store import MILVUS_LOCAL, MilvusStore, is_local_uri, new_collection_name
from whitevec.index.segments.writing import rebuild_options
from whitevec.index.stores.documents import DocumentStore
from whitevec.index.stores.sqlite_docs import DocStore, metadata_json, rewrite_docs
from whitevec.index.stores.vector import version_entries
from whitevec.index.stores.writer import Rebuild, Reopen, WritableIndex, held_rows, register_writer
from whitevec.utils.io import atomic_dir, writing_folder, writing_to

NEXT_ROW = "next_row"  # the manifest's field: the next row id a Milvus index gives (ids are never reused)
_BATCH = 2000  # rows per Milvus insert or upsert call
_COMPACTION_WAIT_S = 600.0  # how long compact waits for a Milvus server's compaction job


def next_row(manifest: dict[str, Any]) -> int:
    """The next row id of a Milvus index (as built: its count, rows 0 .. count - 1)."""
    return int(manifest.get(NEXT_ROW, manifest["count"]))


@dataclasses.dataclass
class MilvusChange:
    """One write's rows: documents added at new rows, documents put in place of held rows, rows deleted."""

    added: list[Document]
    added_vectors: np.ndarray
    replaced: dict[int, Document]
    replaced_vectors: np.ndarray
    deleted: np.ndarray

    @classmethod
    def deleting(cls, rows: np.ndarray, dim: int) -> MilvusChange:
        none = np.zeros((0, dim), dtype=np.float32)
        return cls([], none, {}, none, np.asarray(rows, dtype=np.int64))


def milvus_rows(
    store: MilvusStore, ids: np.ndarray, vectors: np.ndarray, docs: list[Document]
) -> list[dict[str, Any]]:
    """The collection's rows for ``docs`` at row ids ``ids``: the vector, the text where the collection keeps it
    (BM25, or the documents), and the document's id and metadata where it keeps the documents."""
    values = store.field_values(np.ascontiguousarray(vectors, dtype=np.float32), fit=True)
    rows: list[dict[str, Any]] = []
    for row, value, doc in zip(ids, values, docs, strict=True):
        fields: dict[str, Any] = {"id": int(row), "vector": value}
        if store.docs or store.bm25 is not None:
            fields[TEXT_FIELD] = doc.text
        if store.docs:
            fields.update(doc_id=doc.id, metadata=metadata_json(doc))
        rows.append(fields)
    return rows


def _apply(store: MilvusStore, change: MilvusChange, first_row: int) -> None:
    """Milvus's delete, upsert and insert of ``change`` on ``store`` (new rows from ``first_row``)."""
    if change.deleted.size:
        store.client.delete(store.collection, ids=[int(r) for r in change.deleted])
    replaced_rows = np.fromiter(change.replaced, dtype=np.int64, count=len(change.replaced))
    upserts = milvus_rows(store, replaced_rows, change.replaced_vectors, list(change.replaced.values()))
    for start in range(0, len(upserts), _BATCH):
        store.client.upsert(store.collection, upserts[start : start + _BATCH])
    added = np.arange(first_row, first_row + len(change.added), dtype=np.int64)
    inserts = milvus_rows(store, added, change.added_vectors, change.added)
    # Upserted, not inserted: a write killed after this call and before its version is in leaves these rows, and
    # the next write gives their ids again; a Milvus server does not deduplicate inserted keys.
    for start in range(0, len(inserts), _BATCH):
        store.client.upsert(store.collection, inserts[start : start + _BATCH])
    store.flush()


def _following(manifest: dict[str, Any], change: MilvusChange, skipped: int) -> dict[str, Any]:
    """The next version's manifest: the live count, the next row, one more generation."""
    following = _next_version(manifest)
    count = int(manifest["count"]) - int(change.deleted.size) + len(change.added)
    following["count"] = count
    following[NEXT_ROW] = next_row(manifest) + len(change.added)
    if skipped:
        following["skipped_documents"] = int(manifest.get("skipped_documents", 0)) + skipped
    if manifest.get("lexical") is not None:  # Milvus's BM25 over the live documents
        following["lexical"] = {**manifest["lexical"], "documents": count}
    return following


def write_milvus_version(
    path: Path,
    manifest: dict[str, Any],
    store: MilvusStore,
    docs: DocumentStore,
    change: MilvusChange,
    skipped: int,
) -> None:
    """Write ``change`` as the next version of the Milvus index at ``path`` (the caller holds the writers' lock
    and reopens the index after, whether this succeeds or fails: staging lets go of in-folder Lite data)."""
    transform = read_consistent(path, lambda snapshot: _own_transform(snapshot, manifest, path))
    staged: MilvusStore | None = None
    inserted = np.zeros(0, dtype=np.int64)
    try:
        with atomic_dir(path, owned=lambda: version_entries(manifest)) as tmp:
            staged = cast(MilvusStore, store.stage_add(tmp))
            files = _write_transform(tmp, transform)
            if isinstance(docs, DocStore):  # the documents in docs.sqlite: a copy with the change
                docs.copy_to(tmp / DOCS_FILE)
                rewrite_docs(tmp / DOCS_FILE, change.deleted, change.replaced, change.added, next_row(manifest))
                files.append(DOCS_FILE)
            # The Milvus calls last: on a collection outside the folder they cannot be taken back.
            inserted = np.arange(next_row(manifest), next_row(manifest) + len(change.added), dtype=np.int64)
            _apply(staged, change, next_row(manifest))
            files += staged.save(tmp)
            write_manifest(tmp, _following(manifest, change, skipped), files)
    except BaseException:
        if staged is not None:
            with contextlib.suppress(Exception):
                staged.abandon(inserted)
        raise
    if staged is not store:
        staged.close()


def _next_version(manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` as the next version's starts: one more generation, stamped now."""
    following = dict(manifest, generation=int(manifest.get("generation", 0)) + 1)
    following["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return following


def _write_transform(tmp: Path, transform: bytes | None) -> list[str]:
    """The current version's transform file (``transform``, its bytes) written into the next version ``tmp``."""
    if transform is None:
        return []
    with writing_to(tmp / TRANSFORM_FILE):
        (tmp / TRANSFORM_FILE).write_bytes(transform)
    return [TRANSFORM_FILE]


def _own_transform(snapshot: IndexSnapshot, manifest: dict[str, Any], path: Path) -> bytes | None:
    """The transform file of the version ``manifest`` describes (refused if the folder moved on)."""
    if snapshot.manifest[SELF_CHECKSUM] != manifest[SELF_CHECKSUM]:
        raise BadInputError(changed_message(path))
    return snapshot.read_bytes(TRANSFORM_FILE) if snapshot.has(TRANSFORM_FILE) else None


def compact_collection(store: MilvusStore) -> None:
    """Milvus's compaction of the collection on a server (deleted rows dropped from its segments), waited for."""
    job = store.client.compact(store.collection)
    waited = time.monotonic() + _COMPACTION_WAIT_S
    while store.client.get_compaction_state(job) != "Completed":
        if time.monotonic() > waited:
            raise BadInputError(
                f"Milvus's compaction of {store.collection!r} is still running after {_COMPACTION_WAIT_S:.0f} s; "
                "it goes on in Milvus"
            )
        time.sleep(0.2)


def _copy_rows(source: MilvusStore, target: MilvusStore) -> None:
    """Every row ``source``'s version holds, inserted into ``target`` as stored (vectors, text, documents)."""
    fields = ["id", "vector"]
    fields += [TEXT_FIELD] if source.docs or source.bm25 is not None else []
    fields += ["doc_id", "metadata"] if source.docs else []
    # Milvus Lite keeps no MVCC timestamp for an iterator: pymilvus warns and reads at the client's time, which is
    # this version's (the writers' lock is held), so the warning asks nothing of the user.
    with dropping_records("pymilvus.client.iterator.query_iterator", "failed to get mvccTs"):
        rows = source.client.query_iterator(
            source.collection, batch_size=_BATCH, filter=source.visible_filter or "id >= 0", output_fields=fields
        )
    try:
        while batch := rows.next():
            target.client.insert(target.collection, [{name: row[name] for name in fields} for row in batch])
    finally:
        rows.close()
    target.flush()


def rewrite_lite_collection(path: Path, manifest: dict[str, Any], store: MilvusStore, docs: DocumentStore) -> None:
    """Milvus Lite's compaction: the live rows copied into a new collection, one segment, as a fresh build of
    them writes it (Lite keeps BM25 statistics per segment, and its own compaction merges none), in a new version
    of the folder: in-folder data in a new ``milvus.db/``, a Lite file elsewhere a new collection in it (the old
    one dropped once the new version is in)."""
    transform = read_consistent(path, lambda snapshot: _own_transform(snapshot, manifest, path))
    outside = store.stored_uri is not None
    following = _next_version(manifest)
    target: MilvusStore | None = None
    with atomic_dir(path, owned=lambda: version_entries(manifest)) as tmp:
        name = new_collection_name() if outside else store.collection
        uri = store.uri if outside else str(tmp / MILVUS_LOCAL)
        target = MilvusStore(
            uri, name, store.dim, store.metric, store.kind, store.params(), create=True,
            stored_uri=store.stored_uri, docs=store.docs, bm25=store.bm25,
        )  # fmt: skip
        try:
            _copy_rows(store, target)
            files = target.save(tmp)
        finally:
            target.close()
        files += _write_transform(tmp, transform)
        if isinstance(docs, DocStore):
            docs.copy_to(tmp / DOCS_FILE)
            files.append(DOCS_FILE)
        following["milvus_collection"] = name
        write_manifest(tmp, following, files)
    if outside:
        store.drop()


@register_writer(MilvusStore.name)
class MilvusWriter:
    """The writes of a Milvus index (see the module docstring), for the Retriever ``index``: its
    :class:`~whitevec.index.stores.writer.IndexWriter`. ``reopen`` opens the
    folder's current version, ``rebuild`` builds an index (a refit's), both given by the Retriever. Called with the
    Retriever's writes' lock held."""

    def __init__(self, index: WritableIndex, reopen: Reopen, rebuild: Rebuild) -> None:
        self.index = index
        self.reopen = reopen
        self.rebuild = rebuild

    def _milvus_store(self, what: str) -> MilvusStore:
        """The index's Milvus store, or the one-line refusal of ``what`` on an index of another kind."""
        index = self.index
        if not isinstance(index.store, MilvusStore):
            raise BadInputError(f"{what} are not supported on the index at {index.path}; rebuild it")
        lexical = index.manifest.get("lexical")
        if lexical is not None and lexical["library"] != MILVUS_BM25:
            raise BadInputError(
                f"{what} are not supported on the index at {index.path}: its BM25 index lies in the folder beside "
                "the Milvus vectors (built before Milvus kept its own BM25); rebuild it"
            )
        return index.store

    def add(
        self, items: list[Document], vectors: np.ndarray, raw: np.ndarray, replaced: np.ndarray, empty: int
    ) -> None:
        """Write ``items`` (``vectors`` in stored form, in their order): those the index holds (``replaced``) in
        place of their rows, the others at new rows; ``empty`` documents left out for having no known token."""
        store = self._milvus_store("writes")
        with self.index._lock:
            held = self.index._docs.rows_of([d.id for d in items]) if replaced.size else {}
            new = [i for i, d in enumerate(items) if d.id not in held]
            old = [i for i, d in enumerate(items) if d.id in held]
            change = MilvusChange(
                [items[i] for i in new],
                vectors[new],
                {held[items[i].id]: items[i] for i in old},
                vectors[old],
                np.zeros(0, dtype=np.int64),
            )
            self._commit(store, change, empty)

    def delete(self, wanted: list[str]) -> dict[str, int]:
        store = self._milvus_store("deletes")
        with self.index._lock:
            self.index._check_open()  # closed since delete() looked
            held = self.index._docs.rows_of(wanted)
            if held:
                self._commit(store, MilvusChange.deleting(held_rows(held), int(self.index.manifest["dim"])), 0)
        return held

    def _commit(self, store: MilvusStore, change: MilvusChange, skipped: int) -> None:
        index = self.index
        with writing_folder(index.path):  # the path as given inside: a refusal names it (the service's 409)
            try:
                write_milvus_version(index.path, index.manifest, store, index._docs, change, skipped)
            finally:  # staging may have let go of in-folder Lite data: every handle opened again
                self._reload()

    def compact(self) -> int:
        """Milvus Lite: the collection rewritten as one segment, a new version (1). A server: Milvus's compaction
        in place, no new version (0)."""
        store = self._milvus_store("compaction")
        index = self.index
        with index._lock, writing_folder(index.path) as folder:
            index._check_open()  # closed since compact() looked
            if not is_local_uri(store.uri):
                read_consistent(folder, lambda snapshot: _own_transform(snapshot, index.manifest, index.path))
                compact_collection(store)
                return 0
            try:
                rewrite_lite_collection(index.path, index.manifest, store, index._docs)
            finally:
                self._reload()
        return 1

    def refit(self, transform: str | None, show_progress: bool | None) -> None:
        """Every live document encoded again with the transform fitted anew, into a new collection (an in-folder
        Lite database, or beside the old one on the index's URI, which then is dropped)."""
        self._milvus_store("refits")
        index = self.index
        options = rebuild_options(index.manifest, transform)
        with index._lock, writing_folder(index.path) as folder:
            read_consistent(folder, lambda snapshot: _own_transform(snapshot, index.manifest, index.path))
            documents = list(index._docs.get(range(next_row(index.manifest))).values())
            if not documents:
                raise BadInputError(f"the index at {index.path} holds no documents to fit a transform on")
            self.rebuild(
                documents,
                folder,
                encoder=index.encoder,
                show_progress=show_progress,
                empty_documents="keep",  # every live document was admitted once: a refit drops none
                backend="milvus",
                uri=index.manifest["backend_uri"],
                **options,
            )
            self._reload(transform=True)

    def refresh(self) -> bool:
        """Open the newest version when another writer made one; whether it moved on."""
        index = self.index
        with index._lock:
            current = read_consistent(index.path, lambda snapshot: snapshot.manifest[SELF_CHECKSUM])
            if current == index.manifest[SELF_CHECKSUM]:
                return False
            self._reload(transform=True)
            return True

    def _reload(self, *, transform: bool = False) -> None:
        """Open the folder's current version (manifest, store, documents, lexical ranker) in place of this one.
        In-folder Lite data: the old handles closed first (Milvus Lite serves one folder per path in a process);
        elsewhere after, so that a failed open leaves this version serving."""
        index = self.index
        old = (index._docs, index.store)
        in_folder = isinstance(index.store, MilvusStore) and index.store.stored_uri is None
        for handle in old if in_folder else ():
            with contextlib.suppress(Exception):
                handle.close()
        version = self.reopen(index.path)
        index.manifest, index.store, index._docs = version.manifest, version.store, version.docs
        index.lexical = version.lexical
        if transform:
            index.transform = version.transform
        index._columns = None
        for handle in () if in_folder else old:
            with contextlib.suppress(Exception):
                handle.close()
