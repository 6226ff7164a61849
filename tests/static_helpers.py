"""Shared pieces for the static encoder tests (no tests here, hence no test_ prefix): a tiny static table over
conftest's vocabulary, built with tokenizers alone (no transformers, no torch), and a reference sentence vector
computed the slow, obvious way."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

from tests.conftest import _VOCAB
from whitevec.encoders.static_format import StaticTable, write_static_folder


def tiny_tokenizer(vocab: Sequence[str] = _VOCAB) -> Tokenizer:
    """A BERT-style WordPiece tokenizer over conftest's tiny vocabulary, or ``vocab`` (what BertTokenizerFast
    builds)."""
    tokenizer = Tokenizer(models.WordPiece({token: i for i, token in enumerate(vocab)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    return tokenizer


def tiny_table(
    dim: int = 8,
    *,
    normalize: bool = True,
    max_length: int | None = 6,
    seed: int = 0,
    vocab: Sequence[str] = _VOCAB,
    **provenance: Any,
) -> StaticTable:
    rng = np.random.default_rng(seed)
    embeddings = rng.normal(size=(len(vocab), dim)).astype(np.float32)
    return StaticTable(embeddings, tiny_tokenizer(vocab), normalize, max_length, dict(provenance))


def tiny_static_folder(folder: Path, **options: Any) -> Path:
    """A tiny static encoder folder (see ``tiny_table`` for the options)."""
    return write_static_folder(folder, tiny_table(**options))


def tiny_static_index(folder: Path) -> Path:
    """``folder``/idx: an index (transform none) of 80 synthetic sentences by a tiny static encoder. For tests of
    what runs around a search (output, processes): a child process searching or serving it imports no torch
    (2 s of CPU against 8 s with the tiny BERT)."""
    from tests.test_evaluation import synthetic_task
    from whitevec.cli import main

    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(synthetic_task(n_pairs=40, subsets=1).sentences("target")) + "\n")
    argv = ["index", "build", "--corpus", str(corpus), "--out", str(folder / "idx"), "--transform", "none"]
    assert main([*argv, "--model", str(tiny_static_folder(folder / "static")), "--no-cache", "-q"]) == 0
    return folder / "idx"


def reference_vectors(table: StaticTable, texts: Sequence[str], *, cut_characters: bool = True) -> np.ndarray:
    """Model2Vec's sentence vectors, one text at a time: the text cut to max_length x the vocabulary's median
    token length in characters (``cut_characters``), tokens without special ones, the first max_length, unknown
    tokens dropped, the plain mean of their rows (zeros for none), L2-normalised if asked."""
    unk = table.tokenizer.token_to_id("[UNK]")
    median = int(np.median([len(token) for token in table.tokenizer.get_vocab()]))
    rows = []
    for text in texts:
        if cut_characters and table.max_length is not None:
            text = text[: table.max_length * median]
        ids = table.tokenizer.encode(text, add_special_tokens=False).ids
        ids = [i for i in ids[: table.max_length] if i != unk]
        vector = table.embeddings[ids].astype(np.float64).mean(axis=0) if ids else np.zeros(table.dim)
        if table.normalize and ids:
            vector = vector / np.linalg.norm(vector)
        rows.append(vector)
    return np.asarray(rows, dtype=np.float32)
