"""Fast paths give the same answers as the exact ones, within stated tolerances.

* Whitening(precision="float32"): float32 GEMMs for the moments (and the transform). On float32 data whose
  covariance has condition number ~1e3 (like sentence vectors), the covariance matches the float64 path to
  1e-5 of its largest entry and the whitened vectors' dot products to 1e-4 relative.
* Encoder(backend="int8"): dynamic int8 linear layers. Vectors stay within cosine 0.99 (mean) of the float
  encoder's on a tiny random BERT; they live in their own cache namespace and describe() says so.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from whitevec.encoders.transformer import Encoder
from whitevec.errors import BadInputError
from whitevec.transforms import Whitening


def sentence_like(n: int = 20_000, d: int = 64, seed: int = 0) -> np.ndarray:
    """float32 vectors with a large mean, a few dominant directions and a tail: covariance condition ~1e3."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, d)).astype(np.float32)
    scales = np.geomspace(1.0, 0.03, d).astype(np.float32)
    mix = (rng.standard_normal((4, d)) * 0.3).astype(np.float32)
    X: np.ndarray = z * scales + z[:, :4] @ mix + (rng.standard_normal(d) * 5).astype(np.float32)
    return X


def test_float32_moments_match_float64() -> None:
    X = sentence_like()
    exact = Whitening().fit(X)
    fast = Whitening(precision="float32").fit(X)
    cov = exact.covariance_
    assert np.linalg.cond(cov) > 500  # the data is meant to be anisotropic
    np.testing.assert_allclose(fast.mean_, exact.mean_, rtol=0, atol=1e-6 * np.abs(exact.mean_).max())
    np.testing.assert_allclose(fast.covariance_, cov, rtol=0, atol=1e-5 * np.abs(cov).max())
    held_out = sentence_like(n=500, seed=1)
    Z_exact = exact.transform(held_out).astype(np.float64)
    Z_fast = fast.transform(held_out).astype(np.float64)
    gram_exact, gram_fast = Z_exact @ Z_exact.T, Z_fast @ Z_fast.T
    assert np.abs(gram_fast - gram_exact).max() <= 1e-4 * np.abs(gram_exact).max()


def test_float32_streaming_equals_one_shot() -> None:
    X = sentence_like(n=3000)
    one = Whitening(precision="float32").fit(X)
    stream = Whitening(precision="float32")
    for a, b in itertools.pairwise([0, 1, 10, 700, 701, 2999, 3000]):
        stream.partial_fit(X[a:b])
    assert stream.n_samples_seen_ == 3000
    cov = one.covariance_
    np.testing.assert_allclose(stream.covariance_, cov, rtol=0, atol=1e-5 * np.abs(cov).max())
    np.testing.assert_allclose(stream.mean_, one.mean_, rtol=0, atol=1e-5)


def test_float32_transform_matches_float64_transform() -> None:
    X = sentence_like(n=5000)
    exact = Whitening().fit(X)
    fast = Whitening(precision="float32")
    fast._set_state(*exact._get_state())  # same fitted moments; only the transform arithmetic differs
    np.testing.assert_allclose(fast.transform(X), exact.transform(X), rtol=0, atol=1e-4)


def test_float64_path_is_the_default_and_bad_precision_fails() -> None:
    assert Whitening().precision == "float64"
    with pytest.raises(BadInputError, match="precision"):
        Whitening(precision="float16").fit(sentence_like(n=100))


SENTENCES = [
    "a man is playing the guitar .",
    "the girl is brushing her hair",
    "a dog is running on the street !",
    "the woman is eating food .",
    "a small red car and a big blue car",
    "the cat is playing the piano",
]


def test_int8_encoder_agrees_with_float(tiny_bert_dir: Path, tmp_path: Path) -> None:
    exact = Encoder(tiny_bert_dir, pooling="first-last-avg", cache=tmp_path)
    fast = Encoder(tiny_bert_dir, pooling="first-last-avg", cache=tmp_path, backend="int8")
    a, b = exact.encode(SENTENCES), fast.encode(SENTENCES)
    assert b.dtype == np.float32 and b.shape == a.shape
    cos = np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cos.mean() >= 0.99 and cos.min() >= 0.98, cos
    assert not np.array_equal(a, b)  # it really is another computation
    assert exact.describe()["backend"] == "torch" and fast.describe()["backend"] == "int8"
    # Separate cache namespaces: a cached float vector is never served to the int8 encoder, or back.
    assert exact._cache_for(exact.pooling).path != fast._cache_for(fast.pooling).path  # type: ignore[union-attr]
    np.testing.assert_array_equal(fast.encode(SENTENCES), b)
    np.testing.assert_array_equal(exact.encode(SENTENCES), a)


def test_bf16_warns_on_a_cpu_without_bfloat16(tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from whitevec.errors import WhitevecWarning

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    with pytest.warns(WhitevecWarning, match="emulated"):
        Encoder(tiny_bert_dir, cache=False, backend="bf16", device="cpu")


def test_unknown_backend_fails(tiny_bert_dir: Path) -> None:
    with pytest.raises(BadInputError, match="backend"):
        Encoder(tiny_bert_dir, cache=False, backend="onnx")


def test_empty_partial_fit_leaves_state_alone() -> None:
    X = sentence_like(n=200)
    w = Whitening(precision="float32").partial_fit(X[:0]).partial_fit(X)
    np.testing.assert_allclose(w.mean_, X.mean(axis=0, dtype=np.float64), rtol=0, atol=1e-5)


def test_bf16_pads_batches_to_a_multiple_of_eight(tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import whitevec.encoders.compute as compute_module

    texts = [" ".join(["word"] * n) for n in (1, 2, 3, 5, 9, 13, 21, 27)]
    encoder = Encoder(tiny_bert_dir, cache=False, backend="bf16", device="cpu")
    seen: list[int] = []
    forward = encoder.model.forward

    def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(int(kwargs["input_ids"].shape[1]))
        return forward(*args, **kwargs)

    monkeypatch.setattr(encoder.model, "forward", recording)
    rounded = encoder.encode(texts)
    assert seen and all(length % compute_module.BF16_LENGTH_MULTIPLE == 0 for length in seen), seen
    seen.clear()
    monkeypatch.setattr(compute_module, "BF16_LENGTH_MULTIPLE", 1)
    exact = encoder.encode(texts)
    assert any(length % 8 for length in seen)  # unrounded, the lengths are the texts' own
    cosine = (rounded * exact).sum(1) / np.linalg.norm(rounded, axis=1) / np.linalg.norm(exact, axis=1)
    assert cosine.min() > 0.999  # padding is masked out: only bf16's rounding differs


def test_forward_overhead_trades_padding_for_passes() -> None:
    from whitevec.encoders.compute import length_batches

    lengths = [40, 38, 30, 22, 20, 12, 10, 8, 6, 4]
    cheap_passes = length_batches(lengths, 64, overhead_tokens=8)
    dear_passes = length_batches(lengths, 64, overhead_tokens=400)
    assert len(cheap_passes) > len(dear_passes) == 1
    for cuts in (cheap_passes, dear_passes):
        assert cuts[0][0] == 0 and cuts[-1][1] == len(lengths)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(cuts))
