"""A corpus file built into an index (``whitevec index build``): here (:func:`whitevec.index.build_index`) or on
Ray (:func:`whitevec.engines.ray.ray_build`, the documents kept in Milvus)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from whitevec.datasets.paths import existing_file
from whitevec.encoders.protocol import check_empty_documents
from whitevec.engines import check_engine, make
from whitevec.errors import BadInputError
from whitevec.preflight import check_encoder, check_output, check_texts, existing_folder, input_file

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder
    from whitevec.index import SearchResults

# The pooling of an index when none is named and the model folder has no sentence-transformers modules.
INDEX_POOLING = "last-avg"


@dataclass(frozen=True)
class BuiltIndex:
    """What :func:`build_index_file` wrote: the index folder ``path``; ``description``, the index as
    :class:`~whitevec.index.Retriever` shows it after a local build, or None after a Ray build."""

    path: Path
    description: str | None = None

    def __str__(self) -> str:
        if self.description is None:
            return f"{self.path} (Ray engine; documents in Milvus)"
        return f"{self.path}: {self.description}"


def build_index_file(
    corpus: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    encoder: Mapping[str, Any],
    engine: str = "local",
    transform: str = "none",
    fit_on: str = "corpus",
    kind: str = "flat",
    metric: str = "cosine",
    backend: str = "faiss",
    uri: str | None = None,
    index_params: dict[str, Any] | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    gpus_per_worker: float = 0.0,
    fit_sample: int | None = None,
    fit_seed: int = 0,
    show_progress: bool | None = None,
    make_encoder: Callable[..., AnyEncoder] | None = None,
    empty_documents: str | None = None,
    lexical: str | None = None,
    analyzer: str = "english",  # = DEFAULT_ANALYZER; whitevec.index is too heavy to import here
    search: Mapping[str, str] | None = None,
    keep_raw_vectors: bool = False,
) -> BuiltIndex:
    """Encode the corpus file ``corpus``, fit ``transform`` and write the index folder ``out``; the arguments
    are those of :meth:`whitevec.index.Retriever.build`. ``encoder``'s ``pooling`` None: the model folder's
    sentence-transformers pooling, else ``last-avg``. Checked first: the corpus (every row parsed), the
    ``fit_on`` and transform files, the model and its cache, room for the index in ``out``'s folder, the index
    options against the stored dimension.

    ``engine="ray"``: built by :func:`whitevec.engines.ray.ray_build` on ``workers`` actors at
    ``ray_address`` into Milvus (``backend="milvus"``; ``corpus`` may be a glob of shards; the transform fitted
    on the corpus, on ``fit_sample`` vectors drawn with ``fit_seed`` when given).

    ``empty_documents`` (``skip``, ``keep``, ``error``; None: ``skip``): what becomes of documents with no token
    the model knows (see :meth:`whitevec.index.Retriever.build`). The Ray engine indexes every document (None or
    ``keep``; the others are refused). ``lexical`` and ``analyzer``: the BM25 index beside the vectors (see
    :meth:`whitevec.index.Retriever.build`); on Milvus (``--backend milvus``, ``--engine ray``) Milvus's own
    BM25 on the collection's text field (:mod:`whitevec.index.milvus.bm25`). ``search``: the index's own search
    mode and fusion (``{"mode", "fusion"}``, from a tuned configuration; local builds). ``keep_raw_vectors``:
    keep the encoder's vectors for a refit without encoding (local builds on faiss)."""
    empty = None if empty_documents is None else check_empty_documents(empty_documents)
    options: dict[str, Any] = dict(kind=kind, metric=metric, backend=backend, uri=uri, index_params=index_params)
    if _check_keep_raw_vectors(keep_raw_vectors, engine, backend):
        _check_ray_options(empty, fit_sample, transform, lexical, analyzer, search)
        ray = {"ray_address": ray_address, "workers": workers, "gpus_per_worker": gpus_per_worker}
        sample = {"fit_sample": fit_sample, "fit_seed": fit_seed, "lexical": lexical, "analyzer": analyzer}
        quiet = show_progress is False
        return _build_on_ray(corpus, out, encoder, transform, fit_on, quiet=quiet, **options, **ray, **sample)
    if fit_sample is not None:
        raise BadInputError("--fit-sample is for --engine ray; a local build fits on every vector it encodes")
    from whitevec.datasets.retrieval import read_corpus_file

    docs = read_corpus_file(corpus)
    input_file(fit_on, "--fit-on file", keywords=("corpus",))
    check_transform_file(transform)
    dim = _check_room(corpus, out, encoder, len(docs), keep_raw_vectors)
    from whitevec.index import Retriever, check_build, stored_dim

    searched: dict[str, Any] = {"lexical": lexical, "analyzer": analyzer, "search": search}  # BM25, search
    check_build(out, **options, dim=stored_dim(transform, dim), **searched)
    pooling = index_pooling(encoder["model"], encoder.get("pooling"))
    kept: dict[str, Any] = {"empty_documents": empty or "skip", "keep_raw_vectors": keep_raw_vectors}
    with (
        make({**encoder, "pooling": pooling}, make_encoder) as model,
        Retriever.build(
            docs,
            out,
            encoder=model,
            transform=transform,
            fit_on=fit_on,
            show_progress=show_progress,
            **kept,  # what the index keeps
            **searched,
            **options,
        ) as retriever,
    ):
        return BuiltIndex(Path(out), repr(retriever))


def _check_room(
    corpus: str | os.PathLike[str],
    out: str | os.PathLike[str],
    encoder: Mapping[str, Any],
    count: int,
    keep_raw_vectors: bool = False,
) -> int:
    """The model's width, once its folder and cache are checked, and room in ``out``'s folder for the document
    store (about twice the corpus file, with SQLite's overhead) and ``count`` float32 vectors (twice with
    ``keep_raw_vectors``)."""
    dim = check_encoder(encoder["model"], encoder.get("cache", True))
    need = 2 * Path(corpus).expanduser().stat().st_size + count * dim * 4 * (2 if keep_raw_vectors else 1)
    check_output(out, "index folder", need_bytes=need, folder=True)
    return dim


def _check_keep_raw_vectors(keep_raw_vectors: bool, engine: str, backend: str) -> bool:
    """Whether the build runs on Ray; ``keep_raw_vectors`` refused (one line) there or on a backend other than
    faiss: a refit from kept vectors rewrites the segments of a FAISS index, and Milvus keeps its vectors
    elsewhere."""
    on_ray = check_engine(engine)
    # Here, not only in build_index (raw_vectors.check_keep_raw_vectors): before whitevec.index is imported.
    if keep_raw_vectors and on_ray:
        raise BadInputError(
            "--keep-raw-vectors is for --engine local builds; a Ray build keeps none: leave it out"
        )
    if keep_raw_vectors and backend.strip().lower() != "faiss":
        raise BadInputError(
            f"--keep-raw-vectors is for --engine local builds on --backend faiss; a {backend} index keeps none: "
            "leave it out"
        )
    return on_ray


def _check_ray_options(
    empty: str | None,
    fit_sample: int | None,
    transform: str,
    lexical: str | None,
    analyzer: str,
    search: Mapping[str, str] | None = None,
) -> None:
    """The options a Ray build refuses: leaving documents out, a fit sample with nothing to fit, an analyzer
    Milvus cannot reproduce, a tuned search mode (recorded by local builds only), all before Ray starts."""
    from whitevec.index.lexical.bm25 import check_lexical

    check_lexical(lexical, analyzer, "milvus")
    if search is not None and search.get("mode") != "dense":
        raise BadInputError(
            f"a configuration's {search.get('mode')} search mode is recorded by --engine local builds only; with "
            "--engine ray, build with --lexical bm25 (hybrid, the default fusion) and no --config mode"
        )
    if empty not in (None, "keep"):
        raise BadInputError(f"--engine ray indexes every document; --empty-documents {empty} is for a local build")
    if fit_sample is not None and str(transform) == "none":
        raise BadInputError(
            "--fit-sample draws the vectors a transform is fitted on; --transform none fits nothing"
        )


def _build_on_ray(
    corpus: str | os.PathLike[str],
    out: str | os.PathLike[str],
    encoder: Mapping[str, Any],
    transform: str,
    fit_on: str,
    **options: Any,
) -> BuiltIndex:
    """The Ray build, after what it needs beyond ray_build's own checks: Ray, a Milvus backend, the corpus as
    the fit data, the transform file, the sample, the model, ``out`` writable."""
    from whitevec.engines.ray import actor_encoder, check_backend, check_fit_sample, ray_build, require_ray

    require_ray()
    check_backend(options["backend"])
    if input_file(fit_on, "--fit-on file", keywords=("corpus",)) is not None:
        raise BadInputError("--engine ray fits the transform on the corpus; leave --fit-on out")
    check_transform_file(transform)
    check_fit_sample(options["fit_sample"], options["fit_seed"])
    check_encoder(encoder["model"], False)
    check_output(out, "index folder", folder=True)
    actors = {**actor_encoder(encoder), "pooling": index_pooling(encoder["model"], encoder.get("pooling"))}
    return BuiltIndex(ray_build(str(corpus), out, encoder=actors, transform=transform, **options))


def check_transform_file(transform: str) -> None:
    """A transform given as a file must exist (a one-line DataNotFoundError before anything loads)."""
    if transform.strip().lower().endswith(".safetensors"):
        existing_file(transform, "transform file")


def index_pooling(model: str, pooling: str | None) -> str:
    """``pooling``, or an index's default for ``model``: ``static`` for a static folder, the folder's own modules
    (``model``), else last-avg."""
    if pooling:
        return pooling
    from whitevec.encoders.loading import default_pooling_of

    return default_pooling_of(model, INDEX_POOLING)


def search_index(
    index_dir: str | os.PathLike[str],
    queries: Sequence[str] | None,
    *,
    k: int = 10,
    device: str | None = None,
    config: str | os.PathLike[str] | None = None,
    model: str | os.PathLike[str] | None = None,
    mode: str | None = None,
    fusion: str | None = None,
    candidates: int | None = None,
    filter: str | None = None,
    query_vectors: str | os.PathLike[str] | None = None,
) -> SearchResults:
    """The ``k`` best hits of each query in the index ``index_dir``, queries encoded with the index's own model
    (found where ``model`` says when it moved), pooling and transform (a query with no token the model knows: no
    hits and a note, see :meth:`whitevec.index.Retriever.search`), in ``mode`` with ``fusion`` and
    ``candidates`` (None: the index's own; see :mod:`whitevec.index.search.fusion`). Checked before the index
    loads: the folder, that it follows the tuned configuration ``config`` when one is given, the mode, fusion and
    candidates (a lexical or hybrid search needs a lexical part), that no query is blank (as HTTP /search refuses
    one), and the metadata ``filter`` (:mod:`whitevec.index.filters.language`: its syntax, and, for documents kept
    in the folder, its fields and their kinds). ``query_vectors``: a ``.npy`` / ``.safetensors`` file of the
    queries' vectors in the encoder's space (a row per query; beside ``queries`` for a hybrid search), checked by
    its name first; an index of given vectors searches densely with them alone."""
    existing_folder(index_dir, "index folder")
    if query_vectors is not None:
        from whitevec.index.given_vectors import check_vectors_file

        check_vectors_file(query_vectors, "--query-vectors")
    elif not queries:
        raise BadInputError("give one or more queries, or --query-vectors FILE")
    from whitevec.index import read_manifest
    from whitevec.index.search.modes import plan_search, search_defaults

    # The fields suffice here (Retriever.load verifies every file); a tuned configuration's check verifies too.
    manifest = read_manifest(index_dir, verify=config is not None)
    if config is not None:
        from whitevec.tuning.config import TunedConfig

        TunedConfig.load(config).check_index(manifest, where=f"index {index_dir}")
    has_lexical = manifest.get("lexical") is not None
    plan_search(mode, fusion, candidates, defaults=search_defaults(manifest), has_lexical=has_lexical)
    if queries:
        check_texts(queries)
    from whitevec.index.filters.language import parse_filter
    from whitevec.index.versions import check_filter_in_folder

    parsed = None if filter is None else parse_filter(filter)
    if parsed is not None:
        check_filter_in_folder(index_dir, parsed)
    from whitevec.index import Retriever

    with Retriever.load(index_dir, device=device, model=model) as retriever:
        return retriever.search(
            queries or None,
            k=k,
            mode=mode,
            fusion=fusion,
            candidates=candidates,
            filter=parsed,
            query_vectors=query_vectors,
        )
