"""Hybrid search over HTTP: /search's mode, fusion and candidates (answers the library's, hits with their
rankers, notes, one-line refusals before the job queues), /info's search part, and the contract (schemathesis) of
a server whose index has a lexical part."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed (dev extra)")
from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from tests.index_helpers import HashEncoder  # noqa: E402
from tests.test_service_contract import WithoutLifespan, call_and_validate  # noqa: E402
from whitevec.index import Document, Retriever  # noqa: E402
from whitevec.index.search.fusion import CANDIDATE_FACTOR  # noqa: E402
from whitevec.index.search.hits import DENSE_ALONE_NOTE, NO_TERM_NOTE, SearchHit  # noqa: E402
from whitevec.service.app import create_app  # noqa: E402
from whitevec.service.schemas import FUSION_PATTERN, SearchChoices  # noqa: E402
from whitevec.service.settings import ServeSettings  # noqa: E402

TEXTS = [
    "wing stall at high angle of attack",
    "heat transfer in hypersonic flow",
    "boundary layer on a flat plate",
    "buckling of thin cylindrical shells",
    "supersonic flow past a cone",
    "lift and drag of a delta wing",
    "flutter of a wing in a slipstream",
    "pressure on the tail",
]
LIMITS: dict[str, Any] = {"max_queries": 4, "max_texts": 3, "max_text_chars": 40, "max_k": 20}


@pytest.fixture(scope="module")
def hybrid_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Retriever]:
    docs = [Document(f"d{i}", text) for i, text in enumerate(TEXTS)]
    folder = tmp_path_factory.mktemp("served-hybrid") / "idx"
    with Retriever.build(docs, folder, encoder=HashEncoder(), lexical="bm25", transform="none") as retriever:
        yield retriever


@pytest.fixture(scope="module")
def client(hybrid_index: Retriever) -> Iterator[TestClient]:
    with TestClient(create_app(hybrid_index, ServeSettings(**LIMITS)), raise_server_exceptions=False) as test:
        yield test


def _same(result: dict[str, Any], hits: list[SearchHit]) -> None:
    assert result["ids"] == [hit.id for hit in hits]
    np.testing.assert_allclose(result["scores"], [hit.score for hit in hits], rtol=1e-6)
    assert result["rankers"] == [hit.rankers for hit in hits]
    assert result["note"] == hits.note  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("body", "mode", "fusion", "candidates"),
    [
        ({}, "hybrid", "convex:0.5", CANDIDATE_FACTOR),  # the index's own: hybrid, it has a lexical part
        ({"mode": "dense"}, "dense", None, None),
        ({"mode": "lexical"}, "lexical", None, None),
        ({"mode": "hybrid", "fusion": "rrf:2", "candidates": 2}, "hybrid", "rrf:2", 2),
        ({"fusion": "convex:0.25"}, "hybrid", "convex:0.25", CANDIDATE_FACTOR),  # a fusion asks for hybrid
    ],
)
def test_search_modes_answer_what_the_library_does(
    client: TestClient,
    hybrid_index: Retriever,
    body: dict[str, Any],
    mode: str,
    fusion: str | None,
    candidates: int | None,
) -> None:
    queries = ["wing flutter", "hypersonic heat"]
    answer = client.post("/search", json={"queries": queries, "k": 3, **body})
    assert answer.status_code == 200, answer.text
    payload = answer.json()
    assert (payload["mode"], payload["fusion"], payload["candidates"]) == (mode, fusion, candidates)
    expected = hybrid_index.search(queries, k=3, mode=mode, fusion=fusion, candidates=candidates)
    for result, hits in zip(payload["results"], expected, strict=True):
        _same(result, hits)
        if mode == "dense":
            assert result["rankers"] == [None] * 3
        else:
            assert all(set(places) <= {"dense", "lexical"} and places for places in result["rankers"])


def test_a_query_one_ranker_cannot_search_is_noted(client: TestClient) -> None:
    # Stop words only: no term left after analysis.
    hybrid = client.post("/search", json={"queries": ["the of a"], "k": 2}).json()["results"][0]
    assert hybrid["note"] == DENSE_ALONE_NOTE and len(hybrid["ids"]) == 2
    assert all(set(places) == {"dense"} for places in hybrid["rankers"])
    lexical = client.post("/search", json={"queries": ["the of a"], "k": 2, "mode": "lexical"}).json()
    assert lexical["results"][0]["note"] == NO_TERM_NOTE and lexical["results"][0]["ids"] == []


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"mode": "sparse"}, "unknown search mode 'sparse'"),
        ({"fusion": "convex:1.5"}, "unknown fusion 'convex:1.5'"),
        ({"fusion": "rrf:0"}, "unknown fusion 'rrf:0'"),
        ({"fusion": "RRF"}, "unknown fusion 'RRF'"),
        ({"fusion": 60}, "unknown fusion 60"),
        ({"candidates": 0}, "candidates must be an integer >= 1"),
        ({"candidates": "5"}, "candidates must be an integer >= 1"),
        ({"mode": "dense", "fusion": "rrf"}, "a fusion applies to hybrid search only, not to mode 'dense'"),
        ({"mode": "lexical", "candidates": 3}, "candidates applies to hybrid search only"),
    ],
)
def test_bad_search_choices_are_one_line_422s(
    hybrid_index: Retriever, body: dict[str, Any], needle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    searched: list[Any] = []
    monkeypatch.setattr(hybrid_index, "search", lambda *a, **kw: searched.append(a))
    with TestClient(create_app(hybrid_index, ServeSettings(**LIMITS))) as test:
        answer = test.post("/search", json={"queries": ["wing"], **body})
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert needle in detail and "\n" not in detail, detail
    assert searched == []  # refused before the job reached the retriever


def test_a_dense_only_index_refuses_lexical_choices_naming_the_rebuild(tmp_path: Path) -> None:
    docs = [Document(f"d{i}", text) for i, text in enumerate(TEXTS)]
    with (
        Retriever.build(docs, tmp_path / "idx", encoder=HashEncoder(), transform="none") as dense,
        TestClient(create_app(dense, ServeSettings(**LIMITS))) as test,
    ):
        info = test.get("/info").json()["search"]
        assert info == {
            "modes": ["dense"],
            "default_mode": "dense",
            "default_fusion": "convex:0.5",
            "default_candidates": CANDIDATE_FACTOR,
            "lexical": None,
            "input_dim": 16,
            "external": False,
        }
        for body, needle in (
            ({"mode": "hybrid"}, "unknown search mode 'hybrid'"),
            ({"fusion": "rrf"}, "fusion applies to hybrid search, and this index has no lexical part; rebuild"),
            ({"candidates": 2}, "--lexical bm25"),
        ):
            answer = test.post("/search", json={"queries": ["wing"], **body})
            assert answer.status_code == 422 and needle in answer.json()["detail"], answer.text
        plain = test.post("/search", json={"queries": ["wing"], "mode": "dense", "k": 2}).json()
        assert plain["mode"] == "dense" and plain["results"][0]["rankers"] == [None] * 2


def test_info_shows_the_lexical_part_and_the_defaults(client: TestClient, hybrid_index: Retriever) -> None:
    search = client.get("/info").json()["search"]
    record = hybrid_index.manifest["lexical"]
    assert search == {
        "modes": ["dense", "lexical", "hybrid"],
        "default_mode": "hybrid",
        "default_fusion": "convex:0.5",
        "default_candidates": CANDIDATE_FACTOR,
        "lexical": {
            "ranker": "bm25",
            "method": "lucene",
            "k1": record["k1"],
            "b": record["b"],
            "analyzer": "english",
        },
        "input_dim": hybrid_index.manifest["encoder_dim"],
        "external": False,
    }


def test_requests_asking_the_same_search_share_a_batch() -> None:
    from whitevec.service.worker import RetrieverWorker

    calls: list[dict[str, Any]] = []

    class Recording:
        manifest: dict[str, Any] = {}  # noqa: RUF012
        count = 3

        def search(self, queries: list[str], k: int = 10, **options: Any) -> list[list[Any]]:
            calls.append({"n": len(queries), **options})
            return [[] for _ in queries]

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.zeros((len(texts), 2), dtype=np.float32)

    import asyncio

    async def run() -> None:
        worker = RetrieverWorker(Recording(), "batch", 64)
        lexical = (("mode", "lexical"),)
        futures = [
            worker.submit("search", ["a"], 2, options=lexical),
            worker.submit("search", ["b"], 2, options=lexical),
            worker.submit("search", ["c"], 2),
        ]
        await asyncio.gather(*futures)
        worker.close()

    asyncio.run(run())
    assert sum(call["n"] for call in calls) == 3
    assert all(call.get("mode") in (None, "lexical") for call in calls)
    assert {call["n"] for call in calls if call.get("mode") is None} == {1}


def test_the_fusion_pattern_accepts_exactly_what_parse_fusion_reads_canonically() -> None:
    import re

    from whitevec.index.search.fusion import parse_fusion

    for spec in (
        "rrf",
        "rrf:1",
        "rrf:60",
        "convex",
        "convex:0",
        "convex:1",
        "convex:0.6",
        "convex:.5",
        "convex:1.0",
    ):
        assert re.fullmatch(FUSION_PATTERN, spec), spec
        parse_fusion(spec)
    for spec in ("rrf:0", "rrf:", "convex:1.5", "convex:2", "convex:-0.1", "convex:", "RRF", " rrf", "rrf:٣"):
        assert not re.fullmatch(FUSION_PATTERN, spec), spec
    assert SearchChoices().modes == ("dense",)


# ---- the contract of a server whose index has a lexical part ---------------------------------------------
class HybridContractRetriever:
    """Five documents; an index with a lexical part: any mode, fusion and candidates the schema allows."""

    manifest = {  # noqa: RUF012
        "model": "fake",
        "pooling": "first-last-avg",
        "dims": 4,
        "metric": "cosine",
        "lexical": {"ranker": "bm25", "method": "lucene", "k1": 1.5, "b": 0.75, "analyzer": {"name": "english"}},
    }

    @property
    def count(self) -> int:
        return 5

    def search(self, queries: list[str], k: int = 10, **options: Any) -> list[list[SearchHit]]:
        places = {"dense": {"rank": 1, "score": 0.5}, "lexical": {"rank": 2, "score": 3.0}}
        return [
            [SearchHit(f"d{i}", 1.0 - i / 10, f"document {i}", None, places) for i in range(min(k, 5))]
            for _ in queries
        ]

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4), dtype=np.float32)


hybrid_schema = schemathesis.openapi.from_asgi(
    "/openapi.json",
    WithoutLifespan(create_app(HybridContractRetriever(), ServeSettings(**LIMITS))),  # type: ignore[arg-type]
)
hybrid_schema.config.generation.update(modes=list(schemathesis.GenerationMode))


@hybrid_schema.include(path="/search").parametrize()
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_a_hybrid_server_keeps_its_contract(case: Any) -> None:
    call_and_validate(case)
