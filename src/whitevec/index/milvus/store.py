"""Milvus backend through pymilvus's ``MilvusClient``: a local file URI runs Milvus Lite in this process, an
``http(s)://host:port`` URI talks to a Milvus server or cluster with the same code.

Needs the optional extra ``whitevec[milvus]`` (``pymilvus``, ``milvus-lite``). Vectors arrive transformed (and
normalised for cosine); the collection uses metric IP for ``cosine``/``ip`` and L2 (squared) for ``l2``, so
scores mean the same as with FAISS. One collection per index, named in the manifest.

1-bit codes (a Milvus server; Milvus Lite 3.2 has neither binary vectors nor RaBitQ, and says so): the sign
encodings ``binary``, ``binary-rr`` and ``itq`` are stored as ``BINARY_VECTOR`` rows made by the FAISS store's own
:class:`~whitevec.index.encodings.sign_codes.SignCodes` (fitted on the first add, saved beside the manifest as
``binary.safetensors``, so queries are coded the same way) and searched by ``HAMMING`` with ``BIN_FLAT``
(kind flat) or ``BIN_IVF_FLAT`` (kind ivf); scores are the FAISS store's ``1 - 2 h / d``. ``rabitq`` maps to
``IVF_RABITQ`` (kind ivf; Milvus draws its own rotation, and ``rbq_query_bits`` takes the query bits).
``+rescore`` is refused on Milvus: Milvus would hold the rescoring vectors in its own memory (IVF_RABITQ's
``refine``), which is what rescoring from disk avoids; use ``--backend faiss`` for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError, WhitevecError
from whitevec.index.encodings.sign_codes import SIGN_FILE, SignCodes, code_bytes, hamming_scores
from whitevec.index.encodings.spec import parse_encoding
from whitevec.index.folder.manifest import MANIFEST
from whitevec.index.milvus.bm25 import (
    TEXT_FIELD,
    MilvusLexical,
    add_bm25_fields,
    bm25_of,
    bm25_record,
    check_milvus_analyzer,
    milvus_bm25_settings,
    result_arrays,
    text_field_analyzer,
    warn_lite_analyzer,
)
from whitevec.index.milvus.filters import rows_filter
from whitevec.index.milvus.index_types import milvus_index_type
from whitevec.index.milvus.lite_servers import (
    check_lite_uri,
    index_params_as_read,
    is_local_uri,
    lite_closed,
    lite_locked,
    lite_opened,
    quiet_lite_start,
    stop_lite_server,
)
from whitevec.index.stores.vector import (
    ENCODING,
    KINDS,
    METRICS,
    check_choice,
    check_vectors_for,
    register_store,
    resolve_params,
)
from whitevec.utils.io import writing_to

if TYPE_CHECKING:
    from whitevec.index.folder.snapshot import IndexSnapshot

logger = logging.getLogger(__name__)

MILVUS_LOCAL = "milvus.db"  # Milvus Lite data of an index built without --uri, in its folder
MILVUS_TOPK_LIMIT = 16384  # Milvus refuses larger limits
_INSERT_BATCH = 2000
# A collection that keeps the documents too (``docs=True``, built by --engine ray) has the scalar fields
# doc_id, text and metadata (JSON text or null), VARCHARs of at most this many bytes each.
DOC_TEXT_BYTES = 65535
# The manifest's ``docs`` for such an index (:class:`whitevec.index.milvus.documents.MilvusDocs` reads them).
DOCS_IN_COLLECTION = "milvus"
_QUERY_ROWS = 1000
_STRONG = {"consistency_level": "Strong"}
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {
    "flat": {ENCODING: "float32"},
    "hnsw": {"M": 32, "efConstruction": 40, "efSearch": 64, ENCODING: "float32"},
    "ivf": {"nlist": 128, "nprobe": 8, ENCODING: "float32"},
}

_BINARY_TYPES = ("BIN_FLAT", "BIN_IVF_FLAT")  # BINARY_VECTOR fields, metric HAMMING


def _pymilvus() -> Any:
    try:
        import pymilvus
    except ImportError as exc:
        raise WhitevecError(
            "the Milvus backend needs pymilvus (and milvus-lite for local files): pip install 'whitevec[milvus]'"
        ) from exc
    return pymilvus


def _connect_message(uri: str, exc: Exception) -> str:
    """Why a connection failed, in words: Milvus Lite reports its lock on the data folder only in a log."""
    if is_local_uri(uri) and lite_locked(uri):
        return (
            f"the Milvus Lite data {uri} is open in another process, and Milvus Lite lets one process at a time "
            "open a data folder. Stop the other process (a running `whitevec serve`?), or keep the vectors on a "
            "Milvus server (--uri http://host:19530)."
        )
    return f"cannot connect to Milvus at {uri}: {exc}"


def new_collection_name() -> str:
    return "whitevec_" + uuid.uuid4().hex[:16]


def _where(folder: Path, uri: str | None) -> tuple[str, str | None]:
    """``(uri, stored_uri)`` of a new collection: where to connect, and what the manifest records (None: Milvus
    Lite in the version folder; a local file made absolute)."""
    if uri is not None and is_local_uri(uri):
        uri = str(Path(uri).expanduser().resolve())
    return str(folder / MILVUS_LOCAL) if uri is None else uri, uri


@register_store
class MilvusStore:
    """Vectors in one Milvus collection (int64 primary key ``id``, float vector ``vector``).

    With no URI at build, Milvus Lite keeps the data in the index folder (``milvus.db/``); with one, a server (or
    a Lite file elsewhere) holds the collection and the folder only names it. Rows are never renumbered, so a
    handle opened for one index version searches its rows, ``id < next_row`` (``visible_rows``; the manifest's
    ``next_row``, as built its count): rows a later add is putting in stay invisible to it.
    """

    name: ClassVar[str] = "milvus"
    library: ClassVar[str] = "pymilvus"  # the client; what keeps the vectors is the server (or Milvus Lite)
    keeps_lexical: ClassVar[bool] = True  # Milvus's own BM25 (whitevec.index.milvus.bm25)
    files: ClassVar[tuple[str, ...]] = ()  # the Lite data folder is a database, not a checksummed file
    disk_files: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def files_for(cls, params: dict[str, Any]) -> tuple[str, ...]:
        """The files a version keeps in its folder: the sign step of sign codes (their rows live in Milvus)."""
        return (SIGN_FILE,) if parse_encoding(params.get(ENCODING)).sign else ()

    def __init__(
        self,
        uri: str,
        collection: str,
        dim: int,
        metric: str,
        kind: str = "flat",
        params: dict[str, Any] | None = None,
        *,
        create: bool = False,
        token: str | None = None,
        stored_uri: str | None = None,
        docs: bool = False,
        bm25: dict[str, Any] | None = None,
    ) -> None:
        self.uri = str(uri)
        self.collection = collection
        self.dim = int(dim)
        self.metric = check_choice(metric, METRICS, "metric")
        self.kind = check_choice(kind, KINDS, "index kind")
        self._params = resolve_params(self.kind, params, DEFAULT_PARAMS)
        self.encoding = parse_encoding(self._params[ENCODING])
        self.encoding.check_dim(self.dim)
        self.index_type, self._type_params = milvus_index_type(self.kind, self.encoding, self.uri)
        # The sign step of a BINARY_VECTOR collection: fitted on the first add, or read from SIGN_FILE.
        self.signs: SignCodes | None = None
        # What the manifest records: None when the data lives in the index folder (Milvus Lite there).
        self.stored_uri = stored_uri
        self.docs = docs  # the collection holds the documents' scalar fields (see DOC_TEXT_BYTES)
        # Milvus's BM25 on the text field ({"analyzer_params", "k1", "b"}; see whitevec.index.milvus_lexical)
        self.bm25 = bm25
        # Rows this handle searches: ids below it (None: all). See the class docstring.
        self.visible_rows: int | None = None
        self._closed = True
        pymilvus = _pymilvus()
        if is_local_uri(self.uri):
            check_lite_uri(self.uri, create)
        try:
            with quiet_lite_start():
                self.client = pymilvus.MilvusClient(uri=self.uri, token=token or "")
        except Exception as exc:  # pymilvus raises many types; all mean "cannot reach it"
            raise WhitevecError(_connect_message(self.uri, exc)) from exc
        self._closed = False
        if is_local_uri(self.uri):
            lite_opened(self.uri)
        try:
            if create:
                self._create()
            elif not self.client.has_collection(self.collection):
                raise DataNotFoundError(
                    f"Milvus at {self.uri} has no collection {self.collection!r}; the index was dropped or the "
                    "URI is wrong. Rebuild the index."
                )
            self.client.load_collection(self.collection)
        except BaseException:
            self.close()
            raise

    @classmethod
    def library_version(cls) -> str:
        return str(_pymilvus().__version__)

    @classmethod
    def folder_entries(cls, manifest: dict[str, Any]) -> tuple[str, ...]:
        return (MILVUS_LOCAL,) if manifest.get("backend_uri") is None else ()

    @classmethod
    def check_analyzer(cls, analyzer: str) -> None:
        check_milvus_analyzer(analyzer)

    # --- life cycle -----------------------------------------------------------------------------------------
    @classmethod
    def check_options(cls, kind: str, params: dict[str, Any] | None, uri: str | None) -> None:
        kind = check_choice(kind, KINDS, "index kind")
        resolved = resolve_params(kind, params, DEFAULT_PARAMS)
        milvus_index_type(kind, parse_encoding(resolved[ENCODING]), uri)
        if uri is not None and is_local_uri(uri) and not uri.endswith(".db"):
            raise BadInputError(f"a local Milvus Lite URI must be a file name ending in .db, got {uri!r}")

    @classmethod
    def create(
        cls, folder: Path, dim: int, metric: str, kind: str, params: dict[str, Any] | None, uri: str | None
    ) -> MilvusStore:
        cls.check_options(kind, params, uri)
        real_uri, uri = _where(folder, uri)
        return cls(real_uri, new_collection_name(), dim, metric, kind, params, create=True, stored_uri=uri)

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
    ) -> MilvusStore:
        """A new collection with the BM25 fields of :mod:`whitevec.index.milvus.bm25` for whitevec's
        ``analyzer``; warns on Milvus Lite, whose analyzer does not stem."""
        cls.check_options(kind, params, uri)
        settings = milvus_bm25_settings(analyzer)
        real_uri, uri = _where(folder, uri)
        if is_local_uri(real_uri):
            warn_lite_analyzer(settings)
        return cls(
            real_uri, new_collection_name(), dim, metric, kind, params, create=True, stored_uri=uri, bm25=settings
        )

    def lexical_record(self, count: int) -> dict[str, Any]:
        if self.bm25 is None:
            raise WhitevecError(f"Milvus collection {self.collection!r} keeps no BM25 text field")
        return bm25_record(self.bm25, count)

    def lexical_ranker(self) -> MilvusLexical:
        return MilvusLexical(self)

    @classmethod
    def open(cls, snapshot: IndexSnapshot) -> MilvusStore:
        manifest = snapshot.manifest
        collection = manifest["milvus_collection"]
        if not collection:
            raise CorruptFileError(f"{snapshot.folder / MANIFEST}: a Milvus index needs milvus_collection")

        def connect(uri: Path | str) -> MilvusStore:
            return cls(
                str(uri),
                collection,
                manifest["dim"],
                manifest["metric"],
                manifest["index_kind"],
                manifest["index_params"],
                stored_uri=manifest["backend_uri"],
                docs=manifest.get("docs") == DOCS_IN_COLLECTION,
                bm25=bm25_of(manifest),
            )

        uri = manifest["backend_uri"]
        store = connect(uri) if uri else snapshot.by_path(MILVUS_LOCAL, connect)
        store.visible_rows = int(manifest.get("next_row", manifest["count"]))
        if store.binary:
            data = snapshot.read_bytes(SIGN_FILE)
            store.signs = SignCodes.from_bytes(
                data, str(snapshot.folder / SIGN_FILE), store.encoding.codec, store.dim
            )
        return store

    @classmethod
    def discard(cls, manifest: dict[str, Any]) -> None:
        """Drop the collection of a replaced index whose vectors lived outside its folder (a server, or a Lite
        file elsewhere); in-folder Lite data went away with the folder."""
        uri, collection = manifest.get("backend_uri"), manifest.get("milvus_collection")
        if not uri or not collection:
            return
        client = None
        try:
            client = _pymilvus().MilvusClient(uri=uri)
            if client.has_collection(collection):
                client.drop_collection(collection)
        except Exception as exc:  # the new index is fine; the old collection is only garbage
            logger.warning("could not drop the replaced Milvus collection %s: %s", collection, exc)
        finally:
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()

    def stage_add(self, folder: Path) -> MilvusStore:
        """In-folder Milvus Lite data is copied into the next version's folder and added to there, so the
        current version stays whole; a collection elsewhere is shared (readers are held at their row count)."""
        if self.stored_uri is not None:
            return self
        self.release()  # one server per data folder: let go before copying it
        target = folder / MILVUS_LOCAL
        shutil.copytree(self.uri, target, ignore=shutil.ignore_patterns("LOCK"))
        staged = MilvusStore(
            str(target),
            self.collection,
            self.dim,
            self.metric,
            self.kind,
            self._params,
            stored_uri=None,
            docs=self.docs,
            bm25=self.bm25,
        )
        staged.signs = self.signs
        return staged

    def save(self, folder: Path) -> list[str]:
        self.client.flush(self.collection)
        if self.stored_uri is None:
            self.release()  # Milvus Lite must let go of its files before the folder is renamed
        if not self.binary:
            return []
        if self.signs is None:
            raise BadInputError("cannot save an empty index of sign codes; add vectors first")
        with writing_to(folder / SIGN_FILE):
            (folder / SIGN_FILE).write_bytes(self.signs.to_bytes())
        return [SIGN_FILE]

    def reopen(self, folder: Path, manifest: dict[str, Any]) -> MilvusStore:
        store = self
        if self.stored_uri is None:
            here = str(folder / MILVUS_LOCAL)
            if self._closed or os.path.abspath(self.uri) != os.path.abspath(here):
                store = MilvusStore(
                    here,
                    self.collection,
                    self.dim,
                    self.metric,
                    self.kind,
                    self._params,
                    docs=self.docs,
                    bm25=self.bm25,
                )
                store.signs = self.signs
        store.visible_rows = int(manifest.get("next_row", manifest["count"]))
        return store

    def abandon(self, ids: np.ndarray) -> None:
        if self.stored_uri is None:
            self.release()  # a staged Lite copy: its folder is removed with the failed version
        else:
            self.delete(ids)

    @property
    def binary(self) -> bool:
        """Whether the collection holds sign codes (a BINARY_VECTOR field searched by Hamming distance)."""
        return self.index_type in _BINARY_TYPES

    @property
    def _milvus_metric(self) -> str:
        if self.binary:
            return "HAMMING"
        return "L2" if self.metric == "l2" else "IP"

    @property
    def _type_search_params(self) -> dict[str, Any]:
        """Search parameters of the index type: IVF_RABITQ takes the encoding's query bits (0: float queries)."""
        if self.index_type == "IVF_RABITQ":
            return {"rbq_query_bits": int(self.encoding.qb or 0)}
        return {}

    def field_values(self, x: np.ndarray, *, fit: bool = False) -> list[Any]:
        """The ``vector`` field's values for float rows ``x``: lists of floats, or for sign codes the packed bytes
        of ``SignCodes.encode`` (the codes the FAISS store makes; ``fit``: fit the sign step on ``x`` first when
        it has none yet)."""
        if not self.binary:
            return [v.tolist() for v in x]
        if self.signs is None:
            if not fit:
                raise WhitevecError(f"Milvus collection {self.collection!r} has no sign codes fitted yet")
            self.signs = SignCodes(self.encoding.codec).fit(x)
        return [bytes(code) for code in self.signs.encode(x)]

    def _create(self) -> None:
        pymilvus = _pymilvus()
        DataType = pymilvus.DataType
        if self.client.has_collection(self.collection):
            raise BadInputError(f"Milvus collection {self.collection!r} already exists at {self.uri}")
        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        if self.binary:  # Milvus counts a binary vector's dimension in bits, a multiple of 8
            schema.add_field("vector", DataType.BINARY_VECTOR, dim=8 * code_bytes(self.dim))
        else:
            schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self.dim)
        if self.docs:
            schema.add_field("doc_id", DataType.VARCHAR, max_length=DOC_TEXT_BYTES)
        if self.docs or self.bm25 is not None:
            analyzed = {} if self.bm25 is None else text_field_analyzer(self.bm25)
            schema.add_field(TEXT_FIELD, DataType.VARCHAR, max_length=DOC_TEXT_BYTES, **analyzed)
        if self.docs:
            schema.add_field("metadata", DataType.VARCHAR, max_length=DOC_TEXT_BYTES, nullable=True)
        index_params = self.client.prepare_index_params()
        if self.bm25 is not None:
            add_bm25_fields(pymilvus, schema, index_params, self.bm25, self.uri)
        index_params.add_index(
            "vector", index_type=self.index_type, metric_type=self._milvus_metric, params=self._build_params()
        )
        # Strong: a search sees every write acknowledged before it (a server following writers must)
        self.client.create_collection(self.collection, schema=schema, index_params=index_params, **_STRONG)

    def _build_params(self) -> dict[str, Any]:
        """The index's build parameters as this Milvus reads them (:func:`index_params_as_read`;
        tests/test_milvus.py::test_milvus_lite_sq8_matches_faiss_sq8)."""
        names = {"hnsw": ("M", "efConstruction"), "ivf": ("nlist",)}.get(self.kind, ())
        build = {name: self._params[name] for name in names} | self._type_params
        return index_params_as_read(self.uri, build)

    @property
    def count(self) -> int:
        rows = self.client.query(self.collection, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"]) if rows else 0

    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def location(self) -> dict[str, Any]:
        return {"backend_uri": self.stored_uri, "milvus_collection": self.collection}

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        if self.bm25 is not None:
            raise BadInputError(
                "this index keeps its lexical part in Milvus (BM25 on the documents' text); adding vectors "
                "without their text is not supported: rebuild the index with the new documents"
            )
        self._insert(ids, vectors, None)

    def add_with_texts(self, ids: np.ndarray, vectors: np.ndarray, texts: list[str]) -> None:
        """Add rows with their documents' text, which Milvus's BM25 function turns into the sparse field."""
        if self.bm25 is None:
            raise WhitevecError(f"Milvus collection {self.collection!r} keeps no BM25 text field")
        self._insert(ids, vectors, texts)

    def _insert(self, ids: np.ndarray, vectors: np.ndarray, texts: list[str] | None) -> None:
        ids64, x = check_vectors_for(self, ids, vectors)
        values = self.field_values(x, fit=True)
        for start in range(0, len(ids64), _INSERT_BATCH):
            stop = start + _INSERT_BATCH
            rows = [
                {"id": int(i), "vector": v} for i, v in zip(ids64[start:stop], values[start:stop], strict=True)
            ]
            if texts is not None:
                for row, text in zip(rows, texts[start:stop], strict=True):
                    row[TEXT_FIELD] = text
            self.client.insert(self.collection, rows)
        self.client.flush(self.collection)

    def upsert_documents(
        self,
        ids: np.ndarray,
        vectors: np.ndarray,
        doc_ids: list[str],
        texts: list[str],
        metadata: list[str | None],
    ) -> None:
        """Write rows with their documents (a collection made with ``docs=True``); a row written again replaces
        the earlier one, so a retried write never duplicates a row. Flushed by :meth:`flush`."""
        if not self.docs:
            raise WhitevecError(f"Milvus collection {self.collection!r} keeps no documents")
        ids64, x = check_vectors_for(self, ids, vectors)
        rows = [
            {"id": int(i), "vector": v, "doc_id": d, "text": t, "metadata": m}
            for i, v, d, t, m in zip(ids64, self.field_values(x), doc_ids, texts, metadata, strict=True)
        ]
        self.client.upsert(self.collection, rows)

    def flush(self) -> None:
        self.client.flush(self.collection)

    def documents(self, rows: list[int]) -> dict[int, tuple[str, str, str | None]]:
        """``{row: (doc id, text, metadata JSON or None)}`` of a collection that keeps documents."""
        out: dict[int, tuple[str, str, str | None]] = {}
        wanted = sorted({int(r) for r in rows if r >= 0})
        for start in range(0, len(wanted), _QUERY_ROWS):
            chunk = wanted[start : start + _QUERY_ROWS]
            found = self.client.query(
                self.collection,
                filter=f"id in [{','.join(map(str, chunk))}]",
                output_fields=["id", "doc_id", "text", "metadata"],
            )
            for hit in found:
                out[int(hit["id"])] = (hit["doc_id"], hit["text"], hit.get("metadata"))
        return out

    def delete(self, ids: np.ndarray) -> None:
        self.client.delete(self.collection, ids=[int(i) for i in ids])

    def search(self, vectors: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[Any, Any]:
        data, search_params = self.dense_request(np.ascontiguousarray(vectors, dtype=np.float32), k)
        where = rows_filter(self.visible_filter, allowed)  # Milvus pre-filters: the top k of the passing rows
        results = self.client.search(
            self.collection, data=data, limit=k, output_fields=["id"], search_params=search_params, **where
        )
        scores, ids = result_arrays(results, k)
        if self.binary:  # Hamming distances as the FAISS store scores them
            scores = np.where(ids >= 0, hamming_scores(scores, self.dim, self.metric), 0.0).astype(np.float32)
        return scores, ids

    def dense_request(self, x: np.ndarray, k: int) -> tuple[list[Any], dict[str, Any]]:
        """The vector field's values for queries ``x`` and the search parameters of a top-``k`` search."""
        if k > MILVUS_TOPK_LIMIT:
            raise BadInputError(f"Milvus returns at most {MILVUS_TOPK_LIMIT} results per query, asked for {k}")
        search_params: dict[str, Any] = {"metric_type": self._milvus_metric}
        if self.kind == "hnsw":
            search_params["params"] = {"ef": max(self._params["efSearch"], k)}
        elif self.kind == "ivf":
            search_params["params"] = {"nprobe": self._params["nprobe"], **self._type_search_params}
        return self.field_values(x), search_params

    @property
    def visible_filter(self) -> str:
        """The filter that holds a search to the rows of this handle's version."""
        return "" if self.visible_rows is None else f"id < {int(self.visible_rows)}"

    def drop(self) -> None:
        self.client.drop_collection(self.collection)

    def close(self) -> None:
        """Close the connection; the last handle on a Milvus Lite file in this process also stops its server,
        so that another process can open the data folder (Milvus Lite allows one process at a time)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # closing a broken connection is not worth a second error
            self.client.close()
        if is_local_uri(self.uri):
            lite_closed(self.uri)

    def release(self) -> None:
        """Close, and for Milvus Lite also stop its in-process server at once, so the data folder is unlocked
        (needed before the folder is renamed; another handle on the same file in this process loses its
        server)."""
        self.close()
        if is_local_uri(self.uri):
            stop_lite_server(os.path.abspath(self.uri))

    # --- segments: none, its own writer writes its indexes (whitevec.index.milvus.writes) ---------------------
    def empty_copy(self) -> MilvusStore:
        raise _no_segments()

    def kept_vectors(self, ids: np.ndarray) -> np.ndarray:
        raise _no_segments()

    def add_kept(self, ids: np.ndarray, kept: np.ndarray) -> None:
        raise _no_segments()


def _no_segments() -> BadInputError:
    return BadInputError("an index on the milvus backend is written through Milvus's own calls, not by segments")
