"""The settings and fixtures of the scale benchmarks, shared with their page (pages/scale.py) and with the
investigations that repeat their runs (the Ray timeline and padding, the rescoring reader).

- The Ray engine's cost (bench_scale.py): one corpus, model, transform and batch for the local and the Ray build;
  ``write_corpus`` writes that corpus.
- 1-bit codes at 1M vectors (bench_binary.py): the indexes, their training sample and rescoring multipliers;
  ``RowEncoder`` and ``build_row_index`` make a real whitevec index of precomputed rows, no model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# ---- the Ray engine's cost (bench_scale.py) --------------------------------------------------------------------
MODEL = "all-MiniLM-L6-v2"
POOLING = "last-avg"
TRANSFORM = "whitening-256"
BATCH = 64
MAX_LENGTH = 256
CPUS = 2
DIMS = [384, 256, 128]  # the plan's Milvus memory, by vector size
CASE_COPIES: list[Callable[[str], str]] = [str, str.lower, str.upper, str.swapcase]


def write_corpus(path: Path, max_docs: int, repeats: int = 1) -> int:
    """The unique STS sentences (at most ``max_docs``) as JSONL, then up to 3 more copies in other letter cases
    (lower, upper, swapped; a copy equal to a text already written is left out): a larger corpus of the same
    token sequences (the model's tokenizer lower-cases), so that a build's fixed costs can be told from its
    rate. Copies must differ as text, since the encoder encodes a text once per call. Returns the rows."""
    from whitevec.datasets import load_sts_task

    seen: dict[str, None] = {}
    for task in ("stsb", "sts12", "sts13", "sts14", "sts15"):
        try:
            loaded = load_sts_task(task)
        except Exception:  # a task missing from the data folder: use the others
            continue
        for split in ("train", "validation", "test", "target"):
            try:
                for text in loaded.sentences(split):
                    seen.setdefault(" ".join(text.split()), None)
            except Exception:
                continue
    texts = [t for t in seen if t][:max_docs]
    if not 1 <= repeats <= len(CASE_COPIES):
        raise ValueError(f"repeats must be 1 to {len(CASE_COPIES)}, not {repeats}")
    written: set[str] = set()
    with open(path, "w", encoding="utf-8") as handle:
        for k, copy in enumerate(CASE_COPIES[:repeats]):
            for i, text in enumerate(texts):
                variant = copy(text)
                if variant not in written:
                    written.add(variant)
                    handle.write(json.dumps({"id": f"s{i}" if k == 0 else f"s{i}-{k}", "text": variant}) + "\n")
    return len(written)


# ---- 1-bit codes at 1M vectors (bench_binary.py) ---------------------------------------------------------------
K = 10
DIM = 768
TRAIN_SAMPLE = 100_000
MULTIPLIERS = (1, 2, 4, 10)
# name -> encoding (flat kind); a "+rescore" index is searched at every multiplier (recall and rescore parts).
# Left out at 1M: ITQ (its training, PCA then 50 rotations of the sample, is the slow part of a build; it ranks
# no better than binary-rr on Cranfield) and RaBitQ with float queries (faiss scans its codes with a float query
# without SIMD: over 25 minutes for 1,000 queries on 2 shared cores; on Cranfield it ranks as 4-bit queries do).
INDEXES = {
    "float32": "float32",
    "binary": "binary",
    "binary-rr": "binary-rr",
    "rabitq": "rabitq",
    "binary-rr+rescore": "binary-rr+rescore=4",
    "rabitq+rescore": "rabitq+rescore=4",
}
TIMED = ("float32", "binary-rr", "rabitq", "binary-rr+rescore", "rabitq+rescore")


class RowEncoder:
    """An ``EncoderLike`` over precomputed rows: the text ``str(i)`` is row ``i`` (no model; the benchmark is
    about the index). The whole corpus in order comes back without a copy."""

    def __init__(self, rows: np.ndarray | None, dim: int = DIM) -> None:
        self.rows = rows
        self.dim = dim

    def describe(self) -> dict[str, Any]:
        return {"model": "synthetic-rows", "pooling": "none", "max_length": 1, "dim": self.dim}

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> np.ndarray:
        assert self.rows is not None, "a loaded index only searches vectors"
        if len(texts) == len(self.rows) and texts[0] == "0" and texts[-1] == str(len(self.rows) - 1):
            return self.rows
        return self.rows[[int(t) for t in texts]]


def set_multiplier(store: Any, multiplier: int) -> None:
    """Search a ``+rescore`` store at another multiplier (the benchmark's own knob)."""
    store.set_rescore_multiplier(multiplier)


def build_row_index(workdir: Path, x: np.ndarray, name: str) -> Path:
    """The index ``name`` of :data:`INDEXES` over the rows ``x``, in ``workdir`` (built once; a finished folder
    is reused)."""
    from whitevec.index import Document, build_index

    out = workdir / name
    if (out / "manifest.json").exists():
        return out
    docs = [Document(str(i), str(i)) for i in range(len(x))]
    params = {"encoding": INDEXES[name], "train_sample": TRAIN_SAMPLE}
    build_index(docs, out, encoder=RowEncoder(x), transform="none", metric="cosine", index_params=params)
    return out
