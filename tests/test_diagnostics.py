"""Anisotropy diagnostics: measures against known answers and direct numpy formulas, bad input, the report."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import VOCAB_WORDS
from whitevec.diagnostics import (
    alignment_uniformity,
    cosine_stats,
    diagnose,
    effective_rank,
    isoscore,
    isotropy_mu,
    spectrum,
    write_report,
)
from whitevec.errors import BadInputError
from whitevec.transforms import Whitening

PLOTS = ("eigen_spectrum", "cosine_hist", "projection_2d", "token_norms", "sts_sweep")


def gaussian(n: int = 10000, d: int = 16, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d))


def cone(n: int = 2000, d: int = 16, seed: int = 1) -> np.ndarray:
    """Vectors around 10 * a unit direction with small isotropic noise: a narrow cone."""
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)
    return 10.0 * direction + 0.2 * rng.standard_normal((n, d))


# --- known answers ---------------------------------------------------------------------------------------
def test_isotropic_gaussian_looks_isotropic() -> None:
    X = gaussian()
    assert abs(cosine_stats(X).mean) < 0.01
    assert spectrum(X).effective_rank > 15.8  # d = 16
    assert isotropy_mu(X).value > 0.85  # finite-sample min/max over 32 directions; 1 in the limit
    assert isoscore(X).score > 0.98


def test_narrow_cone_looks_anisotropic() -> None:
    X = cone()
    stats = cosine_stats(X)
    assert stats.mean > 0.99
    assert isotropy_mu(X).value < 1e-3


def test_whitening_a_cone_centres_the_cosines() -> None:
    X = cone()
    white = Whitening().fit(X).transform(X)
    assert abs(cosine_stats(white).mean) < 0.02
    assert spectrum(white).effective_rank > 15.9


def test_isoscore_one_dimension_is_zero() -> None:
    X = np.zeros((500, 8))
    X[:, 0] = np.random.default_rng(0).standard_normal(500)
    result = isoscore(X)
    assert result.score == pytest.approx(0.0, abs=1e-9)
    assert result.isotropy_defect == pytest.approx(1.0)


@pytest.mark.parametrize("k", [1, 2, 5, 8])
def test_isoscore_k_equal_dimensions_of_n(k: int) -> None:
    # +-e_i for i < k: zero mean, equal variance in k of n = 8 dimensions; the paper gives (k - 1) / (n - 1).
    n = 8
    eye = np.eye(n)[:k]
    X = np.vstack([eye, -eye])
    assert isoscore(X).score == pytest.approx((k - 1) / (n - 1), abs=1e-9)
    assert isoscore(X).dims_used == pytest.approx(k)


def test_isoscore_is_rotation_and_scale_invariant() -> None:
    rng = np.random.default_rng(3)
    X = rng.standard_normal((400, 6)) * np.array([5, 3, 2, 1, 0.5, 0.1])
    Q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    assert isoscore(X).score == pytest.approx(isoscore(7.0 * X @ Q + 3.0).score, abs=1e-9)


# --- hand-checkable cases against direct formulas ---------------------------------------------------------
def test_effective_rank_small_cases() -> None:
    assert effective_rank([1.0, 1.0, 1.0, 1.0]) == pytest.approx(4.0)
    assert effective_rank([2.0, 0.0, 0.0]) == pytest.approx(1.0)
    p = np.array([0.75, 0.25])
    assert effective_rank([3.0, 1.0]) == pytest.approx(math.exp(-(p * np.log(p)).sum()))


def test_spectrum_matches_numpy_covariance() -> None:
    X = np.random.default_rng(4).standard_normal((50, 5)) * np.array([4.0, 2.0, 1.0, 1.0, 0.1])
    result = spectrum(X, tops=(1, 2, 100))
    expected = np.sort(np.linalg.eigvalsh(np.cov(X, rowvar=False)))[::-1]
    np.testing.assert_allclose(result.eigenvalues, expected, rtol=1e-10)
    assert result.top_share["1"] == pytest.approx(expected[0] / expected.sum())
    assert result.top_share["2"] == pytest.approx(expected[:2].sum() / expected.sum())
    assert result.top_share["100"] == pytest.approx(1.0)
    p = expected / expected.sum()
    assert result.effective_rank == pytest.approx(math.exp(-(p * np.log(p)).sum()))


def test_cosine_stats_small_case_is_exhaustive() -> None:
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.5]])
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    cosines = [unit[i] @ unit[j] for i, j in itertools.combinations(range(4), 2)]
    stats = cosine_stats(X)
    assert stats.exhaustive and stats.n_pairs == 6
    assert stats.mean == pytest.approx(np.mean(cosines))
    assert stats.std == pytest.approx(np.std(cosines))


def test_cosine_stats_sample_is_seeded() -> None:
    X = gaussian(3000, 8)
    a, b = cosine_stats(X, max_pairs=500, seed=7), cosine_stats(X, max_pairs=500, seed=7)
    assert not a.exhaustive and a.n_pairs == 500
    assert a.mean == b.mean
    assert cosine_stats(X, max_pairs=500, seed=8).mean != a.mean


def test_isotropy_mu_matches_direct_partition_function() -> None:
    W = np.random.default_rng(5).standard_normal((30, 4)) + np.array([1.0, 0.0, 0.0, 0.0])
    _, vectors = np.linalg.eig(W.T @ W)
    z = [np.exp(W @ (s * c)).sum() for c in vectors.T for s in (1.0, -1.0)]
    assert isotropy_mu(W).value == pytest.approx(min(z) / max(z), rel=1e-9)
    unit = W / np.linalg.norm(W, axis=1, keepdims=True)
    _, vectors = np.linalg.eig(unit.T @ unit)
    z = [np.exp(unit @ (s * c)).sum() for c in vectors.T for s in (1.0, -1.0)]
    assert isotropy_mu(W, normalize=True).value == pytest.approx(min(z) / max(z), rel=1e-9)


def test_isotropy_mu_large_norms_do_not_overflow() -> None:
    result = isotropy_mu(cone() * 1000.0)
    assert result.value == 0.0 and math.isfinite(result.log_z_max) and result.log_z_min < result.log_z_max


def test_alignment_uniformity_match_direct_formulas() -> None:
    rng = np.random.default_rng(6)
    left, right, pool = rng.standard_normal((5, 3)), rng.standard_normal((5, 3)), rng.standard_normal((7, 3))

    def unit(a: np.ndarray) -> np.ndarray:
        return a / np.linalg.norm(a, axis=1, keepdims=True)

    align = np.mean([np.sum((x - y) ** 2) for x, y in zip(unit(left), unit(right), strict=True)])
    u = unit(pool)
    unif = math.log(
        np.mean([math.exp(-2 * np.sum((u[i] - u[j]) ** 2)) for i, j in itertools.combinations(range(7), 2)])
    )
    result = alignment_uniformity(left, right, vectors=pool)
    assert result.alignment == pytest.approx(align)
    assert result.uniformity == pytest.approx(unif)
    assert result.n_positive_pairs == 5 and result.n_uniformity_pairs == 21
    same = alignment_uniformity(left, left * 3.0, vectors=pool)
    assert same.alignment == pytest.approx(0.0, abs=1e-12)


def test_whitening_k_is_the_first_k_columns_of_full_whitening() -> None:
    # diagnose's k sweep relies on this to fit once.
    X = np.random.default_rng(8).standard_normal((300, 12)) * np.arange(1, 13)
    full = Whitening().fit(X).transform(X)
    np.testing.assert_allclose(Whitening(n_components=5).fit(X).transform(X), full[:, :5], rtol=1e-5, atol=1e-6)


# --- bad input -------------------------------------------------------------------------------------------
MEASURES = [cosine_stats, spectrum, isotropy_mu, isoscore]


@pytest.mark.parametrize("measure", MEASURES)
def test_fewer_than_two_vectors_raise(measure: object) -> None:
    with pytest.raises(BadInputError, match="at least two"):
        measure(np.ones((1, 4)))  # type: ignore[operator]


@pytest.mark.parametrize("measure", MEASURES)
def test_constant_vectors_raise(measure: object) -> None:
    with pytest.raises(BadInputError, match="identical"):
        measure(np.tile([1.0, 2.0, 3.0], (10, 1)))  # type: ignore[operator]


@pytest.mark.parametrize("measure", MEASURES)
def test_nan_raises(measure: object) -> None:
    X = gaussian(20, 4)
    X[3, 1] = np.nan
    with pytest.raises(BadInputError, match="NaN"):
        measure(X)  # type: ignore[operator]


def test_zero_rows_and_bad_pairs_raise() -> None:
    X = gaussian(10, 3)
    X[2] = 0.0
    with pytest.raises(BadInputError, match="zero-length"):
        cosine_stats(X)
    with pytest.raises(BadInputError, match="NaN"):
        alignment_uniformity(np.array([[np.nan, 1.0]]), np.array([[1.0, 1.0]]))
    with pytest.raises(BadInputError):
        effective_rank([0.0, 0.0])


def test_diagnose_rejects_constant_vectors_and_missing_input() -> None:
    with pytest.raises(BadInputError, match="identical"):
        diagnose({"none": np.ones((5, 3))})
    with pytest.raises(BadInputError):
        diagnose({})


def test_diagnose_on_vectors_without_a_model() -> None:
    report = diagnose({"none": cone(), "whitening": Whitening().fit(cone()).transform(cone())})
    assert report.space("none").cosine.mean > 0.99
    assert abs(report.space("whitening").cosine.mean) < 0.02
    assert report.frequency is None and "frequency" in report.notes and "sweep" in report.notes
    assert json.loads(json.dumps(report.to_dict()))["summary"][0]["transform"] == "none"


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_report_json_writes_an_undefined_spearman_as_null(tmp_path: Path) -> None:
    from whitevec.datasets import Pair, StsTask

    # Rows 2i and 2i+1 are one integer multiple of an axis: every pair's cosine is exactly 1, so the STS
    # Spearman of the raw vectors is NaN.
    X = np.repeat([(i + 1) * np.eye(4)[i % 4] for i in range(10)], 2, axis=0)
    texts = [f"sentence {i}" for i in range(20)]
    pairs = [Pair(texts[2 * i], texts[2 * i + 1], float(i % 5)) for i in range(10)]
    task = StsTask("constant", {"test": pairs}, {"test": pairs})
    report = diagnose({"none": X}, texts, task=task)
    assert report.space("none").sts_spearman is not None and math.isnan(report.space("none").sts_spearman)
    metrics = json.loads(write_report(report, tmp_path, json_only=True)["metrics"].read_text())
    assert metrics["summary"][0]["sts_spearman"] is None and metrics["spaces"][0]["sts_spearman"] is None
    assert metrics["sweep"]["reference"]["none"] is None


def test_report_files_take_the_umask(tmp_path: Path) -> None:
    # Under umask 027 a report is 0640 like every file whitevec writes, not forced readable by all.
    script = (
        "import json, sys\n"
        "import numpy as np\n"
        "from whitevec.diagnostics import diagnose, write_report\n"
        "report = diagnose({'none': np.random.default_rng(0).standard_normal((50, 4))})\n"
        "written = write_report(report, sys.argv[1])\n"
        "print(json.dumps({p.name: p.stat().st_mode & 0o777 for p in written.values()}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, umask=0o027, check=True
    )
    modes = json.loads(done.stdout)
    assert {"report.html", "metrics.json", "eigen_spectrum.png"} <= modes.keys()
    assert set(modes.values()) == {0o640}


# --- the report on a tiny random BERT ----------------------------------------------------------------------
# conftest's words minus "x"/"y": the Zipf corpus the frequency tests were written against.
_WORDS = [word for word in VOCAB_WORDS if word not in {"x", "y"}]


def _zipf_sentences(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(_WORDS) + 1)
    weights /= weights.sum()
    return [" ".join(rng.choice(_WORDS, size=int(rng.integers(4, 9)), p=weights)) + " ." for _ in range(n)]


@pytest.fixture(scope="module")
def tiny_bert(tiny_bert_dir: Path) -> Path:
    """The shared tiny BERT; the frequency link needs its tokenizer to know real word pieces, so check that."""
    from transformers import AutoTokenizer

    assert len(AutoTokenizer.from_pretrained(str(tiny_bert_dir)).get_vocab()) > 10
    return tiny_bert_dir


@pytest.fixture(scope="module")
def tiny_inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("diag-inputs")
    sentences = _zipf_sentences(120, seed=0)
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(sentences) + "\n")
    scores = np.random.default_rng(1).uniform(0, 5, size=60)
    pairs = folder / "pairs.tsv"
    rows = ["sentence1\tsentence2\tscore"]
    rows += [f"{sentences[2 * i]}\t{sentences[2 * i + 1]}\t{scores[i]:.2f}" for i in range(60)]
    pairs.write_text("\n".join(rows) + "\n")
    return corpus, pairs


def _run_cli(args: list[str]) -> None:
    from whitevec.cli import main

    main(args)


def test_report_command_writes_every_plot(tiny_bert: Path, tiny_inputs: tuple[Path, Path], tmp_path: Path) -> None:
    _, pairs = tiny_inputs
    out = tmp_path / "diag"
    _run_cli(
        ["diagnose", "--model", str(tiny_bert), "--pooling", "first-last-avg", "--task", str(pairs),
         "--transform", "none,whitening", "--min-types-per-bucket", "2", "--out", str(out), "--quiet"]
    )  # fmt: skip
    page = (out / "report.html").read_text()
    for name in PLOTS:
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"id='{name}'" in page
    assert page.count("data:image/png;base64,") == len(PLOTS)
    assert "src='http" not in page and "<script" not in page  # self-contained
    metrics = json.loads((out / "metrics.json").read_text())
    assert [row["transform"] for row in metrics["summary"]] == ["none", "whitening"]
    assert metrics["frequency"]["buckets_ok"] is True
    assert metrics["sweep"]["ks"] == [8, 16, 32]
    assert metrics["summary"][1]["sts_spearman"] == pytest.approx(metrics["sweep"]["spearman"][-1])


def test_api_numbers_are_the_report_numbers(
    tiny_bert: Path, tiny_inputs: tuple[Path, Path], tmp_path: Path
) -> None:
    from whitevec.datasets import read_texts_file
    from whitevec.encoders.transformer import Encoder

    corpus, _ = tiny_inputs
    encoder = Encoder(tiny_bert, "last-avg", cache=False)
    report = diagnose(encoder, read_texts_file(corpus), transforms=["none", "whitening"])
    written = write_report(report, tmp_path / "out")
    metrics = json.loads(written["metrics"].read_text())
    assert metrics["summary"] == json.loads(json.dumps(report.summary()))
    page = written["report"].read_text()
    raw = report.space("none")
    assert f"<td>{raw.cosine.mean:.3f}</td>" in page
    assert f"<td>{raw.spectrum.effective_rank:.1f}</td>" in page
    # 120 short sentences over ~30 word types: too small for buckets of 20 types, and no gold scores.
    assert report.frequency is not None and not report.frequency.buckets_ok
    assert "corpus too small for frequency buckets" in page
    assert "skipped for a plain corpus" in page
    assert "token_norms" not in written and "sts_sweep" not in written
    assert written.keys() >= {"eigen_spectrum", "cosine_hist", "projection_2d", "report", "metrics"}
    # Whitening spreads the variance over more directions than the raw vectors use.
    assert report.space("whitening").spectrum.effective_rank > report.space("none").spectrum.effective_rank


def test_cli_bad_arguments(tiny_bert_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        _run_cli(["diagnose", "--model", str(tiny_bert_dir), "--out", str(tmp_path)])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        _run_cli(
            [
                "diagnose",
                "--model",
                str(tiny_bert_dir),
                "--corpus",
                str(tmp_path / "nope.txt"),
                "--out",
                str(tmp_path),
            ]
        )


@pytest.mark.model
@pytest.mark.data
def test_report_on_default_model(minilm_dir: Path, data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "diag"
    _run_cli(
        ["diagnose", "--model", str(minilm_dir), "--pooling", "first-last-avg", "--task", "stsb",
         "--data-dir", str(data_dir), "--max-sentences", "200", "--transform", "none,whitening-64",
         "--min-types-per-bucket", "5", "--out", str(out), "--quiet"]
    )  # fmt: skip
    page = (out / "report.html").read_text()
    for name in PLOTS:
        assert f"id='{name}'" in page, name
    metrics = json.loads((out / "metrics.json").read_text())
    raw, white = metrics["summary"]
    assert raw["mean_cosine"] > white["mean_cosine"] + 0.1  # the raw space is a cone; whitening opens it
    assert white["effective_rank"] > raw["effective_rank"]


def test_a_flow_in_the_report_draws_its_loss_curve(
    tiny_bert: Path, tiny_inputs: tuple[Path, Path], tmp_path: Path
) -> None:
    from whitevec.datasets import read_texts_file
    from whitevec.encoders.transformer import Encoder
    from whitevec.transforms import Flow, make_transform

    def small(spec: str) -> Any:
        if spec == "flow":
            return Flow(levels=1, depth=1, width=8, max_steps=40, validation_interval=10, batch_size=32)
        return make_transform(spec)

    corpus, _ = tiny_inputs
    encoder = Encoder(tiny_bert, "last-avg", cache=False)
    report = diagnose(encoder, read_texts_file(corpus), transforms=["none", "flow"], make=small)
    curve = report.space("flow").loss_curve
    assert curve is not None and curve.shape[1] == 3 and curve[-1, 0] <= 40
    assert report.space("none").loss_curve is None
    written = write_report(report, tmp_path / "out")
    assert "flow_loss" in written and written["flow_loss"].stat().st_size > 1000
    metrics = json.loads(written["metrics"].read_text())
    saved = metrics["spaces"][1]["loss_curve"]
    assert [row[0] for row in saved] == curve[:, 0].tolist()
    assert "loss_curve" not in metrics["spaces"][0]
    assert "id='flow_loss'" in written["report"].read_text()
