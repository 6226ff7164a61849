"""whitevec tune: the choice on synthetic data where the answer is known, the bootstrap against an independent
computation, the tuned configuration's round trip, and every piece of bad input the issue lists."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import spearmanr

import whitevec
from whitevec.datasets import Pair
from whitevec.datasets.retrieval import Document, RetrievalDataset
from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError, WhitevecWarning
from whitevec.transforms import AllButTheTop, Whitening, make_transform, whitening_spec
from whitevec.tuning import ConfigMismatchError, TunedConfig, apply_config, tune
from whitevec.tuning.choice import choose as _choose
from whitevec.tuning.results import CandidateResult
from whitevec.tuning.scoring import Scored as _Scored
from whitevec.tuning.selection import bootstrap_gains, mean_resampled, resample_counts, spearman_resampled
from whitevec.tuning.space import check_transforms, default_transforms, encoding_bytes

MODEL = "table"


class TableEncoder:
    """An encoder whose vectors are looked up in a table (synthetic data with a known answer)."""

    def __init__(self, table: dict[str, np.ndarray], name: str = MODEL, pooling: str = "last-avg") -> None:
        self.table = table
        self.dim = next(iter(table.values())).size
        self.name = name
        self.pooling = pooling

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "model_fingerprint": None,
            "pooling": self.pooling,
            "max_length": 64,
            "dim": self.dim,
        }

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> Any:
        return np.array([self.table[t] for t in texts], dtype=np.float32)

    def encode_poolings(
        self, texts: Sequence[str], poolings: Sequence[str], show_progress: bool | None = None
    ) -> Any:
        return {p: self.encode(texts) for p in poolings}

    def close(self) -> None:
        pass


def anisotropic_pairs(n_pairs: int = 300, *, helps: bool = True, seed: int = 0, d: int = 16) -> tuple[dict, list]:
    """Pairs whose meaning lives in d-2 dimensions of unit variance, while two more dimensions carry noise of
    standard deviation 10 (independent per sentence). Raw cosines are dominated by the noise; equalising the
    variances (whitening) lets the meaning through. ``helps=False``: gold scores are noise, nothing can help."""
    rng = np.random.default_rng(seed)
    table: dict[str, np.ndarray] = {}
    pairs = []
    for i in range(n_pairs):
        z = rng.normal(size=d - 2)
        distance = rng.uniform(0, 2)
        for key, meaning in ((f"a{i}", z), (f"b{i}", z + distance * rng.normal(size=d - 2))):
            table[key] = np.r_[meaning, 10 * rng.normal(size=2)] + 3.0
        pairs.append(Pair(f"a{i}", f"b{i}", -distance if helps else float(rng.normal())))
    return table, pairs


def run(pairs: list, table: dict, **kwargs: Any) -> Any:
    kwargs.setdefault("include_flow", False)
    return tune(pairs, models=[MODEL], encoders={MODEL: TableEncoder(table)}, **kwargs)


# --- the choice ------------------------------------------------------------------------------------------------
def test_picks_the_transform_known_to_help() -> None:
    table, pairs = anisotropic_pairs()
    test_table, test_pairs = anisotropic_pairs(seed=1)
    result = run(
        pairs,
        {**table, **{f"t{k}": v for k, v in test_table.items()}},
        test=[Pair(f"t{p.sentence1}", f"t{p.sentence2}", p.score) for p in test_pairs],
        transforms=["center", "normalize", "whitening"],
    )
    chosen = result.chosen
    assert chosen.transform == "whitening" and chosen.significant
    assert chosen.low > 20 and result.config.transform == "whitening"
    check = result.check_summary()
    assert check is not None and check["tuned"] > check["raw"] + 20


def test_keeps_none_when_nothing_helps() -> None:
    for seed in range(3):
        table, pairs = anisotropic_pairs(helps=False, seed=seed)
        # Smaller candidates too: were a lucky one let through, the cheaper one would win the tie with none. The
        # grid is run's, without flow (its per-item scores are one more row to choose among, but each fit trained
        # a Glow: all but 1 s of this test's minutes).
        grid = default_transforms(16, include_flow=False)
        result = run(pairs, table, seed=seed, transforms=[*grid, "whitening-8", "whitening-4-beta0"])
        assert result.chosen.transform == "none", [(c.transform, c.gain, c.bound) for c in result.candidates]
        assert result.config.transform == "none"
        assert len(result.checks) == 5 and all(c.chosen.endswith("/ none / float32") for c in result.checks)


def test_ties_go_to_fewer_bytes_then_linear_before_flow() -> None:
    rng = np.random.default_rng(0)
    gold = rng.normal(size=200)
    raw = gold + rng.normal(scale=3.0, size=200)
    better = gold + rng.normal(scale=0.5, size=200)
    slightly_worse = better + 0.03 * (raw - gold)  # a little of raw's noise: below ``better``, tied, not beaten

    def scored(transform: str, dim: int, items: np.ndarray) -> _Scored:
        size = encoding_bytes("float32", dim)
        return _Scored(CandidateResult(MODEL, "last-avg", transform, "float32", dim, size), items, None)

    items = np.arange(200)
    pool = [scored("none", 16, raw), scored("whitening", 16, better), scored("whitening-8", 8, slightly_worse)]
    choice, gains = _choose("sts", pool, gold, items, 500, 0, None)
    assert gains[2].gain < gains[1].gain and gains[2].significant
    assert pool[choice].result.transform == "whitening-8"
    pool = [scored("none", 16, raw), scored("flow", 16, better), scored("whitening", 16, slightly_worse)]
    choice, gains = _choose("sts", pool, gold, items, 500, 0, None)
    assert gains[2].gain < gains[1].gain and pool[choice].result.transform == "whitening"
    # A budget below the raw vector's size: the best within it, significant or not.
    pool = [scored("none", 16, raw), scored("whitening", 16, better), scored("whitening-4", 4, raw)]
    choice, _ = _choose("sts", pool, gold, items, 500, 0, 20)
    assert pool[choice].result.transform == "whitening-4"


def test_budget_filters_on_bytes_per_vector() -> None:
    table, pairs = anisotropic_pairs()
    result = run(pairs, table, transforms=["whitening", "whitening-8"], max_bytes_per_vector=40)
    assert result.chosen.transform == "whitening-8" and result.chosen.bytes_per_vector == 32
    assert result.config.bytes_per_vector == 32 and result.config.dim == 8


def test_deterministic_for_a_seed_and_time_box_is_recorded() -> None:
    table, pairs = anisotropic_pairs(n_pairs=120)
    first, second = run(pairs, table, seed=3), run(pairs, table, seed=3)
    assert [(c.transform, c.low, c.high, c.bound) for c in first.candidates] == [
        (c.transform, c.low, c.high, c.bound) for c in second.candidates
    ]
    boxed = run(pairs, table, max_seconds=1e-9)
    assert boxed.candidates[0].status == "scored" and boxed.chosen.transform == "none"
    assert all(c.status.startswith("skipped: time box") for c in boxed.candidates[1:])
    assert any("time box" in note for note in boxed.notes)


def test_default_grid() -> None:
    grid = default_transforms(384)
    assert grid[:3] == ["none", "center", "normalize"] and grid[-1] == "flow"
    assert {
        "abtt-1",
        "abtt-8",
        "whitening",
        "whitening-beta0",
        "whitening-128-gamma0.5",
        "whitening-64-beta0-gamma0",
    } <= set(grid)
    assert "whitening-gamma0" not in grid and "whitening-beta0-gamma0" not in grid  # = center / none
    assert "flow" not in default_transforms(384, include_flow=False)
    assert not any(s.startswith("whitening-256") for s in default_transforms(256))


def test_pca_and_rotation_candidates_keep_their_names() -> None:
    """pca-K printed as whitening-K-gamma0: the same transform, but not the name the user gave."""
    given = ["PCA-8", "whitening-8-gamma0", "rotation", "whitening:gamma=0", "pca-4:beta=1", "whitening-4-beta0"]
    assert check_transforms(given) == ["none", "pca-8", "rotation", "pca-4", "whitening-4-beta0"]
    assert "pca-64" in default_transforms(384)
    table, pairs = anisotropic_pairs(n_pairs=60)
    result = run(pairs, table, transforms=["pca-8"], n_boot=100)
    assert [c.transform for c in result.candidates] == ["none", "pca-8"]


def test_variants_from_one_fit_equal_fresh_fits() -> None:
    table, pairs = anisotropic_pairs(n_pairs=100)
    result = run(pairs, table, transforms=["whitening-8-beta0-gamma0.5", "abtt-2"])
    texts = list(dict.fromkeys(s for p in pairs for s in (p.sentence1, p.sentence2)))
    vectors = TableEncoder(table).encode(texts)
    row = {t: i for i, t in enumerate(texts)}
    for candidate in result.candidates[1:]:
        fresh = make_transform(candidate.transform)
        assert fresh is not None
        space = fresh.fit(vectors).transform(vectors)
        cos = [
            float(
                np.dot(space[row[p.sentence1]], space[row[p.sentence2]])
                / np.linalg.norm(space[row[p.sentence1]])
                / np.linalg.norm(space[row[p.sentence2]])
            )
            for p in pairs
        ]
        assert candidate.dev == pytest.approx(100 * spearmanr(cos, [p.score for p in pairs]).statistic, abs=1e-9)


# --- the bootstrap against an independent computation ---------------------------------------------------------
def test_spearman_bootstrap_interval_matches_plain_numpy() -> None:
    rng = np.random.default_rng(5)
    n, n_boot, seed = 80, 300, 11
    gold = rng.integers(0, 6, n).astype(float)  # ties in gold
    base = np.round(gold + rng.normal(0, 2, n), 1)  # ties in predictions too
    cand = gold + rng.normal(0, 1, n)
    resampled = spearman_resampled(np.vstack([base, cand]), gold, resample_counts(n, n_boot, seed))
    gains = bootstrap_gains(
        resampled, 0, [100 * spearmanr(base, gold).statistic, 100 * spearmanr(cand, gold).statistic]
    )
    # Independent: draw the same indices, score each resample with scipy, take numpy's percentiles.
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    diffs = np.array(
        [100 * (spearmanr(cand[i], gold[i]).statistic - spearmanr(base[i], gold[i]).statistic) for i in idx]
    )
    low, high = np.percentile(diffs, [2.5, 97.5])
    assert gains[1].low == pytest.approx(low, abs=1e-9) and gains[1].high == pytest.approx(high, abs=1e-9)
    se = diffs.std(ddof=1)
    # One candidate: the simultaneous bound is the studentised one-sided 97.5% bound.
    t = (gains[1].gain - diffs) / se
    assert gains[1].bound == pytest.approx(gains[1].gain - np.quantile(t, 0.975) * se, abs=1e-9)
    assert gains[0].gain == 0 and not gains[0].significant


def test_mean_bootstrap_matches_plain_numpy() -> None:
    rng = np.random.default_rng(2)
    values = rng.uniform(size=(3, 40))
    counts = resample_counts(40, 200, 4)
    idx = np.random.default_rng(4).integers(0, 40, size=(200, 40))
    expected = np.array([[100 * row[i].mean() for i in idx] for row in values])
    np.testing.assert_allclose(mean_resampled(values, counts), expected, rtol=1e-12)


def test_simultaneous_bound_is_stricter_with_many_candidates() -> None:
    rng = np.random.default_rng(0)
    resampled = rng.normal(size=(31, 1000)) + np.r_[0.0, np.full(30, 2.3)][:, None]
    many = bootstrap_gains(resampled, 0, list(np.r_[0.0, np.full(30, 2.3)]))
    few = bootstrap_gains(resampled[:2], 0, [0.0, 2.3])
    assert many[1].bound < few[1].bound
    assert many[1].low == few[1].low  # the per-candidate interval does not change


# --- retrieval ------------------------------------------------------------------------------------------------
def retrieval_data(n_queries: int) -> tuple[RetrievalDataset, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    docs, table, queries, qrels = [], {}, {}, {}
    for i in range(60):
        docs.append(Document(f"d{i}", f"doc {i}"))
        table[f"doc {i}"] = np.r_[rng.normal(size=6), 8 * rng.normal(size=2)] + 2.0
    for q in range(n_queries):
        target = q % 60
        queries[f"q{q}"] = f"query {q}"
        table[f"query {q}"] = (
            np.r_[table[f"doc {target}"][:6] + 0.3 * rng.normal(size=6), 8 * rng.normal(size=2)] + 2.0
        )
        qrels[f"q{q}"] = {f"d{target}": 1}
    return RetrievalDataset("synthetic", docs, queries, qrels), table


def test_retrieval_tuning_on_query_folds() -> None:
    data, table = retrieval_data(40)
    result = tune(
        data,
        models=[MODEL],
        encoders={MODEL: TableEncoder(table)},
        transforms=["whitening"],
        modes=["dense"],
        include_flow=False,
    )
    assert result.kind == "retrieval" and result.metric == "ndcg@10"
    assert result.chosen.transform == "whitening" and result.chosen.significant
    assert len(result.checks) == 5
    check = result.check_summary()
    assert check is not None and check["tuned"] > check["raw"]
    held = tune(
        data,
        models=[MODEL],
        encoders={MODEL: TableEncoder(table)},
        transforms=["whitening"],
        modes=["dense"],
        metric="recall@5",
        test_queries=[f"q{q}" for q in range(30, 40)],
    )
    assert held.n_test == 10 and held.chosen.test is not None and held.checks == []


def test_few_queries_warn_and_keep_none_unless_significant() -> None:
    data, table = retrieval_data(6)
    with pytest.warns(WhitevecWarning, match="only 6 judged dev queries"):
        result = tune(data, models=[MODEL], encoders={MODEL: TableEncoder(table)}, transforms=["center"])
    assert result.chosen is result.baseline or result.chosen.significant


# --- bad input ------------------------------------------------------------------------------------------------
def test_few_pairs_warn() -> None:
    table, pairs = anisotropic_pairs(n_pairs=30, helps=False)
    with pytest.warns(WhitevecWarning, match="only 30 dev pairs"):
        result = run(pairs, table)
    assert result.chosen.transform == "none"
    assert any("only 30 dev pairs" in note for note in result.notes)


def test_constant_gold_is_an_error() -> None:
    table, pairs = anisotropic_pairs(n_pairs=60)
    flat = [Pair(p.sentence1, p.sentence2, 3.0) for p in pairs]
    with pytest.raises(BadInputError, match="same gold score"):
        run(flat, table)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"metric": "ndcg@10"}, "valid metrics: spearman"),
        ({"transforms": ["whitening", "zca"]}, "valid forms: none, raw, whitening"),
        ({"transforms": ["whitening-gamma"]}, "unknown transform spec"),
        ({"encodings": ["pq"]}, "unknown encoding 'pq'; valid: float32, fp16, sq8"),
        ({"encodings": ["sq8+refine"]}, "add \\+refine when you build"),
        ({"encodings": ["faiss:IVF4,PQ4"]}, "known only after a build"),
        ({"transforms": ["whitening-64"]}, "needs at least 64 dimensions"),
        ({"folds": 1}, "folds"),
        ({"max_bytes_per_vector": 0}, "max_bytes_per_vector"),
        ({"poolings": ["middle"]}, "unknown pooling"),
    ],
)
def test_bad_options_are_errors(kwargs: dict[str, Any], needle: str) -> None:
    table, pairs = anisotropic_pairs(n_pairs=60)
    with pytest.raises(BadInputError, match=needle):
        run(pairs, table, **kwargs)


def test_unknown_retrieval_metric_lists_the_valid_ones() -> None:
    data, table = retrieval_data(12)
    with pytest.raises(BadInputError, match=r"valid metrics: ndcg@K, recall@K, mrr@K, map"):
        tune(data, models=[MODEL], encoders={MODEL: TableEncoder(table)}, metric="precision@5")


def test_whitening_spec_round_trip() -> None:
    for k, beta, gamma in [(None, 1.0, 1.0), (128, 0.0, 0.5), (None, 0.0, 0.25), (64, 1.0, 0.0)]:
        spec = whitening_spec(k, beta, gamma)
        made = make_transform(spec)
        assert isinstance(made, Whitening)
        assert (made.n_components, made.beta, made.gamma) == (k, beta, gamma)
    assert whitening_spec(256) == "whitening-256" and whitening_spec(None, 0, 0.5) == "whitening-beta0-gamma0.5"
    assert isinstance(make_transform("abtt-3"), AllButTheTop)


# --- the tuned configuration -----------------------------------------------------------------------------------
def test_config_round_trip_applies_exactly(tmp_path: Path) -> None:
    table, pairs = anisotropic_pairs()
    result = run(pairs, table, transforms=["whitening-8-beta0-gamma0.5", "whitening"])
    path = result.save_config(tmp_path / "tuned.json")
    loaded = TunedConfig.load(path)
    assert loaded == result.config and loaded.transform != "none"
    texts = list(dict.fromkeys(s for p in pairs for s in (p.sentence1, p.sentence2)))
    encoder = TableEncoder(table)
    vectors = apply_config(loaded, texts, texts, encoder=encoder)
    assert vectors.shape == (len(texts), loaded.dim)
    # The same vectors as fitting the chosen transform directly, and the dev score tune reported.
    expected = make_transform(loaded.transform).fit(encoder.encode(texts)).transform(encoder.encode(texts))  # type: ignore[union-attr]
    np.testing.assert_array_equal(vectors, expected)
    row = {t: i for i, t in enumerate(texts)}
    cos = [
        float(
            vectors[row[p.sentence1]]
            @ vectors[row[p.sentence2]]
            / (np.linalg.norm(vectors[row[p.sentence1]]) * np.linalg.norm(vectors[row[p.sentence2]]))
        )
        for p in pairs
    ]
    assert 100 * spearmanr(cos, [p.score for p in pairs]).statistic == pytest.approx(result.chosen.dev, abs=1e-4)
    assert whitevec.tune is tune and whitevec.TunedConfig is TunedConfig


def test_config_is_checked_on_load(tmp_path: Path) -> None:
    good = TunedConfig(model="m", pooling="last-avg", transform="whitening-128", dim=128, bytes_per_vector=512)
    path = good.save(tmp_path / "c.json")
    assert TunedConfig.load(path) == good
    data = json.loads(path.read_text())
    cases = {
        "version": ({**data, "version": 2}, "version 2"),
        "format": ({**data, "format": "other"}, "not a whitevec tuned configuration"),
        "missing": ({k: v for k, v in data.items() if k != "pooling"}, "'pooling' is missing"),
        "type": ({**data, "dim": "128"}, "'dim' is missing or not a int"),
        "transform": ({**data, "transform": "zca"}, "unknown transform spec"),
        "encoding": ({**data, "encoding": "pq"}, "encoding 'pq'"),
    }
    for name, (payload, needle) in cases.items():
        bad = tmp_path / f"{name}.json"
        bad.write_text(json.dumps(payload))
        with pytest.raises(CorruptFileError, match=needle):
            TunedConfig.load(bad)
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(CorruptFileError, match="not a JSON"):
        TunedConfig.load(tmp_path / "junk.json")
    with pytest.raises(DataNotFoundError, match="whitevec tune"):
        TunedConfig.load(tmp_path / "absent.json")


def test_a_configuration_compares_what_poolings_compute_not_their_names(minilm_dir: Path) -> None:
    """On all-MiniLM-L6-v2 pooling model is last-avg then Normalize: the same cosines when no transform comes
    between; a transform fitted on last-avg's vectors is not valid on normalized ones."""
    built = {"model": "all-MiniLM-L6-v2", "pooling": "model", "transform": None}
    raw = TunedConfig(model="all-MiniLM-L6-v2", pooling="last-avg", transform="none")
    raw.check_index(built)
    with pytest.raises(ConfigMismatchError, match="pooling 'cls'"):
        raw.check_index({**built, "pooling": "cls"})
    with pytest.raises(ConfigMismatchError, match="pooling 'first-last-avg'"):
        raw.check_index({**built, "pooling": "first-last-avg"})
    whitened = TunedConfig(model="all-MiniLM-L6-v2", pooling="last-avg", transform="whitening-128")
    whitening_index = {**built, "transform": {"spec": "whitening-128"}}
    with pytest.raises(ConfigMismatchError, match="pooling 'model'"):
        whitened.check_index(whitening_index)
    whitened.check_index({**whitening_index, "pooling": "LAST-AVG"})


def test_index_build_config_takes_a_pooling_that_computes_the_same(minilm_dir: Path, tmp_path: Path) -> None:
    """`index build --config C --pooling model` on a config tuned with last-avg (raw vectors): the same cosines on
    all-MiniLM-L6-v2, so accepted (the config's pooling is used); with a whitening in between, refused."""
    from whitevec.cli import RunOptions
    from whitevec.cli._options import _from_config
    from whitevec.cli.index import index_build_command

    raw, whitened = tmp_path / "raw.json", tmp_path / "whitened.json"
    TunedConfig(model="all-MiniLM-L6-v2", pooling="last-avg", transform="none").save(raw)
    TunedConfig(model="all-MiniLM-L6-v2", pooling="last-avg", transform="whitening-128").save(whitened)
    taken = _from_config(raw, index_build_command, RunOptions(), pooling="model")
    assert taken[:3] == ("all-MiniLM-L6-v2", "last-avg", "none")
    with pytest.raises(ConfigMismatchError, match="--pooling model contradicts"):
        _from_config(whitened, index_build_command, RunOptions(), pooling="model")
    with pytest.raises(ConfigMismatchError, match="--pooling cls contradicts"):
        _from_config(raw, index_build_command, RunOptions(), pooling="cls")


def test_config_refuses_another_model_or_pooling() -> None:
    config = TunedConfig(model="table", pooling="last-avg", transform="whitening", dim=16, bytes_per_vector=64)
    config.check_encoder(TableEncoder({"x": np.zeros(16)}))
    with pytest.raises(ConfigMismatchError, match=r"pooling 'last-avg'.*pooling 'cls'"):
        config.check_encoder(TableEncoder({"x": np.zeros(16)}, pooling="cls"))
    with pytest.raises(ConfigMismatchError, match="model 'other'"):
        config.check_index({"model": "other", "pooling": "last-avg", "transform": {"spec": "whitening"}})
    with pytest.raises(ConfigMismatchError, match="transform 'none'"):
        config.check_index({"model": "table", "pooling": "last-avg", "transform": None})
    config.check_index({"model": "table", "pooling": "last-avg", "transform": {"spec": "whitening"}})


def test_an_interrupted_save_leaves_no_half_written_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "tuned.json"
    old = TunedConfig(model="m", pooling="last-avg", transform="none", dim=4, bytes_per_vector=16)
    old.save(target)
    before = target.read_bytes()

    def write_half(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        with open(self, "w", encoding="utf-8") as handle:
            handle.write(text[: len(text) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", write_half)
    new = TunedConfig(model="m", pooling="last-avg", transform="whitening", dim=4, bytes_per_vector=16)
    with pytest.raises(KeyboardInterrupt):
        new.save(target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tuned.json"]
