"""whitevec tune on the command line, and the tuned configuration applied by eval, index build and search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.index_helpers import tiny_cli_inputs
from tests.test_cli import run_cli as _run

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    return tiny_cli_inputs(tmp_path)


def test_tune_writes_a_config_that_eval_index_build_and_search_apply(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, report = tmp_path / "tuned.json", tmp_path / "report.json"
    argv = ["tune", "--pairs", str(files["pairs"]), "--model", str(files["bert"]), "--out", str(config)]
    code, out, err = _run(
        [
            *argv,
            "--candidates",
            "whitening,whitening-8,center",
            "--json",
            str(report),
            "--plot",
            str(tmp_path / "q.png"),
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    assert "chosen:" in out and "held-out folds (5-fold)" in out
    assert "only 39 dev pairs" in err  # fewer than 50: the warning says the choice is not stable
    saved = json.loads(config.read_text())
    assert saved["format"] == "whitevec-tuned-config" and saved["pooling"] == "last-avg"
    assert saved["transform"] == "none"  # 39 pairs of random text: nothing is significant
    full = json.loads(report.read_text())
    assert [c["transform"] for c in full["candidates"]] == ["none", "whitening", "whitening-8", "center"]
    assert (tmp_path / "q.png").stat().st_size > 0
    # A configuration naming a transform: hand-made from the saved one.
    saved["transform"] = "whitening-8"
    saved["dim"], saved["bytes_per_vector"] = 8, 32
    saved["max_length"] = 24  # the token limit it was tuned with is applied too, not the model's default
    config.write_text(json.dumps(saved))
    code, out, err = _run(
        ["eval", "--config", str(config), "--tasks", "", "--pairs", str(files["pairs"]), "-q"], capsys
    )
    assert code == 0, err
    assert "whitening" in out and "last-avg" in out and "max_length 24" in out
    index, other = tmp_path / "idx", tmp_path / "other"

    def build(out: Path, *options: str) -> tuple[int, str, str]:
        return _run(
            ["index", "build", "--corpus", str(files["corpus"]), "--out", str(out), *options, "-q"], capsys
        )

    code, _, err = build(index, "--config", str(config))
    assert code == 0, err
    code, stdout, _ = _run(["index", "info", str(index)], capsys)
    info = json.loads(stdout)
    assert info["transform"]["spec"] == "whitening-8" and info["dim"] == 8 and info["pooling"] == "last-avg"
    assert info["max_length"] == 24
    code, _, err = build(tmp_path / "idx-128", "--config", str(config), "--max-length", "128")
    assert code == 2 and "--max-length 128 contradicts the tuned configuration" in err
    code, stdout, err = _run(["search", str(index), "a dog", "--config", str(config), "--json"], capsys)
    assert code == 0, err
    # An option that contradicts the configuration, and an index built another way: one line, exit 2.
    code, _, err = build(index, "--config", str(config), "--pooling", "cls")
    assert code == 2 and "--pooling cls contradicts the tuned configuration" in err
    code, _, err = build(other, "--model", str(files["bert"]), "--pooling", "cls", "--transform", "whitening-8")
    assert code == 0, err
    code, _, err = _run(["search", str(other), "a dog", "--config", str(config)], capsys)
    assert (
        code == 2 and "pooling 'last-avg'" in err and "pooling 'cls'" in err and len(err.strip().splitlines()) == 1
    )


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--metric", "ndcg@10"], "valid metrics: spearman"),
        (["--candidates", "whitening,zca"], "valid forms"),
        (["--encodings", "sq8,zip"], "unknown encoding 'zip'; valid: float32"),
        (["--pooling", "middle"], "unknown pooling"),
    ],
)
def test_tune_bad_input_is_one_line(
    extra: list[str], needle: str, files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tuned.json"
    code, _, err = _run(
        ["tune", "--pairs", str(files["pairs"]), "--model", str(files["bert"]), "--out", str(out), *extra, "-q"],
        capsys,
    )
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and not out.exists()


def test_constant_gold_scores_are_an_error(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flat = tmp_path / "flat.tsv"
    flat.write_text("".join(line.rsplit("\t", 1)[0] + "\t3\n" for line in files["pairs"].read_text().splitlines()))
    code, _, err = _run(
        ["tune", "--pairs", str(flat), "--model", str(files["bert"]), "--out", str(tmp_path / "t.json"), "-q"],
        capsys,
    )
    assert code == 2 and "same gold score" in err


def test_an_interrupted_tune_writes_nothing(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import whitevec.tuning

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(whitevec.tuning, "tune", interrupted)
    out = tmp_path / "tuned.json"
    code, _, err = _run(
        ["tune", "--pairs", str(files["pairs"]), "--model", str(files["bert"]), "--out", str(out), "-q"], capsys
    )
    assert code == 130 and "interrupted" in err
    assert list(tmp_path.glob("tuned*")) == []


def test_tune_searches_encodings_and_index_build_applies_the_chosen_one(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tuned.json"
    argv = ["tune", "--pairs", str(files["pairs"]), "--model", str(files["bert"]), "--out", str(config)]
    code, out, err = _run([*argv, "--candidates", "whitening-8", "--encodings", "sq8,fp16", "-q"], capsys)
    assert code == 0, err
    assert "sq8" in out and "fp16" in out
    assert (tmp_path / "tuned.png").stat().st_size > 0  # several encodings: the quality-per-byte plot by default
    code, _, err = _run([*argv, "--encodings", "sq8", "--max-bytes-per-vector", "1", "-q"], capsys)
    assert code == 2 and "no candidate fits in 1 bytes per vector" in err
    # A configuration naming an encoding: index build stores with it, eval decodes it, --encoding may not differ.
    saved = json.loads(config.read_text())
    saved.update(transform="whitening-8", encoding="sq8", dim=8, bytes_per_vector=8)
    config.write_text(json.dumps(saved))
    index = tmp_path / "idx"
    build = [
        "index",
        "build",
        "--corpus",
        str(files["corpus"]),
        "--out",
        str(index),
        "--config",
        str(config),
        "-q",
    ]
    code, _, err = _run(build, capsys)
    assert code == 0, err
    code, stdout, _ = _run(["index", "info", str(index)], capsys)
    info = json.loads(stdout)
    assert info["index_params"]["encoding"] == "sq8" and info["size"]["code_bytes_per_vector"] == 8
    code, _, err = _run([*build, "--encoding", "sq8"], capsys)
    assert code == 0, err  # the same encoding: fine
    code, _, err = _run([*build, "--encoding", "pq4"], capsys)
    assert code == 2 and "--encoding pq4 contradicts the tuned configuration" in err
    code, out, err = _run(
        ["eval", "--config", str(config), "--tasks", "", "--pairs", str(files["pairs"]), "-q"], capsys
    )
    assert code == 0, err
    assert "whitening-8 / sq8" in out
