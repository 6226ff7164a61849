"""Fitting whitening: whitevec's streaming fit vs the in-memory peers, on synthetic anisotropic float32 data.

Data (d=768): x = z * s + z[:, :16] @ B + mu with z ~ N(0, I) float32, per-dimension scales s geometric from 1
to 1/sqrt(kappa) (kappa = 1000), a rank-16 shared component (B entries N(0, 0.05^2)) and a non-zero mean: a
covariance with a few dominant directions and a spread-out tail, like sentence vectors. Chunks of 8192 rows are
generated from seeds (seed, chunk index), so every process sees the same data and whitevec can be fed on the fly
without ever holding all N rows.

Systems, each in a fresh subprocess (peak memory = that process's ru_maxrss, data included):
  reference      BERT-whitening's computation: float64 np.cov, SVD, W = U diag(s^-1/2) (all rows in memory)
  sklearn-pca    sklearn PCA(whiten=True) (all rows in memory)
  sklearn-ipca   sklearn IncrementalPCA(whiten=True) (all rows in memory; slow, so only up to --ipca-max-n)
  faiss-pca      faiss PCAMatrix(d, d, eigen_power=-0.5), max_points_per_d lifted (all rows in memory); its
                 outputs come out scaled by 1/sqrt(N - 1) and are rescaled before the comparison
  whitevec       Whitening() (precision float64, the default) fed chunk by chunk through partial_fit
  whitevec-f32   Whitening(precision="float32") the same way
Seconds are the median of --reps fits (for whitevec only the partial_fit calls and the decomposition are timed,
not the data generation). Agreement: on 1,000 held-out rows, the whitened outputs vs the float64 reference's,
(a) max abs difference after matching column signs, (b) max abs difference of all pairwise dot products of the
whitened rows, relative to the largest (rotation-invariant: near-equal eigenvalues let eigenvectors turn inside
their eigenspace without changing the whitening).

Run: `python benchmarks/maintained/bench_whitening_fit.py [--sizes 100000,1000000] [--big-n 10000000] [--reps 3]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import ANISOTROPIC_DIM as D
from benchmarks.common.data import CHUNK_ROWS as CHUNK
from benchmarks.common.data import HELD_OUT, KAPPA
from benchmarks.common.data import anisotropic_chunk as chunk
from benchmarks.common.data import anisotropic_chunks as chunks
from benchmarks.common.data import anisotropic_rows as all_rows
from benchmarks.common.runs import emit, median, run_worker, save_result

IN_MEMORY = ["reference", "sklearn-pca", "sklearn-ipca", "faiss-pca"]
STREAMING = ["whitevec", "whitevec-f32"]
RAM_GIB = 24


def fit_in_memory(system: str, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mu, W) such that whitened = (x - mu) @ W."""
    if system == "reference":
        X64 = X.astype(np.float64)
        mu = X64.mean(axis=0)
        U, s, _ = np.linalg.svd(np.cov(X64.T))
        return mu, U / np.sqrt(s)
    if system in ("sklearn-pca", "sklearn-ipca"):
        from sklearn.decomposition import PCA, IncrementalPCA

        model = PCA(whiten=True) if system == "sklearn-pca" else IncrementalPCA(whiten=True)
        model.fit(X)
        return model.mean_, model.components_.T / np.sqrt(model.explained_variance_)
    if system == "faiss-pca":
        import faiss

        pca = faiss.PCAMatrix(D, D, -0.5)
        pca.max_points_per_d = 1 << 30  # default trains on 1000*d rows at most; use them all
        pca.train(X)
        A = faiss.vector_to_array(pca.A).reshape(D, D)
        # faiss scales by the eigenvalues of the unnormalised scatter ((N - 1) x covariance), so its outputs
        # have variance 1/(N - 1); rescale so that the comparison is about directions, not that constant.
        return faiss.vector_to_array(pca.mean), A.T * np.sqrt(X.shape[0] - 1)
    raise ValueError(system)


def gemm_gflops(dtype: type, reps: int = 5) -> float:
    """numpy's own general matmul speed on one chunk-shaped product (the ceiling for the moment GEMM)."""
    rng = np.random.default_rng(1)
    A: np.ndarray = rng.standard_normal((CHUNK, D)).astype(dtype)
    B: np.ndarray = rng.standard_normal((CHUNK, D)).astype(dtype)
    A.T @ B
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        A.T @ B
        times.append(time.perf_counter() - started)
    return 2 * CHUNK * D * D / median(times) / 1e9


def worker(system: str, n: int, reps: int, out: Path) -> dict[str, Any]:
    from whitevec.transforms import Whitening

    seconds, accumulate = [], []
    mu = W = None
    if system in STREAMING:
        precision = "float32" if system == "whitevec-f32" else "float64"
        for _ in range(reps):
            w = Whitening(precision=precision)
            spent = 0.0
            for rows in chunks(n):
                started = time.perf_counter()
                w.partial_fit(rows)
                spent += time.perf_counter() - started
            started = time.perf_counter()
            W = w.components_
            decompose = time.perf_counter() - started
            accumulate.append(spent)
            seconds.append(spent + decompose)
        mu = w.mean_
    else:
        X = all_rows(n)
        for _ in range(reps):
            started = time.perf_counter()
            mu, W = fit_in_memory(system, X)
            seconds.append(time.perf_counter() - started)
    assert mu is not None and W is not None
    np.savez(out, mu=np.asarray(mu, dtype=np.float64), W=np.asarray(W, dtype=np.float64))
    result: dict[str, Any] = {"system": system, "n": n, "seconds": seconds, "median_s": median(seconds)}
    if accumulate:
        # syrk work: n * d * (d + 1) flops (n d(d+1)/2 multiply-adds) for the upper triangle of S^T S.
        result["accumulate_s"] = median(accumulate)
        result["accumulate_gflops"] = n * D * (D + 1) / median(accumulate) / 1e9
        dtype = np.float32 if system == "whitevec-f32" else np.float64
        result["numpy_gemm_gflops"] = gemm_gflops(dtype)
    return result


def agreement(ref: Path, other: Path) -> dict[str, float]:
    H = chunk(HELD_OUT, 1000).astype(np.float64)
    r, o = np.load(ref), np.load(other)
    Zr, Zo = (H - r["mu"]) @ r["W"], (H - o["mu"]) @ o["W"]
    signs = np.sign(np.sum(Zr * Zo, axis=0))
    signs[signs == 0] = 1
    gram_r, gram_o = Zr @ Zr.T, Zo @ Zo.T
    return {
        "max_abs_diff_sign_aligned": float(np.abs(Zo * signs - Zr).max()),
        "max_rel_diff_dot_products": float(np.abs(gram_o - gram_r).max() / np.abs(gram_r).max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--system", default="whitevec")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--big-n", type=int, default=10_000_000, help="whitevec-only size; 0 skips it")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--reps-large", type=int, default=2, help="repetitions at N >= 1M")
    parser.add_argument("--ipca-max-n", type=int, default=100_000)
    args = parser.parse_args()

    if args.worker:
        emit(worker(args.system, args.n, args.reps, args.out))
        return

    script = Path(__file__).resolve()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            reps = args.reps if n < 1_000_000 else args.reps_large
            files = {}
            for system in IN_MEMORY + STREAMING:
                if system == "sklearn-ipca" and n > args.ipca_max_n:
                    rows.append({"system": system, "n": n, "skipped": f"above --ipca-max-n {args.ipca_max_n}"})
                    continue
                files[system] = Path(tmp) / f"{system}-{n}.npz"
                argv = ["--system", system, "--n", str(n), "--reps", str(reps), "--out", str(files[system])]
                result = run_worker(script, argv)
                if "error" not in result and "reference" in files and files["reference"].exists():
                    result.update(agreement(files["reference"], files[system]))
                print(result, flush=True)
                rows.append(result)
        if args.big_n:
            out = Path(tmp) / "big.npz"
            argv = ["--system", "whitevec-f32", "--n", str(args.big_n), "--reps", "1", "--out", str(out)]
            result = run_worker(script, argv, timeout=3600)
            print(result, flush=True)
            rows.append(result)
    big = args.big_n or 10_000_000
    need = {
        # np.cov promotes to float64 (8 bytes a value) beside the float32 rows it was given (4 bytes).
        "n": big,
        "float32_rows_gib": big * D * 4 / 2**30,
        "reference_gib": big * D * (4 + 8) / 2**30,
        "ram_gib": RAM_GIB,
    }
    path = save_result("whitening_fit", {"d": D, "kappa": KAPPA, "rows": rows, "in_memory_need": need})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
