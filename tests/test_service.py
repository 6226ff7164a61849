"""The HTTP service: API shapes, limits, bad input (never a 500), the API key, and 32 concurrent clients.

Most tests serve a small fake retriever (deterministic hashed bag-of-words vectors) so they check the service
alone; the tests at the end serve a real tiny index built with the random BERT fixture.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
import httpx
import uvicorn
from benchmarks.common.serving import wait_until_healthy
from fastapi.testclient import TestClient

from whitevec.errors import BadInputError
from whitevec.index import SearchHit as Hit
from whitevec.service.app import create_app
from whitevec.service.manifest import public_manifest
from whitevec.service.settings import ServeSettings
from whitevec.service.worker import RetrieverWorker

from .static_helpers import tiny_static_index

DIM = 16
DOCS = [
    "a man is playing a guitar",
    "a woman is playing the piano",
    "the dog is running in the street",
    "a cat is eating food",
    "a girl is styling her hair",
    "the boy is brushing his hair",
    "a red car is on the street",
    "a big blue car",
    "the small dog and the big cat",
    "a man is eating food in the street",
    "<img src=x onerror=alert(1)> markup in a document",
    "the woman is running",
]


def _vector(text: str) -> np.ndarray:
    """Hashed bag of words, L2-normalised: similar texts share words, so rankings mean something."""
    vec = np.zeros(DIM, dtype=np.float32)
    for word in text.lower().split():
        digest = hashlib.sha256(word.encode()).digest()
        vec[digest[0] % DIM] += 1.0 if digest[1] % 2 else -1.0
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm else vec


class FakeRetriever:
    """Exact search over DOCS; fails the test if two threads ever run inside it at once."""

    def __init__(self, delay: float = 0.0) -> None:
        self.matrix = np.stack([_vector(t) for t in DOCS])
        self.delay = delay
        self.inside = 0
        self.max_inside = 0
        self.threads: set[str] = set()
        self.calls: list[tuple[str, int]] = []
        self._guard = threading.Lock()
        self.manifest = {
            "model": "/home/someone/models/tiny-bert",
            "pooling": "first-last-avg",
            "transform": {"spec": "whitening-8", "file": "transform.safetensors"},
            "dims": DIM,
            "metric": "cosine",
            "kind": "flat",
            "count": len(DOCS),
            "index_path": "/srv/private/index",
            "checksums": {"index.faiss": "ab" * 32},
            "versions": {"whitevec": "0.1.0"},
        }

    @property
    def count(self) -> int:
        return len(DOCS)

    def _enter(self, kind: str, n: int) -> None:
        with self._guard:
            self.inside += 1
            self.max_inside = max(self.max_inside, self.inside)
            self.threads.add(threading.current_thread().name)
            self.calls.append((kind, n))

    def _leave(self) -> None:
        with self._guard:
            self.inside -= 1

    def expected(self, query: str, k: int) -> list[str]:
        scores = self.matrix @ _vector(query)
        order = sorted(range(len(DOCS)), key=lambda i: (-float(scores[i]), i))
        return [f"doc-{i}" for i in order[:k]]

    def search(self, queries: list[str], k: int = 10) -> list[list[Hit]]:
        self._enter("search", len(queries))
        try:
            if self.delay:
                time.sleep(self.delay)
            if any("explode" in q for q in queries):
                raise BadInputError("the fake retriever refuses the word 'explode'")
            if any("crash" in q for q in queries):
                raise RuntimeError("a bug inside the retriever")
            out = []
            for query in queries:
                scores = self.matrix @ _vector(query)
                ids = self.expected(query, k)
                out.append([Hit(i, float(scores[int(i[4:])]), DOCS[int(i[4:])], {"n": int(i[4:])}) for i in ids])
            return out
        finally:
            self._leave()

    def embed(self, texts: list[str]) -> np.ndarray:
        self._enter("embed", len(texts))
        try:
            return np.stack([_vector(t) for t in texts])
        finally:
            self._leave()


@pytest.fixture
def fake() -> FakeRetriever:
    return FakeRetriever()


@pytest.fixture
def client(fake: FakeRetriever) -> Iterator[TestClient]:
    settings = ServeSettings(max_queries=4, max_texts=3, max_text_chars=50, max_k=20, max_body_bytes=2000)
    with TestClient(create_app(fake, settings), raise_server_exceptions=False) as test_client:
        yield test_client


# ---- the API ----------------------------------------------------------------------------------------------
def test_health_and_info_without_paths(client: TestClient) -> None:
    health = client.get("/health").json()
    assert health == {
        "status": "ok",
        "count": len(DOCS),
        "encoder_calls": 0,
        "encoder_texts": 0,
        "encoder_busy_s": 0.0,
    }
    client.post("/search", json={"queries": ["a dog", "a cat"], "k": 2})
    after = client.get("/health").json()
    assert after["encoder_texts"] == 2 and after["encoder_busy_s"] > 0
    info = client.get("/info").json()
    manifest = info["manifest"]
    assert manifest["model"] == "tiny-bert"  # absolute model folder cut to its name
    assert "index_path" not in manifest and "file" not in manifest["transform"]
    assert manifest["checksums"] == {"index.faiss": "ab" * 32}
    assert manifest["transform"]["spec"] == "whitening-8" and manifest["dims"] == DIM
    assert info["limits"]["max_k"] == 20 and info["limits"]["api_key_required"] is False
    assert "/home/" not in str(info) and "/srv/" not in str(info)


def test_public_manifest_cuts_nested_paths() -> None:
    out = public_manifest(
        {
            "a": {"model_dir": "/x", "b": ["/abs/p/m", "rel/name"]},
            "backend_uri": "http://u:p@h",
            "files": {"docs.sqlite": {"sha256": "00", "bytes": 3}},
        }
    )
    assert out == {"a": {"b": ["m", "rel/name"]}, "files": {"docs.sqlite": {"sha256": "00", "bytes": 3}}}


def test_search_ranks_like_brute_force(client: TestClient, fake: FakeRetriever) -> None:
    queries = ["a man playing guitar", "dog in the street", "hair"]
    response = client.post("/search", json={"queries": queries, "k": 5})
    assert response.status_code == 200
    body = response.json()
    assert body["k"] == 5 and len(body["results"]) == 3
    for query, result in zip(queries, body["results"], strict=True):
        assert result["query"] == query
        assert result["ids"] == fake.expected(query, 5)
        assert result["texts"] == [DOCS[int(i[4:])] for i in result["ids"]]
        expected_scores = [float(fake.matrix[int(i[4:])] @ _vector(query)) for i in result["ids"]]
        np.testing.assert_allclose(result["scores"], expected_scores, rtol=1e-6)
        assert result["scores"] == sorted(result["scores"], reverse=True)


def test_search_default_k_and_clamp_to_index_size(client: TestClient) -> None:
    assert client.post("/search", json={"queries": ["cat"]}).json()["k"] == 10
    body = client.post("/search", json={"queries": ["cat"], "k": 20}).json()
    assert body["k"] == len(DOCS) and len(body["results"][0]["ids"]) == len(DOCS)


def test_embed_gives_the_retrievers_vectors(client: TestClient) -> None:
    body = client.post("/embed", json={"texts": ["a red car", "the dog"]}).json()
    assert body["dim"] == DIM
    np.testing.assert_allclose(np.array(body["vectors"]), np.stack([_vector("a red car"), _vector("the dog")]))


def test_page_docs_and_static(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert 'id="query"' in page.text and "/static/app.js" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    script = client.get("/static/app.js")
    assert script.status_code == 200 and "textContent" in script.text
    assert "innerHTML" not in script.text.replace("never innerHTML", "")  # document text never becomes markup
    assert client.get("/static/style.css").status_code == 200
    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    assert {"/search", "/embed", "/info", "/health"} <= set(spec["paths"])
    assert client.get("/static/../settings.py").status_code == 404


# ---- bad input: 4xx with a message, and the server keeps serving ------------------------------------------
BAD_REQUESTS: list[tuple[str, str, bytes, dict[str, str], int, str]] = [
    # (name, path, body, extra headers, status, text the message must hold)
    ("malformed json", "/search", b'{"queries": ["a",', {}, 422, "not valid JSON"),
    ("not an object", "/search", b'["a", "b"]', {}, 422, "invalid request"),
    ("null body", "/search", b"null", {}, 422, "invalid request"),
    ("empty body", "/search", b"", {}, 422, "invalid request"),
    ("queries a string", "/search", b'{"queries": "a dog"}', {}, 422, "queries"),
    ("queries of numbers", "/search", b'{"queries": [1, 2]}', {}, 422, "queries.0"),
    ("k a string", "/search", b'{"queries": ["a"], "k": "10"}', {}, 422, "k"),
    ("k a float", "/search", b'{"queries": ["a"], "k": 2.5}', {}, 422, "k"),
    ("k a bool", "/search", b'{"queries": ["a"], "k": true}', {}, 422, "k"),
    ("k zero", "/search", b'{"queries": ["a"], "k": 0}', {}, 422, "max_k"),
    ("k over max_k", "/search", b'{"queries": ["a"], "k": 21}', {}, 422, "max_k (20)"),
    ("k huge", "/search", b'{"queries": ["a"], "k": 100000000000000000000000}', {}, 422, "k"),
    ("empty query list", "/search", b'{"queries": []}', {}, 422, "queries"),
    ("missing queries", "/search", b'{"k": 3}', {}, 422, "queries: Field required"),
    ("blank query", "/search", b'{"queries": ["  "]}', {}, 422, "queries[0] is empty"),
    ("too many queries", "/search", b'{"queries": ["a","b","c","d","e"]}', {}, 422, "max_queries is 4"),
    ("query too long", "/search", b'{"queries": ["' + b"x" * 51 + b'"]}', {}, 422, "max_text_chars is 50"),
    ("unknown field", "/search", b'{"queries": ["a"], "index": "/etc"}', {}, 422, "unknown field"),
    ("a path field", "/search", b'{"queries": ["a"], "path": "/etc/passwd"}', {}, 422, "unknown field"),
    ("non-utf8 bytes", "/search", b'{"queries": ["\xff\xfe\xfa"]}', {}, 400, "not valid UTF-8"),
    ("lone surrogate", "/search", b'{"queries": ["\\ud800"]}', {}, 422, "surrogate"),
    ("huge body", "/search", b'{"queries": ["' + b"a" * 5000 + b'"]}', {}, 413, "max_body_bytes (2000"),
    ("wrong content type", "/search", b"queries=a", {"Content-Type": "text/plain"}, 422, "invalid request"),
    ("embed empty", "/embed", b'{"texts": []}', {}, 422, "texts"),
    ("embed too many", "/embed", b'{"texts": ["a","b","c","d"]}', {}, 422, "max_texts is 3"),
    ("embed unknown field", "/embed", b'{"texts": ["a"], "k": 3}', {}, 422, "unknown field"),
    ("embed a path", "/embed", b'{"file": "/etc/passwd"}', {}, 422, "unknown field"),
]


@pytest.mark.parametrize(
    ("path", "body", "headers", "status", "needle"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_bad_input_is_a_clear_4xx(
    client: TestClient, path: str, body: bytes, headers: dict[str, str], status: int, needle: str
) -> None:
    sent_headers = {"Content-Type": "application/json", **headers}
    response = client.post(path, content=body, headers=sent_headers)
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and needle in detail, detail
    # the server keeps serving
    assert client.post("/search", json={"queries": ["a dog"], "k": 2}).status_code == 200


def test_chunked_huge_body_is_413_without_reading_it_all(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"queries": ["'
        for _ in range(100):  # no Content-Length: the limit is counted on the bytes as they arrive
            yield b"a" * 100
        yield b'"]}'

    response = client.post("/search", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and "max_body_bytes" in response.json()["detail"]
    assert client.get("/health").status_code == 200


def test_wrong_methods_and_routes_are_4xx(client: TestClient) -> None:
    assert client.get("/search").status_code == 405
    assert client.post("/health").status_code == 405
    assert client.get("/nothing-here").status_code == 404


def test_retriever_errors_become_422_or_a_logged_500(client: TestClient) -> None:
    bad = client.post("/search", json={"queries": ["explode"]})
    assert bad.status_code == 422 and "explode" in bad.json()["detail"]
    bug = client.post("/search", json={"queries": ["crash"]})
    assert bug.status_code == 500 and "traceback" not in bug.text.lower()
    assert client.post("/search", json={"queries": ["a cat"]}).status_code == 200


# ---- the API key -------------------------------------------------------------------------------------------
def test_api_key_required_when_set(fake: FakeRetriever) -> None:
    settings = ServeSettings(api_key="s3cret-key")
    with TestClient(create_app(fake, settings)) as test_client:
        assert test_client.get("/health").status_code == 200  # liveness stays open
        assert test_client.get("/").status_code == 200  # the page asks for the key itself
        for headers in ({}, {"X-API-Key": "wrong"}, {"X-API-Key": "s3cret-ke"}, {"X-API-Key": "s3cret-key "}):
            response = test_client.post("/search", json={"queries": ["a"]}, headers=headers)
            assert response.status_code == 401 and "X-API-Key" in response.json()["detail"]
            assert test_client.get("/info", headers=headers).status_code == 401
            assert test_client.post("/embed", json={"texts": ["a"]}, headers=headers).status_code == 401
        good = {"X-API-Key": "s3cret-key"}
        assert test_client.post("/search", json={"queries": ["a"]}, headers=good).status_code == 200
        info = test_client.get("/info", headers=good)
        assert info.status_code == 200 and "s3cret" not in info.text
        assert info.json()["limits"]["api_key_required"] is True


def test_settings_from_env() -> None:
    env = {"WHITEVEC_SERVE_MAX_K": "50", "WHITEVEC_SERVE_CONCURRENCY": "lock", "WHITEVEC_API_KEY": "s3cret"}
    settings = ServeSettings.from_env(env)
    assert settings.max_k == 50 and settings.concurrency == "lock" and settings.api_key == "s3cret"
    assert "s3cret" not in repr(settings)  # the key never shows in a repr or a log line
    assert ServeSettings.from_env({}).api_key is None
    with pytest.raises(BadInputError, match="WHITEVEC_SERVE_MAX_K"):
        ServeSettings.from_env({"WHITEVEC_SERVE_MAX_K": "lots"})
    with pytest.raises(BadInputError, match="max_queries"):
        ServeSettings(max_queries=0)
    with pytest.raises(BadInputError, match="concurrency"):
        ServeSettings(concurrency="pool")  # type: ignore[arg-type]
    assert ServeSettings.from_env({"WHITEVEC_SERVE_BATCH_REGROUP_FRACTION": "0.25"}).batch_regroup_fraction == 0.25
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(BadInputError, match="batch_regroup_fraction"):
            ServeSettings(batch_regroup_fraction=bad)


# ---- sharing the encoder ------------------------------------------------------------------------------------
def test_batch_worker_merges_waiting_jobs_and_isolates_a_bad_one() -> None:
    import asyncio

    fake = FakeRetriever(delay=0.02)
    worker = RetrieverWorker(fake, mode="batch", max_texts=64)
    queries = [f"dog {i}" for i in range(10)] + ["explode"] + ["a cat"]

    async def run_all() -> list[Any]:
        return await asyncio.gather(*(worker.submit("search", [q], 3) for q in queries), return_exceptions=True)

    try:
        out = asyncio.run(run_all())
    finally:
        worker.close()
    assert isinstance(out[10], BadInputError)
    for query, result in zip(queries[:10] + queries[11:], out[:10] + out[11:], strict=True):
        assert [h.id for h in result[0]] == fake.expected(query, 3)
    assert any(n > 1 for kind, n in fake.calls if kind == "search")  # jobs were merged
    assert fake.max_inside == 1 and len(fake.threads) == 1


def test_batch_worker_does_not_wait_when_no_request_is_on_its_way() -> None:
    import asyncio

    fake = FakeRetriever()
    # A wait of 30 s that must never be paid: nothing else has arrived, so the lone job runs at once.
    worker = RetrieverWorker(fake, mode="batch", max_texts=64, wait_ms=30_000)

    async def one() -> Any:
        return await asyncio.wait_for(worker.submit("search", ["a dog"], 2), timeout=10)

    try:
        started = time.monotonic()
        result = asyncio.run(one())
    finally:
        worker.close()
    assert [h.id for h in result[0]] == fake.expected("a dog", 2)
    assert time.monotonic() - started < 10


def test_batch_worker_waits_for_requests_already_arriving() -> None:
    import asyncio

    fake = FakeRetriever()
    worker = RetrieverWorker(fake, mode="batch", max_texts=64, wait_ms=30_000)
    scopes: list[dict[str, Any]] = [{} for _ in range(3)]
    for scope in scopes:  # three requests in the server, their bodies still being read
        worker.arrived(scope)

    async def run_all() -> list[Any]:
        first = worker.submit("search", ["dog 0"], 2, scopes[0])
        await asyncio.sleep(0.05)  # the worker holds the first job and waits for the two on their way
        rest = [worker.submit("search", [f"dog {i}"], 2, scopes[i]) for i in (1, 2)]
        return list(await asyncio.wait_for(asyncio.gather(first, *rest), timeout=10))

    try:
        out = asyncio.run(run_all())
    finally:
        worker.close()
    assert [[h.id for h in r[0]] for r in out] == [fake.expected(f"dog {i}", 2) for i in range(3)]
    assert fake.calls == [("search", 3)]  # one forward pass for the three
    assert worker.incoming == 0
    worker.departed(scopes[0])  # counted once, however often called
    assert worker.incoming == 0


def _crowd_then(worker: RetrieverWorker, returning: list[float]) -> list[Any]:
    """Three requests in one call (all counted as arriving first), then one request submitted at each delay in
    ``returning`` (seconds after the first call's answers): the previous call's crowd coming back."""
    import asyncio

    scopes: list[dict[str, Any]] = [{} for _ in range(3)]
    for scope in scopes:
        worker.arrived(scope)

    async def run_all() -> list[Any]:
        crowd = [worker.submit("search", [f"dog {i}"], 2, scopes[i]) for i in range(3)]
        out = list(await asyncio.wait_for(asyncio.gather(*crowd), timeout=10))
        again: list[Any] = []
        for i, delay in enumerate(returning):
            await asyncio.sleep(delay - (returning[i - 1] if i else 0.0))
            again.append(worker.submit("search", [f"cat {i}"], 2))
        return out + list(await asyncio.wait_for(asyncio.gather(*again), timeout=10))

    try:
        return asyncio.run(run_all())
    finally:
        worker.close()


def test_batch_worker_regroups_the_previous_calls_crowd() -> None:
    # Each call takes 0.3 s; the crowd of three comes back 0, 50 and 60 ms after its answers: with a regroup
    # wait of up to 0.3 s they share one call instead of splitting into a call of one and a call of two.
    fake = FakeRetriever(delay=0.3)
    worker = RetrieverWorker(fake, mode="batch", max_texts=64, wait_ms=30_000, regroup_fraction=1.0)
    out = _crowd_then(worker, [0.0, 0.05, 0.06])
    assert [[h.id for h in r[0]] for r in out] == [fake.expected(q, 2) for q in ("dog 0", "dog 1", "dog 2")] + [
        fake.expected(f"cat {i}", 2) for i in range(3)
    ]
    assert fake.calls == [("search", 3), ("search", 3)]


def test_batch_worker_regroup_wait_is_bounded() -> None:
    # Only one of the crowd comes back: it waits at most a fraction of the previous call, then runs alone.
    fake = FakeRetriever(delay=0.2)
    worker = RetrieverWorker(fake, mode="batch", max_texts=64, wait_ms=30_000, regroup_fraction=0.5)
    out = _crowd_then(worker, [0.0])
    assert [h.id for h in out[3][0]] == fake.expected("cat 0", 2)
    assert fake.calls == [("search", 3), ("search", 1)]
    assert worker.calls == 2 and worker.texts == 4


def _free_server(app: Any) -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("mode", ["batch", "lock"])
def test_32_concurrent_clients_on_a_real_server(mode: str) -> None:
    fake = FakeRetriever(delay=0.002)
    server, thread, base = _free_server(create_app(fake, ServeSettings(concurrency=mode)))  # type: ignore[arg-type]
    words = ["man", "dog", "car", "hair", "food", "street", "piano", "cat"]
    jobs = [(f"{words[i % 8]} {words[(i * 3) % 8]}", 1 + i % 7) for i in range(192)]

    # One pooled client shared by the threads (thread-safe; creating one per request costs more than a search).
    http = httpx.Client(base_url=base, timeout=30, limits=httpx.Limits(max_connections=32))

    def one(job: tuple[str, int]) -> tuple[int, list[str], list[str]]:
        query, k = job
        if k == 7:  # a bad request among good ones: the neighbours still succeed
            response = http.post("/search", json={"queries": [query], "k": 0})
            return response.status_code, [], []
        response = http.post("/search", json={"queries": [query], "k": k})
        return response.status_code, response.json()["results"][0]["ids"], fake.expected(query, k)

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
            results = list(pool.map(one, jobs))
        for (query, k), (status, got, want) in zip(jobs, results, strict=True):
            if k == 7:
                assert status == 422
            else:
                assert status == 200 and got == want, query
        assert http.get("/health").status_code == 200
    finally:
        http.close()
        server.should_exit = True
        thread.join(10)
    assert fake.max_inside == 1 and len(fake.threads) == 1  # one thread owned the retriever throughout
    if mode == "lock":
        assert all(n == 1 for _, n in fake.calls)


# ---- the command --------------------------------------------------------------------------------------------
def test_serve_missing_index_exits_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from whitevec.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["serve", str(tmp_path / "no-such-index")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no-such-index" in err and err.startswith("whitevec: error:")


def test_serve_rejects_bad_workers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from whitevec.cli import main

    with pytest.raises(SystemExit):
        main(["serve", str(tmp_path), "--workers", "0"])
    assert re.search(r"workers must be at least 1", capsys.readouterr().err)


# ---- a real tiny index (random BERT) ------------------------------------------------------------------------
REAL_DOCS = [
    "a man is playing a guitar",
    "a woman is playing the piano",
    "the dog is running in the street",
    "a cat is eating food",
    "a girl is styling her hair",
    "the boy is brushing his hair",
    "a red car is on the street",
    "a big blue car",
    "the small dog and the big cat",
    "a man is eating food in the street",
    "the woman is running",
    "a boy is playing the guitar",
    "a girl and a dog",
    "the red cat is small",
    "his car is blue",
    "her piano is big",
    "a man and a woman are eating",
    "the girl is running on the street",
    "a dog is eating food",
    "the boy is playing the piano",
]


@pytest.fixture(scope="module")
def real_index(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    index = pytest.importorskip("whitevec.index", reason="whitevec.index is not available")
    from whitevec.encoders.transformer import Encoder

    docs = [index.Document(f"d{i}", text, {"n": i}) for i, text in enumerate(REAL_DOCS)]
    out = tmp_path_factory.mktemp("serve-index") / "idx"
    encoder = Encoder(str(tiny_bert_dir), "first-last-avg", cache=False, device="cpu")
    index.Retriever.build(docs, out, encoder=encoder, transform="whitening-4", show_progress=False)
    return out


def test_real_index_served_matches_the_library(real_index: Path) -> None:
    from whitevec.service.run import load_retriever

    retriever = load_retriever(real_index)
    queries = ["a man playing guitar", "the dog in the street"]
    direct = retriever.search(queries, k=5)
    with TestClient(create_app(retriever, ServeSettings())) as test_client:
        info = test_client.get("/info").json()
        assert info["count"] == len(REAL_DOCS) and info["manifest"]["dim"] == 4
        assert "/" not in info["manifest"]["model"]  # the model folder's path is not shown
        assert str(real_index) not in test_client.get("/info").text
        body = test_client.post("/search", json={"queries": queries, "k": 5}).json()
        for result, hits in zip(body["results"], direct, strict=True):
            assert result["ids"] == [h.id for h in hits]
            np.testing.assert_allclose(result["scores"], [h.score for h in hits], rtol=1e-5, atol=1e-6)
            assert result["texts"] == [REAL_DOCS[int(h.id[1:])] for h in hits]
        vectors = test_client.post("/embed", json={"texts": queries}).json()
        np.testing.assert_allclose(np.array(vectors["vectors"]), retriever.embed(queries), rtol=1e-5, atol=1e-6)
        assert vectors["dim"] == 4


def test_the_index_is_loaded_in_a_thread_of_its_own(real_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's OpenMP pools are per thread: the model must not be loaded (nor run) in the caller's thread, or
    the encoder thread's pool is throttled beside it (see ``in_passing_thread``)."""
    from whitevec import index
    from whitevec.service.run import in_passing_thread, load_retriever

    loaded_in: list[int] = []
    real_load = index.Retriever.load

    def recording_load(*args: Any, **kwargs: Any) -> Any:
        loaded_in.append(threading.get_ident())
        return real_load(*args, **kwargs)

    monkeypatch.setattr(index.Retriever, "load", recording_load)
    retriever = load_retriever(real_index)
    assert len(retriever.search(["a man playing guitar"], k=2)[0]) == 2
    assert loaded_in and threading.get_ident() not in loaded_in

    def broken() -> None:
        raise BadInputError("checksum mismatch in index.faiss")

    with pytest.raises(BadInputError, match="checksum mismatch"):
        in_passing_thread(broken)
    assert in_passing_thread(lambda: 7) == 7


def test_served_app_is_out_of_the_garbage_collectors_sight(
    real_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways a server starts (one process; each worker via app_from_env) freeze the loaded heap, so a full
    garbage collection walks only what requests created, not the model (see ``freeze_loaded_heap``)."""
    import gc

    from whitevec.service import run

    tracked_when_served: list[int] = []

    def record(app: Any, *args: Any, **kwargs: Any) -> None:
        tracked_when_served.append(len(gc.get_objects()))  # what a full collection would walk now

    monkeypatch.setattr(run, "run_app", record)
    monkeypatch.setenv(run.INDEX_ENV, str(real_index))
    gc.unfreeze()
    try:
        run.serve(real_index, port=0)  # no fixed port: 8000 may be taken here
        frozen = gc.get_freeze_count()
        # torch, transformers and the app alone are well over 100,000 objects; only a handful are left to walk
        assert frozen > 100_000 and len(tracked_when_served) == 1 and tracked_when_served[0] < 1_000
        gc.unfreeze()
        assert run.app_from_env() is not None
        assert gc.get_freeze_count() > 100_000 and len(gc.get_objects()) < 1_000
    finally:
        gc.unfreeze()  # the rest of the suite collects as usual


def test_served_tokenizer_runs_on_the_encoder_thread_unless_told(
    real_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``whitevec serve`` turns the tokenizer's thread pool off (see ``serial_tokenizer``); a value the user
    set is kept."""
    import gc
    import os

    from whitevec.service import run

    monkeypatch.setattr(run, "run_app", lambda *args, **kwargs: None)
    try:
        for given, expected in ((None, "false"), ("true", "true")):
            if given is None:
                monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
            else:
                monkeypatch.setenv("TOKENIZERS_PARALLELISM", given)
            run.serve(real_index, port=0)  # no fixed port: 8000 may be taken here
            assert os.environ["TOKENIZERS_PARALLELISM"] == expected
    finally:
        gc.unfreeze()


def test_real_index_32_concurrent_clients(real_index: Path) -> None:
    from whitevec.service.run import load_retriever

    retriever = load_retriever(real_index)
    subjects, verbs = ("a man", "the dog", "a girl", "her car"), ("eating", "running", "hair")
    queries = [f"{a} {b}" for a in subjects for b in verbs]
    expected = {q: retriever.search([q], k=4)[0] for q in queries}
    server, thread, base = _free_server(create_app(retriever, ServeSettings(concurrency="batch")))
    http = httpx.Client(base_url=base, timeout=60, limits=httpx.Limits(max_connections=32))
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
            bodies = list(pool.map(lambda q: http.post("/search", json={"queries": [q], "k": 4}), queries * 8))
    finally:
        http.close()
        server.should_exit = True
        thread.join(10)
    for query, response in zip(queries * 8, bodies, strict=True):
        assert response.status_code == 200
        got = response.json()["results"][0]
        want = expected[query]
        # Batched encoding may move scores by float rounding only.
        np.testing.assert_allclose(got["scores"], [h.score for h in want], atol=1e-4)
        clear = [h.id for h in want if h.score > want[-1].score + 1e-3]  # ranks not decided by a near-tie
        assert set(clear) <= set(got["ids"])


def test_serve_corrupt_index_exits_with_one_line(
    real_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from whitevec.cli import main

    broken = tmp_path / "broken"
    shutil.copytree(real_index, broken)
    docs = broken / "docs.sqlite"
    docs.write_bytes(docs.read_bytes()[:-7] + b"garbage")
    not_an_index = tmp_path / "empty"
    not_an_index.mkdir()
    for folder, needle in ((broken, "docs.sqlite"), (not_an_index, "manifest")):
        with pytest.raises(SystemExit) as exit_info:
            main(["serve", str(folder)])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err


def _log_lines_until(log: Path, needle: str, count: int, proc: Any, timeout_s: float) -> list[str]:
    """The lines of ``log`` holding ``needle``, once there are ``count`` of them; fails when ``proc`` ends or
    ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while True:
        lines = [line for line in log.read_text(errors="replace").splitlines() if needle in line]
        if len(lines) >= count:
            return lines
        assert proc.poll() is None and time.monotonic() < deadline, f"{count} x {needle!r} not in the log:\n" + (
            log.read_text(errors="replace")
        )
        time.sleep(0.2)


@pytest.fixture(scope="module")
def static_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_static_index(tmp_path_factory.mktemp("static-index"))


@pytest.mark.slow  # three Python processes: about 8 s on 2 cores
def test_serve_command_with_two_workers(static_index: Path, tmp_path: Path) -> None:
    # A static-table index: no process imports torch, and what is tested (two worker processes behind one port,
    # the API key in force, a search answered) does not depend on the encoder.
    import os
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "WHITEVEC_API_KEY": "k-123"}
    command = [sys.executable, "-c", "from whitevec.cli import main; main()", "serve", str(static_index)]
    log = tmp_path / "serve.log"  # a file, not a pipe: an undrained pipe would block the server's logging
    proc = subprocess.Popen(
        [*command, "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base, "server with 2 workers", 240, proc, log, poll_s=0.3)
        # Both workers up before the SIGTERM below: uvicorn takes a worker's SIGTERM while its app still loads
        # but acts on it only once loaded, so terminating after the first worker answered waited on the
        # second's load; on a busy machine over the 30 s below, as uvicorn's 5 s health check also kills and
        # restarts a worker slow to start.
        _log_lines_until(log, "Application startup complete", 2, proc, 240)
        assert httpx.post(f"{base}/search", json={"queries": ["a dog"]}).status_code == 401
        found = httpx.post(f"{base}/search", json={"queries": ["a dog"], "k": 3}, headers={"X-API-Key": "k-123"})
        assert found.status_code == 200 and len(found.json()["results"][0]["ids"]) == 3
    finally:
        proc.terminate()
        proc.wait(30)


def test_serve_refuses_several_workers_on_milvus_lite(
    real_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import shutil

    from whitevec.cli import main
    from whitevec.index.folder.manifest import write_manifest

    lite = tmp_path / "lite"
    shutil.copytree(real_index, lite)
    manifest = json.loads((lite / "manifest.json").read_text())
    # A Milvus Lite index as the build writes it: no backend_uri, the data in lite/milvus.db.
    write_manifest(lite, {**manifest, "backend": "milvus", "backend_uri": None}, list(manifest["files"]))

    def no_server(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("uvicorn was started")

    monkeypatch.setattr(uvicorn, "run", no_server)
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", str(lite), "--workers", "2"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Milvus Lite" in err and "one process only" in err, err
