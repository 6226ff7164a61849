"""Opening one pinned version of an index folder (:mod:`whitevec.index.folder.snapshot`): its manifest, transform,
vector store, documents and lexical ranker, checked against one another (what ``Retriever.load`` reads); or its
documents alone, to check a metadata filter before a model loads."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from whitevec.errors import CorruptFileError
from whitevec.index.empty import NoTerms, NoVectors, is_unfilled
from whitevec.index.filters.language import Filter
from whitevec.index.filters.rows import MetadataColumns
from whitevec.index.folder.layout import (
    DELETED_FILE,
    LEXICAL_COUNTS,
    LEXICAL_FILES,
    RAW_VECTORS_FILE,
    TEMPLATE_PREFIX,
    TRANSFORM_FILE,
    segment_entries,
    total_rows,
)
from whitevec.index.folder.manifest import MANIFEST
from whitevec.index.folder.snapshot import IndexSnapshot, read_consistent
from whitevec.index.lexical.bm25 import LexicalIndex
from whitevec.index.segments.merged import compose
from whitevec.index.segments.view import Segment, live_metadata, open_segments, read_deleted
from whitevec.index.stores.documents import (
    DEFAULT_DOCUMENT_STORE,
    DocumentStore,
    document_store_class,
    document_store_names,
    documents_name,
    documents_of,
)
from whitevec.index.stores.lexical import LexicalRanker
from whitevec.index.stores.vector import (
    KINDS,
    METRICS,
    KeepsLexical,
    VectorStore,
    keeps_lexical,
    store_class,
    store_files,
    store_names,
)
from whitevec.index.stores.writer import own_writer
from whitevec.transforms.frozen import AppliesVectors, load_to_apply


def lexical_of(snapshot: IndexSnapshot, store: VectorStore) -> LexicalRanker | None:
    """The lexical ranker of a pinned version: None without a lexical part, the store's own where it keeps it
    (:class:`~whitevec.index.stores.vector.KeepsLexical`: Milvus's BM25), else the bm25s index in the folder."""
    record = snapshot.manifest.get("lexical")
    if record is None:
        return None
    if keeps_lexical(store) and record["library"] == store.name:
        return cast(LexicalRanker, cast(KeepsLexical, store).lexical_ranker())
    return LexicalIndex.from_snapshot(snapshot)


@dataclass
class Version:
    """One pinned version, open: what a search reads (store, docs, lexical: over every segment) and, for an index
    written by segments (:mod:`whitevec.index.segments.writing`), its segments and deleted rows (None: not writable
    so)."""

    manifest: dict[str, Any]
    transform: AppliesVectors | None  # applied with numpy alone where it can be (whitevec.transforms.frozen)
    store: VectorStore
    docs: DocumentStore
    lexical: LexicalRanker | None
    segments: list[Segment] | None
    deleted: np.ndarray


def open_version(snapshot: IndexSnapshot, device: str) -> Version:
    """Manifest, transform (on ``device``, for one that runs on torch), vectors, documents and lexical index (None
    for an index without one, as every index built before it) of one pinned version (see
    :mod:`whitevec.index.folder.snapshot`)."""
    manifest, folder = snapshot.manifest, snapshot.folder
    check_index_manifest(manifest, folder)
    transform = (
        load_to_apply(snapshot.read_bytes(TRANSFORM_FILE), str(folder / TRANSFORM_FILE), device=device)
        if manifest["transform"] is not None
        else None
    )
    if is_unfilled(manifest):  # created empty: nothing to search until its first write (whitevec.index.empty)
        docs = documents_of(manifest).open(snapshot)
        lexical = None if "lexical" not in manifest else cast(LexicalRanker, NoTerms(manifest["lexical"]))
        none = np.zeros(0, dtype=np.int64)
        return Version(manifest, transform, cast(VectorStore, NoVectors(manifest)), docs, lexical, [], none)
    if "segments" in manifest:
        segments = open_segments(snapshot)
        deleted = read_deleted(snapshot)
        store, docs, lexical = compose(segments, deleted)
        return Version(manifest, transform, store, docs, lexical, segments, deleted)
    store, docs, lexical = _open_whole(snapshot)
    none = np.zeros(0, dtype=np.int64)
    # Written as segments: a store without its own writer, its documents in the folder.
    if own_writer(manifest["backend"]) is not None or documents_name(manifest) != DEFAULT_DOCUMENT_STORE:
        return Version(manifest, transform, store, docs, lexical, None, none)
    own = Segment("", 0, int(manifest["count"]), store, docs, cast(LexicalIndex | None, lexical))
    return Version(manifest, transform, store, docs, lexical, [own], none)


def current_version(folder: Path, device: str = "cpu") -> Version:
    """The version the index folder at ``folder`` holds now, opened (a transform on torch on ``device``): what a
    load reads, a write opens again after it swapped its version in, or a refresh after another writer did."""
    return read_consistent(folder, lambda snapshot: open_version(snapshot, device))


def _open_whole(snapshot: IndexSnapshot) -> tuple[VectorStore, DocumentStore, LexicalRanker | None]:
    """The store, documents and lexical ranker of a version that is one segment (as every build writes it)."""
    manifest, folder = snapshot.manifest, snapshot.folder
    # The documents first: a store that opens them by path (SQLite) does so while the pinned version is most
    # likely still the current one.
    docs = documents_of(manifest).open(snapshot)
    store: VectorStore | None = None
    try:
        store = store_class(manifest["backend"]).open(snapshot)
        lexical = lexical_of(snapshot, store)
        if (
            docs.count != manifest["count"]
            or store.count < manifest["count"]
            or (isinstance(lexical, LexicalIndex) and lexical.count != docs.next_row())
        ):
            raise CorruptFileError(
                f"index at {folder} is inconsistent: manifest count {manifest['count']}, documents {docs.count}, "
                f"vectors {store.count}{'' if lexical is None else f', lexical rows {lexical.count}'}; rebuild "
                "the index"
            )
    except BaseException:
        docs.close()
        if store is not None:
            store.close()
        raise
    return store, docs, lexical


def check_filter_in_folder(folder: str | os.PathLike[str], expression: Filter) -> None:
    """Check ``expression`` against the metadata of the index at ``folder`` before a model loads, as its search
    will (:func:`~whitevec.index.filters.rows.row_filter`): the live documents of every segment of its current
    version, when they are kept in the folder (documents kept in Milvus are checked at the search)."""

    def metadata(snapshot: IndexSnapshot) -> dict[int, Any] | None:
        if documents_name(snapshot.manifest) != DEFAULT_DOCUMENT_STORE:
            return None
        return live_metadata(snapshot)

    found = read_consistent(Path(folder), metadata)
    if found is not None:
        expression.check(MetadataColumns(found, max(found, default=-1) + 1).kinds)


def check_index_manifest(manifest: dict[str, Any], folder: Path) -> None:
    """What the manifest's schema cannot say alone: known choices, and the files this kind of index has."""
    where = folder / MANIFEST
    docs = documents_name(manifest)
    for field, value, allowed in (
        ("metric", manifest["metric"], METRICS),
        ("index_kind", manifest["index_kind"], KINDS),
        ("backend", manifest["backend"], store_names()),
        ("docs", docs, document_store_names()),
    ):
        if value not in allowed:
            raise CorruptFileError(f"{where}: unknown {field} {value!r}; valid: {', '.join(allowed)}")
    documents = document_store_class(docs)
    problem = documents.check_manifest(manifest)
    if problem is not None:
        raise CorruptFileError(f"{where}: {problem}")
    if is_unfilled(manifest):  # its documents (none) and a transform given fitted, only
        _check_files(manifest, where, {*documents.files, *([TRANSFORM_FILE] if manifest["transform"] else [])})
        if manifest["count"] or "segments" in manifest:
            raise CorruptFileError(f"{where}: an index created empty holds no documents. Rebuild the index.")
        return
    per_segment = {*store_files(manifest), *documents.files}
    if "raw_vectors" in manifest:
        per_segment.add(RAW_VECTORS_FILE)
    # A store that keeps the lexical part itself (Milvus's BM25) is its record's library: no files here.
    if "lexical" in manifest and manifest["lexical"].get("library") != manifest["backend"]:
        per_segment.update(LEXICAL_FILES)
    expected = {entry["prefix"] + name for entry in segment_entries(manifest) for name in per_segment}
    if "segments" in manifest:
        expected.update(TEMPLATE_PREFIX + name for name in store_files(manifest))
        if LEXICAL_FILES[0] in per_segment:
            expected.update(entry["prefix"] + LEXICAL_COUNTS for entry in segment_entries(manifest))
    elif LEXICAL_FILES[0] in per_segment and LEXICAL_COUNTS in manifest["files"]:
        expected.add(LEXICAL_COUNTS)  # a build's term counts: builds keep them since issue 52, older ones do not
    if manifest.get("deleted"):
        expected.add(DELETED_FILE)
    if manifest["transform"] is not None:
        expected.add(TRANSFORM_FILE)
        if manifest["transform"]["file"] != TRANSFORM_FILE:
            raise CorruptFileError(f"{where}: the transform must be {TRANSFORM_FILE}")
    rows = sum(int(entry["rows"]) for entry in segment_entries(manifest))
    if rows != total_rows(manifest):
        raise CorruptFileError(
            f"{where}: its segments hold {rows} rows; count and deleted say {total_rows(manifest)}. "
            "Rebuild the index."
        )
    _check_files(manifest, where, expected)


def _check_files(manifest: dict[str, Any], where: Path, expected: set[str]) -> None:
    """A one-line CorruptFileError when the manifest lists other files than ``expected``."""
    files = set(manifest["files"])
    if files != expected:
        raise CorruptFileError(
            f"{where} lists the files {sorted(files)}; an index of this kind has {sorted(expected)}. "
            "Rebuild the index."
        )
