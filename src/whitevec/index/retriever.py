"""Retriever: an Encoder, a fitted Transform and a vector backend over a folder on disk.

Index folder (written through ``whitevec._io.atomic_dir``: built in a temporary sibling folder and renamed, so an
interrupted build leaves no half index and an older index at the same path intact; ``manifest.json`` is written
last, so a leftover temporary folder is never loadable as an index)::

    DIR/manifest.json           what built it, counts, versions, sha256 of every file below
    DIR/transform.safetensors   the fitted transform (absent for transform "none")
    DIR/index.faiss             the FAISS index (faiss backend; ids = internal int64 rows)
    DIR/docs.sqlite             row -> id, text, metadata (JSON)
    DIR/milvus.db/              Milvus Lite data, only for the milvus backend without --uri

``k`` larger than the number of documents is clamped to that number, with a logged warning
(``logging.getLogger("whitevec.index.retriever")``); ``k`` below 1 is a BadInputError.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from whitevec._io import atomic_dir, check_writable_parent
from whitevec.datasets.retrieval import Document, check_unique_ids, read_corpus_file
from whitevec.errors import BadInputError, CorruptFileError, DimensionMismatchError
from whitevec.index.backend import BACKENDS, KINDS, METRICS, VectorBackend, check_choice, normalize_rows
from whitevec.index.docstore import DOCS_FILE, DocStore, write_docs
from whitevec.index.faiss_backend import INDEX_FILE, FaissBackend, faiss_version, resolve_params
from whitevec.index.manifest import MANIFEST, SELF_CHECKSUM, write_manifest
from whitevec.index.milvus_backend import MilvusBackend
from whitevec.index.snapshot import IndexSnapshot, read_consistent, read_manifest
from whitevec.transforms import Transform, make_transform

if TYPE_CHECKING:
    from whitevec.encoder import Encoder

logger = logging.getLogger(__name__)

TRANSFORM_FILE = "transform.safetensors"
MILVUS_LOCAL = "milvus.db"
LINEAR_TRANSFORMS = ("Whitening", "Center")


@dataclass
class SearchHit:
    """One result: the document's id, its score, text and metadata.

    ``score`` is the cosine similarity (metric ``cosine``) or inner product (``ip``) in the transformed space,
    higher is closer; for ``l2`` it is the squared Euclidean distance, lower is closer. Hits come best first.
    """

    id: str
    score: float
    text: str
    metadata: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "score": self.score, "text": self.text, "metadata": self.metadata}


def _as_documents(corpus: Sequence[Document] | str | os.PathLike[str]) -> list[Document]:
    if isinstance(corpus, str | os.PathLike):
        return read_corpus_file(corpus)
    docs = list(corpus)
    for i, doc in enumerate(docs):
        if not isinstance(doc, Document):
            raise BadInputError(f"corpus[{i}] is a {type(doc).__name__}, expected whitevec.index.Document")
        if not isinstance(doc.id, str) or not doc.id:
            raise BadInputError(f"corpus[{i}] has id {doc.id!r}; ids must be non-empty strings")
        if not isinstance(doc.text, str):
            raise BadInputError(f"document {doc.id!r} has text of type {type(doc.text).__name__}, expected str")
        try:
            doc.id.encode("utf-8")
            doc.text.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInputError(
                f"document {i} ({doc.id!r}) holds a lone surrogate (\\ud800-\\udfff), which is not text; fix it"
            ) from None
    return docs


def _check_texts(texts: Sequence[str], what: str) -> list[str]:
    if isinstance(texts, str):
        raise BadInputError(f"{what} must be a list of strings, not one string; wrap it in a list")
    items = list(texts)
    if not items:
        raise BadInputError(f"{what} is empty; give at least one text")
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise BadInputError(f"{what}[{i}] is a {type(text).__name__}, not a str")
    return items


def _check_target(out: Path) -> dict[str, Any] | None:
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
) -> dict[str, Any] | None:
    """Everything about a build that can be checked before any model loads or document is encoded.

    Checks the kind, metric, backend and index parameters, the Milvus URI's form, that ``out`` is absent, empty
    or an earlier index, and that its parent folder can be written. Returns the earlier index's manifest, if any.

    Raises:
        BadInputError: an unknown choice or parameter, or an ``out`` that must not be replaced.
        OSError: the parent folder of ``out`` cannot be created or written (EACCES, EROFS, ...).
    """
    kind = check_choice(kind, KINDS, "index kind")
    metric = check_choice(metric, METRICS, "metric")
    backend = check_choice(backend, BACKENDS, "backend")
    if backend == "faiss":
        if uri is not None:
            raise BadInputError("--uri applies to the milvus backend only")
        resolve_params(kind, index_params)
    elif uri is not None and "://" not in uri and not uri.endswith(".db"):
        raise BadInputError(f"a local Milvus Lite URI must be a file name ending in .db, got {uri!r}")
    target = Path(out).expanduser()
    previous = _check_target(target)
    check_writable_parent(target)
    return previous


def _is_fitted(transform: Transform) -> bool:
    try:
        transform._check_fitted()
    except Exception:  # sklearn's NotFittedError, or a missing attribute
        return False
    return True


class Retriever:
    """Search a corpus by meaning: ``Retriever.build(...)`` once, then ``Retriever.load(dir).search([...])``."""

    def __init__(
        self,
        path: Path,
        manifest: dict[str, Any],
        encoder: Encoder,
        transform: Transform | None,
        backend: VectorBackend,
        docs: DocStore,
    ) -> None:
        self.path = path
        self.manifest = manifest
        self.encoder = encoder
        self.transform = transform
        self.backend = backend
        self._docs = docs
        self._lock = threading.RLock()

    # --- building --------------------------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        corpus: Sequence[Document] | str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        encoder: Encoder,
        transform: str | Transform | None = "whitening",
        fit_on: str | os.PathLike[str] = "corpus",
        kind: str = "flat",
        metric: str = "cosine",
        backend: str = "faiss",
        uri: str | None = None,
        index_params: dict[str, Any] | None = None,
        show_progress: bool | None = None,
    ) -> Retriever:
        """Encode ``corpus``, fit ``transform`` (on the corpus or a text file ``fit_on``), index, write ``out``.

        ``corpus``: a list of Documents or a corpus file (see ``whitevec.datasets.retrieval``). ``transform``: a
        spec (``"none"``, ``"whitening"``, ``"whitening-256"``, ...), a path to a saved ``.safetensors``
        transform, a Transform (used as is when fitted), or None. ``backend="milvus"`` stores the vectors in
        Milvus at ``uri`` (default: Milvus Lite in ``out/milvus.db``).

        Raises:
            BadInputError: empty corpus, duplicate ids, unknown kind/metric/backend/params, or ``out`` is
                something other than an earlier index. Nothing is written in these cases.
        """
        started = time.perf_counter()
        target = Path(out).expanduser()
        previous = check_build(
            target, kind=kind, metric=metric, backend=backend, uri=uri, index_params=index_params
        )
        kind, metric, backend = kind.strip().lower(), metric.strip().lower(), backend.strip().lower()
        docs = _as_documents(corpus)
        if not docs:
            raise BadInputError("the corpus is empty; give at least one document")
        check_unique_ids(docs)
        texts = [d.text for d in docs]
        vectors = encoder.encode(texts, show_progress=show_progress)
        fitted, transform_info = _fit_transform(transform, fit_on, vectors, encoder, show_progress)
        stored = _apply(fitted, vectors, metric)
        dim = int(stored.shape[1])
        ids = np.arange(len(docs), dtype=np.int64)
        milvus_collection: str | None = None
        created_remote: Any = None
        try:
            with atomic_dir(target) as tmp:
                files: list[str] = []
                if fitted is not None:
                    fitted.save(tmp / TRANSFORM_FILE)
                    files.append(TRANSFORM_FILE)
                vector_backend: Any
                if backend == "faiss":
                    vector_backend = FaissBackend(dim, metric, kind, index_params)
                    vector_backend.add(ids, stored)
                    files += vector_backend.save(tmp)
                    stored_uri = None
                else:
                    from whitevec.index.milvus_backend import MilvusBackend, is_local_uri, new_collection_name

                    milvus_collection = new_collection_name()
                    in_folder = uri is None
                    if uri is not None and is_local_uri(uri):
                        uri = str(Path(uri).expanduser().resolve())
                    real_uri = str(tmp / MILVUS_LOCAL) if in_folder else str(uri)
                    vector_backend = MilvusBackend(
                        real_uri, milvus_collection, dim, metric, kind, index_params, create=True
                    )
                    if not in_folder:
                        created_remote = vector_backend
                    vector_backend.add(ids, stored)
                    vector_backend.save(tmp)
                    vector_backend.release()  # Milvus Lite must let go of its files before the folder is renamed
                    stored_uri = None if in_folder else uri
                write_docs(tmp / DOCS_FILE, docs)
                files.append(DOCS_FILE)
                manifest = {
                    **_encoder_fields(encoder),
                    "dim": dim,
                    "transform": transform_info,
                    "metric": metric,
                    "index_kind": kind,
                    "index_params": vector_backend.params(),
                    "count": len(docs),
                    "backend": backend,
                    "backend_uri": stored_uri,
                    "milvus_collection": milvus_collection,
                    "faiss": faiss_version(),
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "build_seconds": round(time.perf_counter() - started, 3),
                }
                write_manifest(tmp, manifest, files)  # last: a folder without it is never an index
        except BaseException:
            if created_remote is not None:
                with contextlib.suppress(Exception):
                    created_remote.drop()
            raise
        if created_remote is not None:
            created_remote.close()
        _drop_replaced_collection(previous, milvus_collection)
        return cls.load(target, encoder=encoder)

    # --- loading ---------------------------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        encoder: Encoder | None = None,
        *,
        device: str | None = None,
        cache: bool = True,
    ) -> Retriever:
        """Open an index folder; checks the manifest, every file's checksum, and the encoder against it.

        One consistent version is read even while another process rebuilds the index (see
        :mod:`whitevec.index.snapshot`). Without ``encoder``, one is built from the manifest's model, pooling,
        max_length and encoder backend, on ``device``, with the vector cache on or off (``cache``; a server
        should not cache every query). An ``encoder`` with another backend (bf16 queries on a float32 index,
        say) is allowed: same model, nearly the same vectors.

        Raises:
            DataNotFoundError: no index at ``path``.
            CorruptFileError: a file is missing, edited or damaged, or the manifest was edited (named).
            DimensionMismatchError / BadInputError: ``encoder`` differs from the one the index was built with.
        """
        folder = Path(path).expanduser()
        manifest, transform, backend, docs = read_consistent(folder, _open_version)
        try:
            if encoder is None:
                from whitevec.encoder import Encoder

                encoder = Encoder(
                    manifest["model"],
                    manifest["pooling"],
                    max_length=int(manifest["max_length"]),
                    backend=manifest["encoder_backend"],
                    device=device,
                    cache=cache,
                )
            else:
                check_encoder(encoder, manifest)
        except BaseException:
            backend.close()
            docs.close()
            raise
        return cls(folder, manifest, encoder, transform, backend, docs)

    # --- querying --------------------------------------------------------------------------------------------
    @property
    def count(self) -> int:
        """Number of documents (and vectors) in the index."""
        return int(self.manifest["count"])

    @property
    def dim(self) -> int:
        """Dimension of the stored (transformed) vectors."""
        return int(self.manifest["dim"])

    @property
    def index_bytes(self) -> int:
        """Bytes of the vector index file (0 when the vectors live in Milvus)."""
        info = self.manifest["files"].get(INDEX_FILE)
        return int(info["bytes"]) if info else 0

    def effective_k(self, k: int) -> int:
        """``k`` clamped to the number of documents (logged); BadInputError when below 1 or not an integer."""
        if isinstance(k, bool) or not isinstance(k, int | np.integer):
            raise BadInputError(f"k must be an integer, got {k!r}")
        if k < 1:
            raise BadInputError(f"k must be at least 1, got {k}")
        if k > self.count:
            n = self.count
            logger.warning("k=%d is more than the %d documents in the index; returning %d", k, n, n)
            return self.count
        return int(k)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors as the index stores them: encoded, transformed, L2-normalised for cosine; float32 (n, dim)."""
        items = _check_texts(texts, "texts")
        return _apply(self.transform, self.encoder.encode(items, show_progress=False), self.manifest["metric"])

    def search(self, queries: Sequence[str], k: int = 10) -> list[list[SearchHit]]:
        """The ``k`` nearest documents for each query, best first (see the module docstring for ``k``)."""
        items = _check_texts(queries, "queries")
        k = self.effective_k(k)
        with self._lock:
            return self._search(self.embed(items), k)

    def search_vectors(self, vectors: np.ndarray, k: int = 10) -> list[list[SearchHit]]:
        """Search with vectors already made by :meth:`embed`."""
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise DimensionMismatchError(
                f"query vectors have shape {x.shape}; this index holds {self.dim}-d vectors"
            )
        return self._search(x, self.effective_k(k))

    def _search(self, x: np.ndarray, k: int) -> list[list[SearchHit]]:
        with self._lock:
            scores, rows = self.backend.search(x, k)
            found = self._docs.get(rows.ravel().tolist())
        results = []
        for score_row, id_row in zip(scores, rows, strict=True):
            hits = []
            for score, row in zip(score_row, id_row, strict=True):
                doc = found.get(int(row))
                if doc is not None:
                    hits.append(SearchHit(doc.id, float(score), doc.text, doc.metadata))
            results.append(hits)
        return results

    # --- adding ----------------------------------------------------------------------------------------------
    def add(self, docs: Sequence[Document], show_progress: bool | None = None) -> int:
        """Add documents with new, unique ids; persisted before returning. Returns the new count.

        The index folder is rewritten as a new version and swapped in whole (``atomic_dir``): a failed add
        leaves the index as it was, and readers in other processes see the old or the new version. With Milvus
        the vectors go into the collection first (invisible to readers of the old version, which search only
        their own rows) and are deleted again if the new version cannot be written. Refused when the folder no
        longer holds the version this Retriever loaded (another process rebuilt or added meanwhile).

        Raises:
            BadInputError: empty list, an id given twice, an id already in the index (named), or the index
                changed on disk since it was loaded.
        """
        items = _as_documents(docs)
        if not items:
            raise BadInputError("no documents to add")
        check_unique_ids(items, where="the documents to add")
        with self._lock:
            clash = self._docs.existing_ids([d.id for d in items])
            if clash:
                raise BadInputError(f"document id {clash[0]!r} is already in the index at {self.path}")
            vectors = _apply(
                self.transform,
                self.encoder.encode([d.text for d in items], show_progress=show_progress),
                self.manifest["metric"],
            )
            start = self._docs.next_row()
            ids = np.arange(start, start + len(items), dtype=np.int64)
            manifest = dict(self.manifest)
            manifest["count"] = self.count + len(items)
            manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            transform_bytes = read_consistent(self.path, self._read_own_transform)
            local_milvus = isinstance(self.backend, MilvusBackend) and not self.manifest["backend_uri"]
            if isinstance(self.backend, FaissBackend):
                new_backend: VectorBackend = self.backend.copy()  # the live index stays untouched until the swap
                new_backend.add(ids, vectors)
            else:
                new_backend = self.backend
                new_backend.add(ids, vectors)
            moved: Path | None = None
            try:
                with atomic_dir(self.path, before_swap=self._check_unchanged) as tmp:
                    files = [DOCS_FILE]
                    if transform_bytes is not None:
                        (tmp / TRANSFORM_FILE).write_bytes(transform_bytes)
                        files.append(TRANSFORM_FILE)
                    self._docs.copy_to(tmp / DOCS_FILE)
                    write_docs(tmp / DOCS_FILE, items, start_row=start)
                    if isinstance(new_backend, FaissBackend):
                        files += new_backend.save(tmp)
                    written = write_manifest(tmp, manifest, files)
                    if local_milvus and isinstance(new_backend, MilvusBackend):
                        # Milvus Lite keeps its data inside the index folder: it moves into the new version.
                        new_backend.release()
                        moved = tmp / MILVUS_LOCAL
                        os.replace(self.path / MILVUS_LOCAL, moved)
            except BaseException:
                if isinstance(new_backend, MilvusBackend):
                    with contextlib.suppress(Exception):
                        if moved is not None and moved.exists():
                            os.replace(moved, self.path / MILVUS_LOCAL)
                        if local_milvus:
                            self.backend = new_backend = _open_milvus(self.path, self.manifest)
                        new_backend.delete(ids)
                raise
            self._docs.close()
            self._docs = DocStore(self.path / DOCS_FILE)
            if local_milvus:
                new_backend = _open_milvus(self.path, written)
            if isinstance(new_backend, MilvusBackend):
                new_backend.visible_rows = start + len(items)
            self.backend = new_backend
            self.manifest = written
            return self.count

    def _read_own_transform(self, snapshot: IndexSnapshot) -> bytes | None:
        """The transform file of the version this Retriever loaded (refused if the folder moved on)."""
        if snapshot.manifest[SELF_CHECKSUM] != self.manifest[SELF_CHECKSUM]:
            raise BadInputError(_changed_message(self.path))
        return snapshot.read_bytes(TRANSFORM_FILE) if snapshot.has(TRANSFORM_FILE) else None

    def _check_unchanged(self) -> None:
        current = read_manifest(self.path, verify=False)
        if current[SELF_CHECKSUM] != self.manifest[SELF_CHECKSUM]:
            raise BadInputError(_changed_message(self.path))

    def close(self) -> None:
        """Release the document store and backend connections."""
        with self._lock:
            self._docs.close()
            self.backend.close()

    def __enter__(self) -> Retriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        m = self.manifest
        spec = (m.get("transform") or {}).get("spec", "none")
        return (
            f"Retriever({str(self.path)!r}, model={m['model']!r}, pooling={m['pooling']!r}, transform={spec!r}, "
            f"{m['index_kind']}/{m['metric']}/{m['backend']}, count={self.count}, dim={self.dim})"
        )


# --- reading one version -------------------------------------------------------------------------------------
INDEX_FILES = (TRANSFORM_FILE, INDEX_FILE, DOCS_FILE)


def _changed_message(path: Path) -> str:
    return (
        f"the index at {path} was rebuilt or added to by another writer since it was loaded; load it again "
        "and repeat the add"
    )


def check_index_manifest(manifest: dict[str, Any], folder: Path) -> None:
    """What the manifest's schema cannot say: known choices, and the files that this kind of index has."""
    where = folder / MANIFEST
    for field, allowed in (("metric", METRICS), ("index_kind", KINDS), ("backend", BACKENDS)):
        if manifest[field] not in allowed:
            raise CorruptFileError(f"{where}: unknown {field} {manifest[field]!r}; valid: {', '.join(allowed)}")
    files = set(manifest["files"])
    expected = {DOCS_FILE}
    if manifest["transform"] is not None:
        expected.add(TRANSFORM_FILE)
        if manifest["transform"]["file"] != TRANSFORM_FILE:
            raise CorruptFileError(f"{where}: the transform must be {TRANSFORM_FILE}")
    if manifest["backend"] == "faiss":
        expected.add(INDEX_FILE)
    elif not manifest["milvus_collection"]:
        raise CorruptFileError(f"{where}: a Milvus index needs milvus_collection")
    if files != expected:
        raise CorruptFileError(
            f"{where} lists the files {sorted(files)}; an index of this kind has {sorted(expected)}. "
            "Rebuild the index."
        )


def _open_milvus(folder: Path, manifest: dict[str, Any]) -> MilvusBackend:
    uri = manifest["backend_uri"] or str(folder / MILVUS_LOCAL)
    return MilvusBackend(
        uri,
        manifest["milvus_collection"],
        manifest["dim"],
        manifest["metric"],
        manifest["index_kind"],
        manifest["index_params"],
    )


def _open_version(
    snapshot: IndexSnapshot,
) -> tuple[dict[str, Any], Transform | None, VectorBackend, DocStore]:
    """Manifest, transform, vectors and documents of one pinned version (see :mod:`whitevec.index.snapshot`)."""
    manifest, folder = snapshot.manifest, snapshot.folder
    check_index_manifest(manifest, folder)
    # The path-only opens first, while the pinned version is most likely still the current one.
    docs = snapshot.by_path(DOCS_FILE, DocStore)
    backend: VectorBackend | None = None
    try:
        snapshot.verify(DOCS_FILE)
        transform = (
            Transform.from_bytes(snapshot.read_bytes(TRANSFORM_FILE), str(folder / TRANSFORM_FILE))
            if manifest["transform"] is not None
            else None
        )
        if manifest["backend"] == "faiss":
            with snapshot.reader(INDEX_FILE) as read:
                backend = FaissBackend.read(
                    read,
                    folder / INDEX_FILE,
                    manifest["dim"],
                    manifest["metric"],
                    manifest["index_kind"],
                    manifest["index_params"],
                )
        elif manifest["backend_uri"]:
            backend = _open_milvus(folder, manifest)
        else:
            backend = snapshot.by_path(MILVUS_LOCAL, lambda _: _open_milvus(folder, manifest))
        if isinstance(backend, MilvusBackend):
            backend.visible_rows = docs.next_row()  # rows other writers add later stay out of this version
        if docs.count != manifest["count"] or backend.count < manifest["count"]:
            raise CorruptFileError(
                f"index at {folder} is inconsistent: manifest count {manifest['count']}, documents {docs.count}, "
                f"vectors {backend.count}; rebuild the index"
            )
    except BaseException:
        docs.close()
        if backend is not None:
            backend.close()
        raise
    return manifest, transform, backend, docs


# --- helpers -------------------------------------------------------------------------------------------------
def _encoder_fields(encoder: Encoder) -> dict[str, Any]:
    info = encoder.describe()
    return {
        "model": info["model"],
        "model_fingerprint": info.get("model_fingerprint"),
        "pooling": info["pooling"],
        "layers": info.get("layers"),
        "max_length": int(info["max_length"]),
        "encoder_dim": int(info["dim"]),
        # The arithmetic the documents were encoded with; loading without an encoder reproduces it.
        "encoder_backend": info.get("backend", "torch"),
    }


def check_encoder(encoder: Encoder, manifest: dict[str, Any]) -> None:
    """Refuse an encoder that would make vectors the index cannot compare with its own."""
    info = _encoder_fields(encoder)
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


def _fit_transform(
    transform: str | Transform | None,
    fit_on: str | os.PathLike[str],
    vectors: np.ndarray,
    encoder: Encoder,
    show_progress: bool | None,
) -> tuple[Transform | None, dict[str, Any] | None]:
    spec: str
    if transform is None:
        return None, None
    if isinstance(transform, str) and transform.strip().lower().endswith(".safetensors"):
        obj: Transform | None = Transform.load(transform)
        spec = str(transform)
    elif isinstance(transform, str):
        obj, spec = make_transform(transform), transform.strip().lower()
    elif isinstance(transform, Transform):
        obj, spec = transform, type(transform).__name__
    else:
        raise BadInputError(
            f"transform must be a spec string, a Transform or None, got {type(transform).__name__}"
        )
    if obj is None:
        return None, None
    source = "given"
    rows = 0
    if not _is_fitted(obj):
        if str(fit_on) == "corpus":
            fit_vectors, source = vectors, "corpus"
        else:
            from whitevec.datasets import read_texts_file

            fit_vectors = encoder.encode(read_texts_file(fit_on), show_progress=show_progress)
            source = str(Path(fit_on).expanduser().resolve())
        obj.fit(fit_vectors)
        rows = int(fit_vectors.shape[0])
    info = {
        "spec": spec,
        "class": type(obj).__name__,
        "params": {k: v for k, v in obj.get_params(deep=False).items() if _jsonable(v)},
        "fit_on": source,
        "fit_rows": rows,
        "linear": type(obj).__name__ in LINEAR_TRANSFORMS,
        "file": TRANSFORM_FILE,
    }
    return obj, info


def _jsonable(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _apply(transform: Transform | None, vectors: np.ndarray, metric: str) -> np.ndarray:
    out = vectors if transform is None else transform.transform(vectors)
    out = np.ascontiguousarray(out, dtype=np.float32)
    return normalize_rows(out) if metric == "cosine" else out


def _drop_replaced_collection(previous: dict[str, Any] | None, new_collection: str | None) -> None:
    """After a rebuild over an index whose vectors lived on a Milvus server, drop the old collection."""
    if not previous or previous.get("backend") != "milvus" or not previous.get("backend_uri"):
        return
    old = previous.get("milvus_collection")
    if not old or old == new_collection:
        return
    try:
        from whitevec.index.milvus_backend import _pymilvus

        client = _pymilvus().MilvusClient(uri=previous["backend_uri"])
        if client.has_collection(old):
            client.drop_collection(old)
        client.close()
    except Exception as exc:  # the new index is fine; the old collection is only garbage
        logger.warning("could not drop the replaced Milvus collection %s: %s", old, exc)
