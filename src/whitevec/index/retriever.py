"""Retriever: an encoder, a fitted Transform, a vector store and the documents of one index version.

``Retriever.build`` writes an index folder (:mod:`whitevec.index.build`; the layout is in
:mod:`whitevec.index.folder.layout`); ``Retriever.load`` opens one consistent version of it
(:mod:`whitevec.index.folder.snapshot`). The vector store is whichever backend the manifest names
(:mod:`whitevec.index.stores.vector`), the document store whichever ``docs`` names
(:mod:`whitevec.index.stores.documents`): nothing here depends on which.

``k`` larger than the number of documents is clamped to that number, with a logged warning
(``logging.getLogger("whitevec.index.retriever")``); ``k`` below 1 is a BadInputError.

A search runs in one of three modes (:mod:`whitevec.index.search.fusion`): ``dense`` (the vectors), ``lexical``
(the index's BM25 part, :attr:`Retriever.lexical`) or ``hybrid`` (both rankings fused); the index's manifest says
which is its default.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from whitevec.datasets.retrieval import Document
from whitevec.encoders.models.identity import index_model_folder
from whitevec.encoders.protocol import EXTERNAL, ExternalEncoder, known_token_mask
from whitevec.errors import BadInputError, DimensionMismatchError
from whitevec.index.build import build_index, check_encoder
from whitevec.index.empty import create_index
from whitevec.index.filters.language import Filter, parse_filter
from whitevec.index.filters.rows import MetadataColumns, RowFilter, row_filter
from whitevec.index.given_vectors import encoder_for, query_input
from whitevec.index.lexical.bm25 import DEFAULT_ANALYZER
from whitevec.index.search.fusion import Fusion, fuse
from whitevec.index.search.hits import (
    UNKNOWN_QUERY_NOTE,
    QueryHits,
    SearchHit,
    SearchResults,
    fused_hits,
    lexical_hits,
    no_hits,
)
from whitevec.index.search.modes import ADD_LEXICAL, SearchPlan, plan_search, search_defaults
from whitevec.index.segments.writing import IndexState, searchable
from whitevec.index.stores.documents import DocumentStore
from whitevec.index.stores.lexical import FusesItself, LexicalRanker
from whitevec.index.stores.vector import VectorStore, stored_files, stored_form
from whitevec.index.versions import current_version
from whitevec.index.writes import IndexWrites
from whitevec.preflight import check_device, check_texts
from whitevec.transforms.frozen import AppliesVectors, as_transform
from whitevec.utils.io import folder_path

if TYPE_CHECKING:
    from whitevec.encoders.protocol import EncoderLike
    from whitevec.transforms import Transform

logger = logging.getLogger(__name__)


class Retriever(IndexWrites):
    """Search a corpus by meaning: ``Retriever.build(...)`` once, then ``Retriever.load(dir).search([...])``."""

    def __init__(
        self,
        path: Path,
        manifest: dict[str, Any],
        encoder: EncoderLike,
        transform: AppliesVectors | None,
        store: VectorStore,
        docs: DocumentStore,
        *,
        owns_encoder: bool = False,
        lexical: LexicalRanker | None = None,
        state: IndexState | None = None,
    ) -> None:
        self.path = path
        self.manifest = manifest
        self.encoder = encoder
        self._loaded_transform: tuple[AppliesVectors | None, Transform | None] | None = None
        self.transform = transform
        self.store = store
        # The BM25 index of this version's documents (rows aligned with the store's), for lexical and hybrid
        # searches; None: dense only.
        self.lexical = lexical
        self._docs = docs
        self._owns_encoder = owns_encoder  # made by load(): closing the Retriever closes it (its vector cache)
        self._lock = threading.RLock()  # a search's, and a write's swap to its version
        self._write_lock = threading.RLock()  # one write at a time (or a refresh), searches going on
        self._columns: tuple[DocumentStore, MetadataColumns] | None = None  # read on the first filtered search
        self._closed = False  # close() lets go of the files: every later use is refused in one line
        # The writes of its backend: as segments where ``state`` holds the version's (FAISS), else the store's own.
        self._writer = self._writer_for(state)

    # --- building --------------------------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        corpus: Sequence[Document] | str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        encoder: EncoderLike | None = None,
        vectors: np.ndarray | str | os.PathLike[str] | None = None,
        encoder_name: str | None = None,
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
    ) -> Retriever:
        """Encode ``corpus``, fit ``transform`` (on the corpus or a text file ``fit_on``), index, write ``out``;
        the new index, loaded.

        ``corpus``: a list of Documents or a corpus file (see ``whitevec.datasets.retrieval``). ``transform``: a
        spec (``"none"``, ``"whitening"``, ``"whitening-256"``, ...), a path to a saved ``.safetensors``
        transform, a Transform (used as is when fitted), or None. The default ``"none"`` keeps raw vectors:
        whitening costs contrastively trained sentence encoders such as the default model; ``whitevec tune``
        says which transform serves an encoder. ``backend="milvus"`` stores the vectors in
        Milvus at ``uri`` (default: Milvus Lite in ``out/milvus.db``).

        A document with no token the encoder knows (empty, blank, only emoji or unknown characters) has no
        meaning; such documents are counted in one warning (WhitevecWarning) and, by ``empty_documents``:
        ``"skip"`` left out (the manifest's ``skipped_documents`` counts them), ``"keep"`` indexed as they
        encode, ``"error"`` refused.

        ``search``: the index's own search mode and fusion, ``{"mode": MODE, "fusion": SPEC}``, written to the
        manifest (:func:`~whitevec.index.search.modes.search_defaults`; ``whitevec tune`` chooses them); None:
        with a bm25s lexical part, hybrid with the fusion chosen on pseudo-queries cut from the corpus (the
        manifest's ``fusion_choice`` says how: :mod:`whitevec.index.build_fusion`), else dense.

        ``keep_raw_vectors``: keep the encoder's vectors before the transform beside the codes (float32, one file
        per segment; adds keep theirs too), so :meth:`refit` fits on them without encoding again
        (:mod:`whitevec.index.folder.raw_vectors`; faiss backend only).

        ``vectors``: the documents' vectors, made elsewhere (an embedding API's, say): a float32 (n, d) array, a
        row per document in corpus order, or a ``.npy`` / one-tensor ``.safetensors`` file; nothing is encoded
        and every document is kept. With an ``encoder``, they are its vectors (the index is its model's, and
        text queries work); without one, the index records an external encoder (:attr:`is_external`: its
        dimension and ``encoder_name``, no model), searched by ``query_vectors`` and written with ``vectors``.

        Raises:
            BadInputError: empty corpus, duplicate ids, unknown kind/metric/backend/params, or ``out`` is
                something other than an earlier index; documents with no known token under ``"error"``, or no
                document with one; neither ``encoder`` nor ``vectors``, ``encoder_name`` beside an encoder,
                ``vectors`` not one finite row per document (of the encoder's dimension). Nothing is written in
                these cases.
        """
        encoder, given = encoder_for(encoder, vectors, encoder_name)
        target = build_index(
            corpus,
            out,
            vectors=given,
            encoder=encoder,
            transform=transform,
            fit_on=fit_on,
            kind=kind,
            metric=metric,
            backend=backend,
            uri=uri,
            index_params=index_params,
            show_progress=show_progress,
            empty_documents=empty_documents,
            lexical=lexical,
            analyzer=analyzer,
            search=search,
            keep_raw_vectors=keep_raw_vectors,
        )
        return cls.load(target, encoder=encoder)

    @classmethod
    def create(
        cls,
        out: str | os.PathLike[str],
        *,
        dim: int | None = None,
        encoder: EncoderLike | None = None,
        encoder_name: str | None = None,
        transform: str | Transform | None = "none",
        kind: str = "flat",
        metric: str = "cosine",
        backend: str = "faiss",
        index_params: dict[str, Any] | None = None,
        lexical: str | None = None,
        analyzer: str = DEFAULT_ANALYZER,
        search: Mapping[str, str] | None = None,
        keep_raw_vectors: bool = False,
    ) -> Retriever:
        """An empty index at ``out`` (count 0) with these settings (as :meth:`build`'s), grown by writes
        (:meth:`add`); loaded. With ``encoder`` its vectors are that encoder's; else ``dim`` is required and the
        encoder is external (:attr:`is_external`, named ``encoder_name``). Searches answer no hits, with a note,
        until the first write, which builds the index (:mod:`whitevec.index.empty`): a transform that needs data
        (``whitening``, ``whitening-256``) is fitted on that write's vectors, and a first write with fewer rows
        than it needs is refused in one line naming how many. faiss backend only.

        Raises:
            BadInputError: neither ``dim`` nor ``encoder`` (or both), ``encoder_name`` beside an encoder, a bad
                setting (as :meth:`build`), ``out`` something other than an earlier index. Nothing is written.
        """
        if dim is not None and encoder is not None:
            raise BadInputError(
                "give Retriever.create a dim (vectors given by the caller) or an encoder, not both"
            )
        encoder, _ = encoder_for(encoder, None, encoder_name, dim)
        target = create_index(
            out,
            encoder=encoder,
            transform=transform,
            kind=kind,
            metric=metric,
            backend=backend,
            index_params=index_params,
            lexical=lexical,
            analyzer=analyzer,
            search=search,
            keep_raw_vectors=keep_raw_vectors,
        )
        return cls.load(target, encoder=encoder)

    # --- loading ---------------------------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        encoder: EncoderLike | None = None,
        *,
        device: str | None = None,
        cache: bool = True,
        model: str | os.PathLike[str] | None = None,
    ) -> Retriever:
        """Open an index folder; checks the manifest, every file's checksum, and the encoder against it.

        One consistent version is read even while another process rebuilds the index (see
        :mod:`whitevec.index.folder.snapshot`). Without ``encoder``, one is built from the manifest's model,
        pooling, max_length and encoder backend, on ``device``, with the vector cache on or off (``cache``; a
        server should not cache every query). The model is the folder the build recorded, or the alias or hub id it
        was given as, or ``model`` (a folder, alias or hub id: where that model is now); its contents must match
        the checksum the build recorded (:mod:`whitevec.encoders.models.identity`). An ``encoder`` with another
        backend
        (bf16 queries on a float32 index, say) is allowed: same model, nearly the same vectors. An index of
        given vectors (:attr:`is_external`) loads no model; an ``encoder`` of its dimension given to it encodes
        its text queries and writes.

        Raises:
            DataNotFoundError: no index at ``path``.
            CorruptFileError: a file is missing, edited or damaged, or the manifest was edited (named).
            ModelNotFoundError: the recorded model folder is gone and nothing else names the model.
            DimensionMismatchError / BadInputError: ``encoder`` or ``model`` differs from the one the index was
                built with; both are given; ``device`` is not one this machine has.
        """
        if encoder is not None and model is not None:
            raise BadInputError("give Retriever.load an encoder or a model, not both")
        folder = folder_path(Path(path).expanduser())  # "." absolute: it would keep naming a swapped-out version
        device = check_device(device)  # before the index is read: a device this machine lacks, named
        version = current_version(folder, device or "cpu")
        manifest = version.manifest
        owns_encoder = encoder is None
        try:
            if manifest.get("encoder") == EXTERNAL and (encoder is None or model is not None):
                if model is not None:
                    raise BadInputError("this index holds vectors given by the caller; it has no model to name")
                encoder, owns_encoder = ExternalEncoder(int(manifest["encoder_dim"]), manifest["model"]), False
            if encoder is None:
                from whitevec.encoders.loading import load_encoder

                encoder = load_encoder(
                    index_model_folder(manifest, model),  # checked before the model loads
                    manifest["pooling"],
                    max_length=manifest["max_length"],
                    backend=manifest["encoder_backend"],
                    device=device,
                    cache=cache,
                )
            # A given encoder, or a named model (an index older than the checksum is compared by fingerprint).
            if not owns_encoder or model is not None:
                check_encoder(encoder, manifest)
        except BaseException:
            version.store.close()
            version.docs.close()
            raise
        state = None
        store, docs, lexical = version.store, version.docs, version.lexical
        if version.segments is not None:
            state = IndexState(folder, manifest, version.segments, version.deleted)
        if version.segments:  # the encoder analyzer's tokens: the index's model, just checked
            store, docs, lexical = searchable(cast(IndexState, state), encoder)
        return cls(
            folder,
            manifest,
            encoder,
            version.transform,
            store,
            docs,
            owns_encoder=owns_encoder,
            lexical=lexical,
            state=state,
        )

    # --- querying --------------------------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        """Dimension of the stored (transformed) vectors."""
        return int(self.manifest["dim"])

    @property
    def index_bytes(self) -> int:
        """Bytes of the vector store's files in the index folder (0 when the vectors live in Milvus)."""
        files = self.manifest["files"]
        return sum(int(files[name]["bytes"]) for name in stored_files(self.manifest))

    def effective_k(self, k: int) -> int:
        """``k`` clamped to the number of documents (logged); BadInputError when below 1 or not an integer."""
        if isinstance(k, bool) or not isinstance(k, int | np.integer):
            raise BadInputError(f"k must be an integer, got {k!r}")
        if k < 1:
            raise BadInputError(f"k must be at least 1, got {k}")
        if k > self.count:
            n = self.count
            if n:  # an empty index answers no hits, with a note
                logger.warning("k=%d is more than the %d documents in the index; returning %d", k, n, n)
            return self.count
        return int(k)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors as the index stores them: encoded, transformed, L2-normalised for cosine; float32 (n, dim).
        Blank texts are refused as in :meth:`search` (and by HTTP /embed); a text with no token the model knows
        gets a row of zeros (see :meth:`embed_marked`)."""
        return self.embed_marked(texts)[0]

    def embed_marked(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(vectors, known)``: :meth:`embed`'s vectors and a bool per text, False where the text has no token
        the model knows (:func:`whitevec.encoders.protocol.known_token_mask`). Such a text is not encoded: its row
        is
        zeros, never the one direction a transform gives every such text."""
        items = check_texts(texts, "texts")
        # The searches' lock, as a search encodes under it: a write of an index whose lexical part uses the
        # model's tokenizer (the encoder analyzer) holds it while it tokenizes, from another thread.
        with self._lock:
            self._check_open()
            known = known_token_mask(self.encoder, items)
            out = np.zeros((len(items), self.dim), dtype=np.float32)
            if known.any():  # the other rows stay zeros
                out[known] = self._stored_form([text for text, ok in zip(items, known, strict=True) if ok])
        return out, known

    def _stored_form(self, texts: list[str]) -> np.ndarray:
        return stored_form(
            self._transform, self.encoder.encode(texts, show_progress=False), self.manifest["metric"]
        )

    @property
    def transform(self) -> Transform | None:
        """The index's fitted transform (None: none), its class loaded on first use: a search applies a saved
        whitening or centring with numpy alone (:mod:`whitevec.transforms.frozen`), without scikit-learn."""
        if self._loaded_transform is None or self._loaded_transform[0] is not self._transform:
            self._loaded_transform = (self._transform, as_transform(self._transform))
        return self._loaded_transform[1]

    @transform.setter
    def transform(self, value: AppliesVectors | None) -> None:
        self._transform = value  # what searches and writes apply; a version's swap sets it

    def search_plan(
        self, mode: str | None = None, fusion: str | Fusion | None = None, candidates: int | None = None
    ) -> SearchPlan:
        """The search :meth:`search` runs for these arguments (see there); a one-line BadInputError for a bad
        one, or for a lexical or hybrid search when the index has no lexical part."""
        defaults = search_defaults(self.manifest)
        return plan_search(mode, fusion, candidates, defaults=defaults, has_lexical=self.lexical is not None)

    def search(
        self,
        queries: Sequence[str] | None = None,
        k: int = 10,
        *,
        mode: str | None = None,
        fusion: str | Fusion | None = None,
        candidates: int | None = None,
        filter: str | Filter | None = None,
        query_vectors: Any = None,
    ) -> SearchResults:
        """The ``k`` best documents for each query, best first (see the module docstring for ``k``): a list of
        hit lists (see :class:`SearchHit` for what a score means in each mode).

        ``filter``: a metadata filter (:mod:`whitevec.index.filters.language`, e.g. ``'year >= 2000 and lang ==
        "en"'``); the hits are then the ``k`` best of the documents that pass, in every mode. When none passes,
        every query gets no hits and a note saying so.

        ``mode``: ``dense``, ``lexical`` or ``hybrid``; None, the index's own
        (:func:`~whitevec.index.search.fusion. search_defaults`). ``fusion`` (``rrf[:K]``, ``convex[:ALPHA]`` or a
        :class:`~whitevec.index.search.fusion.Fusion`; None, the index's own) and ``candidates`` (each ranker's top
        ``candidates x k`` are fused; None, :data:`~whitevec.index.search.fusion.CANDIDATE_FACTOR`) are for hybrid
        searches, which either asks for when no mode is given.

        A query with no token the model knows (only emoji or characters the vocabulary lacks) is not searched
        densely: in dense mode its hit list is empty, with a ``note`` (see :class:`SearchResults`'s
        ``unknown_queries``); in hybrid mode it gets the lexical ranking alone (noted). A query with no term left
        after analysis (stop words, punctuation): in lexical mode, no hits and a note; in hybrid mode, the dense
        ranking alone (noted).

        ``query_vectors``: the queries as vectors in the encoder's space (before the index's transform, which is
        applied; :attr:`input_dim` columns), a float32 (q, d) array or a ``.npy`` / ``.safetensors`` file: the
        dense ranking uses them instead of encoding ``queries``. A dense search needs only them (given alone,
        with no mode, fusion or candidates, they search densely, whatever the index's own mode); a hybrid one
        also needs ``queries`` (a text per vector, for the lexical part); a lexical one, ``queries`` alone (the
        vectors unused). An index of given vectors (:attr:`is_external`) encodes no text: its dense and hybrid
        searches need ``query_vectors``.

        Raises:
            BadInputError: neither ``queries`` nor ``query_vectors``; ``query_vectors`` not finite rows of
                :attr:`input_dim` numbers, one per query; texts alone in dense or hybrid mode on an index of
                given vectors, vectors alone in lexical or hybrid mode;
                not a list of strings, an empty list, or a blank query (see :func:`check_texts`); an
                unknown mode or fusion, candidates below 1, a fusion with a mode other than hybrid, a lexical or
                hybrid search on an index without a lexical part; a filter with a syntax error, a field no
                document has or a value of a kind the field never holds (one line naming the column).
        """
        if queries is None and mode is None and fusion is None and candidates is None:
            mode = "dense"  # vectors alone: the one ranking they can make
        plan = self.search_plan(mode, fusion, candidates)
        encodes = not isinstance(self.encoder, ExternalEncoder)
        items, given = query_input(queries, query_vectors, plan.mode, self.input_dim, encodes, self._external_note)
        n = len(items) if given is None else given.shape[0]
        # One version throughout: a write from another thread waits, so the filter's rows are the searched ones.
        with self._lock:
            self._check_open()
            k = self.effective_k(k)
            if self.count == 0:  # all deleted, or created empty: a filter's syntax checked, no field
                _ = filter if filter is None or isinstance(filter, Filter) else parse_filter(filter)
                return SearchResults(no_hits("the index holds no documents") for _ in range(n))
            rows = None if filter is None else self.row_filter(filter)
            if rows is not None and rows.passing == 0:
                return SearchResults(no_hits(rows.note(self.count)) for _ in range(n))
            allowed = None if rows is None else rows.mask
            if plan.mode == "lexical":
                return self._search_lexical(items, k, allowed)
            known = np.ones(n, dtype=bool) if given is not None else known_token_mask(self.encoder, items)
            if plan.mode == "hybrid":
                return self._search_hybrid(items, known, k, plan, allowed, given)
            found = iter(self._search(self._query_form(items, known, given), k, allowed) if known.any() else [])
        return SearchResults(next(found) if ok else no_hits(UNKNOWN_QUERY_NOTE) for ok in known)

    def _query_form(self, items: list[str], known: np.ndarray, given: np.ndarray | None) -> np.ndarray:
        """The queries a dense ranker searches, in stored form: the given vectors, else the texts with a known
        token encoded."""
        if given is not None:
            return stored_form(self._transform, given, self.manifest["metric"])
        return self._stored_form([text for text, ok in zip(items, known, strict=True) if ok])

    def row_filter(self, expression: str | Filter) -> RowFilter:
        """A metadata filter parsed, checked against this index's metadata and evaluated over its rows (the
        metadata is read once per loaded version); a one-line BadInputError naming the column of a fault."""
        parsed = expression if isinstance(expression, Filter) else parse_filter(expression)
        with self._lock:
            self._check_open()
            if self._columns is None or self._columns[0] is not self._docs:  # an add reopened the documents
                metadata = self._docs.metadata()  # rows past the store's count, if any, are covered too
                rows = max(self.store.count, max(metadata, default=-1) + 1)
                self._columns = (self._docs, MetadataColumns(metadata, rows))
            return row_filter(parsed, self._columns[1])

    def documents(self, ids: Sequence[str] | None = None, *, filter: str | Filter | None = None) -> list[Document]:
        """The live documents with these ``ids`` (in that order, those the index lacks left out; None: every one,
        in row order) that pass ``filter`` (None: no condition); a one-line BadInputError for a bad filter."""
        with self._lock:
            self._check_open()
            if ids is None:
                rows = np.flatnonzero(self.row_filter(filter).mask) if filter is not None else None
                found = self._docs.get(rows.tolist() if rows is not None else list(self._docs.metadata()))
                return [found[row] for row in sorted(found)]
            held = self._docs.rows_of(list(ids))
            mask = None if filter is None else self.row_filter(filter).mask
            wanted = [held[i] for i in ids if i in held and (mask is None or mask[held[i]])]
            found = self._docs.get(wanted)
            return [found[row] for row in wanted if row in found]

    def _search_lexical(self, items: list[str], k: int, allowed: np.ndarray | None = None) -> SearchResults:
        """The BM25 ranking of each query; no hits and a note for a query with no term left after analysis."""
        lexical = self._lexical()
        with self._lock:
            terms = lexical.has_terms(items)
            rows, scores = _within(lexical.search, allowed)(items, k)
            found = self._docs.get(rows[rows >= 0].tolist())
        return lexical_hits(rows, scores, terms, found)

    def _search_hybrid(
        self,
        items: list[str],
        known: np.ndarray,
        k: int,
        plan: SearchPlan,
        allowed: np.ndarray | None,
        given: np.ndarray | None = None,
    ) -> SearchResults:
        """Each ranker's top ``plan.depth`` candidates fused (:func:`~whitevec.index.search.fusion.fuse`); a query
        one ranker cannot search gets the other's ranking alone, with a note."""
        lexical, depth = self._lexical(), plan.depth(k, self.count)
        dense_rows = np.full((len(items), depth), -1, dtype=np.int64)
        dense_scores = np.full((len(items), depth), -np.inf, dtype=np.float32)
        with self._lock:
            terms = np.asarray(lexical.has_terms(items), dtype=bool)
            lexical_rows, lexical_scores = _within(lexical.search, allowed)(items, depth)
            vectors = self._query_form(items, known, given)
            if known.any():
                dense_scores[known], dense_rows[known] = _within(self.store.search, allowed)(vectors, depth)
            lists = (dense_rows, dense_scores, lexical_rows, lexical_scores)
            fused = None
            # A ranker that fuses itself (Milvus's hybrid_search) does where both rankers can search every query
            # (unfiltered: both rankings here are already the passing rows').
            if isinstance(lexical, FusesItself) and known.all() and terms.all() and allowed is None:
                fused = lexical.fused(vectors, items, lists, plan.fusion, k)
            if fused is None:
                fused = fuse(*lists, plan.fusion, k, metric=self.manifest["metric"])
            found = self._docs.get(sorted({hit.row for query in fused for hit in query}))
        return fused_hits(fused, known, terms, found)

    def _lexical(self) -> LexicalRanker:
        if self.lexical is None:  # search_plan refuses these modes first; kept for a caller that skipped it
            raise BadInputError(f"this index has no lexical part; {ADD_LEXICAL}")
        return self.lexical

    def search_vectors(self, vectors: np.ndarray, k: int = 10) -> list[QueryHits]:
        """Search with vectors already made by :meth:`embed`."""
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise DimensionMismatchError(
                f"query vectors have shape {x.shape}; this index holds {self.dim}-d vectors"
            )
        return self._search(x, self.effective_k(k))

    def _search(self, x: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[QueryHits]:
        with self._lock:
            self._check_open()
            scores, rows = _within(self.store.search, allowed)(x, k)
            found = self._docs.get(rows.ravel().tolist())
        results = []
        for score_row, id_row in zip(scores, rows, strict=True):
            hits = QueryHits()
            for score, row in zip(score_row, id_row, strict=True):
                doc = found.get(int(row))
                if doc is not None:
                    hits.append(SearchHit(doc.id, float(score), doc.text, doc.metadata))
            results.append(hits)
        return results

    def close(self) -> None:
        """Release the document store, the vector store's connections, and the encoder if load() made it; every
        later search or write is refused in one line (closing again does nothing). A write in progress ends
        first."""
        with self._write_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            self._docs.close()
            self.store.close()
            close_encoder = getattr(self.encoder, "close", None)
            if self._owns_encoder and callable(close_encoder):
                close_encoder()

    def __enter__(self) -> Retriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        m = self.manifest
        spec = (m.get("transform") or {}).get("spec", "none")
        lexical = "" if self.lexical is None else f", lexical=bm25/{m['lexical']['analyzer']['name']}"
        return (
            f"Retriever({str(self.path)!r}, model={m['model']!r}, pooling={m['pooling']!r}, transform={spec!r}, "
            f"{m['index_kind']}/{m['metric']}/{m['backend']}, count={self.count}, dim={self.dim}"
            f"{lexical})"
        )


def _within(search: Callable[..., _Ranking], allowed: np.ndarray | None) -> Callable[..., _Ranking]:
    """A ranker's ``search`` held to the rows ``allowed`` passes; unfiltered, called as before filters (a
    ranker that predates them takes no ``allowed``)."""
    return search if allowed is None else functools.partial(search, allowed=allowed)


_Ranking = tuple[np.ndarray, np.ndarray]
