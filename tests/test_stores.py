"""The two store protocols. Vector stores: every registered backend implements the protocol whole, a failed add
leaves every backend's index as it was, and FAISS's one-thread searches do not reach other threads. Document
stores: every registered one implements its protocol, and an index whose documents live there gives them back
(ids, texts, metadata) and adds to them or refuses the add in one line."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import HashEncoder, sentences
from whitevec.errors import BadInputError
from whitevec.index import Document, DocumentStore, Retriever, VectorStore, document_store_names, store_names
from whitevec.index.segments import writing as updates_module
from whitevec.index.stores import sqlite_docs as docstore_module
from whitevec.index.stores.documents import document_store_class
from whitevec.index.stores.vector import store_class, stored_form

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _members(protocol: type, *class_attributes: str) -> list[str]:
    """Methods and properties, and the class attributes (annotations only on the protocol)."""
    return sorted(
        {name for name in vars(protocol) if not name.startswith("_")} | {"name", "files", *class_attributes}
    )


PROTOCOL_MEMBERS = _members(VectorStore, "library")
DOCUMENT_PROTOCOL_MEMBERS = _members(DocumentStore)


@pytest.mark.parametrize("name", store_names())
def test_every_registered_store_implements_the_protocol(name: str) -> None:
    cls = store_class(name)
    missing = [member for member in PROTOCOL_MEMBERS if not hasattr(cls, member)]
    assert missing == [] and cls.name == name
    assert {"create", "open", "stage_add", "save", "reopen", "abandon", "drop", "close", "delete"} <= set(
        PROTOCOL_MEMBERS
    )
    # What generic code asks the backend instead of naming it: its library's version, its own folder entries,
    # and the segment hooks (a store with its own writer refuses those).
    assert {"library_version", "folder_entries", "empty_copy", "kept_vectors", "add_kept"} <= set(PROTOCOL_MEMBERS)
    assert isinstance(cls.library, str) and cls.library


class _KeepsItsOwnLexical:
    """A store registered by a third party that keeps the lexical part itself, takes only the ``plain`` analyzer
    and keeps a data folder of its own beside its files."""

    name = "own-lexical"
    keeps_lexical = True

    @classmethod
    def check_analyzer(cls, analyzer: str) -> None:
        if analyzer != "plain":
            raise BadInputError(f"own-lexical takes the plain analyzer only, not {analyzer!r}")

    @classmethod
    def folder_entries(cls, manifest: dict[str, Any]) -> tuple[str, ...]:
        return ("own.db",)


def test_generic_code_asks_the_store_for_its_analyzers_and_folder_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lexical check and a version's entries come from the store itself, not from code naming Milvus."""
    from whitevec.index.lexical.bm25 import check_lexical
    from whitevec.index.stores import vector

    monkeypatch.setitem(vector.STORES.entries, _KeepsItsOwnLexical.name, _KeepsItsOwnLexical)
    assert check_lexical("bm25", "plain", backend="own-lexical") == "bm25"
    with pytest.raises(BadInputError, match=r"^own-lexical takes the plain analyzer only, not 'english'$"):
        check_lexical("bm25", "english", backend="own-lexical")
    manifest = {"backend": "own-lexical", "files": {"docs.sqlite": {}}}
    assert vector.version_entries(manifest) == {"manifest.json", "docs.sqlite", "own.db"}


def _backends() -> list[str]:
    names = ["faiss"]
    try:
        import milvus_lite  # noqa: F401
        import pymilvus  # noqa: F401
    except ImportError:
        return names
    return [*names, "milvus"]


@pytest.mark.parametrize("backend", _backends())
def test_a_failed_add_leaves_the_index_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    encoder: Any = HashEncoder()
    docs = [Document(f"d{i}", text) for i, text in enumerate(sentences(40, seed=1))]
    out = tmp_path / "idx"
    retriever = Retriever.build(docs, out, encoder=encoder, transform="whitening", backend=backend)
    queries = sentences(3, seed=2)
    before = [[h.id for h in hits] for hits in retriever.search(queries, k=5)]

    def full_disk(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(docstore_module, "write_docs", full_disk)  # a Milvus index's whole-version add
    monkeypatch.setattr(updates_module, "write_docs", full_disk)  # a FAISS index's new segment
    with pytest.raises(OSError, match="No space"):
        retriever.add([Document("new", "a brand new dog")])
    monkeypatch.undo()
    # the same Retriever still answers as before, and so does the index on disk
    assert retriever.count == 40
    assert [[h.id for h in hits] for hits in retriever.search(queries, k=5)] == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]
    retriever.close()
    with Retriever.load(out, encoder=encoder) as reloaded:
        assert reloaded.count == 40
        assert [[h.id for h in hits] for hits in reloaded.search(queries, k=5)] == before
        assert "new" not in {h.id for h in reloaded.search(["a brand new dog"], k=40)[0]}
        assert reloaded.add([Document("new", "a brand new dog")]) == 41
        assert reloaded.search(["a brand new dog"], k=1)[0][0].id == "new"


def test_faiss_one_thread_searches_stay_on_their_thread() -> None:
    import faiss

    from whitevec.index.faiss.store import one_faiss_thread

    inside, done = threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def small_search() -> None:
        with one_faiss_thread():
            seen["inside"] = faiss.omp_get_max_threads()
            inside.set()
            done.wait(10)
        seen["after"] = faiss.omp_get_max_threads()

    def other_thread() -> None:
        inside.wait(10)
        seen["other"] = faiss.omp_get_max_threads()
        done.set()

    before = faiss.omp_get_max_threads()
    threads = [threading.Thread(target=small_search), threading.Thread(target=other_thread)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert seen == {"inside": 1, "other": before, "after": before}
    assert faiss.omp_get_max_threads() == before


def test_a_failed_milvus_lite_staging_keeps_the_retriever_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "milvus" not in _backends():
        pytest.skip("needs whitevec[milvus]")
    import shutil

    encoder: Any = HashEncoder()
    docs = [Document(f"d{i}", text) for i, text in enumerate(sentences(30, seed=1))]
    retriever = Retriever.build(docs, tmp_path / "idx", encoder=encoder, transform="none", backend="milvus")
    before = [h.id for h in retriever.search(["a dog"], k=5)[0]]

    def full_disk(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "copytree", full_disk)  # the Lite data cannot be copied into the new version
    with pytest.raises(OSError, match="No space"):
        retriever.add([Document("new", "a brand new dog")])
    monkeypatch.undo()
    assert [h.id for h in retriever.search(["a dog"], k=5)[0]] == before
    assert retriever.add([Document("new", "a brand new dog")]) == 31
    retriever.close()


def test_concurrent_adds_to_a_shared_collection_do_not_collide(tmp_path: Path) -> None:
    if "milvus" not in _backends():
        pytest.skip("needs whitevec[milvus]")
    encoder: Any = HashEncoder()
    docs = [Document(f"d{i}", text) for i, text in enumerate(sentences(20, seed=1))]
    out = tmp_path / "idx"
    uri = str(tmp_path / "shared" / "store.db")  # vectors outside the folder: one collection shared by versions
    Retriever.build(docs, out, encoder=encoder, transform="none", backend="milvus", uri=uri).close()
    first, second = Retriever.load(out, encoder=encoder), Retriever.load(out, encoder=encoder)
    outcomes: dict[str, str] = {}

    def add(retriever: Retriever, doc_id: str) -> None:
        try:
            retriever.add([Document(doc_id, f"a new dog {doc_id}")])
            outcomes[doc_id] = "added"
        except Exception as exc:
            outcomes[doc_id] = str(exc)

    threads = [threading.Thread(target=add, args=(r, name)) for r, name in ((first, "x"), (second, "y"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(outcomes.values()).count("added") == 1, outcomes
    assert any("another writer since it was loaded" in v for v in outcomes.values()), outcomes
    first.close()
    second.close()
    with Retriever.load(out, encoder=encoder) as loaded:  # counts agree: no row deleted or doubled
        assert loaded.count == 21 and loaded.store.count == 21
        winner = next(k for k, v in outcomes.items() if v == "added")
        assert loaded.search([f"a new dog {winner}"], k=1)[0][0].id == winner


# --- document stores -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", document_store_names())
def test_every_registered_document_store_implements_the_protocol(name: str) -> None:
    cls = document_store_class(name)
    missing = [member for member in DOCUMENT_PROTOCOL_MEMBERS if not hasattr(cls, member)]
    assert missing == [] and cls.name == name
    assert {"open", "stage_add", "reopen", "close", "get", "existing_ids", "next_row"} <= set(
        DOCUMENT_PROTOCOL_MEMBERS
    )


def _documents_in_sqlite(out: Path, docs: list[Document], encoder: Any) -> None:
    Retriever.build(docs, out, encoder=encoder, transform="none").close()


def _documents_in_milvus(out: Path, docs: list[Document], encoder: Any) -> None:
    """An index whose documents live in its Milvus collection, as --engine ray writes one (the collection is
    filled here, without Ray: a local Milvus build, its documents moved into a collection that keeps them)."""
    from whitevec.index.folder.manifest import write_manifest
    from whitevec.index.folder.snapshot import read_manifest
    from whitevec.index.milvus.store import MilvusStore, new_collection_name

    Retriever.build(docs, out, encoder=encoder, transform="none", backend="milvus").close()
    manifest = read_manifest(out)
    store = MilvusStore(
        str(out / "milvus.db"), new_collection_name(), manifest["dim"], "cosine", create=True, docs=True
    )
    vectors = stored_form(None, encoder.encode([d.text for d in docs]), "cosine")
    metadata = [None if d.metadata is None else json.dumps(d.metadata) for d in docs]
    store.upsert_documents(np.arange(len(docs)), vectors, [d.id for d in docs], [d.text for d in docs], metadata)
    store.flush()
    store.release()
    (out / "docs.sqlite").unlink()
    write_manifest(out, {**manifest, "milvus_collection": store.collection, "docs": "milvus"}, [])


# How a test writes an index whose documents live in each registered store, and whether that store takes adds.
DOCUMENT_WRITERS: dict[str, tuple[Callable[[Path, list[Document], Any], None], bool]] = {
    "sqlite": (_documents_in_sqlite, True),
    "milvus": (_documents_in_milvus, True),
}


def test_every_registered_document_store_is_tested_here() -> None:
    assert sorted(DOCUMENT_WRITERS) == sorted(document_store_names())


@pytest.mark.parametrize("name", document_store_names())
def test_every_document_store_gives_its_documents_back(tmp_path: Path, name: str) -> None:
    if name == "milvus" and "milvus" not in _backends():
        pytest.skip("needs whitevec[milvus]")
    write, takes_adds = DOCUMENT_WRITERS[name]
    encoder: Any = HashEncoder()
    docs = [Document(f"d{i}", t, {"n": i} if i % 3 == 0 else None) for i, t in enumerate(sentences(30, seed=4))]
    out = tmp_path / "idx"
    write(out, docs, encoder)
    with Retriever.load(out, encoder=encoder) as retriever:
        documents: DocumentStore = retriever._docs
        assert type(documents).name == name and documents.count == 30
        assert documents.get([0, 7, 29, 30, -1]) == {0: docs[0], 7: docs[7], 29: docs[29]}
        hit = retriever.search([docs[6].text], k=1)[0][0]
        assert (hit.id, hit.text, hit.metadata) == ("d6", docs[6].text, {"n": 6})
        # metadata filters read every row's metadata from the store, and search within the rows that pass
        assert documents.metadata() == {i: doc.metadata for i, doc in enumerate(docs)}
        (filtered,) = retriever.search([docs[6].text], k=5, filter="n >= 3 and n < 12")
        assert [hit.id for hit in filtered][:1] == ["d6"] and {hit.id for hit in filtered} == {"d3", "d6", "d9"}
        if takes_adds:
            assert retriever.add([Document("new", "a brand new dog", {"n": -1})]) == 31
            assert retriever._docs.get([30]) == {30: Document("new", "a brand new dog", {"n": -1})}
        else:
            with pytest.raises(BadInputError, match="adding to it is not supported"):
                retriever.add([Document("new", "a brand new dog")])
            assert retriever.count == 30 and retriever._docs.count == 30
