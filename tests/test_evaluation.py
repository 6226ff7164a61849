"""STS metrics and the evaluation runner, checked against independent computations."""

from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from whitevec.datasets import Pair, StsTask
from whitevec.encoders.pooling import get_pooling
from whitevec.encoders.transformer import Encoder
from whitevec.errors import BadInputError
from whitevec.evaluation import SubsetScore, aggregate, cosine_rows, evaluate_sts, spearman100
from whitevec.evaluation.metrics import non_finite_to_none
from whitevec.evaluation.retrieval import RetrievalReport, RetrievalScore
from whitevec.evaluation.sts import evaluate_sts_poolings

WORDS = [
    "a",
    "the",
    "man",
    "woman",
    "girl",
    "boy",
    "dog",
    "cat",
    "is",
    "are",
    "playing",
    "guitar",
    "piano",
    "eating",
    "food",
    "running",
    "on",
    "in",
    "street",
    "red",
    "blue",
]


def synthetic_task(n_pairs: int = 40, seed: int = 0, subsets: int = 2) -> StsTask:
    rng = random.Random(seed)
    groups: dict[str, list[Pair]] = {}
    for s in range(subsets):
        pairs = []
        for _ in range(n_pairs):
            left = [rng.choice(WORDS) for _ in range(rng.randint(2, 9))]
            right = [w if rng.random() < 0.6 else rng.choice(WORDS) for w in left]
            if right == left:  # identical sentences tie at cosine 1 up to rounding noise; keep them apart
                right[-1] = "piano" if left[-1] != "piano" else "guitar"
            pairs.append(Pair(" ".join(left), " ".join(right), rng.uniform(0, 5)))
        groups[f"part{s}"] = pairs
    return StsTask(name="synthetic", subsets=groups, splits={"test": [p for v in groups.values() for p in v]})


def ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks of ties, computed by hand."""
    order = np.argsort(values, kind="mergesort")
    out = np.empty(len(values))
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[order[j + 1]] == values[order[i]]:
            j += 1
        out[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return out


def test_spearman_equals_pearson_of_ranks() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=200).round(1)  # rounding makes ties
    y = x + rng.normal(size=200)
    expected = np.corrcoef(ranks(x), ranks(y))[0, 1] * 100
    assert spearman100(x, y) == pytest.approx(expected, abs=1e-9)
    with pytest.raises(BadInputError):
        spearman100(x[:1], y[:1])


def test_cosine_rows() -> None:
    a = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    b = np.array([[0.0, 2.0], [2.0, 2.0], [1.0, 0.0]])
    np.testing.assert_allclose(cosine_rows(a, b), [0.0, 1.0, 0.0])


def test_aggregates_mean_and_size_weighted() -> None:
    mean, wmean = aggregate([SubsetScore("a", 100, 50.0), SubsetScore("b", 300, 70.0)])
    assert mean == pytest.approx(60.0)
    assert wmean == pytest.approx((100 * 50 + 300 * 70) / 400)


class HashEncoder:
    """Stand-in encoder: each text maps to a fixed anisotropic random vector (tests the maths, not a model)."""

    model_name = "hash"
    pooling = get_pooling("last-avg")

    def __init__(self, dim: int = 12) -> None:
        self.dim = dim
        self.scales = np.geomspace(5.0, 0.05, dim)

    def describe(self) -> dict[str, object]:
        return {"model": self.model_name, "pooling": self.pooling.name, "dim": self.dim}

    def encode(self, texts: list[str], show_progress: bool | None = None) -> np.ndarray:
        rows = []
        for text in texts:
            seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
            rows.append(3.0 + np.random.default_rng(seed).normal(size=self.dim) * self.scales)
        return np.array(rows, dtype=np.float32).reshape(len(texts), self.dim)


def test_evaluate_sts_matches_a_direct_computation() -> None:
    task = synthetic_task()
    encoder = HashEncoder()
    report = evaluate_sts(encoder, [task], ["none", "whitening", "whitening-4"], fit_on="target")  # type: ignore[arg-type]
    assert [s.transform for s in report.scores] == ["none", "whitening", "whitening-4"]
    sentences = task.sentences("target")
    fit = encoder.encode(sentences).astype(np.float64)
    # independent BERT-whitening computation (np.cov, SVD)
    mu = fit.mean(0, keepdims=True)
    u, s, _ = np.linalg.svd(np.cov(fit.T))
    for score, k in zip(report.scores, [None, None, 4], strict=True):
        per_subset, every_pred, every_gold = [], [], []
        for pairs in task.subsets.values():
            a = encoder.encode([p.sentence1 for p in pairs]).astype(np.float64)
            b = encoder.encode([p.sentence2 for p in pairs]).astype(np.float64)
            if score.transform != "none":
                w = (u @ np.diag(1 / np.sqrt(s)))[:, :k]
                a, b = (a - mu) @ w, (b - mu) @ w
            # cosine_rows (tested above) rather than a re-derivation: repeated pairs tie at cosine 1.0 and a
            # formula that differs in the last bit would break those ties differently.
            pred = cosine_rows(a, b)
            gold = np.array([p.score for p in pairs])
            per_subset.append(np.corrcoef(ranks(pred), ranks(gold))[0, 1] * 100)
            every_pred.append(pred)
            every_gold.append(gold)
        assert score.all == pytest.approx(
            np.corrcoef(ranks(np.concatenate(every_pred)), ranks(np.concatenate(every_gold)))[0, 1] * 100, abs=1e-6
        )
        assert score.wmean == pytest.approx(np.mean(per_subset), abs=1e-6)  # equal subset sizes
        assert score.n_fit == (0 if score.transform == "none" else len(sentences))
    # the transforms change the ranking (else this test could not tell them apart)
    assert len({round(s.all, 6) for s in report.scores}) == 3


def test_fit_on_train_and_on_a_file(tiny_bert_dir: Path, tmp_path: Path) -> None:
    task = synthetic_task()
    task.splits = {"train": synthetic_task(seed=5).all_pairs(), "test": task.all_pairs()}
    encoder = Encoder(tiny_bert_dir, pooling="cls", cache=False)
    on_train = evaluate_sts(encoder, [task], ["whitening"], fit_on="train").scores[0]
    assert on_train.n_fit == len(task.sentences("train"))
    corpus = tmp_path / "fit.txt"
    corpus.write_text("\n".join(task.sentences("train")) + "\n")
    on_file = evaluate_sts(encoder, [task], ["whitening"], fit_on=corpus).scores[0]
    assert on_file.fit_on == "file:fit.txt"
    assert on_file.wmean == pytest.approx(on_train.wmean, abs=1e-6)


def test_several_poolings_share_one_pass_and_report_json(tiny_bert_dir: Path, tmp_path: Path) -> None:
    task = synthetic_task(n_pairs=20)
    encoder = Encoder(tiny_bert_dir, pooling="cls", cache=tmp_path / "cache")
    report = evaluate_sts_poolings(encoder, ["cls", "last-avg"], [task], ["none", "whitening"])
    assert [(s.pooling, s.transform) for s in report.scores] == [
        ("cls", "none"),
        ("cls", "whitening"),
        ("last-avg", "none"),
        ("last-avg", "whitening"),
    ]
    single = evaluate_sts(Encoder(tiny_bert_dir, pooling="last-avg", cache=False), [task], ["whitening"])
    assert report.scores[3].wmean == pytest.approx(single.scores[0].wmean, abs=1e-4)
    saved = json.loads(report.save_json(tmp_path / "r.json").read_text())
    assert saved["model"]["poolings"] == ["cls", "last-avg"] and len(saved["scores"]) == 4


def test_non_finite_floats_become_none() -> None:
    data = {"a": [1.0, float("nan"), (float("inf"), 2)], "b": "x", "c": np.float64("-inf"), "d": {"e": 0.5}}
    assert non_finite_to_none(data) == {"a": [1.0, None, [None, 2]], "b": "x", "c": None, "d": {"e": 0.5}}


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_report_json_writes_an_undefined_spearman_as_null(tmp_path: Path) -> None:
    class ConstantEncoder(HashEncoder):
        def encode(self, texts: list[str], show_progress: bool | None = None) -> np.ndarray:
            return np.ones((len(texts), self.dim), dtype=np.float32)

    report = evaluate_sts(ConstantEncoder(), [synthetic_task()], ["none"])  # type: ignore[arg-type]
    assert math.isnan(report.scores[0].all)  # every cosine is 1: the correlation is undefined
    saved = json.loads(report.save_json(tmp_path / "r.json").read_text())
    assert saved["scores"][0]["all"] is None and saved["scores"][0]["subsets"][0]["spearman"] is None


def test_retrieval_report_json_writes_untimed_latency_as_null(tmp_path: Path) -> None:
    score = RetrievalScore("none", "cls", 8, 10, 2, 0.5, 1.0, 0.5, 0.5, 0.5, 0.1, math.nan, math.nan, 320, 400)
    report = RetrievalReport("m", "d", "flat", "cosine", "faiss", "corpus", {}, scores=[score])
    saved = json.loads(report.save_json(tmp_path / "r.json").read_text())
    assert saved["scores"][0]["p50_query_ms"] is None and saved["scores"][0]["p50_search_ms"] is None
    assert saved["scores"][0]["recall_10"] == 0.5


def test_bad_transform_spec_fails_before_encoding(tiny_bert_dir: Path) -> None:
    encoder = Encoder(tiny_bert_dir, cache=False)
    with pytest.raises(BadInputError, match="whitening"):
        evaluate_sts(encoder, [synthetic_task()], ["whitenning"])
