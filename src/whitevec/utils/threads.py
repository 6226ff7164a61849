"""BLAS thread pools beside torch's: the query path runs numpy's and faiss's BLAS on one thread.

Why: a process that encodes with torch holds four thread pools on the same cores: torch's OpenMP (libgomp),
faiss's OpenMP, and the OpenBLAS of numpy and of faiss. OpenBLAS's threads keep spinning for a while after a
product ends, and torch's next parallel region then shares the cores with them. On 2 cores, encoding and
whitening Cranfield queries in batches of 32 gave 154 queries/s with numpy's default 2 BLAS threads and 283/s
with one (batches of 16: 104 against 240; benchmarks/results/blas_threads.md). A query batch's products are
small, so one thread costs them little.

Only products that OpenBLAS would spread over threads take the block: changing the thread count and back has a
cost of its own (a single MiniLM query: about 0.6 ms of 7-10 ms on 2 cores, benchmarks/results/blas_threads.md).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

# Libraries that bring a BLAS of their own: the pools are listed again when one of them has been imported since
# (listing the loaded libraries takes ~0.3 ms, too long to do for every query).
_BLAS_MODULES = ("numpy", "scipy", "faiss", "torch")

# OpenBLAS runs a product (m x k) @ (k x n) on one thread while m * n * k is at most its SMP_THRESHOLD_MIN
# (65536) times GEMM_MULTITHREAD_THRESHOLD (4 by default).
OPENBLAS_ONE_THREAD_WORK = 65536 * 4

# One block at a time in the process. Why: numpy's OpenBLAS keeps one thread count for the process, and
# threadpoolctl lets only one thread at a time change it (others are silently ignored until that thread's limit
# block ends), while faiss's OpenBLAS, built on OpenMP, keeps a count per thread.
_lock = threading.RLock()
_listed_for: tuple[bool, ...] = ()
_controller: Any = None


def _blas_controller() -> Any:
    global _listed_for, _controller
    key = tuple(name in sys.modules for name in _BLAS_MODULES)
    if _controller is None or key != _listed_for:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController().select(user_api="blas")
        _listed_for = key
    return _controller


@contextlib.contextmanager
def one_blas_thread(when: bool = True) -> Iterator[None]:
    """Inside the block, every loaded BLAS (numpy's, scipy's, faiss's) runs on one thread; the counts are
    restored on leaving it. Nests; blocks in different threads take turns. ``when=False``: no block."""
    if not when:
        yield
        return
    with _lock, _blas_controller().limit(limits=1):
        yield


def threaded_product(rows: int, inner: int, cols: int) -> bool:
    """Whether OpenBLAS would run a (rows x inner) @ (inner x cols) product on more than one thread."""
    return rows * inner * cols > OPENBLAS_ONE_THREAD_WORK
