"""The write routes of the HTTP service (``whitevec serve --writable``): POST /documents (add or upsert, batched),
POST /documents/delete and POST /compact.

Writes take turns on the worker's writer thread (:meth:`RetrieverWorker.submit_write`): an add's model work
(its documents' tokens and vectors) goes to the thread that owns the model in jobs that take turns with the
searches (:class:`~whitevec.service.worker.InTurnEncoder`), and its files are written, flushed and merged on the
writer thread while searches go on; the retriever holds its searches' lock only to swap the new version in, so a
search sees the version before a write or the one after, and a search sent after a write's answer sees the
write. The answer is sent once the library call has returned, and the library returns after the
new version's files and folder are flushed to disk (:func:`whitevec.utils.io.atomic_dir`): an acknowledged write
survives a crash. Without ``--writable`` these routes answer 405 before their body is read
(:class:`~whitevec.service.middleware.ReadOnlyMiddleware`); with an API key they need it, as /search does.

Deletes go by ``POST /documents/delete`` rather than ``DELETE /documents`` with a body: a DELETE's body has no
meaning HTTP defines (RFC 9110, 9.3.5), so proxies and clients may drop it, and OpenAPI 3.0 tools ignore it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import FastAPI

from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError
from whitevec.service.error_answers import WriteConflictError, public_text, responses
from whitevec.service.manifest import index_info
from whitevec.service.routes import KeyGuard
from whitevec.service.schemas import CompactResponse, DeleteResponse, DocumentsResponse, write_models
from whitevec.service.settings import API_KEY_ENV, ServeSettings
from whitevec.service.worker import InTurnEncoder, RetrieverLike, RetrieverWorker, write_in_turn

if TYPE_CHECKING:
    from whitevec.encoders.protocol import EncoderLike
    from whitevec.index.segments.requests import AddResult, DeleteResult

logger = logging.getLogger(__name__)

WRITE_PATHS = ("/documents", "/documents/delete", "/compact")
MISSING_SHOWN = 10  # the ids a delete reports as missing, at most


class WritableRetriever(RetrieverLike, Protocol):
    """What the write routes ask of a :class:`whitevec.index.Retriever`."""

    def write(
        self,
        docs: Sequence[Document],
        show_progress: bool | None = None,
        *,
        vectors: Any = None,
        empty_documents: str = "skip",
        on_existing: str = "error",
        encoder: EncoderLike | None = None,
    ) -> AddResult: ...

    @property
    def encoder(self) -> EncoderLike: ...

    def existing_ids(self, ids: Sequence[str]) -> list[str]: ...

    def delete(self, ids: Sequence[str]) -> DeleteResult: ...

    def compact(self) -> int: ...


# ---- the writes, run on the worker thread ---------------------------------------------------------------
def _version(retriever: RetrieverLike) -> dict[str, int]:
    """The version a write just swapped in (read on the worker thread, which alone swaps versions)."""
    return index_info(retriever.manifest, retriever.count).model_dump(exclude={"deleted"})


@contextlib.contextmanager
def _public_refusals(retriever: WritableRetriever) -> Iterator[None]:
    """The library's refusals without the index's path (a client learns nothing of the server's files); another
    writer's version as a conflict."""
    from whitevec.index.folder.snapshot import changed_message

    try:
        yield
    except BadInputError as exc:
        path = getattr(retriever, "path", None)
        message = str(exc)
        if path is None:
            raise
        if message == changed_message(Path(path)):
            raise WriteConflictError(
                "the index was rebuilt or written to by another process during this write; nothing was written: "
                "send it again (a server follows other writes, but not a rebuild with another model: restart it)"
            ) from None
        raise BadInputError(public_text(message, Path(path))) from None


def write_documents(
    retriever: WritableRetriever,
    docs: list[Document],
    on_existing: str,
    encoder: EncoderLike,
    vectors: list[list[float]] | None = None,
) -> DocumentsResponse:
    """Add ``docs``: an id the index holds refused (``error``: nothing written), replaced or skipped. A document
    with no token the model knows is refused (422) before anything is written. ``encoder``: the retriever's, as
    the writer thread may use it (:class:`~whitevec.service.worker.InTurnEncoder`); ``vectors``: the documents'
    own, a row each (none encoded)."""
    held = retriever.existing_ids([d.id for d in docs]) if on_existing == "error" else []
    if held:
        raise WriteConflictError(
            f"document id {held[0]!r} is already in the index ({len(held)} of the {len(docs)} ids are); nothing "
            "was written: send on_existing 'replace' to put these documents in place of those (their old text is "
            "dropped) or 'skip' to add only the ids the index lacks"
        )
    with _public_refusals(retriever):
        done = write_in_turn(retriever, docs, on_existing, encoder, vectors)
    return DocumentsResponse(added=done.added, replaced=done.replaced, skipped=done.skipped, **_version(retriever))


def delete_documents(retriever: WritableRetriever, ids: list[str]) -> DeleteResponse:
    """Delete the documents with ``ids``; those the index does not hold are counted and the first few named."""
    with _public_refusals(retriever):
        result = retriever.delete(ids)
    return DeleteResponse(
        deleted=result.deleted,
        missing_count=len(result.missing),
        missing=list(result.missing[:MISSING_SHOWN]),
        **_version(retriever),
    )


def compact_index(retriever: WritableRetriever) -> CompactResponse:
    with _public_refusals(retriever):
        merged = retriever.compact()
    return CompactResponse(merged=merged, **_version(retriever))


def _first_repeated(ids: list[str]) -> str | None:
    seen: set[str] = set()
    for doc_id in ids:
        if doc_id in seen:
            return doc_id
        seen.add(doc_id)
    return None


# ---- the routes -----------------------------------------------------------------------------------------
def add_write_routes(
    app: FastAPI,
    retriever: RetrieverLike,
    worker: RetrieverWorker,
    settings: ServeSettings,
    guard: KeyGuard,
) -> None:
    """The write routes, in every server's OpenAPI document; a server without ``writable`` refuses them (405)."""
    DocumentsRequest, DeleteRequest = write_models(settings, retriever.manifest.get("encoder_dim"))
    secured, key_refusal = guard
    writer: WritableRetriever = retriever  # type: ignore[assignment]
    if settings.writable and settings.api_key is None:
        logger.warning(
            "serving with --writable and no API key: anyone who can reach this server can add and delete "
            "documents; set %s",
            API_KEY_ENV,
        )

    async def documents(body: Any) -> DocumentsResponse:
        """Add documents, or put them in place of those with the same ids (``on_existing``: error, replace,
        skip); one new version of the index, durable before the answer. The answer counts what happened and
        names the version now served."""
        docs = [Document(d.id, d.text, d.metadata) for d in body.documents]
        twice = _first_repeated([d.id for d in docs])
        if twice is not None:
            raise BadInputError(f"document id {twice!r} is given twice; send each id once")
        encoder = InTurnEncoder(worker, writer.encoder)
        vectors = getattr(body, "vectors", None)
        return await worker.submit_write(
            functools.partial(write_documents, writer, docs, body.on_existing, encoder, vectors)
        )

    async def delete(body: Any) -> DeleteResponse:
        """Delete the documents with these ids (one new version, durable before the answer); ids the index does
        not hold are counted and the first 10 named, the rest deleted."""
        return await worker.submit_write(
            functools.partial(delete_documents, writer, list(dict.fromkeys(body.ids)))
        )

    async def compact() -> CompactResponse:
        """Merge the index's segments into one and drop the deleted documents' rows (what writes also do past a
        number of segments or a share of deleted rows)."""
        return await worker.submit_write(functools.partial(compact_index, writer))

    documents.__annotations__["body"] = DocumentsRequest
    delete.__annotations__["body"] = DeleteRequest
    refusals = responses(400, *key_refusal, 405, 408, 409, 413, 422, 500, 503, 507)
    for path, endpoint, answer in (
        ("/documents", documents, DocumentsResponse),
        ("/documents/delete", delete, DeleteResponse),
        ("/compact", compact, CompactResponse),
    ):
        app.post(path, response_model=answer, dependencies=secured, responses=refusals, tags=["write"])(endpoint)
