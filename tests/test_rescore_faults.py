"""A rescoring file damaged under a loaded index (issue 37, item 4): a search answers with IndexDamagedError naming
the file (never SIGBUS), the CLI exits 3, a server answers that request 503, says so on /health and keeps
serving; a file deleted by path is no damage (the pinned version is still read); and rescoring orders the
candidates exactly as the stored records say, for every form and metric.

The damage cases run in a child process: with the file memory-mapped, as before, a read past its new end ended
the process with SIGBUS, which must fail the test, not kill pytest.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import HashEncoder
from tests.test_encodings import _clustered
from whitevec.errors import IndexDamagedError
from whitevec.index import Document, FaissStore, Retriever
from whitevec.index.encodings import rescore
from whitevec.index.encodings.rescore import RESCORE_FILE, RescoreVectors, decode_rows
from whitevec.index.faiss.store import one_faiss_thread
from whitevec.transforms import WhitevecWarning

REPO = Path(__file__).resolve().parents[1]
DIM = 24
DOCS = [Document(f"d{i}", f"text number {i}") for i in range(600)]
QUERIES = [f"query {i}" for i in range(12)]
# The child's preamble: the repository on the path, a loaded index, and how each damage is done to its file.
PREAMBLE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from tests.index_helpers import HashEncoder
from whitevec.index import Retriever
from whitevec.index.encodings.rescore import RESCORE_FILE

folder = Path(sys.argv[2])
path = folder / RESCORE_FILE

def damage(how):
    if how == "emptied":
        os.truncate(path, 0)
    elif how == "header-only":
        os.truncate(path, 128)
    elif how == "shrunk":
        os.truncate(path, path.stat().st_size - 100 * 48)
    elif how == "deleted":
        path.unlink()
"""


def _build(folder: Path, encoding: str = "binary-rr+rescore") -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WhitevecWarning)
        Retriever.build(
            DOCS,
            folder,
            encoder=HashEncoder(dim=DIM),  # type: ignore[arg-type]
            transform="none",
            index_params={"encoding": encoding},
        ).close()


def _child(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", PREAMBLE + textwrap.dedent(script), str(REPO), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


# ---- a loaded Retriever ----------------------------------------------------------------------------------
SEARCH_AFTER_DAMAGE = """
retriever = Retriever.load(folder, encoder=HashEncoder(dim=24))
before = [[h.id for h in row] for row in retriever.search(QUERIES, 5)]
damage(sys.argv[3])
try:
    after = [[h.id for h in row] for row in retriever.search(QUERIES, 5)]
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
else:
    print(json.dumps({"same": after == before}))
print(json.dumps({"embeds": retriever.embed(["still here"]).shape[0] == 1}))
"""


@pytest.mark.slow  # a child process that imports faiss
@pytest.mark.parametrize(
    ("encoding", "how"),
    [
        ("binary-rr+rescore", "emptied"),
        ("binary-rr+rescore", "header-only"),
        ("binary-rr+rescore", "shrunk"),
        ("sq8+rescore=4:int8", "emptied"),
    ],
)
def test_a_rescoring_file_damaged_under_a_loaded_index_fails_the_search_by_name(
    tmp_path: Path, encoding: str, how: str
) -> None:
    _build(tmp_path / "idx", encoding)
    script = f"QUERIES = {QUERIES!r}\n" + SEARCH_AFTER_DAMAGE
    done = _child(script, str(tmp_path / "idx"), how)
    assert done.returncode == 0, f"the child ended with {done.returncode} (-7: SIGBUS)\n{done.stderr[-2000:]}"
    result, embedded = (json.loads(line) for line in done.stdout.splitlines())
    assert result["error"] == "IndexDamagedError", result
    assert (
        str(tmp_path / "idx" / RESCORE_FILE) in result["message"]
        and "since the index was loaded" in (result["message"])
    )
    assert embedded == {"embeds": True}  # the process and the retriever live on


@pytest.mark.slow  # a child process that imports faiss
def test_a_rescoring_file_deleted_by_path_is_still_read_from_the_pinned_version(tmp_path: Path) -> None:
    # What a rebuild does to the version a server has loaded (the old folder is removed): no damage.
    _build(tmp_path / "idx")
    script = f"QUERIES = {QUERIES!r}\n" + SEARCH_AFTER_DAMAGE
    done = _child(script, str(tmp_path / "idx"), "deleted")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[0]) == {"same": True}


@pytest.mark.parametrize("reader", ["pread", "seek-and-read"])
def test_a_record_file_refuses_a_short_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    # A read that returns fewer bytes than asked (the file shrank between the size check and the read), with
    # os.pread and with the seek-and-read stand-in of systems without it.
    if reader == "seek-and-read":
        monkeypatch.setattr(rescore, "_pread", rescore._pread_by_seek)
    x = _clustered(50, 8, seed=5)
    records = RescoreVectors("fp16", 8)
    records.add(np.arange(50), x)
    records.save(tmp_path / RESCORE_FILE)
    vectors = RescoreVectors.open_path(tmp_path / RESCORE_FILE, "fp16", 8)
    np.testing.assert_array_equal(vectors.vectors(np.array([0, 7, 8, 49])), x[[0, 7, 8, 49]].astype(np.float16))
    assert vectors.disk is not None
    vectors.disk.check_size = lambda: None  # type: ignore[method-assign]
    os.truncate(tmp_path / RESCORE_FILE, 128 + 40 * 16 + 8)  # record 40 cut in half
    np.testing.assert_array_equal(vectors.vectors(np.array([0, 39])), x[[0, 39]].astype(np.float16))
    with pytest.raises(IndexDamagedError, match=r"rescore\.npy gave 8 of 16 bytes at offset 768 since"):
        vectors.vectors(np.array([39, 40]))
    with pytest.raises(IndexDamagedError, match=r"rescore\.npy gave 648 of 800 bytes at offset 128 since"):
        vectors.save(tmp_path / "next.npy")  # the next version's copy of the saved records


def test_a_record_file_names_what_went_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In this process (reads are preads, no page can fault): each damage's line says which it was, a size that
    changed with both sizes, a descriptor that cannot be examined or read with the system's reason."""
    x = _clustered(50, 8, seed=5)
    records = RescoreVectors("fp16", 8)
    records.add(np.arange(50), x)
    records.save(tmp_path / RESCORE_FILE)
    vectors = RescoreVectors.open_path(tmp_path / RESCORE_FILE, "fp16", 8)
    assert vectors.disk is not None
    fd = vectors.disk.fd

    def unreadable(*args: Any) -> bytes:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(rescore, "_pread", unreadable)
    for reading in (lambda: vectors.vectors(np.array([3])), lambda: vectors.save(tmp_path / "next.npy")):
        with pytest.raises(IndexDamagedError, match=r"rescore\.npy cannot be read \(Input/output error\) since"):
            reading()
    monkeypatch.undo()
    vectors.disk.fd = -1  # a descriptor fstat refuses
    try:
        with pytest.raises(IndexDamagedError, match=r"cannot be examined \(Bad file descriptor\) since the index"):
            vectors.vectors(np.array([3]))
    finally:
        vectors.disk.fd = fd
    os.truncate(tmp_path / RESCORE_FILE, 128 + 40 * 16)
    with pytest.raises(IndexDamagedError) as caught:
        vectors.vectors(np.array([3]))
    assert str(caught.value) == (
        f"{tmp_path / RESCORE_FILE} is 768 bytes, 928 when loaded, since the index was loaded (truncated or "
        "damaged on storage); this index cannot rescore until it is repaired or rebuilt and loaded again"
    )


# ---- the CLI --------------------------------------------------------------------------------------------
CLI_SEARCH = """
from whitevec.cli import main

load = Retriever.load.__func__

def load_then_damage(cls, index_dir, encoder=None, **options):
    retriever = load(cls, index_dir, encoder=HashEncoder(dim=24))
    damage("emptied")
    return retriever

Retriever.load = classmethod(load_then_damage)
main(["search", str(folder), "query 1", "-k", "3"])
"""


@pytest.mark.slow  # a child process that imports faiss
def test_cli_search_on_a_file_damaged_under_it_exits_1_with_one_line(tmp_path: Path) -> None:
    _build(tmp_path / "idx")
    done = _child(CLI_SEARCH, str(tmp_path / "idx"))
    assert done.returncode == 3, f"{done.returncode} (-7: SIGBUS)\n{done.stderr[-2000:]}"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("whitevec: error: "), done.stderr
    assert str(tmp_path / "idx" / RESCORE_FILE) in lines[0] and "is 0 bytes" in lines[0]
    assert done.stdout == ""


# ---- a running server -----------------------------------------------------------------------------------
SERVER = """
from whitevec.service.app import create_app
from whitevec.service.run import run_app
from whitevec.service.settings import ServeSettings

settings = ServeSettings()
retriever = Retriever.load(folder, encoder=HashEncoder(dim=24))
run_app(create_app(retriever, settings), settings, port=int(sys.argv[3]), log_level="warning")
"""


@pytest.mark.slow  # a child process that imports faiss
def test_a_server_answers_503_and_says_damaged_and_keeps_serving(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
    import httpx
    from benchmarks.common.serving import wait_until_healthy

    _build(tmp_path / "idx")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "serve.log"  # a file, not a pipe: an undrained pipe would block the server's logging
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-c", PREAMBLE + SERVER, str(REPO), str(tmp_path / "idx"), str(port)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base, "the rescoring server", 60, proc, log)
        query: dict[str, Any] = {"queries": ["query 1"], "k": 3}
        assert httpx.post(f"{base}/search", json=query).status_code == 200
        os.truncate(tmp_path / "idx" / RESCORE_FILE, 0)
        failed = httpx.post(f"{base}/search", json=query, timeout=10)
        assert failed.status_code == 503, failed.text
        assert "damaged" in failed.json()["detail"] and RESCORE_FILE not in failed.text  # the path: in the log
        for _ in range(2):  # /health keeps answering, and says why it is not ok
            health = httpx.get(f"{base}/health", timeout=10)
            assert health.status_code == 503 and health.json()["status"] == "damaged", health.text
        assert httpx.post(f"{base}/embed", json={"texts": ["a"]}, timeout=10).status_code == 200
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)
    damaged = [line for line in log.read_text().splitlines() if "index damaged" in line]
    assert len(damaged) == 1 and str(tmp_path / "idx" / RESCORE_FILE) in damaged[0], log.read_text()[-2000:]


class DamagedRetriever:
    """Searches fail as a Retriever's do once its rescoring file is truncated; the rest works."""

    manifest: dict[str, Any] = {"model": "fake", "dims": 2}  # noqa: RUF012
    count = 3

    def search(self, queries: list[str], k: int = 10) -> list[list[Any]]:
        raise IndexDamagedError("/srv/idx/rescore.npy is 0 bytes, 2048 when loaded, since the index was loaded")

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 2), dtype=np.float32)


def test_a_search_on_a_damaged_index_answers_503_and_health_turns_damaged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
    from fastapi.testclient import TestClient

    from whitevec.service.app import create_app
    from whitevec.service.settings import ServeSettings

    with TestClient(create_app(DamagedRetriever(), ServeSettings()), raise_server_exceptions=False) as client:  # type: ignore[arg-type]
        assert client.get("/health").json()["status"] == "ok"
        with caplog.at_level("ERROR", logger="whitevec.service.error_answers"):
            failed = client.post("/search", json={"queries": ["a"], "k": 2})
        assert failed.status_code == 503 and "damaged" in failed.json()["detail"]
        assert "/srv/idx" not in failed.text  # the path is for the server's log only
        logged = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert len(logged) == 1 and "/srv/idx/rescore.npy" in logged[0], logged
        health = client.get("/health")
        assert health.status_code == 503 and health.json()["status"] == "damaged"
        assert client.post("/embed", json={"texts": ["a"]}).status_code == 200
        assert client.get("/info").status_code == 200
        schema = client.get("/openapi.json").json()["paths"]["/health"]["get"]["responses"]["503"]
        assert schema["content"]["application/json"]["schema"]["$ref"].endswith("/HealthErrorResponse")


def test_health_of_a_stopped_worker_answers_the_same_model_with_status_stopped() -> None:
    pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
    from fastapi.testclient import TestClient

    from whitevec.service.app import create_app
    from whitevec.service.settings import ServeSettings

    app = create_app(DamagedRetriever(), ServeSettings())  # type: ignore[arg-type]
    with TestClient(app) as client:
        app.state.worker.close()
        health = client.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "stopped" and health.json()["detail"]


# ---- rescoring orders as the records say ----------------------------------------------------------------
def _exact_best(query: np.ndarray, found: np.ndarray, stored: np.ndarray, metric: str, k: int) -> np.ndarray:
    """The ``k`` best of ``found`` by the stored records, in float64 (row positions into ``found``)."""
    v = stored[found].astype(np.float64)
    if metric == "l2":
        return np.argsort(((query - v) ** 2).sum(axis=1), kind="stable")[:k]
    return np.argsort(-(v @ query), kind="stable")[:k]


@pytest.mark.parametrize("metric", ["ip", "cosine", "l2"])
@pytest.mark.parametrize("form", ["fp16", "int8"])
def test_rescoring_orders_the_candidates_as_the_stored_records_say(tmp_path: Path, metric: str, form: str) -> None:
    x, q = _clustered(400, 16, seed=8), _clustered(20, 16, seed=9)
    if metric != "cosine":  # vectors of other lengths: l2 and ip then rank differently
        x = x * np.random.default_rng(4).uniform(0.5, 2.0, (400, 1)).astype(np.float32)
    records = RescoreVectors(form, 16)
    records.add(np.arange(400), x)
    records.save(tmp_path / RESCORE_FILE)
    loaded = RescoreVectors.open_path(tmp_path / RESCORE_FILE, form, 16)
    stored = decode_rows(np.load(tmp_path / RESCORE_FILE), form)
    # Each query's distinct candidates, shuffled: runs of consecutive ids and lone ones, then -1 (none).
    rng = np.random.default_rng(3)
    candidates = np.full((20, 40), -1, dtype=np.int64)
    for row in range(20):
        found = np.union1d(rng.choice(400, 24, replace=False), np.arange(10 * row, 10 * row + 8))
        candidates[row, : found.size] = rng.permutation(found)
    _, ids = loaded.rescore(q, candidates, 10, metric)
    for row, query in enumerate(q):
        found = candidates[row][candidates[row] >= 0]
        np.testing.assert_array_equal(ids[row], found[_exact_best(query, found, stored, metric, 10)])
    # Through a store's search: with K x k covering every vector, the result is the exact order of the records.
    store = FaissStore(16, metric, "flat", {"encoding": f"sq8+rescore=40:{form}"})
    with one_faiss_thread():
        store.add(np.arange(400), x)
    store.save(tmp_path)
    store.reopen(tmp_path, {})
    _, ids = store.search(q, 10)
    every = np.arange(400)
    for row, query in enumerate(q):
        np.testing.assert_array_equal(ids[row], _exact_best(query, every, stored, metric, 10))
