"""The writing half of :class:`whitevec.index.Retriever`: add, upsert, delete, compact, refit and refresh a loaded
index, and keep searching the version written. Each write goes through the writer of the index's backend
(:class:`~whitevec.index.stores.writer.IndexWriter`): :class:`SegmentWriter` where the store's indexes are written
as segments in their folder (FAISS: one new version per write, :mod:`whitevec.index.segments.writing`), else the
store's own (Milvus's, :mod:`whitevec.index.milvus.writes`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from whitevec.datasets.retrieval import Document, check_unique_ids
from whitevec.encoders.protocol import EXTERNAL, ExternalEncoder
from whitevec.errors import BadInputError
from whitevec.index.build import (
    ENCODER_FIELDS,
    MODEL_FIELDS,
    as_documents,
    build_from_vectors,
    build_index,
    meaningful_documents,
)
from whitevec.index.empty import check_first_write, first_write_options, is_unfilled
from whitevec.index.folder.raw_vectors import keeps_raw_vectors, live_raw_vectors
from whitevec.index.folder.snapshot import read_consistent
from whitevec.index.given_vectors import checked_vectors, read_vectors
from whitevec.index.segments.requests import AddResult, DeleteResult, check_ids, check_on_existing
from whitevec.index.segments.writing import (
    IndexState,
    ReloadNeededError,
    check_own_version,
    commit,
    live_documents,
    live_rows,
    merge_plan,
    merged,
    new_segment,
    plan_add,
    rebuild_options,
    refreshed,
    searchable,
    with_merges,
)
from whitevec.index.stores.vector import stored_form
from whitevec.index.stores.writer import IndexWriter, WritableIndex, held_rows, own_writer
from whitevec.index.versions import current_version
from whitevec.utils.io import writing_folder

if TYPE_CHECKING:
    from whitevec.encoders.protocol import EncoderLike


def other_encoder(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The manifest fields in which the version ``new`` was encoded otherwise than ``old``: the model by its
    checksum where both record one (a model moved, or named otherwise, is the same), else by its name."""
    identity = "model_sha256" if old.get("model_sha256") and new.get("model_sha256") else "model"
    fields = [name for name in ENCODER_FIELDS if name != "model"] + [identity]
    return [name for name in fields if old.get(name) != new.get(name)]


@dataclass(frozen=True)
class PreparedWrite:
    """An add with its model work done (:meth:`IndexWrites._prepare_write`): the number of documents given, those
    with a token the model knows, their encoder vectors, and what an id the index holds does."""

    given: int
    documents: list[Document]
    raw: np.ndarray | None
    on_existing: str


class IndexWrites(WritableIndex):
    """Writes to the index a Retriever loaded, one at a time (``_write_lock``), through its backend's writer
    (``_writer``; None: an index no writer takes, refused in one line). A write holds the searches' lock only to
    swap its version in, so a search sees the version before a write or the one after it, and is answered while a
    write encodes, writes, flushes or merges. The attributes a writer reads: :class:`WritableIndex`'s."""

    _write_lock: threading.RLock
    _closed: bool
    _writer: IndexWriter | None

    def _writer_for(self, state: IndexState | None) -> IndexWriter | None:
        """The writer of this index: its segments' where ``state`` holds them, else its store's own (made with
        how to open a version and build an index, which a backend does not import)."""
        if state is not None:
            return SegmentWriter(self, state)
        own = own_writer(self.manifest["backend"])
        return None if own is None else own(self, current_version, build_index)

    def _writing_through(self) -> IndexWriter:
        if self._writer is None:
            raise BadInputError(f"writes are not supported on the index at {self.path}; rebuild it")
        return self._writer

    @property
    def count(self) -> int:
        """Number of documents in the index (deleted ones not counted)."""
        return int(self.manifest["count"])

    def add(
        self,
        docs: Sequence[Document],
        show_progress: bool | None = None,
        *,
        vectors: Any = None,
        empty_documents: str = "skip",
        on_existing: str = "error",
    ) -> int:
        """Add documents; persisted (flushed to disk) before returning. Returns the new count (:meth:`write`
        says what became of each document).

        ``on_existing``: what an id the index already holds does: ``"error"`` refuses the add (the id named,
        nothing written), ``"replace"`` replaces that document (an upsert: :meth:`upsert`), ``"skip"`` keeps the
        one held. Documents with no token the model knows are counted in a warning and skipped, kept or refused
        by ``empty_documents`` as in :meth:`build` (when all are skipped, nothing is written).

        ``vectors``: the documents' vectors, a row each in their order, in the encoder's space (before the
        index's transform, which is applied to them; :attr:`input_dim` columns): a float32 array or a ``.npy`` /
        ``.safetensors`` file. Then nothing is encoded and every document is kept. An index of given vectors
        (:attr:`is_external`) needs them. The first write of an index created empty (:meth:`create`) builds it,
        fitting its transform on that write's vectors.

        One new segment, the rest linked into the next version, swapped in whole
        (:mod:`whitevec.index.segments.writing`): the cost is the added documents'; a failed add leaves the index
        as it was; other processes' readers see the old or the new version. Refused when another process wrote
        since this Retriever loaded.

        Raises:
            BadInputError: empty list, an id given twice, an id already in the index under ``"error"`` (named),
                the index changed on disk since it was loaded, or documents with no known token under ``"error"``;
                ``vectors`` not one finite row of :attr:`input_dim` numbers per document, or missing for an index
                of given vectors; a first write of an empty index bringing fewer documents than its transform's
                fit needs (the number named).
        """
        written = self.write(
            docs, show_progress, vectors=vectors, empty_documents=empty_documents, on_existing=on_existing
        )
        return written.count

    def write(
        self,
        docs: Sequence[Document],
        show_progress: bool | None = None,
        *,
        vectors: Any = None,
        empty_documents: str = "skip",
        on_existing: str = "error",
        encoder: EncoderLike | None = None,
    ) -> AddResult:
        """:meth:`add`, answering how many documents were added, replaced and skipped, and the new count.
        ``encoder``: the index's own encoder as this call may use it (None: itself; a server passes one whose
        calls run on its encoder thread, in turn with the searches)."""
        prepared = self._prepare_write(
            docs,
            show_progress,
            empty_documents,
            on_existing,
            encoder if encoder is not None else self.encoder,
            vectors,
        )
        return self._commit_write(prepared)

    def _prepare_write(
        self,
        docs: Sequence[Document],
        show_progress: bool | None,
        empty_documents: str,
        on_existing: str,
        encoder: EncoderLike,
        vectors: Any = None,
    ) -> PreparedWrite:
        """The part of :meth:`write` that uses the model (its tokens and vectors), checks first; with
        ``vectors`` given, no model: every document kept with its row."""
        on_existing = check_on_existing(on_existing)
        given = as_documents(docs)
        if not given:
            raise BadInputError("no documents to add")
        check_unique_ids(given, where="the documents to add")
        if vectors is None and isinstance(self.encoder, ExternalEncoder):  # no model given it at load either
            raise BadInputError(
                f"{self._external_note()}: give the documents' vectors (vectors; CLI and HTTP: vectors)"
            )
        raw = None
        if vectors is not None:
            raw = checked_vectors(read_vectors(vectors), rows=len(given), dim=self.input_dim)
        meaningful = given if raw is not None else meaningful_documents(given, encoder, empty_documents)
        with self._lock:  # refused before any encoding: an id held under "error"
            self._check_open()
            plan_add(self._docs, meaningful, on_existing, self.path)
            if is_unfilled(self.manifest):
                check_first_write(self.manifest, len(meaningful))
        if raw is None and meaningful:
            raw = encoder.encode([d.text for d in meaningful], show_progress=show_progress)
        return PreparedWrite(len(given), meaningful, raw, on_existing)

    @property
    def is_external(self) -> bool:
        """Whether the index holds vectors the caller gives (built or created without a model,
        :class:`~whitevec.encoders.protocol.ExternalEncoder`): searched by ``query_vectors``, written with
        ``vectors``, no model loaded."""
        return self.manifest.get("encoder") == EXTERNAL

    @property
    def input_dim(self) -> int:
        """The dimension of the vectors searches and writes take: the encoder's, before the transform."""
        return int(self.manifest["encoder_dim"])

    def _external_note(self) -> str:
        """Whose vectors an index of given vectors holds, for its refusals."""
        return f"this index holds vectors given by the caller ({self.manifest['model']}, {self.input_dim}-d)"

    def _commit_write(self, prepared: PreparedWrite) -> AddResult:
        """Write what :meth:`_prepare_write` encoded as one new version. Searches go on meanwhile: the segments
        are written and merged outside their lock, which is held only to swap the new version in."""
        given, meaningful, raw = prepared.given, prepared.documents, prepared.raw
        empty = given - len(meaningful)
        with self._write_lock:
            self._check_open()  # closed while the documents were encoded
            items, replaced = plan_add(self._docs, meaningful, prepared.on_existing, self.path)  # again: a write
            if items and raw is not None:
                index_of = {d.id: i for i, d in enumerate(meaningful)}
                position = [index_of[d.id] for d in items]
                vectors = stored_form(self._transform, raw[position], self.manifest["metric"])
                self._writing_through().add(items, vectors, raw[position], replaced, empty)
        new = len(items) - replaced.size
        return AddResult(
            added=new, replaced=int(replaced.size), skipped=given - new - replaced.size, count=self.count
        )

    def existing_ids(self, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` the index holds (live documents), in the order given."""
        with self._lock:
            self._check_open()
            held = self._docs.rows_of(list(ids))
        return [doc_id for doc_id in ids if doc_id in held]

    def upsert(
        self,
        docs: Sequence[Document],
        show_progress: bool | None = None,
        *,
        vectors: Any = None,
        empty_documents: str = "skip",
    ) -> int:
        """:meth:`add` with ``on_existing="replace"``: a document whose id the index holds replaces it."""
        return self.add(
            docs, show_progress, vectors=vectors, empty_documents=empty_documents, on_existing="replace"
        )

    def delete(self, ids: Sequence[str]) -> DeleteResult:
        """Delete the documents with these ids (one new version: a tombstone list, nothing rewritten; on a Milvus
        index, Milvus's delete); ids the index does not hold are reported in the result (how many, the first
        few), the rest deleted.

        Raises:
            BadInputError: no ids, not strings, or the index changed on disk since it was loaded.
        """
        wanted = check_ids(ids)
        with self._write_lock:
            self._check_open()
            held = self._writing_through().delete(wanted)
        return DeleteResult(deleted=len(held), missing=[doc_id for doc_id in wanted if doc_id not in held])

    def compact(self) -> int:
        """Merge every segment into one and drop the deleted rows (one new version); the segments merged (0: it
        was one segment with nothing deleted, and nothing was written).

        Raises:
            BadInputError: every document is deleted (an index keeps at least one segment: nothing can be
                merged into one), or the index changed on disk since it was loaded.
        """
        with self._write_lock:
            self._check_open()
            return self._writing_through().compact()

    def refit(self, transform: str | None = None, show_progress: bool | None = None) -> None:
        """Fit the transform again on every live document and rewrite the index with it (one new version: the one
        write whose cost is the index's size). An index built with ``keep_raw_vectors=True`` fits on the raw
        vectors it keeps and calls no encoder (:mod:`whitevec.index.folder.raw_vectors`; the refit index keeps them
        too); any other encodes every document again. ``transform``: another spec to fit (None: the index's
        own). docs/results/staleness.md measures what a fit made before most documents were added costs;
        ``index info``'s state says how many were.

        Raises:
            BadInputError: the index changed on disk since it was loaded, or its transform came fitted and no
                ``transform`` is named.
        """
        with self._write_lock:
            self._check_open()
            self._writing_through().refit(transform, show_progress)

    def refresh(self) -> bool:
        """Search the newest version of the index folder from now on, when another writer (another process, the
        command line) made one since this Retriever loaded or last wrote: the segments both versions hold are
        kept, only new ones are read (after a rebuild or refit, the whole index). Whether it moved on."""
        with self._write_lock:  # a write of this Retriever's in progress swaps in its own version
            self._check_open()
            return self._writing_through().refresh()

    def _check_open(self) -> None:
        """A one-line refusal of any use of a closed Retriever (its files and connections are let go)."""
        if self._closed:
            raise BadInputError(f"this Retriever of the index at {self.path} is closed; load the index again")


class SegmentWriter:
    """The writes of an index kept as segments in its folder (:mod:`whitevec.index.segments.writing`): each one
    new version whose cost is what changed; ``state``, the loaded version's segments and deleted rows. Called
    with the Retriever's writes' lock held."""

    def __init__(self, index: IndexWrites, state: IndexState) -> None:
        self.index = index
        self.state = state

    def add(
        self, items: list[Document], vectors: np.ndarray, raw: np.ndarray, replaced: np.ndarray, empty: int
    ) -> None:
        if is_unfilled(self.index.manifest):
            self._fill(items, raw)
            return
        with self._next_version() as state:
            made = new_segment(state, items, vectors, raw)
            deleted = np.union1d(state.deleted, replaced).astype(np.int64)
            self._use(with_merges(commit(state, state.segments, [made], deleted, skipped=empty)))

    def delete(self, wanted: list[str]) -> dict[str, int]:
        held = self.index._docs.rows_of(wanted)
        if held:
            with self._next_version() as state:
                deleted = np.union1d(state.deleted, held_rows(held)).astype(np.int64)
                self._use(with_merges(commit(state, state.segments, [], deleted)))
        return held

    def compact(self) -> int:
        with self._next_version() as state:
            merging = merge_plan(state, full=True)
            if merging and not self.index.count:
                raise BadInputError(
                    f"every document of the index at {self.index.path} is deleted, and an index keeps at least "
                    f"one segment: nothing was compacted; its {state.deleted.size} deleted documents stay in its "
                    "files until documents are added and it is compacted, or it is built again"
                )
            if merging:
                self._use(merged(state, merging))
        return len(merging)

    def _fill(self, items: list[Document], raw: np.ndarray) -> None:
        """The first write of an index created empty: a build of ``items`` from their ``raw`` vectors with the
        index's settings (:mod:`whitevec.index.empty`), searched from now on."""
        index = self.index
        with index._lock, self._next_version() as state:
            check_first_write(index.manifest, len(items))
            options = first_write_options(index.manifest, state.path)
            build_index(items, state.path, encoder=index.encoder, vectors=raw, **options)
            self._reload(state)

    def refit(self, transform: str | None, show_progress: bool | None) -> None:
        index = self.index
        options = rebuild_options(index.manifest, transform)
        with index._lock, self._next_version() as state:
            documents = live_documents(state)
            if not documents:
                raise BadInputError(f"the index at {index.path} holds no documents to fit a transform on")
            if index.is_external and not keeps_raw_vectors(index.manifest):
                raise BadInputError(
                    f"{index._external_note()}, and keeps no raw vectors to fit on: build it again with "
                    "keep_raw_vectors (--keep-raw-vectors) to refit it"
                )
            if keeps_raw_vectors(index.manifest):
                raw = live_raw_vectors(state.path, index.manifest, state.segments, live_rows(state))
                record = {k: v for k, v in index.manifest.items() if k in ENCODER_FIELDS + MODEL_FIELDS}
                build_from_vectors(
                    documents, raw, state.path, encoder=index.encoder, encoder_record=record, **options
                )
            else:
                # Every live document was admitted once (a build's or an add's choice): a refit drops none, as
                # the refit from raw vectors drops none.
                build_index(
                    documents,
                    state.path,
                    encoder=index.encoder,
                    show_progress=show_progress,
                    empty_documents="keep",
                    **options,
                )
            self._reload(state)

    def _reload(self, state: IndexState) -> None:
        """Search the version a rebuild of the index (a refit, a first write) just wrote at ``state.path``."""
        version = current_version(state.path)
        for segment in state.segments:
            segment.close()
        assert version.segments is not None  # a FAISS index in its folder, as this one was
        self.index.transform = version.transform
        self._use(IndexState(state.path, version.manifest, version.segments, version.deleted))

    def refresh(self) -> bool:
        index, state = self.index, self.state
        with index._lock:
            try:
                moved = read_consistent(index.path, lambda snapshot: refreshed(snapshot, state))
            except ReloadNeededError:
                version = current_version(index.path)
                # Queries are encoded by the encoder loaded with the first version: another would be searched
                # with the wrong vectors (the wrong hits, or a dimension mismatch).
                changed = other_encoder(state.manifest, version.manifest)
                if version.segments is None or changed:
                    for segment in version.segments or ():
                        segment.close()
                    how = f"with another encoder ({', '.join(changed)})" if changed else "on another backend"
                    raise BadInputError(f"the index at {index.path} was rebuilt {how}; load it again") from None
                for segment in state.segments:
                    segment.close()
                index.transform = version.transform
                moved = IndexState(index.path, version.manifest, version.segments, version.deleted)
            if moved is None:
                return False
            self._use(moved)
            return True

    def _writing(self) -> contextlib.AbstractContextManager[object]:
        """What a write holds while it writes and merges segments, beside the Retriever's ``_write_lock`` (one
        write at a time) and the writers' lock: nothing searches need, so they go on; but the searches' lock
        where the lexical part analyses with the model's tokenizer (``encoder`` analyzer), which one thread uses
        at a time (a tokenizer's settings change between calls)."""
        lexical = self.index.manifest.get("lexical") or {}
        return (
            self.index._lock if lexical.get("analyzer", {}).get("name") == "encoder" else contextlib.nullcontext()
        )

    @contextlib.contextmanager
    def _next_version(self) -> Iterator[IndexState]:
        """The loaded version's state, to write the next version from (the caller holds the writes' lock):
        under :meth:`_writing` and the writers' lock, checked to be what the folder holds, its ``path`` the
        folder the index's path names now (a symbolic link resolved once: the write swaps the folder it names,
        and the link stays)."""
        with self._writing(), writing_folder(self.index.path) as target:
            self.index._check_open()
            state = self.state
            state.path = target
            check_own_version(state, self.index.path)  # refused naming the path the index was loaded from
            yield state

    def _use(self, state: IndexState) -> None:
        """Search the version ``state`` holds from now on; the segments it retired closed (under the searches'
        lock: no search still reads them)."""
        index = self.index
        with index._lock:
            self.state = state
            index.manifest = state.manifest
            index.store, index._docs, index.lexical = searchable(state, index.encoder)
            index._columns = None
            for segment in state.retired:
                segment.close()
            state.retired.clear()
