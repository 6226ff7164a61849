"""An index finds its model, and only its model: the resolved folder, the portable name and a checksum of the
model's contents are recorded at build; search, serve and ``Retriever.load`` find the model there (or where
``--model`` says it moved) and refuse a folder holding another one, in one line."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from tests.index_helpers import sentences, tiny_bert
from tests.static_helpers import tiny_static_folder
from tests.test_cli import run_cli as _run
from whitevec.errors import BadInputError, ModelNotFoundError
from whitevec.index import Retriever, read_manifest
from whitevec.index.folder.manifest import write_manifest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TEXTS = sentences(24, seed=3)


def _corpus(folder: Path) -> Path:
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(TEXTS) + "\n")
    return corpus


def _build(corpus: Path, out: Path, model: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["index", "build", "--corpus", str(corpus), "--out", str(out), "--model", model]
    code, _, err = _run([*argv, "--transform", "none", "-q"], capsys)
    assert code == 0, err


def _top_id(index: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    code, stdout, err = _run(["search", str(index), TEXTS[5], "-k", "1", "--json", *extra], capsys)
    assert code == 0, err
    return str(json.loads(stdout)[0]["hits"][0]["id"])


def _same_sizes_other_contents(source: Path, target: Path) -> Path:
    """A copy of the model folder ``source`` whose weight file keeps its size and config but not its bytes."""
    shutil.copytree(source, target)
    weights = target / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-64:] = bytes(255 - b for b in data[-64:])  # the last tensor's values: the header stays valid
    weights.write_bytes(bytes(data))
    return target


def _make_model(kind: str, folder: Path) -> Path:
    return tiny_static_folder(folder) if kind == "static" else tiny_bert(folder)


@pytest.mark.parametrize("kind", ["static", "bert"])
def test_a_relative_model_folder_is_found_from_another_folder_and_a_namesake_is_refused(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    built_in, elsewhere = tmp_path / "a", tmp_path / "b"
    built_in.mkdir()
    elsewhere.mkdir()
    _make_model(kind, built_in / "st_mini")
    monkeypatch.chdir(built_in)
    _build(_corpus(tmp_path), tmp_path / "index", "st_mini", capsys)
    monkeypatch.chdir(elsewhere)
    assert _top_id(tmp_path / "index", capsys) == "6"  # the line number of the query, the sixth text
    from whitevec.encoders.models.identity import model_checksum

    manifest = read_manifest(tmp_path / "index")
    assert manifest["model_path"] == str((built_in / "st_mini").resolve()) and manifest["model_id"] is None
    assert manifest["model_sha256"] == model_checksum(built_in / "st_mini")

    # A folder of the same name here, same config and file sizes, other weights: the recorded folder is used,
    # and the namesake, when named, is refused.
    _same_sizes_other_contents(built_in / "st_mini", elsewhere / "st_mini")
    assert _top_id(tmp_path / "index", capsys) == "6"
    code, _, err = _run(["search", str(tmp_path / "index"), TEXTS[5], "--model", "st_mini"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert str((elsewhere / "st_mini").resolve()) in err and str((built_in / "st_mini").resolve()) in err
    assert "weights sha256" in err


@pytest.mark.parametrize("kind", ["static", "bert"])
def test_a_model_folder_whose_weights_changed_in_place_is_refused(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _make_model(kind, tmp_path / "model")
    _build(_corpus(tmp_path), tmp_path / "index", str(model), capsys)
    other = _same_sizes_other_contents(model, tmp_path / "other")
    (other / "model.safetensors").replace(model / "model.safetensors")  # same name, config and sizes
    code, _, err = _run(["search", str(tmp_path / "index"), TEXTS[5]], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("whitevec: error: ") and "weights sha256" in err and str(model) in err


@pytest.mark.parametrize("kind", ["static", "bert"])
def test_model_points_at_a_moved_copy(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _make_model(kind, tmp_path / "model")
    _build(_corpus(tmp_path), tmp_path / "index", str(model), capsys)
    before = _top_id(tmp_path / "index", capsys)
    moved = model.rename(tmp_path / "moved")

    code, _, err = _run(["search", str(tmp_path / "index"), TEXTS[5]], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(model) in err and "--model" in err

    assert _top_id(tmp_path / "index", capsys, "--model", str(moved)) == before
    with Retriever.load(tmp_path / "index", model=moved) as retriever:
        assert retriever.search([TEXTS[5]], k=1)[0][0].id == before


def test_retriever_load_refuses_another_model_and_an_encoder_beside_a_model(tmp_path: Path) -> None:
    model = tiny_static_folder(tmp_path / "model")
    other = _same_sizes_other_contents(model, tmp_path / "other")
    from whitevec.encoders.static import StaticEncoder

    Retriever.build(_documents(), tmp_path / "index", encoder=StaticEncoder(model), transform="none").close()
    with pytest.raises(BadInputError, match="weights sha256") as refused:
        Retriever.load(tmp_path / "index", model=other)
    assert str(other) in str(refused.value) and str(model) in str(refused.value)
    with pytest.raises(BadInputError, match="not both"):
        Retriever.load(tmp_path / "index", encoder=StaticEncoder(model), model=model)


def test_serve_takes_model_and_refuses_another_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from whitevec.service.run import load_retriever

    model = tiny_bert(tmp_path / "bert")
    _build(_corpus(tmp_path), tmp_path / "index", str(model), capsys)
    moved = model.rename(tmp_path / "moved")
    for compute in ("index", "torch"):  # the index's own arithmetic, and an encoder made beside the index
        retriever = load_retriever(tmp_path / "index", compute, model=moved)
        try:
            assert retriever.search([TEXTS[5]], k=1)[0][0].id == "6"
        finally:
            retriever.close()
    other = _same_sizes_other_contents(moved, tmp_path / "other")
    code, _, err = _run(["serve", str(tmp_path / "index"), "--port", "0", "--model", str(other)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "weights sha256" in err and str(other) in err


def test_serve_with_workers_passes_the_checked_model_folder_to_each_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    import uvicorn

    from whitevec.service import run

    model = tiny_static_folder(tmp_path / "model")
    _build(_corpus(tmp_path), tmp_path / "index", str(model), capsys)
    moved = model.rename(tmp_path / "moved")
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)  # no worker processes: what they read
    # serve() sets both for its workers: setenv first, so that monkeypatch removes them again after the test
    # (a delenv of an unset variable records nothing to undo, and a later test's app_from_env would read them).
    for name in (run.INDEX_ENV, run.MODEL_ENV):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    run.serve(tmp_path / "index", port=0, workers=2, model=str(moved))
    assert os.environ[run.MODEL_ENV] == str(moved.resolve())
    try:
        assert run.app_from_env() is not None  # what each worker does: loads the index with that folder
    finally:
        gc.unfreeze()
    other = _same_sizes_other_contents(moved, tmp_path / "other")
    with pytest.raises(BadInputError, match="weights sha256"):  # refused before any worker starts
        run.serve(tmp_path / "index", port=0, workers=2, model=str(other))


def test_an_alias_is_recorded_as_the_portable_name(tmp_path: Path, minilm_dir: Path) -> None:
    from whitevec.encoders.loading import load_encoder

    with load_encoder("all-MiniLM-L6-v2", "model", cache=False) as encoder:
        Retriever.build(_documents(4), tmp_path / "index", encoder=encoder, transform="none").close()
    manifest = read_manifest(tmp_path / "index")
    assert manifest["model_id"] == "all-MiniLM-L6-v2" and manifest["model_path"] == str(minilm_dir)
    # Another machine: the recorded folder is not there, the alias finds the package's copy.
    stripped = {**manifest, "model_path": str(tmp_path / "not-here")}
    write_manifest(tmp_path / "index", stripped, list(manifest["files"]))
    with Retriever.load(tmp_path / "index", cache=False) as retriever:
        assert Path(retriever.encoder.model_path) == minilm_dir  # type: ignore[attr-defined]


def test_an_index_built_before_the_model_was_recorded_still_loads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = tiny_static_folder(tmp_path / "model")
    from whitevec.encoders.static import StaticEncoder

    Retriever.build(_documents(), tmp_path / "index", encoder=StaticEncoder(model), transform="none").close()
    manifest = read_manifest(tmp_path / "index")
    old = {k: v for k, v in manifest.items() if k not in ("model_path", "model_id", "model_sha256")}
    write_manifest(tmp_path / "index", old, list(manifest["files"]))
    with caplog.at_level(logging.WARNING), Retriever.load(tmp_path / "index") as retriever:
        assert retriever.search([TEXTS[5]], k=1)[0][0].id == "6"
    assert not caplog.records
    moved = model.rename(tmp_path / "moved")
    with Retriever.load(tmp_path / "index", model=moved) as retriever:  # compared by fingerprint, as before
        assert retriever.search([TEXTS[5]], k=1)[0][0].id == "6"
    other = _same_sizes_other_contents(moved, tmp_path / "other")
    with pytest.raises(BadInputError, match="built with model"):
        Retriever.load(tmp_path / "index", model=other)
    with pytest.raises(ModelNotFoundError):  # the recorded name, as before: not a folder any more
        Retriever.load(tmp_path / "index")


def test_a_cached_checksum_is_not_reused_for_a_rewritten_file(tmp_path: Path) -> None:
    from whitevec.encoders.models.identity import file_checksum

    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"a" * 100)
    first = file_checksum(weights)
    stamp = weights.stat()
    weights.write_bytes(b"b" * 100)  # same size, and the modification time set back
    os.utime(weights, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert file_checksum(weights) != first
    replacement = tmp_path / "replacement"
    replacement.write_bytes(b"a" * 100)
    os.utime(replacement, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    replacement.replace(weights)  # another file renamed over it: another inode
    assert file_checksum(weights) == first


def _documents(n: int = len(TEXTS)) -> list[object]:
    from whitevec.datasets.retrieval import Document

    return [Document(str(i), text) for i, text in enumerate(TEXTS[:n], start=1)]
