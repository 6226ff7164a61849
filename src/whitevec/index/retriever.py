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
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from whitevec._io import atomic_dir, atomic_path
from whitevec.datasets.retrieval import Document, check_unique_ids, read_corpus_file
from whitevec.errors import BadInputError, CorruptFileError, DimensionMismatchError
from whitevec.index.backend import BACKENDS, KINDS, METRICS, VectorBackend, check_choice, normalize_rows
from whitevec.index.docstore import DOCS_FILE, DocStore, write_docs
from whitevec.index.faiss_backend import INDEX_FILE, FaissBackend, faiss_version
from whitevec.index.manifest import MANIFEST, read_manifest, write_manifest
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
        kind = check_choice(kind, KINDS, "index kind")
        metric = check_choice(metric, METRICS, "metric")
        backend = check_choice(backend, BACKENDS, "backend")
        docs = _as_documents(corpus)
        if not docs:
            raise BadInputError("the corpus is empty; give at least one document")
        check_unique_ids(docs)
        target = Path(out).expanduser()
        previous = _check_target(target)
        if backend == "faiss":
            if uri is not None:
                raise BadInputError("--uri applies to the milvus backend only")
            FaissBackend(1, metric, kind, index_params)  # validates the parameters before any work
        elif uri is not None and "://" not in uri and not uri.endswith(".db"):
            raise BadInputError(f"a local Milvus Lite URI must be a file name ending in .db, got {uri!r}")
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

        Without ``encoder``, one is built from the manifest's model, pooling, max_length and encoder backend, on
        ``device``, with the vector cache on or off (``cache``; a server should not cache every query). An
        ``encoder`` with another backend (bf16 queries on a float32 index, say) is allowed: same model, nearly
        the same vectors.

        Raises:
            DataNotFoundError: no index at ``path``.
            CorruptFileError: a file is missing, edited or damaged (named in the message).
            DimensionMismatchError / BadInputError: ``encoder`` differs from the one the index was built with.
        """
        folder = Path(path).expanduser()
        manifest = read_manifest(folder)
        if encoder is None:
            from whitevec.encoder import Encoder

            encoder = Encoder(
                manifest["model"],
                manifest["pooling"],
                max_length=int(manifest["max_length"]),
                backend=manifest.get("encoder_backend", "torch"),
                device=device,
                cache=cache,
            )
        else:
            check_encoder(encoder, manifest)
        transform = Transform.load(folder / TRANSFORM_FILE) if manifest.get("transform") else None
        backend: Any
        if manifest["backend"] == "faiss":
            backend = FaissBackend.load(
                folder, int(manifest["dim"]), manifest["metric"], manifest["index_kind"], manifest["index_params"]
            )
        elif manifest["backend"] == "milvus":
            from whitevec.index.milvus_backend import MilvusBackend

            uri = manifest.get("backend_uri") or str(folder / MILVUS_LOCAL)
            backend = MilvusBackend(
                uri,
                manifest["milvus_collection"],
                int(manifest["dim"]),
                manifest["metric"],
                manifest["index_kind"],
                manifest["index_params"],
            )
        else:
            raise CorruptFileError(f"{folder / MANIFEST} names an unknown backend {manifest['backend']!r}")
        docs = DocStore(folder / DOCS_FILE)
        if docs.count != manifest["count"] or backend.count != manifest["count"]:
            raise CorruptFileError(
                f"index at {folder} is inconsistent: manifest count {manifest['count']}, documents {docs.count}, "
                f"vectors {backend.count}; rebuild the index"
            )
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

        FAISS indexes are rewritten through ``atomic_dir`` (all or nothing). With Milvus, vectors go in first and
        are deleted again if writing the documents fails.

        Raises:
            BadInputError: empty list, an id given twice, or an id already in the index (named).
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
            manifest = {k: v for k, v in self.manifest.items() if k not in ("files", "format_version", "whitevec")}
            manifest["count"] = self.count + len(items)
            manifest["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            if isinstance(self.backend, FaissBackend):
                new_backend = self.backend.copy()
                new_backend.add(ids, vectors)
                with atomic_dir(self.path) as tmp:
                    files = [DOCS_FILE]
                    if self.transform is not None:
                        shutil.copy2(self.path / TRANSFORM_FILE, tmp / TRANSFORM_FILE)
                        files.append(TRANSFORM_FILE)
                    shutil.copy2(self.path / DOCS_FILE, tmp / DOCS_FILE)
                    write_docs(tmp / DOCS_FILE, items, start_row=start)
                    files += new_backend.save(tmp)
                    written = write_manifest(tmp, manifest, files)
                self.backend = new_backend
            else:
                self.backend.add(ids, vectors)
                try:
                    with atomic_path(self.path / DOCS_FILE) as tmp_docs:
                        shutil.copy2(self.path / DOCS_FILE, tmp_docs)
                        write_docs(tmp_docs, items, start_row=start)
                    files = [DOCS_FILE] + ([TRANSFORM_FILE] if self.transform is not None else [])
                    written = write_manifest(self.path, manifest, files)
                except BaseException:
                    with contextlib.suppress(Exception):
                        self.backend.delete(ids)  # type: ignore[attr-defined]
                    raise
            self._docs.close()
            self._docs = DocStore(self.path / DOCS_FILE)
            self.manifest = written
            return self.count

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
