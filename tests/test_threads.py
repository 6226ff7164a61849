"""The query path's BLAS products run on one thread (whitevec.utils.threads), and the limit is undone
afterwards."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from whitevec.index import stored_form
from whitevec.utils.threads import one_blas_thread, threaded_product


def blas_threads() -> list[int]:
    return [int(pool["num_threads"]) for pool in threadpool_info() if pool["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads():
    """BLAS at 2 threads whatever the machine has, so that a limit to 1 shows."""
    with threadpool_limits(limits=2, user_api="blas"):
        yield


def test_one_thread_inside_and_restored_after(two_blas_threads) -> None:
    before = blas_threads()
    assert before and all(n == 2 for n in before)
    with one_blas_thread():
        assert all(n == 1 for n in blas_threads())
        with one_blas_thread():  # nested: still one, and the inner exit does not restore
            pass
        assert all(n == 1 for n in blas_threads())
    assert blas_threads() == before


def test_restored_after_an_exception(two_blas_threads) -> None:
    before = blas_threads()
    with pytest.raises(ValueError), one_blas_thread():
        raise ValueError("boom")
    assert blas_threads() == before


def test_blocks_in_two_threads_take_turns() -> None:
    """A second thread's block waits for the first to end, and gets one thread too. (Not under the fixture: while
    a thread holds a threadpoolctl limit block, threadpoolctl ignores other threads' changes to numpy's
    process-wide count.)"""
    before = blas_threads()
    if all(n == 1 for n in before):
        pytest.skip("BLAS runs on one thread on this machine already")
    inside, other_done = threading.Event(), threading.Event()
    seen: list[list[int]] = []

    def other() -> None:
        with one_blas_thread():
            seen.append(blas_threads())
        other_done.set()

    with one_blas_thread():
        thread = threading.Thread(target=other)
        thread.start()
        assert not other_done.wait(0.2)  # held back while this block runs
        inside.set()
    thread.join(10)
    assert other_done.is_set()
    assert seen and all(n == 1 for n in seen[0])
    assert blas_threads() == before


def test_threaded_product_follows_openblas_threshold() -> None:
    assert not threaded_product(1, 384, 384)  # one MiniLM query: OpenBLAS keeps it on one thread anyway
    assert threaded_product(1, 768, 768)  # one MPNet query through a full-rank whitening: it would not
    assert threaded_product(16, 384, 384)


def recording_transform(seen: list[list[int]]) -> object:
    class Recording:
        def transform(self, X: np.ndarray) -> np.ndarray:
            seen.append(blas_threads())
            return X[:, :2] * 2.0

    return Recording()


def test_stored_form_transforms_large_batches_on_one_blas_thread(two_blas_threads) -> None:
    seen: list[list[int]] = []
    out = stored_form(recording_transform(seen), np.ones((64, 384), dtype=np.float32), "cosine")  # type: ignore[arg-type]
    assert seen and all(n == 1 for n in seen[0])
    np.testing.assert_allclose(out, np.full((64, 2), 2**-0.5), rtol=1e-6)
    assert all(n == 2 for n in blas_threads())


def test_stored_form_leaves_single_small_queries_alone(two_blas_threads) -> None:
    """No block (and so no change of thread counts, which costs time of its own) where OpenBLAS would not
    thread the product anyway."""
    seen: list[list[int]] = []
    stored_form(recording_transform(seen), np.ones((1, 384), dtype=np.float32), "cosine")  # type: ignore[arg-type]
    assert seen and all(n == 2 for n in seen[0])


def test_faiss_search_of_a_large_batch_runs_on_one_blas_thread(two_blas_threads) -> None:
    from whitevec.index.faiss.store import FaissStore

    store = FaissStore(dim=64, metric="ip")
    rng = np.random.default_rng(0)
    store.add(np.arange(500), rng.standard_normal((500, 64)).astype(np.float32))
    seen: list[list[int]] = []
    real = store.index

    class Recording:
        ntotal = real.ntotal

        def search(self, x: np.ndarray, k: int):
            seen.append(blas_threads())
            return real.search(x, k)

    store.index = Recording()
    queries = rng.standard_normal((4000, 64)).astype(np.float32)  # 256,000 floats: faiss's BLAS path
    _scores, ids = store.search(queries, 5)
    assert ids.shape == (4000, 5) and seen and all(n == 1 for n in seen[0])
    seen.clear()
    store.search(queries[:20], 5)  # 1,280 floats: faiss's own loops, no block
    # numpy's OpenBLAS keeps its 2; faiss's, built on OpenMP, follows the one OpenMP thread of a small search
    assert seen and sum(n == 2 for n in seen[0]) >= 1


def test_faiss_pool_only_for_searches_worth_it() -> None:
    import faiss

    from whitevec.index.faiss.store import POOL_WORK, FaissStore

    if faiss.omp_get_max_threads() < 2:
        faiss.omp_set_num_threads(2)
    store = FaissStore(dim=64, metric="ip")
    rng = np.random.default_rng(0)
    store.add(np.arange(1000), rng.standard_normal((1000, 64)).astype(np.float32))
    seen: list[int] = []
    real = store.index

    class Recording:
        ntotal = real.ntotal

        def search(self, x: np.ndarray, k: int):
            seen.append(faiss.omp_get_max_threads())
            return real.search(x, k)

    store.index = Recording()
    few = rng.standard_normal((32, 64)).astype(np.float32)  # 2M multiply-adds: one thread
    many = rng.standard_normal((POOL_WORK // (1000 * 64) + 1, 64)).astype(np.float32)
    _s, ids_few = store.search(few, 3)
    store.search(many, 3)
    assert seen[0] == 1 and seen[1] >= 2
    assert faiss.omp_get_max_threads() >= 2  # restored
    store.index = real
    assert np.array_equal(ids_few, store.search(few, 3)[1])
