"""Request and response bodies of the HTTP API (pydantic models; FastAPI validates and documents them)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SearchRequest(BaseModel):
    """Queries to search for; the response gives, per query, the k best documents."""

    model_config = ConfigDict(extra="forbid", strict=True)
    queries: list[str] = Field(min_length=1, description="Query texts, one search each.")
    k: int = Field(10, description="Documents per query (1 to the server's max_k; clamped to the index size).")


class EmbedRequest(BaseModel):
    """Texts to turn into vectors with the index's encoder and transform."""

    model_config = ConfigDict(extra="forbid", strict=True)
    texts: list[str] = Field(min_length=1, description="Texts to embed.")


class QueryResult(BaseModel):
    query: str
    ids: list[str]
    scores: list[float]
    texts: list[str]
    metadata: list[dict[str, Any] | None]


class SearchResponse(BaseModel):
    k: int = Field(description="Documents asked per query after clamping to the index size.")
    results: list[QueryResult]


class EmbedResponse(BaseModel):
    dim: int
    vectors: list[list[float]]


class HealthResponse(BaseModel):
    status: str
    count: int


class ErrorResponse(BaseModel):
    detail: str = Field(description="What was wrong, in one line.")


class ValidationErrorItem(BaseModel):
    loc: list[str]
    msg: str
    type: str


class ValidationErrorResponse(BaseModel):
    detail: str = Field(description="Every problem found, in one line.")
    errors: list[ValidationErrorItem]
