"""Fail early, fail clearly: bad paths are reported before any model loads, the vector cache heals itself,
environment faults and Ctrl-C are one line on stderr, never a traceback."""

from __future__ import annotations

import errno
import gc
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import whitevec.cli as cli
from whitevec.encoders.transformer import Encoder
from whitevec.errors import BadInputError, WhitevecWarning
from whitevec.workflows.vectors import encode_to_file, fit_transform_file

from .test_evaluation import synthetic_task

# Runs the command, then records which heavy modules were imported and how many modules in all: a command that
# imported none of them cannot have loaded a model, however slow the machine.
HEAVY = ("torch", "transformers", "scipy", "sklearn", "faiss")
# Python, typer, rich and numpy: 300 to 400 modules at a fast failure; pandas alone brings 610, scipy.linalg 441,
# torch 1,123. A count, not a time: this VM's CPU time for one such failure ran from 0.42 s to 1.99 s in one day.
FEW_MODULES = 500
WRAPPER = f"""
import atexit, json, os, sys

def record():
    with open(os.environ["HEAVY_MODULES_OUT"], "w") as out:
        heavy = [name for name in {HEAVY!r} if name in sys.modules]
        json.dump({{"heavy": heavy, "modules": len(sys.modules)}}, out)

atexit.register(record)
from whitevec.cli import main
main(sys.argv[1:])
"""


def _run_child(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[int, str, list[str], int, float]:
    """Run ``whitevec ARGS`` in a child: (exit status, stderr, heavy modules imported, modules imported in all,
    CPU s)."""
    out, err, modules = cwd / "child.out", cwd / "child.err", cwd / "child.modules"
    full_env = {**os.environ, **(env or {}), "HEAVY_MODULES_OUT": str(modules)}
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", WRAPPER, *args], cwd=cwd, env=full_env, stdout=stdout, stderr=stderr
        )
        killer = threading.Timer(120, child.kill)  # a hung child fails the test instead of hanging it
        killer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)  # wait4: the child's own CPU time (shown when a check fails)
        finally:
            killer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)
    imported = json.loads(modules.read_text())
    cpu = usage.ru_utime + usage.ru_stime
    return child.returncode, err.read_text(), imported["heavy"], imported["modules"], cpu


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    """A folder with a text file, a pairs file, a BEIR folder, a plain file named 'afile' and a model folder that
    is only a config.json (nothing may load it)."""
    (tmp_path / "texts.txt").write_text("a dog is running\na cat is eating\n")
    (tmp_path / "pairs.jsonl").write_text(json.dumps({"sentence1": "a", "sentence2": "b", "score": 1}) + "\n")
    (tmp_path / "afile").write_text("not a folder\n")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({"hidden_size": 32}))
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "text": "a dog"}) + "\n")
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "dog"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return tmp_path


# (arguments, text the one error line must hold, exit status)
FAST_FAILURES = [
    (["index", "build", "--corpus", "missing.jsonl", "--out", "idx"], "missing.jsonl", 2),
    (["index", "build", "--corpus", "texts.txt", "--out", "idx", "--fit-on", "gone.txt"], "gone.txt", 2),
    (["index", "build", "--corpus", "texts.txt", "--out", "idx", "--empty-documents", "drop"], "'drop'", 2),
    (["index", "build", "--corpus", "texts.txt", "--out", "afile/idx", "--model", "model"], "afile", 3),
    (["encode", "missing.txt", "--out", "v.npy"], "missing.txt", 2),
    (["encode", "texts.txt", "--out", "afile/v.npy", "--model", "model"], "afile", 3),
    (["encode", "texts.txt", "--out", "v.npy", "--transform", "gone.safetensors"], "gone.safetensors", 2),
    (["encode", "texts.txt", "--out", "v.npy", "--model", "./no-model"], "no-model", 2),
    (["eval", "--tasks", "", "--pairs", "missing.jsonl"], "missing.jsonl", 2),
    (["eval", "--tasks", "", "--pairs", "pairs.jsonl", "--fit-on", "gone.txt"], "gone.txt", 2),
    (["eval", "--tasks", "", "--pairs", "pairs.jsonl", "--json", "afile/r.json"], "afile", 3),
    (["fit", "--vectors", "missing.npy", "--out", "w.safetensors"], "missing.npy", 2),
    (["fit", "--texts", "missing.txt", "--out", "w.safetensors"], "missing.txt", 2),
    (["fit", "--texts", "texts.txt", "--out", "afile/w.safetensors", "--model", "model"], "afile", 3),
    (["diagnose", "--corpus", "missing.txt", "--out", "report"], "missing.txt", 2),
    (["diagnose", "--corpus", "texts.txt", "--out", "afile", "--model", "model"], "afile", 3),
    (["index", "info", "missing-idx"], "missing-idx", 2),
    (["index", "export-faiss", "missing-idx", "x.faiss"], "missing-idx", 2),
    (["search", "missing-idx", "a query"], "missing-idx", 2),
    (["eval-retrieval", "--dataset", "missing-beir"], "missing-beir", 2),
    (["eval-retrieval", "--dataset", "beir", "--json", "afile/r.json"], "afile", 3),
]


@pytest.mark.parametrize(("args", "needle", "status"), FAST_FAILURES, ids=lambda v: str(v)[:60])
def test_bad_paths_fail_before_anything_heavy(args: list[str], needle: str, status: int, workdir: Path) -> None:
    code, err, heavy, modules, cpu = _run_child(args, workdir)
    lines = err.strip().splitlines()
    assert code == status, err
    assert len(lines) == 1 and lines[0].startswith("whitevec: error: ") and needle in lines[0], err
    assert heavy == [], f"imported {heavy} before reporting the error"
    assert modules < FEW_MODULES, f"{modules} modules imported before reporting the error ({cpu:.2f} s of CPU)"


def test_a_cache_variable_naming_a_file_fails_fast(workdir: Path) -> None:
    env = {"WHITEVEC_CACHE": str(workdir / "afile")}
    code, err, heavy, modules, _ = _run_child(
        ["encode", "texts.txt", "--out", "v.npy", "--model", "model"], workdir, env
    )
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "WHITEVEC_CACHE" in lines[0] and "afile" in lines[0], err
    assert heavy == [] and modules < FEW_MODULES
    assert not (workdir / "v.npy").exists()


def test_encoder_checks_its_cache_folder_before_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("WHITEVEC_CACHE", str(blocker))
    # The model does not exist either: the cache is checked first, so its error is the one raised.
    with pytest.raises(BadInputError, match="WHITEVEC_CACHE"):
        Encoder(tmp_path / "no-model")
    with pytest.raises(BadInputError, match="cache argument"):
        Encoder(tmp_path / "no-model", cache=blocker / "sub")


def _no_encoder(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the encoder was built although the output cannot be written")


def _one_error_line(capsys: pytest.CaptureFixture[str], run: Any) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        run()
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("whitevec: error: ") and "Traceback" not in err, err
    return int(exit_info.value.code or 0), lines[0]


def test_too_little_free_space_is_reported_before_the_model_loads(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "many.txt").write_text("a dog is running\n" * 10_000)
    monkeypatch.chdir(workdir)
    monkeypatch.setattr("whitevec.cli._options._encoder", _no_encoder)
    monkeypatch.setattr(
        "whitevec.preflight.shutil.disk_usage", lambda path: SimpleNamespace(total=10**9, used=10**9, free=100_000)
    )
    out = workdir / "v.npy"
    code, line = _one_error_line(
        capsys, lambda: cli.main(["encode", str(workdir / "many.txt"), "--out", str(out), "--model", "model"])
    )
    # 10,000 texts x 32 dimensions x 4 bytes = 1.2 MiB needed, 100,000 bytes (97.7 KiB) free: exit 3, the
    # environment's fault.
    assert code == 3
    assert line == f"whitevec: error: not enough free space in {workdir}: need about 1.2 MiB, 97.7 KiB free"


@pytest.mark.parametrize(
    ("need", "free", "sizes"),
    [
        (40_000, 2_000, "need about 39.1 KiB, 2.0 KiB free"),  # was "need about 0.0 MiB, 0.0 MiB free"
        (900, 10, "need about 900 B, 10 B free"),
        (3 << 30, 700 << 20, "need about 3.0 GiB, 700 MiB free"),
    ],
)
def test_the_free_space_message_picks_units_by_size(
    need: int, free: int, sizes: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from whitevec.preflight import check_free_space

    monkeypatch.setattr(
        "whitevec.preflight.shutil.disk_usage", lambda path: SimpleNamespace(total=need * 2, used=0, free=free)
    )
    with pytest.raises(OSError, match="not enough free space") as caught:
        check_free_space(tmp_path, need)
    assert caught.value.strerror == f"not enough free space in {tmp_path}: {sizes}"


def test_a_read_only_output_folder_is_reported_before_the_model_loads(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Tests run as root in CI, where chmod cannot make a folder read-only: make the probe fail instead.
    read_only = workdir / "ro"
    real_mkstemp: Any = tempfile.mkstemp

    def mkstemp(*args: Any, dir: Any = None, **kwargs: Any) -> Any:
        if dir is not None and Path(dir).resolve() == read_only.resolve():
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(Path(dir) / "probe"))
        return real_mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr("tempfile.mkstemp", mkstemp)
    monkeypatch.setattr("whitevec.cli._options._encoder", _no_encoder)
    monkeypatch.chdir(workdir)
    code, line = _one_error_line(
        capsys, lambda: cli.main(["encode", "texts.txt", "--out", "ro/v.npy", "--model", "model"])
    )
    assert code == 3 and "cannot write --out file ro/v.npy: Read-only file system" in line


@pytest.mark.parametrize(
    "command",
    [["add", "--corpus", "more.jsonl"], ["delete", "--ids", "gone.txt"], ["compact"], ["refit"]],
    ids=lambda command: command[0],
)
def test_a_read_only_index_folder_is_one_line_before_anything_is_encoded(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    """``index add`` and ``index refit`` of an index in a read-only folder loaded the model and encoded every
    document, then failed naming the folder alone (``ro/ix: Operation not permitted``): now the folder is probed
    first, as ``index build`` probes its output, and every write says so in the same line."""
    from tests.static_helpers import tiny_static_folder
    from whitevec.encoders.loading import load_encoder
    from whitevec.encoders.static import StaticEncoder
    from whitevec.index import Document, Retriever

    read_only = workdir / "ro"
    encoder = load_encoder(str(tiny_static_folder(workdir / "static")))
    docs = [Document(f"d{i}", text) for i, text in enumerate(["a dog is running", "a cat is eating", "a man"])]
    Retriever.build(docs, read_only / "ix", encoder=encoder, transform="none").close()
    (workdir / "more.jsonl").write_text(json.dumps({"id": "new", "text": "a dog"}) + "\n")
    (workdir / "gone.txt").write_text("d0\n")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in (read_only / "ix").iterdir())
    real_mkstemp: Any = tempfile.mkstemp

    def mkstemp(*args: Any, dir: Any = None, **kwargs: Any) -> Any:  # root ignores chmod: the probe fails
        if dir is not None and Path(dir).resolve() == read_only.resolve():
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(Path(dir) / "probe"))
        return real_mkstemp(*args, dir=dir, **kwargs)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("encoded although the index folder cannot be written")

    monkeypatch.setattr("tempfile.mkstemp", mkstemp)
    monkeypatch.setattr(StaticEncoder, "encode", refused)
    monkeypatch.chdir(workdir)
    code, line = _one_error_line(capsys, lambda: cli.main(["index", command[0], "ro/ix", *command[1:]]))
    assert code == 3 and line.endswith("cannot write index folder ro/ix: Read-only file system (in ro)"), line
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (read_only / "ix").iterdir()) == before


class _RefusingEncoder:
    """Stands in for an Encoder whose encode must not be reached."""

    dim = 8

    def encode(self, texts: list[str], show_progress: bool | None = None) -> np.ndarray:
        raise AssertionError("encoded although the output cannot be written")


def test_file_jobs_check_the_output_before_encoding(workdir: Path) -> None:
    encoder: Any = _RefusingEncoder()
    with pytest.raises(NotADirectoryError, match="afile is a file, not a folder"):
        encode_to_file(encoder, ["a dog"], workdir / "afile" / "v.npy")
    with pytest.raises(NotADirectoryError, match="afile is a file, not a folder"):
        fit_transform_file(
            "whitening", workdir / "afile" / "w.safetensors", texts=workdir / "texts.txt", encoder=encoder
        )


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "OUT"),
        sqlite3.OperationalError("database or disk is full"),
    ],
    ids=["ENOSPC", "sqlite-full"],
)
def test_an_environment_fault_is_one_line(
    error: Exception, workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from whitevec.transforms import Transform

    vectors = workdir / "v.npy"
    np.save(vectors, np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32))
    out = workdir / "w.safetensors"
    if isinstance(error, OSError):
        error.filename = str(out)

    def save(self: Any, path: Any) -> Any:
        raise error

    monkeypatch.setattr(Transform, "save", save)
    code, line = _one_error_line(capsys, lambda: cli.main(["fit", "--vectors", str(vectors), "--out", str(out)]))
    assert code == 3
    assert (str(out) in line and "No space left on device" in line) or "database or disk is full" in line


def test_a_bug_in_sqlite_use_keeps_its_traceback(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from whitevec.transforms import Transform

    vectors = workdir / "v.npy"
    np.save(vectors, np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32))

    def save(self: Any, path: Any) -> Any:
        raise sqlite3.OperationalError("no such table: vectorz")

    monkeypatch.setattr(Transform, "save", save)
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        cli.main(["fit", "--vectors", str(vectors), "--out", str(workdir / "w.safetensors")])


# ---- the vector cache heals itself ---------------------------------------------------------------------
def _texts(n: int) -> list[str]:
    return list(dict.fromkeys(synthetic_task(n_pairs=n, subsets=1).sentences("target")))


@pytest.mark.parametrize("damage_from", [0, 4096], ids=["whole-file", "data-pages"])
def test_a_damaged_cache_file_is_moved_aside_and_rebuilt(
    damage_from: int, tiny_bert_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "cache"
    texts = _texts(100)
    first = Encoder(tiny_bert_dir, "last-avg", cache=folder)
    expected = first.encode(texts)
    del first
    gc.collect()  # closes the cache's connection, so SQLite folds its journal back into the file
    (path,) = folder.glob("*.sqlite")
    size = path.stat().st_size
    assert size > damage_from + 4096  # several pages: the data pages can be damaged alone
    with open(path, "r+b") as handle:  # random bytes over the file, or over all but its header page
        handle.seek(damage_from)
        handle.write(np.random.default_rng(1).bytes(size - damage_from))
    with pytest.warns(WhitevecWarning, match="damaged"):
        again = Encoder(tiny_bert_dir, "last-avg", cache=folder).encode(texts)
    np.testing.assert_allclose(again, expected, atol=1e-6)
    (aside,) = folder.glob(f"{path.name}.corrupt-*")
    assert aside.stat().st_size == size
    gc.collect()
    with sqlite3.connect(path) as db:  # the new cache is whole and holds every vector
        assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] == len(texts)


class _FaultyConnection:
    """A real SQLite connection whose statements starting with ``fail_on`` raise ``error``, counting them."""

    def __init__(self, real: sqlite3.Connection, fail_on: str, error: Exception) -> None:
        self.real, self.fail_on, self.error, self.failed = real, fail_on, error, 0

    def _check(self, sql: str) -> None:
        if sql.lstrip().upper().startswith(self.fail_on):
            self.failed += 1
            raise self.error

    def execute(self, sql: str, *args: Any) -> Any:
        self._check(sql)
        return self.real.execute(sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        self._check(sql)
        return self.real.executemany(sql, *args)

    def __enter__(self) -> Any:
        return self.real.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.real.__exit__(*exc)

    def close(self) -> None:
        self.real.close()


@pytest.mark.parametrize(
    ("fail_on", "message", "action"),
    [
        ("INSERT", "database or disk is full", "write"),
        ("PRAGMA", "attempt to write a readonly database", "open"),
    ],
)
def test_a_cache_that_cannot_be_written_still_returns_the_vectors(
    fail_on: str, message: str, action: str, tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = _texts(40)
    expected = Encoder(tiny_bert_dir, "last-avg", cache=False).encode(texts)
    connections: list[_FaultyConnection] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> Any:
        connections.append(
            _FaultyConnection(real_connect(*args, **kwargs), fail_on, sqlite3.OperationalError(message))
        )
        return connections[-1]

    monkeypatch.setattr(sqlite3, "connect", connect)
    encoder = Encoder(tiny_bert_dir, "last-avg", cache=tmp_path / "cache")
    with pytest.warns(WhitevecWarning, match=f"could not {action} the vector cache .*{message}"):
        vectors = encoder.encode(texts)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: the cache is off for the rest of this encoder's life
        np.testing.assert_allclose(encoder.encode(texts[:5]), expected[:5], atol=1e-6)
    assert len(connections) == 1 and connections[0].failed == 1


# ---- Ctrl-C --------------------------------------------------------------------------------------------
# The child encodes for ever once it started (a real forward pass in a loop) and says WORKING first. A shell
# that starts a job in the background hands it SIGINT ignored, and Python then never raises KeyboardInterrupt:
# the child restores Python's handler so this test holds however the suite is run.
INTERRUPTED_CHILD = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
import whitevec.encoders.transformer
forward = whitevec.encoders.transformer.Encoder._forward

def forever(self, *args, **kwargs):
    print("WORKING", flush=True)
    while True:
        forward(self, *args, **kwargs)

whitevec.encoders.transformer.Encoder._forward = forever
from whitevec.cli import main
main(sys.argv[1:])
"""


def test_ctrl_c_says_interrupted_and_exits_130(tiny_bert_dir: Path, tmp_path: Path) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(_texts(20)) + "\n")
    out, err = tmp_path / "child.out", tmp_path / "child.err"
    argv = [
        "encode",
        str(texts),
        "--out",
        str(tmp_path / "v.npy"),
        "--model",
        str(tiny_bert_dir),
        "--no-cache",
        "-q",
    ]
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", INTERRUPTED_CHILD, *argv], stdout=stdout, stderr=stderr, cwd=tmp_path
        )
        try:
            deadline = time.monotonic() + 120
            while "WORKING" not in out.read_text() and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert "WORKING" in out.read_text(), err.read_text()
            time.sleep(0.2)  # well inside the encoding loop
            child.send_signal(signal.SIGINT)
            code = child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert code == 130
    assert err.read_text() == "whitevec: interrupted\n"
    assert not (tmp_path / "v.npy").exists()
