"""BM25 over several segments with the statistics of all their live documents, as one build of them scores.

A segment's score matrix (:class:`~whitevec.index.lexical.bm25.LexicalIndex`) holds BM25 weights computed with its
own documents' statistics: how many documents hold a term, how many documents there are, their mean length. Once an
index has several segments, or deleted rows, those differ from the index's. So each segment also keeps its
documents' term counts and lengths (:class:`TermCounts`, ``lexical_counts.safetensors``), and a search computes
the weights of the query's terms from the live documents of every segment (:func:`search_segments`), with
bm25s's own formulas in the order bm25s evaluates them: the scores are those of one bm25s index built over the
live documents, to the bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from whitevec.errors import CorruptFileError
from whitevec.index.folder.layout import LEXICAL_COUNTS
from whitevec.index.lexical.bm25 import (
    NONOCCURRENCE_METHODS,
    LexicalIndex,
    best_first,
    posting_counts,
    rows_marked,
)
from whitevec.utils.io import writing_to

# Format 2 keeps each array in the narrowest unsigned integer that holds it (term counts are mostly 1 or 2: a
# byte each, where format 1 spent a float32); format 1 files (float32 counts, int64 lengths) still read.
_FORMAT = "whitevec-lexical-counts-2"
_FORMATS = ("whitevec-lexical-counts-1", _FORMAT)


@dataclass(frozen=True)
class TermCounts:
    """How often each document holds each of its terms, one float32 per posting of a segment's score matrix (the
    same order), and each document's length in terms."""

    tf: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, index: LexicalIndex, texts: Sequence[str]) -> TermCounts:
        """The counts of ``texts`` (row i is ``texts[i]``), the texts ``index`` was built over, analysed again:
        for a segment written before builds kept their counts (a new index has :meth:`of_build`)."""
        column = {term: i for i, term in enumerate(index.terms)}
        ids = [[column[term] for term in doc] for doc in index.analyzer.analyze(texts)]
        return cls._checked(index, *posting_counts(ids))

    @classmethod
    def of_build(cls, index: LexicalIndex) -> TermCounts:
        """The counts :meth:`LexicalIndex.build` took while it analysed the texts (nothing analysed again)."""
        if index.built_counts is None:
            raise ValueError("this lexical index was read from disk, not built: it holds no counts of its own")
        return cls._checked(index, *index.built_counts)

    @classmethod
    def _checked(cls, index: LexicalIndex, tf: np.ndarray, lengths: np.ndarray, rows: np.ndarray) -> TermCounts:
        counts = cls(tf, lengths)
        counts.check(index, Path("(new)"), rows)
        return counts

    def save(self, folder: Path, prefix: str = "") -> str:
        """Write ``PREFIX`` + ``lexical_counts.safetensors`` into ``folder`` (a new version's temporary folder,
        made whole by its manifest); its name."""
        name = prefix + LEXICAL_COUNTS
        with writing_to(folder / name), open(folder / name, "wb") as out:
            out.write(self.to_bytes())
        return name

    def check(self, index: LexicalIndex, where: Path, rows: np.ndarray | None = None) -> None:
        """CorruptFileError unless these counts fit ``index``: a count per posting, a length per document (and,
        given, the postings' rows are the matrix's)."""
        matrix = index.matrix
        fine = (
            self.tf.dtype == np.float32
            and self.tf.shape == matrix["data"].shape
            and self.lengths.dtype == np.int64
            and self.lengths.shape == (index.count,)
            and (rows is None or np.array_equal(rows, matrix["indices"]))
        )
        if not fine:
            raise CorruptFileError(f"{where} does not fit its segment's lexical index; rebuild the index")

    def to_bytes(self) -> bytes:
        from safetensors.numpy import save

        arrays = {"tf": _narrowest(self.tf), "lengths": _narrowest(self.lengths)}
        return save(arrays, metadata={"format": _FORMAT})

    @classmethod
    def from_bytes(cls, data: bytes, where: Path, index: LexicalIndex) -> TermCounts:
        from safetensors import SafetensorError
        from safetensors.numpy import load

        from whitevec.transforms.saved import safetensors_metadata

        try:
            tensors = load(data)
            found = safetensors_metadata(data).get("format")
        except (SafetensorError, ValueError) as exc:
            raise CorruptFileError(f"{where} is not readable term counts ({exc}); rebuild the index") from None
        if set(tensors) != {"tf", "lengths"} or found not in _FORMATS:
            raise CorruptFileError(f"{where} is not a file of term counts; rebuild the index")
        if found == _FORMAT and not all(t.dtype.kind == "u" for t in tensors.values()):
            raise CorruptFileError(f"{where} does not fit its segment's lexical index; rebuild the index")
        tf, lengths = tensors["tf"], tensors["lengths"]
        counts = cls(*((tf.astype(np.float32), lengths.astype(np.int64)) if found == _FORMAT else (tf, lengths)))
        counts.check(index, where)
        return counts


def _narrowest(values: np.ndarray) -> np.ndarray:
    """Whole numbers >= 0 in the narrowest of uint8, uint16, uint32 and uint64 that holds them all."""
    top = int(values.max()) if values.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values.astype(np.uint64)


@dataclass(frozen=True)
class CountedSegment:
    """A segment's lexical index and term counts, its rows from ``base``."""

    base: int
    index: LexicalIndex
    counts: TermCounts


def search_segments(
    parts: list[CountedSegment], live: np.ndarray, queries: Sequence[str], depth: int, allowed: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, scores)`` as :meth:`LexicalIndex.search` answers, over every part's rows (``live``: a bool per row
    of all parts; ``allowed``, a filter's rows), weighted by the live documents' statistics."""
    first = parts[0].index
    analyzed = first.analyzer.analyze(queries)
    rows = np.full((len(analyzed), depth), -1, dtype=np.int64)
    scores = np.full((len(analyzed), depth), -np.inf, dtype=np.float32)
    lengths = np.concatenate([part.counts.lengths for part in parts])
    stats = (int(np.count_nonzero(live)), lengths[live].mean() if live.any() else 0.0)
    candidates = live if allowed is None else live & np.asarray(allowed, dtype=bool)[: live.size]
    for i, terms in enumerate(analyzed):
        found = _query_scores(parts, live, lengths, stats, terms)
        if found is None:
            continue
        matched, total = found
        matched = matched[candidates[matched]]
        got = total[matched]
        best = best_first(matched, got, depth)
        rows[i, : best.size] = matched[best]
        scores[i, : best.size] = got[best]
    return rows, scores


def _query_scores(
    parts: list[CountedSegment],
    live: np.ndarray,
    lengths: np.ndarray,
    stats: tuple[int, float],
    terms: list[str],
) -> tuple[np.ndarray, np.ndarray] | None:
    """The live rows holding a query term, and every row's score (float32, as bm25s sums it: term by term in the
    query's order, repeats counted); None when no live document holds a term of the query."""
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

    params = parts[0].index.params
    idf_of, tfc_of = _select_idf_scorer(params.method), _select_tfc_scorer(params.method)
    n_docs, mean_length = stats
    postings = {term: _live_postings(parts, live, term) for term in set(terms)}
    held = [term for term in terms if postings[term][0].size]  # in the query's order, as bm25s's token ids
    if not held:
        return None
    total = np.zeros(live.size, dtype=np.float32)
    nonoccurrence = np.zeros(len(held), dtype=np.float32)
    adds_rows, adds = [], []
    for position, term in enumerate(held):
        term_rows, tf = postings[term]
        df = int(term_rows.size)
        idf = idf_of(df, N=n_docs)
        tfc = tfc_of(
            tf_array=tf, l_d=lengths[term_rows], l_avg=mean_length, k1=params.k1, b=params.b, delta=params.delta
        )
        contribution = np.float32(idf) * tfc
        if params.method in NONOCCURRENCE_METHODS:
            zero = tfc_of(
                tf_array=0, l_d=mean_length, l_avg=mean_length, k1=params.k1, b=params.b, delta=params.delta
            )
            nonoccurrence[position] = idf * zero
            contribution = contribution - nonoccurrence[position]
        adds_rows.append(term_rows)
        adds.append(contribution.astype(np.float32))
    np.add.at(total, np.concatenate(adds_rows), np.concatenate(adds))
    if params.method in NONOCCURRENCE_METHODS:
        total += nonoccurrence.sum()
    return rows_marked(live.size, adds_rows), total


def _live_postings(parts: list[CountedSegment], live: np.ndarray, term: str) -> tuple[np.ndarray, np.ndarray]:
    """The index rows of the live documents holding ``term`` (ascending) and their counts of it."""
    found_rows, found_tf = [], []
    for part in parts:
        column = part.index.column_of(term)
        if column is None:
            continue
        indptr, indices = part.index.matrix["indptr"], part.index.matrix["indices"]
        start, stop = int(indptr[column]), int(indptr[column + 1])
        term_rows = indices[start:stop].astype(np.int64) + part.base
        keep = live[term_rows]
        found_rows.append(term_rows[keep])
        found_tf.append(part.counts.tf[start:stop][keep])
    if not found_rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    return np.concatenate(found_rows), np.concatenate(found_tf)
