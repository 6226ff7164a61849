"""Building an index folder: check what is cheap first, then encode, fit the transform, store, publish.

The folder is written through ``whitevec.utils.io.atomic_dir`` (built in a temporary sibling folder and swapped in
whole, see :mod:`whitevec.index.folder.layout`); ``manifest.json`` is written last, so a leftover temporary folder
is never loadable as an index.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from whitevec.datasets.retrieval import ID_RULE, Document, check_unique_ids, is_exact_id, read_corpus_file
from whitevec.encoders.models.identity import check_model_checksum, model_record
from whitevec.encoders.protocol import EXTERNAL, ExternalEncoder, check_empty_documents, known_token_mask
from whitevec.errors import BadInputError, CorruptFileError, DimensionMismatchError, WhitevecWarning
from whitevec.index.build_fusion import build_fusion_choice, choice_fields
from whitevec.index.build_transform import fit_transform
from whitevec.index.encodings.spec import parse_encoding
from whitevec.index.folder.layout import DOCS_FILE, TRANSFORM_FILE
from whitevec.index.folder.manifest import MANIFEST, write_manifest
from whitevec.index.folder.raw_vectors import RAW_FIELD, check_keep_raw_vectors, raw_record, write_raw_vectors
from whitevec.index.folder.snapshot import read_manifest
from whitevec.index.given_vectors import checked_vectors
from whitevec.index.lexical.bm25 import (
    DEFAULT_ANALYZER,
    LexicalIndex,
    check_lexical,
    make_analyzer,
    warn_documents_without_terms,
)
from whitevec.index.lexical.counts import TermCounts
from whitevec.index.search.fusion import parse_fusion
from whitevec.index.search.modes import parse_mode, search_field_problem
from whitevec.index.stores.sqlite_docs import metadata_json, write_docs
from whitevec.index.stores.vector import (
    ENCODING,
    KINDS,
    METRICS,
    KeepsLexical,
    VectorStore,
    check_choice,
    keeps_lexical,
    replaced_entries,
    store_class,
    stored_form,
)
from whitevec.utils.io import atomic_dir, check_writable_parent

if TYPE_CHECKING:
    from whitevec.encoders.protocol import EncoderLike
    from whitevec.transforms import Transform

# The ids a warning about documents without a known token names.
_NAMED_IDS = 5


def meaningful_documents(docs: list[Document], encoder: EncoderLike, empty_documents: str) -> list[Document]:
    """The documents to index: those with a token ``encoder`` knows
    (:func:`whitevec.encoders.protocol.known_token_mask`),
    the others counted in one WhitevecWarning naming the first few ids. ``empty_documents``: ``skip`` leaves them
    out (they could only come back as noise: every one is the same point), ``keep`` indexes them as they encode,
    ``error`` refuses them in one line (a BadInputError, before anything is written)."""
    choice = check_empty_documents(empty_documents)
    known = known_token_mask(encoder, [d.text for d in docs])
    if known.all():
        return docs
    empty = [d.id for d, ok in zip(docs, known, strict=True) if not ok]
    named = ", ".join(repr(i) for i in empty[:_NAMED_IDS]) + (", ..." if len(empty) > _NAMED_IDS else "")
    what = f"{len(empty)} of {len(docs)} documents have no token the model knows ({named})"
    if choice == "error":
        raise BadInputError(f"{what}; fix or drop them, or choose --empty-documents skip or keep")
    warnings.warn(
        f"{what}; {'indexed as they are' if choice == 'keep' else 'not indexed'}", WhitevecWarning, stacklevel=3
    )
    return docs if choice == "keep" else [d for d, ok in zip(docs, known, strict=True) if ok]


def as_documents(corpus: Sequence[Document] | str | os.PathLike[str]) -> list[Document]:
    """A corpus file read (see ``whitevec.datasets.retrieval``), or a list of Documents checked one by one."""
    if isinstance(corpus, str | os.PathLike):
        return read_corpus_file(corpus)
    docs = list(corpus)
    for i, doc in enumerate(docs):
        if not isinstance(doc, Document):
            raise BadInputError(f"corpus[{i}] is a {type(doc).__name__}, expected whitevec.index.Document")
        if not is_exact_id(doc.id):
            raise BadInputError(f"corpus[{i}] has id {doc.id!r}; {ID_RULE}")
        if not isinstance(doc.text, str):
            raise BadInputError(f"document {doc.id!r} has text of type {type(doc.text).__name__}, expected str")
        if doc.metadata is not None and not isinstance(doc.metadata, dict):  # filters read its fields
            raise BadInputError(
                f"document {doc.id!r} has metadata of type {type(doc.metadata).__name__}; metadata is a dict of "
                "field names to values (a JSON object), or None"
            )
        try:
            doc.id.encode("utf-8")
            doc.text.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInputError(
                f"document {i} ({doc.id!r}) holds a lone surrogate (\\ud800-\\udfff), which is not text; fix it"
            ) from None
        metadata_json(doc)  # refused before any encoding: NaN, a lone surrogate, too deep, not JSON
    return docs


def check_target(out: Path) -> dict[str, Any] | None:
    """Refuse to replace anything but an earlier index; return the earlier index's manifest if there is one."""
    if not out.exists():
        return None
    if not out.is_dir():
        raise BadInputError(f"{out} exists and is not a folder; choose another --out")
    if (out / MANIFEST).is_file():
        try:
            return read_manifest(out, verify=False)
        except CorruptFileError:
            return None
    if any(out.iterdir()):
        raise BadInputError(f"{out} is a non-empty folder that is not a whitevec index; refusing to replace it")
    return None


def check_build(
    out: str | os.PathLike[str],
    *,
    kind: str = "flat",
    metric: str = "cosine",
    backend: str = "faiss",
    uri: str | None = None,
    index_params: dict[str, Any] | None = None,
    dim: int | None = None,
    lexical: str | None = None,
    analyzer: str = DEFAULT_ANALYZER,
    search: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """Everything about a build that can be checked before any model loads or document is encoded.

    Checks the kind, metric, backend and index parameters (the encoding among them, against the kind and metric
    and the stored dimension ``dim`` when it is known: see :func:`stored_dim`), the URI's form, the lexical part
    (:func:`whitevec.index.lexical.bm25.check_lexical`), the index's own search mode and fusion ``search`` (a
    lexical or hybrid mode needs the lexical part), that ``out`` is absent, empty or an earlier index, and that
    its parent folder can be written. Returns the earlier index's manifest, if any.

    Raises:
        BadInputError: an unknown choice or parameter, or an ``out`` that must not be replaced.
        OSError: the parent folder of ``out`` cannot be created or written (EACCES, EROFS, ...).
    """
    check_choice(kind, KINDS, "index kind")
    check_choice(metric, METRICS, "metric")
    store_class(backend).check_options(kind.strip().lower(), index_params, uri)
    encoding = parse_encoding((index_params or {}).get(ENCODING))
    encoding.check_kind(kind.strip().lower(), metric.strip().lower())
    ranker = check_lexical(lexical, analyzer, backend)
    if search is not None:
        checked_search(search, has_lexical=ranker is not None)
    if dim is not None:
        encoding.check_dim(dim)
    target = Path(out).expanduser()
    previous = check_target(target)
    check_writable_parent(target)
    return previous


def checked_search(search: Mapping[str, str], *, has_lexical: bool) -> dict[str, str]:
    """The manifest's ``search`` field (``{"mode", "fusion"}``, canonical) from ``search``; a one-line
    BadInputError for a bad one, or for a lexical or hybrid mode without a lexical part."""
    problem = search_field_problem(dict(search) if isinstance(search, Mapping) else search)
    if problem is not None:
        raise BadInputError(f"the index's search defaults: {problem}")
    mode = parse_mode(search["mode"])
    if mode != "dense" and not has_lexical:
        raise BadInputError(f"an index searched in {mode} mode needs a lexical part; build it with --lexical bm25")
    return {"mode": mode, "fusion": parse_fusion(search["fusion"]).spec}


def _search_field(search: Mapping[str, str] | None, *, has_lexical: bool) -> dict[str, Any]:
    """The manifest's ``search`` field (the index's own mode and fusion), where one was given."""
    return {} if search is None else {"search": checked_search(search, has_lexical=has_lexical)}


def build_index(
    corpus: Sequence[Document] | str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    encoder: EncoderLike,
    transform: str | Transform | None = "none",
    fit_on: str | os.PathLike[str] = "corpus",
    kind: str = "flat",
    metric: str = "cosine",
    backend: str = "faiss",
    uri: str | None = None,
    index_params: dict[str, Any] | None = None,
    show_progress: bool | None = None,
    empty_documents: str = "skip",
    lexical: str | None = None,
    analyzer: str = DEFAULT_ANALYZER,
    search: Mapping[str, str] | None = None,
    keep_raw_vectors: bool = False,
    vectors: np.ndarray | None = None,
) -> Path:
    """Encode ``corpus`` (or take its ``vectors``, checked, a row per document in the encoder's space: every
    document kept), fit ``transform``, store the vectors, and the lexical index when ``lexical`` says so, and
    write the index folder ``out``; see :meth:`whitevec.index.Retriever.build` for the arguments. Returns ``out``.

    Raises:
        BadInputError: empty corpus, duplicate ids, unknown kind/metric/backend/params/lexical/analyzer, or
            ``out`` is something other than an earlier index; documents without a known token and
            ``empty_documents`` ``"error"``, or none with one; ``keep_raw_vectors`` on a backend other than
            faiss. Nothing is written in these cases.
    """
    started = time.perf_counter()
    target = Path(out).expanduser()
    options: dict[str, Any] = dict(kind=kind, metric=metric, backend=backend, uri=uri, index_params=index_params)
    check_keep_raw_vectors(keep_raw_vectors, backend)
    previous = check_build(target, **options, lexical=lexical, analyzer=analyzer, search=search)
    check_empty_documents(empty_documents)
    check_given_encoder(
        encoder, given_vectors=vectors is not None, backend=backend, fit_on=fit_on, analyzer=analyzer
    )
    if vectors is None:
        given, docs = documents_to_index(corpus, encoder, empty_documents)
    else:  # each document came with its vector: all are kept
        given = docs = documents_to_index(corpus, None, "keep")[1]
        vectors = checked_vectors(vectors, rows=len(docs), dim=int(encoder.describe()["dim"]))
    in_store, lexical_index = _lexical_plan(store_class(backend), lexical, analyzer, docs, encoder)
    if vectors is None:
        vectors = encoder.encode([d.text for d in docs], show_progress=show_progress)
    fitted, transform_record = fit_transform(transform, fit_on, vectors, encoder, show_progress)
    encoded = _Encoded(len(given), docs, vectors, fitted, transform_record, keep_raw_vectors)
    lexical_plan = (in_store, lexical_index, analyzer, search)
    _write_index(target, previous, encoded, options, encoder_fields(encoder), lexical_plan, started, encoder)
    return target


def build_from_vectors(
    docs: Sequence[Document],
    vectors: np.ndarray,
    out: str | os.PathLike[str],
    *,
    encoder: EncoderLike,
    encoder_record: Mapping[str, Any],
    transform: str | Transform | None = "none",
    kind: str = "flat",
    metric: str = "cosine",
    index_params: dict[str, Any] | None = None,
    lexical: str | None = None,
    analyzer: str = DEFAULT_ANALYZER,
    search: Mapping[str, str] | None = None,
) -> Path:
    """:func:`build_index` of ``docs`` from their raw encoder ``vectors`` (a row each, as the encoder made them;
    every document kept), nothing encoded: the transform fitted on ``vectors``, the codes and the lexical part
    made as a build makes them, on the faiss backend, the raw vectors kept (what a refit from kept vectors
    writes: :mod:`whitevec.index.folder.raw_vectors`). ``encoder_record``: the manifest's fields of the encoder
    that made ``vectors`` (``encoder`` analyses text only, for an ``encoder`` lexical analyzer)."""
    started = time.perf_counter()
    target = Path(out).expanduser()
    options: dict[str, Any] = dict(kind=kind, metric=metric, backend="faiss", uri=None, index_params=index_params)
    previous = check_build(target, **options, lexical=lexical, analyzer=analyzer, search=search)
    docs = list(docs)
    if not docs or vectors.shape[0] != len(docs):
        raise BadInputError(f"{len(docs)} documents and {vectors.shape[0]} raw vectors: give one vector each")
    in_store, lexical_index = _lexical_plan(store_class("faiss"), lexical, analyzer, docs, encoder)
    fitted, transform_record = fit_transform(transform, "corpus", vectors, encoder, False)
    encoded = _Encoded(len(docs), docs, vectors, fitted, transform_record, keep_raw=True)
    lexical_plan = (in_store, lexical_index, analyzer, search)
    _write_index(target, previous, encoded, options, dict(encoder_record), lexical_plan, started, encoder)
    return target


@dataclass(frozen=True)
class _Encoded:
    """What a build made before writing: the documents ``given`` (counted) and kept, their raw vectors, the
    fitted transform and its manifest record, and whether the raw vectors are kept."""

    given: int
    docs: list[Document]
    vectors: np.ndarray
    fitted: Transform | None
    transform_record: dict[str, Any] | None
    keep_raw: bool


def _write_index(
    target: Path,
    previous: dict[str, Any] | None,
    encoded: _Encoded,
    options: dict[str, Any],
    encoder_record: dict[str, Any],
    lexical_plan: tuple[bool, LexicalIndex | None, str, Mapping[str, str] | None],
    started: float,
    encoder: EncoderLike,
) -> None:
    """Write the index folder ``target`` (in a temporary sibling, swapped in whole) from what the build made;
    with a bm25s lexical part and no ``search`` given, the fusion chosen on pseudo-queries (issue 53)."""
    in_store, lexical_index, analyzer, search = lexical_plan
    options = {**options, "kind": options["kind"].strip().lower(), "metric": options["metric"].strip().lower()}
    docs, fitted = encoded.docs, encoded.fitted
    stored = stored_form(fitted, encoded.vectors, options["metric"])
    choice = None
    if lexical_index is not None and search is None:
        texts = [d.text for d in docs]
        choice = build_fusion_choice(texts, stored, lexical_index, encoder, fitted, options["metric"])
    store: VectorStore | None = None
    replaced: list[dict[str, Any] | None] = [previous]

    def note_replaced() -> None:
        # Under the writers' lock, just before the swap: the version really replaced, which may be newer than
        # the one seen before encoding (its vectors, if they live outside the folder, are freed below).
        replaced[0] = check_target(target)

    try:
        with atomic_dir(target, before_swap=note_replaced, owned=lambda: replaced_entries(replaced[0])) as tmp:
            files: list[str] = []
            if fitted is not None:
                fitted.save(tmp / TRANSFORM_FILE)
                files.append(TRANSFORM_FILE)
            store = _filled_store(
                store_class(options["backend"]), tmp, stored, docs, options, analyzer if in_store else None
            )
            files += store.save(tmp)
            files += write_texts(tmp, docs, lexical_index)
            if encoded.keep_raw:
                files.append(write_raw_vectors(tmp, encoded.vectors))
            manifest = {
                **encoder_record,
                "dim": int(stored.shape[1]),
                "transform": encoded.transform_record,
                "metric": options["metric"],
                "index_kind": options["kind"],
                **_stored_fields(store, len(docs), encoded.given),
                "build_seconds": round(time.perf_counter() - started, 3),
                **_lexical_field(store, lexical_index, in_store, len(docs)),
                **_search_field(search, has_lexical=lexical_index is not None or in_store),
                **choice_fields(choice),
                **({RAW_FIELD: raw_record()} if encoded.keep_raw else {}),
                # Versions only grow: a rebuild or refit is the next version of the index it replaces.
                **({} if previous is None else {"generation": int(previous.get("generation", 0)) + 1}),
            }
            write_manifest(tmp, manifest, files)  # last: a folder without it is never an index
    except BaseException:
        if store is not None:
            with contextlib.suppress(Exception):
                store.drop()
        raise
    finally:
        if store is not None:
            store.close()
    _free_replaced(replaced[0])


def _free_replaced(manifest: dict[str, Any] | None) -> None:
    """Free what the replaced version kept outside its folder (a Milvus collection), if anything."""
    if manifest is not None:
        with contextlib.suppress(BadInputError):  # a backend this whitevec no longer has: nothing to free
            store_class(manifest["backend"]).discard(manifest)


def _lexical_field(
    store: VectorStore, index: LexicalIndex | None, in_store: bool, count: int
) -> dict[str, dict[str, Any]]:
    """The manifest's ``lexical`` field: the bm25s index's record, or the store's own (:class:`KeepsLexical`),
    or nothing."""
    if index is not None:
        return {"lexical": index.record()}
    return {"lexical": cast(KeepsLexical, store).lexical_record(count)} if in_store else {}


def _lexical_plan(
    stores: type[VectorStore], lexical: str | None, analyzer: str, docs: Sequence[Document], encoder: EncoderLike
) -> tuple[bool, LexicalIndex | None]:
    """``(in_store, index)``: whether the store keeps the lexical part itself (Milvus's BM25), and otherwise the
    bm25s index of ``docs`` a build writes beside the vectors (None without a lexical part)."""
    ranker = check_lexical(lexical, analyzer, stores.name)
    in_store = ranker is not None and keeps_lexical(stores)
    return in_store, None if in_store else lexical_part(ranker, analyzer, docs, encoder)


def _filled_store(
    stores: type[VectorStore],
    folder: Path,
    stored: np.ndarray,
    docs: Sequence[Document],
    options: dict[str, Any],
    analyzer: str | None,
) -> VectorStore:
    """A new store in ``folder`` holding ``stored`` (rows 0..n-1); with ``analyzer``, a store that keeps the
    lexical part itself (:class:`~whitevec.index.stores.vector.KeepsLexical`), given the documents' text too."""
    dim, ids = int(stored.shape[1]), np.arange(len(docs), dtype=np.int64)
    args = (folder, dim, options["metric"], options["kind"], options["index_params"], options["uri"])
    if analyzer is None:
        store = stores.create(*args)
    else:
        store = cast(VectorStore, cast(KeepsLexical, stores).create_lexical(*args, analyzer=analyzer))
    try:
        if analyzer is None:
            store.add(ids, stored)
        else:
            cast(KeepsLexical, store).add_with_texts(ids, stored, [d.text for d in docs])
    except BaseException:
        with contextlib.suppress(Exception):
            store.drop()
        store.close()
        raise
    return store


def documents_to_index(
    corpus: Sequence[Document] | str | os.PathLike[str], encoder: EncoderLike | None, empty_documents: str
) -> tuple[list[Document], list[Document]]:
    """``(given, kept)``: the corpus's documents, ids checked unique, and those the index keeps by
    ``empty_documents`` (see :func:`meaningful_documents`; all of them without an ``encoder``: vectors given);
    BadInputError when either is empty."""
    given = as_documents(corpus)
    if not given:
        raise BadInputError("the corpus is empty; give at least one document")
    check_unique_ids(given)
    kept = given if encoder is None else meaningful_documents(given, encoder, empty_documents)
    if not kept:
        raise BadInputError(f"none of the {len(given)} documents has a token the model knows; nothing to index")
    return given, kept


def write_texts(folder: Path, docs: Sequence[Document], lexical: LexicalIndex | None) -> list[str]:
    """The documents' store and their lexical index, if any, written into ``folder``: the lexical index in the
    same version as the vectors, never one of another build. The names written."""
    write_docs(folder / DOCS_FILE, docs)
    if lexical is None:
        return [DOCS_FILE]
    # The term counts too, taken while the build analysed the texts: without them the index's first write would
    # analyse every document again (22.6 s before adding 10 documents to 100,000).
    return [DOCS_FILE, *lexical.save(folder), TermCounts.of_build(lexical).save(folder)]


def lexical_part(
    ranker: str | None, analyzer: str, docs: Sequence[Document], encoder: EncoderLike
) -> LexicalIndex | None:
    """The lexical index of ``docs`` (rows in their order) for the ranker :func:`check_lexical` chose, or None;
    documents left without a term are counted in one warning (the vectors still find them). Made before the
    vectors: it costs little, and a fault in it should not wait for the encoding."""
    if ranker is None:
        return None
    made = LexicalIndex.build([d.text for d in docs], make_analyzer(analyzer, encoder), keep_counts=True)
    warn_documents_without_terms(made.documents_without_terms, made.count, made.analyzer.name)
    return made


def _stored_fields(store: VectorStore, count: int, given: int) -> dict[str, Any]:
    """The manifest's fields about what was stored and where."""
    return {
        "index_params": store.params(),
        "count": count,
        **({"skipped_documents": given - count} if count < given else {}),
        "backend": store.name,
        **store.location(),
        store.library: store.library_version(),  # "faiss" on FAISS, as every index before it recorded
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def stored_dim(transform: str | None, encoder_dim: int) -> int | None:
    """The dimension an index stores for a transform spec on ``encoder_dim``-d vectors, known before fitting:
    K for whitening-K (and its variants), ``encoder_dim`` for the others; None for a saved transform file."""
    if transform is None:
        return encoder_dim
    if transform.strip().lower().endswith(".safetensors"):
        return None
    from whitevec.transforms import make_transform

    made = make_transform(transform)
    k = getattr(made, "n_components", None)
    return encoder_dim if k is None else min(int(k), encoder_dim)


def encoder_fields(encoder: EncoderLike) -> dict[str, Any]:
    """What the manifest records of the encoder, so queries are encoded the same way, and of its model's folder
    (where it is, the name that finds it elsewhere, a checksum of its contents:
    ``whitevec.encoders.models.identity``;
    nulls for an encoder without a folder)."""
    folder = getattr(encoder, "model_path", None)
    described = encoder_description(encoder)
    if isinstance(encoder, ExternalEncoder):  # no model: loading makes none
        described["encoder"] = EXTERNAL
    if isinstance(folder, Path):
        return {**described, **model_record(described["model"], folder)}
    return {**described, "model_path": None, "model_id": None, "model_sha256": None}


def check_given_encoder(
    encoder: EncoderLike, *, given_vectors: bool, backend: str, fit_on: str | os.PathLike[str], analyzer: str
) -> None:
    """What a build of given vectors, or of an index whose encoder is external
    (:class:`~whitevec.encoders.protocol.ExternalEncoder`), cannot do, refused in one line before anything is
    read: another backend than faiss, a transform fitted on a text file, the ``encoder`` analyzer (no
    tokenizer)."""
    external = isinstance(encoder, ExternalEncoder)
    if not (given_vectors or external):
        return
    if str(backend).strip().lower() != "faiss":
        raise BadInputError("an index of given vectors is on the faiss backend only; choose --backend faiss")
    if external and str(fit_on) != "corpus":
        raise BadInputError("an index of given vectors encodes no text: its transform fits on its own vectors")
    if external and str(analyzer).strip().lower() == "encoder":
        raise BadInputError(
            "the encoder analyzer needs a model's tokenizer, and an index of given vectors has none; choose "
            "another --analyzer"
        )


# The manifest's fields of the encoder and its model (encoder_fields), which a refit from raw vectors copies.
ENCODER_FIELDS = (
    "model",
    "model_fingerprint",
    "pooling",
    "layers",
    "max_length",
    "encoder_dim",
    "encoder_backend",
)
# Where the model was (absent in old manifests), or that there is none ("encoder": "external").
MODEL_FIELDS = ("model_path", "model_id", "model_sha256", "encoder")


def encoder_description(encoder: EncoderLike) -> dict[str, Any]:
    """How the encoder makes vectors (model name and fingerprint, pooling, max_length, dimension, backend)."""
    info = encoder.describe()
    if info.get("token_weights") is not None:
        # The manifest cannot carry the frequency table yet: queries would be encoded without the weights.
        raise BadInputError(
            "an index cannot record token weights yet, so its queries would be encoded without them; build it "
            "with an Encoder without token_weights"
        )
    return {
        "model": info["model"],
        "model_fingerprint": info.get("model_fingerprint"),
        "pooling": info["pooling"],
        "layers": info.get("layers"),
        "max_length": None if info["max_length"] is None else int(info["max_length"]),
        "encoder_dim": int(info["dim"]),
        # The arithmetic the documents were encoded with; loading without an encoder reproduces it.
        "encoder_backend": info.get("backend", "torch"),
    }


def check_encoder(encoder: EncoderLike, manifest: dict[str, Any]) -> None:
    """Refuse an encoder that would make vectors the index cannot compare with its own (of an index of given
    vectors, one of another dimension: which model made them is the caller's to know)."""
    info = encoder_description(encoder)
    if manifest.get("encoder") == EXTERNAL and info["encoder_dim"] != manifest["encoder_dim"]:
        raise DimensionMismatchError(
            f"the encoder makes {info['encoder_dim']}-d vectors; the index holds {manifest['encoder_dim']}-d "
            f"vectors given by the caller ({manifest['model']})"
        )
    if manifest.get("encoder") == EXTERNAL:
        return
    if info["encoder_dim"] != manifest["encoder_dim"]:
        raise DimensionMismatchError(
            f"the encoder makes {info['encoder_dim']}-d vectors ({info['model']}); the index was built with "
            f"{manifest['model']} ({manifest['encoder_dim']}-d). Load it without an encoder, or use that model."
        )
    same_model = (
        info["model_fingerprint"] == manifest.get("model_fingerprint")
        if info["model_fingerprint"] and manifest.get("model_fingerprint")
        else info["model"] == manifest["model"]
    )
    if not same_model:
        raise BadInputError(
            f"the index was built with model {manifest['model']!r}; the encoder given holds {info['model']!r}. "
            "Queries must use the index's model."
        )
    for field in ("pooling", "max_length"):
        if info[field] != manifest[field]:
            raise BadInputError(
                f"the index was built with {field} {manifest[field]!r}; the encoder given uses {info[field]!r}"
            )
    folder = getattr(encoder, "model_path", None)
    if isinstance(folder, Path):
        check_model_checksum(folder, manifest)
