"""`whitevec distill`: each step checked against a direct computation (transformers' hidden states, the weight
formulas, the transform applied after encoding), the folder against Model2Vec's reader, and the bad inputs."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

import whitevec.distill.run as distill_module
from whitevec.distill.run import distill
from whitevec.distill.token_table import kept_tokens
from whitevec.encoders.static import StaticEncoder, StaticTokens, median_token_length, static_mean
from whitevec.encoders.static_format import read_static_folder
from whitevec.encoders.token_weights import TokenFrequencies, TokenWeighting, rank_sif_weights
from whitevec.encoders.tokenization import count_model_frequencies
from whitevec.errors import BadInputError, DataNotFoundError
from whitevec.transforms import AFFINE_SPEC_FORMS, SPEC_FORMS, NotAffineError, is_affine, make_transform
from whitevec.utils.linalg import unit_rows

from .conftest import VOCAB_WORDS
from .static_helpers import tiny_static_folder
from .test_cli import run_cli
from .test_cli_usage import check_bad_input


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    # Only some words, so the corpus method leaves tokens unseen and falls back for them.
    words = VOCAB_WORDS[:14]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 8))) + " ." for _ in range(n)]


CORPUS = _texts(24, 0)
PROBES = [*_texts(12, 1), "guitar piano food", "?"]  # words the corpus lacks; "?" alone is one token


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def raw_tables(tiny_bert_dir: Path, corpus_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both methods' tables with no PCA, weights or normalisation: the raw token vectors."""
    root = tmp_path_factory.mktemp("raw")
    common: dict[str, Any] = {"dims": None, "token_weights": "none", "normalize": False}
    out: dict[str, Any] = {}
    for method in ("tokens", "corpus"):
        result = distill(tiny_bert_dir, root / method, method=method, corpus=corpus_file, **common)
        out[method] = read_static_folder(result.path)
        out[f"{method}-result"] = result
    return out


def _model(folder: Path) -> tuple[Any, Any]:
    from transformers import AutoModel, AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder)), AutoModel.from_pretrained(str(folder)).eval()


def test_tokens_rows_are_each_token_alone_through_the_model(
    tiny_bert_dir: Path, raw_tables: dict[str, Any]
) -> None:
    tokenizer, model = _model(tiny_bert_dir)
    table = raw_tables["tokens"].embeddings
    assert table.shape == (len(tokenizer), model.config.hidden_size) and table.dtype == np.float32
    ids = torch.tensor([[tokenizer.cls_token_id, i, tokenizer.sep_token_id] for i in range(len(tokenizer))])
    with torch.no_grad():
        want = model(input_ids=ids).last_hidden_state.mean(1).numpy()  # Model2Vec: last layer, all positions
    # Model2Vec drops the added tokens but the unknown and padding ones: zero rows here.
    dropped = [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id]
    want[dropped] = 0.0
    np.testing.assert_allclose(table, want, atol=1e-5)
    assert raw_tables["tokens-result"].provenance["tokens_kept"] == len(tokenizer) - 3
    assert raw_tables["tokens-result"].n_seen == 0  # the Python API's count, 0 (not None) without a corpus


def test_corpus_rows_are_contextual_means_with_the_tokens_fallback(
    tiny_bert_dir: Path, raw_tables: dict[str, Any]
) -> None:
    tokenizer, model = _model(tiny_bert_dir)
    sums = np.zeros((len(tokenizer), model.config.hidden_size))
    counts = np.zeros(len(tokenizer))
    specials = set(tokenizer.all_special_ids)
    encoded = tokenizer(CORPUS, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state.numpy()
    for row, ids in enumerate(encoded["input_ids"].tolist()):
        for position, token in enumerate(ids):
            if token not in specials:  # padding is a special token too
                sums[token] += hidden[row, position]
                counts[token] += 1
    seen = counts > 0
    table = raw_tables["corpus"].embeddings
    assert 0 < seen.sum() < len(tokenizer) - len(specials)  # some tokens fall back
    assert raw_tables["corpus-result"].n_seen == seen.sum()
    np.testing.assert_allclose(table[seen], sums[seen] / counts[seen, None], atol=1e-5)
    np.testing.assert_allclose(table[~seen], raw_tables["tokens"].embeddings[~seen], atol=1e-6)


class _RecordedBar:
    """What a progress bar is told: each task's total and how far it was advanced."""

    def __init__(self) -> None:
        self.tasks: dict[str, list[float]] = {}

    def __enter__(self) -> _RecordedBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: int) -> str:
        self.tasks[description] = [total, 0]
        return description

    def advance(self, task: str, advance: float = 1) -> None:
        self.tasks[task][1] += advance


@pytest.mark.parametrize(("method", "show"), [("tokens", False), ("corpus", True)])
def test_rows_in_small_chunks_and_the_progress_shown_as_asked(
    tiny_bert_dir: Path,
    corpus_file: Path,
    raw_tables: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    show: bool,
) -> None:
    """Token ids go through the model a chunk at a time (here 7, so the 46 ids take several) and the corpus 5
    texts a batch (24 texts: 5 batches, each token's sums and counts carried across them): the same rows as in
    one chunk and one batch, float32 in the scratch table; every progress bar is shown or not as
    ``show_progress`` says (``--quiet``), and the single-token bar counts each token it runs once."""
    import whitevec.distill.token_table as token_table
    import whitevec.encoders.transformer as transformer

    bars: list[tuple[int, bool | None, str, _RecordedBar]] = []

    def recording(total: int, shown: bool | None, label: str) -> _RecordedBar:
        bars.append((total, shown, label, _RecordedBar()))
        return bars[-1][3]

    raw_dtypes: list[np.dtype] = []

    def reduce_recording(raw: Any, dims: int | None) -> np.ndarray:
        raw_dtypes.append(raw.vectors.dtype)
        return token_table.reduce_table(raw, dims)

    monkeypatch.setattr(token_table, "progress_bar", recording)
    monkeypatch.setattr(transformer, "progress_bar", recording)
    monkeypatch.setattr(token_table, "_ID_CHUNK", 7)
    monkeypatch.setattr(distill_module, "reduce_table", reduce_recording)
    common: dict[str, Any] = {"dims": None, "token_weights": "none", "normalize": False}
    result = distill(
        tiny_bert_dir,
        tmp_path / method,
        method=method,
        corpus=corpus_file,
        show_progress=show,
        batch_size=5,
        **common,
    )
    table = read_static_folder(result.path).embeddings
    np.testing.assert_allclose(table, raw_tables[method].embeddings, atol=1e-6)
    assert raw_dtypes == [np.float32]
    assert bars and all(shown is show for _, shown, _, _ in bars), bars
    singles = [
        (total, bar) for total, _, label, bar in bars if label == f"single tokens through {tiny_bert_dir.name}"
    ]
    assert len(singles) == 1, bars
    n_single = 46 - 3 - result.n_seen  # no row for [CLS], [SEP], [MASK]; a seen token needs none
    assert singles[0][0] == n_single and singles[0][1].tasks == {"tokens": [n_single, n_single]}


def test_pca_is_fitted_on_the_table(tiny_bert_dir: Path, raw_tables: dict[str, Any], tmp_path: Path) -> None:
    result = distill(tiny_bert_dir, tmp_path / "pca", dims=8, token_weights="none", normalize=False)
    table = read_static_folder(result.path).embeddings
    assert table.shape == (46, 8) and result.provenance["dims"] == 8
    kept = [i for i in range(46) if i not in (2, 3, 4)]  # [CLS], [SEP], [MASK]: no row, not in the fit
    assert not table[[2, 3, 4]].any()
    table, raw = table[kept], raw_tables["tokens"].embeddings[kept].astype(np.float64)
    np.testing.assert_allclose(table.mean(0), 0.0, atol=1e-5)  # centred rows
    variance = table.var(0)
    assert np.all(np.diff(variance) <= 1e-6)  # the first principal directions, largest first
    centred = raw - raw.mean(0)
    top = np.linalg.eigvalsh(centred.T @ centred / len(raw))[::-1][:8]
    np.testing.assert_allclose(variance, top, rtol=1e-3)


@pytest.mark.parametrize("scheme", ["sif-rank", "sif", "usif", "zipf"])
def test_each_weighting_multiplies_the_rows(
    tiny_bert_dir: Path, corpus_file: Path, raw_tables: dict[str, Any], tmp_path: Path, scheme: str
) -> None:
    result = distill(
        tiny_bert_dir, tmp_path / scheme, corpus=corpus_file, dims=None, token_weights=scheme, normalize=False
    )
    raw = raw_tables["tokens"].embeddings
    if scheme == "sif-rank":  # Model2Vec's: SIF a=1e-4 over the rank of the tokens it keeps, no counts
        kept = [i for i in range(raw.shape[0]) if i not in (2, 3, 4)]  # [CLS], [SEP], [MASK] are dropped
        weights = np.zeros(raw.shape[0])
        weights[kept] = 1e-4 / (1e-4 + (1 / np.arange(2, 45)) / (1 / np.arange(2, 45)).sum())
        np.testing.assert_allclose(weights[kept], rank_sif_weights(len(kept)))
    else:
        weights = TokenWeighting(scheme, count_model_frequencies(tiny_bert_dir, CORPUS)).weights()
    np.testing.assert_allclose(read_static_folder(result.path).embeddings, raw * weights[:, None], atol=1e-6)
    assert result.provenance["token_weights"]["scheme"] == scheme


def test_a_frequency_file_gives_the_counts(
    tiny_bert_dir: Path, raw_tables: dict[str, Any], tmp_path: Path
) -> None:
    counts = count_model_frequencies(tiny_bert_dir, CORPUS)
    counts.save(tmp_path / "counts.json")
    result = distill(
        tiny_bert_dir,
        tmp_path / "out",
        dims=None,
        token_weights="sif",
        frequencies=tmp_path / "counts.json",
        normalize=False,
    )
    want = raw_tables["tokens"].embeddings * TokenWeighting("sif", counts).weights()[:, None]
    np.testing.assert_allclose(read_static_folder(result.path).embeddings, want, atol=1e-6)


# Texts that the static mean must cut and filter as Model2Vec does: words outside the tiny vocabulary ("zebra",
# "quokka": [UNK], which the mean leaves out), texts past the folder's max_length in characters (cut to 8 x the
# median token length first) and, in short tokens, past it in tokens after that cut (the first 8 tokens count).
MAX_LENGTH = 8
SHORT_TOKENS = ["x y . x y , x y ! x y ? x y", "y , y , y x zebra x y x . x"]
ODD_CORPUS = [*CORPUS, *SHORT_TOKENS, *(f"zebra {text} quokka {text}" for text in _texts(12, 2))]
ODD_PROBES = [*PROBES, *SHORT_TOKENS, "zebra", "quokka piano zebra", *(f"{t} zebra {t}" for t in _texts(6, 3))]


def test_folded_transform_equals_encode_then_transform(tiny_bert_dir: Path, tmp_path: Path) -> None:
    from model2vec import StaticModel

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(ODD_CORPUS) + "\n", encoding="utf-8")
    common: dict[str, Any] = {
        "method": "corpus",
        "corpus": corpus,
        "dims": 16,
        "token_weights": "sif",
        "max_length": MAX_LENGTH,
    }
    plain = distill(tiny_bert_dir, tmp_path / "plain", normalize=False, **common).path
    folded = distill(tiny_bert_dir, tmp_path / "folded", transform="whitening-8", **common)
    # The independent side: Model2Vec's StaticModel encodes with the plain folder, then the transform is fitted
    # and applied to its vectors.
    reference = StaticModel.from_pretrained(str(plain), force_download=False)
    assert reference.max_length == MAX_LENGTH
    whole = Tokenizer.from_file(str(plain / "tokenizer.json"))
    whole.no_truncation()
    cut = [text[: MAX_LENGTH * reference.median_token_length] for text in ODD_PROBES]
    assert sum(len(text) < len(whole_text) for text, whole_text in zip(cut, ODD_PROBES, strict=True)) >= 6
    lengths = [len(e.ids) for e in whole.encode_batch(cut, add_special_tokens=False)]
    assert sum(length > MAX_LENGTH for length in lengths) >= 2  # still too long after the cut
    assert whole.token_to_id("[UNK]") in whole.encode("zebra", add_special_tokens=False).ids
    whitening = make_transform("whitening-8")
    assert whitening is not None
    whitening.fit(reference.encode(ODD_CORPUS))
    want = whitening.transform(reference.encode(ODD_PROBES))
    want[ODD_PROBES.index("zebra")] = 0.0  # no token left: a zero vector, whatever the transform's offset
    table = read_static_folder(folded.path)
    got = static_mean(table.embeddings, StaticTokens.of(table.tokenizer, table.max_length), ODD_PROBES)
    np.testing.assert_allclose(got, want, atol=1e-4)
    # Model2Vec's own reader of the folded folder: the same vectors, L2-normalised as the folder says.
    model2vec = StaticModel.from_pretrained(str(folded.path), force_download=False)
    np.testing.assert_allclose(model2vec.encode(ODD_PROBES), unit_rows(want), atol=1e-4)
    assert folded.provenance["transform"] == "whitening-8"
    assert folded.provenance["corpus"]["lines"] == len(ODD_CORPUS)


def test_the_fit_sees_the_vectors_the_folder_serves(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vectors distill fits its folded transform on are the ones the same table, written without the
    transform, serves: one mean and one token rule (the character cut, the first max_length tokens, [UNK]
    dropped) for the fit and the folder, on texts past both limits too."""
    fitted: list[np.ndarray] = []

    def recording_transform(spec: str) -> Any:
        made = make_transform(spec)
        assert made is not None
        fit = made.fit

        def recorded_fit(X: np.ndarray, *args: Any, **kwargs: Any) -> Any:
            fitted.append(np.array(X))
            return fit(X, *args, **kwargs)

        made.fit = recorded_fit  # type: ignore[method-assign]
        return made

    monkeypatch.setattr(distill_module, "make_transform", recording_transform)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(ODD_CORPUS) + "\n", encoding="utf-8")
    common: dict[str, Any] = {"method": "corpus", "corpus": corpus, "dims": 16, "max_length": MAX_LENGTH}
    distill(tiny_bert_dir, tmp_path / "folded", transform="whitening-8", **common)
    plain = distill(tiny_bert_dir, tmp_path / "plain", normalize=False, **common).path
    whole = Tokenizer.from_file(str(plain / "tokenizer.json"))
    whole.no_truncation()
    cut = MAX_LENGTH * median_token_length(whole)
    assert sum(len(text) > cut for text in ODD_CORPUS) >= 6
    lengths = [len(e.ids) for e in whole.encode_batch([t[:cut] for t in ODD_CORPUS], add_special_tokens=False)]
    assert sum(length > MAX_LENGTH for length in lengths) >= 2  # still too long after the cut
    assert len(fitted) == 1 and fitted[0].shape == (len(ODD_CORPUS), 16)
    np.testing.assert_allclose(fitted[0], StaticEncoder(plain).encode(ODD_CORPUS), rtol=0, atol=1e-6)


def _affine_specs() -> list[str]:
    forms = [f for f in SPEC_FORMS if f not in ("none", "raw") and "<" not in f]
    return [
        f.replace("[-K]", "-3")
        .replace("-K", "-3")
        .replace("-D", "-2")
        .replace("-M", "-2")
        .replace("betaB", "beta0.5")
        .replace("gammaG", "gamma0.5")
        for f in forms
    ]


@pytest.mark.parametrize("spec", _affine_specs())
def test_affine_form_is_the_transform(spec: str) -> None:
    """Each transform's affine form gives its outputs; the forms listed as affine are exactly those that have
    one (flow, flow-random and normalize refuse)."""
    transform = make_transform(spec)
    assert transform is not None
    listed = any(spec.startswith(form.split("-")[0]) for form in AFFINE_SPEC_FORMS)
    assert is_affine(transform) == (spec not in ("flow", "flow-random", "normalize")) == listed
    if not is_affine(transform):
        with pytest.raises(NotAffineError, match="not an affine map"):
            transform.affine()
        return
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 6)) @ rng.normal(size=(6, 6)) + 3.0
    transform.fit(X)
    A, b = transform.affine()
    np.testing.assert_allclose(transform.transform(X), X @ A + b, atol=1e-5 * np.abs(X @ A).max())


# --- bad input -----------------------------------------------------------------------------------------------
@pytest.fixture()
def no_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if distill gets as far as loading the model (or its tokenizer)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was loaded before the bad input was found")

    monkeypatch.setattr(distill_module, "load_model_tokenizer", refuse)
    monkeypatch.setattr(distill_module, "Encoder", refuse)


@pytest.mark.usefixtures("no_model_loads")
def test_a_missing_or_empty_corpus_fails_before_the_model_loads(tiny_bert_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="no corpus file"):
        distill(tiny_bert_dir, tmp_path / "out", method="corpus", corpus=tmp_path / "missing.txt")
    (tmp_path / "empty.txt").write_text("\n  \n")
    with pytest.raises(BadInputError, match="holds no text"):
        distill(tiny_bert_dir, tmp_path / "out", method="corpus", corpus=tmp_path / "empty.txt")
    with pytest.raises(BadInputError, match=r"need.* a corpus"):
        distill(tiny_bert_dir, tmp_path / "out", method="corpus")
    with pytest.raises(BadInputError, match=r"need.* a corpus"):
        distill(tiny_bert_dir, tmp_path / "out", transform="whitening")
    with pytest.raises(BadInputError, match=r"need.* a corpus"):
        distill(tiny_bert_dir, tmp_path / "out", token_weights="usif")


@pytest.mark.usefixtures("no_model_loads")
@pytest.mark.parametrize("spec", ["flow", "normalize"])
def test_a_transform_that_cannot_fold_is_refused_by_name(
    tiny_bert_dir: Path, corpus_file: Path, tmp_path: Path, spec: str
) -> None:
    with pytest.raises(BadInputError, match=rf"cannot fold transform '{spec}'.*linear transforms are: whitening"):
        distill(tiny_bert_dir, tmp_path / "out", corpus=corpus_file, transform=spec)


@pytest.mark.usefixtures("no_model_loads")
def test_bad_options_fail_before_the_model_loads(tiny_bert_dir: Path, corpus_file: Path, tmp_path: Path) -> None:
    for options, message in [
        ({"method": "words"}, "unknown distill method"),
        ({"dims": 0}, "dims must be"),
        ({"sample": 0}, "sample must be"),
        ({"token_weights": "tfidf"}, "unknown token weights"),
        ({"pooling": "cls"}, "token weights apply inside the token mean"),
        ({"transform": "whitening-x"}, "unknown transform spec"),
    ]:
        with pytest.raises(BadInputError, match=message):
            distill(tiny_bert_dir, tmp_path / "out", corpus=corpus_file, **options)


def test_a_slow_tokenizer_is_refused_naming_what_is_needed(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model folder whose only tokenizer is a Python one (ProphetNet's WordPiece over the same vocabulary)."""
    slow = tmp_path / "slow-bert"
    shutil.copytree(tiny_bert_dir, slow)
    (slow / "tokenizer.json").unlink()
    shutil.copy(slow / "vocab.txt", slow / "prophetnet.tokenizer")
    config = json.loads((slow / "tokenizer_config.json").read_text())
    config.pop("backend", None)
    (slow / "tokenizer_config.json").write_text(json.dumps({**config, "tokenizer_class": "ProphetNetTokenizer"}))
    monkeypatch.setattr(distill_module, "Encoder", None)  # never reached
    with pytest.raises(
        BadInputError, match=r"ProphetNetTokenizer\) is a slow \(Python\) tokenizer.*needs a fast one"
    ):
        distill(slow, tmp_path / "out")


def test_counts_of_another_tokenizer_fail_before_the_model_loads(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = count_model_frequencies(tiny_bert_dir, CORPUS)
    foreign = TokenFrequencies(counts.counts, counts.n_texts, "another tokenizer", counts.special_ids, model="x")
    monkeypatch.setattr(distill_module, "Encoder", None)  # never reached
    with pytest.raises(BadInputError, match="counted with another tokenizer"):
        distill(tiny_bert_dir, tmp_path / "out", token_weights="sif", frequencies=foreign)


def test_a_table_too_large_for_memory_names_its_size_and_dims(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    weights = (tiny_bert_dir / "model.safetensors").stat().st_size
    # Room for the model and a 16-dimensional table of the 46 tokens, not the 32 asked for.
    monkeypatch.setattr(distill_module, "available_memory", lambda: weights + 3 * 46 * 20 * 4)
    with monkeypatch.context() as patch:
        patch.setattr(distill_module, "Encoder", None)  # never reached
        with pytest.raises(
            BadInputError,
            match=r"needs about [\d.]+ [KM]iB .*46 tokens x 32 dimensions.*--dims 16 \(about [\d.]+ [KM]iB\)",
        ) as caught:
            distill(tiny_bert_dir, tmp_path / "out", dims=32)
    assert "is available" in str(caught.value)
    assert distill(tiny_bert_dir, tmp_path / "out", dims=16).dim == 16


def test_an_existing_out_is_refused_unless_overwrite(tiny_bert_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "static"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    with pytest.raises(BadInputError, match="exists; pass overwrite"):
        distill(tiny_bert_dir, out, dims=4)
    assert (out / "mine.txt").read_text() == "keep me"
    distill(tiny_bert_dir, out, dims=4, overwrite=True)
    assert not (out / "mine.txt").exists()
    config = json.loads((out / "config.json").read_text())
    assert config["whitevec"]["method"] == "tokens" and config["whitevec"]["base_model_fingerprint"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no scratch or temporary left


def test_unused_and_added_tokens_get_no_vector() -> None:
    """Model2Vec's choice: no [unusedN], no added token but the unknown and padding ones."""
    from tokenizers.models import WordLevel

    vocab = {"[PAD]": 0, "[unused0]": 1, "[unused12]": 2, "word": 3, "[UNK]": 4, "[CLS]": 5, "other": 6, "x": 7}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.add_special_tokens(["[PAD]", "[UNK]", "[CLS]"])
    kept = kept_tokens(tokenizer, 7, keep=[0, 4])
    np.testing.assert_array_equal(kept, [True, False, False, True, True, False, True, False])


@pytest.mark.filterwarnings("ignore::whitevec.errors.WhitevecWarning")  # 32-d tiny model, 24 texts
def test_the_guide_snippet_runs(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The how-to's Python block, on the tiny BERT (all-MiniLM-L6-v2 takes minutes) and a small corpus."""
    from .test_readme_snippets import marked_block

    code, page = marked_block(
        "docs/how-to/static-encoders.md", "tests/test_distill.py::test_the_guide_snippet_runs"
    )
    assert '"all-MiniLM-L6-v2"' in code
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-texts.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    code = code.replace('"all-MiniLM-L6-v2"', repr(str(tiny_bert_dir)))
    exec(compile(code, str(page), "exec"), {"__name__": "__docs__"})
    assert capsys.readouterr().out.split()[:2] == ["46", "32"]  # the tiny model: 46 tokens, 32 dims (< 256)
    assert (tmp_path / "minilm-distilled-w" / "model.safetensors").is_file()


def test_the_guide_writes_each_folder_once_and_makes_its_inputs() -> None:
    """The how-to's commands, run in order, never write a folder twice (one name for three tables made the
    load step fail on the existing folder), and the corpus file exists before a command reads it."""
    from .test_readme_snippets import ROOT

    text = (ROOT / "docs" / "how-to" / "static-encoders.md").read_text(encoding="utf-8")
    written = re.findall(r"--out (\S+)", text) + re.findall(r'write_static_folder\(\s*"([^"]+)"', text)
    assert len(written) == len(set(written)), written
    redone = re.search(r'distill\("[^"]+", "([^"]+)"', text)
    assert redone is not None and redone.group(1) in written  # the Python block redoes a command, overwrite=True
    assert "> my-texts.txt" in text.split("whitevec distill all-MiniLM-L6-v2", 1)[0]


# --- the command -----------------------------------------------------------------------------------------------
def test_cli_distils_and_says_what_it_wrote(
    tiny_bert_dir: Path, corpus_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["distill", str(tiny_bert_dir), "--out", str(tmp_path / "static"), "--method", "corpus"]
    args += ["--corpus", str(corpus_file), "--dims", "none", "--transform", "whitening-8", "--quiet"]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert "32 x" not in err and "46 tokens x 8 (corpus, " in err and "whitening-8 folded" in err
    table = read_static_folder(tmp_path / "static")
    assert table.embeddings.shape == (46, 8) and table.normalize
    assert table.provenance["dims"] is None and table.provenance["sample"] == len(CORPUS)


@pytest.mark.usefixtures("no_model_loads")
def test_cli_bad_input_is_one_line_and_exit_2(
    tiny_bert_dir: Path, corpus_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args, message in [
        (["--method", "corpus", "--corpus", str(tmp_path / "none.txt")], "no corpus file at"),
        (["--dims", "many"], "--dims takes a number of dimensions or none"),
        (["--transform", "flow", "--corpus", str(corpus_file)], "cannot fold transform 'flow'"),
    ]:
        code, out, err = run_cli(["distill", str(tiny_bert_dir), "--out", str(tmp_path / "o"), *args], capsys)
        check_bad_input(code, out, err, message)


@pytest.mark.usefixtures("no_model_loads")
def test_cli_refuses_a_static_folder_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    static = tiny_static_folder(tmp_path / "static")
    code, out, err = run_cli(["distill", str(static), "--out", str(tmp_path / "o")], capsys)
    assert (code, out) == (2, "")
    assert err == f"whitevec: error: {static} is a static folder; distil from a transformers model\n"
    assert not (tmp_path / "o").exists()


def test_the_special_frame_is_what_the_tokenizer_adds_around_a_text() -> None:
    """Found by tokenizing a word with and without the special tokens: for a cased vocabulary whose unknown token
    is not the word's (the tiny test model's vocabulary hides a wrong probe word), two tokens before, one after;
    none for a tokenizer that adds none."""
    from tokenizers import models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    from whitevec.distill.token_table import special_frame

    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[LANG]": 3, "hello": 4}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    framed = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    assert special_frame(framed) == ([], [])
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] [LANG] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2), ("[LANG]", 3)]
    )
    framed = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    assert special_frame(framed) == ([1, 3], [2])


def test_a_token_seen_once_gets_its_contextual_mean(
    tiny_bert_dir: Path, raw_tables: dict[str, Any], tmp_path: Path
) -> None:
    """The corpus's tokens each appear many times; one text more brings a word the corpus lacks, once: it is
    counted as seen and its row is its one contextual vector, not its single-token row."""
    tokenizer, _ = _model(tiny_bert_dir)
    word = next(w for w in PROBES[-2].split() if not any(w in text.split() for text in CORPUS))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join([*CORPUS, f"{word} ."]) + "\n", encoding="utf-8")
    common: dict[str, Any] = {"dims": None, "token_weights": "none", "normalize": False}
    result = distill(tiny_bert_dir, tmp_path / "once", method="corpus", corpus=corpus, **common)
    assert result.n_seen == raw_tables["corpus-result"].n_seen + 1
    row = read_static_folder(result.path).embeddings[tokenizer.convert_tokens_to_ids(word)]
    single = raw_tables["tokens"].embeddings[tokenizer.convert_tokens_to_ids(word)]
    assert row.any() and not np.allclose(row, single, atol=1e-4)


def _word_level(vocab: dict[str, int]) -> Any:
    """A fast transformers tokenizer over ``vocab``, split on whitespace."""
    from tokenizers import models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")


def test_the_static_tokenizer_has_no_frame_padding_or_truncation() -> None:
    """The static tokenizer is the model's with no post-processor (a static text has no [CLS] or [SEP]), no
    padding and no truncation (the folder sets its own), every id kept; the model's tokenizer is not changed."""
    from tokenizers import processors

    from whitevec.distill.token_table import static_tokenizer

    model = _word_level({"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "[PAD]": 3, "hello": 4})
    backend = model.backend_tokenizer
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    backend.enable_truncation(3)
    backend.enable_padding(pad_id=3, pad_token="[PAD]", length=6)
    tokens = static_tokenizer(model, "m")
    assert (tokens.post_processor, tokens.truncation, tokens.padding) == (None, None, None)
    assert tokens.encode("hello hello hello hello").ids == [4, 4, 4, 4]
    assert tokens.get_vocab(with_added_tokens=True) == model.backend_tokenizer.get_vocab(with_added_tokens=True)
    assert model.backend_tokenizer.encode("hello").ids == [1, 4, 2, 3, 3, 3]  # the model's own, as it was


def test_the_static_tokenizer_refuses_a_slow_tokenizer_and_ids_with_gaps() -> None:
    """A fast tokenizer (one that does not say it is fast is refused whatever it carries), its whole message; and
    a row per id, so ids 0..n-1."""
    from types import SimpleNamespace

    from whitevec.distill.token_table import static_tokenizer

    slow_message = (
        "m's tokenizer (SimpleNamespace) is a slow (Python) tokenizer; a static encoder needs a fast one (the "
        "tokenizers library's: a tokenizer.json in the model folder). Add one (transformers' "
        "convert_slow_tokenizer converts many kinds) and distil again"
    )
    backend = _word_level({"[UNK]": 0, "hello": 1}).backend_tokenizer
    stand_ins = [
        SimpleNamespace(is_fast=False, backend_tokenizer=backend),
        SimpleNamespace(backend_tokenizer=backend),
    ]
    for slow in [*stand_ins, SimpleNamespace(is_fast=True), SimpleNamespace()]:
        with pytest.raises(BadInputError) as caught:
            static_tokenizer(slow, "m")
        assert str(caught.value) == slow_message
    with pytest.raises(BadInputError) as caught:
        static_tokenizer(_word_level({"[UNK]": 0, "hello": 2}), "m")
    assert str(caught.value) == "m's tokenizer has gaps in its token ids; a static table needs ids 0..n-1"


def test_an_added_token_past_the_vocabulary_is_kept_when_asked() -> None:
    """A padding token added after the vocabulary (as GPT-2's models add one) has its own row, kept when in
    ``keep``; another added token is not."""
    from tokenizers.models import WordLevel

    tokenizer = Tokenizer(WordLevel({"[UNK]": 0, "word": 1}, unk_token="[UNK]"))
    tokenizer.add_special_tokens(["[PAD]", "[NEW]"])
    np.testing.assert_array_equal(kept_tokens(tokenizer, 4, keep=[2]), [True, True, True, False])
    np.testing.assert_array_equal(kept_tokens(tokenizer, 4), [True, True, False, False])


def test_more_dims_than_the_model_keeps_all_rotated_with_a_warning_at_the_caller(
    tiny_bert_dir: Path, raw_tables: dict[str, Any], tmp_path: Path
) -> None:
    """``dims`` past the model's 32: all 32 kept, rotated, and one warning naming both, reported at the line that
    called distill; exactly 32 warns of nothing."""
    import warnings

    from whitevec.distill.token_table import TokenTable, reduce_table
    from whitevec.errors import WhitevecWarning

    with pytest.warns(WhitevecWarning) as caught:
        result = distill(tiny_bert_dir, tmp_path / "wide", dims=33, token_weights="none", normalize=False)
    assert [str(w.message) for w in caught] == [
        "dims 33 is more than the model's 32 dimensions: PCA keeps all 32 (rotated)"
    ]
    if "MUTANT_UNDER_TEST" not in os.environ:  # under mutmut, its trampolines are frames of the stack too
        assert (caught[0].filename, caught[0].lineno) == (__file__, _line_of("dims=33, token_weights"))
    table = read_static_folder(result.path).embeddings
    kept = [i for i in range(46) if i not in (2, 3, 4)]
    raw = raw_tables["tokens"].embeddings[kept].astype(np.float64)
    assert table.shape == (46, 32) and result.provenance["dims"] == 32
    np.testing.assert_allclose(table[kept].var(0).sum(), raw.var(0).sum(), rtol=1e-4)  # rotated: nothing lost
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        raw_table = TokenTable(np.asarray(raw, dtype=np.float32), np.ones(len(raw), dtype=bool), 0)
        assert reduce_table(raw_table, 32).shape == (len(raw), 32)


def _line_of(text: str) -> int:
    """The line of this file that holds ``text`` (once)."""
    lines = [n for n, line in enumerate(Path(__file__).read_text().splitlines(), 1) if text in line]
    assert len(lines) == 2, lines  # the call, and the search for it here
    return lines[0]
