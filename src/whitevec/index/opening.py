"""Opening one pinned version of an index folder (:mod:`whitevec.index.snapshot`): its manifest, transform,
vector store, documents and lexical ranker, checked against one another (what ``Retriever.load`` reads)."""

from __future__ import annotations

from typing import Any, cast

from whitevec.errors import CorruptFileError
from whitevec.index.documents import DocumentStore, documents_of
from whitevec.index.fusion import LexicalRanker
from whitevec.index.layout import TRANSFORM_FILE, check_index_manifest
from whitevec.index.lexical import LexicalIndex
from whitevec.index.snapshot import IndexSnapshot
from whitevec.index.store import KeepsLexical, VectorStore, keeps_lexical, store_class
from whitevec.transforms import Transform


def lexical_of(snapshot: IndexSnapshot, store: VectorStore) -> LexicalRanker | None:
    """The lexical ranker of a pinned version: None without a lexical part, the store's own where it keeps it
    (:class:`~whitevec.index.store.KeepsLexical`: Milvus's BM25), else the bm25s index in the folder."""
    record = snapshot.manifest.get("lexical")
    if record is None:
        return None
    if keeps_lexical(store) and record["library"] == store.name:
        return cast(LexicalRanker, cast(KeepsLexical, store).lexical_ranker())
    return LexicalIndex.from_snapshot(snapshot)


def open_version(
    snapshot: IndexSnapshot, device: str
) -> tuple[dict[str, Any], Transform | None, VectorStore, DocumentStore, LexicalRanker | None]:
    """Manifest, transform (on ``device``, for one that runs on torch), vectors, documents and lexical index (None
    for an index without one, as every index built before it) of one pinned version (see
    :mod:`whitevec.index.snapshot`)."""
    manifest, folder = snapshot.manifest, snapshot.folder
    check_index_manifest(manifest, folder)
    # The documents first: a store that opens them by path (SQLite) does so while the pinned version is most
    # likely still the current one.
    docs = documents_of(manifest).open(snapshot)
    store: VectorStore | None = None
    try:
        transform = (
            Transform.from_bytes(snapshot.read_bytes(TRANSFORM_FILE), str(folder / TRANSFORM_FILE), device=device)
            if manifest["transform"] is not None
            else None
        )
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
    return manifest, transform, store, docs, lexical
