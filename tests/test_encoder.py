"""Encoder and poolings on a tiny random BERT, checked against hidden states computed independently."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from tests.index_helpers import HashEncoder
from whitevec.encoders.pooling import POOLINGS, get_pooling
from whitevec.encoders.protocol import EncoderLike
from whitevec.encoders.transformer import Encoder
from whitevec.errors import BadInputError

TEXTS = [
    "a man is playing guitar .",
    "the dog",
    "a woman is eating food in the street and a boy is running",
    "",
    "cat",
]


@functools.cache
def _reference_model(folder: Path) -> tuple[Any, Any]:
    return AutoTokenizer.from_pretrained(str(folder)), AutoModel.from_pretrained(str(folder)).eval()


def reference_hidden(folder: Path, text: str) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
    """hidden_states and pooler output of one unpadded text, straight from transformers."""
    tokenizer, model = _reference_model(folder)
    with torch.no_grad():
        out = model(**tokenizer([text], return_tensors="pt"), output_hidden_states=True)
    return tuple(h[0] for h in out.hidden_states), out.pooler_output[0]


# name -> function of (hidden_states of one text, pooler output) giving the expected vector
EXPECTED = {
    "cls": lambda hs, pooler: hs[-1][0],
    "pooler": lambda hs, pooler: pooler,
    "last-avg": lambda hs, pooler: hs[-1].mean(0),
    "first-last-avg": lambda hs, pooler: (hs[1].mean(0) + hs[-1].mean(0)) / 2,
    "embeddings-last-avg": lambda hs, pooler: (hs[0].mean(0) + hs[-1].mean(0)) / 2,
    "last2avg": lambda hs, pooler: (hs[-2].mean(0) + hs[-1].mean(0)) / 2,
    "embeddings-avg": lambda hs, pooler: hs[0].mean(0),
    "0,2": lambda hs, pooler: (hs[0].mean(0) + hs[2].mean(0)) / 2,
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_pooling_matches_hidden_states(tiny_bert_dir: Path, name: str) -> None:
    encoder = Encoder(tiny_bert_dir, pooling=name, batch_size=2, cache=False)
    got = encoder.encode(TEXTS)
    for row, text in zip(got, TEXTS, strict=True):
        hidden, pooler = reference_hidden(tiny_bert_dir, text)
        want = EXPECTED[name](hidden, pooler).numpy()
        np.testing.assert_allclose(row, want, atol=1e-5, rtol=1e-4)


def test_every_named_pooling_is_tested() -> None:
    # "model" (a folder's sentence-transformers modules) is checked against sentence-transformers itself in
    # tests/test_sentence_transformers.py.
    assert set(POOLINGS) - {"model"} <= set(EXPECTED)


def test_layer_indices_in_names() -> None:
    assert get_pooling("first-last-avg").layers == (1, -1)
    assert get_pooling("embeddings-last-avg").layers == (0, -1)
    assert get_pooling("last2avg").layers == (-2, -1)
    assert get_pooling("embeddings-avg").layers == (0,)
    assert get_pooling([2, -1]).layers == (2, -1)
    assert get_pooling("2,-1").name == "layers:2,-1"


def test_output_shape_order_dtype_and_determinism(tiny_bert_dir: Path) -> None:
    encoder = Encoder(tiny_bert_dir, pooling="last-avg", batch_size=2, cache=False)
    first = encoder.encode(TEXTS)
    assert first.dtype == np.float32 and first.shape == (len(TEXTS), 32)
    np.testing.assert_array_equal(first, encoder.encode(TEXTS))
    # order kept: reversed input gives reversed rows (batches are sorted internally by length)
    np.testing.assert_allclose(encoder.encode(TEXTS[::-1]), first[::-1], atol=1e-6)


def test_padding_is_masked_out(tiny_bert_dir: Path) -> None:
    encoder = Encoder(tiny_bert_dir, pooling="first-last-avg", batch_size=8, cache=False)
    together = encoder.encode(TEXTS)
    alone = np.stack([encoder.encode([t])[0] for t in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_empty_inputs_and_bad_types(tiny_bert_dir: Path) -> None:
    encoder = Encoder(tiny_bert_dir, pooling="cls", cache=False)
    assert encoder.encode([]).shape == (0, 32)
    assert np.isfinite(encoder.encode([""])).all()
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        encoder.encode(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="single string"):
        encoder.encode("not a list")


def test_unknown_pooling_lists_valid_ones(tiny_bert_dir: Path) -> None:
    with pytest.raises(BadInputError, match="first-last-avg"):
        Encoder(tiny_bert_dir, pooling="mean-of-everything", cache=False)
    with pytest.raises(BadInputError, match="hidden_states"):
        Encoder(tiny_bert_dir, pooling="0,7", cache=False)


def test_overlong_text_truncated_with_one_warning(tiny_bert_dir: Path) -> None:
    encoder = Encoder(tiny_bert_dir, pooling="last-avg", max_length=8, cache=False)
    long_text = " ".join(["dog"] * 40)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vectors = encoder.encode([long_text, long_text + " cat", "a cat"])
    truncation = [w for w in caught if "truncated" in str(w.message)]
    assert len(truncation) == 1 and "2 of 3" in str(truncation[0].message)
    assert np.isfinite(vectors).all()


def test_disk_cache_makes_second_encode_free(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoder = Encoder(tiny_bert_dir, pooling="first-last-avg", cache=tmp_path)
    first = encoder.encode(TEXTS)
    calls = []
    monkeypatch.setattr(encoder, "_forward", lambda *a, **k: calls.append(a) or {})
    np.testing.assert_array_equal(encoder.encode(TEXTS), first)
    assert calls == []
    # a fresh encoder with the same settings reads the same cache
    again = Encoder(tiny_bert_dir, pooling="first-last-avg", cache=tmp_path)
    monkeypatch.setattr(again, "_forward", lambda *a, **k: calls.append(a) or {})
    np.testing.assert_array_equal(again.encode(TEXTS[:2]), first[:2])
    assert calls == []


def test_cache_is_keyed_by_pooling_and_max_length(tiny_bert_dir: Path, tmp_path: Path) -> None:
    last = Encoder(tiny_bert_dir, pooling="last-avg", cache=tmp_path).encode(TEXTS)
    first_last = Encoder(tiny_bert_dir, pooling="first-last-avg", cache=tmp_path).encode(TEXTS)
    assert not np.allclose(last, first_last)
    short = Encoder(tiny_bert_dir, pooling="last-avg", max_length=4, cache=tmp_path).encode(TEXTS)
    assert not np.allclose(short[2], last[2])  # the long text differs once truncated


def test_encode_poolings_one_pass_equals_separate(tiny_bert_dir: Path) -> None:
    encoder = Encoder(tiny_bert_dir, pooling="cls", cache=False)
    many = encoder.encode_poolings(TEXTS, ["cls", "last-avg", "0,-1"])
    for name, spec in (("cls", "cls"), ("last-avg", "last-avg"), ("layers:0,-1", "0,-1")):
        np.testing.assert_allclose(many[name], encoder.with_pooling(spec).encode(TEXTS), atol=1e-6)


@pytest.mark.model
def test_default_model_matches_sentence_transformers_mean_pooling(minilm_dir: Path) -> None:
    """all-MiniLM-L6-v2 with last-avg is sentence-transformers' own (mean) pooling before its Normalize."""
    encoder = Encoder("all-MiniLM-L6-v2", pooling="last-avg", cache=False)
    assert encoder.dim == 384
    texts = ["A girl is styling her hair.", "A group of men play soccer on the beach.", ""]
    ours = encoder.encode(texts)
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_dir))
    model = AutoModel.from_pretrained(str(minilm_dir)).eval()
    for row, text in zip(ours, texts, strict=True):
        with torch.no_grad():
            hidden = model(**tokenizer([text], return_tensors="pt")).last_hidden_state[0]
        np.testing.assert_allclose(row, hidden.mean(0).numpy(), atol=1e-5)


def test_pooler_pooling_needs_a_model_with_a_pooler(tiny_bert_dir: Path, tmp_path: Path) -> None:
    import shutil

    from transformers import DistilBertConfig, DistilBertModel

    folder = tmp_path / "distilbert"  # no pooler layer in this architecture
    folder.mkdir()
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tiny_bert_dir / name).is_file():
            shutil.copy(tiny_bert_dir / name, folder / name)
    config = DistilBertConfig(vocab_size=100, dim=32, n_layers=1, n_heads=4, hidden_dim=64)
    DistilBertModel(config).save_pretrained(str(folder))
    with pytest.raises(BadInputError, match="pooler layer"):
        Encoder(folder, pooling="pooler", cache=False)
    encoder = Encoder(folder, pooling="cls", cache=False)
    with pytest.raises(BadInputError, match="pooler layer"):
        encoder.with_pooling("pooler")
    with pytest.raises(BadInputError, match="pooler layer"):
        encoder.encode_poolings(["a dog"], ["cls", "pooler"])
    assert encoder.encode(["a dog"]).shape == (1, 32)


def test_close_closes_the_shared_vector_caches_and_encode_reopens_them(
    tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Encoder(tiny_bert_dir, pooling="last-avg", cache=tmp_path) as encoder:
        by_cls = encoder.with_pooling("cls")
        uncached = encoder.without_cache()
        expected = encoder.encode(TEXTS), by_cls.encode(TEXTS)
        caches = list(encoder._caches.values())
        assert len(caches) == 2 and all(cache.enabled for cache in caches)
        uncached.close()  # holds no cache: the others stay open
        assert all(cache.enabled for cache in caches)
        by_cls.close()  # shared: closing the derived encoder closes the parent's caches too
        assert not any(cache.enabled for cache in caches)
        # Both keep working, from the reopened cache files (no forward pass).
        monkeypatch.setattr(encoder, "_forward", lambda *a, **k: pytest.fail("encoded instead of reading"))
        monkeypatch.setattr(by_cls, "_forward", lambda *a, **k: pytest.fail("encoded instead of reading"))
        np.testing.assert_array_equal(encoder.encode(TEXTS), expected[0])
        np.testing.assert_array_equal(by_cls.encode(TEXTS), expected[1])
        reopened = list(encoder._caches.values())
        assert len(reopened) == 2 and all(cache.enabled for cache in reopened)
    assert not any(cache.enabled for cache in reopened)  # leaving the with block closed them


def test_the_encoder_is_encoder_like(tiny_bert_dir: Path) -> None:
    encoder = Encoder(tiny_bert_dir, pooling="cls", cache=False)
    assert isinstance(encoder, EncoderLike)
    assert {"model", "pooling", "max_length", "dim"} <= set(encoder.describe())
    assert not isinstance(object(), EncoderLike)


def test_the_tests_hash_encoder_is_encoder_like() -> None:
    encoder = HashEncoder(dim=8)
    assert isinstance(encoder, EncoderLike)
    assert encoder.encode(("a dog", "a cat")).shape == (2, 8)  # any sequence of texts, as the protocol says
