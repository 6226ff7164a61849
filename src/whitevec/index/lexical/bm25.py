"""The lexical index beside the vectors: BM25 over the documents' text, scored by bm25s, one :class:`Analyzer`
for documents and queries alike.

Its rows are the vector store's rows 0..n-1, so the two rankings name the same documents. A document with no
term left after analysis (empty, only stop words, only punctuation) keeps its row, as it does for the vectors,
and is counted (``documents_without_terms``): the lexical ranker never finds it.

In the index folder (:mod:`whitevec.index.folder.layout`) it is two files of the same version as the vectors:
``lexical.safetensors``, bm25s's score matrix in compressed sparse columns (``data``, ``indices``, ``indptr``;
one column per term, every BM25 weight computed at build) and, for ``bm25l`` and ``bm25+``, the score a
document gets for a query term it lacks (``nonoccurrence``); ``lexical_terms.json``, the terms in column order.
The manifest's ``lexical`` record (:meth:`LexicalIndex.record`) holds the ranker's parameters, the analyzer and
the counts.

Queries are analysed here and looked up in the index's own vocabulary, never numbered by ``bm25s.tokenize``:
that numbers tokens in a vocabulary of its own per call, so a query's ids would name other terms than the
corpus's. A query term the corpus never had matches nothing.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError, WhitevecWarning
from whitevec.index.folder.layout import LEXICAL_COUNTS, LEXICAL_FILES, LEXICAL_MATRIX, LEXICAL_TERMS
from whitevec.index.folder.manifest import LEXICAL_RECORD, is_lexical_record
from whitevec.index.lexical.analyzers import (
    ANALYZERS,
    DEFAULT_ANALYZER,
    Analyzer,
    check_analyzer_name,
    make_analyzer,
)
from whitevec.index.stores.vector import KeepsLexical, keeps_lexical, store_class
from whitevec.utils.io import atomic_path, writing_to

if TYPE_CHECKING:
    from whitevec.index.folder.snapshot import IndexSnapshot

__all__ = [
    "ANALYZERS",
    "DEFAULT_ANALYZER",
    "DEFAULT_LEXICAL",
    "Analyzer",
    "BM25Params",
    "LexicalIndex",
    "check_lexical",
    "lexical_size",
    "make_analyzer",
]

# What a build writes beside the vectors when not told (``--lexical``, ``build_index(lexical=None)``). "none":
# the lead decides from the measured cost (docs/how-to/index-and-compress.md, "A lexical index beside the
# vectors").
DEFAULT_LEXICAL = "none"
LEXICAL_CHOICES = ("none", "bm25")
# bm25s's variants (delta only for bm25l and bm25+). k1 1.2 and b 0.75: Lucene's, tantivy's, LanceDB's and
# Milvus's defaults (bm25s's k1 is 1.5; whitevec's was until 2026-12-07, docs/notes/lexical-analyzer.md). An
# index records its own k1 and b.
METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
NONOCCURRENCE_METHODS = ("bm25l", "bm25+")
DEFAULT_K1 = 1.2
DEFAULT_B = 0.75
DEFAULT_METHOD = "lucene"
DELTA = 0.5
_FORMAT = "whitevec-lexical-1"


def check_lexical(lexical: str | None, analyzer: str, backend: str = "faiss") -> str | None:
    """The lexical ranker a build writes (``"bm25"``) or None, checked before any model loads: ``lexical`` one of
    :data:`LEXICAL_CHOICES` (None: :data:`DEFAULT_LEXICAL`), ``analyzer`` one of :data:`ANALYZERS` and, on a
    backend that keeps the lexical part itself (:class:`~whitevec.index.stores.vector.KeepsLexical`: Milvus), one
    it can reproduce.

    Raises:
        BadInputError: an unknown choice, or an analyzer Milvus cannot reproduce on the Milvus backend.
    """
    chosen = DEFAULT_LEXICAL if lexical is None else str(lexical).strip().lower()
    if chosen not in LEXICAL_CHOICES:
        raise BadInputError(f"unknown --lexical {lexical!r}; valid: {', '.join(LEXICAL_CHOICES)}")
    check_analyzer_name(analyzer)
    if chosen == "none":
        return None
    store = store_class(backend)
    if keeps_lexical(store):  # the store's own BM25 (Milvus's, on the collection's text field)
        cast(KeepsLexical, store).check_analyzer(analyzer)
    return chosen


@dataclass(frozen=True)
class BM25Params:
    """bm25s's ranker: ``method`` (:data:`METHODS`), ``k1`` (term-frequency saturation), ``b`` (length
    normalisation); ``delta`` is bm25s's default, used by bm25l and bm25+ only."""

    k1: float = DEFAULT_K1
    b: float = DEFAULT_B
    method: str = DEFAULT_METHOD
    delta: float = DELTA

    def checked(self) -> BM25Params:
        """These parameters, or a one-line BadInputError naming the bad one."""
        method = str(self.method).strip().lower()
        if method not in METHODS:
            raise BadInputError(f"unknown BM25 method {self.method!r}; valid: {', '.join(METHODS)}")
        for name, value, low, high in (("k1", self.k1, 0.0, math.inf), ("b", self.b, 0.0, 1.0)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise BadInputError(f"BM25 {name} must be a finite number, got {value!r}")
            if not low <= value <= high:
                raise BadInputError(f"BM25 {name} must be within [{low}, {high}], got {value}")
        return BM25Params(float(self.k1), float(self.b), method, float(self.delta))

    def ranker(self) -> Any:
        """An empty bm25s ranker with these parameters (numpy backend: no compilation, same scores)."""
        import bm25s

        return bm25s.BM25(
            k1=self.k1, b=self.b, delta=self.delta, method=self.method, backend="numpy", csc_backend="numpy"
        )


class LexicalIndex:
    """BM25 over ``count`` documents (rows 0..count-1, the vector store's rows), scored by bm25s.

    Make one with :meth:`build`, keep it with :meth:`save`, open it again with :meth:`open` (or, checksums
    checked, :meth:`from_snapshot`). bm25s has no incremental add: an add rebuilds the whole index
    (:meth:`whitevec.index.Retriever.add`).
    """

    def __init__(
        self,
        analyzer: Analyzer,
        params: BM25Params,
        terms: list[str],
        matrix: dict[str, np.ndarray],
        *,
        count: int,
        documents_without_terms: int,
        library: str,
        build_seconds: float,
        built_counts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.analyzer = analyzer
        self.params = params
        self.terms = terms
        self.count = count
        self.documents_without_terms = documents_without_terms
        self.library = library
        self.build_seconds = build_seconds
        # What :meth:`build` counted while it analysed the texts (:func:`posting_counts`): the segment's term
        # counts without analysing them again. None for an index read from disk.
        self.built_counts = built_counts
        self._matrix = matrix
        self._ranker = self._make_ranker()

    def _make_ranker(self) -> Any:
        # The attributes bm25s's own BM25.load sets, from arrays read here (nothing of bm25s's files or pickle).
        ranker = self.params.ranker()
        ranker.scores = {**{k: self._matrix[k] for k in ("data", "indices", "indptr")}, "num_docs": self.count}
        ranker.vocab_dict = {term: column for column, term in enumerate(self.terms)}
        ranker.unique_token_ids_set = set(range(len(self.terms)))
        ranker.nonoccurrence_array = self._matrix.get("nonoccurrence")
        return ranker

    # --- building -------------------------------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        texts: Sequence[str],
        analyzer: Analyzer,
        *,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        method: str = DEFAULT_METHOD,
        keep_counts: bool = False,
    ) -> LexicalIndex:
        """BM25 over ``texts`` (row i is ``texts[i]``), analysed by ``analyzer``; ``keep_counts``: also count
        each document's terms (``built_counts``), for an index's segment (its ``lexical_counts`` file).

        Raises:
            BadInputError: no texts, or an unknown ``method`` or ``k1`` / ``b`` out of range (named).
        """
        params = BM25Params(k1, b, method).checked()
        if isinstance(texts, str) or not len(texts):
            raise BadInputError("a lexical index needs a list of at least one text")
        started = time.perf_counter()
        analyzed = analyzer.analyze(texts)
        # Columns numbered by sorted term: the same texts give the same files (bm25s numbers a set's order).
        terms = sorted({term for doc in analyzed for term in doc})
        column = {term: i for i, term in enumerate(terms)}
        ids = [[column[term] for term in doc] for doc in analyzed]
        matrix, library = _score_matrix(params, ids, column)
        return cls(
            analyzer,
            params,
            terms,
            matrix,
            count=len(analyzed),
            documents_without_terms=sum(1 for doc in analyzed if not doc),
            library=library,
            build_seconds=time.perf_counter() - started,
            built_counts=posting_counts(ids) if keep_counts else None,
        )

    # --- searching ------------------------------------------------------------------------------------------
    @property
    def matrix(self) -> dict[str, np.ndarray]:
        """The score matrix's arrays (read-only use: :mod:`whitevec.index.lexical.counts`)."""
        return self._matrix

    def column_of(self, term: str) -> int | None:
        """The matrix column of ``term``; None for a term no document here holds."""
        column = self._ranker.vocab_dict.get(term)
        return None if column is None else int(column)

    def has_terms(self, queries: Sequence[str]) -> np.ndarray:
        """A bool per query: True where a term is left after analysis (False for stop words only, punctuation,
        emoji). A query with terms the corpus never had has terms and matches nothing."""
        return np.fromiter((bool(terms) for terms in self.analyzer.analyze(queries)), dtype=bool)

    def search(
        self, queries: Sequence[str], depth: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, scores)``, int64 and float32 of shape (len(queries), depth): each query's ``depth`` best
        documents by BM25, best first (equal scores by row). Only documents that share a term with the query
        (and, given ``allowed``, a bool per row, that it lets through) are ranked; the places left are row -1,
        score -inf (all of them for a query without a term).

        Raises:
            BadInputError: ``depth`` below 1 or not an integer, or ``queries`` one string.
        """
        if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 1:
            raise BadInputError(f"depth must be an integer of at least 1, got {depth!r}")
        analyzed = self.analyzer.analyze(queries)
        rows = np.full((len(analyzed), int(depth)), -1, dtype=np.int64)
        scores = np.full((len(analyzed), int(depth)), -np.inf, dtype=np.float32)
        for i, terms in enumerate(analyzed):
            columns = self._ranker.get_tokens_ids(terms)  # terms the corpus never had are dropped here
            if not columns:
                continue
            matched = self._matching_rows(columns)
            if allowed is not None:  # a metadata filter's rows: the BM25 candidates restricted before ranking
                matched = matched[allowed[matched]]
            found = np.asarray(self._ranker.get_scores_from_ids(columns), dtype=np.float32)[matched]
            best = best_first(matched, found, int(depth))
            rows[i, : best.size] = matched[best]
            scores[i, : best.size] = found[best]
        return rows, scores

    def _matching_rows(self, columns: list[int]) -> np.ndarray:
        """The rows holding one of ``columns``' terms, ascending (a score of 0 still counts: robertson's idf
        is 0 for a term in half the documents or more)."""
        indptr, indices = self._matrix["indptr"], self._matrix["indices"]
        return rows_marked(self.count, [indices[indptr[c] : indptr[c + 1]] for c in set(columns)])

    # --- keeping --------------------------------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        """What the manifest keeps under ``lexical``: the ranker, its parameters, the analyzer, the counts."""
        return {
            "ranker": "bm25",
            "library": self.library,
            "method": self.params.method,
            "k1": self.params.k1,
            "b": self.params.b,
            "delta": self.params.delta,
            "analyzer": self.analyzer.record(),
            "documents": self.count,
            "documents_without_terms": self.documents_without_terms,
            "terms": len(self.terms),
            "postings": int(self._matrix["data"].size),
            "build_seconds": round(self.build_seconds, 3),
        }

    def save(self, folder: Path) -> list[str]:
        """Write the two files into ``folder`` (each through a temporary name); their names, for the manifest."""
        from safetensors.numpy import save

        matrix = save(dict(self._matrix), metadata={"format": _FORMAT})
        terms = json.dumps(self.terms, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        for name, data in ((LEXICAL_MATRIX, matrix), (LEXICAL_TERMS, terms)):
            with writing_to(folder / name), atomic_path(folder / name) as tmp:
                tmp.write_bytes(data)
        return list(LEXICAL_FILES)

    @classmethod
    def open(cls, folder: Path, record: dict[str, Any]) -> LexicalIndex:
        """The lexical index saved in ``folder`` as ``record`` (the manifest's ``lexical``) describes it. Reads
        by path, checksums unchecked: :meth:`from_snapshot` is the checked read of an index version.

        Raises:
            CorruptFileError: a file missing or unreadable, or not what ``record`` says.
        """

        def read(name: str) -> bytes:
            try:
                return (Path(folder) / name).read_bytes()
            except FileNotFoundError:
                raise CorruptFileError(f"{Path(folder) / name} is missing; rebuild the index") from None

        return cls._read(read, record, Path(folder))

    @classmethod
    def from_snapshot(cls, snapshot: IndexSnapshot) -> LexicalIndex:
        """The lexical index of a pinned index version (:mod:`whitevec.index.folder.snapshot`), every byte checked
        against the manifest's sha256."""
        return cls._read(snapshot.read_bytes, snapshot.manifest["lexical"], snapshot.folder)

    @classmethod
    def _read(cls, read: Callable[[str], bytes], record: dict[str, Any], folder: Path) -> LexicalIndex:
        check_record(record, folder)
        analyzer = Analyzer.from_record(record["analyzer"])
        try:
            params = BM25Params(record["k1"], record["b"], record["method"], record["delta"]).checked()
        except BadInputError as exc:
            raise CorruptFileError(f"{folder}: the lexical index's {exc}; rebuild the index") from None
        matrix = _read_matrix(read(LEXICAL_MATRIX), folder / LEXICAL_MATRIX)
        terms = _read_terms(read(LEXICAL_TERMS), folder / LEXICAL_TERMS)
        _check_matrix(matrix, len(terms), record, folder)
        return cls(
            analyzer,
            params,
            terms,
            matrix,
            count=int(record["documents"]),
            documents_without_terms=int(record["documents_without_terms"]),
            library=str(record["library"]),
            build_seconds=float(record["build_seconds"]),
        )

    def with_encoder(self, encoder: object) -> LexicalIndex:
        """This index with the ``encoder`` analyzer bound to ``encoder``'s tokenizer (the same index for the
        other analyzers); the arrays are shared."""
        if not self.analyzer.needs_encoder:
            return self
        bound = LexicalIndex.__new__(LexicalIndex)
        bound.__dict__.update(self.__dict__)
        bound.analyzer = self.analyzer.with_encoder(encoder)
        return bound

    def __repr__(self) -> str:
        return (
            f"LexicalIndex(bm25 {self.params.method}, k1={self.params.k1}, b={self.params.b}, "
            f"analyzer={self.analyzer.name!r}, count={self.count}, terms={len(self.terms)})"
        )


def _score_matrix(params: BM25Params, ids: list[list[int]], column: dict[str, int]) -> tuple[dict[str, Any], str]:
    """bm25s's score matrix over documents given as column ids, and bm25s's name and version."""
    import bm25s

    library = f"bm25s {bm25s.__version__}"
    if not column:  # no document has a term: nothing to score (bm25s would divide by a mean length of 0)
        matrix = {
            "data": np.zeros(0, np.float32),
            "indices": np.zeros(0, np.int32),
            "indptr": np.zeros(1, np.int64),
        }
        if params.method in NONOCCURRENCE_METHODS:
            matrix["nonoccurrence"] = np.zeros(0, np.float32)
        return matrix, library
    ranker = params.ranker()
    # No empty token: bm25s would add it to the vocabulary but not to the matrix; a query without a term is
    # answered before bm25s is asked.
    ranker.index((ids, column), create_empty_token=False, show_progress=False)
    matrix = {name: np.ascontiguousarray(ranker.scores[name]) for name in ("data", "indices", "indptr")}
    if ranker.nonoccurrence_array is not None:
        matrix["nonoccurrence"] = np.ascontiguousarray(ranker.nonoccurrence_array, dtype=np.float32)
    return matrix, library


def posting_counts(ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From documents given as column ids: how often each document holds each of its terms (a float32 per
    posting, in the score matrix's order: by column, then row), each document's length in terms, and each
    posting's row (which must be the matrix's)."""
    n = max(1, len(ids))
    lengths = np.fromiter((len(doc) for doc in ids), dtype=np.int64, count=len(ids))
    rows = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
    cols = np.fromiter((c for doc in ids for c in doc), dtype=np.int64, count=rows.size)
    keys, tf = np.unique(cols * n + rows, return_counts=True)
    return tf.astype(np.float32), lengths, keys % n


def rows_marked(count: int, parts: Sequence[np.ndarray]) -> np.ndarray:
    """The rows (of ``count``) that any of ``parts`` holds, ascending, int64: marked in a bool per row, which
    costs a pass over ``count`` bytes where ``np.unique`` hashed every posting (0.65 of a 1.1 ms query on 10,000
    documents)."""
    marked = np.zeros(count, dtype=bool)
    for part in parts:
        marked[part] = True
    return np.flatnonzero(marked).astype(np.int64, copy=False)


def best_first(rows: np.ndarray, scores: np.ndarray, depth: int) -> np.ndarray:
    """Positions of the ``depth`` best of ``scores``, best first, equal scores by ascending row; only the
    candidates at or above the depth-th score are sorted."""
    if scores.size > depth:
        threshold = np.partition(scores, scores.size - depth)[scores.size - depth]
        keep = np.flatnonzero(scores >= threshold)
    else:
        keep = np.arange(scores.size)
    return keep[np.lexsort((rows[keep], -scores[keep]))][:depth]


def check_record(record: Any, folder: Path) -> None:
    if not is_lexical_record(record):
        raise CorruptFileError(
            f"{folder}: the lexical record must hold {', '.join(LEXICAL_RECORD)} (of their types); rebuild "
            "the index"
        )


def _read_matrix(data: bytes, path: Path) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load

    from whitevec.transforms.saved import safetensors_metadata as _safetensors_metadata

    try:
        tensors = load(data)
        meta = _safetensors_metadata(data)
    except (SafetensorError, ValueError) as exc:
        raise CorruptFileError(f"{path} is not a readable lexical index ({exc}); rebuild the index") from None
    if meta.get("format") != _FORMAT:
        raise CorruptFileError(f"{path} is not a lexical index of this whitevec ({meta.get('format')!r})")
    return tensors


def _read_terms(data: bytes, path: Path) -> list[str]:
    try:
        terms = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        terms = None
    if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms) or len(set(terms)) != len(terms):
        raise CorruptFileError(f"{path} is not a list of distinct terms; rebuild the index")
    return terms


def _check_matrix(matrix: dict[str, np.ndarray], n_terms: int, record: dict[str, Any], folder: Path) -> None:
    """The arrays agree with each other and with the record: a column per term, rows within the documents,
    the non-occurrence scores exactly for bm25l and bm25+ (what bm25s would otherwise index out of range)."""
    data, indices, indptr = (matrix.get(name) for name in ("data", "indices", "indptr"))
    wanted = {"data", "indices", "indptr"} | (
        {"nonoccurrence"} if record["method"] in NONOCCURRENCE_METHODS else set()
    )
    nonoccurrence = matrix.get("nonoccurrence")
    fine = (
        set(matrix) == wanted
        and data is not None
        and indices is not None
        and indptr is not None
        and data.dtype == np.float32
        and indices.dtype == np.int32
        and indptr.dtype == np.int64
        and data.ndim == indices.ndim == indptr.ndim == 1
        and data.size == indices.size == record["postings"]
        and n_terms == record["terms"]
        and indptr.size == n_terms + 1
        and indptr[0] == 0
        and indptr[-1] == data.size
        and bool(np.all(np.diff(indptr) >= 0))
        and (indices.size == 0 or (int(indices.min()) >= 0 and int(indices.max()) < record["documents"]))
        and (nonoccurrence is None or nonoccurrence.shape == (n_terms,))
    )
    if not fine:
        raise CorruptFileError(f"the lexical index in {folder} does not agree with its record; rebuild the index")


def lexical_size(manifest: dict[str, Any]) -> dict[str, Any]:
    """What ``index info`` shows of the lexical part: its bytes (and per document), or how to add one."""
    if "lexical" not in manifest:
        return {
            "lexical": "none: this index has no lexical part; rebuild it with `whitevec index build --lexical "
            "bm25` to add one"
        }
    if manifest["lexical"].get("library") == "milvus":
        return {
            "lexical": "in the Milvus collection (Milvus's BM25 on the documents' text); its bytes are Milvus's"
        }
    files = manifest["files"]
    prefixes = [entry["prefix"] for entry in manifest.get("segments") or [{"prefix": ""}]]  # every segment's
    names = (*LEXICAL_FILES, LEXICAL_COUNTS)  # the term counts of a written index's segments too
    total = sum(int(files[p + name]["bytes"]) for p in prefixes for name in names if p + name in files)
    count = int(manifest["lexical"]["documents"])
    return {"lexical_bytes": total, "lexical_bytes_per_document": round(total / count, 2) if count else None}


def warn_documents_without_terms(without: int, of: int, analyzer: str) -> None:
    """One WhitevecWarning counting the ``without`` of ``of`` documents the lexical index cannot find (kept for
    the vectors); nothing when there are none."""
    if without > 0:
        warnings.warn(
            f"{without} of {of} documents have no term for the lexical index (analyzer {analyzer}); the vectors "
            "still find them, BM25 never does",
            WhitevecWarning,
            stacklevel=3,
        )
