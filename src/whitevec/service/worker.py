"""The one thread that owns the retriever, and the queue (and batching) through which requests reach it."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import numpy as np

from whitevec.errors import IndexDamagedError

if TYPE_CHECKING:
    from whitevec.datasets.retrieval import Document
    from whitevec.index.segments.requests import AddResult

logger = logging.getLogger(__name__)

# How often a waiting worker looks again at the count of requests on their way (they may end without a job).
_POLL_S = 0.0005
# How often, at most, the searches check whether another writer (the command line, another process) swapped in a
# newer version of the index, and move to it (Retriever.refresh: only its new segments are read).
FOLLOW_S = 1.0
_STOP_CHECK_S = 0.5  # how often a write waiting for its model work checks that the worker still runs
_ARRIVED = "whitevec.arrived"  # the scope key of a request counted in RetrieverWorker.incoming
# The share of the encoder's time a write's model work takes while searches wait for it (all of it when none
# does): after a job of a write's, the next waits until searches have had (1 - share) / share times as long.
WRITE_SHARE = 0.25
# A write's texts go to the encoder in jobs of about this many characters (one text at least), so a search
# waits behind one such job, never a whole add (a document of 256 tokens is about 1,000 characters).
WRITE_JOB_CHARS = 1000

T = TypeVar("T")


# ---- what the service needs from a retriever -------------------------------------------------------------
class HitLike(Protocol):
    id: str
    score: float
    text: str
    metadata: dict[str, Any] | None


# A search's choices beyond k (``mode``, ``fusion``, ``candidates`` of :meth:`whitevec.index.Retriever.search`),
# as sorted (name, value) pairs: only those a request gave, so a retriever's own defaults apply to the rest.
SearchOptions = tuple[tuple[str, Any], ...]


class QueryVectors:
    """A request's query vectors as a search option (``query_vectors``): an array to the retriever, and equal to
    no other request's, so a search by vectors runs alone (its vectors are its own)."""

    def __init__(self, rows: Sequence[Sequence[float]]) -> None:
        self.rows = np.asarray(rows, dtype=np.float64)  # the retriever checks them, and makes them float32

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return self.rows if dtype is None else self.rows.astype(dtype)


class RetrieverLike(Protocol):
    """The part of :class:`whitevec.index.Retriever` the service uses (a fake one serves in tests)."""

    @property
    def manifest(self) -> dict[str, Any]: ...

    @property
    def count(self) -> int: ...

    def search(self, queries: list[str], k: int = 10) -> Sequence[Sequence[HitLike]]: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


def embed_marked(retriever: RetrieverLike, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(vectors, known)`` of ``texts``: the retriever's ``embed_marked`` (see
    :meth:`whitevec.index.Retriever.embed_marked`), or for one without it, its ``embed`` with every text known."""
    marked = getattr(retriever, "embed_marked", None)
    if callable(marked):
        vectors, known = marked(texts)
        return np.asarray(vectors, dtype=np.float32), np.asarray(known, dtype=bool)
    return np.asarray(retriever.embed(texts), dtype=np.float32), np.ones(len(texts), dtype=bool)


def write_in_turn(
    retriever: Any, docs: list[Document], on_existing: str, encoder: Any, vectors: Any = None
) -> AddResult:
    """A server's add (the HTTP route's, the MCP tool's), run on its writer thread: ``encoder`` the retriever's
    as that thread may use it (:class:`InTurnEncoder`), ``vectors`` the documents' own (none encoded); a
    document with no token the model knows refused, not skipped, so nothing is written then."""
    result: AddResult = retriever.write(
        docs,
        show_progress=False,
        vectors=vectors,
        empty_documents="error",
        on_existing=on_existing,
        encoder=encoder,
    )
    return result


class InTurnEncoder:
    """The retriever's ``encoder`` as a write on the writer thread uses it: each call runs on the worker's thread
    (:meth:`RetrieverWorker.call`), which alone touches the model, and an encode goes in jobs of about
    :data:`WRITE_JOB_CHARS` characters that take turns with the searches."""

    def __init__(self, worker: RetrieverWorker, encoder: Any) -> None:
        self.worker = worker
        self.encoder = encoder

    def describe(self) -> dict[str, Any]:
        return dict(self.encoder.describe())

    def known_token_mask(self, texts: Sequence[str]) -> np.ndarray:
        from whitevec.encoders.protocol import known_token_mask

        return self.worker.call(lambda: known_token_mask(self.encoder, list(texts)))

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> np.ndarray:
        jobs = _jobs_of(list(texts), WRITE_JOB_CHARS) or [[]]
        return np.concatenate([self.worker.call(functools.partial(self._encode, job)) for job in jobs])

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.encoder.encode(texts, show_progress=False), dtype=np.float32)


def _jobs_of(texts: list[str], chars: int) -> list[list[str]]:
    """``texts`` in order, cut into runs of at most ``chars`` characters (a longer text alone)."""
    jobs: list[list[str]] = []
    size = 0
    for text in texts:
        if not jobs or size + len(text) > chars:
            jobs.append([])
            size = 0
        jobs[-1].append(text)
        size += len(text)
    return jobs


# ---- sharing one retriever between requests ---------------------------------------------------------------
@dataclass
class _Job:
    kind: Literal["search", "embed", "call"]
    texts: list[str]
    k: int
    options: SearchOptions = ()
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)
    call: Callable[[], Any] | None = None  # a call's work (a write's, or a write's use of the model), run alone


class WorkerStoppedError(RuntimeError):
    """The thread that owns the retriever is no longer running (the service answers 503)."""


class RetrieverWorker:
    """One thread owns the retriever; requests queue for it, so the model, tokenizer and any SQLite handles
    are only ever touched from that thread.

    ``lock`` mode runs the queued jobs one by one. ``batch`` mode takes every job waiting when the thread gets
    free, up to ``max_texts`` texts, and runs one search per distinct k and options (mode, fusion, candidates) and
    one embed: one forward pass for many
    small requests. The batch adapts to the queue: it never waits when the batch is full or when no other
    request is on its way. It waits for two kinds of request only, and never past the batch being full:

    * requests the server has already received (:meth:`arrived`) but not yet queued, at most ``wait_ms``;
    * the crowd of the previous call: while fewer texts are queued than that call carried, at most
      ``regroup_fraction`` of its duration, counted from its end. Clients that send their next request when
      their answer arrives all come back within a few milliseconds of each other; without this wait the first
      of them starts a call of its own and the rest queue behind it, so the crowd splits into two half-size
      calls. A lone client is never kept waiting (its batch already holds as many texts as the previous one),
      and the wait costs at most that fraction of the encoder's time when the crowd does not come back.

    When a batched call fails, its jobs run again one by one so a bad request cannot fail its neighbours.

    Writes (:meth:`submit_write`) queue for a thread of their own, the writer, and run one at a time there: a
    write's files written, flushed and merged while searches go on here (the retriever holds its searches' lock
    only to swap the new version in: a search sees the version before a write or the one after it, and one
    queued after a write was answered sees it). What a write asks of the model (its documents' tokens and
    vectors) comes back here in jobs (:meth:`call`, :class:`InTurnEncoder`), so the model is used by this thread
    alone; while searches wait, those jobs take at most :data:`WRITE_SHARE` of its time. Versions other writers
    swap in are followed, checked before a batch of searches at most every :data:`FOLLOW_S` (skipped while a
    write of this server's runs: it swaps in its own).
    """

    def __init__(
        self,
        retriever: RetrieverLike,
        mode: str = "batch",
        max_texts: int = 64,
        wait_ms: float = 0.0,
        regroup_fraction: float = 0.0,
    ):
        self.retriever = retriever
        self.mode = mode
        self.max_texts = max_texts
        self.wait_s = wait_ms / 1000.0
        self.regroup_fraction = regroup_fraction
        # The previous encoder call: texts it carried, and when it ended (monotonic) and how long it took.
        self._last_texts = 0
        self._last_end = 0.0
        self._last_seconds = 0.0
        # Encoder calls made, and the jobs and texts they carried: how much batching happened (/health shows them).
        self.calls = 0
        self.jobs = 0
        self.texts = 0
        # Seconds spent running batches: against the wall time, how much of it the encoder was busy.
        self.busy_s = 0.0
        # What the first search that met a damaged index file said (None while none has): /health reports it.
        self.damage: str | None = None
        # Requests received that have not yet submitted their job: the event loop counts them up and down; the
        # worker thread only reads the number (an int read is atomic).
        self.incoming = 0
        self.follow_s = FOLLOW_S
        self._followed = time.monotonic()  # when the newest version was last looked for
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._writes: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._writing = threading.Lock()  # held by the writer thread while a write runs
        self._held: collections.deque[_Job] = collections.deque()  # writes' model work, waiting for its turn
        self._owed = 0.0  # seconds of searches owed before the next job of a write's (see WRITE_SHARE)
        self._thread = threading.Thread(target=self._run, name="whitevec-encoder", daemon=True)
        self._writer = threading.Thread(target=self._run_writes, name="whitevec-writer", daemon=True)
        self._thread.start()
        self._writer.start()

    def arrived(self, scope: MutableMapping[str, Any]) -> None:
        """A request that will submit a job has come in (its ASGI ``scope``); see :meth:`submit`."""
        scope[_ARRIVED] = True
        self.incoming += 1

    def departed(self, scope: MutableMapping[str, Any]) -> None:
        """The request has submitted its job, or ended without one; counted once however often called."""
        if scope.pop(_ARRIVED, False):
            self.incoming -= 1

    def submit(
        self,
        kind: Literal["search", "embed"],
        texts: list[str],
        k: int = 0,
        scope: MutableMapping[str, Any] | None = None,
        options: SearchOptions = (),
    ) -> Awaitable[Any]:
        """Queue a job; its result, awaitable. ``scope``: the request's, when :meth:`arrived` counted it;
        ``options``: a search's keyword arguments beyond k (see :data:`SearchOptions`); a search's k is clamped
        to the documents of the version it searches."""
        return asyncio.wrap_future(self._queued(kind, texts, k, scope, options).future)

    async def search(
        self, texts: list[str], k: int, scope: MutableMapping[str, Any] | None = None, options: SearchOptions = ()
    ) -> tuple[int, Any]:
        """A search's (k, hits): k clamped to the documents of the version searched (which may be newer than
        the one served when the request came: see :meth:`_follow`)."""
        job = self._queued("search", texts, k, scope, options)
        hits = await asyncio.wrap_future(job.future)
        return job.k, hits

    def _queued(
        self,
        kind: Literal["search", "embed"],
        texts: list[str],
        k: int,
        scope: MutableMapping[str, Any] | None,
        options: SearchOptions,
    ) -> _Job:
        if not self.alive:
            raise WorkerStoppedError("the encoder worker has stopped")
        job = _Job(kind, texts, k, options)
        self._queue.put(job)
        if scope is not None:
            self.departed(scope)  # after the put: the worker never sees the job neither queued nor on its way
        return job

    def submit_write(self, write: Callable[[], T]) -> Awaitable[T]:
        """Queue ``write`` (a call that writes through the retriever) for the writer thread; its result,
        awaitable. What it asks of the model goes through :meth:`call`."""
        if not self.alive:
            raise WorkerStoppedError("the encoder worker has stopped")
        job = _Job("call", [], 0, call=write)
        self._writes.put(job)
        return asyncio.wrap_future(job.future)

    def call(self, work: Callable[[], T]) -> T:
        """Run ``work`` (a write's use of the model) on this worker's thread, in turn with the searches queued,
        and return its result: called from the writer thread, which waits for it."""
        if threading.current_thread() is self._thread:
            return work()
        if not self._thread.is_alive():
            raise WorkerStoppedError("the encoder worker has stopped")
        job = _Job("call", [], 0, call=work)
        self._queue.put(job)
        while True:  # a job queued behind close()'s stop signal is never run: the worker's end says so
            try:
                result: T = job.future.result(timeout=_STOP_CHECK_S)
                return result
            except concurrent.futures.TimeoutError:
                if not self._thread.is_alive() and not job.future.running():
                    raise WorkerStoppedError("the encoder worker has stopped") from None

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and self._writer.is_alive()

    def close(self, timeout: float = 10.0) -> None:
        """Stop the writer (after the write it runs, which may still need the worker), then the worker."""
        started = time.monotonic()
        self._writes.put(None)
        self._writer.join(timeout)
        self._queue.put(None)
        self._thread.join(max(0.0, timeout - (time.monotonic() - started)))

    def _run_writes(self) -> None:
        while True:
            job = self._writes.get()
            if job is None:
                return
            with self._writing:
                if job.future.set_running_or_notify_cancel():
                    self._move_to_newest()  # a write goes on from another writer's version, as searches do
                    self._run_call(job)

    def _run(self) -> None:
        while True:
            if self._held and (self._owed <= 0 or self._queue.empty()):  # its turn, or nothing else to do
                self._take_turn(self._held.popleft())
                continue
            first = self._queue.get()
            if first is None:
                self._stopped()
                return
            if first.kind == "call":
                self._held.append(first)  # run at the loop's top, when its turn has come
                continue
            batch = [first]
            stop = False
            if self.mode == "batch":
                stop = self._gather(batch)
            started = time.monotonic()
            try:
                self._execute_reads(batch)
            except BaseException as exc:  # keep the thread alive: one broken batch must not stop the service
                logger.exception("encoder worker failed on a batch")
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(exc)
            self._last_end = time.monotonic()
            self._last_seconds = self._last_end - started
            self.busy_s += self._last_seconds
            self._owed = max(0.0, self._owed - self._last_seconds)
            self._last_texts = sum(len(job.texts) for job in batch)
            if stop:
                self._stopped()
                return

    def _take_turn(self, job: _Job) -> None:
        """Run a write's model work, and owe the searches their share of the encoder for its time."""
        started = time.monotonic()
        if job.future.set_running_or_notify_cancel():
            self._run_call(job)
        seconds = time.monotonic() - started
        self.busy_s += seconds
        self._owed = seconds * (1 - WRITE_SHARE) / WRITE_SHARE

    def _stopped(self) -> None:
        """The worker stops: a write's job still held is refused (its write fails; nothing is written)."""
        while self._held:
            self._held.popleft().future.set_exception(WorkerStoppedError("the encoder worker has stopped"))

    def _gather(self, batch: list[_Job]) -> bool:
        """Add waiting jobs to ``batch`` up to max_texts; True when the stop signal was met."""
        n_texts = len(batch[0].texts)
        arrival_deadline = None
        # The previous call's crowd: expected back by this time (monotonic), if it ended recently enough.
        crowd_deadline = self._last_end + self.regroup_fraction * self._last_seconds
        while n_texts < self.max_texts:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                now = time.monotonic()
                deadline = 0.0
                if n_texts < self._last_texts:
                    deadline = crowd_deadline
                if self.wait_s > 0 and self.incoming > 0:
                    if arrival_deadline is None:
                        arrival_deadline = now + self.wait_s
                    deadline = max(deadline, arrival_deadline)
                if deadline <= now:
                    break
                try:
                    job = self._queue.get(timeout=min(deadline - now, _POLL_S))
                except queue.Empty:
                    continue
            if job is None:
                return True
            if job.kind == "call":
                self._held.append(job)  # a write's model work runs alone, when its turn comes: next, if it has
                if self._owed <= 0:
                    break
                continue
            batch.append(job)
            n_texts += len(job.texts)
        return False

    @staticmethod
    def _run_call(job: _Job) -> None:
        assert job.call is not None
        try:
            result = job.call()
        except BaseException as exc:
            job.future.set_exception(exc)
        else:
            job.future.set_result(result)

    def _follow(self) -> None:
        """Move to a version another writer swapped in, if :data:`FOLLOW_S` passed since the last look and no
        write of this server's runs (it swaps in its version; waiting for it would hold the searches up)."""
        now = time.monotonic()
        if now - self._followed < self.follow_s or not self._writing.acquire(blocking=False):
            return
        self._followed = now
        try:
            self._move_to_newest()
        finally:
            self._writing.release()

    def _move_to_newest(self) -> None:
        """Serve the newest version of the index, if the retriever follows other writers (``_writing`` held)."""
        refresh = getattr(self.retriever, "refresh", None)
        if refresh is None:
            return
        try:
            refresh()
        except Exception as exc:  # the version loaded keeps serving; the next look tries again
            logger.warning("could not move to the index's newest version: %s", exc)

    def _execute_reads(self, batch: list[_Job]) -> None:
        if batch:
            self._follow()
        count = int(self.retriever.count)
        for job in batch:  # clamped here, after the follow: to the version these searches read
            if job.kind == "search":
                job.k = max(1, min(job.k, count))
        groups: dict[tuple[str, int, SearchOptions], list[_Job]] = {}
        for job in batch:
            if job.future.set_running_or_notify_cancel():
                groups.setdefault((job.kind, job.k, job.options), []).append(job)
        for (kind, k, options), jobs in groups.items():
            try:
                self._call(kind, k, options, jobs)
            except Exception:
                if len(jobs) == 1:
                    raise
                for job in jobs:  # a batched call failed: find the job at fault by running each alone
                    self._call_one(job)

    def _call(self, kind: str, k: int, options: SearchOptions, jobs: list[_Job]) -> None:
        texts = [t for job in jobs for t in job.texts]
        if len(jobs) == 1:
            self._call_one(jobs[0])
            return
        self.calls += 1
        self.jobs += len(jobs)
        self.texts += len(texts)
        if kind == "search":
            out: Any = self.retriever.search(texts, k=k, **dict(options))
        else:
            out = embed_marked(self.retriever, texts)
        start = 0
        for job in jobs:
            stop = start + len(job.texts)
            # An embed's answer is (vectors, known): each job takes its rows of both.
            job.future.set_result(
                out[start:stop] if kind == "search" else (out[0][start:stop], out[1][start:stop])
            )
            start = stop

    def _call_one(self, job: _Job) -> None:
        self.calls += 1
        self.jobs += 1
        self.texts += len(job.texts)
        try:
            if job.kind == "search":
                # A search by vectors alone has no texts (its queries None).
                result: Any = self.retriever.search(job.texts or None, k=job.k, **dict(job.options))  # type: ignore[arg-type]
            else:
                result = embed_marked(self.retriever, job.texts)
        except BaseException as exc:
            if isinstance(exc, IndexDamagedError) and self.damage is None:
                self.damage = str(exc)
            job.future.set_exception(exc)
        else:
            job.future.set_result(result)
