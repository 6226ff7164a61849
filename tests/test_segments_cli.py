"""``whitevec index add | delete | compact`` and ``index info``'s state, and an index written before segments
taking its first write."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.index_helpers import sentences
from tests.static_helpers import tiny_static_folder
from tests.test_cli import run_cli
from whitevec.index import Document, Retriever, read_manifest

SAVED = Path(__file__).parent / "fixtures" / "saved"


def _jsonl(path: Path, start: int, stop: int, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": f"n{i}", "text": texts[i]}) + "\n" for i in range(start, stop)))
    return path


def test_add_delete_and_compact_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = sentences(40, seed=4)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts[:30]) + "\n")
    model = str(tiny_static_folder(tmp_path / "static"))
    idx = str(tmp_path / "idx")
    code, _, err = run_cli(["index", "build", "--corpus", str(corpus), "--out", idx, "--model", model], capsys)
    assert code == 0, err
    more = _jsonl(tmp_path / "more.jsonl", 30, 36, texts)
    code, _, err = run_cli(["index", "add", idx, "--corpus", str(more)], capsys)
    assert code == 0 and "added 6, replaced 0, skipped 0 documents" in err and "36 documents" in err, err
    code, _, err = run_cli(["index", "add", idx, "--corpus", str(more)], capsys)
    assert code == 2 and err.strip().splitlines()[-1].startswith("whitevec: error: document id 'n30' is already")
    assert read_manifest(idx)["generation"] == 1  # the refused add wrote nothing
    code, _, err = run_cli(["index", "add", idx, "--corpus", str(more), "--on-existing", "replace"], capsys)
    assert code == 0 and "added 0, replaced 6" in err, err
    ids = tmp_path / "ids.txt"
    ids.write_text("n31\n\n")  # 8 of 42 rows deleted: below the share that merges by itself
    code, _, err = run_cli(["index", "delete", idx, "n30", "nowhere", "--ids", str(ids)], capsys)
    assert code == 1 and "deleted 2 documents" in err and "1 id(s) were not in the index: 'nowhere'" in err, err
    code, out, _ = run_cli(["index", "info", idx], capsys)
    state = json.loads(out)["state"]
    assert state.pop("transform")["fit_on"] is None  # no transform: nothing to go stale
    assert state.pop("raw_vectors")["kept"] is False  # built without --keep-raw-vectors
    assert state == {"live": 34, "deleted": 8, "segments": 3, "version": 3}
    code, _, err = run_cli(["index", "compact", idx], capsys)
    assert code == 0 and "merged 3 segment(s)" in err and "34 documents (0 deleted" in err, err
    code, out, _ = run_cli(["search", idx, texts[33], "-k", "1", "--format", "json"], capsys)
    assert code == 0 and json.loads(out)[0]["hits"][0]["id"] == "n33"
    code, _, err = run_cli(["index", "refit", idx, "--transform", "whitening-8"], capsys)
    assert code == 0 and "refitted on 34 documents" in err, err
    transform = read_manifest(idx)["transform"]
    assert (transform["spec"], transform["fit_rows"]) == ("whitening-8", 34)
    code, out, _ = run_cli(["index", "info", idx], capsys)
    assert json.loads(out)["state"]["transform"]["added_since_fit"] == 0


def test_bad_input_to_a_write_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx = tmp_path / "idx"
    shutil.copytree(SAVED / "index-flat-whitening", idx)
    before = read_manifest(idx)
    for args, needle in (
        (["add", str(idx), "--corpus", str(tmp_path / "none.jsonl")], "does not exist"),
        (["add", str(idx), "--corpus", str(tmp_path / "none.jsonl"), "--on-existing", "merge"], "'merge' is not"),
        (["delete", str(idx)], "no document ids to delete"),
        (["delete", str(tmp_path / "elsewhere"), "a"], "does not exist"),
        (["compact", str(tmp_path / "elsewhere")], "does not exist"),
        (["refit", str(idx), "--transform", " "], "--transform is empty"),
        (["refit", str(idx), "--transform", "whitening-x"], "whitening-x"),
    ):
        code, _, err = run_cli(["index", *args], capsys)
        assert code == 2, (args, err)
        assert next(line for line in err.splitlines() if line.startswith("whitevec: error:")).find(needle) > 0, err
    assert read_manifest(idx) == before


def test_an_index_written_before_segments_takes_its_first_write(tmp_path: Path) -> None:
    idx = shutil.copytree(SAVED / "index-flat-whitening", tmp_path / "idx")
    built = {name: os.stat(idx / name).st_ino for name in read_manifest(idx)["files"]}
    with Retriever.load(idx, model=SAVED / "static") as retriever:
        count = retriever.count
        retriever.add([Document("new", "a brand new document about wings")])
        assert retriever.search(["a brand new document about wings"], 1)[0][0].id == "new"
    manifest = read_manifest(idx)  # every checksum
    assert manifest["count"] == count + 1 and next(s["prefix"] for s in manifest["segments"]) == ""
    assert {name: os.stat(idx / name).st_ino for name in built} == built  # the old files kept, linked
    with Retriever.load(idx, model=SAVED / "static") as reloaded:
        assert reloaded.search(["a brand new document about wings"], 1)[0][0].id == "new"


def test_a_first_write_that_encodes_nothing_still_analyses_with_the_models_tokenizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An index whose BM25 analyses text with the model's tokenizer (--analyzer encoder): a delete, the first
    write, counts the build segment's terms with that tokenizer, so the model's tokenizer is loaded for it."""
    texts = sentences(20, seed=6)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts) + "\n")
    model = str(tiny_static_folder(tmp_path / "static"))
    idx = str(tmp_path / "idx")
    args = ["index", "build", "--corpus", str(corpus), "--out", idx, "--model", model]
    code, _, err = run_cli([*args, "--lexical", "bm25", "--analyzer", "encoder"], capsys)
    assert code == 0, err
    code, _, err = run_cli(["index", "delete", idx, "3"], capsys)
    assert code == 0 and "deleted 1 documents" in err, err
    code, out, _ = run_cli(["search", idx, texts[5], "-k", "1", "--mode", "lexical", "--format", "json"], capsys)
    assert code == 0 and json.loads(out)[0]["hits"][0]["text"] == texts[5]
