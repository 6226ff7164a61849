"""The document-store protocol every place that keeps an index's documents implements, and the registry of those
places by name (the manifest's ``docs`` field).

A vector store answers a search with int64 rows; the document store maps them back to the user's documents (id,
text, metadata). ``docs.sqlite`` in the index folder (:class:`whitevec.index.stores.sqlite_docs.DocStore`, the
default, written by every local build) and the scalar fields of a Milvus collection
(:class:`whitevec.index.milvus.documents.MilvusDocs`, written by ``--engine ray`` beside the vectors) are the two
today. ``Retriever`` calls only these methods, so a new one is a class decorated with
:func:`register_document_store` (one whitevec ships named in :data:`DOCUMENT_STORES`' built-in table) and a
writer that records its ``name`` in the manifest.

Like a vector store, a document store takes part in the life of an index folder (see
:mod:`whitevec.index.folder.snapshot`): it is opened from a pinned version, writes the next version's documents
into that version's folder for an add (``stage_add``), and is reopened once that version is in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from whitevec.errors import BadInputError
from whitevec.index.stores.registry import Registry, registered_name

if TYPE_CHECKING:
    from whitevec.datasets.retrieval import Document
    from whitevec.index.folder.snapshot import IndexSnapshot

# A manifest without a ``docs`` field keeps its documents in docs.sqlite (indexes from before the field).
DEFAULT_DOCUMENT_STORE = "sqlite"


class DocumentStore(Protocol):
    """What an index needs from a place that keeps its documents by row."""

    name: ClassVar[str]  # the manifest's "docs" value
    files: ClassVar[tuple[str, ...]]  # the files it keeps in a version folder (checksummed in the manifest)

    # --- life cycle -----------------------------------------------------------------------------------------
    @classmethod
    def check_manifest(cls, manifest: dict[str, Any]) -> str | None:
        """Why ``manifest`` cannot describe documents kept here (a vector backend this store cannot sit
        beside), or None."""
        ...

    @classmethod
    def open(cls, snapshot: IndexSnapshot) -> DocumentStore:
        """The documents of one pinned index version; rows the version does not hold stay invisible."""
        ...

    def stage_add(self, folder: Path, docs: Sequence[Document], start_row: int) -> list[str]:
        """Write this version's documents and ``docs`` (rows ``start_row, start_row + 1, ...``) into the next
        version's folder ``folder``, leaving this store as its readers see it; the names of the files written
        (checksummed in the manifest). BadInputError when this store takes no additions."""
        ...

    def reopen(self, folder: Path) -> DocumentStore:
        """The documents of the version now in place at ``folder`` (after a ``stage_add`` there)."""
        ...

    def close(self) -> None:
        """Release connections and handles."""
        ...

    # --- data -----------------------------------------------------------------------------------------------
    @property
    def count(self) -> int:
        """Number of documents."""
        ...

    def get(self, rows: Sequence[int]) -> dict[int, Document]:
        """``{row: Document}`` for the given rows (negative or unknown rows are left out)."""
        ...

    def metadata(self) -> dict[int, dict[str, Any] | None]:
        """``{row: metadata}`` of every document (what metadata filters are evaluated over)."""
        ...

    def existing_ids(self, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` already stored (checked before an add); BadInputError when this store takes no
        additions."""
        ...

    def rows_of(self, ids: Sequence[str]) -> dict[str, int]:
        """``{id: row}`` of those of ``ids`` held by a live document (what a delete or an upsert removes);
        BadInputError when this store takes no writes."""
        ...

    def next_row(self) -> int:
        """The row the next added document gets; BadInputError when this store takes no additions."""
        ...


D = TypeVar("D")
# The document stores by name; those whitevec ships are imported when an index first asks.
DOCUMENT_STORES: Registry[type[Any]] = Registry(
    {"sqlite": "whitevec.index.stores.sqlite_docs", "milvus": "whitevec.index.milvus.documents"}
)


def register_document_store(cls: type[D]) -> type[D]:
    """Class decorator: make a DocumentStore available under its ``name``."""
    DOCUMENT_STORES.register(registered_name(cls, "a document store"), cls)
    return cls


def document_store_names() -> tuple[str, ...]:
    """The registered document stores and the built-in ones not yet imported, for messages."""
    return DOCUMENT_STORES.names()


def document_store_class(name: str) -> type[DocumentStore]:
    """The DocumentStore registered as ``name``; BadInputError listing the others."""
    if name not in document_store_names():
        raise BadInputError(f"unknown document store {name!r}; valid: {', '.join(document_store_names())}")
    store: type[DocumentStore] = DOCUMENT_STORES.load(name)
    return store


def documents_name(manifest: dict[str, Any]) -> str:
    """The document store an index's manifest names (``docs``; absent: docs.sqlite)."""
    return str(manifest.get("docs") or DEFAULT_DOCUMENT_STORE)


def documents_of(manifest: dict[str, Any]) -> type[DocumentStore]:
    """The DocumentStore class of an index's manifest (see :func:`documents_name`)."""
    return document_store_class(documents_name(manifest))
