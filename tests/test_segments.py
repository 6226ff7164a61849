"""Writes to a built index by segments (whitevec.index.segments.writing): adds, upserts, deletes and merges give
the answers a fresh build of the live documents gives, and rewrite nothing already written."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import HashEncoder, sentences
from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError, CorruptFileError, WhitevecWarning
from whitevec.index import Retriever, read_manifest
from whitevec.index.faiss.library import INDEX_FILE
from whitevec.index.folder.layout import DELETED_FILE, LEXICAL_COUNTS
from whitevec.index.segments.requests import ON_EXISTING
from whitevec.index.segments.writing import COMPACT_DELETED_SHARE, MAX_SEGMENTS
from whitevec.workflows.index_writes import ON_EXISTING as WORKFLOW_ON_EXISTING

TEXTS = sentences(400, seed=11)
QUERIES = sentences(12, seed=99)


def docs(start: int, stop: int, tag: str = "d") -> list[Document]:
    return [Document(f"{tag}{i}", TEXTS[i], {"n": i, "even": i % 2 == 0}) for i in range(start, stop)]


def build(folder: Path, documents: list[Document], **options: Any) -> Retriever:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WhitevecWarning)
        return Retriever.build(documents, folder, encoder=HashEncoder(dim=16), **options)  # type: ignore[arg-type]


def ranked(retriever: Retriever, k: int = 10, **options: Any) -> list[list[str]]:
    return [[hit.id for hit in hits] for hits in retriever.search(QUERIES, k, **options)]


@pytest.mark.parametrize("encoding", ["float32", "fp16"])
def test_any_sequence_of_writes_answers_as_a_fresh_build_of_the_live_documents(
    tmp_path: Path, encoding: str
) -> None:
    rng = np.random.default_rng(5)
    live = {d.id: d for d in docs(0, 150)}
    index = build(tmp_path / "idx", list(live.values()), index_params={"encoding": encoding}, lexical="bm25")
    added = 150
    # Ending on deletes and an upsert: their tombstones are still there (a compaction would drop them).
    actions = ("add", "delete", "upsert", "compact") * 2 + ("add", "add", "delete", "upsert", "delete")
    for step, action in enumerate(actions):
        if action == "add":
            batch = docs(added, added + int(rng.integers(1, 12)))
            added += len(batch)
            index.add(batch)
            live.update((d.id, d) for d in batch)
        elif action == "delete":
            gone = list(rng.choice(sorted(live), size=6, replace=False))
            assert index.delete(gone).deleted == 6
            for doc_id in gone:
                del live[doc_id]
        elif action == "upsert":
            doc_id = sorted(live)[int(rng.integers(len(live)))]
            changed = Document(doc_id, TEXTS[399 - step], {"n": -step, "even": False})
            index.upsert([changed])
            live[doc_id] = changed
        else:
            index.compact()
    assert index.count == len(live) and len(index.manifest["segments"]) > 1 and index.manifest["deleted"] > 0
    fresh = build(tmp_path / "fresh", list(live.values()), index_params={"encoding": encoding}, lexical="bm25")
    assert ranked(index, mode="dense") == ranked(fresh, mode="dense")
    for expression in ("n < 100", "even == true and n >= 150", "n < 0"):
        assert ranked(index, filter=expression, mode="dense") == ranked(fresh, filter=expression, mode="dense")
    got = {hit.id: hit.metadata for hits in index.search(QUERIES, len(live), mode="dense") for hit in hits}
    assert got == {doc_id: doc.metadata for doc_id, doc in live.items()}  # every live one, none deleted
    # BM25 weighted by every segment's live documents: each document's score as the fresh build's, to the bit.
    assert _lexical_scores(index, len(live)) == _lexical_scores(fresh, len(live))
    with Retriever.load(tmp_path / "idx", encoder=HashEncoder(dim=16)) as loaded:  # type: ignore[arg-type]
        assert ranked(loaded, mode="dense") == ranked(fresh, mode="dense")
    index.compact()
    assert ranked(index, mode="lexical") == ranked(fresh, mode="lexical")  # merged: the same BM25 weights
    assert ranked(index) == ranked(fresh)  # hybrid


def test_the_first_write_analyses_only_its_own_documents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build keeps the term counts it took: adding 5 documents to 100 analyses those 5 texts, not the 100
    again (which cost 22.6 s before adding 10 documents to 100,000)."""
    from whitevec.index.lexical.analyzers import Analyzer

    index = build(tmp_path / "idx", docs(0, 100), lexical="bm25")
    analysed: list[int] = []
    real = Analyzer.analyze

    def counting(self: Analyzer, texts: Any) -> list[list[str]]:
        analysed.append(len(texts))
        return real(self, texts)

    monkeypatch.setattr(Analyzer, "analyze", counting)
    index.add(docs(100, 105))
    assert analysed == [5]


def test_a_write_links_what_it_does_not_change_and_writes_only_its_own_files(tmp_path: Path) -> None:
    index = build(tmp_path / "idx", docs(0, 100), lexical="bm25")
    built = {name: os.stat(tmp_path / "idx" / name).st_ino for name in index.manifest["files"]}
    index.add(docs(100, 105))
    files = index.manifest["files"]
    assert {name: os.stat(tmp_path / "idx" / name).st_ino for name in built} == built  # the same files, linked
    prefix = index.manifest["segments"][1]["prefix"]
    written = sorted(set(files) - set(built))
    assert LEXICAL_COUNTS in built  # the build's term counts, written by the build
    assert written and all(name.startswith((prefix, "template.")) for name in written)
    assert index.manifest["segments"][1] == {**index.manifest["segments"][1], "base": 100, "rows": 5}
    index.delete(["d3"])
    assert set(index.manifest["files"]) - set(files) == {DELETED_FILE}
    read_manifest(tmp_path / "idx")  # every checksum, the linked files' included


def test_trained_codes_of_a_new_segment_come_from_the_build(tmp_path: Path) -> None:
    """PQ codes added by segments are the codes one index would hold with the same codebooks: an exhaustive
    search over the segments answers exactly as the whole index does."""
    index = build(tmp_path / "idx", docs(0, 300), index_params={"encoding": "pq4x2"})
    whole: Any = index.store.stage_add(tmp_path / "unused")  # the build's store, copied, codebooks and all
    more = docs(300, 330)
    whole.add(np.arange(300, 330), index.embed([d.text for d in more]))
    index.add(more)
    vectors = index.embed(QUERIES)
    scores, rows = index.store.search(vectors, 10)
    want_scores, want_rows = whole.search(vectors, 10)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-6)
    assert "template.index.faiss" in index.manifest["files"]


def test_on_existing_refuses_skips_or_replaces_a_held_id(tmp_path: Path) -> None:
    index = build(tmp_path / "idx", docs(0, 50))
    clash = [Document("d7", TEXTS[300]), Document("new", TEXTS[301])]
    before = read_manifest(tmp_path / "idx")
    with pytest.raises(BadInputError, match="'d7' is already in the index"):
        index.add(clash)
    assert read_manifest(tmp_path / "idx") == before  # nothing written
    skipped = index.write(clash, on_existing="skip")
    assert (skipped.added, skipped.replaced, skipped.skipped, skipped.count) == (1, 0, 1, 51)
    assert index.search([TEXTS[7]], 1)[0][0].id == "d7"
    replaced = index.write([Document("d7", TEXTS[302])], on_existing="replace")
    assert (replaced.added, replaced.replaced, replaced.count) == (0, 1, 51)
    assert index.search([TEXTS[302]], 1)[0][0].id == "d7"
    assert all(hit.id != "d7" for hit in index.search([TEXTS[7]], 3)[0])
    with pytest.raises(BadInputError, match="unknown on_existing 'merge'"):
        index.add(clash, on_existing="merge")
    assert ON_EXISTING == WORKFLOW_ON_EXISTING


def test_a_delete_reports_ids_the_index_does_not_hold_and_deletes_the_rest(tmp_path: Path) -> None:
    index = build(tmp_path / "idx", docs(0, 20))
    result = index.delete(["d1", "zz", "d2", "d1"])
    assert (result.deleted, result.missing) == (2, ["zz"])
    assert index.count == 18 and index.manifest["deleted"] == 2
    for bad, needle in (([], "no document ids"), ("d1", "not one string"), ([""], "non-empty string")):
        with pytest.raises(BadInputError, match=needle):
            index.delete(bad)  # type: ignore[arg-type]
    index.delete([f"d{i}" for i in range(20)])
    assert index.count == 0
    hits = index.search(QUERIES[:1], 5)
    assert hits[0] == [] and hits[0].note == "the index holds no documents"


def test_merges_follow_the_segment_count_and_the_deleted_share(tmp_path: Path) -> None:
    index = build(tmp_path / "idx", docs(0, 200))
    for i in range(MAX_SEGMENTS):
        index.add(docs(200 + 2 * i, 202 + 2 * i))
    segments = index.manifest["segments"]
    assert len(segments) == 2 and segments[0]["rows"] == 200 and segments[1]["rows"] == 2 * MAX_SEGMENTS
    index.delete([f"d{i}" for i in range(int(COMPACT_DELETED_SHARE * 216))])  # at the share: kept
    assert index.manifest.get("deleted") and len(index.manifest["segments"]) == 2
    index.delete(["d150"])  # past it: every segment merged, the deleted rows dropped
    assert "deleted" not in index.manifest and index.manifest["segments"][0]["prefix"] == ""
    assert len(index.manifest["segments"]) == 1 and index.count == 216 - 44


def test_a_write_to_an_index_another_writer_moved_on_is_refused(tmp_path: Path) -> None:
    first = build(tmp_path / "idx", docs(0, 30))
    second = Retriever.load(tmp_path / "idx", encoder=HashEncoder(dim=16))  # type: ignore[arg-type]
    second.add(docs(30, 32))
    with pytest.raises(BadInputError, match="written to by another writer"):
        first.delete(["d1"])
    with pytest.raises(BadInputError, match="written to by another writer"):
        first.add(docs(40, 41))
    assert read_manifest(tmp_path / "idx")["count"] == 32


def test_a_damaged_tombstone_list_is_refused(tmp_path: Path) -> None:
    index = build(tmp_path / "idx", docs(0, 30))
    index.delete(["d4"])
    index.close()
    np.save(tmp_path / "idx" / DELETED_FILE, np.array([5], dtype=np.int64))  # another row deleted by hand
    with pytest.raises(CorruptFileError, match="fails its checksum"):
        Retriever.load(tmp_path / "idx", encoder=HashEncoder(dim=16))  # type: ignore[arg-type]
    assert INDEX_FILE in read_manifest(tmp_path / "idx", verify=False)["files"]


def test_a_refit_fits_the_transform_on_every_live_document(tmp_path: Path) -> None:
    first, later = docs(0, 60), docs(60, 160)
    index = build(tmp_path / "idx", first, transform="whitening-8", lexical="bm25")
    index.add(later)
    index.delete(["d61"])
    live = [d for d in first + later if d.id != "d61"]
    fresh = build(tmp_path / "fresh", live, transform="whitening-8", lexical="bm25")
    assert ranked(index, mode="dense") != ranked(fresh, mode="dense")  # a fit on the first 60 alone differs
    index.refit()
    assert index.manifest["transform"]["fit_rows"] == len(live) == index.count
    assert ranked(index, mode="dense") == ranked(fresh, mode="dense")
    assert ranked(index) == ranked(fresh)  # hybrid: the lexical part rebuilt too
    with Retriever.load(tmp_path / "idx", encoder=HashEncoder(dim=16)) as loaded:  # type: ignore[arg-type]
        assert ranked(loaded, mode="dense") == ranked(fresh, mode="dense")
    index.refit("whitening-4")
    assert index.manifest["transform"]["spec"] == "whitening-4" and index.dim == 4


def test_export_faiss_asks_for_a_merge_first(tmp_path: Path) -> None:
    import faiss

    from whitevec.export import export_faiss

    index = build(tmp_path / "idx", docs(0, 40))
    index.add(docs(40, 45))
    with pytest.raises(BadInputError, match="whitevec index compact"):
        export_faiss(tmp_path / "idx", tmp_path / "out.faiss")
    index.compact()
    export_faiss(tmp_path / "idx", tmp_path / "out.faiss")
    assert faiss.read_index(str(tmp_path / "out.faiss")).ntotal == 45


def test_a_reader_follows_another_writer_reading_only_the_new_segments(tmp_path: Path) -> None:
    writer = build(tmp_path / "idx", docs(0, 80), lexical="bm25")
    writer.add(docs(80, 81))  # the first write: the build's segment gets its term counts
    reader = Retriever.load(tmp_path / "idx", encoder=HashEncoder(dim=16))  # type: ignore[arg-type]
    assert reader.refresh() is False  # nothing new
    kept_store = reader.store.segments[0].store  # type: ignore[attr-defined]
    writer.add(docs(81, 90))
    writer.delete(["d5"])
    assert reader.refresh() is True
    assert reader.count == writer.count == 89 and ranked(reader) == ranked(writer)
    build_segment = reader.store.segments[0].store  # type: ignore[attr-defined]
    assert build_segment is kept_store  # the build's segment was not read again
    writer.delete([f"d{i}" for i in range(10, 19)])
    writer.compact()  # 80 rows again under the build's prefix, but new files: read again, not reused
    assert writer.manifest["segments"] == [{"prefix": "", "base": 0, "rows": 80, **_lexical(writer)}]
    assert reader.refresh() is True and ranked(reader) == ranked(writer)
    assert reader.store is not kept_store
    writer.refit("whitening-8")  # another transform: the whole index read again
    assert reader.refresh() is True and reader.transform is not None and ranked(reader) == ranked(writer)
    reader.close()


def _lexical(index: Retriever) -> dict[str, Any]:
    return {"lexical": index.manifest["segments"][0]["lexical"]}


def test_searches_go_on_while_an_add_encodes(tmp_path: Path) -> None:
    import threading

    class GatedEncoder(HashEncoder):
        """Holds the add's encoding (its texts) until released; queries encode at once."""

        def __init__(self) -> None:
            super().__init__(dim=16)
            self.encoding_docs, self.release = threading.Event(), threading.Event()

        def encode(self, texts: Any, batch_size: int | None = None, show_progress: bool | None = None) -> Any:
            if texts and texts[0] == TEXTS[300]:
                self.encoding_docs.set()
                assert self.release.wait(60), "never released"
            return super().encode(texts, batch_size, show_progress)

    encoder = GatedEncoder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WhitevecWarning)
        index = Retriever.build(docs(0, 50), tmp_path / "idx", encoder=encoder)  # type: ignore[arg-type]
    adding = threading.Thread(target=index.add, args=(docs(300, 305),))
    adding.start()
    try:
        assert encoder.encoding_docs.wait(60)
        searched = threading.Event()
        threading.Thread(target=lambda: (index.search(QUERIES[:2], 3), searched.set())).start()
        assert searched.wait(30), "a search waited for the add's encoding"
    finally:
        encoder.release.set()
        adding.join()
    assert index.count == 55


def _lexical_scores(index: Retriever, k: int) -> list[dict[str, float]]:
    return [{hit.id: hit.score for hit in hits} for hits in index.search(QUERIES, k, mode="lexical")]
