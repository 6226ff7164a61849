"""The lexical and hybrid candidates of a retrieval run: each query's ranking as an index built with
``--lexical bm25`` and searched in that mode would give it, scored per query like the dense candidates.

The BM25 index (:class:`whitevec.index.lexical.bm25.LexicalIndex`, with the run's analyzer) is built once over the
documents an index would keep (those with a token the model knows; in practice every one) and each query set
is searched once. A hybrid candidate's dense ranking is a flat store's own search with its encoding
(:func:`whitevec.index.faiss.encoded.coded_store`: the scores a search fuses), computed once per transform and
encoding and reused by every fusion; the two are fused by :func:`whitevec.index.search.fusion.fuse`, each ranker's
top ``CANDIDATE_FACTOR x k`` documents, as :meth:`whitevec.index.Retriever.search` fuses them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from whitevec.errors import BadInputError
from whitevec.evaluation.retrieval import query_metric, query_scores
from whitevec.index.faiss.encoded import TRAIN_SAMPLE, coded_store
from whitevec.index.lexical.bm25 import DEFAULT_ANALYZER, LexicalIndex, make_analyzer
from whitevec.index.search.fusion import CANDIDATE_FACTOR, fuse, parse_fusion
from whitevec.index.search.modes import MODES, parse_mode
from whitevec.tuning.items import Items, Rows
from whitevec.tuning.space import Candidate
from whitevec.utils.linalg import unit_rows

# The fusions each hybrid candidate is scored with: RRF with the stores' constant, and convex over a grid of
# dense weights (issue 39: the best weight ranged from 0.5 to 0.7 across Cranfield, MED and CACM).
TUNE_FUSIONS = ("rrf:60", *(f"convex:{alpha / 10:g}" for alpha in range(3, 9)))
# The analyzers tune can build: `encoder` needs a model's tokenizer, and a run may tune several models.
TUNE_ANALYZERS = ("english", "plain", "cjk-bigram")

Ranking = tuple[np.ndarray, np.ndarray]  # (rows, scores), (n_queries, depth), best first, -1 where fewer


def check_modes(modes: Sequence[str] | None, kind: str) -> tuple[str, ...]:
    """The search modes to tune (None: all of :data:`MODES` for retrieval data, ``dense`` for pairs), checked
    before any model loads; pairs refuse a mode other than dense in one line."""
    if modes is None:
        return MODES if kind == "retrieval" else ("dense",)
    if isinstance(modes, str) or not modes:
        raise BadInputError(f"give the modes to tune as a list of {', '.join(MODES)}")
    chosen = tuple(dict.fromkeys(parse_mode(mode) for mode in modes))
    if kind != "retrieval" and chosen != ("dense",):
        other = next(mode for mode in chosen if mode != "dense")
        raise BadInputError(
            f"mode {other!r} ranks documents for queries; scored pairs tune dense only (give retrieval data, "
            "--dataset, to tune lexical or hybrid search)"
        )
    return chosen


def check_tune_analyzer(name: str) -> str:
    """The analyzer the lexical candidates build with, one of :data:`TUNE_ANALYZERS`; a one-line BadInputError."""
    key = str(name).strip().lower()
    if key not in TUNE_ANALYZERS:
        raise BadInputError(
            f"tune's --analyzer must be one of {', '.join(TUNE_ANALYZERS)}, got {name!r} (encoder analyzes with a "
            "model's tokenizer: build the index with it)"
        )
    return key


@dataclass
class Searches:
    """What the lexical and hybrid candidates of a run share: the BM25 index and its rankings per set of kept
    documents, and the last dense ranking (one transform and encoding serve every fusion)."""

    analyzer: str = DEFAULT_ANALYZER
    lexical: dict[bytes, tuple[LexicalIndex, dict[tuple[str, int], Ranking]]] = field(default_factory=dict)
    last_dense: dict[Candidate, dict[str, Ranking]] = field(default_factory=dict)


def searched_scores(
    candidate: Candidate, space: np.ndarray, items: Items, known: np.ndarray, searches: Searches
) -> tuple[np.ndarray, np.ndarray | None]:
    """Each dev (and test) query's metric under the candidate's lexical or hybrid search of the documents that
    ``known`` keeps (vectors ``space``, as a flat store with its encoding holds them)."""
    dev = items.dev_rows
    assert dev.docs is not None
    searchable = known[dev.docs]
    if not searchable.any():
        raise BadInputError("no document has a token the model knows; nothing to rank")
    doc_ids = [d.id for d, ok in zip(items.data.corpus, searchable, strict=True) if ok]
    _, depth = query_metric(items.metric)
    k = min(depth, len(doc_ids))

    def score(side: str, rows: Rows) -> np.ndarray:
        assert rows.queries is not None
        found: Sequence[Sequence[int]]
        if candidate.mode == "lexical":
            found = _lexical(items, dev, searchable, searches, side, rows, k)[0].tolist()
        else:
            fused_depth = min(CANDIDATE_FACTOR * k, len(doc_ids))  # each ranker's candidates, as a search's
            lexical = _lexical(items, dev, searchable, searches, side, rows, fused_depth)
            dense = _dense(candidate, space, dev, searchable, rows, known, searches, side, fused_depth)
            fused = fuse(*dense, *lexical, parse_fusion(candidate.fusion), k)
            found = [[hit.row for hit in hits] for hits in fused]
        return query_scores(([doc_ids[i] for i in row if i >= 0] for row in found), rows.qrels, items.metric)

    return score("dev", dev), (score("test", items.test_rows) if items.test_rows is not None else None)


def _lexical(
    items: Items, dev: Rows, searchable: np.ndarray, searches: Searches, side: str, rows: Rows, depth: int
) -> Ranking:
    """The BM25 ranking of ``rows``' queries over the kept documents (index rows 0..n-1), ``depth`` deep: the
    index built once per set of kept documents, each query side searched once per depth."""
    assert dev.docs is not None and rows.queries is not None
    key = searchable.tobytes()
    if key not in searches.lexical:
        texts = [items.texts[i] for i in dev.docs[searchable]]
        searches.lexical[key] = (LexicalIndex.build(texts, make_analyzer(searches.analyzer)), {})
    index, rankings = searches.lexical[key]
    if (side, depth) not in rankings:
        rankings[(side, depth)] = index.search([items.texts[i] for i in rows.queries], depth)
    return rankings[(side, depth)]


def _dense(
    candidate: Candidate,
    space: np.ndarray,
    dev: Rows,
    searchable: np.ndarray,
    rows: Rows,
    known: np.ndarray,
    searches: Searches,
    side: str,
    depth: int,
) -> Ranking:
    """The dense ranking a flat cosine store with the candidate's encoding gives the queries (rows and its own
    scores, ``depth`` deep); a query with no token the model knows is not searched (rows -1), as in an index."""
    assert dev.docs is not None and rows.queries is not None
    key = Candidate(candidate.model, candidate.pooling, candidate.transform, candidate.encoding)
    if key not in searches.last_dense:
        searches.last_dense.clear()
        searches.last_dense[key] = {}
    rankings = searches.last_dense[key]
    if side not in rankings:
        stored = unit_rows(space[dev.docs[searchable]], dtype=np.float32, zero_rows="keep")
        sample = TRAIN_SAMPLE if stored.shape[0] > TRAIN_SAMPLE else None
        store, _ = coded_store(stored, candidate.encoding, "cosine", sample)
        asked = known[rows.queries]
        found_rows = np.full((asked.size, depth), -1, dtype=np.int64)
        found_scores = np.full((asked.size, depth), -np.inf, dtype=np.float32)
        if asked.any():
            queries = unit_rows(space[rows.queries[asked]], dtype=np.float32, zero_rows="keep")
            found_scores[asked], found_rows[asked] = store.search(queries, depth)
        store.close()
        rankings[side] = (found_rows, found_scores)
    return rankings[side]
