"""The whitevec command: runs end to end, and bad input gives one line on stderr and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from whitevec.cli import main
from whitevec.datasets import load_sts_task
from whitevec.encoders.transformer import Encoder
from whitevec.evaluation import evaluate_sts
from whitevec.transforms import Transform

from .static_helpers import tiny_static_index
from .test_evaluation import synthetic_task
from .test_models import counted_lookups


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(args) or 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def pairs_file(tmp_path: Path) -> Path:
    path = tmp_path / "mine.jsonl"
    task = synthetic_task(n_pairs=30, subsets=1)
    path.write_text(
        "".join(
            json.dumps({"sentence1": p.sentence1, "sentence2": p.sentence2, "score": p.score}) + "\n"
            for p in task.all_pairs()
        )
    )
    return path


def test_eval_on_a_pairs_file_prints_table_and_writes_json(
    tiny_bert_dir: Path, pairs_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "res.json"
    code, out, err = run_cli(
        [
            "eval",
            "--model",
            str(tiny_bert_dir),
            "--tasks",
            "",
            "--pairs",
            str(pairs_file),
            "--pooling",
            "cls,last-avg",
            "--transform",
            "none,whitening-4",
            "--json",
            str(out_json),
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    assert "mine" in out and "whitening-4" in out and "wmean" in out
    saved = json.loads(out_json.read_text())
    assert [(s["pooling"], s["transform"]) for s in saved["scores"]] == [
        ("cls", "none"),
        ("cls", "whitening-4"),
        ("last-avg", "none"),
        ("last-avg", "whitening-4"),
    ]


def test_encode_and_fit_commands(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(synthetic_task(n_pairs=40, subsets=1).sentences("target")) + "\n")
    vectors = tmp_path / "v.npy"
    code, _, err = run_cli(
        ["encode", str(texts), "--out", str(vectors), "--model", str(tiny_bert_dir), "-q"], capsys
    )
    assert code == 0, err
    matrix = np.load(vectors)
    assert matrix.shape[1] == 32 and matrix.dtype == np.float32
    fast = tmp_path / "bf16.npy"
    code, _, err = run_cli(
        ["encode", str(texts), "--out", str(fast), "--model", str(tiny_bert_dir), "--compute", "bf16", "-q"],
        capsys,
    )
    assert code == 0, err
    cos = (
        np.sum(matrix * np.load(fast), axis=1)
        / np.linalg.norm(matrix, axis=1)
        / np.linalg.norm(np.load(fast), axis=1)
    )
    assert cos.min() > 0.99 and not np.array_equal(matrix, np.load(fast))
    saved = tmp_path / "w.safetensors"
    code, _, err = run_cli(
        ["fit", "--vectors", str(vectors), "--transform", "whitening-4", "--out", str(saved)], capsys
    )
    assert code == 0, err
    whitening = Transform.load(saved)
    assert whitening.transform(matrix).shape == (matrix.shape[0], 4)
    # encode through the saved transform equals applying it by hand
    code, _, err = run_cli(
        [
            "encode",
            str(texts),
            "--out",
            str(tmp_path / "w.npy"),
            "--model",
            str(tiny_bert_dir),
            "--transform",
            str(saved),
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    np.testing.assert_allclose(np.load(tmp_path / "w.npy"), whitening.transform(matrix), atol=1e-5)
    # fit from texts directly
    code, _, err = run_cli(
        [
            "fit",
            "--texts",
            str(texts),
            "--model",
            str(tiny_bert_dir),
            "--transform",
            "center",
            "--out",
            str(tmp_path / "c.safetensors"),
            "-q",
        ],
        capsys,
    )
    assert code == 0, err


@pytest.mark.parametrize("command", ["encode", "fit"])
def test_commands_close_the_encoders_they_make(
    command: str,
    tiny_bert_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from whitevec.encoders.transformer import Encoder

    made: list[Encoder] = []
    closed: list[Encoder] = []
    real_init, real_close = Encoder.__init__, Encoder.close

    def init(self: Encoder, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        made.append(self)

    def close(self: Encoder) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(Encoder, "__init__", init)
    monkeypatch.setattr(Encoder, "close", close)
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(synthetic_task(n_pairs=20, subsets=1).sentences("target")) + "\n")
    args = {
        "encode": ["encode", str(texts), "--out", str(tmp_path / "v.npy")],
        "fit": ["fit", "--texts", str(texts), "--transform", "center", "--out", str(tmp_path / "c.safetensors")],
    }[command]
    code, _, err = run_cli([*args, "--model", str(tiny_bert_dir), "-q"], capsys)
    assert code == 0, err
    assert len(made) == 1 and closed == made


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["eval", "--tasks", "stsb", "--data-dir", "/nonexistent/data"], "/nonexistent/data"),
        (["eval", "--tasks", "nosuchtask", "--data-dir", "."], "nosuchtask"),
        (["eval", "--pooling", "bogus", "--tasks", "", "--pairs", "PAIRS"], "bogus"),
        (["eval", "--transform", "whitening-0", "--tasks", "", "--pairs", "PAIRS"], "whitening"),
        (["fit", "--out", "x.safetensors"], "--vectors"),
        (["fit", "--vectors", "/nonexistent.npy", "--out", "x.safetensors"], "/nonexistent.npy"),
        (["encode", "/nonexistent.txt", "--out", "x.npy"], "/nonexistent.txt"),
        (["eval", "--model", "/nonexistent/model", "--tasks", "", "--pairs", "PAIRS"], "/nonexistent/model"),
        (["eval", "--compute", "fp8", "--tasks", "", "--pairs", "PAIRS"], "fp8"),
    ],
)
def test_bad_input_is_one_line_and_non_zero(
    args: list[str],
    needle: str,
    pairs_file: Path,
    tiny_bert_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    args = [str(pairs_file) if a == "PAIRS" else a for a in args]
    if "--model" not in args and args[0] in ("eval", "encode"):
        args += ["--model", str(tiny_bert_dir)]
    code, _, err = run_cli(args, capsys)
    assert code != 0
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert needle in lines[0] and "Traceback" not in err


def test_missing_data_folder_says_how_to_set_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WHITEVEC_DATA", raising=False)
    code, _, err = run_cli(["eval", "--tasks", "stsb"], capsys)
    assert code != 0 and "WHITEVEC_DATA" in err and "--data-dir" in err


def test_console_script_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from whitevec.cli import main; main(['--help'])"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "eval" in done.stdout


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What is tested is the output path: the tiny static encoder's index spares the child process torch."""
    return tiny_static_index(tmp_path_factory.mktemp("small-index"))


@pytest.mark.parametrize(
    "args",
    [
        ["index", "info", "IDX"],
        ["search", "IDX", "a dog", "a cat", "-k", "20"],
        ["search", "IDX", "a dog", "--json"],
    ],
    ids=["info", "search-table", "search-json"],
)
def test_a_reader_that_leaves_early_is_no_error(args: list[str], small_index: Path) -> None:
    argv = [str(small_index) if a == "IDX" else a for a in args]
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; from whitevec.cli import main; main(sys.argv[1:])", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader leaves before the first line, as `| head` does after its lines
    err = child.stderr.read().decode()
    # Quiet, with the status of a tool stopped by SIGPIPE; no "Exception ignored ... BrokenPipeError" at exit.
    assert child.wait(timeout=120) == 141 and err == "", err


@pytest.mark.data
@pytest.mark.model
@pytest.mark.slow
def test_eval_looks_its_model_up_once(
    tiny_bert_dir: Path, pairs_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The preflight checks, the default pooling and the encoder each ask for the model: 7 lookups before.
    looked = counted_lookups(monkeypatch)
    args = ["eval", "--model", str(tiny_bert_dir), "--tasks", "", "--pairs", str(pairs_file), "--transform"]
    code, _, err = run_cli([*args, "none,whitening-4", "-q"], capsys)
    assert code == 0, err
    assert looked == [str(tiny_bert_dir)]


@pytest.fixture(scope="module")
def stsb_test_sentences(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """STS-B test's 2,552 unique sentences, one a line: the fit set of the two tests below. Fitting on the
    evaluated split instead of on all of STS-B (--fit-on target: 15,457 sentences) encodes a sixth as much."""
    path = tmp_path_factory.mktemp("stsb-test") / "stsb-test-sentences.txt"
    path.write_text("".join(s + "\n" for s in load_sts_task("stsb", data_dir=data_dir).sentences("test")))
    return path


def test_eval_on_the_default_model(
    data_dir: Path, minilm_dir: Path, stsb_test_sentences: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # STS-B with last-avg beside first-last-avg (one forward pass gives both): the session's vector cache then
    # holds what the reference-number test below encodes, so the suite encodes STS-B test once.
    code, out, err = run_cli(
        [
            "eval",
            "--tasks",
            "stsb",
            "--pooling",
            "first-last-avg,last-avg",
            "--transform",
            "none,whitening-128",
            "--fit-on",
            str(stsb_test_sentences),
            "--data-dir",
            str(data_dir),
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    rows = [line.split("|")[1:4] for line in out.splitlines() if line.startswith("| stsb ")]
    ran = {(pooling.strip(), transform.strip()) for _, pooling, transform in rows}
    assert ran == {(p, t) for p in ("first-last-avg", "last-avg") for t in ("none", "whitening-128")}, out


@pytest.mark.data
@pytest.mark.model
@pytest.mark.slow
def test_default_model_reproduces_reference_numbers(
    data_dir: Path, minilm_dir: Path, stsb_test_sentences: Path
) -> None:
    """Independent computations (transformers, numpy, scipy: benchmarks/investigations/minilm_stsb_reference.py)
    found last-avg 82.03 raw on STS-B test, and 78.98 whitened fitted on STS-B test's sentences (80.73 fitted on
    all of STS-B, --fit-on target, six times the encoding).

    Beside test_eval_on_the_default_model, in this file: `make test` runs a file in one worker, in order, so the
    vectors come from that test's cache."""
    task = load_sts_task("stsb", data_dir=data_dir)
    encoder = Encoder("all-MiniLM-L6-v2", pooling="last-avg")
    report = evaluate_sts(encoder, [task], ["none", "whitening"], fit_on=stsb_test_sentences)
    scores = {s.transform: s.wmean for s in report.scores}
    assert scores["none"] == pytest.approx(82.03, abs=0.1)
    assert scores["whitening"] == pytest.approx(78.98, abs=0.1)
