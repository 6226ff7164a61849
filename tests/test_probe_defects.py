"""Bad input found by the second probe (issue 30): each case is one line and exit 2, before anything slow runs.

Constant gold scores in eval, blank search queries, serve on a port that is taken or privileged, an output path
that is a folder: each failed late, silently or with a temporary file's name before.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import whitevec.cli as cli
from whitevec.datasets import Pair, read_pairs_file
from whitevec.datasets.retrieval import Document, read_beir
from whitevec.errors import BadInputError
from whitevec.evaluation.sts import evaluate_sts, evaluate_sts_poolings
from whitevec.preflight import describe_fault
from whitevec.utils.io import atomic_path
from whitevec.workflows.vectors import encode_to_file

from .test_evaluation import synthetic_task


def _one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    """Run ``whitevec ARGV``: (exit status, its one line on stderr); fails unless stderr is exactly one line."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("whitevec: error: ") and "Traceback" not in err, err
    return int(exit_info.value.code or 0), lines[0]


def _must_not_run(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("reached the slow part although the input was refused first")


class _RefusingEncoder:
    """An encoder stand-in that fails the test if anything is encoded."""

    model_name = "refusing"
    dim = 8

    def encode(self, texts: list[str], show_progress: bool | None = None) -> np.ndarray:
        raise AssertionError("encoded although the input was refused first")


@pytest.fixture(scope="module")
def tiny_index(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from whitevec.encoders.transformer import Encoder
    from whitevec.index import Retriever

    texts = ["a man is playing guitar", "the dog is running", "a woman is eating food", "the cat is on the car"]
    out = tmp_path_factory.mktemp("probe") / "idx"
    docs = [Document(str(i), text) for i, text in enumerate(texts)]
    with Encoder(tiny_bert_dir, "last-avg", cache=False) as encoder:
        Retriever.build(docs, out, encoder=encoder, transform="none").close()
    return out


# --- eval: constant gold scores ----------------------------------------------------------------------------


def test_eval_refuses_constant_gold_scores_before_the_model_loads(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = tmp_path / "const.tsv"
    pairs.write_text("a dog runs\ta cat runs\t3\nthe man eats\ta girl eats\t3\nthe boy\ta car\t3\n")
    monkeypatch.setattr("whitevec.cli._options._encoder", _must_not_run)
    code, line = _one_error_line(
        capsys, ["eval", "--pairs", str(pairs), "--tasks", "", "--model", str(tiny_bert_dir), "-q"]
    )
    assert code == 2
    assert line == f"whitevec: error: every pair of {pairs} has the same gold score (3); " + (
        "a correlation needs varying scores"
    )


@pytest.mark.parametrize("constant", ["--pairs", "--test-pairs"])
def test_tune_refuses_constant_gold_scores_as_the_file_is_read(
    constant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """tune refused them too, but only inside ``tune()``, after torch and the models had loaded (6.6 s here)."""
    import whitevec.tuning.run

    varied, flat = tmp_path / "dev.tsv", tmp_path / "const.tsv"
    varied.write_text("a dog runs\ta cat runs\t1\nthe man eats\ta girl eats\t4\nthe boy\ta car\t0\n")
    flat.write_text("a dog runs\ta cat runs\t3\nthe man eats\ta girl eats\t3\nthe boy\ta car\t3\n")
    files = {"--pairs": flat, "--test-pairs": varied} if constant == "--pairs" else {"--pairs": varied}
    files.setdefault("--test-pairs", flat)
    monkeypatch.setattr(whitevec.tuning.run, "tune", _must_not_run)
    argv = ["tune", *(a for option, path in files.items() for a in (option, str(path)))]
    code, line = _one_error_line(capsys, [*argv, "--out", str(tmp_path / "tuned.json")])
    assert code == 2
    assert line.startswith(f"whitevec: error: every pair of {flat} has the same gold score (3)"), line


def test_evaluate_sts_refuses_a_constant_subset_inside_a_task_before_encoding() -> None:
    task = synthetic_task()
    task.subsets["part1"] = [Pair(p.sentence1, p.sentence2, 2.5) for p in task.subsets["part1"]]
    message = r"every pair of subset part1 of synthetic has the same gold score \(2\.5\)"
    with pytest.raises(BadInputError, match=message):
        evaluate_sts(_RefusingEncoder(), [task], ["none"])  # type: ignore[arg-type]
    with pytest.raises(BadInputError, match=message):
        evaluate_sts_poolings(_RefusingEncoder(), ["cls", "last-avg"], [task], ["none"])  # type: ignore[arg-type]
    task.subsets["part1"] = task.subsets["part1"][:1]
    with pytest.raises(BadInputError, match=r"subset part1 of synthetic holds 1 scored pair\(s\)"):
        evaluate_sts(_RefusingEncoder(), [task], ["none"])  # type: ignore[arg-type]


# --- search: blank queries -----------------------------------------------------------------------------------


def test_search_refuses_a_blank_query_before_the_index_loads(
    tiny_index: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from whitevec.index import Retriever

    monkeypatch.setattr(Retriever, "load", _must_not_run)
    for blank in ("", "   ", "\t\u3000"):
        code, line = _one_error_line(capsys, ["search", str(tiny_index), "a dog", blank])
        # The words HTTP /search answers the same query with (422).
        assert code == 2 and line == "whitevec: error: queries[1] is empty or only whitespace"


def test_the_retriever_refuses_blank_queries_and_texts(tiny_index: Path) -> None:
    from whitevec.index import Retriever

    with Retriever.load(tiny_index, cache=False) as retriever:
        assert len(retriever.search(["a dog"], k=2)[0]) == 2
        with pytest.raises(BadInputError, match=r"queries\[0\] is empty or only whitespace"):
            retriever.search([" "], k=2)
        with pytest.raises(BadInputError, match=r"texts\[1\] is empty or only whitespace"):
            retriever.embed(["a dog", ""])


def test_a_judged_query_without_text_is_refused_when_read(tmp_path: Path) -> None:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "one"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "one"}\n{"_id": "q2", "text": " "}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t1\n")
    with pytest.raises(BadInputError, match=r"queries\.jsonl: query 'q2' has no text"):
        read_beir(folder)


def test_a_pairs_score_past_the_float_range_is_refused(tmp_path: Path) -> None:
    # Found by tests/test_readers_properties.py: JSON reads the integer, float() then overflowed (a traceback).
    path = tmp_path / "p.jsonl"
    path.write_text('{"sentence1": "a", "sentence2": "b", "score": ' + "9" * 400 + "}\n")
    with pytest.raises(BadInputError, match=r"p\.jsonl, line 1: score is an integer too large for a float"):
        read_pairs_file(path)


# --- serve: the address, before anything loads ---------------------------------------------------------------


@pytest.fixture()
def held_port() -> Iterator[int]:
    """A port on 127.0.0.1 that this process listens on for the test's duration."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize("workers", [1, 2])
def test_serve_on_a_port_in_use_says_who_holds_it_before_anything_loads(
    tmp_path: Path,
    held_port: int,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    workers: int,
) -> None:
    import whitevec.index
    import whitevec.service.run as run

    # Nothing may load: not the index (one process), not even its manifest (several), and no server may start.
    for name in ("served_app", "load_retriever", "run_app"):
        monkeypatch.setattr(run, name, _must_not_run)
    monkeypatch.setattr(whitevec.index, "read_manifest", _must_not_run)
    code, line = _one_error_line(
        capsys, ["serve", str(tmp_path), "--port", str(held_port), "--workers", str(workers)]
    )
    assert code == 2 and f"cannot serve on 127.0.0.1:{held_port}: the address is already in use" in line
    assert line.endswith("; stop that server or choose another --port")
    if Path("/proc/net/tcp").exists():
        assert f" by pid {os.getpid()} (" in line  # this test's process holds it


def test_a_port_taken_after_the_check_is_still_one_line(held_port: int) -> None:
    from fastapi import FastAPI

    from whitevec.service.run import run_app
    from whitevec.service.settings import ServeSettings

    # uvicorn itself meets the port in use (it logs that, then exits with status 3): one error, not SystemExit.
    with pytest.raises(BadInputError, match=rf"127\.0\.0\.1:{held_port}: the address is already in use"):
        run_app(FastAPI(), ServeSettings(), port=held_port, log_level="critical")


def test_an_address_this_machine_lacks_is_refused_only_when_none_binds(monkeypatch: pytest.MonkeyPatch) -> None:
    """`localhost` resolving to ::1 with IPv6 off is served on 127.0.0.1 (as uvicorn does), not refused; a host
    whose every address is missing here is one line. 192.0.2.1 (TEST-NET-1) is no address of this machine;
    binding it sends nothing."""
    from whitevec.service.run import check_address

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    missing = (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("192.0.2.1", port))
    local = (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", port))
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: [missing, local])
    check_address("somehost", port)
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: [missing])
    with pytest.raises(BadInputError, match=r"somehost:\d+: --host is not an address of this machine"):
        check_address("somehost", port)


def test_serve_on_a_privileged_port_without_the_privilege_is_one_line() -> None:
    first_free = Path("/proc/sys/net/ipv4/ip_unprivileged_port_start")
    if os.name != "posix" or (first_free.exists() and int(first_free.read_text()) <= 80):
        pytest.skip("any user may bind port 80 here")
    # As root, lose only the privilege to bind a port below 1024: the effective uid becomes nobody's, which
    # clears the effective capabilities, while the filesystem uid stays root's (setfsuid), so that the lazy
    # imports still read the checkout, the venv and Python wherever they are (a private clone, /root/...).
    # The index folder is "/": nothing loads from it before the port is checked.
    drop = ""
    if os.geteuid() == 0:
        if sys.platform != "linux":
            pytest.skip("as root, dropping only the port privilege needs Linux's setfsuid")
        drop = "import ctypes; os.seteuid(65534); ctypes.CDLL(None).setfsuid(0)"
    program = f"import os, whitevec.cli\n{drop}\nwhitevec.cli.main(['serve', '/', '--port', '80'])\n"
    child = subprocess.run(
        [sys.executable, "-c", program], cwd="/", capture_output=True, text=True, timeout=120, check=False
    )
    assert child.returncode == 2 and child.stderr.count("\n") == 1, child.stderr
    assert child.stderr.startswith(
        "whitevec: error: cannot serve on 127.0.0.1:80: permission denied: ports below 1024 need root"
    ), child.stderr


# --- outputs that are folders, and temporary names -------------------------------------------------------------


def test_encode_into_a_folder_fails_before_the_model_loads(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = tmp_path / "t.txt"
    texts.write_text("a dog runs\n")
    folder = tmp_path / "emptydir"
    folder.mkdir()
    monkeypatch.setattr("whitevec.cli._options._encoder", _must_not_run)
    code, line = _one_error_line(capsys, ["encode", str(texts), "-o", str(folder), "--model", str(tiny_bert_dir)])
    assert (
        code == 2
        and line == f"whitevec: error: cannot write --out file {folder}: it is a folder; name a file to write"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emptydir", "t.txt"] and not any(folder.iterdir())


def test_encode_to_file_refuses_a_folder_before_encoding(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="it is a folder"):
        encode_to_file(_RefusingEncoder(), ["a dog"], tmp_path)  # type: ignore[arg-type]


def test_export_faiss_into_a_folder_is_one_line(
    tiny_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, line = _one_error_line(capsys, ["index", "export-faiss", str(tiny_index), str(tmp_path)])
    assert (
        code == 2
        and line == f"whitevec: error: cannot write FAISS file {tmp_path}: it is a folder; name a file to write"
    )
    assert not any(tmp_path.iterdir())


def test_a_failed_rename_names_the_target_not_the_temporary(tmp_path: Path) -> None:
    target = tmp_path / "emptydir"
    target.mkdir()
    with pytest.raises(IsADirectoryError) as info, atomic_path(target) as tmp:
        tmp.write_text("x")
    assert describe_fault(info.value) == f"{target}: Is a directory"
    assert [p.name for p in tmp_path.iterdir()] == ["emptydir"]  # the temporary is gone too
