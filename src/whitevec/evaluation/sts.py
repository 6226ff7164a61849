"""STS evaluation: cosine of (transformed) sentence vectors against gold scores, Spearman x 100.

Each task is reported three ways, because published numbers use different ones:

* ``all``: the evaluated subsets concatenated, one correlation;
* ``mean``: the plain mean of the per-subset correlations;
* ``wmean``: the mean weighted by the number of pairs in each subset (BERT-whitening / BERT-flow "wmean").

The transform is fitted per task on ``target`` (every sentence of the task, all splits: the "target" protocol of
BERT-flow and BERT-whitening), on ``train`` (the task's train split), or on the sentences of a text file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from whitevec._version import __version__
from whitevec.datasets import StsTask, read_texts_file
from whitevec.encoders.protocol import known_token_mask, zero_unknown_rows
from whitevec.errors import BadInputError
from whitevec.evaluation.metrics import cosine_rows, non_finite_to_none, spearman100
from whitevec.transforms import Transform, make_transform
from whitevec.utils.io import write_json

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder

FIT_TARGET = "target"
FIT_TRAIN = "train"


@dataclass
class SubsetScore:
    """Spearman x 100 on one evaluated subset."""

    name: str
    n_pairs: int
    spearman: float


@dataclass
class StsScore:
    """One task under one transform: per-subset scores and the three aggregates."""

    task: str
    model: str
    pooling: str
    transform: str
    fit_on: str
    n_fit: int
    subsets: list[SubsetScore]
    all: float
    mean: float
    wmean: float
    fit_seconds: float = 0.0
    encoding: str = "float32"  # how the vectors were stored before the cosines (see evaluate_sts)
    # Evaluated pairs with a sentence that has no token the model knows: their similarity is 0 (a zero vector).
    unknown_pairs: int = 0


@dataclass
class StsReport:
    """Everything one evaluation run measured, with what is needed to reproduce it."""

    model: dict[str, Any]
    scores: list[StsScore] = field(default_factory=list)
    whitevec: str = __version__

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types; a score that is NaN (the Spearman correlation of constant cosines) becomes None."""
        return non_finite_to_none(asdict(self))

    def save_json(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_dict` as JSON (atomically, UTF-8); returns ``path``."""
        return write_json(path, self.to_dict())


def score_pairs(task: StsTask, vectors_of: Callable[[list[str]], np.ndarray]) -> tuple[list[SubsetScore], float]:
    """Per-subset Spearman x 100 and the ``all`` score, given a function from sentences to vectors."""
    subset_scores = []
    all_pred: list[np.ndarray] = []
    all_gold: list[np.ndarray] = []
    for name, pairs in task.subsets.items():
        left = vectors_of([p.sentence1 for p in pairs])
        right = vectors_of([p.sentence2 for p in pairs])
        predicted = cosine_rows(left, right)
        gold = np.array([p.score for p in pairs], dtype=np.float64)
        subset_scores.append(SubsetScore(name, len(pairs), spearman100(predicted, gold)))
        all_pred.append(predicted)
        all_gold.append(gold)
    return subset_scores, spearman100(np.concatenate(all_pred), np.concatenate(all_gold))


def aggregate(subsets: Sequence[SubsetScore]) -> tuple[float, float]:
    """(mean, size-weighted mean) of per-subset scores."""
    scores = np.array([s.spearman for s in subsets])
    sizes = np.array([s.n_pairs for s in subsets], dtype=np.float64)
    return float(scores.mean()), float((scores * sizes).sum() / sizes.sum())


def fit_sentences(task: StsTask, fit_on: str | os.PathLike[str]) -> list[str]:
    """The sentences a transform is fitted on for ``task`` under protocol ``fit_on``."""
    if str(fit_on) in (FIT_TARGET, FIT_TRAIN):
        return task.sentences(str(fit_on))
    return read_texts_file(fit_on)


def check_tasks(tasks: Sequence[StsTask]) -> None:
    """Raise BadInputError for no task, or a task with an evaluated subset whose gold scores are all equal
    (its Spearman correlation would be NaN): checked before anything is encoded."""
    if not tasks:
        raise BadInputError("no STS task to evaluate")
    for task in tasks:
        task.check_scores_vary()


def evaluate_sts(
    encoder: AnyEncoder,
    tasks: Sequence[StsTask],
    transforms: Sequence[str] = ("none", "whitening"),
    fit_on: str | os.PathLike[str] = FIT_TARGET,
    show_progress: bool | None = None,
    make: Callable[[str], Transform | None] = make_transform,
    encoding: str = "float32",
) -> StsReport:
    """Evaluate ``encoder`` on ``tasks`` under each transform spec (see ``make_transform``).

    All sentences a task needs (evaluated pairs and fitting sentences) are encoded once; each transform is then
    fitted and applied to the cached vectors. ``encoding`` other than float32 (an index encoding spec, as a tuned
    configuration names one): a task's evaluated sentences are stored with it and decoded before the cosines, as
    ``whitevec tune`` scores an encoding (:func:`whitevec.index.faiss.encoded.encoded_vectors`; codes trained on
    the task's evaluated sentences).

    A sentence with no token the model knows (:func:`whitevec.encoders.protocol.known_token_mask`) has no meaning:
    it is
    left out of the fit and its vector is zeros, so a pair holding one has similarity 0 (``unknown_pairs``
    counts them).

    Raises:
        BadInputError: no task or transform, a bad transform spec, or a task with an evaluated subset whose
            gold scores are all equal (see :func:`check_tasks`), before anything is encoded.
    """
    encoding = _check_run(tasks, transforms, make, encoding)
    report = StsReport(model=encoder.describe())
    file_sentences = None if str(fit_on) in (FIT_TARGET, FIT_TRAIN) else fit_sentences(tasks[0], fit_on)
    fit_label = str(fit_on) if file_sentences is None else f"file:{Path(fit_on).name}"
    for task in tasks:
        fit_texts = file_sentences if file_sentences is not None else fit_sentences(task, fit_on)
        every = list(dict.fromkeys([*task.evaluated_sentences(), *fit_texts]))
        known = known_token_mask(encoder, every)
        vectors = zero_unknown_rows(encoder.encode(every, show_progress=show_progress), known)
        row_of = {text: i for i, text in enumerate(every)}
        fit_matrix = vectors[[row_of[t] for t in fit_texts if known[row_of[t]]]]
        stored = np.unique([row_of[t] for t in task.evaluated_sentences()])
        unknown_pairs = sum(
            not (known[row_of[p.sentence1]] and known[row_of[p.sentence2]])
            for pairs in task.subsets.values()
            for p in pairs
        )
        for spec in transforms:
            transform = make(spec)
            started = time.perf_counter()
            space = zero_unknown_rows(_fitted_space(transform, vectors, fit_matrix, encoding, stored), known)
            elapsed = time.perf_counter() - started

            def vectors_of(
                sentences: list[str], space: np.ndarray = space, row_of: dict[str, int] = row_of
            ) -> np.ndarray:
                return space[[row_of[s] for s in sentences]]

            subsets, all_score = score_pairs(task, vectors_of)
            mean, wmean = aggregate(subsets)
            report.scores.append(
                StsScore(
                    task=task.name,
                    model=encoder.model_name,
                    pooling=encoder.pooling.name,
                    transform=spec,
                    fit_on=fit_label if transform is not None else "-",
                    n_fit=len(fit_matrix) if transform is not None else 0,
                    subsets=subsets,
                    all=all_score,
                    mean=mean,
                    wmean=wmean,
                    fit_seconds=elapsed,
                    encoding=encoding,
                    unknown_pairs=unknown_pairs,
                )
            )
    return report


def _check_run(
    tasks: Sequence[StsTask], transforms: Sequence[str], make: Callable[[str], Transform | None], encoding: str
) -> str:
    """The encoding's canonical spec, once the encoding, the tasks and every transform spec are checked (before
    anything is encoded)."""
    from whitevec.index.encodings.spec import parse_encoding

    parsed = parse_encoding(encoding)
    if parsed.scoring == "search":
        raise BadInputError(
            f"encoding {parsed.spec} is scored through an index's search (RaBitQ's estimator, rescoring), which "
            "gives a pair of sentences no score of its own; evaluate it with eval-retrieval"
        )
    check_tasks(tasks)
    if not transforms:
        raise BadInputError("no transform to evaluate; use 'none' for raw vectors")
    for spec in transforms:
        make(spec)  # reject a bad spec before any encoding
    return parsed.spec


def _fitted_space(
    transform: Transform | None, vectors: np.ndarray, fit_matrix: np.ndarray, encoding: str, stored: np.ndarray
) -> np.ndarray:
    """``vectors`` through ``transform`` fitted on ``fit_matrix``; with an encoding other than float32, the
    ``stored`` rows (the evaluated sentences) as that encoding decodes them."""
    if transform is not None:
        transform.fit(fit_matrix)
        space = np.asarray(transform.transform(vectors))
    else:
        space = vectors
    if encoding == "float32":
        return space
    from whitevec.index.faiss.encoded import encoded_vectors

    return encoded_vectors(np.asarray(space, dtype=np.float32), encoding, stored)


def evaluate_sts_poolings(
    encoder: AnyEncoder,
    poolings: Sequence[str],
    tasks: Sequence[StsTask],
    transforms: Sequence[str] = ("none", "whitening"),
    fit_on: str | os.PathLike[str] = FIT_TARGET,
    show_progress: bool | None = None,
    encoding: str = "float32",
) -> StsReport:
    """:func:`evaluate_sts` for several poolings of one model, with one forward pass over the sentences.

    With the encoder's disk cache on, the first pass stores every pooling's vectors, so each per-pooling
    evaluation below reads them instead of running the model again.
    """
    if not poolings:
        raise BadInputError("no pooling to evaluate")
    check_tasks(tasks)
    encoders = [encoder.with_pooling(p) for p in poolings]
    if len(encoders) > 1 and encoder.caches_vectors:
        texts: list[str] = []
        for task in tasks:
            texts += task.evaluated_sentences()
            if str(fit_on) in (FIT_TARGET, FIT_TRAIN):
                texts += fit_sentences(task, fit_on)
        if str(fit_on) not in (FIT_TARGET, FIT_TRAIN):
            texts += read_texts_file(fit_on)
        wanted: list[Any] = [e.pooling for e in encoders]  # a static encoder has one pooling: never here
        encoder.encode_poolings(list(dict.fromkeys(texts)), wanted, show_progress=show_progress)
    report: StsReport | None = None
    for each in encoders:
        part = evaluate_sts(each, tasks, transforms, fit_on, show_progress, encoding=encoding)
        if report is None:
            report = part
        else:
            report.scores.extend(part.scores)
    assert report is not None
    report.model.pop("pooling", None)
    report.model.pop("layers", None)
    report.model["poolings"] = [e.pooling.name for e in encoders]
    return report
