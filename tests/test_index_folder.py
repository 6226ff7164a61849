"""What a write does to the index folder as a whole (issue 49, items 2, 7, 9 and 10): through a symbolic link it
changes the folder the link names; it keeps what is not the index's; its messages name the file at fault and say
what happened; ids, a closed Retriever and the version follow one rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.index_helpers import HashEncoder, sentences
from tests.static_helpers import tiny_static_folder
from tests.test_cli import run_cli
from tests.test_refit_raw import build
from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError
from whitevec.index import Retriever, read_manifest
from whitevec.index.faiss.library import INDEX_FILE
from whitevec.index.folder.layout import TEMPLATE_PREFIX
from whitevec.index.folder.snapshot import changed_message
from whitevec.utils import io as _io

TEXTS = sentences(60, seed=21)


def docs(start: int, stop: int) -> list[Document]:
    return [Document(f"d{i}", TEXTS[i], {"n": i}) for i in range(start, stop)]


def load(folder: Path) -> Retriever:
    return Retriever.load(folder, encoder=HashEncoder(dim=16))  # type: ignore[arg-type]


def jsonl(path: Path, start: int, stop: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": TEXTS[i]}) + "\n" for i in range(start, stop)))
    return path


def cli(args: list[str], capsys: pytest.CaptureFixture[str], code: int = 0) -> str:
    got, _, err = run_cli(args, capsys)
    assert got == code, (args, err)
    return err


def error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("whitevec: error: "), err
    return lines[0]


# --- item 2: writes through a symbolic link -----------------------------------------------------------------
def test_every_write_through_a_symlink_changes_the_folder_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = str(tiny_static_folder(tmp_path / "static"))
    real, link = tmp_path / "real" / "ix", tmp_path / "link"
    corpus = jsonl(tmp_path / "corpus.jsonl", 0, 20)
    cli(["index", "build", "--corpus", str(corpus), "--out", str(real), "--model", model], capsys)
    link.symlink_to(Path("real") / "ix")  # relative, as `ln -s real/ix link` makes it
    with Retriever.load(real) as server:  # a server of the real path, loaded before the writes
        writes = [
            (["index", "add", str(link), "--corpus", str(jsonl(tmp_path / "more.jsonl", 20, 26))], 26),
            (["index", "delete", str(link), "d3", "d4"], 24),
            (["index", "compact", str(link)], 24),
            (["index", "refit", str(link), "--transform", "whitening-4"], 24),
            (["index", "build", "--corpus", str(corpus), "--out", str(link), "--model", model], 20),
        ]
        for version, (args, count) in enumerate(writes, start=1):
            cli(args, capsys)
            assert link.is_symlink() and os.readlink(link) == os.path.join("real", "ix"), args
            assert sorted(p.name for p in tmp_path.iterdir()) == [
                "corpus.jsonl",
                "link",
                "more.jsonl",
                "real",
                "static",
            ]
            assert [p.name for p in real.parent.iterdir()] == ["ix"], args  # no temporary left beside it
            manifest = read_manifest(real)
            assert (manifest["count"], manifest["generation"]) == (count, version), args
            assert server.refresh() and server.count == count, args  # the server sees every write
    with Retriever.load(link) as reader:
        assert reader.search([TEXTS[2]], 1)[0][0].id == "d2"


def test_writers_through_the_link_and_the_real_path_follow_one_version(tmp_path: Path) -> None:
    real, link = tmp_path / "real" / "ix", tmp_path / "link"
    build(real, docs(0, 10)).close()
    link.symlink_to(real)
    with load(link) as through_link, load(real) as direct:
        direct.add(docs(10, 12))
        with pytest.raises(BadInputError) as refused:
            through_link.add(docs(12, 14))  # it loaded the version the other writer replaced: nothing lost
        assert str(refused.value) == changed_message(link)  # the path it was loaded from (the service's 409)
        assert through_link.refresh() and through_link.count == 12
        through_link.delete(["d0"])
        assert direct.refresh() and direct.count == 11
    assert link.is_symlink() and read_manifest(real)["generation"] == 2


def test_a_link_an_older_write_left_beside_the_index_is_removed_and_not_followed(tmp_path: Path) -> None:
    real, link = tmp_path / "real" / "ix", tmp_path / "link"
    build(real, docs(0, 10)).close()
    link.symlink_to(Path("real") / "ix")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = _io._prefix(link)[len(".link.") :].rsplit("-", 1)[0]
    left = tmp_path / f".link.{host}-{int(dead.stdout)}.abc.tmp"  # the link an older whitevec swapped aside
    left.symlink_to(Path("real") / "ix")
    with load(link) as retriever:
        retriever.add(docs(10, 12))
    assert not os.path.lexists(left) and read_manifest(real)["count"] == 12  # the link removed, not what it named


def test_an_index_named_dot_is_written_and_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "ix"
    build(index, docs(0, 10)).close()
    monkeypatch.chdir(index)
    with load(Path(".")) as here:
        here.add(docs(10, 12))  # the folder has no name to swap under: its absolute path has one
        monkeypatch.chdir(index)  # the process's folder was the version swapped out
        cli(["index", "delete", ".", "d1"], capsys)
        assert here.refresh() and here.count == 11  # "." would still name the version it loaded
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ix"] and read_manifest(index)["generation"] == 2


# --- item 7: what is not the index's is kept ----------------------------------------------------------------
def _plant(index: Path) -> dict[str, bytes]:
    (index / "notes.txt").write_text("my notes on this index\n")
    (index / "sub").mkdir()
    (index / "sub" / "kept.txt").write_text("a file in a folder of mine\n")
    (index / "s000099.index.faiss").write_bytes(b"a stray file with a segment's name")
    (index / "s000001.index.faiss").write_bytes(b"the name the first write's segment would take")
    return _foreign(index)


def _foreign(index: Path) -> dict[str, bytes]:
    names = ("notes.txt", "sub/kept.txt", "s000099.index.faiss", "s000001.index.faiss")
    return {name: (index / name).read_bytes() for name in names if (index / name).exists()}


def test_no_write_deletes_a_file_that_is_not_the_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = str(tiny_static_folder(tmp_path / "static"))
    index = tmp_path / "ix"
    corpus = jsonl(tmp_path / "corpus.jsonl", 0, 20)
    cli(["index", "build", "--corpus", str(corpus), "--out", str(index), "--model", model], capsys)
    planted = _plant(index)
    for args in (
        ["index", "add", str(index), "--corpus", str(jsonl(tmp_path / "more.jsonl", 20, 26))],
        ["index", "delete", str(index), "d3"],
        ["index", "add", str(index), "--corpus", str(jsonl(tmp_path / "last.jsonl", 26, 28))],
        ["index", "compact", str(index)],
        ["index", "refit", str(index), "--transform", "whitening-4"],
        ["index", "build", "--corpus", str(corpus), "--out", str(index), "--model", model],
    ):
        cli(args, capsys)
        assert _foreign(index) == planted, args
        manifest = read_manifest(index)  # every file checked: the stray segment names were passed over
        assert not set(manifest["files"]) & {"notes.txt", "s000099.index.faiss", "s000001.index.faiss"}, args
    out = cli(["index", "add", str(index), "--corpus", str(jsonl(tmp_path / "again.jsonl", 40, 42))], capsys)
    assert "22 documents" in out
    with Retriever.load(index) as reader:
        assert reader.search([TEXTS[41]], 1)[0][0].id == "d41"


def test_a_file_with_a_name_the_write_makes_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "ix"
    build(index, docs(0, 10)).close()
    (index / "deleted.npy").write_bytes(b"not the index's tombstones")
    before = read_manifest(index)
    line = error_line(cli(["index", "delete", str(index), "d1"], capsys, code=2))
    assert f"{index / 'deleted.npy'} is not one of whitevec's files" in line and "move it out" in line
    assert read_manifest(index) == before and (index / "deleted.npy").read_bytes() == b"not the index's tombstones"


# --- item 9: messages that name the file at fault and say what happened -------------------------------------
def test_a_damaged_template_is_named_and_a_delete_does_not_read_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = str(tiny_static_folder(tmp_path / "static"))
    index = tmp_path / "ix"
    cli(
        [
            "index",
            "build",
            "--corpus",
            str(jsonl(tmp_path / "c.jsonl", 0, 20)),
            "--out",
            str(index),
            "--model",
            model,
        ],
        capsys,
    )
    cli(["index", "add", str(index), "--corpus", str(jsonl(tmp_path / "a.jsonl", 20, 22))], capsys)  # the template
    template = index / (TEMPLATE_PREFIX + INDEX_FILE)
    data = bytearray(template.read_bytes())
    data[:8] = b"\0" * 8  # same size: only reading it finds the damage
    template.write_bytes(bytes(data))
    add = jsonl(tmp_path / "more.jsonl", 30, 32)
    for args in (["index", "add", str(index), "--corpus", str(add)], ["index", "compact", str(index)]):
        line = error_line(cli(args, capsys, code=2))
        assert f"{template} is not a readable FAISS index" in line, args
    err = cli(["index", "delete", str(index), "d1"], capsys)  # tombstones only: the template is not read
    assert "deleted 1 documents" in err and read_manifest(index, verify=False)["count"] == 21


def test_compacting_an_index_whose_every_document_is_deleted_says_so_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "ix"
    with build(index, docs(0, 4)) as retriever:
        retriever.add(docs(4, 6))
        retriever.delete([f"d{i}" for i in range(6)])
        before = read_manifest(index)
        with pytest.raises(BadInputError, match=r"every document of the index .* is deleted"):
            retriever.compact()
    line = error_line(cli(["index", "compact", str(index)], capsys, code=2))
    assert "every document of the index" in line and "nothing was compacted" in line
    assert read_manifest(index) == before
    with load(index) as retriever:  # documents added, the compaction then drops every deleted row
        retriever.add(docs(10, 12))
        assert retriever.compact() in (0, 1) and retriever.manifest.get("deleted", 0) == 0
        assert retriever.count == 2


# --- item 10 (part): ids, a closed Retriever, the version ---------------------------------------------------
@pytest.mark.parametrize("bad", [None, 1, 1.5, b"d1", ["d1"], ""])
def test_an_id_that_is_not_a_non_empty_string_is_refused_whatever_its_type(tmp_path: Path, bad: object) -> None:
    with build(tmp_path / "ix", docs(0, 5)) as retriever:
        with pytest.raises(BadInputError, match="a document id must be a non-empty string"):
            retriever.delete(["d1", bad])  # type: ignore[list-item]
        for given in (None, 7, "d1"):
            with pytest.raises(BadInputError, match="give a list of document ids"):
                retriever.delete(given)  # type: ignore[arg-type]
        assert retriever.count == 5 and "generation" not in read_manifest(tmp_path / "ix")


def test_an_id_that_is_not_text_and_an_ids_file_that_is_not_utf8_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "ix"
    retriever = build(index, docs(0, 5))
    with retriever, pytest.raises(BadInputError, match=r"document id 'd\\udc80' holds a lone surrogate"):
        retriever.delete(["d1", "d\udc80"])
    ids = tmp_path / "ids.txt"
    ids.write_bytes(b"d1\nd\xff2\n")
    line = error_line(cli(["index", "delete", str(index), "--ids", str(ids)], capsys, code=2))
    assert f"{ids}, line 2: not valid UTF-8" in line
    assert "generation" not in read_manifest(index)


def test_every_use_of_a_closed_retriever_is_one_line(tmp_path: Path) -> None:
    retriever = build(tmp_path / "ix", docs(0, 5))
    retriever.close()
    retriever.close()  # closing again does nothing
    for use in (
        lambda: retriever.add(docs(5, 6)),
        lambda: retriever.upsert(docs(0, 1)),
        lambda: retriever.delete(["d1"]),
        lambda: retriever.compact(),
        lambda: retriever.refit("whitening-4"),
        lambda: retriever.refresh(),
        lambda: retriever.existing_ids(["d1"]),
        lambda: retriever.search(["a query"], 1),
        lambda: retriever.search(["a query"], 1, filter="n > 1"),
        lambda: retriever.embed(["a text"]),
    ):
        with pytest.raises(
            BadInputError, match=r"this Retriever of the index at .* is closed; load the index again"
        ):
            use()


def test_a_retriever_closed_while_a_write_encodes_refuses_the_write_and_writes_nothing(tmp_path: Path) -> None:
    index = tmp_path / "ix"
    build(index, docs(0, 5)).close()
    retriever: list[Retriever] = []

    class ClosingEncoder(HashEncoder):
        def encode(self, texts: Any, batch_size: int | None = None, show_progress: bool | None = None) -> Any:
            closer = threading.Thread(target=retriever[0].close)  # another thread, as a server's shutdown
            closer.start()
            closer.join()
            return super().encode(texts, batch_size, show_progress)

    retriever.append(Retriever.load(index, encoder=ClosingEncoder(dim=16)))  # type: ignore[arg-type]
    with pytest.raises(BadInputError, match="is closed; load the index again"):
        retriever[0].add(docs(5, 7))
    assert "generation" not in read_manifest(index)


def test_a_refit_or_rebuild_is_the_next_version(tmp_path: Path) -> None:
    index = tmp_path / "ix"
    with build(index, docs(0, 20)) as retriever:
        retriever.add(docs(20, 22))
        retriever.delete(["d0"])
        retriever.refit("whitening-4")
        assert retriever.manifest["generation"] == 3 and read_manifest(index)["generation"] == 3
        retriever.add(docs(22, 24))  # segments after a refit: named by the next generation
        assert retriever.manifest["generation"] == 4
    build(index, docs(0, 10)).close()
    assert read_manifest(index)["generation"] == 5


def test_compacting_an_index_whose_every_document_is_deleted_is_one_line_over_http(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
    from fastapi.testclient import TestClient

    from whitevec.service.app import create_app
    from whitevec.service.settings import ServeSettings

    with build(tmp_path / "ix", docs(0, 4)) as retriever:
        retriever.delete([f"d{i}" for i in range(4)])
        with TestClient(create_app(retriever, ServeSettings(writable=True))) as client:  # type: ignore[arg-type]
            answer = client.post("/compact")
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail.startswith("every document of the index at ix is deleted") and str(tmp_path) not in detail


# --- the review's edges ------------------------------------------------------------------------------------------
def test_a_held_id_of_thousands_of_digits_is_still_one_line(tmp_path: Path) -> None:
    """An all-digit id is worded as a possible line number; past 4,300 digits int() itself refuses it, which
    turned the refusal into a ValueError."""
    long_id = "9" * 5_000
    index = tmp_path / "ix"
    build(index, [Document(long_id, TEXTS[0]), *docs(1, 5)]).close()
    with load(index) as retriever, pytest.raises(BadInputError) as refused:
        retriever.add([Document(long_id, TEXTS[1])])
    assert "already in the index" in str(refused.value) and "\n" not in str(refused.value)


def test_a_user_folder_that_cannot_be_carried_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """shutil.copytree gathers what it could not copy into one shutil.Error (no errno, a list of triples): the
    write says the first in one line (exit 3, an environment fault) and leaves the index as it was."""
    import shutil

    index = tmp_path / "ix"
    build(index, docs(0, 10)).close()
    (index / "sub").mkdir()
    (index / "sub" / "kept.txt").write_text("mine")
    before = read_manifest(index)

    def refuse(source: str, target: str, **_: Any) -> None:
        raise shutil.Error([(f"{source}/kept.txt", f"{target}/kept.txt", "[Errno 13] Permission denied")])

    monkeypatch.setattr(_io.shutil, "copytree", refuse)
    err = cli(["index", "delete", str(index), "d1"], capsys, code=3)
    line = [line for line in err.splitlines() if line.strip()]
    assert len(line) == 1 and "kept.txt" in line[0] and "Permission denied" in line[0] and "[(" not in line[0], err
    assert read_manifest(index) == before and (index / "sub" / "kept.txt").read_text() == "mine"


def test_embed_waits_for_the_searches_lock(tmp_path: Path) -> None:
    """/embed encodes under the searches' lock, as a search does: a write of an index whose lexical part uses
    the model's tokenizer holds that lock while it tokenizes on another thread."""
    index = tmp_path / "ix"
    build(index, docs(0, 10)).close()
    with load(index) as retriever:
        done = threading.Event()
        with retriever._lock:
            worker = threading.Thread(target=lambda: (retriever.embed([TEXTS[3]]), done.set()))
            worker.start()
            assert not done.wait(0.3)  # held off while another thread holds the lock
        worker.join(10)
        assert done.is_set()


def test_a_reader_refuses_to_follow_a_rebuild_with_another_model(tmp_path: Path) -> None:
    """A reader (a server) that followed a rebuild with another model of the same size searched the new vectors
    with the old model's query vectors: the document holding the very words of the query came third. With
    another size, an AssertionError. Now the move is refused in one line, and the version loaded goes on."""
    from whitevec.encoders.loading import load_encoder

    texts = ["the dog is running in the street", "a cat sits on the mat", "the man plays the guitar"]
    docs = [Document(f"d{i}", text) for i, text in enumerate(texts)]
    first, other = (
        load_encoder(str(tiny_static_folder(tmp_path / name, seed=seed))) for name, seed in [("a", 0), ("b", 7)]
    )
    Retriever.build(docs, tmp_path / "idx", encoder=first, transform="none").close()
    with Retriever.load(tmp_path / "idx") as reader:
        Retriever.build(docs, tmp_path / "idx", encoder=other, transform="none").close()
        with pytest.raises(
            BadInputError, match=r"was rebuilt with another encoder \(.*model_sha256\); load it again"
        ):
            reader.refresh()
        assert reader.search([texts[1]], k=1)[0][0].id == "d1"
