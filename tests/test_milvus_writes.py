"""Writes to a Milvus-backed index on Milvus Lite itself (whitevec.index.milvus.writes): add, upsert, delete,
compact and refit through Milvus's own calls answer as a fresh build of the live documents, lexical included."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import HashEncoder, sentences
from whitevec.errors import BadInputError
from whitevec.index import Document, Retriever
from whitevec.index.folder.snapshot import read_manifest

pytest.importorskip("pymilvus", reason="the Milvus tests need pip install 'whitevec[milvus]'")
pytest.importorskip("milvus_lite", reason="the Milvus tests need milvus-lite (local file URIs)")
pytestmark = pytest.mark.filterwarnings("ignore:Milvus Lite's analyzer does not stem")

# Words drawn without much repetition, so BM25 and dense scores rarely tie (ties may order either way).
WORDS = [f"w{i}{c}" for i in range(60) for c in "ab"]
ENCODER: Any = HashEncoder(dim=16)


def corpus(n: int, seed: int, prefix: str = "d") -> list[Document]:
    rng = np.random.default_rng(seed)
    return [Document(f"{prefix}{i}", " ".join(rng.choice(WORDS, 6)), {"n": i}) for i in range(n)]


def build(folder: Path, docs: list[Document], **options: Any) -> Retriever:
    return Retriever.build(
        docs, folder, encoder=ENCODER, transform="none", backend="milvus", lexical="bm25", **options
    )


def answers(retriever: Retriever, queries: list[str], mode: str) -> list[list[tuple[str, float]]]:
    hits = retriever.search(queries, 5, mode=mode)
    return [[(h.id, round(float(h.score), 4)) for h in row] for row in hits]


def failing(message: str) -> Any:
    """A stand-in for a function, raising OSError(``message``)."""

    def fail(*_: object) -> None:
        raise OSError(message)

    return fail


def matching(retriever: Retriever, queries: list[str]) -> list[set[str]]:
    """The documents each query matches lexically (every one: k is the index's size)."""
    return [{h.id for h in row} for row in retriever.search(queries, retriever.count, mode="lexical")]


def assert_same_as_fresh(
    retriever: Retriever, live: dict[str, Document], folder: Path, *, compacted: bool = False
) -> None:
    """Dense answers (ids, scores) and the documents each query matches lexically equal those of a fresh build
    of ``live``; lexical and hybrid answers too once ``compacted``. Before, BM25 scores are Milvus Lite's, whose
    statistics are per segment (docs/how-to/updates.md)."""
    queries = [d.text for d in list(live.values())[::7]] + ["w1a w2b w3a", "nothing matches zzz"]
    with build(folder, list(live.values())) as fresh:
        assert answers(retriever, queries, "dense") == answers(fresh, queries, "dense")
        assert matching(retriever, queries) == matching(fresh, queries)
        hybrid = retriever.search(queries, 5, mode="hybrid")
        assert all(len(row) == 5 and {h.id for h in row} <= set(live) for row in hybrid)
        for mode in ("lexical", "hybrid") if compacted else ():
            assert answers(retriever, queries, mode) == answers(fresh, queries, mode), mode
    assert retriever.count == len(live)
    hit = retriever.search([next(iter(live.values())).text], 1)[0][0]
    assert live[hit.id] == Document(hit.id, hit.text, hit.metadata)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Retriever, dict[str, Document]]]:
    """One Milvus Lite index after an add, an upsert and a delete (built once: Lite starts slowly)."""
    folder = tmp_path_factory.mktemp("milvus") / "index"
    docs = corpus(40, seed=1)
    live = {d.id: d for d in docs}
    retriever = build(folder, docs)
    assert [h.id for h in retriever.search(["w1a"], 5, filter="n == 3")[0]] == ["d3"]  # the metadata read once
    added = corpus(5, seed=2, prefix="n")
    assert retriever.write(added).added == 5
    live.update((d.id, d) for d in added)
    changed = [Document("d3", "w7a w7a w9b fresh words", {"n": -3}), Document("n9", "w11a w12b", None)]
    done = retriever.write(changed, on_existing="replace")
    assert (done.added, done.replaced, done.skipped, done.count) == (1, 1, 0, 46)
    live.update((d.id, d) for d in changed)
    result = retriever.delete(["d5", "n0", "zz", "d5"])
    assert (result.deleted, result.missing) == (2, ["zz"])
    del live["d5"], live["n0"]
    yield retriever, live
    retriever.close()


def test_add_upsert_and_delete_answer_as_a_fresh_build(
    written: tuple[Retriever, dict[str, Document]], tmp_path: Path
) -> None:
    retriever, live = written
    assert_same_as_fresh(retriever, live, tmp_path / "fresh")
    manifest = read_manifest(retriever.path)
    # live count, rows ever given (never reused), one version per write, BM25 over the live documents
    assert (manifest["count"], manifest["next_row"], manifest["generation"]) == (44, 46, 3)
    assert manifest["lexical"]["documents"] == 44 and manifest == retriever.manifest
    # the deleted document no longer matches a lexical query; the upserted one matches its new text only
    deleted = {d.id: d for d in corpus(40, seed=1)}["d5"]
    assert "d5" not in [h.id for h in retriever.search([deleted.text], 10, mode="lexical")[0]]
    assert retriever.search(["fresh words"], 1, mode="lexical")[0][0].id == "d3"
    old_d3 = {d.id: d for d in corpus(40, seed=1)}["d3"].text
    assert "d3" not in [h.id for h in retriever.search([old_d3], 10, mode="lexical")[0]]
    # metadata filters read the written version's metadata: the upserted document's, none of the deleted one's
    assert [h.id for h in retriever.search(["w1a"], 5, filter="n == -3")[0]] == ["d3"]
    assert retriever.search(["w1a"], 5, filter="n == 5")[0] == []
    assert {h.id for h in retriever.search(["w1a"], 50, filter="n < 3")[0]} == {"d0", "d1", "d2", "d3", "n1", "n2"}


def test_compaction_keeps_the_answers_and_a_new_reader_sees_the_writes(
    written: tuple[Retriever, dict[str, Document]], tmp_path: Path
) -> None:
    retriever, live = written
    before = read_manifest(retriever.path)
    assert retriever.compact() == 1  # Milvus Lite: the live rows rewritten as one segment, a new version
    after = read_manifest(retriever.path)
    assert after["generation"] == before["generation"] + 1 and after["count"] == 44 and after["next_row"] == 46
    assert_same_as_fresh(retriever, live, tmp_path / "fresh", compacted=True)
    retriever.close()  # Milvus Lite: one process at a time, one server per folder
    with Retriever.load(retriever.path, encoder=ENCODER) as again:
        assert again.count == 44 and again.search(["fresh words"], 1, mode="lexical")[0][0].id == "d3"
        assert again.existing_ids(["d3", "d5", "n9"]) == ["d3", "n9"]


def test_refusals_and_failures_write_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import whitevec.index.milvus.writes as milvus_writes

    docs = corpus(12, seed=4)
    with build(tmp_path / "index", docs) as retriever:
        # a write failing after its Milvus calls (on the copy of the in-folder Lite data): the index as it was
        with monkeypatch.context() as patched:
            patched.setattr(
                milvus_writes, "write_manifest", lambda *_: (_ for _ in ()).throw(OSError("disk full"))
            )
            with pytest.raises(OSError, match="disk full"):
                retriever.delete(["d1"])
        assert retriever.existing_ids(["d1"]) == ["d1"] and "d1" in matching(retriever, [docs[1].text])[0]
        before = read_manifest(retriever.path)
        with pytest.raises(BadInputError, match=r"document id 'd2' is already in the index .*on_existing"):
            retriever.add([Document("x", "w1a"), Document("d2", "w2a")])
        assert retriever.write([Document("d2", "w2a")], on_existing="skip").skipped == 1
        assert read_manifest(retriever.path) == before and retriever.count == 12
        assert retriever.delete(["nope"]).missing == ["nope"]
        assert read_manifest(retriever.path) == before
        # a version another writer made since this one loaded: refused before any Milvus call
        stale = dict(retriever.manifest, manifest_sha256="0" * 64)
        retriever.manifest = stale
        with pytest.raises(BadInputError, match="another writer since it was loaded"):
            retriever.add([Document("y", "w3a")])
        retriever.refresh()  # moves to the folder's version (the stale checksum differs from it)
        assert retriever.add([Document("y", "w3a")]) == 13
        # an older Milvus index whose BM25 index lies in the folder: these writes would leave it behind
        bm25s = {**retriever.manifest["lexical"], "library": "bm25s"}
        retriever.manifest = dict(retriever.manifest, lexical=bm25s)
        with pytest.raises(BadInputError, match="BM25 index lies in the folder"):
            retriever.delete(["y"])


def test_a_reader_on_a_shared_collection_follows_a_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Vectors outside the folder (one collection, written in place): a second Retriever, as a server, sees the
    other's writes after refresh(), its older version meanwhile shows none of the added rows, and a refresh that
    fails leaves it serving that version."""
    import whitevec.index.versions as versions  # the Retriever gives the Milvus writer its current_version

    docs = corpus(20, seed=5)
    uri = str(tmp_path / "shared" / "store.db")
    build(tmp_path / "index", docs, uri=uri).close()
    with (
        Retriever.load(tmp_path / "index", encoder=ENCODER) as writer,
        Retriever.load(tmp_path / "index", encoder=ENCODER) as reader,
    ):
        writer.write([Document("late", "w40a w41b w42a"), Document("d1", "w50a w51b")], on_existing="replace")
        assert "late" not in matching(reader, ["w40a w41b w42a"])[0]
        with monkeypatch.context() as patched:
            patched.setattr(versions, "open_version", failing("disk gone"))
            with pytest.raises(OSError, match="disk gone"):
                reader.refresh()
        assert "late" not in matching(reader, ["w40a w41b w42a"])[0] and reader.count == 20
        assert reader.refresh() and not reader.refresh()
        assert "late" in matching(reader, ["w40a w41b w42a"])[0]
        hit = reader.search(["w50a w51b"], 1)[0][0]
        assert (hit.id, hit.text, hit.metadata) == ("d1", "w50a w51b", None)
        assert reader.count == 21 and reader.manifest["generation"] == 1


def test_refit_on_milvus_is_a_fresh_build_with_the_new_fit(tmp_path: Path) -> None:
    docs = corpus(30, seed=6)
    with build(tmp_path / "index", docs[:10]) as retriever:
        retriever.add(docs[10:])
        retriever.delete(["d0"])
        retriever.refit("whitening")
        assert retriever.manifest["transform"]["spec"] == "whitening" and retriever.count == 29
        assert retriever.manifest["generation"] == 3  # after the add and the delete: versions only grow
        queries = [d.text for d in docs[1::5]]
        with Retriever.build(
            docs[1:], tmp_path / "fresh", encoder=ENCODER, transform="whitening", backend="milvus", lexical="bm25"
        ) as fresh:
            for mode in ("dense", "lexical"):
                assert answers(retriever, queries, mode) == answers(fresh, queries, mode), mode


def test_the_command_line_on_a_milvus_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.static_helpers import tiny_static_folder
    from tests.test_cli import run_cli

    texts = sentences(34, seed=7)  # words the tiny static model knows
    (tmp_path / "c.jsonl").write_text(
        "".join(json.dumps({"id": f"d{i}", "text": texts[i]}) + "\n" for i in range(30))
    )
    more = tmp_path / "more.jsonl"
    more.write_text("".join(json.dumps({"id": f"n{i}", "text": texts[30 + i]}) + "\n" for i in range(4)))
    idx, model = str(tmp_path / "idx"), str(tiny_static_folder(tmp_path / "static"))
    build_args = ["--corpus", str(tmp_path / "c.jsonl"), "--out", idx, "--model", model, "--backend", "milvus"]
    code, _, err = run_cli(["index", "build", *build_args, "--lexical", "bm25", "-q"], capsys)
    assert code == 0, err
    code, _, err = run_cli(["index", "add", idx, "--corpus", str(more)], capsys)
    assert code == 0 and "added 4, replaced 0, skipped 0 documents" in err and "34 documents" in err, err
    code, _, err = run_cli(["index", "add", idx, "--corpus", str(more)], capsys)
    assert code == 2 and err.strip().splitlines()[-1].startswith("whitevec: error: document id 'n0' is already")
    assert read_manifest(idx)["generation"] == 1  # the refused add wrote nothing
    code, _, err = run_cli(["index", "add", idx, "--corpus", str(more), "--on-existing", "replace"], capsys)
    assert code == 0 and "added 0, replaced 4" in err, err
    code, _, err = run_cli(["index", "delete", idx, "n1", "d2", "nowhere"], capsys)
    assert code == 1 and "deleted 2 documents" in err and "1 id(s) were not in the index: 'nowhere'" in err, err
    code, out, _ = run_cli(["index", "info", idx], capsys)
    state = json.loads(out)["state"]
    assert {k: state[k] for k in ("live", "deleted", "segments", "version")} == {
        "live": 32, "deleted": 0, "segments": 1, "version": 3,
    }  # fmt: skip
    code, _, err = run_cli(["index", "compact", idx], capsys)
    assert code == 0 and "merged 1 segment(s)" in err and "32 documents" in err, err
    code, out, _ = run_cli(["search", idx, texts[33], "-k", "1", "--mode", "lexical", "--format", "json"], capsys)
    assert code == 0 and json.loads(out)[0]["hits"][0]["id"] == "n3"
    code, _, err = run_cli(["index", "refit", idx, "--transform", "whitening-8"], capsys)
    assert code == 0 and "refitted on 32 documents" in err, err


def test_http_writes_on_a_milvus_index(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
    from fastapi.testclient import TestClient

    from whitevec.service.app import create_app
    from whitevec.service.settings import ServeSettings

    with build(tmp_path / "index", corpus(12, seed=8)) as retriever:
        app = create_app(retriever, ServeSettings(writable=True))  # type: ignore[arg-type]
        with TestClient(app) as client:
            new = {"documents": [{"id": "n1", "text": "w90a w91b", "metadata": {"n": 1}}]}
            answer = client.post("/documents", json=new)
            assert answer.json() == {
                "added": 1,
                "replaced": 0,
                "skipped": 0,
                "count": 13,
                "segments": 1,
                "version": 1,
            }
            answer = client.post("/documents", json=new)
            assert answer.status_code == 409 and "'n1' is already in the index" in answer.json()["detail"]
            new["documents"][0]["text"] = "w92a w93b"
            answer = client.post("/documents", json={**new, "on_existing": "replace"})
            assert answer.status_code == 200 and answer.json()["replaced"] == 1 and answer.json()["version"] == 2
            top = client.post("/search", json={"queries": ["w92a w93b"], "k": 1, "mode": "lexical"}).json()
            assert top["results"][0]["ids"] == ["n1"]
            answer = client.post("/documents/delete", json={"ids": ["n1", "zz"]})
            assert (answer.json()["deleted"], answer.json()["missing"]) == (1, ["zz"])
            top = client.post("/search", json={"queries": ["w92a w93b"], "k": 3, "mode": "lexical"}).json()
            assert "n1" not in top["results"][0]["ids"]
            assert client.post("/compact").json() == {"merged": 1, "count": 12, "segments": 1, "version": 4}
            assert client.get("/info").json()["index"] == {"count": 12, "deleted": 0, "segments": 1, "version": 4}


def test_writes_to_documents_kept_in_the_collection(tmp_path: Path) -> None:
    """An index built by --engine ray keeps its documents in the collection: they are upserted and deleted
    with its rows."""
    from tests.test_stores import _documents_in_milvus

    docs = corpus(20, seed=9)
    _documents_in_milvus(tmp_path / "idx", docs, ENCODER)
    live = {d.id: d for d in docs}
    with Retriever.load(tmp_path / "idx", encoder=ENCODER) as retriever:
        changed = [Document("d4", "w1a w2a", {"n": 44}), Document("x", "w3a", None)]
        assert retriever.write(changed, on_existing="replace").replaced == 1
        assert retriever.delete(["d0", "zz"]).missing == ["zz"]
        live.update((d.id, d) for d in changed)
        del live["d0"]
        assert retriever.existing_ids(["d0", "d4", "x"]) == ["d4", "x"]
        assert retriever._docs.get([4, 20, 0]) == {4: live["d4"], 20: live["x"]}
        assert retriever.compact() == 1
        queries = [d.text for d in live.values()][::3]
        with Retriever.build(
            list(live.values()), tmp_path / "fresh", encoder=ENCODER, transform="none", backend="milvus"
        ) as fresh:
            assert answers(retriever, queries, "dense") == answers(fresh, queries, "dense")
        assert retriever.count == retriever._docs.count == 20
