"""Why faiss and scikit-learn whitening come out non-finite on bench_whitening_fit.py's data.

Fits faiss PCAMatrix(eigen_power=-0.5) and sklearn PCA(whiten=True) on the benchmark's first N rows (float32, as
in the benchmark) and prints their smallest eigenvalue beside the float64 covariance's. A negative or zero value
makes lambda^-1/2 non-finite. Run: `python benchmarks/investigations/peer_eigenvalues.py [N]` (default
100,000); the output of the committed run is in benchmarks/results/peer_eigenvalues.txt.

An investigation of 2026-12-02, not part of the maintained suite (`make bench`). Backs docs/results/bench.md,
"Where whitevec loses, and why" (the peers' float32 covariances give non-finite whitening); its output is
benchmarks/results/peer_eigenvalues.txt.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import ANISOTROPIC_DIM as D
from benchmarks.common.data import anisotropic_rows as all_rows


def main() -> None:
    import faiss
    from sklearn.decomposition import PCA

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    X = all_rows(n)
    pca = faiss.PCAMatrix(D, D, -0.5)
    pca.max_points_per_d = 1 << 30
    pca.train(X)
    faiss_eig = faiss.vector_to_array(pca.eigenvalues) / (n - 1)  # faiss uses the unnormalised scatter
    faiss_bad = int((~np.isfinite(faiss.vector_to_array(pca.A))).sum())
    sk = PCA(whiten=True).fit(X)
    exact = np.linalg.eigvalsh(np.cov(X.astype(np.float64).T))
    print(f"N = {n:,}, d = {D}")
    print(f"float64 covariance: smallest eigenvalue {exact.min():.3e}, largest {exact.max():.3e}")
    print(f"faiss PCAMatrix:    smallest eigenvalue {faiss_eig.min():.3e}; non-finite matrix entries: {faiss_bad}")
    print(
        f"sklearn PCA ({getattr(sk, '_fit_svd_solver', '?')}): smallest eigenvalue "
        f"{sk.explained_variance_.min():.3e}; non-positive: {int((sk.explained_variance_ <= 0).sum())}"
    )


if __name__ == "__main__":
    main()
