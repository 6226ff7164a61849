"""The frequency link: how a token's norm depends on how often it occurs (Gao et al. 2019; Li et al. 2020).

Token frequencies are counted on a corpus with the model's own tokenizer (special tokens excluded, texts
truncated at the encoder's ``max_length`` so counts match the contextual occurrences). For every token type that
occurs, two norms are set against its count:

* static: the L2 norm of the token's row in the model's input (word) embedding matrix;
* contextual: the mean, over the type's occurrences in the corpus, of the L2 norm of its last-layer vector
  (``hidden_states[-1]``). The mean of norms, not the norm of the mean vector, so that averaging diverse
  contexts does not shrink the norms of frequent tokens.

Spearman's rho is computed over token types; mean norms are also reported by log-spaced frequency bucket. A bucket
counts only when it holds at least ``min_types_per_bucket`` types; with fewer than ``MIN_BUCKETS`` such buckets the
result sets ``buckets_ok = False`` and says why in ``message`` (the report prints it instead of a plot of noise).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.stats import spearmanr

from whitevec.encoders.token_weights import count_token_ids
from whitevec.errors import BadInputError
from whitevec.preflight import nonblank_texts

if TYPE_CHECKING:
    from whitevec.encoders.transformer import Encoder

MIN_BUCKETS = 3
DEFAULT_BUCKETS = 8
DEFAULT_MIN_TYPES = 20


@dataclass
class NormLink:
    """One kind of token norm (static or contextual) against token frequency."""

    kind: str
    spearman: float | None
    n_types: int
    bucket_means: list[float]
    bucket_types: list[int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FrequencyLink:
    """Token frequency against static and contextual token norms, over one corpus."""

    n_sentences: int
    n_tokens: int
    n_types: int
    static: NormLink
    contextual: NormLink
    bucket_ranges: list[tuple[float, float]]  # [low, high) count range of each kept bucket
    buckets_ok: bool
    message: str
    min_types_per_bucket: int
    # Per-type arrays for the plots (same order); left out of to_dict to keep the JSON small.
    token_ids: np.ndarray = field(repr=False, compare=False)
    counts: np.ndarray = field(repr=False, compare=False)
    static_norms: np.ndarray = field(repr=False, compare=False)
    contextual_norms: np.ndarray = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        skip = {"token_ids", "counts", "static_norms", "contextual_norms"}
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if key not in skip:
                out[key] = value
        return out


def _spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    value = float(spearmanr(x, y).statistic)
    return None if math.isnan(value) else value


def frequency_buckets(
    counts: np.ndarray, n_buckets: int = DEFAULT_BUCKETS, min_types: int = DEFAULT_MIN_TYPES
) -> tuple[list[tuple[float, float]], list[np.ndarray]]:
    """Log-spaced count buckets ``[low, high)`` over 1..max(counts); only those with >= ``min_types`` types.

    Returns the kept buckets' ranges and, for each, a boolean mask over ``counts``.
    """
    counts = np.asarray(counts)
    if counts.size == 0:
        return [], []
    edges = np.geomspace(1.0, float(counts.max()) + 1.0, n_buckets + 1)
    kept: list[tuple[float, float]] = []
    masks: list[np.ndarray] = []
    for low, high in itertools.pairwise(edges):
        mask = (counts >= low) & (counts < high)
        if mask.sum() >= min_types:
            kept.append((float(low), float(high)))
            masks.append(mask)
    return kept, masks


def token_norms(
    encoder: Encoder, texts: Sequence[str], batch_size: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per token type occurring in ``texts``: (ids, counts, static norms, mean contextual norms)."""
    import torch

    tokenizer = encoder.tokenizer
    model = encoder.model
    vocab = int(model.get_input_embeddings().weight.shape[0])
    counts = np.zeros(vocab, dtype=np.int64)
    counted = count_token_ids(tokenizer, texts, encoder.max_length)[:vocab]
    counts[: counted.size] = counted
    norm_sums = np.zeros(vocab, dtype=np.float64)
    size = batch_size or encoder.batch_size
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths batch with little padding
    with torch.inference_mode():
        for start in range(0, len(order), size):
            batch_texts = [texts[i] for i in order[start : start + size]]
            batch = tokenizer(
                batch_texts,
                padding=True,
                truncation=True,
                max_length=encoder.max_length,
                return_special_tokens_mask=True,
                return_tensors="pt",
            )
            special = batch.pop("special_tokens_mask").bool()
            batch = batch.to(encoder.device)
            outputs = model(**batch, output_hidden_states=True, return_dict=True)
            last = outputs.hidden_states[-1].float()
            keep = batch["attention_mask"].bool() & ~special.to(encoder.device)
            ids = batch["input_ids"][keep].cpu().numpy()
            norms = torch.linalg.vector_norm(last[keep], dim=-1).double().cpu().numpy()
            np.add.at(norm_sums, ids, norms)
        table = model.get_input_embeddings().weight.detach().float()
        static_all = torch.linalg.vector_norm(table, dim=-1).double().cpu().numpy()
    seen = np.flatnonzero(counts > 0)
    return seen, counts[seen], static_all[seen], norm_sums[seen] / counts[seen]


def frequency_link(
    encoder: Encoder,
    texts: Sequence[str],
    n_buckets: int = DEFAULT_BUCKETS,
    min_types_per_bucket: int = DEFAULT_MIN_TYPES,
    batch_size: int | None = None,
) -> FrequencyLink:
    """Spearman's rho of token frequency against static and contextual token norms, and bucket means."""
    texts = nonblank_texts(texts, "the frequency link needs a corpus with at least one non-empty text")
    if n_buckets < 1 or min_types_per_bucket < 1:
        raise BadInputError(
            f"n_buckets and min_types_per_bucket must be at least 1, got {n_buckets}, {min_types_per_bucket}"
        )
    ids, counts, static, contextual = token_norms(encoder, texts, batch_size)
    ranges, masks = frequency_buckets(counts, n_buckets, min_types_per_bucket)
    ok = len(ranges) >= MIN_BUCKETS
    if ok:
        message = (
            f"{len(ranges)} log-spaced frequency buckets with at least {min_types_per_bucket} token types each"
        )
    else:
        message = (
            f"corpus too small for frequency buckets: {int(counts.sum())} tokens of {len(ids)} types give "
            f"{len(ranges)} bucket(s) with at least {min_types_per_bucket} types (need {MIN_BUCKETS}); "
            "use a larger corpus (thousands of sentences) to see the frequency link"
        )

    def link(kind: str, norms: np.ndarray) -> NormLink:
        means = [float(norms[m].mean()) for m in masks] if ok else []
        sizes = [int(m.sum()) for m in masks] if ok else []
        return NormLink(kind, _spearman(counts.astype(np.float64), norms), len(ids), means, sizes)

    return FrequencyLink(
        n_sentences=len(texts),
        n_tokens=int(counts.sum()),
        n_types=len(ids),
        static=link("static", static),
        contextual=link("contextual", contextual),
        bucket_ranges=ranges if ok else [],
        buckets_ok=ok,
        message=message,
        min_types_per_bucket=min_types_per_bucket,
        token_ids=ids,
        counts=counts,
        static_norms=static,
        contextual_norms=contextual,
    )
