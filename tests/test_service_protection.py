"""The server protects itself (issue 16): time limits on request headers and bodies, a cap on open connections,
a bounded shutdown whatever the clients do, the Host check, and the API key checked before the body is read.

The connection tests talk raw sockets to the real uvicorn loop with the server's own protocol and config: in a
thread, or in a child process where signals matter. Bounds are the documented limits plus a few seconds, so a
busy machine does not fail them; without the protections the same tests wait out their bounds and fail.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import select
import signal
import socket
import subprocess
import sys
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
from whitevec.service.connections import GuardedH11Protocol, ServerConfig, server_options
from whitevec.service.run import check_workers
from whitevec.service.settings import ServeSettings

REPO = Path(__file__).resolve().parents[1]
SLACK_S = 4.0  # what a loaded machine may add to a time limit before the server acts on it


class TinyRetriever:
    """Three documents; ``delay`` makes each search slow, ``started`` (a file) tells when one has begun."""

    count = 3

    def __init__(self, delay: float = 0.0, started: str | None = None) -> None:
        self.manifest = {"model": "fake", "dim": 2}
        self.delay = delay
        self.started = started

    def search(self, queries: list[str], k: int = 10) -> list[list[Hit]]:
        if self.started:
            Path(self.started).touch()
        time.sleep(self.delay)
        return [[Hit(f"d{i}", 1.0 - i / 10, f"doc {i}", None) for i in range(min(k, 3))] for _ in queries]

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 2), dtype=np.float32)


# ---- a server in a thread, and raw-socket clients ---------------------------------------------------------
@pytest.fixture(params=["h11", "httptools"])
def http(request: pytest.FixtureRequest) -> str:
    """Both of uvicorn's HTTP/1.1 protocols get the guards (ServeSettings.http)."""
    if request.param == "httptools":
        pytest.importorskip("httptools")
    return str(request.param)


@contextlib.contextmanager
def thread_server(
    settings: ServeSettings, http: str = "auto", retriever: Any = None
) -> Iterator[tuple[uvicorn.Server, int]]:
    """A real uvicorn server of ``retriever`` (default: a TinyRetriever) in a thread; its port."""
    settings = dataclasses.replace(settings, http=http)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # log_level info: the service's info lines (timeouts) must reach the log; pytest captures them.
    app = create_app(TinyRetriever() if retriever is None else retriever, settings)
    config = ServerConfig(app, settings, log_level="info", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield server, port
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def read_until_closed(sock: socket.socket, within: float) -> tuple[float | None, bytes]:
    """Seconds until the server closed ``sock`` (None: still open after ``within``) and what it sent."""
    start = time.monotonic()
    received = b""
    while (left := within - (time.monotonic() - start)) > 0:
        ready, _, _ = select.select([sock], [], [], left)
        if not ready:
            break
        try:
            data = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            data = b""
        if not data:
            return time.monotonic() - start, received
        received += data
    return None, received


def trickle_until_closed(sock: socket.socket, within: float, every: float = 0.2) -> float | None:
    """Send one byte every ``every`` seconds (slowloris); seconds until the server closed, or None."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        try:
            sock.sendall(b"a")
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - start
        closed, _ = read_until_closed(sock, every)
        if closed is not None:
            return time.monotonic() - start
    return None


def one_request(port: int) -> socket.socket:
    """A kept-alive connection that has had one complete request and response."""
    sock = connect(port)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    head = b""
    while b'"count"' not in head:
        data = sock.recv(65536)
        assert data, head
        head += data
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock


# ---- header and body time limits ---------------------------------------------------------------------------
def test_idle_connection_is_closed_after_the_header_timeout(caplog: pytest.LogCaptureFixture, http: str) -> None:
    caplog.set_level(logging.INFO, logger="whitevec.service")
    with thread_server(ServeSettings(header_timeout_s=1.0), http) as (_, port), connect(port) as sock:
        closed, sent = read_until_closed(sock, 1.0 + SLACK_S)
    assert closed is not None, "an idle connection was still open"
    assert closed >= 0.8 and sent == b""  # closed by the timer, without an answer
    timeouts = [r for r in caplog.records if "header_timeout_s" in r.getMessage()]
    assert timeouts and all(r.levelno == logging.INFO and not r.exc_info for r in timeouts)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_headers_sent_a_byte_at_a_time_are_cut_off(http: str) -> None:
    with thread_server(ServeSettings(header_timeout_s=1.0), http) as (_, port), connect(port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        closed = trickle_until_closed(sock, 1.0 + SLACK_S)
    assert closed is not None, "a slowloris connection was still open"


def test_the_next_requests_headers_are_timed_too(http: str) -> None:
    # After a response uvicorn's keep-alive timer stops at the first byte; the header timer must take over.
    settings = ServeSettings(header_timeout_s=1.0, keepalive_s=60)
    with thread_server(settings, http) as (_, port), one_request(port) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\n")
        closed = trickle_until_closed(sock, 1.0 + SLACK_S)
    assert closed is not None, "a slow second request kept its connection"


def test_idle_kept_alive_connection_closes_after_keepalive(http: str) -> None:
    with (
        thread_server(ServeSettings(keepalive_s=1, header_timeout_s=60), http) as (_, port),
        one_request(port) as sock,
    ):
        closed, _ = read_until_closed(sock, 1.0 + SLACK_S)
    assert closed is not None


def test_slow_body_gets_408_and_a_closed_connection(http: str) -> None:
    with (
        thread_server(ServeSettings(body_timeout_s=1.0, header_timeout_s=60), http) as (_, port),
        connect(port) as sock,
    ):
        sock.sendall(
            b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"queries": ["'
        )
        start = time.monotonic()
        answered = b""
        while time.monotonic() - start < 1.0 + SLACK_S and not answered:
            sock.sendall(b"a")  # a byte now and then must not keep the body alive
            _, answered = read_until_closed(sock, 0.2)
        closed, rest = read_until_closed(sock, SLACK_S)
    answer = answered + rest
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"body_timeout_s" in answer and closed is not None


# ---- the connection cap ------------------------------------------------------------------------------------
def test_connections_beyond_the_cap_get_503(http: str) -> None:
    with thread_server(ServeSettings(max_connections=3, header_timeout_s=60), http) as (server, port):
        held = [connect(port) for _ in range(3)]
        try:
            deadline = time.monotonic() + 10
            while len(server.server_state.connections) < 3:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            with connect(port) as extra:
                closed, answer = read_until_closed(extra, SLACK_S)
            assert answer.startswith(b"HTTP/1.1 503") and b"max_connections (3)" in answer, answer
            assert closed is not None
        finally:
            for sock in held:
                sock.close()
        # the held connections' places free up once they close
        wait_until_healthy(f"http://127.0.0.1:{port}", "the server after the connections closed", 10)


def _answer_or_reset(sock: socket.socket, within: float) -> bytes | None:
    """What the server sent before closing ``sock`` (None: the connection was reset instead)."""
    received = b""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return None
        except TimeoutError:  # still open: no reset, and what came so far is the answer
            break
        if not data:
            break
        received += data
    return received


def test_every_client_over_the_cap_gets_a_503_not_a_reset(http: str) -> None:
    """Many clients at once, each sending its request straight away, while the cap is full: every one reads the
    503 (a server that closes with the request unread makes the kernel send a reset, which loses the answer)."""
    cap, clients = 4, 60
    with thread_server(ServeSettings(max_connections=cap, header_timeout_s=60), http) as (server, port):
        held = [connect(port) for _ in range(cap)]
        try:
            deadline = time.monotonic() + 10
            while len(server.server_state.connections) < cap:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            over = [connect(port) for _ in range(clients)]
            for sock in over:
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answers = [_answer_or_reset(sock, 10 + SLACK_S) for sock in over]
            for sock in over:
                sock.close()
        finally:
            for sock in held:
                sock.close()
    resets = answers.count(None)
    refused = sum(1 for answer in answers if answer is not None and answer.startswith(b"HTTP/1.1 503"))
    assert (resets, refused) == (0, clients), answers


# ---- shutdown ----------------------------------------------------------------------------------------------
CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
from tests.test_service_protection import TinyRetriever
from whitevec.service.app import create_app
from whitevec.service.run import run_app
from whitevec.service.settings import ServeSettings

settings = ServeSettings.from_env()
retriever = TinyRetriever(float(sys.argv[3]), sys.argv[4] or None)
run_app(create_app(retriever, settings), settings, port=int(sys.argv[2]))
"""


@contextlib.contextmanager
def child_server(
    tmp_path: Path, env: dict[str, str], delay: float = 0.0, started: str = ""
) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """A server process (run_app, as `whitevec serve` runs it) on a free port; its log goes to a file."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(REPO), str(port), str(delay), started],
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_healthy(f"http://127.0.0.1:{port}", "the server process", 60, proc, log)
        yield proc, port, log
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


def stop_seconds(proc: subprocess.Popen[bytes], sig: signal.Signals, within: float) -> float:
    start = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(within)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server was still running {within} s after {sig.name}")
    return time.monotonic() - start


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_server_whatever_the_clients_do(tmp_path: Path, sig: signal.Signals) -> None:
    # Default limits: the body (30 s) and header (10 s) timeouts are not what ends these connections.
    with child_server(tmp_path, {}) as (proc, port, log):
        clients = [connect(port) for _ in range(15)]
        try:
            for sock in clients[:5]:  # unfinished bodies
                sock.sendall(
                    b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b'Content-Length: 1000\r\n\r\n{"queries": ["a'
                )
            for sock in clients[5:10]:  # unfinished headers
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            time.sleep(0.5)  # the five requests reach the app and wait there for their bodies
            seconds = stop_seconds(proc, sig, 10.0)
        finally:
            for sock in clients:
                sock.close()
    text = log.read_text()
    assert "Traceback" not in text, text
    print(f"{sig.name} to exit with 5 unfinished bodies and 10 other open connections: {seconds:.2f} s")


def test_shutdown_grace_bounds_a_request_still_running(tmp_path: Path) -> None:
    started = tmp_path / "search-started"
    env = {"WHITEVEC_SERVE_SHUTDOWN_GRACE_S": "1"}
    with child_server(tmp_path, env, delay=60.0, started=str(started)) as (proc, port, _):
        answers: list[Any] = []

        def ask() -> None:
            try:
                answers.append(httpx.post(f"http://127.0.0.1:{port}/search", json={"queries": ["a"]}, timeout=30))
            except httpx.HTTPError as exc:
                answers.append(exc)

        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        deadline = time.monotonic() + 20
        while not started.exists():
            assert time.monotonic() < deadline, "the search never started"
            time.sleep(0.05)
        # grace 1 s + the worker close (2 s) + slack; without the grace uvicorn waits out the 60 s search.
        seconds = stop_seconds(proc, signal.SIGTERM, 1 + 2 + SLACK_S)
        asker.join(10)
    assert answers and not (isinstance(answers[0], httpx.Response) and answers[0].status_code == 200)
    print(f"SIGTERM to exit with a 60 s search running, grace 1 s: {seconds:.2f} s")


# ---- the Host check ----------------------------------------------------------------------------------------
def host_status(settings: ServeSettings, host: str, headers: dict[str, str] | None = None) -> int:
    with TestClient(create_app(TinyRetriever(), settings)) as client:
        return client.get("/info", headers={"Host": host, **(headers or {})}).status_code


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8000", "127.0.0.1:8000", "127.0.0.2", "[::1]:8000", "[::1]", "testserver:80"]
)
def test_keyless_server_answers_local_host_names(host: str) -> None:
    # "testserver" is the address TestClient reports the connection arrived on (uvicorn reports the socket's).
    assert host_status(ServeSettings(), host) == 200


def test_keyless_server_refuses_other_host_names() -> None:
    with TestClient(create_app(TinyRetriever(), ServeSettings())) as client:
        for path in ("/health", "/", "/info"):
            response = client.get(path, headers={"Host": "evil.example"})
            assert response.status_code == 400, path
            assert "DNS rebinding" in response.json()["detail"] and "WHITEVEC_SERVE_ALLOWED_HOSTS" in response.text
            assert response.headers["connection"] == "close"
        searched = client.post("/search", json={"queries": ["a"]}, headers={"Host": "evil.example:8000"})
        assert searched.status_code == 400
    for host in ("localhost.evil.example", "127.0.0.1.evil.example", "evil.example"):
        assert host_status(ServeSettings(), host) == 400, host


def test_allowed_hosts_and_the_key() -> None:
    listed = ServeSettings(allowed_hosts="search.lan, Other.lan:9000")
    assert host_status(listed, "search.lan:8000") == 200 and host_status(listed, "other.lan") == 200
    assert host_status(listed, "localhost") == 200 and host_status(listed, "evil.example") == 400
    assert host_status(ServeSettings(allowed_hosts="*"), "evil.example") == 200
    key = {"X-API-Key": "k-1"}
    # With a key the key is the defence: any Host, unless allowed_hosts narrows it.
    assert host_status(ServeSettings(api_key="k-1"), "evil.example", key) == 200
    assert host_status(ServeSettings(api_key="k-1", allowed_hosts="search.lan"), "evil.example", key) == 400
    assert host_status(ServeSettings(api_key="k-1", allowed_hosts="search.lan"), "search.lan", key) == 200


def test_host_check_on_a_real_server(http: str) -> None:
    with thread_server(ServeSettings(), http) as (_, port):
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/health").status_code == 200
        assert httpx.get(f"{base}/health", headers={"Host": f"localhost:{port}"}).status_code == 200
        assert httpx.get(f"{base}/health", headers={"Host": "evil.example"}).status_code == 400


# ---- the key before the body -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"not json at all", {}),
        (b'{"queries": "wrong", "path": "/etc"}', {}),
        (b"x" * 5000, {}),  # over max_body_bytes: 401 still, the key comes first
        (b"\xff\xfe", {"X-API-Key": "wrong"}),
    ],
    ids=["not json", "bad schema", "too big", "wrong key"],
)
def test_key_is_checked_before_the_body(body: bytes, headers: dict[str, str]) -> None:
    settings = ServeSettings(api_key="k-1", max_body_bytes=2000)
    with TestClient(create_app(TinyRetriever(), settings)) as client:
        for path in ("/search", "/embed"):
            response = client.post(path, content=body, headers={"Content-Type": "application/json", **headers})
            assert response.status_code == 401, response.text
            assert "X-API-Key" in response.json()["detail"] and "queries" not in response.text
            assert response.headers["connection"] == "close"
        assert client.get("/nothing-here").status_code == 401  # keyless strangers learn no routes either
        assert client.get("/docs").status_code == 200 and client.get("/static/app.js").status_code == 200


def test_key_is_checked_before_waiting_for_the_body(http: str) -> None:
    settings = ServeSettings(api_key="k-1", body_timeout_s=60, header_timeout_s=60)
    with thread_server(settings, http) as (_, port), connect(port) as sock:
        sock.sendall(
            b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n"
        )
        closed, answer = read_until_closed(sock, SLACK_S)
    assert answer.startswith(b"HTTP/1.1 401"), answer
    assert closed is not None


# ---- the API description and the settings ------------------------------------------------------------------
def test_openapi_lists_the_refusals() -> None:
    with TestClient(create_app(TinyRetriever(), ServeSettings(api_key="k-1"))) as client:
        spec = client.get("/openapi.json").json()
    search = spec["paths"]["/search"]["post"]
    assert {"400", "401", "408", "413", "422"} <= set(search["responses"])
    assert "ValidationErrorResponse" in str(search["responses"]["422"])
    assert {"400", "401"} <= set(spec["paths"]["/info"]["get"]["responses"])
    assert search["security"] == [{"APIKeyHeader": []}]
    with TestClient(create_app(TinyRetriever(), ServeSettings())) as client:
        keyless = client.get("/openapi.json").json()
    assert "security" not in keyless["paths"]["/search"]["post"]  # no key to ask for


def test_protection_settings() -> None:
    env = {
        "WHITEVEC_SERVE_HEADER_TIMEOUT_S": "2.5",
        "WHITEVEC_SERVE_BODY_TIMEOUT_S": "7",
        "WHITEVEC_SERVE_KEEPALIVE_S": "3",
        "WHITEVEC_SERVE_SHUTDOWN_GRACE_S": "0",
        "WHITEVEC_SERVE_MAX_CONNECTIONS": "10",
        "WHITEVEC_SERVE_ALLOWED_HOSTS": "a.lan,b.lan",
        "WHITEVEC_SERVE_HTTP": "h11",
    }
    settings = ServeSettings.from_env(env)
    assert server_options(settings)["http"] is GuardedH11Protocol
    assert (settings.header_timeout_s, settings.body_timeout_s, settings.keepalive_s) == (2.5, 7.0, 3)
    assert settings.shutdown_grace_s == 0 and settings.max_connections == 10
    assert settings.host_list() == ("a.lan", "b.lan")
    assert "allowed_hosts" not in settings.public() and settings.public()["body_timeout_s"] == 7.0
    bad: list[dict[str, Any]] = [
        {"header_timeout_s": 0},
        {"body_timeout_s": -1.0},
        {"keepalive_s": 0},
        {"shutdown_grace_s": 61},
        {"max_connections": 0},
        {"allowed_hosts": "http://a.lan"},
        {"allowed_hosts": "a lan"},
        {"http": "spdy"},
    ]
    for fields in bad:
        with pytest.raises(BadInputError, match=next(iter(fields))):
            ServeSettings(**fields)
    with pytest.raises(BadInputError, match="WHITEVEC_SERVE_KEEPALIVE_S"):
        ServeSettings.from_env({"WHITEVEC_SERVE_KEEPALIVE_S": "2.5"})


# ---- several workers on Milvus Lite ------------------------------------------------------------------------
def test_milvus_lite_index_refuses_several_workers() -> None:
    lite = {"backend": "milvus", "backend_uri": None}
    for manifest in (lite, {"backend": "milvus", "backend_uri": "/data/vectors.db"}):
        with pytest.raises(BadInputError, match="Milvus Lite, which opens its data folder in one process only"):
            check_workers(manifest, 2)
    check_workers(lite, 1)
    check_workers({"backend": "milvus", "backend_uri": "http://milvus:19530"}, 4)
    check_workers({"backend": "faiss", "backend_uri": None}, 4)


def test_worker_config_survives_pickling(http: str) -> None:
    """uvicorn pickles its Config to start each worker process (--workers N): the guarded protocol class and
    the rest of the options must pickle, or `whitevec serve --workers 2` exits at once."""
    import pickle

    config = uvicorn.Config(
        "whitevec.service.run:app_from_env", factory=True, **server_options(ServeSettings(http=http))
    )
    copied = pickle.loads(pickle.dumps(config))
    assert copied.http is config.http and copied.timeout_keep_alive == config.timeout_keep_alive
