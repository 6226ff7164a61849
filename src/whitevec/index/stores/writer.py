"""The writer protocol: what a Retriever asks of the writes of its index's backend (:class:`IndexWriter`), and what
a writer reads and swaps of the Retriever it writes for (:class:`WritableIndex`).

A store whose indexes are written as segments in their folder (FAISS) has them written by
:class:`whitevec.index.writes.SegmentWriter`, through the store's segment hooks
(:class:`~whitevec.index.stores.vector.VectorStore`); a store that writes them itself (Milvus's insert, delete and
compaction) registers its writer under its backend's name (:func:`register_writer`, :func:`own_writer`; the
built-in ones imported when an index first asks), which the Retriever makes with what a writer in a backend may
not import: how to open the folder's current version, and how to build an index (:class:`MakesWriter`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from whitevec.index.stores.registry import Registry

if TYPE_CHECKING:
    from whitevec.datasets.retrieval import Document
    from whitevec.encoders.protocol import EncoderLike
    from whitevec.index.stores.documents import DocumentStore
    from whitevec.index.stores.lexical import LexicalRanker
    from whitevec.index.stores.vector import VectorStore
    from whitevec.transforms.frozen import AppliesVectors


class IndexWriter(Protocol):
    """One backend's writes to a loaded index; each is one new version of its folder (or, on a collection outside
    it, Milvus's calls). The Retriever checks the request first and holds its writes' lock around each call."""

    def add(
        self, items: list[Document], vectors: np.ndarray, raw: np.ndarray, replaced: np.ndarray, empty: int
    ) -> None:
        """Write ``items`` (``vectors`` in stored form, ``raw`` the encoder's, in their order); the rows
        ``replaced`` are those of held documents they replace (``on_existing="replace"``); ``empty`` documents
        were left out for having no token the model knows."""
        ...

    def delete(self, wanted: list[str]) -> dict[str, int]:
        """Delete the documents with the ids ``wanted``; the rows of those it held (id -> row)."""
        ...

    def compact(self) -> int:
        """Drop the deleted rows from the stored data; the segments merged (0: nothing written)."""
        ...

    def refit(self, transform: str | None, show_progress: bool | None) -> None:
        """Fit the transform again on every live document and write the index with it."""
        ...

    def refresh(self) -> bool:
        """Search the folder's newest version from now on; whether it moved on."""
        ...


class OpenedVersion(Protocol):
    """One version of the folder, opened (:class:`whitevec.index.versions.Version`)."""

    manifest: dict[str, Any]
    transform: AppliesVectors | None
    store: VectorStore
    docs: DocumentStore
    lexical: LexicalRanker | None


class WritableIndex(Protocol):
    """What a writer reads and swaps of the Retriever it writes for (the Retriever's own attributes)."""

    path: Path
    manifest: dict[str, Any]
    encoder: EncoderLike
    transform: AppliesVectors | None  # set: what searches apply (read: the Retriever's class, loaded lazily)
    _transform: AppliesVectors | None
    store: VectorStore
    lexical: LexicalRanker | None
    _docs: DocumentStore
    _lock: threading.RLock  # the searches' lock
    _columns: Any  # the metadata columns of the loaded version (None: read on the next filtered search)

    def _check_open(self) -> None:
        """A one-line refusal of any use of a closed Retriever."""
        ...


Reopen = Callable[[Path], OpenedVersion]  # the current version of the index folder at a path, opened
Rebuild = Callable[..., Path]  # whitevec.index.build.build_index: documents, the folder, the build's options


class MakesWriter(Protocol):
    """A store's own writer, made for one Retriever (see the module docstring)."""

    def __call__(self, index: WritableIndex, reopen: Reopen, rebuild: Rebuild) -> IndexWriter: ...


W = TypeVar("W", bound=MakesWriter)
# The writers of the stores that write their indexes themselves; built-in ones imported when an index first asks.
WRITERS: Registry[MakesWriter] = Registry({"milvus": "whitevec.index.milvus.writes"})


def register_writer(backend: str) -> Callable[[W], W]:
    """Class decorator: the writer of the indexes of the store registered as ``backend``."""

    def register(writer: W) -> W:
        WRITERS.register(backend, writer)
        return writer

    return register


def own_writer(backend: str) -> MakesWriter | None:
    """The writer the store ``backend`` writes its indexes with; None: they are written as segments in the
    folder."""
    return WRITERS.get(backend)


def held_rows(held: dict[str, int]) -> np.ndarray:
    """The rows of the held documents ``held`` (id -> row), ascending int64."""
    return np.sort(np.fromiter(held.values(), dtype=np.int64, count=len(held)))
