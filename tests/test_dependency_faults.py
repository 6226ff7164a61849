"""Faults met inside dependencies (torch, safetensors, faiss, SQLite, numpy) end as whitevec's one line.

- A device this machine lacks (``--device cuda`` without CUDA, ``mps`` on Linux, ``bogus``) is a bad input:
  one line naming the devices there are, exit 2, before a model loads (torch's own errors were tracebacks).
- A full disk met by any writer, at any write step of ``index build``, ``Retriever.add``, ``index export-faiss``
  and ``export-st``, is one line naming the file, exit 3, and the older index / file / folder stays whole.
- Every file whitevec writes takes the user's umask (safetensors alone made 0600 files).
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer

import whitevec.utils.io as whitevec_io
from tests.conftest import REPO
from tests.index_helpers import sentences
from whitevec.cli import app, main
from whitevec.errors import BadInputError
from whitevec.preflight import available_devices, check_device, parse_device

from .test_fail_early import _run_child

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``whitevec ARGV`` in this process: (exit status, stderr)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("whitevec: error: ") and "Traceback" not in err, err
    return lines[0]


def _write_inputs(folder: Path) -> dict[str, Path]:
    """A corpus (JSON lines), a second corpus, a text file and a pairs file over the tiny BERT's words."""
    folder.mkdir(parents=True, exist_ok=True)
    texts = sentences(120, seed=1)
    paths = {
        "corpus": folder / "corpus.jsonl",
        "corpus2": folder / "corpus2.jsonl",
        "texts": folder / "texts.txt",
        "pairs": folder / "pairs.jsonl",
    }
    paths["corpus"].write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    paths["corpus2"].write_text(
        "".join(json.dumps({"id": f"e{i}", "text": t}) + "\n" for i, t in enumerate(sentences(90, seed=2)))
    )
    paths["texts"].write_text("\n".join(texts[:60]) + "\n")
    beir = folder / "beir"  # a BEIR-style test collection: the corpus, two queries, their judgements
    (beir / "qrels").mkdir(parents=True, exist_ok=True)
    (beir / "corpus.jsonl").write_text(paths["corpus"].read_text().replace('"id"', '"_id"'))
    (beir / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": texts[i]}) + "\n" for i in (0, 1))
    )
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\nq1\td1\t1\n")
    rng = np.random.default_rng(0)
    paths["pairs"].write_text(
        "".join(
            json.dumps({"sentence1": texts[i], "sentence2": texts[i + 1], "score": float(rng.uniform(0, 5))})
            + "\n"
            for i in range(0, 80, 2)
        )
    )
    return paths


# ---- devices ------------------------------------------------------------------------------------------------
def _missing_devices() -> list[str]:
    """Devices this machine lacks: cuda (or, with GPUs, the one past the last), mps, xpu where absent."""
    import torch

    have = available_devices()
    missing = ["cuda" if not torch.cuda.is_available() else f"cuda:{torch.cuda.device_count()}"]
    missing += [name for name in ("mps", "xpu") if name not in have]
    return missing


def _device_commands() -> list[list[str]]:
    """Every command (as its words) that takes --device, found in the app itself: none is left out."""
    found: list[list[str]] = []

    def walk(command: Any, words: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*words, name])
        if any("--device" in getattr(p, "opts", ()) for p in command.params):
            found.append(words)

    walk(typer.main.get_command(app), [])
    return sorted(found)


def test_every_command_with_a_device_option_is_found() -> None:
    # The list the two tests below run over: if this changes, a command gained or lost --device.
    assert [" ".join(words) for words in _device_commands()] == [
        "diagnose",
        "distill",
        "encode",
        "eval",
        "eval-retrieval",
        "export-st",
        "fit",
        "index add",
        "index build",
        "index create",
        "index refit",
        "mcp",
        "search",
        "tune",
    ]


@pytest.mark.parametrize("words", _device_commands(), ids=" ".join)
def test_an_unknown_device_is_one_line_as_the_options_are_read(
    words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # --device comes first: its form is checked as it is parsed, before the command's own (missing) arguments.
    code, err = _run([*words, "--device", "bogus"], capsys)
    assert code == 2
    assert "unknown device 'bogus'; valid: cpu, cuda, cuda:N, mps, xpu" in _one_line(err)


def test_an_unknown_device_fails_before_torch_is_imported(tmp_path: Path) -> None:
    # torch's own "Expected one of cpu, cuda, ... device type" came as a traceback after the model loaded.
    (tmp_path / "corpus.txt").write_text("a dog\n")
    code, err, heavy, _, _ = _run_child(
        ["index", "build", "--corpus", "corpus.txt", "--out", "idx", "--device", "cuda:x"], tmp_path
    )
    assert code == 2 and "unknown device 'cuda:x'" in _one_line(err)
    assert heavy == []


@pytest.fixture(scope="module")
def small_index(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index built with the tiny BERT (cpu), for the search and export-st cases."""
    folder = tmp_path_factory.mktemp("device-index")
    inputs = _write_inputs(folder / "in")
    out = folder / "idx"
    assert (
        main(
            [
                "index",
                "build",
                "--corpus",
                str(inputs["corpus"]),
                "--out",
                str(out),
                "--model",
                str(tiny_bert_dir),
                "--transform",
                "whitening-16",
                "--no-cache",
                "-q",
            ]
        )
        == 0
    )
    return out


@pytest.mark.parametrize("device", _missing_devices())
@pytest.mark.parametrize(
    "command",
    [
        "search",
        "encode",
        "index build",
        "index create",
        "index add",
        "index refit",
        "export-st",
        "eval",
        "export-st model",
        "mcp",
    ],
)
def test_a_device_this_machine_lacks_is_one_line_before_the_model_loads(
    command: str,
    device: str,
    tiny_bert_dir: Path,
    small_index: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import transformers

    def no_model(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was loaded before the device was checked")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", no_model)
    inputs = _write_inputs(tmp_path / "in")
    model = ["--model", str(tiny_bert_dir)]
    argv = {
        "search": ["search", str(small_index), "guitar"],
        "encode": ["encode", str(inputs["texts"]), "--out", str(tmp_path / "v.npy"), *model, "--no-cache"],
        "index build": ["index", "build", "--corpus", str(inputs["corpus"]), "--out", str(tmp_path / "i"), *model],
        "index create": ["index", "create", str(tmp_path / "i"), *model],
        "index add": ["index", "add", str(small_index), "--corpus", str(inputs["corpus"])],
        "index refit": ["index", "refit", str(small_index)],
        "export-st": ["export-st", "--index", str(small_index), "--out", str(tmp_path / "st")],
        "export-st model": ["export-st", *model, "--out", str(tmp_path / "st")],
        "eval": ["eval", "--tasks", "", "--pairs", str(inputs["pairs"]), *model, "--no-cache"],
        "mcp": ["mcp", str(small_index)],
    }[command]
    code, err = _run([*argv, "--device", device], capsys)
    line = _one_line(err)
    assert code == 2
    assert f"device {device!r} is not available here" in line and "available: cpu" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]  # nothing written


def test_the_library_names_the_devices_too(tiny_bert_dir: Path, small_index: Path) -> None:
    from whitevec.encoders.transformer import Encoder
    from whitevec.index import Retriever

    missing = _missing_devices()[0]
    with pytest.raises(BadInputError, match=rf"device '{missing}' is not available here .*; available: cpu"):
        Encoder(tiny_bert_dir, device=missing, cache=False)
    with pytest.raises(BadInputError, match="unknown device 'gpu'"):
        Retriever.load(small_index, device="gpu", cache=False)
    with Encoder(tiny_bert_dir, device=" CPU ", cache=False) as encoder:
        assert str(encoder.device) == "cpu"


def test_check_device_accepts_what_this_machine_has() -> None:
    import torch

    assert parse_device(None) is None and check_device(None) is None
    assert check_device("cpu") == "cpu" and parse_device(" Cuda:1 ") == "cuda:1"  # the form alone
    for device in available_devices():
        assert check_device(device) == device
        torch.zeros(1, device=device)  # and torch agrees
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(BadInputError, match=f"device 'cuda:{count}' is not available"):
        check_device(f"cuda:{count}")
    for bad in ("", "gpu", "cuda:", "cuda:-1", "cuda 0", "meta"):
        with pytest.raises(BadInputError, match="unknown device"):
            parse_device(bad)


# ---- storage faults of the libraries ------------------------------------------------------------------------
def test_storage_faults_of_each_library_become_os_errors(tmp_path: Path) -> None:
    """The texts are those the libraries gave on a full (64 KiB) and a read-only tmpfs."""
    from safetensors import SafetensorError

    target = tmp_path / "x"
    faults: list[tuple[BaseException, int]] = [
        (
            SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)"),
            errno.ENOSPC,
        ),
        (
            SafetensorError('Error while serializing: I/O error: Read-only file system (os error 30) at path "x"'),
            30,
        ),
        (
            RuntimeError(
                "Error in void faiss::write_index(const Index*, IOWriter*, int) at /project/faiss/impl/"
                "index_write.cpp:499: Error: 'ret == (size * 4)' failed: write error in /m/x.faiss: 65491 != "
                "320000 (No space left on device)"
            ),
            errno.ENOSPC,
        ),
        (
            RuntimeError(
                "Error in faiss::FileIOWriter::FileIOWriter(const char*) at /project/faiss/impl/io.cpp:103: "
                "Error: 'f' failed: could not open /m/y.faiss for writing: Read-only file system"
            ),
            errno.EROFS,
        ),
        (_sqlite_full_error(), errno.ENOSPC),
        (OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), errno.ENOSPC),  # numpy's write(): no file named
    ]
    for fault, code in faults:
        with pytest.raises(OSError) as caught, whitevec_io.writing_to(target):
            raise fault
        assert caught.value.errno == code and caught.value.filename == str(target), fault
    for other in (RuntimeError("Error in faiss::IndexIVF::train: not enough points"), BadInputError("x")):
        with pytest.raises(type(other)), whitevec_io.writing_to(target):
            raise other
    with pytest.raises(sqlite3.OperationalError), whitevec_io.writing_to(target):
        sqlite3.connect(":memory:").execute("SELECT * FROM nowhere")


NO_DEV_FULL = "needs /dev/full, whose every write fails as on a full disk"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason=NO_DEV_FULL)
@pytest.mark.parametrize("encoding", ["float32", "binary"])
def test_a_faiss_file_whose_close_fails_is_an_os_error_not_a_short_file(tmp_path: Path, encoding: str) -> None:
    """On a full disk, faiss's writer given a path buffered a small index, failed to close the file, said so on
    stderr alone and returned: an index version or export went on with an empty file. /dev/full fails as a
    full disk does, at the close."""
    from whitevec.index.faiss.library import INDEX_FILE
    from whitevec.index.faiss.store import FaissStore

    store = FaissStore(16, "cosine", "flat", {"encoding": encoding})
    store.add(np.arange(20), np.random.default_rng(0).standard_normal((20, 16)).astype(np.float32))
    (tmp_path / INDEX_FILE).symlink_to("/dev/full")
    with pytest.raises(OSError) as caught:
        store.save(tmp_path)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(tmp_path / INDEX_FILE)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason=NO_DEV_FULL)
def test_export_faiss_onto_a_full_disk_is_one_line_not_an_empty_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``index export-faiss`` onto a full disk printed faiss's ``close error`` line, then ``wrote out.faiss``
    (an empty file), exit 0."""
    import contextlib as context

    from tests.index_helpers import HashEncoder
    from whitevec.index import Document, Retriever

    docs = [Document(f"d{i}", text) for i, text in enumerate(sentences(12, seed=5))]
    Retriever.build(docs, tmp_path / "idx", encoder=HashEncoder(), transform="none").close()  # type: ignore[arg-type]

    @context.contextmanager
    def onto_full_disk(target: Any) -> Any:
        yield Path("/dev/full")

    monkeypatch.setattr("whitevec.export.faiss_index.atomic_path", onto_full_disk)
    code, err = _run(["index", "export-faiss", str(tmp_path / "idx"), str(tmp_path / "out.faiss")], capsys)
    assert code == 3 and _one_line(err) == "whitevec: error: /dev/full: No space left on device", err


def _sqlite_full_error() -> sqlite3.Error:
    """SQLite's own SQLITE_FULL ("database or disk is full"), provoked on a database that may not grow."""
    db = sqlite3.connect(":memory:")
    db.execute("PRAGMA max_page_count = 1")
    try:
        db.execute("CREATE TABLE a (x)")
        db.execute("CREATE TABLE b (x)")
    except sqlite3.OperationalError as exc:
        assert exc.sqlite_errorcode == 13
        return exc
    finally:
        db.close()
    raise AssertionError("SQLite let the database grow")


class _FullFile:
    """A file opened for writing on a full disk: it exists, every write fails (buffered writes name no file)."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle

    def write(self, data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fileno(self) -> int:  # shutil's sendfile fast path would bypass write(): make it fall back
        raise io.UnsupportedOperation("fileno")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def __enter__(self) -> _FullFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()


class _FullDatabase(sqlite3.Connection):
    """A connection to a database on a full disk: it may not grow (a backup into it fails with SQLite's own
    SQLITE_FULL), and any statement that writes fails with SQLITE_FULL too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        super().execute("PRAGMA max_page_count = 1")

    def execute(self, sql: str, *args: Any) -> Any:  # type: ignore[override]
        if sql.lstrip().upper().startswith(("CREATE", "INSERT", "UPDATE", "DELETE")):
            raise _sqlite_full_error()
        return super().execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:  # type: ignore[override]
        raise _sqlite_full_error()


class FullDisk:
    """Every write step under ``root`` counted, and step ``fail_at`` (1-based) failed as on a full disk.

    A write step is one call that puts bytes or names on the disk, at the lowest level Python code reaches:
    ``open()`` for writing ("open": the file is made, then every write fails with ENOSPC), ``os.open`` that
    creates or writes ("create": mkstemp, the preflight probe), ``os.mkdir`` of a new folder ("mkdir": mkdtemp,
    module folders), ``os.fsync`` of a file ("fsync", where a delayed full disk shows), ``os.replace`` /
    ``os.rename`` / ``renameat2`` ("rename"), safetensors' ``serialize_file`` ("safetensors", raising its
    SafetensorError; FAISS files are written through Python's ``open``) and ``sqlite3.connect`` of a file
    ("sqlite": SQLite's SQLITE_FULL from the writes on that connection). The exceptions are those the libraries
    raise on a full tmpfs (see ``test_storage_faults_of_each_library_become_os_errors``). fsync of a folder is
    not a step: whitevec ignores its failure on purpose (some file systems refuse it).
    """

    def __init__(self, root: Path, fail_at: int | None = None) -> None:
        self.root = str(root.resolve())
        self.fail_at = fail_at
        self.steps: list[tuple[str, str]] = []

    def _step(self, kind: str, path: Any) -> bool:
        """Count a step on ``path``; True when it is the one to fail."""
        if isinstance(path, int) or path is None:
            return False
        text = os.path.abspath(os.fsdecode(path))
        if not (text == self.root or text.startswith(self.root + os.sep)):
            return False
        self.steps.append((kind, os.path.relpath(text, self.root)))
        return len(self.steps) == self.fail_at

    @staticmethod
    def _error(path: Any = None, path2: Any = None) -> OSError:
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), *([] if path is None else [path, None, path2]))

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import safetensors.numpy
        from safetensors import SafetensorError

        real_open, real_os_open, real_mkdir = builtins.open, os.open, os.mkdir
        real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename
        real_rename2 = whitevec_io._rename2
        real_serialize, real_connect = safetensors.numpy.serialize_file, sqlite3.connect

        def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            handle = real_open(file, mode, *args, **kwargs)
            if any(c in mode for c in "wax") and self._step("open", file):
                return _FullFile(handle)
            return handle

        def os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            if writes and self._step("create", path):
                raise self._error(path)
            return real_os_open(path, flags, *args, **kwargs)

        def mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
            if not os.path.lexists(path) and self._step("mkdir", path):
                raise self._error(path)
            real_mkdir(path, *args, **kwargs)

        def fsync(fd: Any) -> None:
            number = fd if isinstance(fd, int) else fd.fileno()
            if stat.S_ISREG(os.fstat(number).st_mode) and self._step(
                "fsync", os.readlink(f"/proc/self/fd/{number}")
            ):
                raise self._error()  # the kernel names no file
            real_fsync(fd)

        def renaming(real: Callable[..., Any]) -> Callable[..., Any]:
            def rename(source: Any, target: Any, *args: Any) -> Any:
                if self._step("rename", target):
                    raise self._error(source, target)
                return real(source, target, *args)

            return rename

        def serialize_file(tensors: Any, filename: Any, *args: Any, **kwargs: Any) -> None:
            if self._step("safetensors", filename):
                raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
            real_serialize(tensors, filename, *args, **kwargs)

        def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
            if not kwargs.get("uri") and self._step("sqlite", database):
                return real_connect(database, *args, factory=_FullDatabase, **kwargs)
            return real_connect(database, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", open_)
        monkeypatch.setattr(io, "open", open_)
        monkeypatch.setattr(os, "open", os_open)
        monkeypatch.setattr(os, "mkdir", mkdir)
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", renaming(real_replace))
        monkeypatch.setattr(os, "rename", renaming(real_rename))
        monkeypatch.setattr(whitevec_io, "_rename2", renaming(real_rename2))
        monkeypatch.setattr(safetensors.numpy, "serialize_file", serialize_file)
        monkeypatch.setattr(sqlite3, "connect", connect)


def _final(disk: Path, step: tuple[str, str]) -> str:
    """The path a write step's file will have: its temporaries (``.NAME.HOST-PID.RANDOM.tmp``) named ``NAME``."""
    pattern = re.compile(rf"^\.(?P<name>.+)\.{re.escape(whitevec_io._HOST)}-[0-9]+\.[^/]+\.tmp$")
    parts = [(match["name"] if (match := pattern.match(part)) else part) for part in Path(step[1]).parts]
    return str(disk.joinpath(*parts))


def _tree(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``folder`` (folders as "dir")."""
    return {
        str(p.relative_to(folder)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture(scope="module")
def disk_setup(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Inputs outside the 'disk', and on it an index, a FAISS export and a sentence-transformers export."""
    base = tmp_path_factory.mktemp("full-disk")
    inputs = _write_inputs(base / "in")
    disk = base / "disk"
    model = ["--model", str(tiny_bert_dir), "--no-cache", "-q"]
    build = ["index", "build", "--corpus", str(inputs["corpus"]), "--out", str(disk / "idx"), "--transform"]
    assert main([*build, "whitening-16", *model]) == 0
    assert main(["index", "export-faiss", str(disk / "idx"), str(disk / "out.faiss")]) == 0
    assert main(["export-st", "--index", str(disk / "idx"), "--out", str(disk / "st")]) == 0
    pristine = base / "pristine"
    shutil.copytree(disk, pristine)
    return {**inputs, "disk": disk, "pristine": pristine, "model": tiny_bert_dir}


def _restore(setup: dict[str, Path]) -> None:
    shutil.rmtree(setup["disk"])
    shutil.copytree(setup["pristine"], setup["disk"])


def _count_steps(setup: dict[str, Path], monkeypatch: pytest.MonkeyPatch, run: Callable[[], int]) -> list[Any]:
    """The write steps of one successful ``run`` (which replaces what is on the disk: restored after)."""
    _restore(setup)
    with monkeypatch.context() as patch:
        counter = FullDisk(setup["disk"])
        counter.install(patch)
        assert run() == 0
    _restore(setup)
    return counter.steps


def _cli_commands(setup: dict[str, Path]) -> dict[str, list[str]]:
    disk, model = setup["disk"], ["--model", str(setup["model"]), "--no-cache", "-q"]
    return {
        "index build": [
            "index",
            "build",
            "--corpus",
            str(setup["corpus2"]),
            "--out",
            str(disk / "idx"),
            "--transform",
            "whitening-16",
            *model,
        ],
        "index export-faiss": ["index", "export-faiss", str(disk / "idx"), str(disk / "out.faiss")],
        "export-st": ["export-st", "--index", str(disk / "idx"), "--out", str(disk / "st"), "--overwrite"],
    }


# The kinds of write step each command must have shown (the counting is checked to see them all).
_KINDS = {
    "index build": {"create", "mkdir", "open", "fsync", "rename", "safetensors", "sqlite"},
    "index export-faiss": {"create", "open", "fsync", "rename"},
    "export-st": {"create", "mkdir", "open", "fsync", "rename", "safetensors"},
    "add": {"create", "mkdir", "open", "fsync", "rename", "sqlite"},
}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["index build", "index export-faiss", "export-st"])
def test_a_full_disk_at_every_write_step_is_one_line_and_loses_nothing(
    command: str, disk_setup: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """For N = 1 .. the number of write steps of the command (see FullDisk), the disk is full at step N: one
    line naming a file on that disk (by its final name, not a temporary's), exit 3, and the disk exactly as it
    was (the older index, FAISS file and sentence-transformers folder byte for byte, no temporary left)."""
    from whitevec.index import Retriever

    disk = disk_setup["disk"]
    argv = _cli_commands(disk_setup)[command]
    steps = _count_steps(disk_setup, monkeypatch, lambda: _run(argv, capsys)[0])
    assert _KINDS[command] <= {kind for kind, _ in steps}, steps
    before = _tree(disk)
    for n in range(1, len(steps) + 1):
        with monkeypatch.context() as patch:
            FullDisk(disk, fail_at=n).install(patch)
            code, err = _run(argv, capsys)
        where = f"{command}: full at write step {n} of {len(steps)} ({steps[n - 1]})"
        assert code == 3, (where, err)
        line = _one_line(err)
        # The file named is the one written, by the name it would have had (never a temporary's).
        assert "No space left on device" in line and _final(disk, steps[n - 1]) in line, (where, line)
        assert ".tmp:" not in line and ".tmp/" not in line, (where, line)
        assert _tree(disk) == before, where
    with Retriever.load(disk / "idx", cache=False) as retriever:
        assert retriever.count == 120


@pytest.mark.slow
def test_a_full_disk_at_every_write_step_of_an_add_loses_nothing(
    disk_setup: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Retriever.add`` (the library: the command line has no add), full at each of its write steps: an OSError
    naming a file of the index, the index on disk unchanged, and the Retriever still searching and adding."""
    from whitevec.index import Document, Retriever
    from whitevec.preflight import describe_fault

    disk = disk_setup["disk"]
    new = [Document(f"new-{i}", text) for i, text in enumerate(sentences(5, seed=9))]

    def add() -> int:
        with Retriever.load(disk / "idx", cache=False) as retriever:
            retriever.add(new)
        return 0

    steps = _count_steps(disk_setup, monkeypatch, add)
    assert _KINDS["add"] <= {kind for kind, _ in steps}, steps
    before = _tree(disk)
    with Retriever.load(disk / "idx", cache=False) as retriever:
        expected = retriever.search(["a dog", "the red car"], k=5)
        for n in range(1, len(steps) + 1):
            with monkeypatch.context() as patch:
                FullDisk(disk, fail_at=n).install(patch)
                with pytest.raises(OSError) as caught:
                    retriever.add(new)
            where = f"add: full at write step {n} of {len(steps)} ({steps[n - 1]})"
            line = describe_fault(caught.value) or ""
            assert caught.value.errno == errno.ENOSPC and _final(disk, steps[n - 1]) in line, (where, line)
            assert ".tmp:" not in line and ".tmp/" not in line, (where, line)
            assert _tree(disk) == before, where
            assert retriever.count == 120 and retriever.search(["a dog", "the red car"], k=5) == expected, where
        assert retriever.add(new) == 125
    with Retriever.load(disk / "idx", cache=False) as reloaded:
        assert reloaded.count == 125
    _restore(disk_setup)


def _mount_tmpfs(folder: Path, size: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode(errors='replace').strip()}")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="mounting a tmpfs needs root on Linux")
def test_a_real_full_tmpfs_is_one_line(
    disk_setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``index build`` onto real small tmpfs mounts, from one too small for anything to one with room: each
    run either builds a whole index or ends in one line, exit 3, leaving nothing behind."""
    from whitevec.index import Retriever

    outcomes = []
    for kib in (8, 16, 24, 32, 48, 64, 96, 1024):
        mount = tmp_path / f"m{kib}"
        _mount_tmpfs(mount, kib * 1024)
        try:
            argv = [
                "index",
                "build",
                "--corpus",
                str(disk_setup["corpus"]),
                "--out",
                str(mount / "idx"),
                "--transform",
                "whitening-16",
                "--model",
                str(disk_setup["model"]),
                "--no-cache",
                "-q",
            ]
            code, err = _run(argv, capsys)
            if code == 0:
                with Retriever.load(mount / "idx", cache=False) as built:
                    assert built.count == 120
            else:
                line = _one_line(err)
                assert code == 3 and str(mount) in line, line
                assert "No space left on device" in line or "not enough free space" in line, line
                assert list(mount.iterdir()) == [], line
            outcomes.append((kib, code))
        finally:
            subprocess.run(["umount", str(mount)], check=True)
    assert outcomes[0][1] == 3 and outcomes[-1][1] == 0, outcomes  # the sizes span both outcomes


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="mounting a tmpfs needs root on Linux")
def test_export_faiss_onto_a_real_full_tmpfs_is_one_line(
    disk_setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tmpfs just large enough for an index: the FAISS file does not fit, and faiss's own RuntimeError (a
    traceback before) becomes one line naming the file, exit 3, with nothing left beside the index."""
    source = disk_setup["pristine"] / "idx"
    page = os.sysconf("SC_PAGE_SIZE")
    mount = tmp_path / "m"
    _mount_tmpfs(mount, sum(-(-p.stat().st_size // page) * page for p in source.iterdir()))  # the index fills it
    try:
        shutil.copytree(source, mount / "idx")
        code, err = _run(["index", "export-faiss", str(mount / "idx"), str(mount / "out.faiss")], capsys)
        assert code == 3
        assert _one_line(err) == f"whitevec: error: {mount / 'out.faiss'}: No space left on device"
        assert sorted(p.name for p in mount.iterdir()) == ["idx"]
    finally:
        subprocess.run(["umount", str(mount)], check=True)


# ---- every file takes the umask -----------------------------------------------------------------------------
# One child imports the heavy libraries once, then forks a process per umask that sets it and runs the commands
# (the two at once: a test worker often leaves the second core idle).
# whitevec reads the umask once, at the import of whitevec.utils.io: each fork imports whitevec after setting
# its umask, as a process started under it would.
UMASK_CHILD = textwrap.dedent(
    """
    import importlib, json, os, sys

    for module in ("torch", "transformers.models.bert.modeling_bert", "faiss", "sklearn.decomposition"):
        importlib.import_module(module)
    assert not any(name.startswith("whitevec") for name in sys.modules), "whitevec imported before the umask"


    def write_all(model, inputs, out):
        from whitevec.cli import main
        from whitevec.index import Document, Retriever

        os.environ["WHITEVEC_CACHE"] = os.path.join(out, "cache")
        m = ["--model", model, "-q"]
        runs = [
            ["encode", f"{inputs}/texts.txt", "--out", f"{out}/v.npy", *m],
            ["fit", "--vectors", f"{out}/v.npy", "--out", f"{out}/w.safetensors", "--transform", "whitening-8"],
            ["index", "build", "--corpus", f"{inputs}/corpus.jsonl", "--out", f"{out}/idx", "--transform",
             "whitening-16", *m],
            ["index", "export-faiss", f"{out}/idx", f"{out}/export/out.faiss"],
            ["export-st", "--index", f"{out}/idx", "--out", f"{out}/st"],
            ["eval", "--tasks", "", "--pairs", f"{inputs}/pairs.jsonl", "--transform", "none,whitening-8",
             "--json", f"{out}/eval.json", *m],
            ["tune", "--pairs", f"{inputs}/pairs.jsonl", "--candidates", "whitening-8", "--no-flow",
             "--bootstrap", "100", "--encodings", "float32,fp16", "--out", f"{out}/tune/tuned.json", "--json",
             f"{out}/tune/tune.json", *m],
            ["diagnose", "--corpus", f"{inputs}/texts.txt", "--out", f"{out}/diagnose", "--transform", "none",
             *m],
            ["frequencies", "count", "--corpus", f"{inputs}/texts.txt", "--out", f"{out}/freq.json", "--model",
             model],
            ["eval-retrieval", "--dataset", f"{inputs}/beir", "--transform", "none", "--latency-queries", "0",
             "--json", f"{out}/retrieval/r.json", "--plot", f"{out}/retrieval/r.png", *m],
        ]
        for argv in runs:
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
            assert not code, (argv, code)
        with Retriever.load(f"{out}/idx", cache=False) as retriever:
            retriever.add([Document("added", "a dog and a cat")])


    model, inputs, outs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    pids = {}
    for mask, out in outs.items():  # side by side: each writes only its own folder and vector cache
        pid = os.fork()
        if pid == 0:
            os.umask(int(mask, 8))
            write_all(model, inputs, out)
            from whitevec.cli import exit_without_teardown

            exit_without_teardown(0)  # as the console script ends: exit handlers run
        pids[mask] = pid
    status = {mask: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for mask, pid in pids.items()}
    print(json.dumps(status))
    """
)
UMASKS = (0o022, 0o077)


@pytest.fixture(scope="module")
def umask_outputs(
    tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[int, tuple[Path, int, str]]:
    """Per umask: the folder its process wrote, that process's exit status, and the child's standard error."""
    base = tmp_path_factory.mktemp("umask")
    inputs = _write_inputs(base / "in")["corpus"].parent
    outs = {mask: base / f"out-{mask:o}" for mask in UMASKS}
    for mask, out in outs.items():
        out.mkdir()
        os.chmod(out, 0o777 & ~mask)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    folders = json.dumps({oct(mask): str(out) for mask, out in outs.items()})
    child = subprocess.run(
        [sys.executable, "-c", UMASK_CHILD, str(tiny_bert_dir), str(inputs), folders],
        check=True,
        env=env,
        timeout=600,
        capture_output=True,
        text=True,
    )
    status = json.loads(child.stdout.splitlines()[-1])
    return {mask: (out, status[oct(mask)], child.stderr) for mask, out in outs.items()}


@pytest.mark.slow
@pytest.mark.parametrize("mask", UMASKS, ids=oct)
def test_every_output_takes_the_umask(mask: int, umask_outputs: dict[int, tuple[Path, int, str]]) -> None:
    """encode, fit, index build, add, export-faiss, export-st, eval --json, tune (--out, --json, the plot),
    diagnose, frequencies count, eval-retrieval (--json, --plot) and the vector cache, run under the umask:
    every file 0666 & ~umask, every folder 0777 & ~umask (export-st's Dense weights were 0600, made by
    safetensors)."""
    out, status, err = umask_outputs[mask]
    assert status == 0, err
    modes = {str(p.relative_to(out)): stat.S_IMODE(p.lstat().st_mode) for p in out.rglob("*")}
    expected = {name: 0o777 & ~mask if (out / name).is_dir() else 0o666 & ~mask for name in modes}
    assert {name: oct(mode) for name, mode in modes.items() if mode != expected[name]} == {}
    written = set(modes)
    for name in (
        "v.npy",
        "w.safetensors",
        "idx/index.faiss",
        "idx/docs.sqlite",
        "idx/manifest.json",
        "idx/transform.safetensors",
        "export/out.faiss",
        "st/2_Dense/model.safetensors",
        "eval.json",
        "tune/tuned.json",
        "tune/tune.json",
        "tune/tuned.png",
        "diagnose/report.html",
        "diagnose/metrics.json",
        "freq.json",
        "cache",
    ):
        assert name in written, (name, sorted(written))
