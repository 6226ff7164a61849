"""Request and response bodies of the HTTP API (pydantic models; FastAPI validates and documents them).

The request models are made per server by :func:`request_models`, so that its limits (max_queries, max_texts,
max_text_chars, max_k) and its index's search modes are schema constraints in the OpenAPI document: a request the
schema accepts is never refused by a limit the schema does not state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, model_validator

from whitevec.datasets.rows import RepeatedKeyError, unique_keys
from whitevec.index.search.fusion import DEFAULT_FUSION
from whitevec.index.search.modes import ADD_LEXICAL
from whitevec.service.settings import MAX_ID_CHARS

if TYPE_CHECKING:
    from whitevec.service.settings import ServeSettings

# Every character Python's str.isspace() counts as whitespace, spelled so that JSON Schema (ECMA-262), pydantic's
# Rust regex and Python's re read the class alike: a text must hold at least one character outside it.
_WHITESPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
NOT_BLANK = f"[^{_WHITESPACE}]"
# A written document id (datasets.retrieval.ID_RULE): no white space at either end, any inside.
EXACT_ID = f"^[^{_WHITESPACE}](?:[\\s\\S]*[^{_WHITESPACE}])?$"


def _whole_number(value: Any) -> Any:
    """JSON Schema counts 15.0 as an integer; so does the API (2.5, "15" and true stay refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# An integer as JSON Schema means it: whole numbers, written with or without a fractional zero.
WholeNumber = Annotated[int, BeforeValidator(_whole_number)]


# The fusions a request may name, in the canonical forms whitevec.index.search.fusion.parse_fusion reads (lower
# case, no spaces, ALPHA from 0 to 1 written plainly): the schema states exactly what the server accepts. [0-9],
# not \d: pydantic's Rust regex counts every Unicode digit as \d.
FUSION_PATTERN = r"^(rrf(:[1-9][0-9]*)?|convex(:(0|1|0?\.[0-9]+|0\.[0-9]*|1\.0*))?)$"
# A fusion or candidates beside mode dense or lexical: refused, and the schema says so.
# A metadata filter (whitevec.index.filters.language); its syntax and fields are checked by the search, not the
# schema.
MAX_FILTER_CHARS = 4096
FilterExpression = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=MAX_FILTER_CHARS,
        description="Only documents whose metadata pass this expression, e.g. 'year >= 2000 and lang in "
        '["en", "fr"]\': ==, !=, <, <=, >, >=, in [...], and, or, not, parentheses; strings, numbers, '
        "true/false. The hits are the k best of the documents that pass; a syntax error, a field no document "
        "has or a value of another kind is a 422 naming the column; when none passes, each query's note says "
        "so.",
    ),
]

_FUSION_BESIDE_ANOTHER_MODE: Any = {
    "required": ["mode"],
    "properties": {"mode": {"enum": ["dense", "lexical"]}},
    "anyOf": [{"required": ["fusion"]}, {"required": ["candidates"]}],
}


@dataclass(frozen=True)
class SearchChoices:
    """What the served index can search: its ``modes`` (``("dense",)`` without a lexical part), its own
    ``default_mode`` and ``default_fusion`` (a spec such as ``convex:0.5``), and ``candidates``, the default
    factor of a hybrid search."""

    modes: tuple[str, ...] = ("dense",)
    default_mode: str = "dense"
    default_fusion: str = DEFAULT_FUSION.spec
    candidates: int = 10
    input_dim: int | None = None  # the length of a query vector (the encoder's dimension); None: texts only
    external: bool = False  # the index holds vectors given by the caller: its dense ranking needs vectors

    @property
    def hybrid(self) -> bool:
        return "hybrid" in self.modes


def bounded_text(settings: ServeSettings) -> Any:
    """A request's text: 1 to max_text_chars characters, not all whitespace (a query, a text, a document)."""
    return Annotated[
        str,
        StringConstraints(min_length=1, max_length=settings.max_text_chars, pattern=NOT_BLANK),
        Field(
            description=f"1 to max_text_chars ({settings.max_text_chars}) characters, not all whitespace; "
            "valid Unicode (no unpaired surrogate escapes)."
        ),
    ]


# A number of a given vector: finite in float32, what the index keeps (JSON's NaN and Infinity, which Python's
# parser reads, and numbers past float32's range refused in one line by the schema).
FLOAT32_MAX = 3.4028234663852886e38
VectorValue = Annotated[float, Field(allow_inf_nan=False, ge=-FLOAT32_MAX, le=FLOAT32_MAX)]


def vectors_field(dim: int, limit: int, what: str, row: str) -> Any:
    """A list of 1 to ``limit`` vectors of ``dim`` finite numbers each (``what`` they are, a ``row`` each); left
    out, None (never null in a body)."""
    vector = Annotated[list[VectorValue], Field(min_length=dim, max_length=dim)]
    field = Field(
        None,
        min_length=1,
        max_length=limit,
        description=f"{what}: 1 to {limit} vectors of {dim} finite numbers each, one per {row}, in the space of "
        "the index's encoder (before its transform, which the server applies).",
    )
    return list[vector], field  # type: ignore[valid-type]


def _search_constraints(index: SearchChoices) -> dict[str, Any]:
    """What a search request's schema says beyond its fields: no fusion beside another mode (an index that
    searches hybrid), queries or vectors or both (an index that takes vectors)."""
    out: dict[str, Any] = {}
    if index.hybrid:
        out["not"] = _FUSION_BESIDE_ANOTHER_MODE
    if index.input_dim:
        out["anyOf"] = [{"required": ["queries"]}, {"required": ["vectors"]}]
    return out


def _one_of_queries_or_vectors(model: Any) -> Any:
    """A search names queries, vectors or both; both, one of each per query."""
    queries, vectors = model.queries, getattr(model, "vectors", None)
    if queries is None and vectors is None:
        raise ValueError("give queries (texts), vectors, or both")
    if queries is not None and vectors is not None and len(queries) != len(vectors):
        raise ValueError(f"{len(vectors)} vectors for {len(queries)} queries; give one for each, in their order")
    return model


def request_models(
    settings: ServeSettings, choices: SearchChoices | None = None
) -> tuple[type[BaseModel], type[BaseModel]]:
    """``(SearchRequest, EmbedRequest)`` under ``settings``' limits and the index's ``choices`` (None: dense only):
    ``mode`` one of its modes; ``fusion``, ``candidates`` where it searches hybrid, never beside another mode."""
    index: SearchChoices = choices if choices is not None else SearchChoices()
    mode_type: Any = Literal[index.modes]  # the index's modes, an enum in the schema
    text = bounded_text(settings)
    no_lexical = "" if index.hybrid else f" This index has no lexical part ({ADD_LEXICAL})."
    vectors_type, vectors_spec = vectors_field(
        index.input_dim or 1, settings.max_queries, "Query vectors", "query"
    )

    class SearchRequest(BaseModel):
        """Queries to search for; the response gives, per query, the k best documents."""

        model_config = ConfigDict(
            extra="forbid",
            strict=True,
            json_schema_extra=_search_constraints(index) or None,
        )
        # Left out where vectors may stand for them (never null: the schema's anyOf names a field given).
        queries: list[text] = Field(  # type: ignore[valid-type]
            None if index.input_dim else ...,  # type: ignore[arg-type]
            min_length=1,
            max_length=settings.max_queries,
            description=f"Query texts, one search each (1 to max_queries = {settings.max_queries})."
            + (
                " Left out: vectors alone, a dense search. This index holds vectors given by the caller: its "
                "dense and hybrid searches need vectors (hybrid: beside the texts)."
                if index.external
                else " Left out: vectors alone, a dense search."
                if index.input_dim
                else ""
            ),
        )
        if index.input_dim:
            vectors: vectors_type = vectors_spec  # type: ignore[valid-type]
            _check_inputs = model_validator(mode="after")(_one_of_queries_or_vectors)
        k: WholeNumber = Field(
            min(10, settings.max_k),
            ge=1,
            le=settings.max_k,
            description=f"Documents per query (1 to max_k = {settings.max_k}; clamped to the index size).",
        )
        mode: mode_type = Field(  # type: ignore[valid-type]
            None,
            description=f"How to rank: {', '.join(index.modes)}. Left out: the index's own, "
            f"{index.default_mode}.{no_lexical}",
        )
        filter: FilterExpression = None

        if index.hybrid:  # only an index with a lexical part takes these (a dense one: unknown fields)
            fusion: str = Field(
                None,  # type: ignore[assignment]
                pattern=FUSION_PATTERN,
                description="A hybrid search's fusion: rrf, rrf:K (K >= 1), convex or convex:ALPHA (0 to 1, the "
                f"dense weight). Left out: the index's own, {index.default_fusion}. Given without mode, it asks "
                "for hybrid; refused beside another mode.",
            )
            candidates: WholeNumber = Field(
                None,  # type: ignore[assignment]
                ge=1,
                description="A hybrid search fuses each ranker's top candidates x k documents (never more than "
                f"the index holds). Left out: {index.candidates}. Given without mode, it asks for hybrid; refused "
                "beside another mode.",
            )

    return SearchRequest, _embed_request(settings, text)


def _embed_request(settings: ServeSettings, text: Any) -> type[BaseModel]:
    class EmbedRequest(BaseModel):
        """Texts to turn into vectors with the index's encoder and transform."""

        model_config = ConfigDict(extra="forbid", strict=True)
        texts: list[text] = Field(  # type: ignore[valid-type]
            min_length=1,
            max_length=settings.max_texts,
            description=f"Texts to embed (1 to max_texts = {settings.max_texts}).",
        )

    return EmbedRequest


OnExisting = Literal["error", "replace", "skip"]


def write_models(settings: ServeSettings, input_dim: int | None = None) -> tuple[type[BaseModel], type[BaseModel]]:
    """``(DocumentsRequest, DeleteRequest)`` under ``settings``' limits: at most max_texts documents of at most
    max_text_chars characters each, at most max_ids ids to delete; with ``input_dim``, the documents' vectors of
    that length may come beside them."""
    vectors_type, vectors_spec = vectors_field(
        input_dim or 1, settings.max_texts, "The documents' vectors", "document"
    )
    doc_id = Annotated[
        str,
        StringConstraints(min_length=1, max_length=MAX_ID_CHARS, pattern=EXACT_ID),
        Field(description=f"1 to {MAX_ID_CHARS} characters, exact: no white space at either end."),
    ]
    # Ids are taken exactly, as Python's and the CLI's deletes take them: one an older index holds with white
    # space stays deletable, and one the index lacks is reported missing on every surface alike.
    held_id = Annotated[
        str,
        StringConstraints(min_length=1, max_length=MAX_ID_CHARS),
        Field(description=f"1 to {MAX_ID_CHARS} characters, taken exactly."),
    ]
    doc_text = bounded_text(settings)

    class DocumentIn(BaseModel):
        """One document to add: its id, text and optional metadata (what hits return and filters read)."""

        model_config = ConfigDict(extra="forbid", strict=True)
        id: doc_id  # type: ignore[valid-type]
        text: doc_text  # type: ignore[valid-type]
        metadata: dict[str, Any] | None = Field(
            None, description="JSON values by field name: what hits return and /search's filter reads."
        )

    class DocumentsRequest(BaseModel):
        """Documents to add, or to put in place of those with the same ids (an upsert)."""

        model_config = ConfigDict(extra="forbid", strict=True)
        documents: list[DocumentIn] = Field(
            min_length=1,
            max_length=settings.max_texts,
            description=f"1 to max_texts ({settings.max_texts}) documents, each id once.",
        )
        if input_dim:
            vectors: vectors_type = vectors_spec  # type: ignore[valid-type]
        on_existing: OnExisting = Field(
            "error",
            description="What a document whose id the index holds does: error (the request is refused with 409 "
            "naming it, nothing written), replace (it replaces the one held: an upsert) or skip (the one held "
            "stays).",
        )

    class DeleteRequest(BaseModel):
        """Ids of documents to delete."""

        model_config = ConfigDict(extra="forbid", strict=True)
        ids: list[held_id] = Field(  # type: ignore[valid-type]
            min_length=1,
            max_length=settings.max_ids,
            description=f"1 to max_ids ({settings.max_ids}) document ids; those the index lacks are reported.",
        )

    return DocumentsRequest, DeleteRequest


class IndexVersion(BaseModel):
    count: int = Field(description="Live documents in the version served now (after the write).")
    segments: int = Field(description="Segments that version holds (a compaction merges them into one).")
    version: int = Field(description="The manifest's generation: 0 as built, one more per version written.")


class IndexInfo(IndexVersion):
    deleted: int = Field(description="Deleted documents whose rows no compaction has dropped yet.")


class DocumentsResponse(IndexVersion):
    added: int = Field(description="Documents whose ids were new to the index.")
    replaced: int = Field(description="Documents that replaced one with the same id (on_existing replace).")
    skipped: int = Field(description="Documents left out because the index held their id (on_existing skip).")


class DeleteResponse(IndexVersion):
    deleted: int = Field(description="Documents this request deleted.")
    missing_count: int = Field(description="Ids given that the index does not hold (the rest were deleted).")
    missing: list[str] = Field(description="The first 10 of those ids.")


class CompactResponse(IndexVersion):
    merged: int = Field(
        description="Segments merged into one (0: one segment and nothing deleted; nothing written)."
    )


class RankerPlace(BaseModel):
    rank: int = Field(description="Where the ranker put the document, from 1.")
    score: float = Field(description="The ranker's own score: the dense similarity (or distance), or BM25.")


class QueryResult(BaseModel):
    query: str | None = Field(description="The query's text; null for a query given as a vector alone.")
    ids: list[str]
    scores: list[float] = Field(
        description="Per hit, best first: the dense similarity (for metric l2, the squared distance, lower is "
        "closer), the BM25 score (lexical), or the fused score (hybrid)."
    )
    texts: list[str]
    metadata: list[dict[str, Any] | None]
    rankers: list[dict[str, RankerPlace] | None] = Field(
        description="Per hit of a lexical or hybrid search, each ranker (dense, lexical) that had the document "
        "among its candidates, with its rank and score there (a ranker that did not is left out); null per hit "
        "of a dense search."
    )
    note: str | None = Field(
        None,
        description="Why the query has no hits, or which ranking alone answered it: it holds no token the model "
        "knows (only emoji or characters the vocabulary lacks: no dense ranking), or no term left after "
        "analysis (only stop words or punctuation: no lexical ranking). Null otherwise.",
    )


class SearchResponse(BaseModel):
    k: int = Field(description="Documents asked per query after clamping to the index size.")
    mode: str = Field(description="The mode the search ran in: dense, lexical or hybrid.")
    fusion: str | None = Field(description="A hybrid search's fusion (e.g. convex:0.5); null otherwise.")
    candidates: int | None = Field(
        description="A hybrid search's candidates (each ranker's top candidates x k are fused); null otherwise."
    )
    results: list[QueryResult]


class EmbedResponse(BaseModel):
    dim: int
    vectors: list[list[float]]
    unknown: list[int] = Field(
        default_factory=list,
        description="Positions (from 0) of the texts with no token the model knows: their vectors are all zeros.",
    )


class HealthResponse(BaseModel):
    status: str = Field(description="'ok'.")
    count: int
    encoder_calls: int = Field(description="Encoder calls (forward passes) the worker has made since the start.")
    encoder_texts: int = Field(description="Texts those calls encoded: divided by the calls, the mean batch.")
    encoder_busy_s: float = Field(
        description="Seconds the worker has spent in those calls: against the wall time, how busy the encoder was."
    )


class LexicalInfo(BaseModel):
    ranker: str = Field(description="'bm25'.")
    method: str = Field(
        description="bm25s's BM25 variant: lucene, robertson, atire, bm25l or bm25+; milvus: Milvus's own BM25."
    )
    k1: float
    b: float
    analyzer: str = Field(description="How texts become terms: english, cjk-bigram, plain or encoder.")


class SearchInfo(BaseModel):
    modes: list[str] = Field(
        description="The modes /search may ask for: dense, and lexical and hybrid where the index has a lexical "
        "part."
    )
    default_mode: str = Field(description="The mode of a /search that names none: the index's own.")
    default_fusion: str = Field(description="The fusion of a hybrid /search that names none.")
    default_candidates: int = Field(description="The candidates of a hybrid /search that names none.")
    lexical: LexicalInfo | None = Field(description="The index's lexical part (BM25); null when it has none.")
    input_dim: int | None = Field(
        description="The length of the vectors /search and /documents take: the encoder's dimension."
    )
    external: bool = Field(
        description="Whether the index holds vectors given by the caller (no model): its dense and hybrid "
        "searches need vectors, and its writes the documents' vectors."
    )


class InfoResponse(BaseModel):
    manifest: dict[str, Any] = Field(description="The index manifest, without file paths.")
    count: int = Field(description="Documents in the index.")
    index: IndexInfo = Field(description="The version served now: live and deleted counts, segments, version.")
    search: SearchInfo = Field(description="What /search can do on this index, and its defaults.")
    limits: dict[str, Any] = Field(description="The request limits and switches of this server.")


class ErrorResponse(BaseModel):
    detail: str = Field(description="What was wrong, in one line.")


class HealthErrorResponse(ErrorResponse):
    status: Literal["damaged", "stopped"] = Field(
        description="'damaged': a search met an index file truncated or unreadable since the load; 'stopped': "
        "the worker thread that owns the retriever has stopped."
    )


class ValidationErrorItem(BaseModel):
    loc: list[str] = Field(description="Where: 'body', then the field names and list positions.")
    msg: str
    type: str


class ValidationErrorResponse(BaseModel):
    detail: str = Field(description="Every problem found, in one line.")
    errors: list[ValidationErrorItem]


class UniqueKeysRoute(APIRoute):
    """A route whose JSON body refuses a key given twice in one object, as a JSON lines corpus does (``json``
    would keep the last silently: ``{"id": "a", "id": "b"}`` added ``b``): a 422 naming the key."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            return await handler(_UniqueKeysRequest(request.scope, request.receive))

        return handle


class _UniqueKeysRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_unique_json"):
            body = await self.body()
            try:
                self._unique_json = json.loads(body, object_pairs_hook=unique_keys)
            except RepeatedKeyError as exc:  # FastAPI answers a JSONDecodeError as the body's one-line 422
                raise json.JSONDecodeError(str(exc), body.decode("utf-8", "replace"), 0) from None
        return self._unique_json
