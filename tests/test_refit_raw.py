"""Raw vectors kept at build (``keep_raw_vectors``, ``--keep-raw-vectors``): adds and merges keep them, a refit
fits on them without calling the encoder and is a fresh build of the live documents; an index built without them
refits by encoding, as before."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import HashEncoder, sentences
from tests.static_helpers import tiny_static_folder
from tests.test_cli import run_cli
from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError, CorruptFileError, WhitevecWarning
from whitevec.index import Retriever, read_manifest
from whitevec.index.folder.layout import RAW_VECTORS_FILE
from whitevec.index.folder.raw_vectors import live_raw_vectors
from whitevec.index.segments.writing import IndexState, live_rows
from whitevec.index.writes import SegmentWriter
from whitevec.transforms import Transform

TEXTS = sentences(300, seed=21)
QUERIES = sentences(12, seed=98)


class NoEncodeEncoder(HashEncoder):
    """The index's encoder (the same description) that must not be asked to encode documents."""

    def encode(self, texts: Any, batch_size: int | None = None, show_progress: bool | None = None) -> Any:
        raise AssertionError(f"encoded {len(texts)} texts")


def segments_of(index: Retriever) -> IndexState:
    """The loaded version's segments and deleted rows, as the index's segment writer holds them."""
    writer = index._writer
    assert isinstance(writer, SegmentWriter)
    return writer.state


def docs(start: int, stop: int) -> list[Document]:
    return [Document(f"d{i}", TEXTS[i], {"n": i}) for i in range(start, stop)]


def build(folder: Path, documents: list[Document], **options: Any) -> Retriever:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WhitevecWarning)
        return Retriever.build(documents, folder, encoder=HashEncoder(dim=16), **options)  # type: ignore[arg-type]


def ranked(retriever: Retriever, **options: Any) -> list[list[str]]:
    return [[hit.id for hit in hits] for hits in retriever.search(QUERIES, 10, **options)]


def written(index: Retriever) -> dict[str, Document]:
    """After adds, upserts, deletes and a merge: the live documents, by id (tombstones left at the end)."""
    live = {d.id: d for d in docs(0, 80)}
    index.add(docs(80, 150))
    index.upsert([Document("d3", TEXTS[290], {"n": -3})])
    live.update({d.id: d for d in docs(80, 150)} | {"d3": Document("d3", TEXTS[290], {"n": -3})})
    index.delete(["d5", "d90"])
    index.compact()
    index.add(docs(150, 170))
    index.delete(["d7", "d160"])
    live.update({d.id: d for d in docs(150, 170)})
    for gone in ("d5", "d90", "d7", "d160"):
        del live[gone]
    return live


def test_a_refit_on_raw_vectors_is_a_fresh_build_and_encodes_nothing(tmp_path: Path) -> None:
    index = build(tmp_path / "idx", docs(0, 80), transform="whitening-8", lexical="bm25", keep_raw_vectors=True)
    build_raw = os.stat(tmp_path / "idx" / RAW_VECTORS_FILE).st_ino
    index.add(docs(200, 201))
    assert os.stat(tmp_path / "idx" / RAW_VECTORS_FILE).st_ino == build_raw  # linked, not rewritten
    index.delete(["d200"])
    live = written(index)
    state = segments_of(index)
    assert len(state.segments) > 1 and state.deleted.size  # segments and tombstones
    kept = live_raw_vectors(index.path, index.manifest, state.segments, live_rows(state))
    order = [doc.id for segment in state.segments for doc in _segment_docs(segment)]
    live_order = [doc_id for doc_id, alive in zip(order, live_rows(state), strict=True) if alive]
    assert sorted(live_order) == sorted(live)
    np.testing.assert_array_equal(kept, HashEncoder(dim=16).encode([live[i].text for i in live_order]))
    index.close()
    with Retriever.load(tmp_path / "idx", encoder=NoEncodeEncoder(dim=16)) as refitting:  # type: ignore[arg-type]
        refitting.refit()
        assert refitting.manifest["raw_vectors"] == {"dtype": "float32"}  # kept: it can be refit again
        refitting.refit("whitening-4")
        refitting.refit("whitening-8")
    fresh_docs = [live[i] for i in live_order]
    fresh = build(tmp_path / "fresh", fresh_docs, transform="whitening-8", lexical="bm25", keep_raw_vectors=True)
    with Retriever.load(tmp_path / "idx", encoder=HashEncoder(dim=16)) as refit:  # type: ignore[arg-type]
        assert refit.count == len(live) and refit.manifest["transform"]["fit_rows"] == len(live)
        assert ranked(refit, mode="dense") == ranked(fresh, mode="dense")
        assert ranked(refit) == ranked(fresh)  # hybrid: the lexical part rebuilt as a build does
    probe = np.random.default_rng(0).normal(size=(20, 16)).astype(np.float32)
    ours, theirs = (Transform.load(folder / "transform.safetensors") for folder in (tmp_path / "idx", fresh.path))
    np.testing.assert_allclose(ours.transform(probe), theirs.transform(probe), rtol=1e-4, atol=1e-5)
    raws = [np.load(folder / RAW_VECTORS_FILE) for folder in (tmp_path / "idx", fresh.path)]
    np.testing.assert_array_equal(*raws)
    read_manifest(tmp_path / "idx")  # every checksum, the raw vectors' among them


def _segment_docs(segment: Any) -> list[Document]:
    found = segment.docs.get(range(segment.rows))
    return [found[row] if row in found else Document(f"?{row}", "") for row in range(segment.rows)]


def test_a_damaged_raw_vectors_file_is_refused_in_one_line(tmp_path: Path) -> None:
    """A load does not read the raw vectors (they can be as large as the index); what reads them checks them."""
    index = build(tmp_path / "idx", docs(0, 40), transform="whitening-4", keep_raw_vectors=True)
    index.add(docs(40, 50))
    name = next(n for n in index.manifest["files"] if n.endswith(RAW_VECTORS_FILE) and n != RAW_VECTORS_FILE)
    with open(tmp_path / "idx" / name, "r+b") as damaged:
        damaged.seek(-3, os.SEEK_END)
        damaged.write(b"\x7f\x7f\x7f")
    with pytest.raises(CorruptFileError, match=f"{name} fails its checksum"):
        index.refit()
    with pytest.raises(CorruptFileError, match=f"{name} fails its checksum"):
        index.compact()  # a merge carries the raw vectors: read, so checked
    with pytest.raises(CorruptFileError, match=f"{name} fails its checksum"):
        read_manifest(tmp_path / "idx")  # index info
    assert index.manifest["generation"] == 1  # nothing written


def test_an_index_without_raw_vectors_refits_by_encoding_as_before(tmp_path: Path) -> None:
    index = build(tmp_path / "idx", docs(0, 40), transform="whitening-4")
    index.add(docs(40, 50))
    assert "raw_vectors" not in index.manifest
    assert not any(name.endswith(RAW_VECTORS_FILE) for name in index.manifest["files"])
    index.close()
    refitting = Retriever.load(tmp_path / "idx", encoder=NoEncodeEncoder(dim=16))  # type: ignore[arg-type]
    with refitting, pytest.raises(AssertionError, match="encoded 50 texts"):
        refitting.refit()
    with pytest.raises(BadInputError, match="--keep-raw-vectors is for --backend faiss"):
        build(tmp_path / "milvus", docs(0, 5), backend="milvus", keep_raw_vectors=True)
    assert not (tmp_path / "milvus").exists()


def test_keep_raw_vectors_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = sentences(40, seed=4)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts[:30]) + "\n")
    more = tmp_path / "more.jsonl"
    more.write_text("".join(json.dumps({"id": f"n{i}", "text": texts[i]}) + "\n" for i in range(30, 36)))
    model = str(tiny_static_folder(tmp_path / "static"))
    build = ["index", "build", "--corpus", str(corpus), "--model", model, "--transform", "whitening-8"]
    for out, flag in (("kept", ["--keep-raw-vectors"]), ("plain", [])):
        code, _, err = run_cli([*build, "--out", str(tmp_path / out), *flag], capsys)
        assert code == 0, err
        code, _, err = run_cli(["index", "add", str(tmp_path / out), "--corpus", str(more)], capsys)
        assert code == 0, err
    code, out, _ = run_cli(["index", "info", str(tmp_path / "kept")], capsys)
    raw = json.loads(out)["state"]["raw_vectors"]
    dim = read_manifest(tmp_path / "kept")["encoder_dim"]
    assert raw["kept"] is True and raw["bytes"] > 36 * dim * 4 and raw["bytes_per_row"] > dim * 4, raw
    code, out, _ = run_cli(["index", "info", str(tmp_path / "plain")], capsys)
    assert json.loads(out)["state"]["raw_vectors"] == {
        "kept": False,
        "dtype": None,
        "bytes": 0,
        "bytes_per_row": None,
    }
    code, _, err = run_cli(["index", "refit", str(tmp_path / "kept")], capsys)
    assert code == 0 and "refitted on 36 documents" in err and "encoding every document" not in err, err
    code, _, err = run_cli(["index", "refit", str(tmp_path / "plain")], capsys)
    assert code == 0 and "refitted on 36 documents" in err, err
    notice = [line for line in err.splitlines() if "encoding every document" in line]
    assert len(notice) == 1 and "--keep-raw-vectors" in notice[0], err
    for extra, needle in (
        (["--backend", "milvus"], "--keep-raw-vectors is for --engine local builds on --backend faiss"),
        (["--engine", "ray", "--backend", "milvus"], "is for --engine local builds; a Ray build keeps none"),
        (["--engine", "ray"], "--keep-raw-vectors is for --engine local builds; a Ray build keeps none"),
    ):
        args = [*build, "--out", str(tmp_path / "refused"), "--keep-raw-vectors", *extra]
        code, _, err = run_cli(args, capsys)
        assert code == 2 and err.strip().splitlines()[-1].startswith("whitevec: error:") and needle in err, err
        assert not (tmp_path / "refused").exists()


def test_an_http_add_keeps_the_raw_vectors_of_its_segment(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
    from fastapi.testclient import TestClient

    from whitevec.service.app import create_app
    from whitevec.service.settings import ServeSettings

    index = build(tmp_path / "idx", docs(0, 40), transform="whitening-4", keep_raw_vectors=True)
    with index, TestClient(create_app(index, ServeSettings(writable=True))) as client:  # type: ignore[arg-type]
        answer = client.post("/documents", json={"documents": [{"id": "h1", "text": TEXTS[250]}]})
        assert answer.status_code == 200, answer.text
        assert client.get("/info").json()["manifest"]["raw_vectors"] == {"dtype": "float32"}
        state = segments_of(index)
        assert state.segments[-1].rows == 1
        kept = live_raw_vectors(index.path, index.manifest, state.segments[-1:], live_rows(state))
    np.testing.assert_array_equal(kept, HashEncoder(dim=16).encode([TEXTS[250]]))


def test_an_index_saved_before_raw_vectors_refits_by_encoding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = Path(__file__).parent / "fixtures" / "saved"
    idx = shutil.copytree(saved / "index-flat-whitening", tmp_path / "idx")
    code, out, _ = run_cli(["index", "info", str(idx)], capsys)
    assert code == 0 and json.loads(out)["state"]["raw_vectors"]["kept"] is False
    code, _, err = run_cli(["index", "refit", str(idx), "--model", str(saved / "static")], capsys)
    assert code == 0 and "whitevec: encoding every document" in err, err
    assert "raw_vectors" not in read_manifest(idx)  # refit as it was built: still none kept


def test_a_refit_from_raw_vectors_copies_every_field_a_build_writes_of_its_encoder() -> None:
    # build.py lists the encoder's manifest fields for the refit by hand: a field encoder_description gains later
    # would otherwise be dropped by every refit from raw vectors.
    from whitevec.index.build import ENCODER_FIELDS, encoder_description

    assert set(encoder_description(HashEncoder())) == set(ENCODER_FIELDS)


def test_a_refit_behind_another_writer_is_refused_as_every_stale_write_is(tmp_path: Path) -> None:
    # The service answers 409 for exactly updates' stale-version message: the raw vectors' read must give it.
    from whitevec.index.folder.snapshot import changed_message

    folder = tmp_path / "index"
    with build(folder, docs(0, 40), transform="whitening-8", keep_raw_vectors=True) as first:
        with Retriever.load(folder, encoder=HashEncoder(dim=16)) as second:  # type: ignore[arg-type]
            second.add(docs(40, 50))
        with pytest.raises(BadInputError) as refused:
            live_raw_vectors(folder, first.manifest, segments_of(first).segments, live_rows(segments_of(first)))
    assert str(refused.value) == changed_message(folder)
