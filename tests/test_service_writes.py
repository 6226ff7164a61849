"""The HTTP write routes (`whitevec serve --writable`): POST /documents (add, upsert, skip), /documents/delete and
/compact on a real segmented index (HashEncoder: a document's own text finds it first), the refusals (405
read-only, 401 key, 409 held id or another writer, 422 bad body), /info's version, and the order of writes
among searches (a search answered while a write runs)."""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
from fastapi.testclient import TestClient

from tests.index_helpers import HashEncoder, sentences
from tests.test_cli import run_cli
from whitevec.index import Document, Retriever
from whitevec.service.app import create_app
from whitevec.service.middleware import READ_ONLY_DETAIL
from whitevec.service.settings import ServeSettings
from whitevec.service.worker import RetrieverWorker

TEXTS = sentences(12, seed=3)
NEW_TEXT = "a text that no document of the build holds"
KEY = "write-key"


def _build(folder: Path) -> Retriever:
    docs = [Document(f"d{i}", text, {"n": i}) for i, text in enumerate(TEXTS)]
    return Retriever.build(docs, folder, encoder=HashEncoder(), transform="none")


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Retriever]:
    with _build(tmp_path / "index") as retriever:
        yield retriever


def _client(retriever: Retriever, **settings: Any) -> TestClient:
    return TestClient(create_app(retriever, ServeSettings(**settings)))  # type: ignore[arg-type]


@pytest.fixture
def client(index: Retriever) -> Iterator[TestClient]:
    with _client(index, writable=True) as client:
        yield client


def _top(client: TestClient, text: str) -> dict[str, Any]:
    answer = client.post("/search", json={"queries": [text], "k": 3})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["results"][0]
    return result


def _add(client: TestClient, docs: list[dict[str, Any]], **body: Any) -> Any:
    return client.post("/documents", json={"documents": docs, **body})


def test_an_added_document_is_found_and_durable(client: TestClient, index: Retriever) -> None:
    answer = _add(client, [{"id": "new-1", "text": NEW_TEXT, "metadata": {"n": 99}}])
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"added": 1, "replaced": 0, "skipped": 0, "count": 13, "segments": 2, "version": 1}
    top = _top(client, NEW_TEXT)
    assert top["ids"][0] == "new-1" and top["texts"][0] == NEW_TEXT and top["metadata"][0] == {"n": 99}
    with Retriever.load(index.path, encoder=HashEncoder()) as fresh:  # acknowledged: on disk, for a new reader
        assert fresh.count == 13 and fresh.search([NEW_TEXT], k=1)[0][0].id == "new-1"


def test_upsert_replaces_and_skip_keeps(client: TestClient) -> None:
    answer = _add(
        client, [{"id": "d2", "text": NEW_TEXT}, {"id": "new-2", "text": TEXTS[0] + " x"}], on_existing="replace"
    )
    assert answer.status_code == 200, answer.text
    assert (answer.json()["added"], answer.json()["replaced"], answer.json()["count"]) == (1, 1, 13)
    assert _top(client, NEW_TEXT)["ids"][0] == "d2"
    assert "d2" not in _top(client, TEXTS[2])["ids"]  # its old text no longer finds it first
    answer = _add(
        client, [{"id": "d3", "text": "kept out"}, {"id": "new-3", "text": "a third"}], on_existing="skip"
    )
    assert (answer.json()["added"], answer.json()["skipped"], answer.json()["count"]) == (1, 1, 14)
    assert _top(client, TEXTS[3])["ids"][0] == "d3" and _top(client, TEXTS[3])["texts"][0] == TEXTS[3]


def test_a_held_id_is_409_naming_it_and_nothing_is_written(client: TestClient) -> None:
    answer = _add(client, [{"id": "brand-new", "text": NEW_TEXT}, {"id": "d5", "text": "again"}])
    assert answer.status_code == 409
    assert "'d5'" in answer.json()["detail"] and "nothing was written" in answer.json()["detail"]
    assert (
        "on_existing 'replace' to put these documents in place of those (their old text is dropped)" in answer.text
    )
    assert "brand-new" not in _top(client, NEW_TEXT)["ids"]
    assert client.get("/info").json()["index"] == {"count": 12, "deleted": 0, "segments": 1, "version": 0}


def test_delete_removes_and_reports_the_missing(client: TestClient) -> None:
    ghosts = [f"ghost-{i}" for i in range(12)]
    answer = client.post("/documents/delete", json={"ids": ["d1", *ghosts, "d1"]})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["deleted"], body["missing_count"], body["missing"]) == (1, 12, ghosts[:10])
    assert (body["count"], body["version"]) == (11, 1)
    assert "d1" not in _top(client, TEXTS[1])["ids"]


def test_a_delete_takes_ids_exactly_as_python_and_the_cli_do(client: TestClient) -> None:
    answer = client.post("/documents/delete", json={"ids": [" d3 ", " \t ", "d3"]})
    assert answer.status_code == 200, answer.text
    assert (answer.json()["deleted"], answer.json()["missing"]) == (1, [" d3 ", " \t "])


def test_info_shows_the_version_and_compact_merges(client: TestClient) -> None:
    _add(client, [{"id": "new-1", "text": NEW_TEXT}])
    client.post("/documents/delete", json={"ids": ["d0"]})
    info = client.get("/info").json()
    assert info["index"] == {"count": 12, "deleted": 1, "segments": 2, "version": 2} and info["count"] == 12
    assert info["manifest"]["count"] == 12 and info["limits"]["writable"] is True
    answer = client.post("/compact")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"merged": 2, "count": 12, "segments": 1, "version": 3}
    assert client.get("/info").json()["index"] == {"count": 12, "deleted": 0, "segments": 1, "version": 3}
    assert _top(client, NEW_TEXT)["ids"][0] == "new-1"
    assert client.post("/compact").json()["merged"] == 0  # one segment, nothing deleted: nothing to do


@pytest.mark.parametrize("path", ["/documents", "/documents/delete", "/compact"])
def test_a_read_only_server_refuses_every_write_with_405(index: Retriever, path: str) -> None:
    with _client(index) as client:
        for body in ({"documents": [{"id": "x", "text": "y"}]}, {"ids": ["d0"]}, None):
            answer = client.post(path, json=body) if body else client.post(path, content=b"{not json")
            assert answer.status_code == 405 and answer.json() == {"detail": READ_ONLY_DETAIL}
        assert client.get("/info").json()["index"]["version"] == 0
    assert index.count == 12


@pytest.mark.parametrize("headers", [{}, {"X-API-Key": "wrong"}])
def test_writes_need_the_key(index: Retriever, headers: dict[str, str]) -> None:
    with _client(index, writable=True, api_key=KEY) as client:
        answer = client.post("/documents", json={"documents": [{"id": "x", "text": NEW_TEXT}]}, headers=headers)
        assert answer.status_code == 401
        assert client.post("/documents/delete", json={"ids": ["d0"]}, headers=headers).status_code == 401
        assert client.post("/compact", headers=headers).status_code == 401
        keyed = {"X-API-Key": KEY}
        answer = client.post("/documents", json={"documents": [{"id": "x", "text": NEW_TEXT}]}, headers=keyed)
        assert answer.status_code == 200 and answer.json()["added"] == 1


@pytest.mark.parametrize(
    ("path", "body", "says"),
    [
        ("/documents", {"documents": []}, "documents is empty"),
        ("/documents", {"documents": [{"id": "a"}]}, "text"),
        (
            "/documents",
            {"documents": [{"id": "a", "text": "  "}]},
            "documents[0].text is empty or only whitespace",
        ),
        ("/documents", {"documents": [{"id": "", "text": "t"}]}, "id"),
        ("/documents", {"documents": [{"id": "  sp  ", "text": "t"}]}, "'  sp  '; an id is a non-empty string"),
        ("/documents", {"documents": [{"id": "ok", "text": "t"}, {"id": "x\n", "text": "t"}]}, "no white space"),
        ("/documents", {"documents": [{"id": "a", "text": "t", "lang": "en"}]}, "lang"),
        ("/documents", {"documents": [{"id": "a", "text": "t"}], "on_existing": "merge"}, "on_existing"),
        ("/documents", {"documents": [{"id": "a", "text": "t"}, {"id": "a", "text": "u"}]}, "'a' is given twice"),
        ("/documents", {"documents": [{"id": str(i), "text": "t"} for i in range(4)]}, "the limit max_texts is 3"),
        (
            "/documents",
            {"documents": [{"id": "a" * 257, "text": "t"}]},
            "257 characters, the limit for an id is 256",
        ),
        ("/documents/delete", {"ids": []}, "ids"),
        ("/documents/delete", {"ids": "d0"}, "ids"),
        ("/documents/delete", {"ids": ["d0", "d1", "d2", "d3"]}, "too many ids: 4 given, the limit max_ids is 3"),
    ],
)
def test_bad_bodies_are_one_line_422_and_write_nothing(
    index: Retriever, path: str, body: dict[str, Any], says: str
) -> None:
    with _client(index, writable=True, max_texts=3, max_ids=3) as client:
        answer = client.post(path, json=body)
        assert answer.status_code == 422, answer.text
        detail = answer.json()["detail"]
        assert isinstance(detail, str) and "\n" not in detail and says in detail, detail
        assert client.get("/info").json()["index"]["version"] == 0


def test_an_unpaired_surrogate_is_one_line_422(client: TestClient) -> None:
    body = b'{"documents": [{"id": "a", "text": "x \\ud800"}]}'
    answer = client.post("/documents", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422 and "documents[0].text holds an unpaired surrogate" in answer.json()["detail"]


def test_another_writers_version_is_409_without_the_path(
    client: TestClient, index: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other write lands after the server's look at the newest version, before its own write commits.
    monkeypatch.setattr(RetrieverWorker, "_move_to_newest", lambda self: None)
    with Retriever.load(index.path, encoder=HashEncoder()) as other:
        other.delete(["d0"])
    answer = _add(client, [{"id": "late", "text": NEW_TEXT}])
    assert answer.status_code == 409 and "another process during this write" in answer.json()["detail"]
    assert str(index.path.parent) not in answer.text


def test_a_writable_server_without_a_key_warns_at_start(
    index: Retriever, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="whitevec.service.writes"):
        _client(index, writable=True, api_key=KEY).close()
        assert not caplog.records
        _client(index, writable=True).close()
    assert len(caplog.records) == 1 and "anyone who can reach this server" in caplog.records[0].getMessage()


def test_writable_settings_from_env_and_one_worker_only(tmp_path: Path) -> None:
    from whitevec.errors import BadInputError
    from whitevec.service.run import serve

    assert ServeSettings.from_env({"WHITEVEC_SERVE_WRITABLE": "yes"}).writable is True
    assert ServeSettings.from_env({"WHITEVEC_SERVE_WRITABLE": "0"}).writable is False
    with pytest.raises(BadInputError, match="WRITABLE='maybe' is not a switch: give true or false"):
        ServeSettings.from_env({"WHITEVEC_SERVE_WRITABLE": "maybe"})
    with pytest.raises(BadInputError, match="--writable needs --workers 1"):
        serve(tmp_path, workers=2, writable=True)


class NoteRetriever:
    """A retriever that answers every search with no hits and notes the thread each ran on."""

    manifest: dict[str, Any] = {}  # noqa: RUF012
    count = 1

    def __init__(self) -> None:
        self.threads: list[str] = []

    def search(self, queries: list[str], k: int = 10) -> list[list[Any]]:
        self.threads.append(threading.current_thread().name)
        return [[] for _ in queries]

    def embed(self, texts: list[str]) -> Any:
        raise AssertionError


def test_a_search_is_answered_while_a_write_runs() -> None:
    """A write held in progress (waiting on an event) does not hold up a search queued meanwhile: the write runs
    on a thread of its own (before, on the one that answers searches, so the search waited for it)."""
    import asyncio

    retriever = NoteRetriever()
    worker = RetrieverWorker(retriever, "batch", max_texts=64)  # type: ignore[arg-type]
    inside, release = threading.Event(), threading.Event()

    def write() -> str:
        inside.set()
        assert release.wait(10)
        return "written"

    async def scenario() -> tuple[Any, str]:
        written = worker.submit_write(write)
        assert await asyncio.to_thread(inside.wait, 10)
        try:
            hits = await asyncio.wait_for(worker.submit("search", ["a"], 1), 5)  # a timeout: the search waited
        finally:
            release.set()
        return hits, await asyncio.wait_for(written, 10)

    try:
        assert asyncio.run(scenario()) == ([[]], "written")
    finally:
        worker.close(5.0)
    assert retriever.threads == ["whitevec-encoder"] and not worker.alive


def test_a_writes_model_work_runs_in_turn_on_the_encoder_thread() -> None:
    """What a write asks of the model (:meth:`RetrieverWorker.call`) runs on the thread that answers searches, in
    its place in their queue; writes run one at a time on the writer thread."""
    import asyncio

    retriever = NoteRetriever()
    worker = RetrieverWorker(retriever, "batch", max_texts=64)  # type: ignore[arg-type]
    running: list[str] = []

    def write(n: int) -> tuple[str, str]:
        running.append(f"start {n}")
        model_thread = worker.call(lambda: threading.current_thread().name)
        running.append(f"end {n}")
        return threading.current_thread().name, model_thread

    async def scenario() -> list[tuple[str, str]]:
        return list(
            await asyncio.wait_for(
                asyncio.gather(*(worker.submit_write(lambda n=n: write(n)) for n in range(3))), 10
            )
        )

    try:
        answers = asyncio.run(scenario())
    finally:
        worker.close(5.0)
    assert answers == [("whitevec-writer", "whitevec-encoder")] * 3
    assert running == ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]


class OrderedRetriever(NoteRetriever):
    """Notes the order of the searches; the first waits until released."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.entered, self.release = threading.Event(), threading.Event()

    def search(self, queries: list[str], k: int = 10) -> list[list[Any]]:
        if not self.calls:
            self.entered.set()
            assert self.release.wait(10)
        self.calls.append("search " + ",".join(queries))
        return [[] for _ in queries]


def test_searches_waiting_go_before_a_writes_next_model_job() -> None:
    """After a job of a write's model work, the searches queued get their share of the encoder before its next
    job (queued first); in its turn, a write's first job goes before the searches queued after it."""
    from whitevec.service.worker import _Job

    retriever = OrderedRetriever()
    worker = RetrieverWorker(retriever, "batch", max_texts=64)  # type: ignore[arg-type]
    queued: list[_Job] = []

    def put(job: _Job) -> None:
        queued.append(job)
        worker._queue.put(job)

    def first_job() -> None:
        retriever.calls.append("write job 1")
        put(_Job("call", [], 0, call=lambda: retriever.calls.append("write job 2")))  # owes the searches first
        put(_Job("search", ["d"], 1))

    try:
        put(_Job("search", ["a"], 1))
        assert retriever.entered.wait(10)  # the worker waits inside it: the rest queue behind
        put(_Job("call", [], 0, call=first_job))
        put(_Job("search", ["b"], 1))
        retriever.release.set()
        for job in queued[:3]:  # the first write job's done: it queued two more
            job.future.result(timeout=10)
        for job in queued:
            job.future.result(timeout=10)
    finally:
        worker.close(5.0)
    assert retriever.calls == ["search a", "write job 1", "search b,d", "write job 2"]


def test_an_adds_texts_go_to_the_encoder_in_jobs_of_a_bounded_size() -> None:
    from whitevec.service.worker import _jobs_of

    texts = ["a" * 600, "b" * 300, "c" * 100, "d" * 2000, "", "e"]
    assert _jobs_of(texts, 1000) == [texts[:3], texts[3:4], texts[4:]]
    assert _jobs_of([], 1000) == []


class ThreadNotingEncoder(HashEncoder):
    """A HashEncoder that notes the thread each encode ran on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def encode(self, texts: Any, batch_size: int | None = None, show_progress: bool | None = None) -> Any:
        self.threads.append(threading.current_thread().name)
        return super().encode(texts, batch_size, show_progress)


def test_searches_are_answered_while_an_add_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An add held while it writes its version (the library's commit waiting on an event): a search meanwhile is
    answered from the version before it; once the add is answered, a search sees it. The add's encoding ran on
    the encoder thread, as every search's."""
    from concurrent.futures import ThreadPoolExecutor

    import whitevec.index.writes as index_writes

    inside, release = threading.Event(), threading.Event()
    real_commit = index_writes.commit

    def held_commit(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        assert release.wait(10)
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(index_writes, "commit", held_commit)
    encoder = ThreadNotingEncoder()
    docs = [Document(f"d{i}", text) for i, text in enumerate(TEXTS)]
    with (
        Retriever.build(docs, tmp_path / "index", encoder=encoder, transform="none") as index,
        _client(index, writable=True) as client,
        ThreadPoolExecutor(2) as pool,
    ):
        encoder.threads.clear()
        adding = pool.submit(_add, client, [{"id": "new-1", "text": NEW_TEXT}])
        assert inside.wait(10)
        try:
            during = pool.submit(_top, client, NEW_TEXT).result(timeout=5)  # a timeout: the search waited
        finally:
            release.set()
        assert adding.result(timeout=10).json()["added"] == 1
        assert "new-1" not in during["ids"]
        assert _top(client, NEW_TEXT)["ids"][0] == "new-1"
    assert set(encoder.threads) == {"whitevec-encoder"} and len(encoder.threads) == 3


def test_the_how_to_example_answers_as_shown(tmp_path: Path) -> None:
    """docs/how-to/serve.md's "Writing to a served index": four documents, then its three requests."""
    docs = [Document(str(i), text) for i, text in enumerate(TEXTS[:4], 1)]
    with (
        Retriever.build(docs, tmp_path / "my-index", encoder=HashEncoder(), transform="none") as index,
        _client(index, writable=True, api_key=KEY) as client,
    ):
        keyed = {"X-API-Key": KEY}
        new = {"id": "5", "text": "shock waves in a nozzle", "metadata": {"year": 1962}}
        answer = client.post("/documents", json={"documents": [new], "on_existing": "replace"}, headers=keyed)
        assert answer.text == '{"count":5,"segments":2,"version":1,"added":1,"replaced":0,"skipped":0}'
        answer = client.post("/documents/delete", json={"ids": ["2", "99"]}, headers=keyed)
        assert answer.text == '{"count":4,"segments":2,"version":2,"deleted":1,"missing_count":1,"missing":["99"]}'
        answer = client.post("/compact", headers=keyed)
        assert answer.text == '{"count":4,"segments":1,"version":3,"merged":2}'


class RefusingRetriever(NoteRetriever):
    """A retriever whose writes the library refuses with a line naming the index's folder."""

    path = Path("/srv/private/my-index")

    def delete(self, ids: list[str]) -> Any:
        from whitevec.errors import BadInputError

        raise BadInputError(f"deletes are not supported on the index at {self.path}; rebuild it")


def test_a_refused_write_is_422_without_the_servers_path() -> None:
    with _client(RefusingRetriever(), writable=True, api_key=KEY) as client:  # type: ignore[arg-type]
        answer = client.post("/documents/delete", json={"ids": ["d0"]}, headers={"X-API-Key": KEY})
    assert answer.status_code == 422
    assert answer.json()["detail"] == "deletes are not supported on the index at my-index; rebuild it"


def test_a_document_the_model_cannot_read_is_422_before_any_write(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from whitevec.encoders.transformer import Encoder

    encoder = Encoder(str(tiny_bert_dir), "first-last-avg", cache=False, device="cpu")
    docs = [Document(f"d{i}", text) for i, text in enumerate(TEXTS[:6])]
    with (
        Retriever.build(docs, tmp_path / "bert-index", encoder=encoder, transform="none") as index,
        _client(index, writable=True) as client,
    ):
        answer = _add(client, [{"id": "ok", "text": TEXTS[7]}, {"id": "emoji", "text": "\U0001f600\U0001f680"}])
        assert answer.status_code == 422 and "no token the model knows ('emoji')" in answer.json()["detail"]
        assert client.get("/info").json()["index"] == {"count": 6, "deleted": 0, "segments": 1, "version": 0}
        assert _add(client, [{"id": "ok", "text": TEXTS[7]}]).json()["added"] == 1


def test_a_server_follows_what_another_writer_adds(
    index: Retriever, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import whitevec.service.worker as worker

    monkeypatch.setattr(worker, "FOLLOW_S", 0.0)  # look before every batch of searches
    with _client(index) as client:  # read-only: the writes come from elsewhere
        assert _top(client, NEW_TEXT)["ids"][0] != "new"
        with Retriever.load(tmp_path / "index", encoder=HashEncoder()) as other:  # type: ignore[arg-type]
            other.add([Document("new", NEW_TEXT)])
            other.delete(["d0"])
        assert _top(client, NEW_TEXT)["ids"][0] == "new"
        assert "d0" not in _top(client, TEXTS[0])["ids"]
        assert client.get("/info").json()["index"]["count"] == len(TEXTS)


def test_a_search_after_another_writer_adds_is_clamped_to_the_index_it_searches(
    index: Retriever, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """k is clamped to the count of the version searched, not of the one served when the request came: the first
    search after another writer's add found only the old count of documents (14 of 23 in the probe)."""
    import whitevec.service.worker as worker

    monkeypatch.setattr(worker, "FOLLOW_S", 0.0)
    with _client(index) as client:
        with Retriever.load(tmp_path / "index", encoder=HashEncoder()) as other:  # type: ignore[arg-type]
            other.add([Document(f"new{i}", NEW_TEXT, {"n": 100 + i}) for i in range(3)])
        answer = client.post("/search", json={"queries": [NEW_TEXT], "k": 100, "filter": "n >= 0"}).json()
    assert answer["k"] == len(TEXTS) + 3
    expected = [f"d{i}" for i in range(len(TEXTS))] + ["new0", "new1", "new2"]
    assert sorted(answer["results"][0]["ids"]) == sorted(expected)


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        ("/documents", b'{"documents": [{"id": "q1", "id": "q2", "text": "a text"}]}', "id"),
        ("/documents", b'{"documents": [{"id": "q1", "text": "a text", "metadata": {"n": 1, "n": "x"}}]}', "n"),
        ("/search", b'{"queries": ["a text"], "k": 1, "k": 5}', "k"),
    ],
)
def test_a_key_given_twice_in_a_body_is_422_as_in_a_jsonl_corpus(
    client: TestClient, path: str, body: bytes, key: str
) -> None:
    """json keeps the last of a repeated key silently (the probe's add of ``"id": "q1", "id": "q2"`` added q2,
    while ``index add`` of the same line is refused): one rule, the CLI's line, nothing written."""
    answer = client.post(path, content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422, answer.text
    twice = f"key {key!r} appears twice in one object; keep one of them"
    assert answer.json()["detail"] == f"invalid request: body: body is not valid JSON ({twice})"
    assert client.get("/info").json()["index"]["version"] == 0


def test_a_write_after_another_writers_write_goes_on_from_its_version(index: Retriever, tmp_path: Path) -> None:
    """A server's writes follow another writer's version as its searches do: after ``index add`` from the command
    line, an HTTP delete of the id it added answered 200 with the id "missing" (read from the version served),
    and an HTTP add answered 409 "restart the server"; no search came between, so the server never looked."""
    with _client(index, writable=True) as client:
        with Retriever.load(tmp_path / "index", encoder=HashEncoder()) as other:  # type: ignore[arg-type]
            other.add([Document("outside", NEW_TEXT, {"n": 100})])
        deleted = client.post("/documents/delete", json={"ids": ["outside"]})
        assert deleted.status_code == 200 and deleted.json()["deleted"] == 1, deleted.text
        added = _add(client, [{"id": "inside", "text": NEW_TEXT}])
        assert added.status_code == 200, added.text
        assert added.json()["count"] == len(TEXTS) + 1
    with Retriever.load(tmp_path / "index", encoder=HashEncoder()) as reader:  # type: ignore[arg-type]
        (hits,) = reader.search([NEW_TEXT], k=reader.count)
        assert {hit.id for hit in hits} == {f"d{i}" for i in range(len(TEXTS))} | {"inside"}


def test_a_full_disk_is_507_with_the_line_the_cli_prints(
    client: TestClient, index: Retriever, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert client.post("/documents/delete", json={"ids": ["d1"]}).status_code == 200  # a compaction's work

    def full(folder: Path, *_: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder / "manifest.json"))

    monkeypatch.setattr("whitevec.index.segments.writing.write_manifest", full)
    answer = client.post("/compact")
    code, _, err = run_cli(["index", "compact", str(index.path)], capsys)
    assert code == 3 and err.startswith("whitevec: error: ") and len(err.splitlines()) == 1, err
    line = err.removeprefix("whitevec: error: ").strip()
    assert line.endswith("manifest.json: No space left on device"), line
    # The same line, the folder holding the index left out (a client learns no more of the server's files).
    assert answer.status_code == 507 and answer.json() == {"detail": line.replace(f"{index.path.parent}/", "")}
    assert _add(client, [{"id": "new-1", "text": NEW_TEXT}]).status_code == 507
    assert client.get("/info").json()["index"]["version"] == 1  # nothing written, and the server goes on


def test_a_writes_model_work_queued_behind_the_stop_is_refused_not_waited_for() -> None:
    """close() stops the worker with a signal on its queue; a write's model job queued behind it is never run.
    Its caller (the writer thread) must hear that the worker stopped rather than wait for ever."""
    from whitevec.service.worker import WorkerStoppedError

    worker = RetrieverWorker(NoteRetriever(), "batch", max_texts=64)  # type: ignore[arg-type]
    inside, release = threading.Event(), threading.Event()
    first = threading.Thread(target=worker.call, args=(lambda: (inside.set(), release.wait(10)),))
    first.start()
    assert inside.wait(10)  # the worker runs the first job; the stop and a second job queue behind it
    worker._queue.put(None)
    outcome: list[object] = []

    def second() -> None:
        try:
            outcome.append(worker.call(lambda: "ran"))
        except WorkerStoppedError as exc:
            outcome.append(exc)

    caller = threading.Thread(target=second, daemon=True)
    caller.start()
    release.set()
    first.join(10)
    caller.join(10)
    assert not caller.is_alive(), "the write's model job waited for a worker that had stopped"
    assert len(outcome) == 1 and isinstance(outcome[0], WorkerStoppedError)
    worker.close(5.0)


def test_a_fault_through_a_symlinked_index_names_no_server_path(tmp_path: Path) -> None:
    """A write through a symbolic link goes to the folder it names; a fault there names that folder's path,
    which an answer cuts as it cuts the given one's."""
    from whitevec.service.error_answers import public_text

    real = tmp_path / "data" / "real"
    real.mkdir(parents=True)
    (real / "ix").mkdir()
    link = tmp_path / "srv" / "ix"
    link.parent.mkdir()
    link.symlink_to(real / "ix")
    message = f"{real / 'ix' / 's000002.index.faiss'}: No space left on device"
    assert public_text(message, link) == "ix/s000002.index.faiss: No space left on device"
    assert public_text(f"{link}/docs.sqlite: gone", link) == "ix/docs.sqlite: gone"
