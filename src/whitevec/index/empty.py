"""An index created empty (:meth:`whitevec.index.Retriever.create`): its settings and no documents, grown by
writes.

Its folder holds the manifest (with an ``unfilled`` record), an empty document store and, when the transform
came fitted, the transform: no vector store or lexical files, which a store can only write of vectors it holds
(IVF lists, codebooks and 1-bit codes train on them). A load searches stand-ins that hold nothing
(:class:`NoVectors`, :class:`NoTerms`: every search answers "the index holds no documents"). Its first write is a
build of that write's documents with the index's settings (:func:`first_write_options`): the transform is fitted
on their vectors then, and refused in one line while a write brings fewer rows than it needs
(:func:`check_first_write`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from whitevec.errors import BadInputError
from whitevec.index.build import (
    check_build,
    check_given_encoder,
    check_target,
    checked_search,
    encoder_fields,
    stored_dim,
)
from whitevec.index.build_transform import is_fitted, resolve_transform, transform_info
from whitevec.index.folder.layout import DOCS_FILE, TRANSFORM_FILE
from whitevec.index.folder.manifest import write_manifest
from whitevec.index.folder.raw_vectors import RAW_FIELD, check_keep_raw_vectors, raw_record
from whitevec.index.lexical.analyzers import Analyzer, make_analyzer
from whitevec.index.lexical.bm25 import DEFAULT_B, DEFAULT_K1, DEFAULT_METHOD, DELTA, check_lexical
from whitevec.index.segments.writing import rebuild_options
from whitevec.index.stores.sqlite_docs import write_docs
from whitevec.index.stores.vector import replaced_entries, store_class
from whitevec.utils.io import atomic_dir

if TYPE_CHECKING:
    from whitevec.encoders.protocol import EncoderLike
    from whitevec.transforms import Transform

UNFILLED = "unfilled"  # the manifest's record of an index created empty, until its first write


def is_unfilled(manifest: Mapping[str, Any]) -> bool:
    """Whether ``manifest`` is of an index created empty that no write has filled yet."""
    return UNFILLED in manifest


def create_index(
    out: str | os.PathLike[str],
    *,
    encoder: EncoderLike,
    transform: str | Transform | None = "none",
    kind: str = "flat",
    metric: str = "cosine",
    backend: str = "faiss",
    index_params: dict[str, Any] | None = None,
    lexical: str | None = None,
    analyzer: str = "english",
    search: Mapping[str, str] | None = None,
    keep_raw_vectors: bool = False,
) -> Path:
    """Write an empty index at ``out`` with these settings (see :meth:`whitevec.index.Retriever.create`); every
    check a build makes before encoding is made here. Returns ``out``."""
    started = time.perf_counter()
    target = Path(out).expanduser()
    check_given_encoder(encoder, given_vectors=True, backend=backend, fit_on="corpus", analyzer=analyzer)
    check_keep_raw_vectors(keep_raw_vectors, backend)
    obj, spec = resolve_transform(transform)
    if obj is not None and not is_fitted(obj) and not isinstance(transform, str):
        raise BadInputError("an empty index records its transform by spec: give a spec string or a fitted one")
    fitted = obj if obj is not None and is_fitted(obj) else None
    encoder_dim = int(encoder.describe()["dim"])
    dim = _stored_dim(fitted, spec, encoder_dim)
    options: dict[str, Any] = dict(kind=kind, metric=metric, backend=backend, uri=None, index_params=index_params)
    previous = check_build(target, **options, dim=dim, lexical=lexical, analyzer=analyzer, search=search)
    ranker = check_lexical(lexical, analyzer, backend)
    store = store_class(backend).create(target, dim, metric, kind.strip().lower(), index_params, None)
    manifest: dict[str, Any] = {
        **encoder_fields(encoder),
        "dim": dim,
        "transform": None if fitted is None or spec is None else transform_info(fitted, spec, "given", 0),
        "metric": metric.strip().lower(),
        "index_kind": kind.strip().lower(),
        "index_params": store.params(),
        "count": 0,
        "backend": store.name,
        **store.location(),
        store.library: store.library_version(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **({} if ranker is None else {"lexical": _empty_lexical_record(make_analyzer(analyzer, encoder))}),
        **({} if search is None else {"search": checked_search(search, has_lexical=ranker is not None)}),
        **({RAW_FIELD: raw_record()} if keep_raw_vectors else {}),
        **({} if previous is None else {"generation": int(previous.get("generation", 0)) + 1}),
        UNFILLED: {"transform": spec if fitted is None else None},
    }
    replaced: list[dict[str, Any] | None] = [previous]

    def note_replaced() -> None:  # under the writers' lock: the version really replaced (a user's files kept)
        replaced[0] = check_target(target)

    with atomic_dir(target, before_swap=note_replaced, owned=lambda: replaced_entries(replaced[0])) as tmp:
        files = [DOCS_FILE]
        write_docs(tmp / DOCS_FILE, [])
        if fitted is not None:
            fitted.save(tmp / TRANSFORM_FILE)
            files.append(TRANSFORM_FILE)
        manifest["build_seconds"] = round(time.perf_counter() - started, 3)
        write_manifest(tmp, manifest, files)
    return target


def _stored_dim(fitted: Transform | None, spec: str | None, encoder_dim: int) -> int:
    """The dimension the index will store: a fitted transform's output, or what the spec keeps."""
    if fitted is not None:
        return int(fitted.transform(np.zeros((1, encoder_dim), dtype=np.float32)).shape[1])
    return stored_dim(spec, encoder_dim) or encoder_dim


def _empty_lexical_record(analyzer: Analyzer) -> dict[str, Any]:
    """The manifest's ``lexical`` record of an index without documents: the analyzer and bm25s's parameters the
    first write's build will use, every count 0."""
    import bm25s

    return {
        "ranker": "bm25",
        "library": f"bm25s {bm25s.__version__}",
        "method": DEFAULT_METHOD,
        "k1": DEFAULT_K1,
        "b": DEFAULT_B,
        "delta": DELTA,
        "analyzer": analyzer.record(),
        "documents": 0,
        "documents_without_terms": 0,
        "terms": 0,
        "postings": 0,
        "build_seconds": 0.0,
    }


def rows_needed(manifest: Mapping[str, Any]) -> int:
    """How many documents the first write of an unfilled index must bring for its transform's fit: one more than
    the directions a whitening or PCA keeps (fewer leave its covariance singular), 2 for another transform, 1
    without one."""
    spec = manifest[UNFILLED]["transform"]
    if spec is None:
        return 1
    from whitevec.transforms import make_transform

    kept = getattr(make_transform(spec), "n_components", False)
    if kept is False:
        return 2
    return (stored_dim(spec, int(manifest["encoder_dim"])) or int(manifest["encoder_dim"])) + 1


def check_first_write(manifest: Mapping[str, Any], rows: int) -> None:
    """Refuse in one line a first write that brings fewer documents than the transform's fit needs."""
    needed = rows_needed(manifest)
    if rows < needed:
        spec = manifest[UNFILLED]["transform"]
        raise BadInputError(
            f"this empty index fits its transform {spec} on its first write, which needs at least {needed} "
            f"documents; this one brings {rows}. Add them together (nothing was written)"
        )


def first_write_options(manifest: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """The arguments of :func:`whitevec.index.build.build_index` that build an unfilled index's first version: its
    settings, the transform pending (or the fitted one its folder holds), its raw vectors kept if it keeps them."""
    pending = manifest[UNFILLED]["transform"]
    given = str(folder / TRANSFORM_FILE) if manifest["transform"] is not None else "none"
    options = rebuild_options(dict(manifest), pending or given)
    return {**options, "keep_raw_vectors": RAW_FIELD in manifest}


class NoVectors:
    """The vector store an unfilled index is searched with: nothing to find."""

    def __init__(self, manifest: Mapping[str, Any]) -> None:
        self.name = str(manifest["backend"])
        self.dim, self.metric, self.kind = int(manifest["dim"]), str(manifest["metric"]), manifest["index_kind"]
        self._params = dict(manifest["index_params"])
        self.count = 0

    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def search(self, vectors: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[Any, Any]:
        n = len(vectors)
        return np.zeros((n, k), np.float32), np.full((n, k), -1, np.int64)

    def close(self) -> None:
        return None


class NoTerms:
    """The lexical ranker an unfilled index is searched with: its analyzer, nothing to find."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.analyzer = Analyzer.from_record(record["analyzer"])
        self.count = 0
        self.documents_without_terms = 0

    def has_terms(self, queries: Sequence[str]) -> np.ndarray:
        return np.fromiter((bool(terms) for terms in self.analyzer.analyze(list(queries))), dtype=bool)

    def search(self, queries: Sequence[str], depth: int, allowed: np.ndarray | None = None) -> tuple[Any, Any]:
        n = len(queries)
        return np.full((n, depth), -1, np.int64), np.zeros((n, depth), np.float32)
