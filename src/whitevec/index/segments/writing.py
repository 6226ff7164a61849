"""Writing to a built index: add, upsert, delete and compact, each one new version of the folder whose cost is
what changed, not the index's size.

A write makes the next version in a temporary folder beside the index and swaps it in whole
(:func:`whitevec.utils.io.atomic_dir`: readers keep the version they pinned, a failed or killed write leaves the
index as it was). Into that folder it links (hard links) every file it does not change, writes a new segment
(:mod:`whitevec.index.segments.view`) for added documents and a new ``deleted.npy`` for deleted ones, and a
manifest that takes the linked files' checksums from the last one: an add of 10 documents to a million-vector index
writes and hashes 10 documents' files. Writers to one index take turns (``writers_lock`` on its parent folder).

A store with trained codes (IVF lists, PQ codebooks, the sign step of 1-bit codes) encodes new segments with the
training of the build: the first write keeps a trained, empty copy of the store (``template.*``; making it costs
one copy of the index in memory, once).

Past :data:`MAX_SEGMENTS` segments, a write merges every segment but the largest into one; past
:data:`COMPACT_DELETED_SHARE` of rows deleted, it merges them all (:func:`compact` does so on demand). A merge
re-adds each kept row's vector as the store keeps it (its rescoring vector, else its decoded code) with the
build's training; the lexical part of a merged segment is rebuilt over its documents.

An index whose vectors live in Milvus is written through Milvus's own calls (:mod:`whitevec.index.milvus.writes`).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError
from whitevec.index.folder.layout import (
    DELETED_FILE,
    DOCS_FILE,
    LEXICAL_COUNTS,
    LEXICAL_FILES,
    RAW_VECTORS_FILE,
    TEMPLATE_PREFIX,
    TRANSFORM_FILE,
    segment_entries,
)
from whitevec.index.folder.manifest import CHOICE_FIELD, SELF_CHECKSUM, write_manifest
from whitevec.index.folder.raw_vectors import keeps_raw_vectors, live_raw_vectors, write_raw_vectors
from whitevec.index.folder.snapshot import IndexSnapshot, changed_message, read_consistent
from whitevec.index.lexical.bm25 import LexicalIndex
from whitevec.index.lexical.counts import TermCounts
from whitevec.index.segments.merged import compose
from whitevec.index.segments.requests import HeldIdsError
from whitevec.index.segments.view import Segment, open_segment, open_template, read_deleted
from whitevec.index.stores.documents import DocumentStore
from whitevec.index.stores.lexical import LexicalRanker
from whitevec.index.stores.sqlite_docs import write_docs
from whitevec.index.stores.vector import VectorStore, foreign_entries, store_files, version_entries
from whitevec.utils.io import atomic_dir, writing_to

MAX_SEGMENTS = 8  # more than this after a write: every segment but the largest is merged into one
COMPACT_DELETED_SHARE = 0.2  # more rows deleted than this share: every segment is merged, the deleted dropped
_STAGING = ".staging"  # a store's files are written here, then renamed into the version with their prefix


@dataclass
class IndexState:
    """What a loaded index holds of its version: the manifest, its open segments and deleted rows, and (read on
    the first write) the template a new segment is made from."""

    path: Path
    manifest: dict[str, Any]
    segments: list[Segment]
    deleted: np.ndarray
    template: VectorStore | None = None
    # Segments of earlier versions this write no longer holds, closed once searches have moved on to this one
    # (by whoever swaps it in: a search on another thread may still be reading them).
    retired: list[Segment] = dataclasses.field(default_factory=list)


@dataclass
class NewSegment:
    """A segment made in memory, to be written: its store (rows 0..n-1), documents and lexical part, and its raw
    vectors where the index keeps them."""

    store: VectorStore
    docs: list[Document]
    lexical: LexicalIndex | None
    counts: TermCounts | None = None
    raw: np.ndarray | None = None


def searchable(state: IndexState, encoder: object) -> tuple[VectorStore, DocumentStore, LexicalRanker | None]:
    """What a search reads of ``state``'s segments, each lexical part's ``encoder`` analyzer bound to the index's
    model first (a segment read from disk has it unbound)."""
    for segment in state.segments:
        if segment.lexical is not None:
            segment.lexical = segment.lexical.with_encoder(encoder)
    return compose(state.segments, state.deleted)


# --- planning ------------------------------------------------------------------------------------------------
def plan_add(
    docs: DocumentStore, items: list[Document], on_existing: str, path: Path
) -> tuple[list[Document], np.ndarray]:
    """``(to_add, rows_to_delete)`` for adding ``items`` by ``on_existing``: an id already held refused (named),
    skipped, or replaced (its row deleted in the same version)."""
    held = docs.rows_of([d.id for d in items])
    if not held:
        return items, np.zeros(0, dtype=np.int64)
    if on_existing == "error":
        raise HeldIdsError([d.id for d in items if d.id in held], len(items), path)
    if on_existing == "skip":
        return [d for d in items if d.id not in held], np.zeros(0, dtype=np.int64)
    return items, np.sort(np.fromiter(held.values(), dtype=np.int64, count=len(held)))


# --- making segments -------------------------------------------------------------------------------------------
def new_segment(
    state: IndexState, docs: list[Document], vectors: np.ndarray, raw: np.ndarray | None = None
) -> NewSegment:
    """A segment of ``docs`` with their stored-form ``vectors``, encoded with the build's training, and their raw
    encoder vectors ``raw`` (required by an index that keeps them, ignored by one that does not)."""
    if keeps_raw_vectors(state.manifest) and raw is None:
        raise ValueError("this index keeps its raw vectors: a new segment needs them")
    store = template_of(state).empty_copy()
    store.add(np.arange(len(docs), dtype=np.int64), vectors)
    kept_raw = raw if keeps_raw_vectors(state.manifest) else None
    return NewSegment(store, docs, *_lexical_over(state, docs), raw=kept_raw)


def merged_segment(state: IndexState, merging: list[Segment]) -> NewSegment:
    """One segment holding the live rows of ``merging``, in row order."""
    store = template_of(state).empty_copy()
    live = live_rows(state)
    docs: list[Document] = []
    for segment in merging:
        kept = np.flatnonzero(live[segment.base : segment.base + segment.rows]).astype(np.int64)
        if not kept.size:
            continue
        found = segment.docs.get(kept.tolist())
        docs += [found[int(row)] for row in kept]
        start = len(docs) - kept.size
        store.add_kept(np.arange(start, len(docs), dtype=np.int64), segment.store.kept_vectors(kept))
    raw = (
        live_raw_vectors(state.path, state.manifest, merging, live) if keeps_raw_vectors(state.manifest) else None
    )
    return NewSegment(store, docs, *_lexical_over(state, docs), raw=raw)


def _lexical_over(state: IndexState, docs: list[Document]) -> tuple[LexicalIndex | None, TermCounts | None]:
    """The new segment's BM25 over its documents, with the index's analyzer and parameters, and its term counts
    (None, None without a lexical part)."""
    ranker = state.segments[0].lexical
    if ranker is None or not docs:
        return None, None
    params = ranker.params
    texts = [d.text for d in docs]
    made = LexicalIndex.build(
        texts, ranker.analyzer, k1=params.k1, b=params.b, method=params.method, keep_counts=True
    )
    return made, TermCounts.of_build(made)


def _counted(state: IndexState, segment: Segment) -> Segment:
    """``segment`` with its term counts. A build's segment is opened without them (a search of one segment needs
    none): they are read from the build's ``lexical_counts`` file, or, for an index built before builds kept
    them, made by analysing its documents again (once, at the index's first write)."""
    if segment.lexical is None or segment.counts is not None:
        return segment
    name = segment.prefix + LEXICAL_COUNTS
    if name in state.manifest["files"]:  # the version this writer holds (checked, under the writers' lock)
        data = read_consistent(state.path, lambda snapshot: snapshot.read_bytes(name))
        return dataclasses.replace(segment, counts=TermCounts.from_bytes(data, state.path / name, segment.lexical))
    found = segment.docs.get(range(segment.rows))
    texts = [found[row].text if row in found else "" for row in range(segment.rows)]
    return dataclasses.replace(segment, counts=TermCounts.of(segment.lexical, texts))


def template_of(state: IndexState) -> VectorStore:
    """The trained, empty store of the index: read from its version where it keeps one, else made from the
    build's store; once, when a write first needs it (a delete that merges nothing needs none). The caller holds
    the writers' lock and has checked the version."""
    if state.template is None:
        if "segments" in state.manifest:
            state.template = read_consistent(
                state.path, lambda snapshot: open_template(_own(snapshot, state, state.path))
            )
        else:
            state.template = state.segments[0].store.empty_copy()
    return state.template


# --- writing a version -----------------------------------------------------------------------------------------
def commit(
    state: IndexState, keep: list[Segment], made: list[NewSegment], deleted: np.ndarray, *, skipped: int = 0
) -> IndexState:
    """Write the version holding the segments ``keep`` (unchanged, linked) and ``made`` (written), with the rows
    ``deleted`` (in the numbering before: rows of segments not kept are gone) and swap it in; the new state,
    the kept segments' objects reused. The caller holds the writers' lock and has checked the version."""
    generation = int(state.manifest.get("generation", 0)) + 1
    keep = [_counted(state, segment) for segment in keep]
    bases, entries, base = {}, [], 0
    for segment in keep:
        bases[segment.prefix] = base
        entries.append({**segment.entry(), "base": base})
        base += segment.rows
    prefixes = _new_prefixes(state, generation, len(made), keep)
    for prefix, fresh in zip(prefixes, made, strict=True):
        record = {"prefix": prefix, "base": base, "rows": len(fresh.docs)}
        entries.append(record if fresh.lexical is None else {**record, "lexical": fresh.lexical.record()})
        base += len(fresh.docs)
    renumbered = _renumbered(deleted, state.segments, bases)
    manifest = _next_manifest(state.manifest, entries, renumbered, generation, skipped)
    with atomic_dir(state.path, owned=lambda: version_entries(state.manifest)) as tmp:
        known = _link_unchanged(state, keep, tmp)
        files = list(known)
        if TEMPLATE_PREFIX + state.segments[0].store.files_for(manifest["index_params"])[0] not in known:
            files += _write_store(template_of(state), tmp, TEMPLATE_PREFIX)
        for segment in keep:  # counts first made now (an older build's segment, at the first write)
            if segment.counts is not None and segment.prefix + LEXICAL_COUNTS not in known:
                files.append(segment.counts.save(tmp, segment.prefix))
        for prefix, fresh in zip(prefixes, made, strict=True):
            files += _write_segment(fresh, tmp, prefix)
        if renumbered.size:
            with writing_to(tmp / DELETED_FILE), open(tmp / DELETED_FILE, "wb") as out:
                np.save(out, renumbered, allow_pickle=False)
            files.append(DELETED_FILE)
        written = write_manifest(tmp, manifest, files, known)
    return _reopened(state, written, keep, bases, entries[len(keep) :], renumbered)


def _new_prefixes(state: IndexState, generation: int, count: int, keep: list[Segment]) -> list[str]:
    """The new segments' prefixes: none for the only segment of a fully merged index (its files are then named as
    a build names them), else the generation's (``s000007.``, ``s000007b.``, ...). One that would give a file the
    name of an entry the folder holds that is not the index's (a stray ``s000007.index.faiss`` of the user's,
    kept by every write) is passed over."""
    names = segment_file_names(state.manifest)
    foreign = foreign_entries(state.path, state.manifest)
    numbered = (f"s{generation:06d}{_suffix(i)}." for i in itertools.count())
    candidates = itertools.chain([] if keep else [""], numbered)
    free = (prefix for prefix in candidates if not any(prefix + name in foreign for name in names))
    return list(itertools.islice(free, count))


def _suffix(i: int) -> str:
    return "" if i == 0 else chr(ord("a") + i) if i < 26 else f"z{i}"


def _renumbered(deleted: np.ndarray, before: list[Segment], bases: dict[str, int]) -> np.ndarray:
    """The deleted rows of the kept segments, numbered as the new version numbers their rows."""
    out = [
        deleted[(deleted >= s.base) & (deleted < s.base + s.rows)] - s.base + bases[s.prefix]
        for s in before
        if s.prefix in bases
    ]
    return np.sort(np.concatenate(out)).astype(np.int64) if out else np.zeros(0, dtype=np.int64)


def _next_manifest(
    manifest: dict[str, Any], entries: list[dict[str, Any]], deleted: np.ndarray, generation: int, skipped: int
) -> dict[str, Any]:
    rows = sum(int(entry["rows"]) for entry in entries)
    out = {k: v for k, v in manifest.items() if k not in ("files", "deleted", SELF_CHECKSUM)}
    out.update(segments=entries, count=rows - int(deleted.size), generation=generation)
    out["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    if deleted.size:
        out["deleted"] = int(deleted.size)
    if skipped:
        out["skipped_documents"] = int(manifest.get("skipped_documents", 0)) + skipped
    if "lexical" in manifest:
        out["lexical"] = lexical_totals([entry["lexical"] for entry in entries if "lexical" in entry], manifest)
    return out


def lexical_totals(records: list[dict[str, Any]], manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest's ``lexical`` record of a segmented index: the ranker and analyzer, and the segments' counts
    summed (``terms``: term columns over all segments; a term two segments hold counts twice)."""
    if len(records) == 1:
        return dict(records[0])
    out = dict(records[0] if records else manifest["lexical"])
    out["documents"] = sum(int(r["documents"]) for r in records)
    for field in ("documents_without_terms", "terms", "postings"):
        out[field] = sum(int(r[field]) for r in records)
    out["build_seconds"] = round(sum(float(r["build_seconds"]) for r in records), 3)
    return out


def _link_unchanged(state: IndexState, keep: list[Segment], tmp: Path) -> dict[str, Any]:
    """Link the kept segments' files, the transform and the template into ``tmp``; their manifest entries."""
    files = state.manifest["files"]
    prefixes = {s.prefix for s in keep}
    wanted = [
        name
        for name in files
        if name != DELETED_FILE
        and (file_segment(name, state.manifest) in prefixes or file_segment(name, state.manifest) is None)
    ]
    for name in wanted:
        try:
            os.link(state.path / name, tmp / name)
        except OSError:  # a file system without hard links: a copy (the cost the links avoid)
            shutil.copyfile(state.path / name, tmp / name)
    return {name: files[name] for name in wanted}


def file_segment(name: str, manifest: dict[str, Any]) -> str | None:
    """The prefix of the segment a file of ``manifest``'s version belongs to ("" for the build's own); None for a
    file of the whole index (the transform, the template, the tombstone list)."""
    if name.startswith(TEMPLATE_PREFIX):
        return None
    for entry in segment_entries(manifest):
        if entry["prefix"] and name.startswith(entry["prefix"]):
            return str(entry["prefix"])
    return "" if name in segment_file_names(manifest) else None


def segment_file_names(manifest: dict[str, Any]) -> set[str]:
    """The names a segment's files may have, without its prefix (the build's own segment's names)."""
    return {*store_files(manifest), DOCS_FILE, *LEXICAL_FILES, LEXICAL_COUNTS, RAW_VECTORS_FILE}


def _write_store(store: VectorStore, tmp: Path, prefix: str) -> list[str]:
    """``store`` saved into ``tmp`` with ``prefix`` before each of its files' names."""
    staging = tmp / _STAGING
    staging.mkdir()
    try:
        names = store.save(staging)
        for name in names:
            os.replace(staging / name, tmp / (prefix + name))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [prefix + name for name in names]


def _write_segment(segment: NewSegment, tmp: Path, prefix: str) -> list[str]:
    files = _write_store(segment.store, tmp, prefix)
    write_docs(tmp / (prefix + DOCS_FILE), segment.docs)
    files.append(prefix + DOCS_FILE)
    if segment.lexical is not None:
        staging = tmp / _STAGING
        staging.mkdir()
        try:
            for name in segment.lexical.save(staging):
                os.replace(staging / name, tmp / (prefix + name))
                files.append(prefix + name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    if segment.counts is not None:
        files.append(segment.counts.save(tmp, prefix))
    if segment.raw is not None:
        files.append(write_raw_vectors(tmp, segment.raw, prefix))
    return files


def _reopened(
    state: IndexState,
    written: dict[str, Any],
    keep: list[Segment],
    bases: dict[str, int],
    new_entries: list[dict[str, Any]],
    deleted: np.ndarray,
) -> IndexState:
    """The state of the version just swapped in: kept segments renumbered, new ones opened from its files,
    merged-away ones retired (closed by the swap, see :attr:`IndexState.retired`)."""
    segments = [dataclasses.replace(s, base=bases[s.prefix]) for s in keep]
    with IndexSnapshot.open(state.path) as snapshot:
        for entry in new_entries:
            segments.append(open_segment(snapshot, written, entry))
    retired = [*state.retired, *(s for s in state.segments if s.prefix not in bases)]
    return IndexState(state.path, written, segments, deleted, state.template, retired)


def check_own_version(state: IndexState, named: Path) -> None:
    """Refuse a write when the folder no longer holds the version ``state`` was read from (called under the
    writers' lock); ``named``: the index's path as the message names it (as given: a link, perhaps)."""
    read_consistent(state.path, lambda snapshot: _own(snapshot, state, named))


def _own(snapshot: IndexSnapshot, state: IndexState, named: Path) -> IndexSnapshot:
    """``snapshot``, refused when it is not the version of ``state``."""
    if snapshot.manifest[SELF_CHECKSUM] != state.manifest[SELF_CHECKSUM]:
        raise BadInputError(changed_message(named))
    return snapshot


# --- merging ---------------------------------------------------------------------------------------------------
def merge_plan(state: IndexState, *, full: bool = False) -> list[Segment]:
    """The segments a write should merge now (none: leave them): all of them when ``full`` or when more than
    :data:`COMPACT_DELETED_SHARE` of the rows are deleted; every one but the largest past :data:`MAX_SEGMENTS`."""
    rows = sum(s.rows for s in state.segments)
    if full or (rows and state.deleted.size > COMPACT_DELETED_SHARE * rows):
        return list(state.segments) if (len(state.segments) > 1 or state.deleted.size) else []
    if len(state.segments) <= MAX_SEGMENTS:
        return []
    largest = max(state.segments, key=lambda s: s.rows)
    return [s for s in state.segments if s is not largest]


def merged(state: IndexState, merging: list[Segment]) -> IndexState:
    """The version with ``merging`` replaced by one segment of their live rows (written and swapped in)."""
    keep = [s for s in state.segments if all(s is not m for m in merging)]
    made = merged_segment(state, merging)
    if not made.docs and not keep:  # every document deleted: the segments stay, their rows all deleted
        return state
    return commit(state, keep, [made] if made.docs else [], state.deleted)


def with_merges(state: IndexState) -> IndexState:
    """``state`` after the merge its segments and deletes call for, if any."""
    merging = merge_plan(state)
    return merged(state, merging) if merging else state


# --- refitting the transform -------------------------------------------------------------------------------------
def live_rows(state: IndexState) -> np.ndarray:
    """A bool per row of the index: False for the deleted ones."""
    live = np.ones(sum(s.rows for s in state.segments), dtype=bool)
    live[state.deleted] = False
    return live


def live_documents(state: IndexState) -> list[Document]:
    """Every live document of the index, in row order."""
    live = live_rows(state)
    out: list[Document] = []
    for segment in state.segments:
        kept = np.flatnonzero(live[segment.base : segment.base + segment.rows]).tolist()
        found = segment.docs.get(kept)
        out += [found[row] for row in kept]
    return out


def rebuild_options(manifest: dict[str, Any], transform: str | None) -> dict[str, Any]:
    """The arguments of :func:`whitevec.index.build_index` that build this index again as it was built (kind,
    metric, encoding and index parameters, lexical part, search defaults), its transform fitted anew: the
    manifest's spec, or ``transform``."""
    record = manifest["transform"]
    spec = transform or ("none" if record is None else record["spec"])
    if transform is None and record is not None and record["fit_on"] == "given":
        raise BadInputError(
            f"the transform of this index was given already fitted ({record['spec']}); name the one to fit with "
            "--transform (e.g. whitening-128)"
        )
    lexical = manifest.get("lexical")
    return {
        "transform": spec,
        "kind": manifest["index_kind"],
        "metric": manifest["metric"],
        "index_params": dict(manifest["index_params"]),
        "lexical": None if lexical is None else "bm25",
        **({} if lexical is None else {"analyzer": lexical["analyzer"]["name"]}),
        # A fusion the build chose on pseudo-queries is chosen again on the refitted vectors (issue 53).
        **({"search": manifest["search"]} if "search" in manifest and CHOICE_FIELD not in manifest else {}),
    }


# --- following another writer ------------------------------------------------------------------------------------
def refreshed(snapshot: IndexSnapshot, state: IndexState) -> IndexState | None:
    """``state`` moved on to the version ``snapshot`` pins, reusing the segments both versions hold (the same
    prefix and files: segments are never changed) and opening the others; None when the version is the same.
    ReloadNeededError when more than segments changed (another transform, a rebuild: load the index again)."""
    old, new = state.manifest, snapshot.manifest
    if new[SELF_CHECKSUM] == old[SELF_CHECKSUM]:
        return None
    if "segments" not in new or _whole_index_fields(new) != _whole_index_fields(old):
        raise ReloadNeededError
    held = {segment.prefix: segment for segment in state.segments if _same_files(segment.prefix, old, new)}
    segments = []
    try:
        for entry in segment_entries(new):
            kept = held.get(entry["prefix"])
            # A segment read before it had term counts (the build's, read before the first write) is read again.
            counted = kept is not None and (kept.lexical is None or kept.counts is not None)
            if kept is not None and counted and kept.rows == entry["rows"]:
                segments.append(dataclasses.replace(kept, base=int(entry["base"])))
            else:
                segments.append(open_segment(snapshot, new, entry))
        deleted = read_deleted(snapshot)
    except BaseException:
        for segment in segments:
            if all(segment.store is not s.store for s in state.segments):
                segment.close()
        raise
    kept_stores = {id(s.store) for s in segments}
    for segment in state.segments:
        if id(segment.store) not in kept_stores:
            segment.close()
    return IndexState(state.path, new, segments, deleted)


class ReloadNeededError(Exception):
    """More than segments changed: load the index again (internal signal)."""


def _whole_index_fields(manifest: dict[str, Any]) -> tuple[Any, ...]:
    """What every segment of a version depends on: a version differing in these is another index."""
    transform = manifest["files"].get(TRANSFORM_FILE, {}).get("sha256")
    return (transform, manifest["dim"], manifest["metric"], manifest["index_kind"], manifest["model"])


def _same_files(prefix: str, old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether the segment ``prefix`` holds the same files in both versions (a merge can reuse the build's empty
    prefix for new files)."""
    names = [name for name in old["files"] if file_segment(name, old) == prefix]
    return bool(names) and all(new["files"].get(name) == old["files"][name] for name in names)
