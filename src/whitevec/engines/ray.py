"""Encode, fit and index on a Ray cluster (``--engine ray``): the same index as :func:`whitevec.index.build_index`,
with the encoding spread over an actor pool and the documents kept in Milvus beside the vectors.

Needs the optional extra ``whitevec[ray]``. The steps, each resumable:

1. **Plan.** The corpus (one file or a glob of JSONL, CSV/TSV, text or Parquet shards) is cut into units
   (:mod:`whitevec.datasets.shards`): pieces of about ``unit_bytes``, each parsed by a worker with whitevec's
   strict readers, so a bad row is named by file and line and the documents equal the single-process build's.
2. **Encode.** A Ray Data pipeline maps the units through an actor pool (``workers`` actors, each one encoder
   from :func:`~whitevec.encoders.loading.load_encoder`, ``cpus_per_worker`` CPUs and ``gpus_per_worker`` GPUs).
   Each
   actor writes one Parquet shard per unit (ids, texts, metadata, raw vectors), the unit's whitening moments
   (``Whitening.partial_fit``, exact float64) and the ids' 64-bit hashes, each file written under a temporary
   name and renamed. Ray replaces a dead actor and retries its unit; a retried unit rewrites the same files.
   The driver appends each finished unit to ``encoded.log``.
3. **Fit.** The moments are merged in unit order with ``Whitening.merge``: the fit equals one ``fit`` over all
   vectors up to rounding. Duplicate ids are found from the hashes (and confirmed on the ids themselves).
4. **Write.** Shard by shard, in unit order, the vectors are transformed and upserted into one Milvus collection
   with their row number (the same as a single-process build's), document id, text and metadata; the driver
   appends each shard to ``inserted.log`` after Milvus has flushed it. Upserts make a shard written twice (a
   driver killed between the write and the log) count once.
5. **Publish.** The index folder (manifest last, ``docs: "milvus"``) is swapped in whole as by a local build.

The work lives in ``.<out>.ray-build/`` beside the index folder: ``state.json`` (what the build is: a rerun with
other files or settings starts over), the logs, the shards and, for Milvus Lite, the collection. A build killed
at any point (driver SIGKILL included) continues from there when run again; the older index stays in place
until the new one is whole. A bad input (a row that does not parse, a duplicate id, an empty corpus) removes the
work folder and any collection it made.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import socket
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.datasets.retrieval import Document
from whitevec.datasets.shards import (
    DEFAULT_UNIT_BYTES,
    CorpusUnit,
    corpus_files,
    plan_units,
    read_unit,
)
from whitevec.errors import BadInputError, WhitevecError
from whitevec.index.build import (
    check_build,
    check_target,
    encoder_fields,
    is_fitted,
    resolve_transform,
    transform_info,
)
from whitevec.index.faiss_store import faiss_version
from whitevec.index.layout import MILVUS_LOCAL, TRANSFORM_FILE
from whitevec.index.manifest import write_manifest
from whitevec.index.milvus_docs import MilvusDocs
from whitevec.index.milvus_store import DOC_TEXT_BYTES, MilvusStore, check_documents_encoding, is_local_uri
from whitevec.index.store import check_choice, sample_rows, stored_form
from whitevec.transforms import Transform
from whitevec.transforms.whitening import Whitening
from whitevec.utils.io import atomic_dir, atomic_path, write_json

logger = logging.getLogger(__name__)

RAY_HINT = "pip install 'whitevec[ray]'"
STATE = "state.json"
ENCODED_LOG = "encoded.log"
INSERTED_LOG = "inserted.log"
_CONNECT_TIMEOUT_S = 5.0
_WRITE_ROWS = 1000


class RayConnectionError(BadInputError):
    """The Ray cluster named by --ray-address cannot be reached (a resumable build keeps its work)."""


# --- Ray itself ---------------------------------------------------------------------------------------------
def require_ray() -> Any:
    """The ``ray`` module with Ray Data, or BadInputError saying how to install it."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise BadInputError(f"--engine ray needs Ray, which is not installed: {RAY_HINT}") from None
    return ray


def check_backend(backend: str) -> None:
    """The Ray engine writes to Milvus: BadInputError for any other backend."""
    if backend.strip().lower() != "milvus":
        raise BadInputError(
            f"--engine ray writes to Milvus; --backend {backend} is not supported with it. Use --backend milvus "
            "(a server with --uri http://host:19530, or Milvus Lite), or --engine local for FAISS."
        )


def actor_encoder(encoder: Mapping[str, Any]) -> dict[str, Any]:
    """The :func:`~whitevec.encoders.loading.load_encoder` arguments each actor builds its encoder from: those
    given, less
    the vector cache (actors keep none). Token weights are refused: the actors do not take them."""
    if encoder.get("token_weights") is not None or encoder.get("token_frequencies") is not None:
        raise BadInputError("--token-weights and --token-frequencies are not supported with --engine ray")
    return {k: v for k, v in encoder.items() if k not in ("cache", "token_weights", "token_frequencies")}


def check_address(address: str) -> None:
    """Fail within seconds when nothing answers at a Ray address (``host:port`` or ``ray://host:port``);
    ``auto`` and ``local`` are left to Ray."""
    if address in ("auto", "local"):
        return
    parsed = urllib.parse.urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = parsed.hostname, parsed.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise BadInputError(f"--ray-address {address!r} is not host:port or ray://host:port")
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise RayConnectionError(
            f"cannot reach the Ray cluster at --ray-address {address} ({reason}); start it with "
            "`ray start --head` or give the head node's address"
        ) from None


@contextlib.contextmanager
def ray_session(address: str | None = None, *, quiet: bool = True) -> Iterator[Any]:
    """Ray, connected: a Ray already initialised in this process is used as it is (and left running); else
    ``ray.init(address=...)`` or, without an address, a local instance with this machine's CPUs, shut down
    on leaving."""
    ray = require_ray()
    if address:
        check_address(address)
    _quiet_ray_data(quiet)
    if ray.is_initialized():
        yield ray
        return
    if address:
        _connect(ray, address, quiet)
    else:
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=not quiet)
    try:
        yield ray
    finally:
        ray.shutdown()


# Seconds ray.init may spend asking a GCS for its cluster id (one attempt a second; Ray's default is ~20).
_GCS_ATTEMPTS = "5"


def _connect(ray: Any, address: str, quiet: bool) -> None:
    """``ray.init(address=...)`` with a short GCS wait; a failure is a BadInputError naming the address."""
    key = "RAY_gcs_server_port_wait_time_s"
    before = os.environ.get(key)
    os.environ.setdefault(key, _GCS_ATTEMPTS)
    try:
        ray.init(address=address, log_to_driver=not quiet)
    except (ConnectionError, RuntimeError, TimeoutError) as exc:
        raise RayConnectionError(
            f"cannot connect to the Ray cluster at --ray-address {address} ({exc}); is a Ray head node running "
            "there (`ray start --head`), and is it the same Ray version?"
        ) from None
    finally:
        if before is None:
            os.environ.pop(key, None)


def _quiet_ray_data(quiet: bool) -> None:
    import ray.data

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = not quiet
    if quiet:
        for name in ("ray.data", "ray"):
            logging.getLogger(name).setLevel(logging.WARNING)


def _whitevec_error(exc: BaseException) -> WhitevecError | None:
    """The WhitevecError a worker raised, found inside Ray's wrappers (``cause``, ``__cause__``)."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, WhitevecError):
            # Ray's RayTaskError(X) subclasses X too; its message carries a traceback: keep the original's.
            inner = getattr(current, "cause", None)
            return inner if isinstance(inner, WhitevecError) else current
        stack += [getattr(current, "cause", None), current.__cause__, current.__context__]
    return None


# --- the actors ---------------------------------------------------------------------------------------------
def shard_name(index: int) -> str:
    return f"shard-{index:06d}.parquet"


def _moments_name(index: int) -> str:
    return f"moments-{index:06d}.safetensors"


def _hashes_name(index: int) -> str:
    return f"ids-{index:06d}.npy"


def id_hashes(ids: list[str]) -> np.ndarray:
    """64-bit hashes of document ids (blake2b), to find duplicates across shards without gathering the ids."""
    return np.array(
        [int.from_bytes(hashlib.blake2b(i.encode("utf-8"), digest_size=8).digest(), "little") for i in ids],
        dtype=np.uint64,
    )


class EncodeUnits:
    """A Ray Data actor: one Encoder; each call parses, encodes and writes the units of its batch (see the
    module docstring) and returns their row counts."""

    def __init__(
        self,
        encoder: dict[str, Any],
        folder: str,
        *,
        moments: bool,
        transform_file: str | None = None,
        max_text_bytes: int | None = None,
        threads: int = 1,
    ) -> None:
        from whitevec.encoders.loading import load_encoder
        from whitevec.encoders.static import StaticEncoder

        self.encoder = load_encoder(**encoder, cache=False)
        if not isinstance(self.encoder, StaticEncoder):  # a static encoder never imports torch
            import torch

            torch.set_num_threads(max(1, threads))
        self.folder = Path(folder)
        self.moments = moments
        self.transform = Transform.load(transform_file) if transform_file else None
        self.max_text_bytes = max_text_bytes

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Returns ``unit``, ``count`` and ``error`` per unit: a bad input is handed back as its message (an
        empty string when none), not raised, so that Ray neither retries it nor buries it in its own errors.

        The units of one call are encoded in one :meth:`Encoder.encode`: sorted by length together, their
        batches are padded less than unit by unit and fewer (22,438 STS sentences in 64 units: 347,672 padded
        tokens in 413 forward calls at 4 units a call, against 359,011 in 601 unit by unit, and 337,672 in 357
        for one sort of the whole corpus). Each unit still gets its own shard, moments and hashes."""
        units = [CorpusUnit.from_json(unit) for group in batch["units"] for unit in json.loads(str(group))]
        parsed: list[tuple[CorpusUnit, list[Document]]] = []
        errors: dict[int, str] = {}
        for unit in units:
            try:
                docs = read_unit(unit)
                if self.max_text_bytes is not None:
                    _check_text_sizes(docs, unit, self.max_text_bytes)
                parsed.append((unit, docs))
            except BadInputError as exc:
                errors[unit.index] = str(exc) or type(exc).__name__
        vectors = self.encoder.encode([d.text for _, docs in parsed for d in docs], show_progress=False)
        if self.transform is not None:
            vectors = self.transform.transform(vectors)
        counts: dict[int, int] = {}
        start = 0
        for unit, docs in parsed:
            self.write_unit(unit, docs, vectors[start : start + len(docs)])
            counts[unit.index] = len(docs)
            start += len(docs)
        return {
            "unit": np.array([u.index for u in units], dtype=np.int64),
            "count": np.array([counts.get(u.index, -1) for u in units], dtype=np.int64),
            "error": np.array([errors.get(u.index, "") for u in units], dtype=object),
            # What the manifest records of the encoder: the driver need not load the model itself.
            "encoder": np.array([json.dumps(encoder_fields(self.encoder))] * len(units), dtype=object),
        }

    def write_unit(self, unit: CorpusUnit, docs: list[Document], vectors: np.ndarray) -> None:
        if self.moments and docs:
            part = Whitening().partial_fit(vectors)
            with atomic_path(self.folder / _moments_name(unit.index), suffix=".safetensors") as tmp:
                part.save(tmp)
        with atomic_path(self.folder / _hashes_name(unit.index), suffix=".npy") as tmp, open(tmp, "wb") as handle:
            np.save(handle, id_hashes([d.id for d in docs]), allow_pickle=False)
        write_shard(self.folder / shard_name(unit.index), docs, vectors)


def _check_text_sizes(docs: list[Document], unit: CorpusUnit, limit: int) -> None:
    for doc in docs:
        size = len(doc.text.encode("utf-8"))
        if size > limit:
            raise BadInputError(
                f"document {doc.id!r} of {unit.file} is {size} bytes of text; Milvus keeps at most {limit} "
                "bytes per text field. Split it, or build with --engine local (documents in SQLite)."
            )


def write_shard(path: Path, docs: list[Document], vectors: np.ndarray) -> None:
    """A Parquet shard: ``id``, ``text``, ``metadata`` (JSON text or null) and ``vector`` (float32 list)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    x = np.ascontiguousarray(vectors, dtype=np.float32)
    dim = int(x.shape[1]) if x.ndim == 2 else 0
    table = pa.table(
        {
            "id": pa.array([d.id for d in docs], pa.string()),
            "text": pa.array([d.text for d in docs], pa.string()),
            "metadata": pa.array(
                [None if d.metadata is None else json.dumps(d.metadata, ensure_ascii=False) for d in docs],
                pa.string(),
            ),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1), pa.float32()), dim),
        }
    )
    with atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(table, tmp)


def read_shard(path: Path) -> tuple[list[str], list[str], list[str | None], np.ndarray]:
    """ids, texts, metadata JSON texts and vectors (float32, n x d) of a shard written by :func:`write_shard`."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return (
        table.column("id").to_pylist(),
        table.column("text").to_pylist(),
        table.column("metadata").to_pylist(),
        _vectors_of(table),
    )


def read_shard_vectors(path: Path) -> np.ndarray:
    """Only the vectors (float32, n x d) of a shard: the other columns are not read."""
    import pyarrow.parquet as pq

    return _vectors_of(pq.read_table(path, columns=["vector"]))


def _vectors_of(table: Any) -> np.ndarray:
    column = table.column("vector").combine_chunks()
    dim = column.type.list_size
    return np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)


# --- the work folder ----------------------------------------------------------------------------------------
def work_folder(out: Path) -> Path:
    return out.parent / f".{out.name}.ray-build"


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """Hold ``.<out>.ray-build.lock`` beside ``out`` (an exclusive ``flock``, released when the process ends,
    SIGKILL included) for a whole build, or BadInputError at once when another build of ``out`` holds it: two
    builds in one work folder would undo each other's shards and logs. The file is removed on the way out; an
    opener that locked it just before was left holding a removed file, so it checks and tries again."""
    import fcntl

    path = out.parent / f".{out.name}.ray-build.lock"
    out.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise BadInputError(
                f"another build of {out} is running (it holds {path}); wait for it to end or write another --out"
            ) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.close(fd)


def _read_log(path: Path) -> dict[int, int]:
    """``{unit: rows}`` of a log of finished units (one JSON object a line); a torn last line is ignored."""
    done: dict[int, int] = {}
    if not path.exists():
        return done
    for line in path.read_text(encoding="utf-8").split("\n"):
        try:
            entry = json.loads(line)
            done[int(entry["unit"])] = int(entry["count"])
        except (ValueError, KeyError, TypeError):
            continue
    return done


def _append_log(path: Path, unit: int, count: int) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"unit": unit, "count": count}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _file_fingerprint(files: list[Path]) -> list[dict[str, Any]]:
    return [{"file": str(f.resolve()), "bytes": f.stat().st_size, "mtime_ns": f.stat().st_mtime_ns} for f in files]


def _open_work(folder: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The state of an earlier run of the same build in ``folder`` (resumed), or a fresh one (anything left by
    another build there is removed first)."""
    state_file = folder / STATE
    if state_file.exists():
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except ValueError:
            state = {}
        if state.get("config") == config:
            return dict(state)
        logger.warning("%s holds another build (other files or settings); starting over", folder)
        _discard_work(folder, state)
    folder.mkdir(parents=True, exist_ok=True)
    state = {"config": config, "collection": None}
    write_json(state_file, state)
    return state


def _discard_work(folder: Path, state: dict[str, Any] | None) -> None:
    """Remove a work folder and the collection its build started on a server or a Lite file elsewhere."""
    config = (state or {}).get("config") or {}
    uri, collection = config.get("uri"), (state or {}).get("collection")
    if uri and collection:
        MilvusStore.discard({"backend_uri": uri, "milvus_collection": collection})
    shutil.rmtree(folder, ignore_errors=True)


# --- the transform ------------------------------------------------------------------------------------------
def _transform_plan(transform: str | Transform | None, sampled: bool) -> tuple[Transform | None, str | None, bool]:
    """``(object, spec, needs a fit)``. Without a sample only a whitening form is fitted (exactly, from moments
    merged across workers); on a sample (``sampled``) any transform is, on the driver."""
    obj, spec = resolve_transform(transform)
    if obj is None:
        return None, None, False
    if is_fitted(obj):
        return obj, spec, False
    if not sampled and not isinstance(obj, Whitening):
        raise BadInputError(
            f"--engine ray fits whitening forms only (whitening, whitening-K, rotation, pca-K) exactly, from "
            f"moments merged across workers; {spec!r} is not one. Fit it on a sample of the corpus "
            "(--fit-sample N), or once with `whitevec fit` and pass the .safetensors file, or use --engine local."
        )
    return obj, spec, True


def check_fit_sample(fit_sample: int | None, fit_seed: int) -> None:
    if fit_sample is not None and (isinstance(fit_sample, bool) or not isinstance(fit_sample, int)):
        raise BadInputError(f"--fit-sample must be a whole number of vectors, not {fit_sample!r}")
    if fit_sample is not None and fit_sample < 2:
        raise BadInputError(f"--fit-sample must be at least 2 vectors, not {fit_sample}")
    if isinstance(fit_seed, bool) or not isinstance(fit_seed, int) or fit_seed < 0:
        raise BadInputError(f"--fit-seed must be a whole number >= 0, not {fit_seed!r}")


def fit_on_sample(
    folder: Path, units: list[CorpusUnit], counts: dict[int, int], target: Transform, size: int, seed: int
) -> int:
    """Fit ``target`` on ``size`` of the corpus's raw vectors, the rows :func:`sample_rows` draws with ``seed``
    from the corpus in unit order (so the sample does not depend on the workers); returns the rows fitted."""
    total = sum(counts[u.index] for u in units)
    wanted = sample_rows(total, size, seed)
    if wanted.size < 2:
        raise BadInputError(f"the transform needs at least 2 documents to fit, the corpus has {total}")
    parts: list[np.ndarray] = []
    row = 0
    for unit in units:
        count = counts[unit.index]
        inside = wanted[(wanted >= row) & (wanted < row + count)] - row
        if inside.size:
            parts.append(read_shard_vectors(folder / shard_name(unit.index))[inside])
        row += count
    target.fit(np.ascontiguousarray(np.concatenate(parts), dtype=np.float32))
    return int(wanted.size)


def _merge_moments(folder: Path, units: list[CorpusUnit], counts: dict[int, int], target: Whitening) -> int:
    """Merge every unit's moments into ``target`` in unit order; returns the rows merged."""
    rows = 0
    for unit in units:
        if counts[unit.index] == 0:
            continue
        part = Transform.load(folder / _moments_name(unit.index))
        if not isinstance(part, Whitening):
            raise WhitevecError(f"{folder / _moments_name(unit.index)} holds no whitening moments; rebuild")
        target.merge(part)
        rows += counts[unit.index]
    if rows < 2:
        raise BadInputError(f"whitening needs at least 2 documents to fit, the corpus has {rows}")
    target._decompose()  # the floored-eigenvalue warning now, as fit() gives it
    return rows


def _check_ids(folder: Path, units: list[CorpusUnit], counts: dict[int, int]) -> None:
    """BadInputError naming an id that occurs twice in the corpus (hash duplicates confirmed on the ids)."""
    parts = [np.load(folder / _hashes_name(u.index), allow_pickle=False) for u in units if counts[u.index]]
    if not parts:
        raise BadInputError("the corpus holds no documents")
    hashes = np.concatenate(parts)
    ordered = np.sort(hashes)
    repeated = set(ordered[1:][ordered[1:] == ordered[:-1]].tolist())
    if not repeated:
        return
    seen: dict[str, str] = {}
    for unit in units:
        if not counts[unit.index]:
            continue
        ids, _, _, _ = read_shard(folder / shard_name(unit.index))
        marks = np.load(folder / _hashes_name(unit.index), allow_pickle=False)
        for doc_id, mark in zip(ids, marks.tolist(), strict=True):
            if mark not in repeated:
                continue
            if doc_id in seen:
                raise BadInputError(
                    f"document id {doc_id!r} occurs more than once in the corpus ({seen[doc_id]} and "
                    f"{unit.file}); ids must be unique"
                )
            seen[doc_id] = unit.file


# --- the pipeline -------------------------------------------------------------------------------------------
def encode_units(
    ray: Any,
    units: list[CorpusUnit],
    folder: Path,
    log: Path,
    encoder: dict[str, Any],
    *,
    workers: int | None,
    cpus_per_worker: float,
    gpus_per_worker: float,
    moments: bool,
    transform_file: str | None = None,
    max_text_bytes: int | None = None,
    described: dict[str, Any] | None = None,
) -> dict[int, int]:
    """Encode the units not yet in ``log`` on an actor pool of ``workers`` actors (None: as many as the cluster's
    CPUs hold, :func:`default_workers`); returns ``{unit: rows}`` of all units. The actors' description of their
    encoder (:func:`encoder_fields`) is put into ``described`` when given."""
    done = {u: c for u, c in _read_log(log).items() if (folder / shard_name(u)).exists()}
    pending = [u for u in units if u.index not in done]
    if pending:
        import ray.data

        workers = workers or default_workers(ray, cpus_per_worker)
        # Groups cut from the whole plan (the units still to encode of each), so that a resumed build groups,
        # batches and so rounds its units as the first run did.
        per_call = units_per_call(len(units), workers)
        todo = {u.index for u in pending}
        groups = [[u for u in units[i : i + per_call] if u.index in todo] for i in range(0, len(units), per_call)]
        items = [{"units": json.dumps([u.to_json() for u in group])} for group in groups if group]
        dataset = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
            EncodeUnits,
            batch_size=1,
            # One call at a time per actor: a call queued behind a busy actor at the end would leave another
            # idle for up to a call's length.
            compute=ray.data.ActorPoolStrategy(
                size=max(1, min(workers, len(items))), max_tasks_in_flight_per_actor=1
            ),
            num_cpus=cpus_per_worker,
            num_gpus=gpus_per_worker or None,
            fn_constructor_kwargs={
                "encoder": encoder,
                "folder": str(folder),
                "moments": moments,
                "transform_file": transform_file,
                "max_text_bytes": max_text_bytes,
                "threads": max(1, int(cpus_per_worker)),
            },
        )
        try:
            for row in dataset.iter_rows():
                unit, count = int(row["unit"]), int(row["count"])
                if row["error"]:
                    raise BadInputError(str(row["error"]))
                if described is not None and not described:
                    described.update(json.loads(str(row["encoder"])))
                _append_log(log, unit, count)
                done[unit] = count
        except WhitevecError:
            raise
        except Exception as exc:
            found = _whitevec_error(exc)
            if found is not None:
                raise type(found)(str(found)) from None
            raise
    missing = [u.index for u in units if u.index not in done]
    if missing:
        raise WhitevecError(f"the Ray pipeline ended without encoding units {missing[:5]}; run the build again")
    return done


MIN_UNIT_BYTES = 16 << 10
UNITS_PER_CORPUS = 64
CALLS_PER_WORKER = 8
MAX_UNITS_PER_CALL = 4


def units_per_call(units: int, workers: int) -> int:
    """Units encoded together in one actor call: several when the plan has many more units than the workers
    need (fewer padded tokens, see :meth:`EncodeUnits.__call__`), but still about CALLS_PER_WORKER calls per
    worker so that the last call leaves little idle time. Depends on the plan's size and the workers only: a
    resumed build with the same workers groups its units as the first run did."""
    return max(1, min(MAX_UNITS_PER_CALL, units // max(1, workers * CALLS_PER_WORKER)))


def auto_unit_bytes(files: list[Path]) -> int:
    """Unit size from the corpus size alone (so a rerun plans the same units): about UNITS_PER_CORPUS units,
    each between MIN_UNIT_BYTES and DEFAULT_UNIT_BYTES, so a small corpus still spreads over the workers."""
    total = sum(f.stat().st_size for f in files)
    return max(MIN_UNIT_BYTES, min(DEFAULT_UNIT_BYTES, total // UNITS_PER_CORPUS))


def default_workers(ray: Any, cpus_per_worker: float) -> int:
    """As many actors as the cluster's CPUs hold at ``cpus_per_worker`` each (at least one)."""
    cpus = float(ray.cluster_resources().get("CPU", 1))
    return max(1, int(cpus // max(cpus_per_worker, 1e-9)))


def ray_build(
    corpus: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    encoder: dict[str, Any],
    transform: str | Transform | None = "none",
    kind: str = "flat",
    metric: str = "cosine",
    backend: str = "milvus",
    uri: str | None = None,
    index_params: dict[str, Any] | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    cpus_per_worker: float = 1.0,
    gpus_per_worker: float = 0.0,
    unit_bytes: int | None = None,
    fit_sample: int | None = None,
    fit_seed: int = 0,
    quiet: bool = True,
) -> Path:
    """Build the index ``out`` from ``corpus`` on Ray (see the module docstring); returns ``out``.

    ``fit_sample``: fit the transform on that many of the corpus's vectors, drawn with ``fit_seed`` (any
    transform, flow included, fitted on the driver) instead of exactly from moments merged across workers
    (whitening forms only).

    ``encoder``: the keyword arguments of :func:`~whitevec.encoders.loading.load_encoder` (``model``, ``pooling``,
    ``max_length``, ``batch_size``, ``device``, ``backend``), made once in each actor and once here to describe
    it in the manifest. Resumes an earlier run of the same build that was killed.

    Raises:
        BadInputError: Ray missing, ``--ray-address`` unreachable, backend not Milvus, a row that does not parse
            (file and line), a duplicate id, an empty corpus, a transform that cannot be fitted here, another
            build of ``out`` running; nothing half-built is left looking complete (no manifest is written).
    """
    started = time.perf_counter()
    plan = _plan_build(
        corpus,
        Path(out).expanduser(),
        encoder=encoder,
        transform=transform,
        kind=kind,
        metric=metric,
        backend=backend,
        uri=uri,
        index_params=index_params,
        ray_address=ray_address,
        unit_bytes=unit_bytes,
        fit_sample=fit_sample,
        fit_seed=fit_seed,
    )
    pool = _Pool(ray_address, workers, cpus_per_worker, gpus_per_worker, quiet)
    with build_lock(plan.target):
        folder = work_folder(plan.target)
        state = _open_work(folder, plan.config)
        encoded = _encode_and_fit(plan, pool, folder, state)
        store = _open_collection(folder, state, encoded.dim, plan.metric, plan.kind, plan.index_params, plan.uri)
        try:
            _write_vectors(store, folder, plan.units, encoded.counts, plan.fitted, plan.metric)
            replaced = _publish(plan, encoded, folder, store, started)
        finally:
            store.close()
        shutil.rmtree(folder, ignore_errors=True)
        if replaced is not None:
            with contextlib.suppress(BadInputError):
                MilvusStore.discard(replaced)
        return plan.target


@dataclass
class _BuildPlan:
    """A checked build: where it goes, what it stores, the transform to fit, the units of the corpus, and the
    configuration a resumed run must match (``state.json``)."""

    target: Path
    encoder: dict[str, Any]
    fitted: Transform | None  # fitted here (needs_fit), or given fitted, or None
    spec: str | None
    needs_fit: bool
    fit_sample: int | None
    fit_seed: int
    kind: str
    metric: str
    uri: str | None
    index_params: dict[str, Any] | None
    units: list[CorpusUnit]
    config: dict[str, Any]


@dataclass
class _Pool:
    """Where and how wide the encoding runs: the Ray address and the actor pool's size and resources."""

    address: str | None
    workers: int | None
    cpus_per_worker: float
    gpus_per_worker: float
    quiet: bool


@dataclass
class _Encoded:
    """What the encode and fit steps leave: rows per unit, the actors' description of their encoder, the rows
    the transform was fitted on, and the stored dimension."""

    counts: dict[int, int]
    fields: dict[str, Any]
    fit_rows: int
    dim: int


def _plan_build(
    corpus: str | os.PathLike[str],
    target: Path,
    *,
    encoder: dict[str, Any],
    transform: str | Transform | None,
    kind: str,
    metric: str,
    backend: str,
    uri: str | None,
    index_params: dict[str, Any] | None,
    ray_address: str | None,
    unit_bytes: int | None,
    fit_sample: int | None,
    fit_seed: int,
) -> _BuildPlan:
    """Step 1: everything checked that can be before Ray starts, and the corpus cut into units."""
    check_backend(backend)
    require_ray()
    if ray_address:
        check_address(ray_address)
    check_build(target, kind=kind, metric=metric, backend="milvus", uri=uri, index_params=index_params)
    check_documents_encoding(index_params)
    kind, metric = kind.strip().lower(), check_choice(metric, ("cosine", "ip", "l2"), "metric")
    check_fit_sample(fit_sample, fit_seed)
    fitted, spec, needs_fit = _transform_plan(transform, sampled=fit_sample is not None)
    files = corpus_files(corpus)
    unit_bytes = unit_bytes or auto_unit_bytes(files)
    units = plan_units(files, unit_bytes)
    if uri is not None and is_local_uri(uri):
        uri = str(Path(uri).expanduser().resolve())
    config = {
        "files": _file_fingerprint(files),
        "unit_bytes": unit_bytes,
        "encoder": encoder,
        "transform": spec,
        "fit_sample": fit_sample,
        "fit_seed": fit_seed,
        "kind": kind,
        "metric": metric,
        "index_params": index_params,
        "uri": uri,
    }
    return _BuildPlan(
        target,
        encoder,
        fitted,
        spec,
        needs_fit,
        fit_sample,
        fit_seed,
        kind,
        metric,
        uri,
        index_params,
        units,
        config,
    )


def _encode_and_fit(plan: _BuildPlan, pool: _Pool, folder: Path, state: dict[str, Any]) -> _Encoded:
    """Steps 2 and 3: encode the units not yet encoded, check the ids, fit the transform (on a sample, or from
    the merged moments). A bad input removes the work; an unreachable cluster keeps it for the next run."""
    fields: dict[str, Any] = {}
    try:
        with ray_session(pool.address, quiet=pool.quiet) as ray:
            counts = encode_units(
                ray,
                plan.units,
                folder,
                folder / ENCODED_LOG,
                plan.encoder,
                workers=pool.workers,
                cpus_per_worker=pool.cpus_per_worker,
                gpus_per_worker=pool.gpus_per_worker,
                moments=plan.needs_fit and plan.fit_sample is None,
                max_text_bytes=DOC_TEXT_BYTES,
                described=fields,
            )
        _check_ids(folder, plan.units, counts)
        rows = 0
        if plan.needs_fit and plan.fit_sample is not None:
            assert plan.fitted is not None
            rows = fit_on_sample(folder, plan.units, counts, plan.fitted, plan.fit_sample, plan.fit_seed)
        elif plan.needs_fit:
            assert isinstance(plan.fitted, Whitening)
            rows = _merge_moments(folder, plan.units, counts, plan.fitted)
    except RayConnectionError:
        raise  # nothing wrong with the build: keep its work for the next run
    except BadInputError:
        _discard_work(folder, state)
        raise
    if not fields:  # every unit was encoded by an earlier run: describe the encoder here
        from whitevec.encoders.loading import load_encoder

        with load_encoder(**plan.encoder, cache=False) as loaded:
            fields = encoder_fields(loaded)
    encoder_dim = int(fields["encoder_dim"])
    dim = int(plan.fitted.transform(np.zeros((1, encoder_dim), np.float32)).shape[1]) if plan.fitted else None
    return _Encoded(counts, fields, rows, dim or encoder_dim)


def _publish(
    plan: _BuildPlan, encoded: _Encoded, folder: Path, store: MilvusStore, started: float
) -> dict[str, Any] | None:
    """Step 5: check the collection holds every row, then swap in the index folder (the transform, Milvus Lite's
    data when it lives in the folder, the manifest last); returns the manifest of the version it replaced."""
    total = sum(encoded.counts.values())
    if store.count != total:
        raise WhitevecError(
            f"Milvus collection {store.collection} holds {store.count} rows after the build, expected "
            f"{total}; run the build again (it resumes from {folder})"
        )
    source = "corpus" if plan.fit_sample is None else f"corpus sample (seed {plan.fit_seed})"
    fitted = plan.fitted
    info = (
        None
        if fitted is None or plan.spec is None
        else transform_info(fitted, plan.spec, source, encoded.fit_rows)
    )
    params, location = store.params(), store.location()
    store.release()
    replaced: list[dict[str, Any] | None] = [None]

    def note_replaced() -> None:
        replaced[0] = check_target(plan.target)

    with atomic_dir(plan.target, before_swap=note_replaced) as tmp:
        names: list[str] = []
        if fitted is not None:
            fitted.save(tmp / TRANSFORM_FILE)
            names.append(TRANSFORM_FILE)
        if plan.uri is None:
            os.replace(folder / MILVUS_LOCAL, tmp / MILVUS_LOCAL)
        manifest = {
            **encoded.fields,
            "dim": encoded.dim,
            "transform": info,
            "metric": plan.metric,
            "index_kind": plan.kind,
            "index_params": params,
            "count": total,
            "backend": "milvus",
            **location,
            "docs": MilvusDocs.name,
            "faiss": faiss_version(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "build_seconds": round(time.perf_counter() - started, 3),
        }
        write_manifest(tmp, manifest, names)
    return replaced[0]


def _open_collection(
    folder: Path,
    state: dict[str, Any],
    dim: int,
    metric: str,
    kind: str,
    params: dict[str, Any] | None,
    uri: str | None,
) -> MilvusStore:
    """The build's collection: the one an earlier run of it started, or a new one (named in the state first)."""
    real_uri = str(folder / MILVUS_LOCAL) if uri is None else uri
    name = state.get("collection")
    if name is None:
        from whitevec.index.milvus_store import new_collection_name

        name = state["collection"] = new_collection_name()
        write_json(folder / STATE, state)
    try:
        return MilvusStore(real_uri, name, dim, metric, kind, params, stored_uri=uri, docs=True)
    except WhitevecError as exc:
        if "has no collection" not in str(exc) and "does not exist" not in str(exc):
            raise
    except Exception as exc:  # pymilvus's own errors: the collection exists but cannot be loaded
        if uri is not None:
            raise
        # Milvus Lite writes a segment's files in place, so a driver killed while it wrote one leaves data it
        # cannot load ("file seems not fully written"). The shards are the build's record, kept in the work
        # folder: start the build's own Lite data again and write every shard.
        logger.warning("the build's Milvus Lite data cannot be loaded (%s); writing every shard again", exc)
        shutil.rmtree(real_uri, ignore_errors=True)
    # A new collection holds none of the shards an earlier run may have logged as written.
    (folder / INSERTED_LOG).unlink(missing_ok=True)
    return MilvusStore(real_uri, name, dim, metric, kind, params, create=True, stored_uri=uri, docs=True)


def _write_vectors(
    store: MilvusStore,
    folder: Path,
    units: list[CorpusUnit],
    counts: dict[int, int],
    fitted: Transform | None,
    metric: str,
) -> None:
    """Transform each shard and upsert it with its documents, in unit order (rows numbered as a local build
    numbers them), skipping the shards ``inserted.log`` lists."""
    log = folder / INSERTED_LOG
    done = _read_log(log)
    row = 0
    for unit in units:
        count = counts[unit.index]
        if count and unit.index not in done:
            ids, texts, metas, vectors = read_shard(folder / shard_name(unit.index))
            stored = stored_form(fitted, vectors, metric)
            rows = np.arange(row, row + count, dtype=np.int64)
            for start in range(0, count, _WRITE_ROWS):
                stop = start + _WRITE_ROWS
                store.upsert_documents(
                    rows[start:stop], stored[start:stop], ids[start:stop], texts[start:stop], metas[start:stop]
                )
            store.flush()
            _append_log(log, unit.index, count)
        row += count


# --- encode --engine ray --------------------------------------------------------------------------------------
ENCODE_MANIFEST = "encode.json"


def ray_encode(
    corpus: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    encoder: dict[str, Any],
    transform_file: str | os.PathLike[str] | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    cpus_per_worker: float = 1.0,
    gpus_per_worker: float = 0.0,
    unit_bytes: int | None = None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Encode a corpus to Parquet shards in the folder ``out`` (``shard-NNNNNN.parquet``: id, text, metadata,
    vector), through a saved transform if given; ``encode.json`` (written last) lists the shards, counts and
    the encoder. Resumable like :func:`ray_build`: the shards already written are kept; a second encode into the
    same ``out`` while one runs is refused. Returns that listing."""
    require_ray()
    folder = Path(out).expanduser()
    if folder.exists() and not folder.is_dir():
        raise BadInputError(f"{folder} exists and is not a folder; --engine ray writes a folder of Parquet shards")
    files = corpus_files(corpus)
    unit_bytes = unit_bytes or auto_unit_bytes(files)
    units = plan_units(files, unit_bytes)
    transform_path = None if transform_file is None else str(Path(transform_file).expanduser().resolve())
    config = {
        "files": _file_fingerprint(files),
        "unit_bytes": unit_bytes,
        "encoder": encoder,
        "transform": transform_path,
    }
    with build_lock(folder):
        state = folder / STATE
        if folder.exists() and any(folder.iterdir()):
            try:
                same = json.loads(state.read_text(encoding="utf-8")).get("config") == config
            except (OSError, ValueError):
                same = False
            if not same:
                raise BadInputError(
                    f"{folder} is not empty and holds no unfinished encode of this corpus with these settings; "
                    "choose another --out"
                )
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ENCODE_MANIFEST).unlink(missing_ok=True)
        write_json(state, {"config": config})
        with ray_session(ray_address, quiet=quiet) as ray:
            counts = encode_units(
                ray,
                units,
                folder,
                folder / ENCODED_LOG,
                encoder,
                workers=workers,
                cpus_per_worker=cpus_per_worker,
                gpus_per_worker=gpus_per_worker,
                moments=False,
                transform_file=transform_path,
            )
        for unit in units:
            (folder / _hashes_name(unit.index)).unlink(missing_ok=True)
        listing = {
            "shards": [{"file": shard_name(u.index), "rows": counts[u.index], "source": u.file} for u in units],
            "count": sum(counts.values()),
            "encoder": encoder,
            "transform": transform_path,
        }
        write_json(folder / ENCODE_MANIFEST, listing)
        return listing
