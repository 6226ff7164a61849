"""The vector-store protocol every backend implements, the registry of backends by name, and the shared
vocabulary (metrics, index kinds).

Ids are int64 row numbers that whitevec assigns (0, 1, 2, ...); the document store maps them to the user's
string ids. Vectors arrive already transformed and, for the cosine metric, already L2-normalised
(:func:`stored_form`), so a store only ever does inner product (``cosine``, ``ip``) or squared Euclidean
distance (``l2``).

A store takes part in the life of an index folder (see :mod:`whitevec.index.folder.snapshot`): it is created for a
new version being written in a temporary folder, opened from a pinned version, staged for an add into the next
version's folder, saved there, and reopened once that version is in place. ``Retriever`` and the build call
only these methods, so a new backend is one new sub-package whose class is decorated with
:func:`register_store` (one whitevec ships is named in :data:`STORES`' built-in table, which imports it when an
index first names it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import numpy as np

from whitevec.errors import BadInputError
from whitevec.index.encodings.spec import parse_encoding
from whitevec.index.folder.manifest import MANIFEST
from whitevec.index.stores.registry import Registry, registered_name
from whitevec.utils.linalg import unit_rows
from whitevec.utils.threads import one_blas_thread, threaded_product

if TYPE_CHECKING:
    from whitevec.index.folder.snapshot import IndexSnapshot
    from whitevec.transforms.frozen import AppliesVectors

METRICS = ("cosine", "ip", "l2")
KINDS = ("flat", "hnsw", "ivf")
ENCODING = "encoding"  # the index parameter naming how vectors are stored (whitevec.index.encodings.spec)


def sample_rows(total: int, size: int, seed: int) -> np.ndarray:
    """``size`` distinct row numbers of ``range(total)`` drawn with ``seed``, ascending (all rows when ``size``
    is not smaller): the same draw wherever the rows live, in one array or in shards."""
    if size >= total:
        return np.arange(total, dtype=np.int64)
    return np.sort(np.random.default_rng(seed).choice(total, size=size, replace=False)).astype(np.int64)


class VectorStore(Protocol):
    """What an index needs from a place that keeps vectors and searches them."""

    name: ClassVar[str]  # the manifest's "backend" and the CLI's --backend value
    library: ClassVar[str]  # the library that keeps the vectors: the manifest field recording its version
    files: ClassVar[tuple[str, ...]]  # the files it keeps in every version folder (checksummed in the manifest)
    disk_files: ClassVar[tuple[str, ...]]  # those of its files kept on disk and read on demand, not loaded
    dim: int
    metric: str
    kind: str

    @classmethod
    def files_for(cls, params: dict[str, Any]) -> tuple[str, ...]:
        """The files a version with these index parameters keeps: :attr:`files` and those its encoding adds."""
        ...

    @classmethod
    def library_version(cls) -> str:
        """The version of :attr:`library` here, recorded in a build's manifest under that name."""
        ...

    @classmethod
    def folder_entries(cls, manifest: dict[str, Any]) -> tuple[str, ...]:
        """The entries of a version's folder the store keeps beside the files its manifest lists (a library's own
        data folder, not checksummed): a write replaces them with the version (:func:`version_entries`)."""
        ...

    # --- life cycle -----------------------------------------------------------------------------------------
    @classmethod
    def check_options(cls, kind: str, params: dict[str, Any] | None, uri: str | None) -> None:
        """Refuse index parameters or a URI this store cannot take, before any work (BadInputError)."""
        ...

    @classmethod
    def create(
        cls, folder: Path, dim: int, metric: str, kind: str, params: dict[str, Any] | None, uri: str | None
    ) -> VectorStore:
        """A new, empty store for the index version being written in ``folder`` (``uri``: where the vectors
        should live, when not in the folder)."""
        ...

    @classmethod
    def open(cls, snapshot: IndexSnapshot) -> VectorStore:
        """The store of one pinned index version; it answers with that version's vectors only."""
        ...

    @classmethod
    def discard(cls, manifest: dict[str, Any]) -> None:
        """After a rebuild replaced the version ``manifest`` describes, free what it kept outside its folder."""
        ...

    def stage_add(self, folder: Path) -> VectorStore:
        """A store holding this one's vectors, to add to for the next version (written in ``folder``), without
        changing what this store's readers see."""
        ...

    def save(self, folder: Path) -> list[str]:
        """Persist into the version folder ``folder``; the names of the files written (checksummed in the
        manifest). Afterwards the folder may be renamed."""
        ...

    def reopen(self, folder: Path, manifest: dict[str, Any]) -> VectorStore:
        """This store as part of the version now in place at ``folder`` (described by ``manifest``)."""
        ...

    def abandon(self, ids: np.ndarray) -> None:
        """An add through this staged store failed before its version went in place: undo what is visible
        outside the new folder (rows ``ids``)."""
        ...

    def drop(self) -> None:
        """Delete the stored vectors (a failed build's new collection)."""
        ...

    def close(self) -> None:
        """Release connections, handles and locks."""
        ...

    # --- data -----------------------------------------------------------------------------------------------
    @property
    def count(self) -> int:
        """Number of vectors stored."""
        ...

    def params(self) -> dict[str, Any]:
        """The index parameters to record in the manifest (kind-specific: M, efSearch, nlist, nprobe, ...)."""
        ...

    def location(self) -> dict[str, Any]:
        """Manifest fields saying where the vectors live: ``backend_uri`` and ``milvus_collection``."""
        ...

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Store ``vectors`` (float32, n x dim) under ``ids`` (int64, n)."""
        ...

    def delete(self, ids: np.ndarray) -> None:
        """Remove the rows ``ids``."""
        ...

    def search(
        self, vectors: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, ids)``, each (n, k), best first; ids -1 where fewer than k results exist. ``allowed``: a
        bool per row, the rows a metadata filter lets through (:mod:`whitevec.index.filters.rows`): the best k of
        those, never fewer than there are.

        Scores are inner products for ``cosine``/``ip`` (higher is closer) and squared L2 distances for ``l2``
        (lower is closer).
        """
        ...

    # --- segments (whitevec.index.segments.writing; a store with its own writer, stores.writer, refuses them) --
    def empty_copy(self) -> VectorStore:
        """A store with this one's training (IVF lists' centroids, codebooks, the sign step) and no vector: what
        a new segment of the index is made from."""
        ...

    def kept_vectors(self, ids: np.ndarray) -> np.ndarray:
        """What the store keeps of the rows ``ids`` (distinct, ascending), as a segment merge adds it again to an
        :meth:`empty_copy` (:meth:`add_kept`); BadInputError where the store cannot give it back."""
        ...

    def add_kept(self, ids: np.ndarray, kept: np.ndarray) -> None:
        """Add what :meth:`kept_vectors` gave under ``ids``."""
        ...


S = TypeVar("S")
# The backends by name; the built-in ones imported when an index first asks (a FAISS search loads no pymilvus).
STORES: Registry[type[Any]] = Registry(
    {"faiss": "whitevec.index.faiss.store", "milvus": "whitevec.index.milvus.store"}
)


class KeepsLexical(Protocol):
    """A vector store that keeps an index's lexical part itself (Milvus's BM25 function on a text field), not a
    bm25s index beside it: its class has ``keeps_lexical = True``. The build creates it with
    :meth:`create_lexical`, adds the documents' text with the vectors, and records :meth:`lexical_record`; a
    load asks it for the ranker (:meth:`lexical_ranker`)."""

    keeps_lexical: ClassVar[bool]

    @classmethod
    def create_lexical(
        cls,
        folder: Path,
        dim: int,
        metric: str,
        kind: str,
        params: dict[str, Any] | None,
        uri: str | None,
        analyzer: str,
    ) -> KeepsLexical:
        """As :meth:`VectorStore.create`, with a lexical part analysed by whitevec's ``analyzer``."""
        ...

    def add_with_texts(self, ids: np.ndarray, vectors: np.ndarray, texts: list[str]) -> None:
        """Store ``vectors`` under ``ids`` with each document's text (for the lexical part)."""
        ...

    def lexical_record(self, count: int) -> dict[str, Any]:
        """The manifest's ``lexical`` record of ``count`` documents."""
        ...

    def lexical_ranker(self) -> Any:
        """The :class:`~whitevec.index.stores.lexical.LexicalRanker` of this handle's version."""
        ...

    @classmethod
    def check_analyzer(cls, analyzer: str) -> None:
        """A one-line BadInputError for a whitevec analyzer the store's lexical part cannot reproduce."""
        ...


def keeps_lexical(store: object) -> bool:
    """Whether a store (or its class) keeps the lexical part itself (:class:`KeepsLexical`)."""
    return bool(getattr(store, "keeps_lexical", False))


def register_store(cls: type[S]) -> type[S]:
    """Class decorator: make a VectorStore available under its ``name``."""
    STORES.register(registered_name(cls, "a vector store"), cls)
    return cls


def store_names() -> tuple[str, ...]:
    """The registered backends and the built-in ones not yet imported, for messages and CLI help."""
    return STORES.names()


def store_class(name: str) -> type[VectorStore]:
    """The VectorStore registered as ``name`` (case-insensitive); BadInputError listing the others."""
    store: type[VectorStore] = STORES.load(check_choice(name, store_names(), "backend"))
    return store


def check_choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    """``value`` lower-cased if it is one of ``allowed``; BadInputError listing the valid values otherwise."""
    key = str(value).strip().lower()
    if key not in allowed:
        raise BadInputError(f"unknown {what} {value!r}; valid: {', '.join(allowed)}")
    return key


def resolve_params(kind: str, given: dict[str, Any] | None, defaults: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``defaults[kind]`` updated with ``given``; unknown names or non-positive values are refused.

    ``encoding`` (see :mod:`whitevec.index.encodings.spec`) is a spec string, parsed here and kept in its canonical
    form; every other parameter is a positive integer or None.
    """
    params = dict(defaults[kind])
    for name, value in (given or {}).items():
        if name not in params:
            valid = ", ".join(params) or "none"
            raise BadInputError(f"index parameter {name!r} does not apply to kind {kind!r} (valid: {valid})")
        if name == ENCODING:
            params[name] = parse_encoding(value).spec
            continue
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise BadInputError(f"index parameter {name} must be a positive integer, got {value!r}")
        params[name] = value
    return params


def check_vectors_for(store: VectorStore, ids: np.ndarray, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, vectors)`` as contiguous int64 / float32 of the store's dimension, or BadInputError."""
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    ids64 = np.ascontiguousarray(ids, dtype=np.int64)
    if x.ndim != 2 or x.shape[1] != store.dim or ids64.shape != (x.shape[0],):
        raise BadInputError(f"expected {len(ids64)} vectors of dimension {store.dim}, got shape {x.shape}")
    return ids64, x


def stored_form(transform: AppliesVectors | None, vectors: np.ndarray, metric: str) -> np.ndarray:
    """Encoder vectors as an index stores them: transformed, L2-normalised for ``cosine``; float32, contiguous.

    Runs its products on one BLAS thread: the vectors come straight from torch, whose threads still hold the
    cores (:mod:`whitevec.utils.threads`; a transform's output has at most its input's dimensions)."""
    rows, dim = vectors.shape if vectors.ndim == 2 else (len(vectors), 1)
    with one_blas_thread(when=transform is not None and threaded_product(rows, dim, dim)):
        out = vectors if transform is None else transform.transform(vectors)
        if metric == "cosine":
            return unit_rows(out)
        return np.ascontiguousarray(out, dtype=np.float32)


def store_files(manifest: dict[str, Any]) -> tuple[str, ...]:
    """The files of an index's vector store, from its manifest (the backend's and its encoding's), as a build
    names them (the files of one segment, without its prefix)."""
    return store_class(manifest["backend"]).files_for(manifest["index_params"])


def stored_files(manifest: dict[str, Any]) -> list[str]:
    """The vector store's files of every segment of an index (whitevec.index.segments.view), as the folder names
    them; the trained, empty template a new segment is made from is not among them (it is never searched)."""
    prefixes = [entry["prefix"] for entry in manifest.get("segments") or [{"prefix": ""}]]
    return [prefix + name for prefix in prefixes for name in store_files(manifest)]


def version_entries(manifest: dict[str, Any]) -> set[str]:
    """The entries of an index folder that belong to the version ``manifest`` describes: the manifest, every file
    it lists, and what its store keeps there beside them (:meth:`VectorStore.folder_entries`: in-folder Milvus
    Lite data). A write replaces these and keeps every other entry (a user's file: ``owned`` of
    :func:`whitevec.utils.io.atomic_dir`)."""
    backend = manifest["backend"]
    own = store_class(backend).folder_entries(manifest) if backend in store_names() else ()
    return {MANIFEST, *manifest["files"], *own}


def replaced_entries(previous: dict[str, Any] | None) -> set[str] | None:
    """What a build at a folder replaces there (``atomic_dir``'s ``owned``): the earlier index's own entries, a
    user's files beside them kept; the whole folder where no earlier index can be read there."""
    return None if previous is None else version_entries(previous)


def foreign_entries(folder: Path, manifest: dict[str, Any]) -> set[str]:
    """The entries of the index folder ``folder`` that are not its version's (:func:`version_entries`)."""
    return set(os.listdir(folder)) - version_entries(manifest)


def index_size(manifest: dict[str, Any]) -> dict[str, Any]:
    """How much an index's vectors cost, from its manifest, in memory and on disk.

    ``code_bytes_per_vector`` and ``rescore_bytes_per_vector``: what the encoding keeps a vector (its code in
    memory, the quantity an encoding trades against quality; its rescoring vector on disk). ``index_bytes``: the
    store's files in the folder (0 when the vectors live in Milvus); ``ram_bytes`` those a load reads into memory
    (codes, ids, links, trained tables), ``disk_bytes`` those it reads on demand (``+rescore``'s vectors); each
    also per vector."""
    params = manifest["index_params"]
    encoding = parse_encoding(params.get(ENCODING))
    files = manifest["files"]
    stored = [name for name in stored_files(manifest) if name in files]
    on_disk = tuple(store_class(manifest["backend"]).disk_files)
    index_bytes = sum(int(files[name]["bytes"]) for name in stored)
    disk_bytes = sum(int(files[name]["bytes"]) for name in stored if name.endswith(on_disk))
    ram_bytes = index_bytes - disk_bytes
    count = int(manifest["count"]) + int(manifest.get("deleted", 0))  # deleted rows cost until a merge
    dim = int(manifest["dim"])

    def per_vector(total: int) -> float | None:
        return round(total / count, 2) if total and count else None

    return {
        "encoding": encoding.spec,
        "code_bytes_per_vector": encoding.code_bytes(dim) or None,
        "rescore_bytes_per_vector": encoding.disk_bytes(dim),
        "index_bytes": index_bytes,
        "bytes_per_vector": per_vector(index_bytes),
        "ram_bytes": ram_bytes,
        "ram_bytes_per_vector": per_vector(ram_bytes),
        "disk_bytes": disk_bytes,
        "disk_bytes_per_vector": per_vector(disk_bytes) or 0,
    }
