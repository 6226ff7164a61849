"""Request and response bodies of the HTTP API (pydantic models; FastAPI validates and documents them).

The request models are made per server by :func:`request_models`, so that its limits (max_queries, max_texts,
max_text_chars, max_k) are schema constraints in the OpenAPI document: a request the schema accepts is never
refused by a limit the schema does not state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

if TYPE_CHECKING:
    from whitevec.service.settings import ServeSettings

# Every character Python's str.isspace() counts as whitespace, spelled so that JSON Schema (ECMA-262), pydantic's
# Rust regex and Python's re read the class alike: a text must hold at least one character outside it.
_WHITESPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
NOT_BLANK = f"[^{_WHITESPACE}]"


def _whole_number(value: Any) -> Any:
    """JSON Schema counts 15.0 as an integer; so does the API (2.5, "15" and true stay refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# An integer as JSON Schema means it: whole numbers, written with or without a fractional zero.
WholeNumber = Annotated[int, BeforeValidator(_whole_number)]


def request_models(settings: ServeSettings) -> tuple[type[BaseModel], type[BaseModel]]:
    """``(SearchRequest, EmbedRequest)`` with ``settings``' limits as constraints."""
    text = Annotated[
        str,
        StringConstraints(min_length=1, max_length=settings.max_text_chars, pattern=NOT_BLANK),
        Field(
            description=f"1 to max_text_chars ({settings.max_text_chars}) characters, not all whitespace; "
            "valid Unicode (no unpaired surrogate escapes)."
        ),
    ]

    class SearchRequest(BaseModel):
        """Queries to search for; the response gives, per query, the k best documents."""

        model_config = ConfigDict(extra="forbid", strict=True)
        queries: list[text] = Field(  # type: ignore[valid-type]
            min_length=1,
            max_length=settings.max_queries,
            description=f"Query texts, one search each (1 to max_queries = {settings.max_queries}).",
        )
        k: WholeNumber = Field(
            min(10, settings.max_k),
            ge=1,
            le=settings.max_k,
            description=f"Documents per query (1 to max_k = {settings.max_k}; clamped to the index size).",
        )

    class EmbedRequest(BaseModel):
        """Texts to turn into vectors with the index's encoder and transform."""

        model_config = ConfigDict(extra="forbid", strict=True)
        texts: list[text] = Field(  # type: ignore[valid-type]
            min_length=1,
            max_length=settings.max_texts,
            description=f"Texts to embed (1 to max_texts = {settings.max_texts}).",
        )

    return SearchRequest, EmbedRequest


class QueryResult(BaseModel):
    query: str
    ids: list[str]
    scores: list[float]
    texts: list[str]
    metadata: list[dict[str, Any] | None]
    note: str | None = Field(
        None,
        description="Why the query has no hits when it was not searched: it holds no token the model knows "
        "(only emoji or characters the vocabulary lacks). Null otherwise.",
    )


class SearchResponse(BaseModel):
    k: int = Field(description="Documents asked per query after clamping to the index size.")
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


class InfoResponse(BaseModel):
    manifest: dict[str, Any] = Field(description="The index manifest, without file paths.")
    count: int = Field(description="Documents in the index.")
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
