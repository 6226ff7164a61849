"""The documents of an index built with ``--engine ray``, kept in the scalar fields of its Milvus collection
beside the vectors (``milvus`` in the registry of :mod:`whitevec.index.stores.documents`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError
from whitevec.index.encodings.spec import parse_encoding
from whitevec.index.milvus.store import DOCS_IN_COLLECTION, MilvusStore
from whitevec.index.stores.documents import register_document_store
from whitevec.index.stores.vector import ENCODING

_QUERY_IDS = 500  # document ids per Milvus query

if TYPE_CHECKING:
    from whitevec.index.folder.snapshot import IndexSnapshot


def check_documents_encoding(params: dict[str, Any] | None) -> None:
    """Refuse sign codes in a collection that keeps the documents (``--engine ray``): its shards are written by
    a resumable pipeline, and the codes' mean and rotation would have to be fitted before the first shard."""
    encoding = parse_encoding((params or {}).get(ENCODING))
    if encoding.sign:
        raise BadInputError(
            f"encoding {encoding.spec!r}: --engine ray does not write 1-bit sign codes to Milvus; build with "
            "--engine local, or use float32, sq8 or rabitq"
        )


@register_document_store
class MilvusDocs:
    """The documents of an index built with ``--engine ray``, read from the scalar fields of its Milvus
    collection (``milvus`` in the registry of :mod:`whitevec.index.stores.documents`). It opens its own handle on
    the collection (an in-process Milvus Lite server is shared between handles). Its documents are written with the
    collection's rows, by Milvus's insert, upsert and delete (:mod:`whitevec.index.milvus.writes`), so it stages
    nothing into a version folder."""

    name: ClassVar[str] = DOCS_IN_COLLECTION
    files: ClassVar[tuple[str, ...]] = ()  # in the collection (and, for in-folder Lite data, in milvus.db/)

    def __init__(self, store: MilvusStore, where: str) -> None:
        self.store = store
        self.where = where

    # --- life cycle -----------------------------------------------------------------------------------------
    @classmethod
    def check_manifest(cls, manifest: dict[str, Any]) -> str | None:
        if manifest["backend"] != MilvusStore.name:
            return "documents kept in Milvus need the milvus backend"
        return None

    @classmethod
    def open(cls, snapshot: IndexSnapshot) -> MilvusDocs:
        return cls(MilvusStore.open(snapshot), str(snapshot.folder))

    def stage_add(self, folder: Path, docs: Sequence[Document], start_row: int) -> list[str]:
        raise self._refuse()

    def reopen(self, folder: Path) -> MilvusDocs:
        raise self._refuse()

    def close(self) -> None:
        self.store.close()

    def _refuse(self) -> BadInputError:
        return BadInputError(
            f"the index at {self.where} keeps its documents in Milvus (built with --engine ray): they are written "
            "with the collection's rows (Retriever.add), not staged in a folder"
        )

    # --- data -----------------------------------------------------------------------------------------------
    @property
    def count(self) -> int:
        """The live documents of this version (rows below its ``next_row``)."""
        where = self.store.visible_filter
        rows = self.store.client.query(self.store.collection, filter=where, output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def get(self, rows: Sequence[int]) -> dict[int, Document]:
        limit = self.store.visible_rows
        wanted = [int(r) for r in rows if limit is None or int(r) < limit]
        return {
            row: Document(doc_id, text, None if meta is None else json.loads(meta))
            for row, (doc_id, text, meta) in self.store.documents(wanted).items()
        }

    def metadata(self) -> dict[int, dict[str, Any] | None]:
        """``{row: metadata}`` of every row this version holds (read from the collection, in chunks)."""
        rows = range(self.next_row())
        return {row: doc.metadata for row, doc in self.get(rows).items()}

    def existing_ids(self, ids: Sequence[str]) -> list[str]:
        return list(self.rows_of(ids))

    def rows_of(self, ids: Sequence[str]) -> dict[str, int]:
        """``{id: row}`` of those of ``ids`` this version holds (a query on the ``doc_id`` field)."""
        found: dict[str, int] = {}
        visible = self.store.visible_filter
        for start in range(0, len(ids), _QUERY_IDS):
            chunk = ",".join(json.dumps(i, ensure_ascii=False) for i in ids[start : start + _QUERY_IDS])
            where = f"doc_id in [{chunk}]" + (f" and {visible}" if visible else "")
            # Strong: a write plans on every write acknowledged before it (no id held twice)
            hits = self.store.client.query(
                self.store.collection, filter=where, output_fields=["id", "doc_id"], consistency_level="Strong"
            )
            found.update((hit["doc_id"], int(hit["id"])) for hit in hits)
        return found

    def next_row(self) -> int:
        """The next row id (the manifest's ``next_row``, which the store holds its searches below)."""
        if self.store.visible_rows is None:
            raise BadInputError(f"the index at {self.where} was opened without a version; load it again")
        return int(self.store.visible_rows)
