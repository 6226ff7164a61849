"""``whitevec index add | delete | compact`` and ``index info``'s state, and an index written before segments
taking its first write."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.index_helpers import HashEncoder, sentences
from tests.static_helpers import tiny_static_folder
from tests.test_cli import run_cli
from whitevec.datasets.retrieval import read_corpus_file
from whitevec.errors import BadInputError
from whitevec.index import Document, Retriever, read_manifest

SAVED = Path(__file__).parent / "fixtures" / "saved"
SRC = Path(__file__).resolve().parents[1] / "src"


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


def _text_index(tmp_path: Path, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[str, list[str]]:
    """An index built from a plain text corpus of 6 lines (ids '1'..'6'), and the texts of 6 more lines."""
    texts = sentences(12, seed=8)
    corpus = tmp_path / "first.txt"
    corpus.write_text("\n".join(texts[:6]) + "\n")
    model = str(tiny_static_folder(tmp_path / "static"))
    idx = str(tmp_path / "idx")
    code, _, err = run_cli(
        ["index", "build", "--corpus", str(corpus), "--out", idx, "--model", model, *options], capsys
    )
    assert code == 0, err
    return idx, texts[6:]


def test_adding_a_text_corpus_names_line_number_ids_and_the_cli_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx, more = _text_index(tmp_path, capsys)
    second = tmp_path / "second.txt"
    second.write_text("\n".join(more[:4]) + "\n")
    code, _, err = run_cli(["index", "add", idx, "--corpus", str(second)], capsys)
    line = err.strip().splitlines()[-1]
    assert code == 2 and line.startswith("whitevec: error: document id '1' is already in the index"), err
    assert "(4 of the 4 ids given are); nothing was written" in line
    assert "the ids of a plain text corpus are its line numbers (1..4 here)" in line
    assert "--on-existing replace would overwrite those documents with unrelated ones" in line
    assert 'a JSONL corpus with an "id" field, or a CSV or TSV corpus with an id column' in line
    assert "on_existing=" not in line and "'replace'" not in line  # Python's syntax has no place here
    assert read_manifest(idx).get("generation", 0) == 0  # nothing written
    # A corpus with ids of its own: the flags, and what replace does.
    named = _jsonl(tmp_path / "named.jsonl", 0, 2, more)
    assert run_cli(["index", "add", idx, "--corpus", str(named)], capsys)[0] == 0
    code, _, err = run_cli(["index", "add", idx, "--corpus", str(named)], capsys)
    line = err.strip().splitlines()[-1]
    assert code == 2 and "give --on-existing replace to put these documents in place of those" in line, err
    assert "--on-existing skip to add only the ids the index lacks" in line and "line numbers" not in line
    # A JSONL corpus that names no ids numbers its documents: the same trap, said as a possibility.
    unnamed = tmp_path / "unnamed.jsonl"
    unnamed.write_text("".join(json.dumps({"text": text}) + "\n" for text in more[4:6]))
    code, _, err = run_cli(["index", "add", idx, "--corpus", str(unnamed)], capsys)
    line = err.strip().splitlines()[-1]
    assert code == 2 and "ids such as these (1..2 here) are what a corpus that names none gets" in line, err
    assert "--on-existing replace would overwrite those documents with unrelated ones" in line
    assert "for the same documents, give --on-existing replace or --on-existing skip" in line


def test_adding_line_number_ids_in_python_says_so_in_pythons_words(tmp_path: Path) -> None:
    texts = sentences(8, seed=9)
    (tmp_path / "a.txt").write_text("\n".join(texts[:4]) + "\n")
    (tmp_path / "b.txt").write_text("\n".join(texts[4:]) + "\n")
    with Retriever.build(tmp_path / "a.txt", tmp_path / "idx", encoder=HashEncoder(), transform="none") as index:
        with pytest.raises(BadInputError) as refused:
            index.add(read_corpus_file(tmp_path / "b.txt"))
        with pytest.raises(BadInputError) as named:
            index.add([Document("ok", texts[5]), Document("1", texts[6])])
        assert index.count == 4
    message = str(refused.value)
    assert "(4 of the 4 ids given are); nothing was written" in message
    assert "ids such as these (1..4 here) are what a corpus that names none gets" in message
    assert 'on_existing="replace" would overwrite those documents with unrelated ones' in message
    assert "give each an id" in message and "--on-existing" not in message
    assert 'for the same documents, give on_existing="replace" or on_existing="skip"' in message
    assert "(1 of the 2 ids given are)" in str(named.value)


def test_ids_are_exact_on_every_reader_and_a_delete_by_file_takes_them_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx, more = _text_index(tmp_path, capsys)
    for name, body, line in (
        ("spaced.jsonl", json.dumps({"id": "  sp  ", "text": more[0]}) + "\n", 1),
        ("spaced.tsv", f"id\ttext\nsp \t{more[0]}\n", 2),
        ("spaced.csv", f'id,text\n" sp",{more[0]}\n', 2),
    ):
        (tmp_path / name).write_text(body)
        code, _, err = run_cli(["index", "add", idx, "--corpus", str(tmp_path / name)], capsys)
        assert code == 2 and f"{name}, line {line}: id " in err, err
        assert "an id is a non-empty string with no white space at either end" in err, err
    with Retriever.load(idx, model=str(tmp_path / "static")) as index, pytest.raises(BadInputError) as python:
        index.add([Document("  sp  ", more[0])])
    assert "corpus[0] has id '  sp  '; an id is a non-empty string with no white space" in str(python.value)
    ids = tmp_path / "ids.txt"
    ids.write_bytes(b"2\r\n 3\n\n4 \n")  # '3' and '4' only with their spaces: no such ids
    code, _, err = run_cli(["index", "delete", idx, "--ids", str(ids)], capsys)
    assert code == 1 and "deleted 1 documents" in err and "2 id(s) were not in the index: ' 3', '4 '" in err, err


def test_a_search_asking_more_than_the_index_holds_warns_in_one_prefixed_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx, more = _text_index(tmp_path, capsys)
    code, _, err = run_cli(["search", idx, more[0], "-k", "9"], capsys)
    warning = "whitevec: warning: k=9 is more than the 6 documents in the index; returning 6"
    assert code == 0 and err.splitlines() == [warning], err


def test_a_milvus_lite_compaction_prints_no_line_of_pymilvus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pymilvus logs through its own handler (a real process shows it): Lite's missing MVCC timestamp is no
    warning for the user."""
    pytest.importorskip("milvus_lite", reason="Milvus Lite (pip install 'whitevec[milvus]') is not installed")
    idx, _ = _text_index(tmp_path, capsys, "--backend", "milvus", "-q")
    assert run_cli(["index", "delete", idx, "2"], capsys)[0] == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "whitevec.cli", "index", "compact", idx],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0 and done.stderr.splitlines()[0].startswith("merged 1 segment(s)"), done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
