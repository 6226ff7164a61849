"""The labelled items a tuning run scores: scored sentence pairs or judged retrieval queries, checked; the texts
they read (each encoded once), the unlabelled texts the transforms fit on, and the rows of those texts each item
reads."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from whitevec.datasets.retrieval import RetrievalDataset
from whitevec.datasets.sts import Pair, StsTask, check_scores_vary
from whitevec.errors import BadInputError

MIN_PAIRS = 50
MIN_QUERIES = 10


@dataclass
class Rows:
    """The rows (of the run's texts) a set of items reads, and for queries their judgments."""

    left: np.ndarray | None = None  # STS: rows of sentence1 / sentence2
    right: np.ndarray | None = None
    docs: np.ndarray | None = None  # retrieval: rows of the documents / queries
    queries: np.ndarray | None = None
    qrels: list[Mapping[str, int]] = field(default_factory=list)


@dataclass
class Items:
    """The labelled items of a run: the texts to encode (each once), the fit texts, the gold scores (pairs), and
    the rows of the texts each dev and test item reads (see :func:`_item_rows`)."""

    kind: str
    metric: str
    data: Any  # the dev data: a retrieval run ranks its corpus's ids
    texts: list[str]
    fit: list[str]
    n_dev: int
    n_test: int
    gold: np.ndarray | None = None
    test_gold: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)
    dev_rows: Rows = field(default_factory=lambda: Rows())
    test_rows: Rows | None = None
    fit_rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    scored_rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    stored_rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


def gather_items(
    kind: str,
    metric: str,
    dev: Any,
    test: Any,
    test_queries: Sequence[str] | None,
    fit_texts: Sequence[str] | None,
) -> Items:
    """The dev (and test) items, checked, and the texts they read; notes when the dev data is small."""
    if kind == "sts":
        items = _sts_items(dev, test, fit_texts, metric)
    else:
        items = _retrieval_items(dev, test_queries, fit_texts, metric)
    if kind == "sts" and items.n_dev < 2:
        raise BadInputError(
            f"{items.n_dev} dev pairs; tuning needs at least 2 (and {MIN_PAIRS} for a stable choice)"
        )
    if not items.fit:
        raise BadInputError("no unlabelled text to fit the transforms on")
    row_of = {t: i for i, t in enumerate(items.texts)}
    items.fit_rows = np.array([row_of[t] for t in items.fit], dtype=np.int64)
    items.dev_rows, items.test_rows = _item_rows(kind, dev, test, test_queries, row_of)
    items.scored_rows, items.stored_rows = _scored_rows(items.dev_rows, items.test_rows)
    return items


def _sts_items(dev: Any, test: Any, fit_texts: Sequence[str] | None, metric: str) -> Items:
    dev_pairs = _pairs(dev, "dev")
    test_pairs = _pairs(test, "test") if test is not None else []
    check_scores_vary(dev_pairs, "the dev data")
    gold = np.array([p.score for p in dev_pairs], dtype=np.float64)
    test_gold = None
    if test_pairs:
        check_scores_vary(test_pairs, "the test data")
        test_gold = np.array([p.score for p in test_pairs], dtype=np.float64)
    pair_texts = [s for p in [*dev_pairs, *test_pairs] for s in (p.sentence1, p.sentence2)]
    fit = list(dict.fromkeys(fit_texts if fit_texts is not None else pair_texts))
    texts = list(dict.fromkeys([*pair_texts, *fit]))
    items = Items("sts", metric, dev, texts, fit, len(dev_pairs), len(test_pairs), gold, test_gold)
    if items.n_dev < MIN_PAIRS:
        items.notes.append(
            f"only {items.n_dev} dev pairs (fewer than {MIN_PAIRS}): too few for a stable choice; none is kept "
            "unless a gain is significant even so"
        )
    return items


def _retrieval_items(
    dev: RetrievalDataset, test_queries: Sequence[str] | None, fit_texts: Sequence[str] | None, metric: str
) -> Items:
    judged = dev.judged_queries()
    held = set(test_queries or ())
    unknown = sorted(held - set(judged))
    if unknown:
        raise BadInputError(f"test query ids not among the judged queries of {dev.name}: {', '.join(unknown[:5])}")
    dev_q = [q for q in judged if q not in held]
    test_q = [q for q in judged if q in held]
    if len(dev_q) < 2:
        raise BadInputError(
            f"{len(dev_q)} judged dev queries; tuning needs at least 2 (and 10 for a stable choice)"
        )
    doc_texts = [d.text for d in dev.corpus]
    # The corpus as an index fits on it (Retriever.build): every document, a repeated text as often as it
    # occurs, so that ``index build --config`` gives the vectors scored here (on Cranfield one repeated
    # document moved pca-128 + sq8 by 0.18 nDCG@10 when fitted on the distinct texts only).
    fit = list(dict.fromkeys(fit_texts)) if fit_texts is not None else doc_texts
    texts = list(dict.fromkeys([*doc_texts, *(judged[q] for q in [*dev_q, *test_q]), *fit]))
    items = Items("retrieval", metric, dev, texts, fit, len(dev_q), len(test_q))
    if items.n_dev < MIN_QUERIES:
        items.notes.append(
            f"only {items.n_dev} judged dev queries (fewer than {MIN_QUERIES}): too few for a stable choice; none "
            "is kept unless a gain is significant even so"
        )
    return items


def _pairs(data: StsTask | Sequence[Pair] | None, what: str) -> list[Pair]:
    if isinstance(data, StsTask):
        pairs = data.all_pairs()
    elif data is None:
        pairs = []
    else:
        pairs = list(data)
        for i, pair in enumerate(pairs):
            if not isinstance(pair, Pair):
                raise BadInputError(f"{what}[{i}] is a {type(pair).__name__}, expected whitevec.datasets.Pair")
    if not pairs:
        raise BadInputError(f"the {what} data holds no scored pairs")
    for i, pair in enumerate(pairs):
        if not math.isfinite(pair.score):
            raise BadInputError(f"{what} pair {i} has a non-finite gold score {pair.score!r}")
    return pairs


def _item_rows(
    kind: str,
    dev: Any,
    test: Any,
    test_queries: Sequence[str] | None,
    row_of: dict[str, int],
) -> tuple[Rows, Rows | None]:
    if kind == "sts":

        def rows(pairs: list[Pair]) -> Rows:
            return Rows(
                left=np.array([row_of[p.sentence1] for p in pairs], dtype=np.int64),
                right=np.array([row_of[p.sentence2] for p in pairs], dtype=np.int64),
            )

        return rows(_pairs(dev, "dev")), (rows(_pairs(test, "test")) if test is not None else None)
    judged = dev.judged_queries()
    held = set(test_queries or ())
    docs = np.array([row_of[d.text] for d in dev.corpus], dtype=np.int64)

    def query_rows(ids: list[str]) -> Rows:
        return Rows(
            docs=docs,
            queries=np.array([row_of[judged[q]] for q in ids], dtype=np.int64),
            qrels=[dev.qrels[q] for q in ids],
        )

    dev_rows = query_rows([q for q in judged if q not in held])
    test_ids = [q for q in judged if q in held]
    return dev_rows, (query_rows(test_ids) if test_ids else None)


def _scored_rows(dev: Rows, test: Rows | None) -> tuple[np.ndarray, np.ndarray]:
    """(every row an item reads, the rows an index would store: the documents; for pairs, all of them)."""
    parts = [
        r for rows in (dev, test) if rows is not None for r in (rows.left, rows.right, rows.docs, rows.queries)
    ]
    scored = np.unique(np.concatenate([r for r in parts if r is not None]))
    # The documents in corpus order, a repeated text as often as the index would hold it (training sees it so).
    stored = dev.docs if dev.docs is not None else scored
    return scored, stored
