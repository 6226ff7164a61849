"""Token-frequency weights (SIF, uSIF, zipf), frequency files, Zipfian whitening and common-component removal,
each checked against a direct computation of the papers' formulas."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from whitevec.encoders.token_weights import (
    FrequencyFileError,
    TokenFrequencies,
    TokenWeighting,
    count_token_ids,
    fit_zipfian_whitening,
    sentence_weights,
    usif_a,
    zipfian_whitening_fit,
)
from whitevec.encoders.tokenization import count_model_frequencies
from whitevec.encoders.transformer import Encoder
from whitevec.errors import BadInputError, DataNotFoundError
from whitevec.transforms import CommonComponentRemoval, Transform, make_transform

from .test_cli import run_cli
from .test_encoder import reference_hidden

CORPUS = [
    "a man is playing guitar .",
    "a woman is playing piano .",
    "the dog is running in the street",
    "a girl is eating food",
    "the cat is on the car",
    "a boy is brushing his hair",
    "the man and the woman are running",
    "a red car and a blue car",
]


def frequencies(counts: list[int], specials: tuple[int, ...] = (0,), n_texts: int = 4) -> TokenFrequencies:
    return TokenFrequencies(np.array(counts, dtype=np.int64), n_texts, "print", specials)


@pytest.fixture(scope="module")
def tiny_frequencies(tiny_bert_dir: Path) -> TokenFrequencies:
    return count_model_frequencies(tiny_bert_dir, CORPUS)


# --- weights -------------------------------------------------------------------------------------------------
def test_probabilities_are_smoothed_counts_without_special_tokens() -> None:
    f = frequencies([5, 10, 0, 30, 60])  # id 0 special, id 2 never seen
    p = f.probabilities()
    assert p[0] == 0.0
    np.testing.assert_allclose(p[1:], np.array([11, 1, 31, 61]) / (100 + 4))
    assert f.n_tokens == 105 and f.n_types == 4


def test_sif_usif_and_zipf_weights_follow_their_formulas() -> None:
    counts = [0, 500, 200, 100, 50, 20, 10, 5, 2, 1, 0]
    f = frequencies(counts, n_texts=500)
    p = (np.array(counts, dtype=np.float64) + 1.0)[1:] / (sum(counts) + 10)
    sif = TokenWeighting("sif", f).weights()
    np.testing.assert_allclose(sif[1:], 1e-3 / (1e-3 + p), rtol=1e-12)
    assert sif[0] == 0.0
    np.testing.assert_allclose(TokenWeighting("sif", f, a=0.01).weights()[1:], 0.01 / (0.01 + p), rtol=1e-12)
    # uSIF by hand: V' = types counted (9), n = tokens per text.
    counted = p[np.array(counts[1:]) > 0]
    v, n = counted.size, sum(counts) / 500
    alpha = np.mean(counted > 1 - (1 - 1 / v) ** n)
    a = (1 - alpha) / (alpha * v / 2)
    assert 0 < alpha < 1
    assert usif_a(f) == pytest.approx(a, rel=1e-12)
    np.testing.assert_allclose(TokenWeighting("usif", f).weights()[1:], a / (a / 2 + p), rtol=1e-12)
    zipf = TokenWeighting("zipf", f).weights()
    assert zipf[0] == 0.0 and (zipf[1:] == 1.0).all()


def test_bad_weighting_names_the_problem() -> None:
    f = frequencies([0, 3, 4])
    with pytest.raises(BadInputError, match="unknown token weights 'tfidf'"):
        TokenWeighting("tfidf", f)
    with pytest.raises(BadInputError, match="only sif takes a"):
        TokenWeighting("usif", f, a=0.1)
    with pytest.raises(BadInputError, match="positive"):
        TokenWeighting("sif", f, a=-1.0)


# --- frequency files -----------------------------------------------------------------------------------------
def test_counts_are_the_tokenizers_non_special_tokens(
    tiny_bert_dir: Path, tiny_frequencies: TokenFrequencies
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    expected = np.zeros(len(tokenizer), dtype=np.int64)
    for text in CORPUS:
        for token in tokenizer(text, add_special_tokens=False)["input_ids"]:
            expected[token] += 1
    np.testing.assert_array_equal(count_token_ids(tokenizer, CORPUS), expected)
    np.testing.assert_array_equal(tiny_frequencies.counts, expected)
    assert tiny_frequencies.n_texts == len(CORPUS)
    assert tiny_frequencies.average_length == expected.sum() / len(CORPUS)


def test_frequency_file_round_trip_and_damage(tiny_frequencies: TokenFrequencies, tmp_path: Path) -> None:
    path = tiny_frequencies.save(tmp_path / "f.json")
    back = TokenFrequencies.load(path)
    np.testing.assert_array_equal(back.counts, tiny_frequencies.counts)
    assert back.digest() == tiny_frequencies.digest()
    record = json.loads(path.read_text())
    assert record["n_tokens"] == tiny_frequencies.n_tokens and record["tokenizer_fingerprint"]
    with pytest.raises(DataNotFoundError, match="no token-frequency file"):
        TokenFrequencies.load(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(FrequencyFileError, match="not a readable"):
        TokenFrequencies.load(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(BadInputError, match="not a whitevec token-frequency file"):
        TokenFrequencies.load(tmp_path / "other.json")
    record["counts"][0][1] += 1  # an edited count no longer sums to n_tokens
    (tmp_path / "edited.json").write_text(json.dumps(record))
    with pytest.raises(BadInputError, match="edited or damaged"):
        TokenFrequencies.load(tmp_path / "edited.json")


def test_counts_of_another_tokenizer_are_refused(tiny_bert_dir: Path, tiny_frequencies: TokenFrequencies) -> None:
    foreign = TokenFrequencies(
        tiny_frequencies.counts, tiny_frequencies.n_texts, "another tokenizer", tiny_frequencies.special_ids
    )
    with pytest.raises(BadInputError, match="another tokenizer"):
        Encoder(tiny_bert_dir, pooling="last-avg", cache=False, token_weights="sif", token_frequencies=foreign)


def test_bad_weight_input_fails_before_the_model_loads(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_frequencies: TokenFrequencies
) -> None:
    import transformers

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", no_model)
    saved = tiny_frequencies.save(tmp_path / "f.json")
    with pytest.raises(BadInputError, match="unknown token weights"):
        Encoder(tiny_bert_dir, pooling="last-avg", token_weights="idf", token_frequencies=saved)
    with pytest.raises(BadInputError, match="'cls' reads one token's vector"):
        Encoder(tiny_bert_dir, pooling="cls", token_weights="sif", token_frequencies=saved)
    with pytest.raises(BadInputError, match="need token frequencies"):
        Encoder(tiny_bert_dir, pooling="last-avg", token_weights="sif")
    with pytest.raises(DataNotFoundError):
        Encoder(tiny_bert_dir, pooling="last-avg", token_weights="sif", token_frequencies=tmp_path / "no.json")
    (tmp_path / "bad.json").write_text("[1, 2")
    with pytest.raises(BadInputError, match="not a readable"):
        Encoder(tiny_bert_dir, pooling="last-avg", token_weights="sif", token_frequencies=tmp_path / "bad.json")


# --- the encoder ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["sif", "usif", "zipf"])
@pytest.mark.parametrize("pooling", ["last-avg", "embeddings-avg", "first-last-avg"])
def test_weighted_token_mean_matches_hidden_states(
    tiny_bert_dir: Path, tiny_frequencies: TokenFrequencies, scheme: str, pooling: str
) -> None:
    weighting = TokenWeighting(scheme, tiny_frequencies)
    encoder = Encoder(tiny_bert_dir, pooling=pooling, batch_size=3, cache=False, token_weights=weighting)
    texts = [*CORPUS[:3], "x y guitar", "dog"]
    got = encoder.encode(texts)
    table = weighting.weights()
    layers = {"last-avg": [-1], "embeddings-avg": [0], "first-last-avg": [1, -1]}[pooling]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    for row, text in zip(got, texts, strict=True):
        hidden, _ = reference_hidden(tiny_bert_dir, text)
        ids = tokenizer(text)["input_ids"]
        real = [i for i, t in enumerate(ids) if t not in tokenizer.all_special_ids]
        w = torch.tensor([table[ids[i]] for i in real], dtype=torch.float64)
        expected = sum((w[:, None] * hidden[layer][real].double()).sum(0) / len(real) for layer in layers)
        np.testing.assert_allclose(row, (expected / len(layers)).numpy(), rtol=1e-4, atol=1e-5)


def test_weights_have_their_own_cache_namespace(tiny_bert_dir: Path, tiny_frequencies: TokenFrequencies) -> None:
    texts = CORPUS[:4]
    cached = Encoder(tiny_bert_dir, pooling="last-avg")
    plain = cached.encode(texts)
    results = {}
    for scheme in ("sif", "usif", "zipf"):
        weighted = cached.with_token_weights(TokenWeighting(scheme, tiny_frequencies))
        results[scheme] = weighted.encode(texts)
        fresh = weighted.without_cache().encode(texts)
        np.testing.assert_array_equal(results[scheme], fresh)
        assert weighted.describe()["token_weights"]["scheme"] == scheme
        np.testing.assert_array_equal(weighted.encode(texts), fresh)  # now from its own cache
    assert not np.allclose(results["sif"], plain) and not np.allclose(results["sif"], results["usif"])
    np.testing.assert_array_equal(cached.encode(texts), plain)
    assert "token_weights" not in cached.describe()
    with pytest.raises(BadInputError, match="weights cannot apply"):
        cached.with_token_weights(TokenWeighting("sif", tiny_frequencies)).with_pooling("cls")
    cached.close()


# --- Zipfian whitening ---------------------------------------------------------------------------------------
def paper_zipfian_whitening(table: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Yokoi et al. (2024), Algorithm 1, as written: mu = sum p w; W_bar = sqrt(p) (W - mu); SVD; W~ = (W - mu)
    V S^-1."""
    mu = p @ table
    w_bar = np.sqrt(p)[:, None] * (table - mu)
    _, s, vt = np.linalg.svd(w_bar, full_matrices=False)
    return (table - mu) @ vt.T / s


def test_zipfian_whitening_equals_the_papers_formulas_on_a_small_vocabulary() -> None:
    rng = np.random.default_rng(3)
    vocab, dim = 40, 6
    table = rng.normal(size=(vocab, dim)) @ rng.normal(size=(dim, dim)) + 3.0
    p = 1.0 / np.arange(1, vocab + 1)  # Zipfian
    p /= p.sum()
    ids = np.arange(vocab)
    # Every type occurs once (static vectors); in two batches, to use the streaming weighted fit.
    fitted = zipfian_whitening_fit(
        [(table[:25], ids[:25]), (table[25:], ids[25:])], p, np.ones(vocab, dtype=np.int64)
    )
    paper = paper_zipfian_whitening(table, p)
    ours = fitted.transform(table).astype(np.float64) * np.sqrt(vocab / (vocab - 1))  # the documented scale
    # Column signs of an SVD are arbitrary: compare the Gram matrices (1e-8, float64 moments).
    assert np.allclose(ours @ ours.T, paper @ paper.T, rtol=0, atol=1e-5)  # float32 output of transform
    W = fitted.components_ * np.sqrt(vocab / (vocab - 1))
    exact = (table - fitted.mean_) @ W
    np.testing.assert_allclose(exact @ exact.T, paper @ paper.T, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(fitted.mean_, p @ table, rtol=1e-10)
    # p-weighted covariance of the whitened vectors is I (the paper's criterion).
    cov = (paper * p[:, None]).T @ paper
    np.testing.assert_allclose(cov, np.eye(dim), atol=1e-10)
    # Sentences: the mean of whitened tokens equals whitening the mean of tokens (affine map).
    sentences = [[0, 1, 5], [2, 2, 9, 30], [39]]
    pooled_paper = np.stack([paper[s].mean(0) for s in sentences])
    pooled_ours = np.stack([(table[s].mean(0) - fitted.mean_) @ W for s in sentences])
    np.testing.assert_allclose(pooled_ours @ pooled_ours.T, pooled_paper @ pooled_paper.T, rtol=1e-8, atol=1e-8)


def test_repeated_occurrences_weigh_their_type_by_p() -> None:
    rng = np.random.default_rng(4)
    table = rng.normal(size=(10, 4))
    p = rng.uniform(0.1, 1.0, size=10)
    p /= p.sum()
    occurrences = np.array([1, 3, 2, 1, 5, 1, 1, 2, 1, 4])
    ids = np.repeat(np.arange(10), occurrences)
    rng.shuffle(ids)
    fitted = zipfian_whitening_fit([(table[ids], ids)], p, occurrences)
    once = zipfian_whitening_fit([(table, np.arange(10))], p, np.ones(10, dtype=np.int64))
    np.testing.assert_allclose(fitted.mean_, once.mean_, rtol=1e-10)
    n, m = occurrences.sum(), 10
    np.testing.assert_allclose(fitted.covariance_ * (n - 1) / n, once.covariance_ * (m - 1) / m, rtol=1e-9)


def test_fit_zipfian_whitening_on_an_encoder(tiny_bert_dir: Path, tiny_frequencies: TokenFrequencies) -> None:
    encoder = Encoder(
        tiny_bert_dir, pooling="last-avg", cache=False, token_weights=TokenWeighting("zipf", tiny_frequencies)
    )
    fitted = fit_zipfian_whitening(encoder, CORPUS, batch_size=3)
    # The same moments straight from the token vectors with their weights p(w) / c(w) * N / P.
    vectors, ids = (np.concatenate(parts) for parts in zip(*encoder.token_vectors(CORPUS), strict=True))
    p = tiny_frequencies.probabilities()
    counts = np.bincount(ids, minlength=p.size)
    w = p[ids] / counts[ids]
    mean = (w[:, None] * vectors).sum(0) / w.sum()
    np.testing.assert_allclose(fitted.mean_, mean, rtol=1e-5, atol=1e-6)
    # zipf weights: the uniform mean over non-special tokens, which the whitening then maps as a whole.
    sentence = encoder.encode(CORPUS[:1])[0]
    first = next(encoder.token_vectors(CORPUS[:1]))[0]
    np.testing.assert_allclose(sentence, first.mean(0), rtol=1e-5, atol=1e-6)


def test_sentence_weights_are_mean_token_probabilities(
    tiny_bert_dir: Path, tiny_frequencies: TokenFrequencies
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bert_dir))
    weights = sentence_weights(tokenizer, CORPUS, tiny_frequencies)
    p = tiny_frequencies.probabilities()
    raw = np.array([p[tokenizer(t, add_special_tokens=False)["input_ids"]].mean() for t in CORPUS])
    np.testing.assert_allclose(weights, raw * len(CORPUS) / raw.sum(), rtol=1e-12)


# --- common-component removal --------------------------------------------------------------------------------
def test_common_component_removal_matches_an_uncentred_svd(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 12)) + rng.normal(size=12) * 4
    _, s, vt = np.linalg.svd(X, full_matrices=False)
    soft = CommonComponentRemoval(n_components=3).fit(X)
    lam = s[:3] ** 2 / (s[:3] ** 2).sum()
    expected = X.copy()
    for i in range(3):
        expected = expected - lam[i] * np.outer(X @ vt[i], vt[i])
    np.testing.assert_allclose(soft.transform(X), expected, rtol=1e-5, atol=1e-5)
    sif = CommonComponentRemoval(n_components=1, soft=False).fit(X)
    np.testing.assert_allclose(sif.transform(X), X - np.outer(X @ vt[0], vt[0]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(CommonComponentRemoval(1, soft=True).fit(X).transform(X), sif.transform(X))
    saved = soft.save(tmp_path / "ccr.safetensors")
    np.testing.assert_array_equal(Transform.load(saved).transform(X), soft.transform(X))
    with pytest.raises(BadInputError, match="n_components"):
        CommonComponentRemoval(n_components=13).fit(X)


def test_specs() -> None:
    sif, usif, usif3 = make_transform("sif-pc"), make_transform("usif-pc"), make_transform("usif-pc-3")
    assert isinstance(sif, CommonComponentRemoval) and sif.get_params() == {"n_components": 1, "soft": False}
    assert isinstance(usif, CommonComponentRemoval) and usif.get_params() == {"n_components": 5, "soft": True}
    assert isinstance(usif3, CommonComponentRemoval) and usif3.n_components == 3
    for bad in ("sif-pc-2", "usif-pc-0", "usif"):
        with pytest.raises(BadInputError, match="unknown transform spec"):
            make_transform(bad)


# --- the command line ----------------------------------------------------------------------------------------
def test_cli_counts_and_weighs(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n")
    saved = tmp_path / "freq.json"
    code, _, err = run_cli(
        ["frequencies", "count", "--corpus", str(corpus), "--out", str(saved), "--model", str(tiny_bert_dir)],
        capsys,
    )
    assert code == 0, err
    assert TokenFrequencies.load(saved).n_texts == len(CORPUS)
    outputs = {}
    for source in (saved, corpus):  # saved counts or the corpus itself: the same vectors
        out = tmp_path / f"v-{source.suffix}.npy"
        args = ["encode", str(corpus), "--out", str(out), "--model", str(tiny_bert_dir), "-p", "last-avg"]
        code, _, err = run_cli([*args, "--token-weights", "sif", "--token-frequencies", str(source), "-q"], capsys)
        assert code == 0, err
        outputs[source.suffix] = np.load(out)
    np.testing.assert_array_equal(outputs[".json"], outputs[".txt"])
    base = ["encode", str(corpus), "--out", str(tmp_path / "x.npy"), "--model", str(tiny_bert_dir)]
    for extra, message in [
        (
            ["-p", "last-avg", "--token-weights", "bm25", "--token-frequencies", str(saved)],
            "unknown token weights",
        ),
        (["-p", "cls", "--token-weights", "sif", "--token-frequencies", str(saved)], "weights cannot apply"),
        (["-p", "last-avg", "--token-weights", "sif"], "needs --token-frequencies"),
        (
            ["-p", "last-avg", "--token-weights", "sif", "--token-frequencies", str(tmp_path / "no.json")],
            "no token",
        ),
    ]:
        code, _, err = run_cli([*base, *extra], capsys)
        assert code == 2 and message in err, err


def test_the_guide_snippet_runs(minilm_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from .test_readme_snippets import marked_block

    code, page = marked_block(
        "docs/how-to/token-weights.md", "tests/test_token_weights.py::test_the_guide_snippet_runs"
    )
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {"__name__": "__docs__"}
    exec(compile(code, str(page), "exec"), scope)
    vectors = scope["vectors"]
    assert isinstance(vectors, np.ndarray) and vectors.shape == (3, 384)
    assert (tmp_path / "freq.json").is_file()


def test_index_and_export_refuse_weighted_encoders(
    tiny_bert_dir: Path, tiny_frequencies: TokenFrequencies, tmp_path: Path
) -> None:
    from whitevec.export.sentence_transformers import export_sentence_transformer
    from whitevec.index.build import encoder_fields

    encoder = Encoder(
        tiny_bert_dir, pooling="last-avg", cache=False, token_weights=TokenWeighting("sif", tiny_frequencies)
    )
    with pytest.raises(BadInputError, match="cannot record token weights"):
        encoder_fields(encoder)
    with pytest.raises(BadInputError, match="sentence-transformers' Pooling cannot"):
        export_sentence_transformer(tmp_path / "st", encoder)
    assert encoder_fields(encoder.with_token_weights(None))["pooling"] == "last-avg"
