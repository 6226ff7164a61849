"""``whitevec mcp INDEX``: an index as a Model Context Protocol server over stdio (the ``mcp`` extra).

Tools: ``search`` (one query, a vector or both, k, mode, filter) and ``info`` (what the index holds and can do);
with ``writable``, ``add`` and ``delete``. Each answers structured content (``structuredContent``, with its output
schema, and the same JSON as text). A bad argument or a refusal of the library is a tool error (``isError``) of
one line.

The index and its model load once, before the server answers (:func:`serve_stdio`): a missing or damaged index,
or a model that is gone, then stops the command with one line and exit 2 when the client launches it, rather than
failing the first search an agent makes, and no search waits for a model to load.

The retriever is shared as ``whitevec serve`` shares it (:class:`~whitevec.service.worker.RetrieverWorker`): one
thread owns the model, searches queue for it, and writes run one at a time on the writer thread, their model work
sent back in turn with the searches. The checks of a write are the library's
(:meth:`whitevec.index.Retriever.write` and ``delete``, which the HTTP routes call too); the limits are
``serve``'s (:class:`ServeSettings`, the same ``WHITEVEC_SERVE_*`` variables). Of the service only ``worker``
and ``settings`` are imported: neither needs fastapi, which the ``mcp`` extra does not install (hence the answer
models here rather than the HTTP service's).
"""

# No `from __future__ import annotations`: the tools' annotations name this server's limits (closures), and
# MCPServer reads them with inspect.signature(eval_str=True), which sees module globals only.
import contextlib
import functools
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from whitevec._version import __version__
from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError, WhitevecError
from whitevec.index.filters.language import parse_filter
from whitevec.index.search.modes import MODES, plan_search, search_defaults
from whitevec.index.segments.requests import HeldIdsError
from whitevec.preflight import describe_fault, existing_folder
from whitevec.service.settings import MAX_ID_CHARS, ServeSettings
from whitevec.service.worker import (
    InTurnEncoder,
    QueryVectors,
    RetrieverWorker,
    WorkerStoppedError,
    write_in_turn,
)

if TYPE_CHECKING:
    from whitevec.index import Retriever

SERVER_NAME = "whitevec"
MISSING_SHOWN = 10  # the ids a delete names as missing, at most (the rest counted), as the HTTP route does


# ---- what the tools answer -------------------------------------------------------------------------------
class Hit(BaseModel):
    id: str = Field(description="The document's id.")
    score: float = Field(
        description="Dense: cosine similarity (or inner product; for metric l2 a distance, lower is closer); "
        "lexical: BM25; hybrid: the fused score. Hits come best first."
    )
    text: str = Field(description="The document's text.")
    metadata: dict[str, Any] | None = Field(description="The document's metadata, as added.")
    rankers: dict[str, dict[str, float | int]] | None = Field(
        None,
        description="Lexical and hybrid searches: each ranker that found it, its rank (from 1) and own score.",
    )


class SearchAnswer(BaseModel):
    query: str | None
    mode: str = Field(description="The mode the search ran in: dense, lexical or hybrid.")
    k: int = Field(description="The hits asked for (at most the documents in the index).")
    hits: list[Hit] = Field(description="Best first.")
    note: str | None = Field(
        None, description="Why hits are fewer or one ranker was left out (a query with no known token, ...)."
    )


class LexicalPart(BaseModel):
    ranker: str
    analyzer: str
    k1: float
    b: float


class InfoAnswer(BaseModel):
    count: int = Field(description="Live documents.")
    deleted: int = Field(description="Deleted documents whose rows a compaction has not yet dropped.")
    model: str | None = Field(description="The encoder's model (its folder's name, alias or hub id).")
    transform: str | None = Field(description="The transform applied to vectors (none, whitening-K, ...).")
    encoder_dim: int | None = Field(description="The dimension of the encoder's vectors.")
    dim: int = Field(description="The dimension of the indexed vectors (after the transform).")
    metric: str
    kind: str | None = Field(description="The vector index's kind (flat, hnsw, ivf).")
    modes: list[str] = Field(description="The search modes this index offers.")
    default_mode: str = Field(description="The mode a search without one runs in.")
    lexical: LexicalPart | None = Field(description="The BM25 part beside the vectors, if any.")
    external: bool = Field(
        description="Whether the index holds vectors given by its writers (no model: searches and adds then "
        "take vectors of encoder_dim numbers)."
    )
    writable: bool = Field(description="Whether this server offers the add and delete tools.")


class AddAnswer(BaseModel):
    added: int
    replaced: int
    skipped: int
    count: int = Field(description="Live documents after the write.")


class DeleteAnswer(BaseModel):
    deleted: int
    missing_count: int = Field(description="Ids given that the index did not hold.")
    missing: list[str] = Field(description=f"The first {MISSING_SHOWN} of those.")
    count: int = Field(description="Live documents after the write.")


class DocumentIn(BaseModel):
    """One document to add."""

    model_config = ConfigDict(extra="forbid")
    id: Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)] = Field(
        description=f"1 to {MAX_ID_CHARS} characters, unique in the index (see on_existing)."
    )
    text: str = Field(description="The text searched and returned.")
    metadata: dict[str, Any] | None = Field(
        None, description='JSON values by field name: returned with hits, read by the filter ("year >= 2000").'
    )
    vector: list[float] | None = Field(
        None,
        min_length=1,
        description="The document's vector in the encoder's space (info's encoder_dim numbers), in place of "
        "encoding its text: needed by an index of given vectors (info's external). Every document or none.",
    )


# ---- one-line tool errors --------------------------------------------------------------------------------
class IndexServer(MCPServer[RetrieverWorker]):
    """MCPServer whose tool errors are one line: a call whose arguments break the input schema is answered with
    the first problem (``k: Input should be less than or equal to 1000``), not pydantic's multi-line report."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[RetrieverWorker, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # The arguments' validation only: a tool's own crash (UnexpectedToolError) keeps its text unsent.
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            first = exc.__cause__.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "arguments"
            raise ToolError(f"Error executing tool {name}: {where}: {first['msg']}") from None


@contextlib.contextmanager
def tool_errors() -> Iterator[None]:
    """The library's refusals and the environment's faults (a full disk on a write) as a tool error of one line;
    anything else is a bug, which the server logs and answers without its text."""
    try:
        yield
    except (WhitevecError, WorkerStoppedError) as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        line = describe_fault(exc)
        if line is None:
            raise
        raise ToolError(line) from None


def worker_of(ctx: Context[RetrieverWorker, Any]) -> RetrieverWorker:
    return ctx.request_context.lifespan_context


# ---- the tools -------------------------------------------------------------------------------------------
def info_answer(retriever: "Retriever", writable: bool) -> InfoAnswer:
    """What ``info`` shows of the version served now: read once, so one version throughout."""
    manifest = dict(retriever.manifest)
    mode, _ = search_defaults(manifest)
    record = manifest.get("lexical")
    lexical = None
    if record is not None:
        analyzer = record["analyzer"]
        name = analyzer["name"] if isinstance(analyzer, dict) else str(analyzer)
        lexical = LexicalPart(ranker=record["ranker"], analyzer=name, k1=record["k1"], b=record["b"])
    transform = manifest.get("transform")
    model = manifest.get("model_id") or manifest.get("model")  # an alias or hub id as given, else the folder
    if model is not None and Path(str(model)).is_absolute():
        model = Path(str(model)).name  # the folder's name, not where it lives on this machine
    return InfoAnswer(
        count=int(manifest.get("count", retriever.count)),
        deleted=int(manifest.get("deleted", 0)),
        model=model,
        transform=transform.get("spec") if isinstance(transform, dict) else (transform or "none"),
        encoder_dim=manifest.get("encoder_dim"),
        dim=int(manifest["dim"]),
        metric=str(manifest["metric"]),
        kind=manifest.get("index_kind"),
        modes=list(MODES if lexical is not None else ("dense",)),
        default_mode=mode,
        lexical=lexical,
        external=retriever.is_external,
        writable=writable,
    )


def add_read_tools(server: IndexServer, retriever: "Retriever", settings: ServeSettings, writable: bool) -> None:
    """``search`` and ``info``."""
    manifest = dict(retriever.manifest)
    defaults = search_defaults(manifest)
    has_lexical = manifest.get("lexical") is not None
    modes = list(MODES if has_lexical else ("dense",))
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only, structured_output=True)
    async def search(
        ctx: Context[RetrieverWorker, Any],
        query: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=settings.max_text_chars,
                description="What to look for, in words: one query, not blank. Needed by lexical and hybrid "
                "searches, and by dense ones unless vector is given.",
            ),
        ] = None,
        k: Annotated[int, Field(ge=1, le=settings.max_k, description="How many hits, best first.")] = 10,
        mode: Annotated[
            str | None,
            Field(
                description=f"dense (meaning), lexical (BM25 on words) or hybrid (both fused); this index offers "
                f"{', '.join(modes)}. Left out: the index's own, {defaults[0]}.",
                json_schema_extra={"enum": [*modes, None]},
            ),
        ] = None,
        filter: Annotated[
            str | None,
            Field(
                description="A metadata filter: the hits are the k best of the documents that pass. Comparisons "
                "(==, !=, <, <=, >, >=) of a field with a value, `field in [v1, v2]`, joined with and, or, not "
                'and parentheses; strings quoted. Example: year >= 2000 and lang == "en".',
            ),
        ] = None,
        vector: Annotated[
            list[float] | None,
            Field(
                min_length=1,
                description="The query as a vector in the index's encoder space (info's encoder_dim numbers), "
                "in place of encoding the query: what an index of given vectors (info's external) searches with; "
                "a hybrid search takes the query text beside it.",
            ),
        ] = None,
    ) -> SearchAnswer:
        """Search the index: the k documents that best match the query, best first, with their ids, scores,
        texts and metadata. info tells the modes this index offers and whether it takes a vector."""
        with tool_errors():
            plan = plan_search(mode, None, None, defaults=defaults, has_lexical=has_lexical)
            options: tuple[tuple[str, Any], ...] = () if mode is None else (("mode", plan.mode),)
            if filter is not None:  # its syntax checked here, its fields by the search: both one line
                options += (("filter", parse_filter(filter)),)
            if vector is not None:  # the dense ranking's query; the text, if any, the lexical ranking's
                options += (("query_vectors", QueryVectors([vector])),)
            elif query is None:
                raise BadInputError("give the search a query (text) or a vector, or both")
            texts = [] if query is None else [query]
            k_searched, results = await worker_of(ctx).search(texts, k, None, options)
        row = results[0]
        hits = [
            Hit(id=str(h.id), score=float(h.score), text=str(h.text), metadata=h.metadata,
                rankers=getattr(h, "rankers", None))
            for h in row
        ]  # fmt: skip
        return SearchAnswer(query=query, mode=plan.mode, k=k_searched, hits=hits, note=getattr(row, "note", None))

    @server.tool(annotations=read_only, structured_output=True)
    async def info() -> InfoAnswer:
        """What the index holds and can do: its document count, model, transform, dimensions, metric, search
        modes (and the default), the lexical part's analyzer, and whether add and delete are offered."""
        return info_answer(retriever, writable)


def given_vectors(rows: list[list[float] | None]) -> list[list[float]] | None:
    """The documents' vectors, one row each (the library checks their lengths, dimension and values), or None
    when none is given; a vector for some documents and not others is refused."""
    missing = [i for i, row in enumerate(rows) if row is None]
    if len(missing) == len(rows):
        return None
    if missing:
        raise BadInputError(f"documents[{missing[0]}] has no vector: give a vector for every document or for none")
    return [row for row in rows if row is not None]


def write_documents(
    retriever: "Retriever",
    docs: list[Document],
    on_existing: str,
    encoder: InTurnEncoder,
    vectors: list[list[float]] | None = None,
) -> AddAnswer:
    """An add on the writer thread: the library's checks (an id given twice, one the index holds under
    ``error``, a text with no token the model knows: refused, nothing written), its model work through
    ``encoder`` (in turn with the searches)."""
    try:
        done = write_in_turn(retriever, docs, on_existing, encoder, vectors)
    except HeldIdsError as exc:
        raise BadInputError(exc.worded('on_existing "replace"', 'on_existing "skip"')) from None
    return AddAnswer(added=done.added, replaced=done.replaced, skipped=done.skipped, count=done.count)


def delete_documents(retriever: "Retriever", ids: list[str]) -> DeleteAnswer:
    result = retriever.delete(ids)
    return DeleteAnswer(
        deleted=result.deleted,
        missing_count=len(result.missing),
        missing=list(result.missing[:MISSING_SHOWN]),
        count=int(retriever.count),
    )


def add_write_tools(server: IndexServer, retriever: "Retriever", settings: ServeSettings) -> None:
    """``add`` and ``delete`` (``whitevec mcp --writable``): each one new version of the index, durable before
    the answer, run one at a time on the writer thread while searches go on."""
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)

    @server.tool(annotations=writes, structured_output=True)
    async def add(
        ctx: Context[RetrieverWorker, Any],
        documents: Annotated[
            list[DocumentIn],
            Field(
                min_length=1,
                max_length=settings.max_texts,
                description=f"1 to {settings.max_texts} documents, each id once.",
            ),
        ],
        on_existing: Annotated[
            Literal["error", "replace", "skip"],
            Field(
                description="What a document whose id the index holds does: error (the call is refused naming "
                "it, nothing written), replace (it replaces the one held) or skip (the one held stays)."
            ),
        ] = "error",
    ) -> AddAnswer:
        """Add documents to the index (found by search from the answer on), or replace those with the same ids."""
        worker = worker_of(ctx)
        docs = [Document(d.id, d.text, d.metadata) for d in documents]
        encoder = InTurnEncoder(worker, retriever.encoder)
        with tool_errors():
            vectors = given_vectors([d.vector for d in documents])
            return await worker.submit_write(
                functools.partial(write_documents, retriever, docs, on_existing, encoder, vectors)
            )

    @server.tool(annotations=writes, structured_output=True)
    async def delete(
        ctx: Context[RetrieverWorker, Any],
        ids: Annotated[
            list[Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]],
            Field(
                min_length=1,
                max_length=settings.max_ids,
                description=f"1 to {settings.max_ids} document ids; those the index lacks are reported.",
            ),
        ],
    ) -> DeleteAnswer:
        """Delete documents by id; ids the index does not hold are counted and the first few named."""
        with tool_errors():
            return await worker_of(ctx).submit_write(functools.partial(delete_documents, retriever, ids))


# ---- the server ------------------------------------------------------------------------------------------
def create_server(
    retriever: "Retriever", *, writable: bool = False, settings: ServeSettings | None = None
) -> IndexServer:
    """The MCP server of a loaded ``retriever`` (a :class:`whitevec.index.Retriever`): ``search`` and ``info``,
    and with ``writable`` ``add`` and ``delete``. Its worker threads start when a client connects (the server's
    lifespan) and stop when it leaves; the retriever stays the caller's to close."""
    settings = settings if settings is not None else ServeSettings.from_env()

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer[RetrieverWorker]) -> AsyncIterator[RetrieverWorker]:
        worker = RetrieverWorker(retriever, mode="lock")  # one client: no batches to gather
        try:
            yield worker
        finally:
            worker.close()

    server = IndexServer(
        SERVER_NAME,
        version=__version__,
        instructions="Search a whitevec index: call info first to see its size and search modes, then search."
        + (" add and delete write to it." if writable else ""),
        lifespan=lifespan,
        log_level="WARNING",  # a refused call is the client's to show; the server's stderr keeps its faults
    )
    add_read_tools(server, retriever, settings, writable)
    if writable:
        add_write_tools(server, retriever, settings)
    return server


def serve_stdio(
    index_dir: str | os.PathLike[str],
    *,
    writable: bool = False,
    model: str | os.PathLike[str] | None = None,
    device: str | None = None,
) -> None:
    """Load the index at ``index_dir`` (its model found at ``model`` when it moved; queries encoded on
    ``device``) and serve it over stdio until the client closes stdin. Every check runs before the first message:
    a missing or damaged index, a model that is gone, bad ``WHITEVEC_SERVE_*`` limits (one-line errors)."""
    from whitevec.index import Retriever

    settings = ServeSettings.from_env()
    folder = existing_folder(index_dir, "index folder")
    # stdout carries the protocol: what a library prints while the index loads goes to stderr (while serving, the
    # mcp package points file descriptor 1 there itself). No vector cache: a server would otherwise write every
    # query it is sent into a cache on disk.
    with contextlib.redirect_stdout(sys.stderr):
        retriever = Retriever.load(folder, cache=False, model=model, device=device)
    with retriever:
        create_server(retriever, writable=writable, settings=settings).run("stdio")


__all__ = ["IndexServer", "create_server", "serve_stdio"]
