"""Faults over HTTP answer as the CLI does (issue 49): a full disk during a write is 507 and another fault of the
environment 503, each with the CLI's one line (exit 3 there) and no traceback in the log; a body nested too deep
is 422; and no error, a bug's 500 included, costs the client its keep-alive connection (one
``http.client.HTTPConnection`` against a real uvicorn server, both of its HTTP/1.1 protocols)."""

from __future__ import annotations

import errno
import http.client
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
from fastapi.testclient import TestClient

from tests.test_service_protection import TinyRetriever, thread_server
from whitevec.index.segments.requests import AddResult, DeleteResult
from whitevec.preflight import describe_fault
from whitevec.service.app import create_app
from whitevec.service.settings import ServeSettings

INDEX = Path("/srv/whitevec/data/ix")  # never touched: the faults below only name files in it
FULL = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(INDEX / "s000001" / "docs.sqlite"))
READ_ONLY = OSError(errno.EROFS, os.strerror(errno.EROFS), str(INDEX))


class FaultyRetriever(TinyRetriever):
    """Its searches for "bug" raise a bug; its adds meet a full disk, its compactions a read-only folder."""

    path = INDEX
    encoder: Any = None  # what a write encodes with (its write fails before encoding)

    def search(self, queries: list[str], k: int = 10) -> Any:
        if queries == ["bug"]:
            raise RuntimeError("a bug")
        return super().search(queries, k)

    def existing_ids(self, ids: list[str]) -> list[str]:
        return []

    def write(self, docs: Any, show_progress: Any = None, **_: Any) -> AddResult:
        raise FULL

    def delete(self, ids: list[str]) -> DeleteResult:
        return DeleteResult(0, list(ids))

    def compact(self) -> int:
        raise READ_ONLY


@pytest.mark.parametrize("protocol", ["h11", "httptools"])
def test_every_error_keeps_the_connection_and_faults_are_the_clis_line(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    if protocol == "httptools":
        pytest.importorskip("httptools")
    nested = '{"queries": ' + "[" * 5000 + "]" * 5000 + "}"
    asked: list[tuple[str, str, int]] = [
        ("/search", json.dumps({"queries": ["bug"]}), 500),
        ("/documents", json.dumps({"documents": [{"id": "a", "text": "wing"}]}), 507),
        ("/compact", "", 503),
        ("/search", nested, 422),
        ("/documents", json.dumps({"documents": []}), 422),
        ("/search", json.dumps({"queries": ["wing"], "k": 2}), 200),
    ]
    caplog.set_level(logging.INFO)
    with thread_server(ServeSettings(writable=True), protocol, FaultyRetriever()) as (_, port):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        answers, sockets = [], []
        for path, body, _ in asked:
            connection.request("POST", path, body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            answers.append((response.status, json.loads(response.read()), response.getheader("connection")))
            sockets.append(connection.sock)  # None once the server closed it; a new one for the next request
        connection.close()
    assert [status for status, _, _ in answers] == [status for _, _, status in asked], answers
    assert sockets[0] is not None and all(sock is sockets[0] for sock in sockets), answers
    assert all(header != "close" for _, _, header in answers), answers
    # The CLI's line (describe_fault), its paths from the index's name on.
    assert answers[1][1]["detail"] == "ix/s000001/docs.sqlite: No space left on device"
    assert answers[2][1]["detail"] == "ix: Read-only file system"
    assert answers[3][1]["detail"].startswith("invalid request: body: JSON nested too deeply to parse")
    logged = [r for r in caplog.records if r.name.startswith("whitevec")]
    faults = [r for r in logged if "environment fault" in r.getMessage()]
    assert [r.getMessage().split(": ", 1)[1] for r in faults] == [describe_fault(FULL), describe_fault(READ_ONLY)]
    assert not any(r.exc_info for r in faults)
    assert [r.getMessage() for r in logged if r.exc_info] == ["unexpected error while serving a request"]


@pytest.mark.parametrize("path", ["/search", "/documents"])
def test_a_body_nested_too_deep_is_one_line_422(path: str) -> None:
    nested = '{"documents": [{"id": "a", "text": "t", "metadata": {"n": ' + "[" * 5000 + "]" * 5000 + "}}]}"
    with TestClient(create_app(FaultyRetriever(), ServeSettings(writable=True))) as client:  # type: ignore[arg-type]
        answer = client.post(path, content=nested, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith("invalid request: body: JSON nested too deeply to parse") and "\n" not in detail
