"""The seeded synthetic corpus of the 1M-vector benchmarks (results_compression.py's timing part,
bench_binary.py): unit vectors in 4096 clusters of a 64-d latent space, projected to ``d`` dimensions, plus
isotropic noise; queries are perturbed corpus vectors."""

from __future__ import annotations

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
