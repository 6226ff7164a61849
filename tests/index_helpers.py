"""Shared pieces for the index/retrieval tests (no tests here, hence no test_ prefix): a tiny BERT whose
tokenizer knows its words, and small synthetic corpora."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tests.conftest import VOCAB_WORDS, build_tiny_bert

# conftest's words minus "is"/"are": the corpora the index tests were written against.
WORDS = [word for word in VOCAB_WORDS if word not in {"is", "are"}]


def tiny_bert(folder: Path, hidden: int = 32) -> Path:
    """conftest's random BERT (its tokenizer knows the words of WORDS) in ``folder``."""
    return build_tiny_bert(folder, hidden=hidden)


def sentences(n: int, seed: int = 0, length: int = 7) -> list[str]:
    """``n`` distinct random sentences over the tiny vocabulary."""
    rng = np.random.default_rng(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        text = " ".join(rng.choice(WORDS, length))
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def tiny_cli_inputs(folder: Path) -> dict[str, Path]:
    """A tiny BERT, 39 scored pairs (``pairs``, TSV) and a 40-line ``corpus`` in ``folder``: what the CLI tests
    tune, evaluate and index."""
    texts = sentences(80, seed=5)
    pairs = folder / "dev.tsv"
    pairs.write_text("".join(f"{texts[i]}\t{texts[i + 1]}\t{i % 6}\n" for i in range(0, 78, 2)))
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(texts[:40]) + "\n")
    return {"bert": tiny_bert(folder / "bert"), "pairs": pairs, "corpus": corpus}


class HashEncoder:
    """A stand-in Encoder without torch: deterministic vectors from a hash of the text. Lets a child process
    start in about a second (the interrupted-build test); an ``EncoderLike``, which is all the index needs."""

    def __init__(self, dim: int = 16) -> None:
        self.dim = dim
        self.model_name = "hash-encoder"
        self.max_length = 64

    def describe(self) -> dict[str, object]:
        return {
            "model": self.model_name,
            "model_fingerprint": None,
            "pooling": "hash",
            "layers": [],
            "max_length": self.max_length,
            "dim": self.dim,
        }

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> np.ndarray:
        import hashlib

        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            rows.append(np.random.default_rng(seed).normal(size=self.dim) + 0.5)
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)
