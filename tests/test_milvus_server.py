"""Writes to a Milvus index on a real Milvus server (not Lite, not tests/milvus_fake.py): build, add, upsert,
delete, compaction, Strong consistency and a write killed between its Milvus calls, each answering as a fresh
FAISS flat build of the live documents. The server is the embedded Milvus 2.3 of ``whitevec[milvus-server]``,
started once for the module (tests/milvus_server.py); the tests skip, saying why, where it cannot run.

Milvus 2.3 has no BM25 function (2.5+), so an index with Milvus's BM25 (``--lexical bm25``) is not built here:
the lexical paths on a server are tested against the fake client only (docs/notes/milvus-server-tests.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.milvus_server import ServerUnavailableError, check_available, milvus_server
from whitevec.index import Document, Retriever
from whitevec.index.folder.snapshot import read_manifest
from whitevec.index.milvus.store import MilvusStore

pytest.importorskip("pymilvus", reason="the Milvus tests need pip install 'whitevec[milvus]'")

from tests.test_milvus import _sign_codes_match_faiss
from tests.test_milvus_writes import ENCODER, corpus

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The URI of a Milvus server for this module (started once: it takes seconds)."""
    try:
        check_available()
    except ServerUnavailableError as exc:
        pytest.skip(str(exc))
    with milvus_server() as uri:
        yield uri


def build(folder: Path, docs: list[Document], uri: str | None) -> Retriever:
    """``docs`` indexed on the Milvus server at ``uri``, or (None) in a FAISS flat index: the reference."""
    backend = {"backend": "milvus", "uri": uri} if uri else {"backend": "faiss"}
    return Retriever.build(docs, folder, encoder=ENCODER, transform="none", kind="flat", **backend)


def answers(retriever: Retriever, queries: list[str], filter: str | None = None) -> list[list[tuple[str, float]]]:
    hits = retriever.search(queries, 6, filter=filter)
    return [[(h.id, round(float(h.score), 4)) for h in row] for row in hits]


def server_rows(retriever: Retriever) -> int:
    """The rows the collection holds on the server (count(*): a duplicated id counts twice)."""
    assert isinstance(retriever.store, MilvusStore)
    return retriever.store.count


def assert_same_as_fresh_flat(retriever: Retriever, live: dict[str, Document], folder: Path) -> None:
    """Answers (ids, scores), filtered ones too, equal a fresh FAISS flat build's of ``live``; the collection
    holds one row per live document; a hit's document is the one written."""
    queries = [d.text for d in list(live.values())[::6]] + ["w1a w2b w3a"]
    with build(folder, list(live.values()), None) as fresh:
        assert answers(retriever, queries) == answers(fresh, queries)
        for where in ("n < 4", "n >= 30 or n == -3"):
            assert answers(retriever, queries, where) == answers(fresh, queries, where), where
    assert retriever.count == server_rows(retriever) == len(live)
    for hit in retriever.search([d.text for d in live.values()], 1):
        assert live[hit[0].id] == Document(hit[0].id, hit[0].text, hit[0].metadata)


@pytest.fixture(scope="module")
def written(
    server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Retriever, Retriever, dict[str, Document]]]:
    """An index on the server after an add, an upsert and a delete by one Retriever (the writer), and a second
    one (the reader, as a server of the same index) loaded before them."""
    folder = tmp_path_factory.mktemp("milvus-server") / "index"
    docs = corpus(40, seed=1)
    live = {d.id: d for d in docs}
    writer = build(folder, docs, server)
    reader = Retriever.load(folder, encoder=ENCODER)
    added = corpus(5, seed=2, prefix="n")
    assert writer.write(added).added == 5
    # Strong consistency: the next search sees the write, with no wait
    assert writer.search([added[0].text], 1)[0][0].id == "n0"
    live.update((d.id, d) for d in added)
    changed = [Document("d3", "w7a w7a w9b fresh words", {"n": -3}), Document("n9", "w11a w12b", None)]
    done = writer.write(changed, on_existing="replace")
    assert (done.added, done.replaced, done.count) == (1, 1, 46)
    live.update((d.id, d) for d in changed)
    result = writer.delete(["d5", "n0", "zz"])
    assert (result.deleted, result.missing) == (2, ["zz"])
    del live["d5"], live["n0"]
    yield writer, reader, live
    reader.close()
    writer.close()


def test_writes_on_a_server_answer_as_a_fresh_flat_build(
    written: tuple[Retriever, Retriever, dict[str, Document]], tmp_path: Path
) -> None:
    writer, reader, live = written
    assert_same_as_fresh_flat(writer, live, tmp_path / "fresh")
    manifest = read_manifest(writer.path)
    assert (manifest["count"], manifest["next_row"], manifest["generation"]) == (44, 46, 3)
    store = writer.store
    assert isinstance(store, MilvusStore) and store.stored_uri == writer.manifest["backend_uri"]
    described = store.client.describe_collection(store.collection)
    assert described["consistency_level_name"] == "Strong"
    # the reader's version holds no added row (ids below its next_row) until it moves on; then it is the writer's
    assert "n9" not in {h.id for h in reader.search(["w11a w12b"], 5)[0]}
    assert reader.refresh() and reader.manifest == manifest
    assert_same_as_fresh_flat(reader, live, tmp_path / "fresh-for-reader")


def test_compaction_on_a_server_keeps_the_answers(
    written: tuple[Retriever, Retriever, dict[str, Document]], tmp_path: Path
) -> None:
    writer, _, live = written
    before = read_manifest(writer.path)
    assert writer.compact() == 0  # Milvus's own compaction, waited for; no new version of the folder
    assert read_manifest(writer.path) == before
    assert_same_as_fresh_flat(writer, live, tmp_path / "fresh")
    store = writer.store
    assert isinstance(store, MilvusStore)
    deleted_rows = store.client.query(store.collection, filter="id in [5, 40]", output_fields=["id"])
    assert deleted_rows == []
    with Retriever.load(writer.path, encoder=ENCODER) as again:
        assert_same_as_fresh_flat(again, live, tmp_path / "fresh-again")


def test_refit_on_a_server_is_a_new_collection_answering_as_a_fresh_build(
    written: tuple[Retriever, Retriever, dict[str, Document]], tmp_path: Path
) -> None:
    writer, _, live = written
    old = writer.manifest["milvus_collection"]
    writer.refit("whitening")
    assert writer.manifest["milvus_collection"] != old and writer.manifest["transform"]["spec"] == "whitening"
    store = writer.store
    assert isinstance(store, MilvusStore) and not store.client.has_collection(old)  # the replaced one dropped
    queries = [d.text for d in list(live.values())[::6]]
    fresh = Retriever.build(list(live.values()), tmp_path / "fresh", encoder=ENCODER, transform="whitening")
    with fresh:
        assert answers(writer, queries) == answers(fresh, queries)
    assert writer.count == server_rows(writer) == len(live)


# A child process that writes ``changes`` to the index at argv[1] and is killed (SIGKILL) after the write's
# Milvus upserts, before their flush and before its version is in: what a crash there leaves on the server.
_KILLED_WRITER = """
import os, signal, sys
from tests.test_milvus_server import ENCODER, changes
from whitevec.index import Retriever
from whitevec.index.milvus.store import MilvusStore

MilvusStore.flush = lambda self: os.kill(os.getpid(), signal.SIGKILL)
Retriever.load(sys.argv[1], encoder=ENCODER).write(changes(), on_existing="replace")
"""


def changes() -> list[Document]:
    """One document written in place of d1 and two new ones (the killed write's and its retry's)."""
    return [Document("d1", "w20a w21b w22a", {"n": 101}), *corpus(2, seed=3, prefix="late")]


def test_a_write_killed_between_its_milvus_calls_is_retried_without_duplicates(
    server: str, tmp_path: Path
) -> None:
    """Milvus keeps rows inserted before a crash, and a server does not deduplicate inserted ids: the retry gives
    the same new rows again, and upserts them."""
    docs = corpus(12, seed=4)
    live: dict[str, Any] = {d.id: d for d in docs}
    with build(tmp_path / "index", docs, server) as retriever:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        child = subprocess.run(
            [sys.executable, "-c", _KILLED_WRITER, str(tmp_path / "index")],
            capture_output=True,
            env=env,
            check=False,
        )
        assert child.returncode == -9, child.stderr.decode()
        assert read_manifest(tmp_path / "index")["count"] == 12  # the killed write's version never came in
        assert server_rows(retriever) == 14  # but its two new rows are on the server
        done = retriever.write(changes(), on_existing="replace")
        assert (done.added, done.replaced, done.count) == (2, 1, 14)
        live.update((d.id, d) for d in changes())
        assert_same_as_fresh_flat(retriever, live, tmp_path / "fresh")


def test_sign_codes_on_a_server_are_the_faiss_stores(server: str, tmp_path: Path) -> None:
    """BINARY_VECTOR rows searched by HAMMING (Milvus Lite has neither): the FAISS store's scores."""
    _sign_codes_match_faiss(server, "itq", 24, tmp_path).close()
