"""Time of ``Whitening.transform`` on one vector (a query), full rank and k=128, at 384 and 768 dimensions,
fitted on 1,400 correlated random vectors (Cranfield's corpus size). Quoted beside the retrieval latencies.

    python benchmarks/investigations/whitening_one_query.py

An investigation of 2026-12-04, not part of the maintained suite (`make bench`). Backs docs/notes/blas-threads.md
(one MPNet query through a full-rank whitening took about 79 ms more than the other rows, while the transform
itself takes about 1 ms).
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from whitevec.transforms.whitening import Whitening


def main() -> None:
    rng = np.random.default_rng(0)
    for dim in (384, 768):
        mixing = rng.standard_normal((dim, dim)).astype(np.float32)
        X = rng.standard_normal((1400, dim)).astype(np.float32) @ mixing
        for k in (None, 128):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the near-singular warning of 1,400 vectors is expected here
                whitening = Whitening(n_components=k).fit(X)
            query = X[:1]
            whitening.transform(query)
            began = time.perf_counter()
            for _ in range(50):
                whitening.transform(query)
            print(f"d={dim} k={k or 'full'}: {(time.perf_counter() - began) / 50 * 1000:.2f} ms per query")


if __name__ == "__main__":
    main()
