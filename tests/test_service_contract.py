"""The OpenAPI document is the contract: a schema fuzzer (schemathesis) sends generated requests, valid and
invalid, to every operation and checks every answer against the document (status codes listed, bodies matching
their schemas, schema-valid requests accepted, invalid ones refused, no 5xx), on a keyless, a keyed and a
writable server. /docs runs from local files only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed (dev extra)")
from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from whitevec.index import Document  # noqa: E402
from whitevec.index import SearchHit as Hit  # noqa: E402
from whitevec.index.segments.requests import AddResult  # noqa: E402
from whitevec.service.app import PAGE_HEADERS, create_app  # noqa: E402
from whitevec.service.settings import ServeSettings  # noqa: E402
from whitevec.service.writes import WRITE_PATHS  # noqa: E402

KEY = "contract-key"
LIMITS = {"max_queries": 4, "max_texts": 3, "max_text_chars": 40, "max_k": 20}
# Cases per operation and way of generating: 7 operations x 3 servers.
EXAMPLES = 40


class ContractRetriever:
    """Five documents, some with metadata; any text is a valid query (as for a real model)."""

    # encoder_dim: searches and writes take vectors of 3 numbers beside or instead of texts.
    manifest = {"model": "fake", "pooling": "first-last-avg", "dims": 4, "metric": "cosine", "encoder_dim": 3}  # noqa: RUF012

    @property
    def count(self) -> int:
        return 5

    def search(self, queries: list[str] | None, k: int = 10, **options: Any) -> list[list[Hit]]:
        meta: list[dict[str, Any] | None] = [None, {"year": 1962}, {"tags": ["a", "b"]}, None, {}]
        asked = len(queries) if queries else len(np.asarray(options["query_vectors"]))
        return [
            [Hit(f"d{i}", 1.0 - i / 10, f"document {i}", meta[i]) for i in range(min(k, self.count))]
            for _ in range(asked)
        ]

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array([[len(t), 1.0, 0.0, -1.0] for t in texts], dtype=np.float32)


@dataclass(frozen=True)
class Deleted:
    deleted: int
    missing: list[str]


class WritableContractRetriever(ContractRetriever):
    """ContractRetriever that takes writes: it holds ids d0 to d4 (an add of one under on_existing error: 409)."""

    held = frozenset(f"d{i}" for i in range(5))
    encoder: Any = None  # what a write encodes with (the writer thread's; this one encodes nothing)

    def existing_ids(self, ids: list[str]) -> list[str]:
        return [doc_id for doc_id in ids if doc_id in self.held]

    def write(self, docs: list[Document], show_progress: bool | None = None, **options: str) -> AddResult:
        held = sum(d.id in self.held for d in docs)
        replaced = held if options.get("on_existing") == "replace" else 0
        return AddResult(added=len(docs) - held, replaced=replaced, skipped=held - replaced, count=self.count)

    def delete(self, ids: list[str]) -> Deleted:
        return Deleted(sum(doc_id in self.held for doc_id in ids), [i for i in ids if i not in self.held])

    def compact(self) -> int:
        return 0


class WithoutLifespan:
    """The app, never told to shut down: schemathesis drives each case through a client of its own, whose
    closing would stop the app's worker thread after the first case."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await self.app(scope, receive, send)


def _schema(api_key: str | None, writable: bool = False) -> Any:
    retriever = WritableContractRetriever() if writable else ContractRetriever()
    app = create_app(retriever, ServeSettings(api_key=api_key, writable=writable, **LIMITS))  # type: ignore[arg-type]
    schema = schemathesis.openapi.from_asgi("/openapi.json", WithoutLifespan(app))
    schema.config.generation.update(modes=list(schemathesis.GenerationMode))  # valid and invalid requests
    return schema


keyless = _schema(None)
keyed = _schema(KEY)
writable = _schema(KEY, writable=True)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same cases every run: a failure here is reproducible, not a flake
    suppress_health_check=list(HealthCheck),
)


def call_and_validate(case: Any, writable: bool = False, **kwargs: Any) -> None:
    """Schemathesis's checks of one case; spared only the check that a schema-valid body is accepted: vectors
    beside queries or documents of another count (one each, the description says), a body
    with a metadata filter (a filter's syntax and fields are the index's, a 422 naming the column, which no
    schema can state), documents that repeat an id (JSON Schema's uniqueItems compares whole items, not one
    field: the description says "each id once"), and a write to a read-only server (405 whatever the body)."""
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    filtered = isinstance(case.body, dict) and "filter" in case.body
    read_only = not writable and case.operation.path in WRITE_PATHS
    unpaired = _unpaired_vectors(case.body)
    spared = [positive_data_acceptance] if filtered or read_only or unpaired or _repeats_an_id(case.body) else None
    case.call_and_validate(excluded_checks=spared, **kwargs)


def _unpaired_vectors(body: Any) -> bool:
    """Vectors beside queries or documents of another count (one each is the description's, which no schema
    states: a one-line 422)."""
    if not isinstance(body, dict) or not isinstance(body.get("vectors"), list):
        return False
    texts = body.get("queries", body.get("documents"))
    return isinstance(texts, list) and len(texts) != len(body["vectors"])


def _repeats_an_id(body: Any) -> bool:
    documents = body.get("documents") if isinstance(body, dict) else None
    if not isinstance(documents, list):
        return False
    ids = [d.get("id") for d in documents if isinstance(d, dict)]
    return len(set(map(str, ids))) < len(ids)


@keyless.parametrize()
@FUZZ
def test_keyless_server_keeps_its_contract(case: Any) -> None:
    call_and_validate(case)


@keyed.parametrize()
@FUZZ
def test_keyed_server_keeps_its_contract(case: Any) -> None:
    call_and_validate(case, headers={"X-API-Key": KEY})


@writable.parametrize()
@FUZZ
def test_writable_server_keeps_its_contract(case: Any) -> None:
    call_and_validate(case, writable=True, headers={"X-API-Key": KEY})


def _document(api_key: str | None = None) -> dict[str, Any]:
    with TestClient(create_app(ContractRetriever(), ServeSettings(api_key=api_key, **LIMITS))) as client:  # type: ignore[arg-type]
        document: dict[str, Any] = client.get("/openapi.json").json()
    return document


def test_limits_are_schema_constraints() -> None:
    schemas = _document()["components"]["schemas"]
    search, embed = schemas["SearchRequest"]["properties"], schemas["EmbedRequest"]["properties"]
    assert search["queries"]["maxItems"] == 4 and search["queries"]["minItems"] == 1
    assert embed["texts"]["maxItems"] == 3
    for text in (search["queries"]["items"], embed["texts"]["items"]):
        assert text["maxLength"] == 40 and text["minLength"] == 1 and "pattern" in text
    assert (search["k"]["minimum"], search["k"]["maximum"]) == (1, 20)


def test_every_refusal_is_declared_with_its_body() -> None:
    paths = _document(KEY)["paths"]
    expected = {"/search": "400 401 408 413 422 500 503", "/embed": "400 401 408 413 422 500 503"}
    expected |= {"/info": "400 401 500 503", "/health": "400 500 503"}
    expected |= {path: "400 401 405 408 409 413 422 500 503" for path in WRITE_PATHS}
    for path, codes in expected.items():
        operation = next(iter(paths[path].values()))
        responses = operation["responses"]
        assert set(codes.split()) <= set(responses), (path, sorted(responses))
        for code in codes.split():
            body = responses[code]["content"]["application/json"]["schema"]["$ref"]
            assert body.endswith("ValidationErrorResponse" if code == "422" else "ErrorResponse"), (path, code)
    assert "401" not in _document()["paths"]["/search"]["post"]["responses"]  # keyless: nothing to refuse


def test_write_limits_are_schema_constraints() -> None:
    schemas = _document()["components"]["schemas"]
    documents = schemas["DocumentsRequest"]["properties"]
    assert (documents["documents"]["minItems"], documents["documents"]["maxItems"]) == (1, 3)
    assert documents["on_existing"]["enum"] == ["error", "replace", "skip"]
    assert documents["on_existing"]["default"] == "error"
    text = schemas["DocumentIn"]["properties"]["text"]
    assert text["maxLength"] == 40 and text["minLength"] == 1 and "pattern" in text
    ids = schemas["DeleteRequest"]["properties"]["ids"]
    assert (ids["minItems"], ids["maxItems"]) == (1, ServeSettings().max_ids)


@pytest.mark.parametrize(
    "body",
    [
        b'{"queries": ["  "]}',
        b'{"queries": ["' + b"x" * 41 + b'"]}',
        b'{"queries": ["a", "b", "c", "d", "e"]}',
        b'{"queries": ["a"], "k": 0}',
        b'{"queries": ["\\ud800"]}',
        b'{"queries": [',
    ],
)
def test_every_422_body_matches_its_schema(body: bytes) -> None:
    with TestClient(create_app(ContractRetriever(), ServeSettings(**LIMITS))) as client:  # type: ignore[arg-type]
        answer = client.post("/search", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422
    payload = answer.json()
    assert isinstance(payload["detail"], str) and isinstance(payload["errors"], list) and payload["errors"]
    for item in payload["errors"]:
        assert set(item) == {"loc", "msg", "type"} and all(isinstance(p, str) for p in item["loc"])


def test_docs_use_no_external_url_and_the_page_csp() -> None:
    with TestClient(create_app(ContractRetriever(), ServeSettings(api_key=KEY))) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        assert page.headers["content-security-policy"] == PAGE_HEADERS["Content-Security-Policy"]
        html = page.text
        references = re.findall(r'(?:src|href)="([^"]+)"', html)
        local = [ref.startswith("/") and not ref.startswith("//") for ref in references]
        assert references and all(local), references
        assert not re.search(r"https?://", html)
        for ref in references:  # each file the page loads is served here, under the same policy, without a key
            asset = client.get(ref)
            assert asset.status_code == 200, ref
            assert asset.headers["content-security-policy"] == PAGE_HEADERS["Content-Security-Policy"], ref
        init = client.get("/static/docs.js").text
        assert "validatorUrl: null" in init and not re.search(r"https?://", init)
        assert client.get("/docs/assets/redoc.standalone.js").status_code == 404  # only the files /docs uses


def test_a_request_stops_counting_as_arriving_once_its_job_is_queued() -> None:
    seen: list[int] = []

    class Recording(ContractRetriever):
        def search(self, queries: list[str], k: int = 10) -> list[list[Hit]]:
            seen.append(app.state.worker.incoming)  # while its own job runs: no longer "on its way"
            return super().search(queries, k)

    app = create_app(Recording(), ServeSettings(**LIMITS))  # type: ignore[arg-type]
    with TestClient(app) as client:
        assert client.post("/search", json={"queries": ["a"], "k": 2}).status_code == 200
        assert client.post("/search", json={"queries": [" "], "k": 2}).status_code == 422  # ends without a job
        assert seen == [0] and app.state.worker.incoming == 0
