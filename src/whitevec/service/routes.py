"""The read routes of the HTTP service: GET /health and /info, POST /search and /embed. The texts go to the worker
thread that owns the retriever (:class:`~whitevec.service.worker.RetrieverWorker`); the answer is shaped here,
as JSON bytes built straight from the hits."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import orjson
from fastapi import FastAPI, Request, Security
from fastapi.responses import JSONResponse, Response
from fastapi.security import APIKeyHeader

from whitevec.service.error_answers import DAMAGED_DETAIL, responses
from whitevec.service.manifest import index_info, public_manifest, search_choices
from whitevec.service.schemas import (
    EmbedResponse,
    HealthErrorResponse,
    HealthResponse,
    InfoResponse,
    SearchResponse,
    request_models,
)
from whitevec.service.settings import API_KEY_ENV, API_KEY_HEADER, ServeSettings
from whitevec.service.worker import HitLike, QueryVectors, RetrieverLike, RetrieverWorker, SearchOptions

# Responses with more hits than this are turned into JSON in a thread, one query at a time, so the event loop
# keeps serving other clients between the pieces (k=1000 for 64 queries is tens of MB).
LARGE_RESPONSE_HITS = 500

_HEALTH_503 = (
    "status 'damaged': a search met an index file truncated or unreadable since the load (logged on the server; "
    "repair or rebuild the index and restart); status 'stopped': the worker thread has stopped."
)

# The dependencies of a keyed route (which document the API key header in OpenAPI) and its refusals (401).
KeyGuard = tuple[list[Any], tuple[int, ...]]


def key_guard(settings: ServeSettings) -> KeyGuard:
    """The dependencies that document the API key header in OpenAPI (ApiKeyMiddleware checks it, before any body
    is read), and the refusal (401) a keyed route can give; neither without a key."""
    if settings.api_key is None:
        return [], ()
    key_header = APIKeyHeader(
        name=API_KEY_HEADER,
        auto_error=False,
        description=f"Needed when the server was started with {API_KEY_ENV} set.",
    )
    return [Security(key_header)], (401,)


# ---- answers as JSON bytes ---------------------------------------------------------------------------------
def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:  # integers beyond 64 bits in metadata, unpaired surrogates in stored text
        return json.dumps(value, ensure_ascii=True).encode("ascii")


def search_json(
    k: int, queries: Sequence[str | None], hits: Sequence[Sequence[HitLike]], plan: SearchRun | None = None
) -> bytes:
    """A SearchResponse as JSON, built straight from the hits (no model objects), one query at a time; ``plan``:
    the mode, fusion and candidates the search ran with (None: dense)."""
    run = plan if plan is not None else SearchRun("dense", None, None)
    head = {"k": int(k), "mode": run.mode, "fusion": run.fusion, "candidates": run.candidates}
    pieces = [_dumps(head)[:-1], b',"results":[']
    for i, (query, row) in enumerate(zip(queries, hits, strict=True)):
        if i:
            pieces.append(b",")
        pieces.append(
            _dumps(
                {
                    "query": query,
                    "ids": [str(h.id) for h in row],
                    "scores": [float(h.score) for h in row],
                    "texts": [str(h.text) for h in row],
                    "metadata": [h.metadata for h in row],
                    "rankers": [getattr(h, "rankers", None) for h in row],
                    "note": getattr(row, "note", None),
                }
            )
        )
    pieces.append(b"]}")
    return b"".join(pieces)


@dataclass(frozen=True)
class SearchRun:
    """What a /search ran: its ``mode``, and a hybrid one's ``fusion`` spec and ``candidates`` (else None)."""

    mode: str
    fusion: str | None
    candidates: int | None


def embed_json(vectors: np.ndarray, known: np.ndarray) -> bytes:
    """An EmbedResponse as JSON (float32 values written in their shortest exact form); ``known``: a bool per
    text, False where it has no token the model knows."""
    return _dumps(
        {
            "dim": int(vectors.shape[1]),
            "vectors": np.ascontiguousarray(vectors, dtype=np.float32),
            "unknown": np.flatnonzero(~np.asarray(known, dtype=bool)).tolist(),
        }
    )


def _json_response(body: bytes) -> Response:
    return Response(body, media_type="application/json")


# ---- the routes -----------------------------------------------------------------------------------------
def _unhealthy(status: Literal["damaged", "stopped"], detail: str) -> JSONResponse:
    return JSONResponse(HealthErrorResponse(status=status, detail=detail).model_dump(), status_code=503)


def add_service_routes(
    app: FastAPI, retriever: RetrieverLike, worker: RetrieverWorker, settings: ServeSettings, guard: KeyGuard
) -> None:
    """/health (open) and /info."""
    search_info = search_choices(dict(retriever.manifest))[1]
    secured, key_refusal = guard

    @app.get(
        "/health",
        response_model=HealthResponse,
        responses={**responses(400, 500), 503: {"model": HealthErrorResponse, "description": _HEALTH_503}},
        tags=["service"],
    )
    async def health() -> HealthResponse | JSONResponse:
        """Liveness: ok while the encoder thread runs and no search has met a damaged index file (no key
        needed); 503 with the status otherwise."""
        if not worker.alive:
            return _unhealthy("stopped", "the encoder worker has stopped")
        if worker.damage is not None:
            return _unhealthy("damaged", DAMAGED_DETAIL)
        return HealthResponse(
            status="ok",
            count=int(retriever.count),
            encoder_calls=worker.calls,
            encoder_texts=worker.texts,
            encoder_busy_s=round(worker.busy_s, 6),
        )

    @app.get(
        "/info",
        response_model=InfoResponse,
        dependencies=secured,
        responses=responses(400, *key_refusal, 500, 503),
        tags=["service"],
    )
    async def info() -> InfoResponse:
        """The index manifest (model, pooling, transform, dims, metric, kind, count, versions, checksums),
        without file paths; the version served now (live and deleted counts, segments, version: writes change
        them); what /search can do (its modes, defaults, and the lexical part's analyzer, k1 and b); and the
        request limits."""
        manifest = retriever.manifest  # read once: one version, whatever a write swaps in meanwhile
        version = index_info(manifest, retriever.count)
        return InfoResponse(
            manifest=public_manifest(dict(manifest)),
            count=version.count,
            index=version,
            search=search_info,
            limits=settings.public(),
        )


def add_recall_routes(
    app: FastAPI, retriever: RetrieverLike, worker: RetrieverWorker, settings: ServeSettings, guard: KeyGuard
) -> None:
    """POST /search and /embed: the texts go to the worker thread, the answer is shaped here."""
    from whitevec.index.filters.language import parse_filter
    from whitevec.index.search.modes import plan_search, search_defaults

    choices = search_choices(dict(retriever.manifest))[0]
    defaults = search_defaults(dict(retriever.manifest))
    own_plan = plan_search(None, None, None, defaults=defaults, has_lexical=choices.hybrid)
    SearchRequest, EmbedRequest = request_models(settings, choices)
    secured, key_refusal = guard

    async def search(body: Any, request: Request) -> Response:
        """The k best documents for each query: ids, scores and texts, best first, and for a lexical or hybrid
        search the rankers that found each. ``mode`` (dense, lexical, hybrid), ``fusion`` and ``candidates``
        left out: the index's own (/info shows them). A query one ranker cannot search (no token the model
        knows; no term left after analysis) gets the other ranking alone, or no hits, and a note. ``filter``: a
        metadata filter; the hits are the k best of the documents that pass."""
        queries: list[str] = list(body.queries or ())
        vectors = getattr(body, "vectors", None)
        given = {name: getattr(body, name, None) for name in ("mode", "fusion", "candidates")}
        # Checked here, before the job queues: a fusion beside another mode is one line, as in the CLI.
        plan = plan_search(**given, defaults=defaults, has_lexical=choices.hybrid)
        hybrid = plan.mode == "hybrid"
        run = SearchRun(plan.mode, plan.fusion.spec if hybrid else None, plan.candidates if hybrid else None)
        # The index's own search goes as a plain one (a retriever without modes serves it); another as its
        # resolved plan, so requests asking the same thing in other words share a batch.
        options: SearchOptions = ()
        if plan != own_plan:
            options = (("mode", plan.mode),)
            if hybrid:
                options += (("fusion", plan.fusion.spec), ("candidates", plan.candidates))
        if body.filter is not None:  # its syntax checked here; its fields by the search (both a one-line 422)
            options += (("filter", parse_filter(body.filter)),)
        if vectors is not None:  # the dense ranking's queries (the texts, if any, the lexical ranking's)
            options += (("query_vectors", QueryVectors(vectors)),)
        k, hits = await worker.search(queries, int(body.k), request.scope, options)
        named: list[str | None] = list(queries) if queries else [None] * len(hits)
        if len(named) * k > LARGE_RESPONSE_HITS:
            return _json_response(await asyncio.to_thread(search_json, k, named, hits, run))
        return _json_response(search_json(k, named, hits, run))

    async def embed(body: Any, request: Request) -> Response:
        """Vectors for texts, encoded and transformed exactly as the index's documents were; a text with no token
        the model knows gets zeros, and its position is listed in ``unknown``."""
        texts: list[str] = list(body.texts)
        vectors, known = await worker.submit("embed", texts, 0, request.scope)
        return _json_response(embed_json(vectors, known))

    # The request models are made for these settings' limits: name them as the body's type for FastAPI (the
    # string annotations of this module cannot reach a local class).
    search.__annotations__["body"] = SearchRequest
    embed.__annotations__["body"] = EmbedRequest
    for path, endpoint, answer in (("/search", search, SearchResponse), ("/embed", embed, EmbedResponse)):
        app.post(
            path,
            response_model=answer,
            dependencies=secured,
            responses=responses(400, *key_refusal, 408, 413, 422, 500, 503),
            tags=["recall"],
        )(endpoint)
