"""The vector-store protocol: every registered backend implements it whole, a failed add leaves every backend's
index as it was, and FAISS's one-thread searches do not reach other threads."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.index_helpers import HashEncoder, sentences
from whitevec.index import Document, Retriever, VectorStore, store_names
from whitevec.index import retriever as retriever_module
from whitevec.index.store import store_class

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# Methods and properties, and the two class attributes (annotations only on the protocol).
PROTOCOL_MEMBERS = sorted({name for name in vars(VectorStore) if not name.startswith("_")} | {"name", "files"})


@pytest.mark.parametrize("name", store_names())
def test_every_registered_store_implements_the_protocol(name: str) -> None:
    cls = store_class(name)
    missing = [member for member in PROTOCOL_MEMBERS if not hasattr(cls, member)]
    assert missing == [] and cls.name == name
    assert {"create", "open", "stage_add", "save", "reopen", "abandon", "drop", "close", "delete"} <= set(
        PROTOCOL_MEMBERS
    )


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

    monkeypatch.setattr(retriever_module, "write_docs", full_disk)
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

    from whitevec.index.faiss_store import _one_thread

    inside, done = threading.Event(), threading.Event()
    seen: dict[str, int] = {}

    def small_search() -> None:
        with _one_thread():
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
