"""``whitevec mcp``: the index as a Model Context Protocol server, driven by the ``mcp`` package's own client.

In process (``mcp.Client`` on the server object: the package's in-memory path for tests) on a HashEncoder index
with a lexical part and metadata: the tools listed with their schemas, search dense and hybrid with a filter,
info, the refusals as one-line tool errors, and with --writable add and delete. Over real stdio, the
``whitevec mcp`` process on a tiny static-table index: tools, a search, and a missing index's exit."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

from tests.index_helpers import HashEncoder, sentences
from whitevec.index import Document, Retriever
from whitevec.integrations.mcp import create_server

SRC = Path(__file__).resolve().parents[1] / "src"
TEXTS = sentences(12, seed=11)
NEW_TEXT = "a text that no document of the build holds"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Retriever]:
    docs = [Document(f"d{i}", text, {"n": i, "lang": "en" if i % 2 else "fr"}) for i, text in enumerate(TEXTS)]
    with Retriever.build(docs, tmp_path / "idx", encoder=HashEncoder(), lexical="bm25", transform="none") as built:
        yield built


def with_client(retriever: Retriever, work: Callable[[Client], Awaitable[Any]], writable: bool = False) -> Any:
    """``work(client)`` with a client connected in process to the server of ``retriever``."""

    async def session() -> Any:
        async with Client(create_server(retriever, writable=writable)) as client:
            return await work(client)

    return anyio.run(session)


def answer(result: CallToolResult) -> dict[str, Any]:
    """A tool's structured answer, checked to be what its text form says too."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


def error_line(result: CallToolResult) -> str:
    assert result.is_error and result.structured_content is None
    (content,) = result.content
    text: str = content.text  # type: ignore[union-attr]
    assert "\n" not in text and "Traceback" not in text, text
    return text


def test_read_only_server_lists_search_and_info_with_described_inputs(index: Retriever) -> None:
    tools = {tool.name: tool for tool in with_client(index, lambda c: c.list_tools()).tools}
    assert set(tools) == {"search", "info"}  # no write tools without --writable
    schema = tools["search"].input_schema
    assert not schema.get("required")  # a query, a vector, or both
    for name in ("query", "k", "mode", "filter", "vector"):
        assert schema["properties"][name].get("description"), name
    assert schema["properties"]["k"]["maximum"] == 1000
    assert "hybrid" in schema["properties"]["mode"]["description"]
    assert tools["search"].output_schema is not None and tools["search"].annotations.read_only_hint


def test_dense_and_hybrid_searches_with_a_filter(index: Retriever) -> None:
    async def work(client: Client) -> list[CallToolResult]:
        return [
            await client.call_tool("search", {"query": TEXTS[3], "k": 3, "mode": "dense"}),
            await client.call_tool("search", {"query": TEXTS[3], "filter": 'lang == "fr"', "mode": "dense"}),
            await client.call_tool("search", {"query": TEXTS[4], "k": 2, "filter": "n >= 4"}),
        ]

    dense, filtered, hybrid = (answer(r) for r in with_client(index, work))
    top = dense["hits"][0]
    assert dense["mode"] == "dense" and dense["k"] == 3 and len(dense["hits"]) == 3
    assert top == {"id": "d3", "score": pytest.approx(1.0, abs=1e-5), "text": TEXTS[3],
                   "metadata": {"n": 3, "lang": "en"}, "rankers": None}  # fmt: skip
    assert filtered["hits"] and all(h["metadata"]["lang"] == "fr" for h in filtered["hits"])
    assert hybrid["mode"] == "hybrid" and hybrid["hits"][0]["id"] == "d4"  # the index's own mode: hybrid
    assert all(h["metadata"]["n"] >= 4 for h in hybrid["hits"]) and hybrid["hits"][0]["rankers"]
    # The same search through the library, for the scores.
    expected = index.search([TEXTS[4]], k=2, filter="n >= 4")[0]
    assert [(h["id"], h["score"]) for h in hybrid["hits"]] == [(h.id, pytest.approx(h.score)) for h in expected]


def test_info_summarises_the_index(index: Retriever) -> None:
    info = answer(with_client(index, lambda c: c.call_tool("info", {})))
    assert info["count"] == 12 and info["deleted"] == 0 and info["dim"] == 16 and info["metric"] == "cosine"
    assert info["model"] == "hash-encoder" and info["transform"] == "none"
    assert info["modes"] == ["dense", "lexical", "hybrid"] and info["default_mode"] == "hybrid"
    assert info["lexical"]["ranker"] == "bm25" and info["writable"] is False and info["external"] is False


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"query": "dog", "filter": "lang = 'en'"}, "filter"),
        ({"query": "dog", "filter": "colour == 'red'"}, "colour"),
        ({"query": "dog", "mode": "sparse"}, "unknown search mode 'sparse'"),
        ({"query": "", "k": 3}, "query"),
        ({"query": "   "}, "empty or only whitespace"),
        ({"query": "dog", "k": 0}, "k: Input should be greater than or equal to 1"),
        ({"query": "dog", "k": 1001}, "k: Input should be less than or equal to 1000"),
        ({"k": 3}, "give the search a query (text) or a vector, or both"),
        ({"query": "dog", "vector": [0.5] * 3}, "query_vectors"),  # 16 numbers, the encoder's
        ({"vector": [float("nan")] * 16, "mode": "dense"}, "vector.0: Input should be a valid number"),
    ],
)
def test_bad_search_arguments_are_one_line_tool_errors(
    index: Retriever, arguments: dict[str, Any], said: str
) -> None:
    line = error_line(with_client(index, lambda c: c.call_tool("search", arguments)))
    assert line.startswith("Error executing tool search: ") and said in line, line


def test_writable_server_adds_and_deletes(index: Retriever) -> None:
    async def work(client: Client) -> dict[str, Any]:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        doc = {"id": "new-1", "text": NEW_TEXT, "metadata": {"n": 99}}
        return {
            "tools": tools,
            "added": await client.call_tool("add", {"documents": [doc]}),
            "found": await client.call_tool("search", {"query": NEW_TEXT, "k": 1, "mode": "dense"}),
            "again": await client.call_tool("add", {"documents": [doc]}),
            "twice": await client.call_tool("add", {"documents": [doc, doc], "on_existing": "replace"}),
            "unknown choice": await client.call_tool("add", {"documents": [doc], "on_existing": "merge"}),
            "no ids": await client.call_tool("delete", {"ids": []}),
            "deleted": await client.call_tool("delete", {"ids": ["new-1", "nope"]}),
            "gone": await client.call_tool("search", {"query": NEW_TEXT, "k": 1, "mode": "dense"}),
            "info": await client.call_tool("info", {}),
        }

    seen = with_client(index, work, writable=True)
    assert seen["tools"] == {"search", "info", "add", "delete"}
    assert answer(seen["added"]) == {"added": 1, "replaced": 0, "skipped": 0, "count": 13}
    assert answer(seen["found"])["hits"][0]["id"] == "new-1"
    assert "'new-1' is already in the index" in error_line(seen["again"])  # nothing written
    assert 'on_existing "replace"' in error_line(seen["again"])
    assert "'new-1' occurs more than once" in error_line(seen["twice"])
    assert "on_existing: Input should be 'error', 'replace' or 'skip'" in error_line(seen["unknown choice"])
    assert "ids: List should have at least 1 item" in error_line(seen["no ids"])
    assert answer(seen["deleted"]) == {"deleted": 1, "missing_count": 1, "missing": ["nope"], "count": 12}
    assert answer(seen["gone"])["hits"][0]["id"] != "new-1"
    assert answer(seen["info"])["count"] == 12 and answer(seen["info"])["writable"] is True
    with Retriever.load(index.path, encoder=HashEncoder()) as fresh:  # written to the folder, for other readers
        assert fresh.count == 12 and fresh.manifest["generation"] == 2


def test_an_index_of_given_vectors_is_searched_and_written_with_vectors(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(TEXTS), 8)).astype(np.float32)
    docs = [Document(f"d{i}", text, {"n": i}) for i, text in enumerate(TEXTS)]
    new = rng.normal(size=8).astype(np.float32).tolist()

    async def work(client: Client) -> dict[str, CallToolResult]:
        added = {"id": "new-1", "text": NEW_TEXT, "vector": new}
        own = vectors[5].tolist()
        return {
            "info": await client.call_tool("info", {}),
            "by vector": await client.call_tool("search", {"vector": own, "k": 2, "mode": "dense"}),
            "hybrid": await client.call_tool("search", {"query": TEXTS[5], "vector": own, "k": 2}),
            "by text": await client.call_tool("search", {"query": TEXTS[5], "mode": "dense"}),
            "no vector": await client.call_tool("add", {"documents": [{"id": "x", "text": NEW_TEXT}]}),
            "some vectors": await client.call_tool("add", {"documents": [added, {"id": "x", "text": "a dog"}]}),
            "added": await client.call_tool("add", {"documents": [added]}),
            "found": await client.call_tool("search", {"vector": new, "k": 1, "mode": "dense"}),
        }

    with Retriever.build(
        docs, tmp_path / "ix", vectors=vectors, encoder_name="api-embed", lexical="bm25"
    ) as index:
        seen = with_client(index, work, writable=True)
    info = answer(seen["info"])
    assert info["external"] is True and info["model"] == "api-embed" and info["encoder_dim"] == 8
    assert answer(seen["by vector"])["hits"][0]["id"] == "d5"
    assert answer(seen["hybrid"])["hits"][0]["id"] == "d5"
    assert "encodes no text: a dense search needs" in error_line(seen["by text"])
    assert "holds vectors given by the caller (api-embed, 8-d)" in error_line(seen["no vector"])
    assert "documents[1] has no vector" in error_line(seen["some vectors"])
    assert answer(seen["added"])["added"] == 1
    assert answer(seen["found"])["hits"][0]["id"] == "new-1"


def test_an_empty_index_answers_with_a_note_and_grows_by_add(tmp_path: Path) -> None:
    async def work(client: Client) -> list[CallToolResult]:
        docs = [
            {"id": "a", "text": "a dog", "vector": [1, 0, 0, 0]},
            {"id": "b", "text": "a cat", "vector": [0, 1, 0, 0]},
        ]
        return [
            await client.call_tool("search", {"vector": [1, 0, 0, 0], "mode": "dense"}),
            await client.call_tool("add", {"documents": docs}),
            await client.call_tool("search", {"query": "dog", "vector": [1, 0.1, 0, 0]}),
        ]

    with Retriever.create(tmp_path / "empty", dim=4, encoder_name="api", lexical="bm25") as index:
        before, added, after = (answer(result) for result in with_client(index, work, writable=True))
    assert before["hits"] == [] and before["note"] == "the index holds no documents"
    assert added == {"added": 2, "replaced": 0, "skipped": 0, "count": 2}
    assert [h["id"] for h in after["hits"]] == ["a", "b"] and after["mode"] == "hybrid" and after["k"] == 2


def test_what_the_load_prints_stays_off_the_protocol_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """stdout carries the protocol's messages: a library printing while the index loads must not reach it."""
    import whitevec.integrations.mcp as served

    class Served:
        def run(self, transport: str) -> None:
            print("protocol", transport)

    def load(*args: Any, **kwargs: Any) -> contextlib.nullcontext[None]:
        print("loading checkpoint shards: 100%")
        return contextlib.nullcontext()

    monkeypatch.setattr(Retriever, "load", load)
    monkeypatch.setattr(served, "create_server", lambda *args, **kwargs: Served())
    served.serve_stdio(tmp_path)
    out, err = capsys.readouterr()
    assert out == "protocol stdio\n" and err == "loading checkpoint shards: 100%\n"


def test_the_server_needs_no_serve_extra() -> None:
    """The mcp extra installs no fastapi: the server imports none of the HTTP service's modules that need it (only
    its worker and settings)."""
    probe = (
        "import sys\n"
        "class Absent:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'fastapi':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, Absent())\n"
        "import whitevec.integrations.mcp\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=_environment(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


# ---- over stdio, the `whitevec mcp` process --------------------------------------------------------------
def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}


def test_whitevec_mcp_over_stdio(tmp_path: Path) -> None:
    from tests.static_helpers import tiny_static_index

    folder = tiny_static_index(tmp_path)
    query = (folder.parent / "corpus.txt").read_text().splitlines()[7]
    command = [sys.executable, "-m", "whitevec.cli", "mcp", str(folder)]
    params = StdioServerParameters(command=command[0], args=command[1:], env=_environment())

    async def session() -> tuple[set[str], dict[str, Any]]:
        async with Client(params) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            return tools, answer(await client.call_tool("search", {"query": query, "k": 2}))

    tools, found = anyio.run(session)
    assert tools == {"search", "info"}
    assert found["mode"] == "dense" and found["hits"][0]["text"] == query and len(found["hits"]) == 2


SAVED_INDEX = Path(__file__).parent / "fixtures" / "saved" / "index-flat-whitening"


@pytest.mark.parametrize("fault", ["missing", "damaged"])
def test_a_missing_or_damaged_index_stops_the_process_with_one_line(tmp_path: Path, fault: str) -> None:
    folder = tmp_path / "idx"
    said = "does not exist"
    if fault == "damaged":  # a byte more than the manifest says: found before any model loads
        shutil.copytree(SAVED_INDEX, folder)
        size = (folder / "docs.sqlite").stat().st_size
        with (folder / "docs.sqlite").open("ab") as docs:
            docs.write(b"x")
        said = f"docs.sqlite is {size + 1} bytes, the manifest says {size}"
    done = subprocess.run(
        [sys.executable, "-m", "whitevec.cli", "mcp", str(folder)],
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("whitevec: error: ") and said in line, line
