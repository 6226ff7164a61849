"""FAISS (faiss-cpu) store: a flat, HNSW or IVF index of any encoding (float32, fp16, SQ, PQ, OPQ+PQ, exact
re-ranking; see :mod:`whitevec.index.encodings.spec`), wrapped in an id map, saved as index.faiss."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError, WhitevecWarning
from whitevec.index.encodings.rescore import RESCORE_FILE, RescoreVectors
from whitevec.index.encodings.sign_codes import SIGN_FILE, SignCodes, hamming_scores
from whitevec.index.encodings.sign_codes import code_bytes as sign_code_bytes
from whitevec.index.encodings.spec import (
    Encoding,
    check_factory_dim,
    factory_string,
    fit_to_training,
    index_layers,
    parse_encoding,
)
from whitevec.index.faiss.files import write_faiss_index
from whitevec.index.faiss.filtered import (
    DIRECT_MAPS,
    FAISS_SEARCH,
    STORAGE_SCAN,
    decoded_search,
    filtered_path,
    filtered_setting,
    forget_direct_map,
    readable_codes,
    storage_scan,
    work_per_query,
)
from whitevec.index.faiss.library import INDEX_FILE, binary_layers, faiss_module, faiss_version, one_faiss_thread
from whitevec.index.faiss.params import DEFAULT_PARAMS, check_encoding, default_nlist
from whitevec.index.stores.vector import (
    ENCODING,
    KINDS,
    METRICS,
    check_choice,
    check_vectors_for,
    register_store,
    resolve_params,
    sample_rows,
)
from whitevec.utils.io import writing_to
from whitevec.utils.threads import one_blas_thread

if TYPE_CHECKING:
    from whitevec.index.folder.snapshot import IndexSnapshot

# A search of fewer multiply-adds than this runs on one OpenMP thread (about 6 ms of one core here). Why: faiss's
# pool then costs more than it saves while torch's threads hold the cores. 32 queries on 1,400 x 256 (11.5M)
# took 1.0 ms on one thread every time, and 0.7 ms median but 3.2-3.6 ms mean on the pool of two: some searches
# waited whole time slices for a pool thread (docs/notes/faiss-threads.md).
POOL_WORK = 2**26

TRAIN_SEED = 0


# Up to this many training vectors, codes train on one OpenMP thread: PQ's k-means runs thousands of small
# parallel regions, which an oversubscribed machine turns into waits. 1400 x 384 unit vectors, pq96x5, load ~4.5
# on two cores: 62 s with faiss's default threads, 0.69 s on one (pq48x5: 31 s vs 0.42 s).
SMALL_TRAIN = 20_000


@register_store
class FaissStore:
    """A FAISS index of ``dim``-dimensional vectors; ``cosine``/``ip`` use inner product, ``l2`` squared L2.

    The index lives in memory and is written to ``index.faiss`` in the version folder; an add works on a copy,
    so the live index never changes under its readers. Sign codes (``binary``, ``binary-rr``, ``itq``) live in a
    faiss binary index searched by Hamming distance, their mean and rotation in ``binary.safetensors``; a
    ``+rescore`` encoding keeps its rescoring vectors in ``rescore.npy``, read on demand.
    """

    name: ClassVar[str] = "faiss"
    library: ClassVar[str] = "faiss"
    files: ClassVar[tuple[str, ...]] = (INDEX_FILE,)
    disk_files: ClassVar[tuple[str, ...]] = (RESCORE_FILE,)

    def __init__(self, dim: int, metric: str, kind: str = "flat", params: dict[str, Any] | None = None) -> None:
        self.dim = int(dim)
        self.metric = check_choice(metric, METRICS, "metric")
        self.kind = check_choice(kind, KINDS, "index kind")
        self._params = resolve_params(self.kind, params, DEFAULT_PARAMS)
        check_encoding(self.kind, self._params, self.dim, self.metric)
        self.index: Any = None  # created on the first add (IVF, SQ and PQ need the vectors to train)
        self.signs: SignCodes | None = None  # the sign step of sign codes, fitted on the first add
        self.rescore = self._new_rescore()
        self._takes_selector: bool | None = None  # whether faiss searches this index with an id selector
        self._ids_read: tuple[Any, np.ndarray, bool] | None = None  # _row_ids: the index, its ids, in order

    def _new_rescore(self) -> RescoreVectors | None:
        encoding = self.encoding
        return None if encoding.rescore is None else RescoreVectors(encoding.rescore_form, self.dim)

    @classmethod
    def files_for(cls, params: dict[str, Any]) -> tuple[str, ...]:
        """The files an index with these parameters keeps in its folder: ``index.faiss``, and the sign step of
        sign codes and the rescoring vectors of ``+rescore`` when the encoding has them."""
        encoding = parse_encoding(params.get(ENCODING))
        return (
            INDEX_FILE,
            *((SIGN_FILE,) if encoding.sign else ()),
            *((RESCORE_FILE,) if encoding.rescore is not None else ()),
        )

    @classmethod
    def library_version(cls) -> str:
        return faiss_version()

    @classmethod
    def folder_entries(cls, manifest: dict[str, Any]) -> tuple[str, ...]:
        return ()  # every file it keeps is listed in the manifest

    # --- life cycle -----------------------------------------------------------------------------------------
    @classmethod
    def check_options(cls, kind: str, params: dict[str, Any] | None, uri: str | None) -> None:
        if uri is not None:
            raise BadInputError("--uri applies to the milvus backend only")
        kind = check_choice(kind, KINDS, "index kind")
        check_encoding(kind, resolve_params(kind, params, DEFAULT_PARAMS), None)

    @classmethod
    def create(
        cls, folder: Path, dim: int, metric: str, kind: str, params: dict[str, Any] | None, uri: str | None
    ) -> FaissStore:
        cls.check_options(kind, params, uri)
        return cls(dim, metric, kind, params)

    @classmethod
    def open(cls, snapshot: IndexSnapshot) -> FaissStore:
        manifest, named = snapshot.manifest, snapshot.path_of  # a segment's files: named with its prefix
        dim = int(manifest["dim"])
        with snapshot.reader(INDEX_FILE) as read:
            params = manifest["index_params"]
            store = cls.read(read, named(INDEX_FILE), dim, manifest["metric"], manifest["index_kind"], params)
        encoding = store.encoding
        if encoding.sign:
            raw = snapshot.read_bytes(SIGN_FILE)
            store.signs = SignCodes.from_bytes(raw, str(named(SIGN_FILE)), encoding.codec, dim)
        if store.rescore is not None:
            snapshot.verify(RESCORE_FILE)
            store.rescore = RescoreVectors.open(
                snapshot.pinned(RESCORE_FILE), named(RESCORE_FILE), encoding.rescore_form, dim
            )
            if store.rescore.rows < store.count:
                raise CorruptFileError(
                    f"{named(RESCORE_FILE)} holds {store.rescore.rows} rescoring vectors for {store.count} "
                    "codes; rebuild the index"
                )
        return store

    @classmethod
    def read(
        cls, read: Callable[[int], bytes], source: Path, dim: int, metric: str, kind: str, params: dict[str, Any]
    ) -> FaissStore:
        """An index from a ``read(n)`` stream of a file written by :meth:`save` (``source`` names it in errors;
        ``params`` are the manifest's, taken as they are)."""
        store = cls(dim, metric, kind, None)
        store._params = dict(params)
        store.rescore = store._new_rescore()
        faiss = faiss_module()
        sign = store.encoding.sign
        try:
            reader = faiss.PyCallbackIOReader(read)
            store.index = faiss.read_index_binary(reader) if sign else faiss.read_index(reader)
        except RuntimeError as exc:
            raise CorruptFileError(f"{source} is not a readable FAISS index ({exc})") from exc
        if store.index.d != (8 * sign_code_bytes(dim) if sign else dim):
            raise CorruptFileError(f"{source} holds {store.index.d}-d vectors, manifest says {dim}")
        store._apply_search_params(store.index)
        return store

    @classmethod
    def discard(cls, manifest: dict[str, Any]) -> None:
        return None  # everything lived in the replaced folder

    def stage_add(self, folder: Path) -> FaissStore:
        """An independent copy (so that adding can fail without touching the live index)."""
        other = FaissStore(self.dim, self.metric, self.kind, None)
        other._params = dict(self._params)
        other.signs = self.signs  # fitted once, never changed
        other.rescore = None if self.rescore is None else self.rescore.staged()
        if self.index is not None:
            faiss = faiss_module()
            if self.encoding.sign:  # clone_binary_index cannot copy an id map over HNSW: a serialized copy
                other.index = faiss.deserialize_index_binary(faiss.serialize_index_binary(self.index))
            else:
                other.index = faiss.clone_index(self.index)
            other._apply_search_params(other.index)
        return other

    def save(self, folder: Path) -> list[str]:
        if self.index is None:
            raise BadInputError("cannot save an empty index; add vectors first")
        forget_direct_map(self.index)  # the file as before filters
        write_faiss_index(self.index, folder / INDEX_FILE, binary=self.signs is not None)
        if self.signs is not None:
            with writing_to(folder / SIGN_FILE):
                (folder / SIGN_FILE).write_bytes(self.signs.to_bytes())
        if self.rescore is not None:
            self.rescore.save(folder / RESCORE_FILE)
        return list(self.files_for(self._params))

    def reopen(self, folder: Path, manifest: dict[str, Any]) -> FaissStore:
        """This store on the version now at ``folder``: the rescoring vectors read from its file (what was
        added stops taking memory)."""
        encoding = self.encoding
        if self.rescore is not None:
            self.rescore = RescoreVectors.open_path(folder / RESCORE_FILE, encoding.rescore_form, self.dim)
        return self

    def abandon(self, ids: np.ndarray) -> None:
        return None  # the staged copy is simply dropped

    def drop(self) -> None:
        self.index = None
        self.rescore = self._new_rescore()

    def close(self) -> None:
        return None

    # --- data -----------------------------------------------------------------------------------------------
    @property
    def _l2_for_cosine(self) -> bool:
        """Cosine on lossy codes is searched as squared L2 (unit vectors: d = 2 - 2 cos, the same ranking for
        exact vectors). Inner products with PQ reconstructions, whose norms wander, rank worse: recall@10 0.32
        by inner product against 0.71 by L2 on the same pq16x6 codes (tests/test_encodings.py data)."""
        return self.metric == "cosine" and self.encoding.codec != "float32"

    def _faiss_metric(self) -> int:
        faiss = faiss_module()
        l2 = self.metric == "l2" or self._l2_for_cosine
        return int(faiss.METRIC_L2 if l2 else faiss.METRIC_INNER_PRODUCT)

    @property
    def encoding(self) -> Encoding:
        """How the vectors are stored (``float32`` for indexes built before encodings existed)."""
        return parse_encoding(self._params.get(ENCODING))

    def set_rescore_multiplier(self, multiplier: int) -> None:
        """Search this open store at another ``+rescore`` multiplier (re-rank ``multiplier x k`` candidates),
        for measuring what the multiplier buys; the saved index keeps the one it was built with."""
        encoding = self.encoding
        if not encoding.rescore:
            raise BadInputError(f"this index's encoding {encoding.spec!r} has no +rescore step")
        self._params[ENCODING] = replace(encoding, rescore=multiplier).spec

    def training_rows(self, vectors: np.ndarray) -> np.ndarray:
        """The vectors that train the codes: all of ``vectors``, or ``train_sample`` of them drawn with a fixed
        seed (kept in their order)."""
        size = self._params.get("train_sample")
        if size is None or size >= vectors.shape[0]:
            return vectors
        return np.ascontiguousarray(vectors[sample_rows(vectors.shape[0], size, TRAIN_SEED)])

    def _create_index(self, first: np.ndarray) -> Any:
        train = self.training_rows(first)
        encoding = self.encoding
        if self.kind == "ivf" and encoding.codec != "factory":
            self._params["nlist"] = self._params["nlist"] or default_nlist(train.shape[0])
        encoding, params, notes = fit_to_training(encoding, self.kind, self._params, train.shape[0])
        if notes:
            warnings.warn("; ".join(notes), WhitevecWarning, stacklevel=5)
        self._params = {**params, ENCODING: encoding.spec}
        if train.shape[0] < encoding.min_training(self.dim):
            raise BadInputError(
                f"encoding {encoding.spec} needs at least {encoding.min_training(self.dim)} training vectors; got "
                f"{train.shape[0]}"
            )
        index = self._sign_index(train) if encoding.sign else self._float_index(train)
        self._apply_search_params(index)
        return index

    def _float_index(self, train: np.ndarray) -> Any:
        faiss = faiss_module()
        encoding, metric = self.encoding, self._faiss_metric()
        if encoding.codec == "factory":
            inner = check_factory_dim(encoding, self.dim, metric)
        else:
            factory = factory_string(encoding, self.kind, self._params, self.dim)
            inner = faiss.index_factory(self.dim, factory, metric)
        for layer in index_layers(inner):
            self._record_structure(layer)
            storage = faiss.downcast_index(layer.storage) if hasattr(layer, "storage") else None
            for pq_index in (layer, storage):
                if isinstance(pq_index, faiss.IndexPQ | faiss.IndexIVFPQ):
                    # Polysemous training (faiss's default for IndexPQ) reorders codes for Hamming
                    # pre-filtering, which whitevec never uses; it made training 5-10x slower (4000 x 32).
                    pq_index.do_polysemous_training = False
        if not inner.is_trained:
            # A small training set trains on one thread (see SMALL_TRAIN): faster when the cores are shared.
            with one_faiss_thread() if train.shape[0] <= SMALL_TRAIN else contextlib.nullcontext():
                inner.train(train)
        # IndexIDMap, not IndexIDMap2: whitevec never reconstructs by id, and IDMap2's reverse hash map costs
        # about 50 bytes a vector in RAM (1M 1-bit codes: 155 MB resident against 104 MB of codes and ids).
        return faiss.IndexIDMap(inner)

    def _sign_index(self, train: np.ndarray) -> Any:
        """Sign codes: the sign step fitted on ``train``, and a faiss binary index of its codes (an IVF's lists
        trained on the training vectors' codes)."""
        faiss = faiss_module()
        with one_faiss_thread() if train.shape[0] <= SMALL_TRAIN else contextlib.nullcontext():
            self.signs = SignCodes(self.encoding.codec).fit(train)
            inner = faiss.index_binary_factory(
                self.signs.n_bits, factory_string(self.encoding, self.kind, self._params, self.dim)
            )
            for layer in binary_layers(inner):
                self._record_structure(layer)
            if not inner.is_trained:
                inner.train(self.signs.encode(train))
        return faiss.IndexBinaryIDMap(inner)  # no reverse map, as in _float_index

    def _record_structure(self, layer: Any) -> None:
        """HNSW's efConstruction set and M, IVF's nlist recorded as faiss built them."""
        if hasattr(layer, "hnsw"):
            layer.hnsw.efConstruction = self._params["efConstruction"]
            self._params["M"] = int(layer.hnsw.nb_neighbors(1))
        if hasattr(layer, "nlist") and hasattr(layer, "nprobe"):
            self._params["nlist"] = int(layer.nlist)

    def _apply_search_params(self, index: Any) -> None:
        faiss = faiss_module()
        layers = binary_layers(index) if self.encoding.sign else index_layers(index)
        for layer in layers:
            if hasattr(layer, "hnsw") and "efSearch" in self._params:
                layer.hnsw.efSearch = self._params["efSearch"]
            if hasattr(layer, "nlist") and hasattr(layer, "nprobe") and "nprobe" in self._params:
                layer.nprobe = self._params["nprobe"]
            if isinstance(layer, faiss.IndexRefine):
                layer.k_factor = float(self._params.get("refine_factor") or 1)
            storage = faiss.downcast_index(layer.storage) if isinstance(layer, faiss.IndexHNSWRaBitQ) else layer
            if isinstance(storage, faiss.IndexRaBitQ | faiss.IndexIVFRaBitQ):
                storage.qb = int(self.encoding.qb if self.encoding.qb is not None else storage.qb)

    @property
    def count(self) -> int:
        return 0 if self.index is None else int(self.index.ntotal)

    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def location(self) -> dict[str, Any]:
        return {"backend_uri": None, "milvus_collection": None}

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids64, x = check_vectors_for(self, ids, vectors)
        if self.index is None:
            self.index = self._create_index(x)
        if self.rescore is not None:
            self.rescore.add(ids64, x)  # first: it refuses what it cannot keep before the codes change
        self._ids_read = None
        self.index.add_with_ids(x if self.signs is None else self.signs.encode(x), ids64)

    def delete(self, ids: np.ndarray) -> None:
        self._ids_read = None
        if self.index is not None:
            forget_direct_map(self.index)  # faiss removes none with one
            self.index.remove_ids(np.ascontiguousarray(ids, dtype=np.int64))
        if self.rescore is not None:
            self.rescore.delete(ids)

    def _work_per_query(self, setting: int | None = None) -> int:
        """About how many multiply-adds one query's search takes at efSearch or nprobe ``setting`` (a filtered
        search's, scaled; the index's own when None): what decides whether faiss's thread pool is worth waking.
        A Hamming distance over d bits counts as d / 32 (popcounts of 64 bits at a time)."""
        dim = self.dim if self.signs is None else max(1, self.dim // 32)
        return work_per_query(self.kind, self._params, int(self.index.ntotal), dim, setting)

    def search(
        self, vectors: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.index is None:
            return np.zeros((x.shape[0], k), np.float32), np.full((x.shape[0], k), -1, np.int64)
        if allowed is not None:
            return self._filtered_search(x, k, allowed)
        return self._search(x, k)

    def _search(
        self, x: np.ndarray, k: int, params: Any = None, passing: int | None = None, setting: int | None = None
    ) -> tuple[Any, Any]:
        """The search itself; ``params``: faiss's search parameters (an id selector), ``passing``: how many rows
        it lets through (what rescoring's candidates are capped at), ``setting``: the efSearch or nprobe the live
        layers were set to, where ``params`` does not say it (what the search's work is priced at)."""
        encoding = self.encoding
        # With rescoring the codes find K x k candidates (no more than there are) for the vectors on disk to order.
        most = self.count if passing is None else passing
        wanted = k if encoding.rescore is None else max(k, min(encoding.rescore * k, most))
        # From distance_compute_blas_threshold query floats on, faiss computes distances with its OpenBLAS,
        # whose threads would spin beside torch's (whitevec.utils.threads).
        blas = x.size >= int(getattr(faiss_module().cvar, "distance_compute_blas_threshold", 0))
        setting = getattr(params, "efSearch", None) or getattr(params, "nprobe", None) or setting  # faiss's
        small = x.shape[0] * self._work_per_query(setting) < POOL_WORK
        selecting = {} if params is None else {"params": params}  # an unfiltered search passes none, as before
        with one_faiss_thread() if small else contextlib.nullcontext(), one_blas_thread(when=blas):
            if self.signs is not None:
                distances, ids = self.index.search(self.signs.encode(x), wanted, **selecting)
                scores = hamming_scores(distances, self.dim, self.metric)
            else:
                scores, ids = self.index.search(x, wanted, **selecting)
                if self._l2_for_cosine:
                    scores = 1.0 - scores / 2.0  # back to cosine (see _l2_for_cosine)
        if self.rescore is not None:
            scores, ids = self.rescore.rescore(x, ids, k, self.metric)
        return scores, ids

    def _filtered_search(self, x: np.ndarray, k: int, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best of the rows ``allowed`` (a bool per row) lets through, never fewer than there are, on
        the path of least work (``filtered_path``): the passing rows alone, their plain codes decoded or HNSW's
        storage scanned (exact); else faiss's search with an id selector where the index takes one (flat float32,
        fp16, SQ, RaBitQ, 1-bit codes; HNSW and IVF of float codes); else a search widened until k are found."""
        passing = int(np.count_nonzero(allowed))
        want = min(k, passing)
        if want == 0:
            return np.zeros((x.shape[0], k), np.float32), np.full((x.shape[0], k), -1, np.int64)
        path = filtered_path(self.kind, self.encoding, self.dim, self._params, self.count, passing, x.shape[0])
        if path != FAISS_SEARCH and readable_codes(self.index):
            return self._passing_rows_search(x, k, allowed, scan=path == STORAGE_SCAN)
        if self._takes_selector is not False:
            bitmap = np.packbits(np.asarray(allowed, dtype=bool), bitorder="little")
            try:
                for wide in (False, True):  # HNSW and IVF may reach too few passing rows: then all of them
                    params = self._selector_params(bitmap, k, passing=passing, wide=wide)
                    scores, ids = self._search(x, k, params, passing)
                    if ((ids >= 0).sum(axis=1) >= want).all():
                        break
                self._takes_selector = True
                return scores, ids
            except RuntimeError:  # faiss refuses search parameters here (PQ, +refine, 1-bit IVF and HNSW)
                self._takes_selector = False
        return self._widened_search(x, k, allowed, want)

    def _row_ids(self) -> tuple[np.ndarray, bool]:
        """The id of each row of the index inside the id map, and whether they are 0, 1, 2, ... (a build's):
        read once per state of the index (copying 100k ids and gathering through them took 0.25 ms of a 1.1 ms
        search); an add or delete forgets them."""
        if self._ids_read is None or self._ids_read[0] is not self.index:
            rows = faiss_module().vector_to_array(self.index.id_map)
            self._ids_read = (self.index, rows, bool(np.array_equal(rows, np.arange(len(rows)))))
        return self._ids_read[1], self._ids_read[2]

    def _passing_rows_search(
        self, x: np.ndarray, k: int, allowed: np.ndarray, scan: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """The passing rows alone, exactly: their codes decoded (``decoded_search``) or, ``scan``, HNSW's storage
        scanned with a selector (``storage_scan``). Few passing, this beats faiss's own search: 100k x 128, 32
        queries, 0.1% passing, float32 60 ms with the selector, pq32 0.75 s widened, both under 1 ms decoded."""
        rows, in_order = self._row_ids()
        within = allowed[: len(rows)] if in_order else allowed[rows]
        # One thread: faiss decodes more than 1,000 codes on its OpenMP pool, whose waits for a time slice on a
        # busy machine cost more than the decoding (see POOL_WORK).
        l2 = self._faiss_metric() == faiss_module().METRIC_L2
        with one_faiss_thread(), one_blas_thread():
            scores, found = (storage_scan if scan else decoded_search)(self.index, x, k, within, l2)
        if self._l2_for_cosine:
            scores = 1.0 - scores / 2.0
        out_scores, out_ids = np.zeros((x.shape[0], k), np.float32), np.full((x.shape[0], k), -1, np.int64)
        kept, width = found >= 0, found.shape[1]
        out_scores[:, :width] = np.where(kept, scores, 0.0)
        out_ids[:, :width] = np.where(kept, rows[np.maximum(found, 0)], -1)
        return out_scores, out_ids

    def _selector_params(self, bitmap: np.ndarray, k: int, *, passing: int, wide: bool) -> Any:
        """faiss's search parameters for a search within ``bitmap``'s ``passing`` rows. A selector passing a share
        s of the rows leaves about s of the candidates a graph walk or the probed lists reach, and the passing
        rows' top k lie about 1/s deeper: efSearch / s, nprobe / s ** 1.5 (``filtered_setting``: recall@10
        within 0.01 of the unfiltered one, 100k x 384) or, ``wide``, every list or efSearch at the index size."""
        faiss = faiss_module()
        if self.kind == "ivf":
            params = faiss.SearchParametersIVF()
            nlist = int(self._params["nlist"])
            params.nprobe = nlist if wide else filtered_setting(self.kind, self._params, self.count, passing)
        elif self.kind == "hnsw":
            params = faiss.SearchParametersHNSW()
            params.efSearch = max(
                k, self.count if wide else filtered_setting(self.kind, self._params, self.count, passing)
            )
        else:
            params = faiss.SearchParameters()
        params.sel = faiss.IDSelectorBitmap(len(bitmap), faiss.swig_ptr(bitmap))
        params.bitmap = bitmap  # the selector reads this array: it lives as long as the parameters
        return params

    @contextlib.contextmanager
    def _reaching_every_row(self) -> Iterator[None]:
        """Inside the block, IVF probes every list and HNSW keeps as many candidates as there are rows: the
        widest search of an index that takes no search parameters (1-bit IVF and HNSW). It sets the live layers
        (a Retriever searches under its lock) and restores them after."""
        for layer in binary_layers(self.index) if self.encoding.sign else index_layers(self.index):
            if hasattr(layer, "nlist") and hasattr(layer, "nprobe"):
                layer.nprobe = layer.nlist
            if hasattr(layer, "hnsw"):
                layer.hnsw.efSearch = max(self.count, int(layer.hnsw.efSearch))
        try:
            yield
        finally:
            self._apply_search_params(self.index)

    def _widened_search(
        self, x: np.ndarray, k: int, allowed: np.ndarray, want: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Unfiltered searches ever deeper (from the depth the share of passing rows suggests, 4x each time,
        up to every row, the last one reaching every row of an HNSW or IVF index) until each query has ``want``
        passing rows among its results; their best ``k``."""
        count = self.count
        depth = min(count, max(2 * k, 2 * k * count // max(1, int(np.count_nonzero(allowed)))))
        widest = {"hnsw": count, "ivf": int(self._params.get("nlist") or 1)}.get(self.kind)  # every row or list
        while True:
            with self._reaching_every_row() if depth >= count else contextlib.nullcontext():
                scores, ids = self._search(x, depth, setting=widest if depth >= count else None)
            passes = (ids >= 0) & allowed[np.maximum(ids, 0)]
            if (passes.sum(axis=1) >= want).all() or depth >= count:
                break
            depth = min(count, depth * 4)
        order = np.argsort(~passes, axis=1, kind="stable")[:, :k]  # passing results first, in rank order
        kept = np.take_along_axis(passes, order, axis=1)
        out_ids = np.where(kept, np.take_along_axis(ids, order, axis=1), -1)
        out_scores = np.where(kept, np.take_along_axis(scores, order, axis=1), 0.0).astype(np.float32)
        return out_scores, out_ids

    # --- segments (whitevec.index.segments.writing) ----------------------------------------------------------
    def empty_copy(self) -> FaissStore:
        """Copies the index once (a template is kept after that)."""
        if self.index is None:
            raise BadInputError("cannot copy the training of an empty index")
        other = self.stage_add(Path())
        other.index.reset()
        other.rescore = other._new_rescore()
        return other

    def kept_vectors(self, ids: np.ndarray) -> np.ndarray:
        """The rescoring vectors where the encoding keeps them, else the codes (sign codes as their bytes, others
        decoded)."""
        ids64 = np.ascontiguousarray(ids, dtype=np.int64)
        if self.rescore is not None:
            return self.rescore.vectors(ids64)
        faiss = faiss_module()
        positions = np.searchsorted(faiss.vector_to_array(self.index.id_map), ids64)  # a segment's ids ascend
        inner = self.index.index
        try:
            if self.signs is not None:
                codes = [inner.reconstruct(int(p)) for p in positions]
                return np.stack(codes) if codes else np.zeros((0, inner.code_size), np.uint8)
            # An IVF index gives vectors back through its direct map (made once: a search may ask for it
            # meanwhile).
            with DIRECT_MAPS, contextlib.suppress(RuntimeError):
                faiss.extract_index_ivf(inner).make_direct_map()
            return np.asarray(inner.reconstruct_batch(positions), dtype=np.float32)
        except RuntimeError as exc:
            raise BadInputError(
                f"faiss cannot give back the vectors of encoding {self.encoding.spec!r} ({exc}); rebuild the "
                "index instead of compacting it"
            ) from None

    def add_kept(self, ids: np.ndarray, kept: np.ndarray) -> None:
        """Sign codes added as they are, vectors encoded."""
        if self.signs is not None and self.rescore is None:
            self.index.add_with_ids(np.ascontiguousarray(kept, np.uint8), np.ascontiguousarray(ids, np.int64))
            return
        self.add(ids, kept)
