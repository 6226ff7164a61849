"""Why Whitening floors small eigenvalues: the textbook computation against whitevec's on STS-B.

all-MiniLM-L6-v2's `embeddings-avg` vectors average LayerNorm outputs, so one direction is (almost) constant. The
reference BERT-whitening computation (np.cov, SVD, W = U diag(1/sqrt(s))) divides float rounding noise by ~0
there; `Whitening(eps=1e-6)` raises eigenvalues below eps x the largest to that floor.
Run: `python benchmarks/investigations/eps_floor.py` (WHITEVEC_DATA must point at the shared data).

An investigation of 2026-12-02, not part of the maintained suite (`make bench`). Backs docs/notes/eps-floor.md (why
Whitening floors eigenvalues below eps x the largest).
"""

from __future__ import annotations

import warnings

import numpy as np

from whitevec.datasets import load_sts_task
from whitevec.encoders.transformer import Encoder
from whitevec.evaluation import cosine_rows, spearman100
from whitevec.transforms import Whitening


def main() -> None:
    task = load_sts_task("stsb")
    test = task.subsets["test"]
    gold = np.array([p.score for p in test])
    for pooling in ("embeddings-avg", "last-avg"):
        encoder = Encoder("all-MiniLM-L6-v2", pooling=pooling)
        fit = encoder.encode(task.sentences("target"))
        left = encoder.encode([p.sentence1 for p in test])
        right = encoder.encode([p.sentence2 for p in test])
        mu = fit.mean(0, keepdims=True)
        u, s, _ = np.linalg.svd(np.cov(fit.T))
        w = u @ np.diag(1 / np.sqrt(s))
        reference = spearman100(cosine_rows((left - mu) @ w, (right - mu) @ w), gold)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = Whitening().fit(fit)
        floored = spearman100(cosine_rows(ours.transform(left), ours.transform(right)), gold)
        print(
            f"{pooling:15s} smallest/largest eigenvalue {s[-1] / s[0]:.2e}  "
            f"reference (no floor) {reference:.2f}  whitevec (eps=1e-6) {floored:.2f}"
        )


if __name__ == "__main__":
    main()
