"""Seeded data the benchmarks share: synthetic vectors (the same for the same arguments in every process), and a
static encoder folder of the real shape.

- ``clustered_unit_vectors``: the corpus of the 1M-vector benchmarks (results_compression.py's timing part,
  bench_binary.py): unit vectors in 4096 clusters of a 64-d latent space, projected to ``d`` dimensions, plus
  isotropic noise; queries are perturbed corpus vectors.
- ``anisotropic_rows``: bench_whitening_fit.py's data (bench_apply.py's and bench_recall.py's too), d=768:
  x = z * s + z[:, :16] @ B + mu with z ~ N(0, I) float32, per-dimension scales s geometric from 1 to
  1/sqrt(kappa) (kappa = 1000), a rank-16 shared component and a non-zero mean. Chunks of 8192 rows come from
  seeds (seed, chunk index), so every process sees the same data and a streaming fit can be fed on the fly.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

LATENT_DIM = 64
CLUSTERS = 4096
BLOCK = 100_000


def clustered_unit_vectors(
    n: int, n_queries: int, d: int = 768, seed: int = 0, query_noise: float = 0.05
) -> tuple[np.ndarray, np.ndarray]:
    """``(corpus, queries)``: ``n`` and ``n_queries`` float32 unit rows of dimension ``d``, the same for the
    same arguments (one generator, drawn in a fixed order)."""
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((LATENT_DIM, d), dtype=np.float32)
    centres = 3.0 * rng.standard_normal((CLUSTERS, LATENT_DIM), dtype=np.float32)
    x = np.empty((n, d), dtype=np.float32)
    for start in range(0, n, BLOCK):
        rows = min(BLOCK, n - start)
        latent = centres[rng.integers(0, CLUSTERS, rows)] + rng.standard_normal(
            (rows, LATENT_DIM), dtype=np.float32
        )
        block = latent @ basis + rng.standard_normal((rows, d), dtype=np.float32)
        x[start : start + rows] = block / np.linalg.norm(block, axis=1, keepdims=True)
    q = x[rng.choice(n, n_queries, replace=False)] + query_noise * rng.standard_normal(
        (n_queries, d), dtype=np.float32
    )
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return x, q


# ---- the anisotropic rows ----------------------------------------------------------------------------------
ANISOTROPIC_DIM = 768
CHUNK_ROWS = 8192
KAPPA = 1000.0
SEED = 20240
HELD_OUT = 10**9  # chunk index of the held-out sample


def _anisotropic_params() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED)
    scales = np.geomspace(1.0, KAPPA**-0.5, ANISOTROPIC_DIM).astype(np.float32)
    mix = (rng.standard_normal((16, ANISOTROPIC_DIM)) * 0.05).astype(np.float32)
    mean = (rng.standard_normal(ANISOTROPIC_DIM) * 2).astype(np.float32)
    return scales, mix, mean


def anisotropic_chunk(index: int, rows: int = CHUNK_ROWS) -> np.ndarray:
    """Chunk ``index`` of the anisotropic rows (``HELD_OUT``: the held-out sample)."""
    scales, mix, mean = _anisotropic_params()
    z = np.random.default_rng([SEED, index]).standard_normal((rows, ANISOTROPIC_DIM), dtype=np.float32)
    out: np.ndarray = z * scales + z[:, :16] @ mix + mean
    return out


def anisotropic_chunks(n: int) -> Iterator[np.ndarray]:
    """The first ``n`` anisotropic rows, chunk by chunk."""
    for index, start in enumerate(range(0, n, CHUNK_ROWS)):
        yield anisotropic_chunk(index, min(CHUNK_ROWS, n - start))


def anisotropic_rows(n: int) -> np.ndarray:
    """The first ``n`` anisotropic rows in one array."""
    X = np.empty((n, ANISOTROPIC_DIM), dtype=np.float32)
    for index, start in enumerate(range(0, n, CHUNK_ROWS)):
        X[start : start + CHUNK_ROWS] = anisotropic_chunk(index, min(CHUNK_ROWS, n - start))
    return X


def real_shape_static_folder(out: Path, dims: int = 256) -> Path:
    """A static encoder folder of the real shape (all-MiniLM-L6-v2's tokenizer, 30,522 tokens x ``dims``, seeded
    random values) for timing: encoding and hashing costs do not depend on the values."""
    from tokenizers import Tokenizer

    from whitevec.encoders.models.resolution import resolve_model
    from whitevec.encoders.static_format import StaticTable, write_static_folder

    tokenizer = Tokenizer.from_file(str(resolve_model("all-MiniLM-L6-v2") / "tokenizer.json"))
    table = np.random.default_rng(0).normal(size=(len(tokenizer.get_vocab()), dims)).astype(np.float32)
    return write_static_folder(out, StaticTable(table, tokenizer, True, 512, {"base_model": "random"}))


def default_static_table(model: str) -> Path:
    """``whitevec distill MODEL`` with its defaults (method tokens, sif-rank weights), made once and kept in
    whitevec's cache (static/): the table the hybrid pages' scripts share."""
    from whitevec.distill import distill
    from whitevec.encoders.static_format import is_static_folder
    from whitevec.utils.paths import whitevec_cache_folder

    folder = whitevec_cache_folder("static", "WHITEVEC_STATIC") / f"{model}-tokens-sif-rank-defaults"
    if not is_static_folder(folder):
        distill(model, folder, overwrite=True, show_progress=False)
    return folder


def collection(name: str, data_dir: str | None = None) -> Any:
    """One of the shared retrieval collections (``cranfield``, or a BEIR-style folder under ``retrieval/``)."""
    from whitevec.datasets import resolve_data_dir
    from whitevec.datasets.retrieval import load_retrieval_dataset

    source = name if name == "cranfield" else resolve_data_dir(data_dir) / "retrieval" / name
    return load_retrieval_dataset(source, data_dir)
