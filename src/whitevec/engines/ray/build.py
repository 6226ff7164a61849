"""``ray_build``: the steps of :mod:`whitevec.engines.ray` in order, from the checked plan to the published
index folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.datasets.shards import CorpusUnit, corpus_files, plan_units
from whitevec.engines.ray.collection import open_collection, write_vectors
from whitevec.engines.ray.moments import check_fit_sample, fit_on_sample, merge_moments, transform_plan
from whitevec.engines.ray.pipeline import encode_units
from whitevec.engines.ray.session import RayConnectionError, check_address, ray_session, require_ray
from whitevec.engines.ray.shards import auto_unit_bytes, check_ids
from whitevec.engines.ray.workdir import (
    ENCODED_LOG,
    build_lock,
    discard_work,
    file_fingerprint,
    open_work,
    work_folder,
)
from whitevec.errors import BadInputError, WhitevecError
from whitevec.index.build import check_build, check_target, encoder_fields
from whitevec.index.build_transform import transform_info
from whitevec.index.folder.layout import TRANSFORM_FILE
from whitevec.index.folder.manifest import write_manifest
from whitevec.index.lexical.analyzers import DEFAULT_ANALYZER
from whitevec.index.lexical.bm25 import check_lexical
from whitevec.index.milvus.bm25 import bm25_record, milvus_bm25_settings, warn_lite_analyzer
from whitevec.index.milvus.documents import MilvusDocs, check_documents_encoding
from whitevec.index.milvus.store import DOC_TEXT_BYTES, MILVUS_LOCAL, MilvusStore, is_local_uri
from whitevec.index.stores.vector import check_choice, replaced_entries
from whitevec.transforms import Transform
from whitevec.transforms.whitening import Whitening
from whitevec.utils.io import atomic_dir


def check_backend(backend: str) -> None:
    """The Ray engine writes to Milvus: BadInputError for any other backend."""
    if backend.strip().lower() != "milvus":
        raise BadInputError(
            f"--engine ray writes to Milvus; --backend {backend} is not supported with it. Use --backend milvus "
            "(a server with --uri http://host:19530, or Milvus Lite), or --engine local for FAISS."
        )


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
    lexical: str | None = None,
    analyzer: str = DEFAULT_ANALYZER,
) -> Path:
    """Build the index ``out`` from ``corpus`` on Ray (see :mod:`whitevec.engines.ray`); returns ``out``.

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
        lexical=lexical,
        analyzer=analyzer,
    )
    pool = _Pool(ray_address, workers, cpus_per_worker, gpus_per_worker, quiet)
    with build_lock(plan.target):
        _run_build(plan, pool, started)
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
    bm25: dict[str, Any] | None = None  # Milvus's BM25 settings (--lexical bm25), else None


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
    lexical: str | None = None,
    analyzer: str = DEFAULT_ANALYZER,
) -> _BuildPlan:
    """Step 1: everything checked that can be before Ray starts, and the corpus cut into units."""
    check_backend(backend)
    require_ray()
    if ray_address:
        check_address(ray_address)
    check_build(
        target,
        kind=kind,
        metric=metric,
        backend="milvus",
        uri=uri,
        index_params=index_params,
        lexical=lexical,
        analyzer=analyzer,
    )
    bm25 = _bm25_settings(lexical, analyzer, uri)
    check_documents_encoding(index_params)
    kind, metric = kind.strip().lower(), check_choice(metric, ("cosine", "ip", "l2"), "metric")
    check_fit_sample(fit_sample, fit_seed)
    fitted, spec, needs_fit = transform_plan(transform, sampled=fit_sample is not None)
    files = corpus_files(corpus)
    unit_bytes = unit_bytes or auto_unit_bytes(files)
    units = plan_units(files, unit_bytes)
    if uri is not None and is_local_uri(uri):
        uri = str(Path(uri).expanduser().resolve())
    config = {
        "files": file_fingerprint(files),
        "unit_bytes": unit_bytes,
        "encoder": encoder,
        "transform": spec,
        "fit_sample": fit_sample,
        "fit_seed": fit_seed,
        "kind": kind,
        "metric": metric,
        "index_params": index_params,
        "uri": uri,
        **({} if bm25 is None else {"lexical": bm25}),  # a resumed run must keep the same text field
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
        bm25,
    )


def _bm25_settings(lexical: str | None, analyzer: str, uri: str | None) -> dict[str, Any] | None:
    """Milvus's BM25 settings for ``--lexical bm25`` (checked by ``check_build``), else None; warns on Milvus
    Lite, whose analyzer does not stem."""
    if check_lexical(lexical, analyzer, "milvus") is None:
        return None
    settings = milvus_bm25_settings(analyzer)
    if uri is None or is_local_uri(uri):
        warn_lite_analyzer(settings)
    return settings


def _run_build(plan: _BuildPlan, pool: _Pool, started: float) -> None:
    """Steps 2 to 5 in the work folder (resumed when an earlier run of the same build left one), which is
    removed once the index is published; a replaced index's collection elsewhere is dropped last."""
    folder = work_folder(plan.target)
    state = open_work(folder, plan.config)
    encoded = _encode_and_fit(plan, pool, folder, state)
    store = open_collection(
        folder, state, encoded.dim, plan.metric, plan.kind, plan.index_params, plan.uri, bm25=plan.bm25
    )
    try:
        write_vectors(store, folder, plan.units, encoded.counts, plan.fitted, plan.metric)
        replaced = _publish(plan, encoded, folder, store, started)
    finally:
        store.close()
    shutil.rmtree(folder, ignore_errors=True)
    if replaced is not None:
        with contextlib.suppress(BadInputError):
            MilvusStore.discard(replaced)


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
        check_ids(folder, plan.units, counts)
        rows = 0
        if plan.needs_fit and plan.fit_sample is not None:
            assert plan.fitted is not None
            rows = fit_on_sample(folder, plan.units, counts, plan.fitted, plan.fit_sample, plan.fit_seed)
        elif plan.needs_fit:
            assert isinstance(plan.fitted, Whitening)
            rows = merge_moments(folder, plan.units, counts, plan.fitted)
    except RayConnectionError:
        raise  # nothing wrong with the build: keep its work for the next run
    except BadInputError:
        discard_work(folder, state)
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

    with atomic_dir(plan.target, before_swap=note_replaced, owned=lambda: replaced_entries(replaced[0])) as tmp:
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
            MilvusStore.library: MilvusStore.library_version(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "build_seconds": round(time.perf_counter() - started, 3),
            **({} if plan.bm25 is None else {"lexical": bm25_record(plan.bm25, total)}),
        }
        write_manifest(tmp, manifest, names)
    return replaced[0]
