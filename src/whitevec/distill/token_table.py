"""A static table's raw token vectors, made with an Encoder, and what reads them: the static tokenizer and PCA
over the rows (the static sentence mean is the static encoder's, :func:`whitevec.encoders.static.static_mean`).

Two ways to give each vocabulary token a vector:

``single_token_table``  Model2Vec 0.10's distill: each token alone between the model's special tokens (``[CLS]
                        t [SEP]``, ``<s> t </s>``: what the tokenizer adds around a text) through the model,
                        pooled by the encoder's pooling over all the positions (Model2Vec: the last layer's
                        mean, ``last-avg``), 256 tokens a batch.
``corpus_table``        the mean of each token's contextual vectors (the pooling's layers at that position;
                        special tokens never) over the texts given; a token they never show gets its
                        single-token vector.

Model2Vec's distill gives no vector to tokens named ``[unusedN]`` (its ``token_remove_pattern``) nor to added
tokens other than the unknown and padding ones ([CLS], [SEP], [MASK]: no text brings them in once the
post-processor is gone); neither does this, nor to ids past the model's embedding matrix. Their rows stay zero
and no fit sees them. Model2Vec deletes them from the vocabulary instead; here the tokenizer is kept whole, so
every id means what it meant to the model.

The raw table (vocabulary x the model's width, float32; for ``corpus`` also float64 sums) is a memory map in
a scratch folder, so memory holds only the table at its final width.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from whitevec.encoders.transformer import Encoder
from whitevec.errors import BadInputError, WhitevecWarning
from whitevec.transforms.whitening import Whitening
from whitevec.utils.progress import progress_bar

UNUSED_TOKEN = re.compile(r"\[unused\d+\]")  # Model2Vec's token_remove_pattern
SINGLE_TOKEN_BATCH = 256  # Model2Vec's batch of single tokens
_ID_CHUNK = 4096  # token ids per call to the encoder: bounds the memory of one chunk's vectors


@dataclass(frozen=True)
class TokenTable:
    """Raw token vectors: ``vectors`` float32 [vocab, model width] (a memory map), ``kept`` the rows that
    count, ``n_seen`` the tokens given a contextual mean (0 for single tokens)."""

    vectors: np.ndarray
    kept: np.ndarray
    n_seen: int

    @property
    def vocab_size(self) -> int:
        return int(self.vectors.shape[0])


def static_tokenizer(tokenizer: Any, model: str) -> Tokenizer:
    """The model's fast tokenizer as a static encoder runs it: no padding, no truncation, no post-processor
    (a static sentence has no [CLS] or [SEP]); the model's lower-casing kept. Refuses a slow tokenizer and a
    vocabulary whose ids have holes (a table row per id)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if not getattr(tokenizer, "is_fast", False) or backend is None:
        raise BadInputError(
            f"{model}'s tokenizer ({type(tokenizer).__name__}) is a slow (Python) tokenizer; a static encoder "
            "needs a fast one (the tokenizers library's: a tokenizer.json in the model folder). Add one "
            "(transformers' convert_slow_tokenizer converts many kinds) and distil again"
        )
    out = Tokenizer.from_str(backend.to_str())
    out.no_truncation()
    out.no_padding()
    out.post_processor = None
    ids = sorted(out.get_vocab(with_added_tokens=True).values())
    if ids != list(range(len(ids))):
        raise BadInputError(f"{model}'s tokenizer has gaps in its token ids; a static table needs ids 0..n-1")
    return out


def kept_tokens(tokenizer: Tokenizer, model_vocab_size: int, keep: Collection[int] = ()) -> np.ndarray:
    """Per id, whether the token gets a vector, as Model2Vec's distill chooses: not ``[unusedN]``, not an added
    token ([CLS], [SEP], [MASK], ...) unless in ``keep`` (the unknown and padding tokens, which Model2Vec keeps),
    and within the model's embedding matrix."""
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    added = {int(i) for i in tokenizer.get_added_tokens_decoder()} - {int(i) for i in keep}
    kept = np.zeros(size, dtype=bool)
    for token, index in tokenizer.get_vocab(with_added_tokens=True).items():
        kept[index] = index < model_vocab_size and index not in added and UNUSED_TOKEN.fullmatch(token) is None
    return kept


def special_frame(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The ids the tokenizer puts before and after a text's own (``[CLS]`` / ``[SEP]``)."""
    plain = tokenizer("hello", add_special_tokens=False)["input_ids"]
    framed = tokenizer("hello", add_special_tokens=True)["input_ids"]
    for start in range(len(framed) - len(plain) + 1):
        if framed[start : start + len(plain)] == plain:
            return list(framed[:start]), list(framed[start + len(plain) :])
    return [], []


def single_token_table(encoder: Encoder, tokenizer: Tokenizer, scratch: Path, show: bool | None) -> TokenTable:
    """Model2Vec's token vectors: each kept token alone through the model (see the module docstring)."""
    kept = _kept(encoder, tokenizer)
    vectors = _spill(scratch / "tokens.npy", (kept.size, encoder.dim), np.float32)
    _single_token_rows(encoder, np.flatnonzero(kept), vectors, show)
    return TokenTable(vectors, kept, 0)


def corpus_table(
    encoder: Encoder, tokenizer: Tokenizer, texts: Sequence[str], scratch: Path, show: bool | None
) -> TokenTable:
    """Each kept token's mean contextual vector over ``texts``; its single-token vector when never seen."""
    kept = _kept(encoder, tokenizer)
    vectors = _spill(scratch / "tokens.npy", (kept.size, encoder.dim), np.float32)
    sums = _spill(scratch / "sums.npy", (kept.size, encoder.dim), np.float64)
    counts = np.zeros(kept.size, dtype=np.int64)
    for batch, ids in encoder.token_vectors(list(texts), show_progress=show):
        order = np.argsort(ids, kind="stable")
        unique, starts, repeats = np.unique(ids[order], return_index=True, return_counts=True)
        sums[unique] += np.add.reduceat(batch[order].astype(np.float64), starts, axis=0)
        counts[unique] += repeats
    seen = np.flatnonzero((counts > 0) & kept)
    for start in range(0, seen.size, _ID_CHUNK):
        rows = seen[start : start + _ID_CHUNK]
        vectors[rows] = sums[rows] / counts[rows, None]
    _single_token_rows(encoder, np.flatnonzero(kept & (counts == 0)), vectors, show)
    return TokenTable(vectors, kept, int(seen.size))


def _single_token_rows(encoder: Encoder, ids: np.ndarray, out: np.ndarray, show: bool | None) -> None:
    """``out[ids]``: each token id alone between the model's special tokens, through ``encoder``."""
    prefix, suffix = special_frame(encoder.tokenizer)
    batch = max(SINGLE_TOKEN_BATCH, encoder.batch_size)
    with progress_bar(ids.size, show, f"single tokens through {encoder.model_path.name}") as bar:
        task = bar.add_task("tokens", total=ids.size) if bar is not None else None
        for start in range(0, ids.size, _ID_CHUNK):
            chunk = ids[start : start + _ID_CHUNK]
            out[chunk] = encoder.encode_ids([[*prefix, int(i), *suffix] for i in chunk], batch)
            if bar is not None and task is not None:
                bar.advance(task, chunk.size)


def _kept(encoder: Encoder, tokenizer: Tokenizer) -> np.ndarray:
    """:func:`kept_tokens` for ``encoder``'s model, keeping its unknown and padding tokens."""
    keep = [i for i in (encoder.tokenizer.unk_token_id, encoder.tokenizer.pad_token_id) if i is not None]
    return kept_tokens(tokenizer, int(encoder.model.get_input_embeddings().weight.shape[0]), keep)


def _spill(path: Path, shape: tuple[int, int], dtype: type) -> np.ndarray:
    """A zero-filled array backed by ``path`` (a .npy memory map)."""
    return np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)


def reduce_table(raw: TokenTable, dims: int | None) -> np.ndarray:
    """The table in memory, float32: PCA to ``dims`` fitted on the kept rows (centred, as Model2Vec's; more
    dims than the model's keeps them all, rotated, with a warning), or the raw rows for None. Rows not kept
    stay zero."""
    width = raw.vectors.shape[1]
    if dims is None:
        table = np.array(raw.vectors, dtype=np.float32)
    else:
        if dims > width:
            warnings.warn(
                f"dims {dims} is more than the model's {width} dimensions: PCA keeps all {width} (rotated)",
                WhitevecWarning,
                stacklevel=4,  # distill's caller (distill -> _token_rows -> here)
            )
        pca = Whitening(n_components=min(dims, width), gamma=0.0)
        table = pca.fit(raw.vectors, sample_weight=raw.kept.astype(np.float64)).transform(raw.vectors)
    table[~raw.kept] = 0.0
    return table
