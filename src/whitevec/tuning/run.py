"""``whitevec.tune``: score every candidate on the user's labelled dev data and choose one that beats doing
nothing, or keep ``none``.

Protocol:

1. Every text is encoded once per model, all poolings from one forward pass (and the encoder's vector cache).
2. Every candidate transform is fitted on the unlabelled fit text only (never on labels; by default the
   sentences of the dev and test pairs, the "target" protocol, or the corpus for retrieval). Whitening variants
   share one pass over the data: their moments are the same, only k, beta and gamma differ.
3. Each candidate scores each dev item: the cosine of each pair (STS; the statistic is Spearman x 100 over the
   pairs) or the metric of each query (retrieval: nDCG@10 by default; exact cosine search over the corpus).
   A compressed encoding is scored as the index would store it
   (:func:`whitevec.index.faiss_store.encoded_vectors`): a flat FAISS store
   with that encoding trains its codes on the stored side (the documents; for pairs every sentence) and the
   stored vectors are replaced by their decoded codes; queries stay float (asymmetric search) and are scored as
   the store scores them. For pairs both sentences are decoded and compared by cosine. A PQ encoding whose M
   does not divide a transform's output dimension is skipped for that transform; too few stored vectors for
   2^8 centroids lower its bits as the index would (noted), and the candidate carries the lowered spec.
4. Choice on a set of items (see :mod:`whitevec.tuning.selection`): the candidates whose gain over the baseline
   (the first model and pooling with no transform) is significant on a paired bootstrap, simultaneously over
   all candidates; among them the best point gain, then, among those tied with it (the 95% interval of the
   difference reaches 0), the cheapest (bytes per vector, then none < linear < flow). None significant: the
   baseline. Under ``max_bytes_per_vector`` only candidates within the budget can be chosen; if the baseline
   is over it, the best scoring candidate within it is chosen (ties again to the cheaper).
5. The choice is made on all dev items. Without separate test data, the procedure is also checked by k-fold
   over the dev items (seeded): chosen on k-1 folds, scored with raw on the held-out fold; with test data it
   is scored there. Those are the figures that say what tuning gains; the dev scores of the choice do not.

Each candidate also carries its model's encode cost, ``encode_ms_per_1000``: one timed encode of up to 1,000 of
the texts, cache off, after the model has encoded them all once; so quality per millisecond can be read off one
run (a static folder against a transformers model, say). It is a measurement of this run on this machine, not
part of the choice.

Deterministic for a seed (folds and resamples come from it), except that ``max_seconds`` cuts the candidate
list where the time runs out (recorded per candidate), and the encode cost.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.datasets.retrieval import RetrievalDataset
from whitevec.datasets.sts import Pair, StsTask, check_scores_vary
from whitevec.encoders.models import DEFAULT_MODEL
from whitevec.encoders.protocol import known_token_mask, zero_unknown_rows
from whitevec.encoders.static import StaticEncoder
from whitevec.encoders.static_format import STATIC_POOLING
from whitevec.errors import BadInputError, WhitevecWarning
from whitevec.evaluation.metrics import cosine_rows, non_finite_to_none
from whitevec.evaluation.retrieval import average_precision, mrr_at_k, ndcg_at_k, recall_at_k
from whitevec.index.encodings import parse_encoding
from whitevec.preflight import check_encoder
from whitevec.transforms import AllButTheTop, Transform, Whitening, make_transform
from whitevec.tuning.config import TunedConfig
from whitevec.tuning.selection import (
    Gain,
    bootstrap_gains,
    mean_resampled,
    resample_counts,
    spearman_resampled,
    tied_with,
)
from whitevec.tuning.space import (
    ALL_ENCODINGS,
    Candidate,
    check_encodings,
    check_pair_encodings,
    check_transform_for_dim,
    check_transforms,
    cost_key,
    default_transforms,
    encoding_bytes,
    encoding_disk_bytes,
    output_dim,
)
from whitevec.utils.io import write_json
from whitevec.utils.linalg import unit_rows

STS_METRICS = ("spearman",)
RETRIEVAL_METRICS = ("ndcg@K", "recall@K", "mrr@K", "map")
MIN_PAIRS = 50
MIN_QUERIES = 10
# Texts timed once per model for its encode cost (encode_ms_per_1000).
ENCODE_COST_SAMPLE = 1000


def check_metric(metric: str | None, kind: str) -> str:
    """The metric name, lower-cased; raises BadInputError listing the valid ones for this kind of dev data."""
    if kind == "sts":
        name = (metric or "spearman").strip().lower()
        if name != "spearman":
            raise BadInputError(f"unknown metric {metric!r} for scored pairs; valid metrics: spearman")
        return name
    name = (metric or "ndcg@10").strip().lower()
    if name == "map" or re.fullmatch(r"(ndcg|recall|mrr)@[1-9]\d*", name):
        return name
    raise BadInputError(
        f"unknown metric {metric!r} for retrieval; valid metrics: {', '.join(RETRIEVAL_METRICS)} (K a positive "
        "integer, e.g. ndcg@10, recall@100)"
    )


# --- results -------------------------------------------------------------------------------------------------
@dataclass
class CandidateResult:
    """One candidate's row: dev score, gain over the baseline with its 95% interval, cost, and test score."""

    model: str
    pooling: str
    transform: str
    encoding: str
    dim: int
    bytes_per_vector: int  # in memory: the code (the budget counts these)
    status: str = "scored"  # or "skipped: ..." / "failed: ..."
    fit_seconds: float = 0.0
    # The model's encode cost measured in this run (see tune's docstring): milliseconds per 1,000 texts.
    encode_ms_per_1000: float | None = None
    dev: float | None = None
    gain: float | None = None
    low: float | None = None
    high: float | None = None
    bound: float | None = None
    significant: bool = False
    test: float | None = None
    folds: list[float] = field(default_factory=list)  # its score on each held-out fold (k-fold check)
    chosen: bool = False
    disk_bytes_per_vector: int = 0  # on disk: a +rescore encoding's rescoring vector

    @property
    def candidate(self) -> Candidate:
        return Candidate(self.model, self.pooling, self.transform, self.encoding)


@dataclass
class FoldCheck:
    """The choice made without one fold, scored on that fold beside the raw baseline."""

    fold: int
    n_items: int
    chosen: str
    raw: float
    tuned: float


@dataclass
class TuneResult:
    """What :func:`tune` measured and chose. ``config`` is the choice (see :class:`TunedConfig`)."""

    kind: str
    metric: str
    n_dev: int
    n_test: int
    n_fit: int
    seed: int
    n_boot: int
    folds: int
    max_bytes_per_vector: int | None
    candidates: list[CandidateResult]
    config: TunedConfig
    checks: list[FoldCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # Per model: the texts of the run with no token it knows (whitevec.encoders.protocol.known_token_mask). They
    # are left
    # out of the fits; their vectors are zeros (a pair holding one has similarity 0), such a query scores 0 and
    # such a document cannot be retrieved, as in an index built with the default --empty-documents skip.
    unknown_texts: dict[str, int] = field(default_factory=dict)

    @property
    def chosen(self) -> CandidateResult:
        return next(c for c in self.candidates if c.chosen)

    @property
    def baseline(self) -> CandidateResult:
        return self.candidates[0]

    def held_out_score(self, row: CandidateResult) -> float | None:
        """``row``'s score on the side not used to choose: its test score, or its held-out fold scores averaged
        (weighted by fold size) under the k-fold check."""
        if self.n_test:
            return row.test
        if not self.checks or len(row.folds) != len(self.checks):
            return None
        return float(np.average(row.folds, weights=[c.n_items for c in self.checks]))

    def check_summary(self) -> dict[str, float] | None:
        """raw and tuned on the side not used to choose: test data when given, else the mean over held-out
        folds (weighted by fold size)."""
        if self.n_test:
            assert self.baseline.test is not None and self.chosen.test is not None
            return {
                "raw": self.baseline.test,
                "tuned": self.chosen.test,
                "gain": self.chosen.test - self.baseline.test,
            }
        if not self.checks:
            return None
        sizes = np.array([c.n_items for c in self.checks], dtype=np.float64)
        raw = float(np.average([c.raw for c in self.checks], weights=sizes))
        tuned = float(np.average([c.tuned for c in self.checks], weights=sizes))
        return {"raw": raw, "tuned": tuned, "gain": tuned - raw}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["config"] = self.config.to_dict()
        data["check"] = self.check_summary()
        return non_finite_to_none(data)

    def save_json(self, path: str | os.PathLike[str]) -> Path:
        """The whole result (every candidate, the folds, the choice) as JSON, written atomically."""
        return write_json(path, self.to_dict())

    def save_config(self, path: str | os.PathLike[str]) -> Path:
        """The chosen configuration (see :class:`TunedConfig`), written atomically."""
        return self.config.save(path)

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """Dev score against bytes per vector, one point per scored candidate, the choice marked (PNG)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from whitevec.utils.io import atomic_path

        scored = [c for c in self.candidates if c.dev is not None]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for encoding in dict.fromkeys(c.encoding for c in scored):
            mine = [c for c in scored if c.encoding == encoding]
            ax.scatter([c.bytes_per_vector for c in mine], [c.dev or 0.0 for c in mine], label=encoding, alpha=0.7)
        chosen = self.chosen
        ax.scatter(
            [chosen.bytes_per_vector], [chosen.dev or 0.0], marker="*", s=250, color="black", label="chosen"
        )
        ax.axhline(self.baseline.dev or 0.0, color="grey", linestyle="--", linewidth=1, label="none")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes per vector")
        ax.set_ylabel(f"dev {self.metric} x 100")
        ax.legend()
        fig.tight_layout()
        target = Path(path)
        with atomic_path(target, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=120)
        plt.close(fig)
        return target


# --- scoring -------------------------------------------------------------------------------------------------
def _query_metric(metric: str) -> tuple[Callable[[Sequence[str], Mapping[str, int]], float], int]:
    """The per-query function of ``metric`` and the ranking depth it needs."""
    if metric == "map":
        return average_precision, 1000
    name, k_text = metric.split("@")
    k = int(k_text)
    if name == "ndcg":
        return (lambda ranked, qrels: ndcg_at_k(ranked, qrels, k)), k
    if name == "recall":
        return (lambda ranked, qrels: recall_at_k(ranked, qrels, k)), k
    return (lambda ranked, qrels: mrr_at_k(ranked, qrels, k)), k


def _per_query_scores(
    doc_vectors: np.ndarray,
    query_vectors: np.ndarray,
    doc_ids: list[str],
    qrels: list[Mapping[str, int]],
    metric: str,
    encoding: str = "float32",
) -> np.ndarray:
    """Each query's metric under exact search over the documents as a flat cosine index with ``encoding`` scores
    them (ties broken by document order): cosine for float32; against decoded codes or sign codes
    (``doc_vectors`` from :func:`whitevec.index.faiss_store.encoded_vectors`), the index's own score
    (:func:`whitevec.index.faiss_store.cosine_scores`); for RaBitQ and ``+rescore``, the ranking of a flat store's
    own search at the metric's depth (:func:`whitevec.index.faiss_store.searched_rankings`)."""
    from whitevec.index.faiss_store import cosine_scores, searched_rankings

    score_of, depth = _query_metric(metric)
    depth = min(depth, len(doc_ids))
    if parse_encoding(encoding).scoring == "search":
        rankings = searched_rankings(doc_vectors, query_vectors, encoding, depth)
        return np.array(
            [score_of([doc_ids[i] for i in row if i >= 0], qrels[j]) for j, row in enumerate(rankings)],
            dtype=np.float64,
        )
    if encoding == "float32":
        docs = unit_rows(doc_vectors, dtype=np.float32, zero_rows="keep")
    else:
        docs = np.ascontiguousarray(doc_vectors, dtype=np.float32)
    queries = unit_rows(query_vectors, dtype=np.float32, zero_rows="keep")
    out = np.empty(len(qrels), dtype=np.float64)
    for start in range(0, len(qrels), 256):
        sims = cosine_scores(queries[start : start + 256], docs, encoding)
        top = np.argpartition(-sims, depth - 1, axis=1)[:, :depth] if depth < sims.shape[1] else None
        for j in range(sims.shape[0]):
            row = sims[j]
            candidates = top[j] if top is not None else np.arange(row.size)
            ranked = candidates[np.lexsort((candidates, -row[candidates]))]
            out[start + j] = score_of([doc_ids[i] for i in ranked], qrels[start + j])
    return out


def _statistic(kind: str, item_scores: np.ndarray, gold: np.ndarray | None, items: np.ndarray) -> float:
    """Spearman x 100 (STS) or mean metric x 100 (retrieval) over ``items``."""
    if kind == "sts":
        from whitevec.evaluation.metrics import spearman100

        assert gold is not None
        return spearman100(item_scores[items], gold[items])
    return float(100.0 * item_scores[items].mean())


@dataclass
class _Scored:
    result: CandidateResult
    dev_items: np.ndarray  # per dev item: cosine (STS) or metric value (retrieval)
    test_items: np.ndarray | None


def _choose(
    kind: str,
    scored: list[_Scored],
    gold: np.ndarray | None,
    items: np.ndarray,
    n_boot: int,
    seed: int,
    budget: int | None,
) -> tuple[int, list[Gain]]:
    """Index into ``scored`` of the choice made on ``items`` (see the module docstring), and every gain."""
    matrix = np.vstack([s.dev_items[items] for s in scored])
    counts = resample_counts(items.size, n_boot, seed)
    if kind == "sts":
        assert gold is not None
        resampled = spearman_resampled(matrix, gold[items], counts)
    else:
        resampled = mean_resampled(matrix, counts)
    points = [_statistic(kind, s.dev_items, gold, items) for s in scored]
    gains = bootstrap_gains(resampled, 0, points)
    costs = [cost_key(s.result.candidate, s.result.dim) for s in scored]
    allowed = [budget is None or s.result.bytes_per_vector <= budget for s in scored]
    if allowed[0]:
        eligible = [c for c in range(len(scored)) if allowed[c] and (c == 0 or gains[c].significant)]
    else:
        eligible = [c for c in range(len(scored)) if allowed[c]]
    if not eligible:
        return 0, gains
    best = max(eligible, key=lambda c: (gains[c].gain, [-x for x in costs[c]]))
    tied = [c for c in eligible if c == best or tied_with(resampled, best, c)]
    choice = min(tied, key=lambda c: (costs[c], -gains[c].gain, c))
    return choice, gains


# --- the run -------------------------------------------------------------------------------------------------
def _fold_ids(n: int, folds: int, seed: int) -> np.ndarray:
    """Fold number of each item: a seeded permutation cut into ``folds`` near-equal parts."""
    order = np.random.default_rng(seed).permutation(n)
    ids = np.empty(n, dtype=np.int64)
    ids[order] = np.arange(n) % folds
    return ids


def _encode_poolings(
    encoder: Any, texts: list[str], poolings: Sequence[str], show: bool | None
) -> dict[str, np.ndarray]:
    if isinstance(encoder, StaticEncoder):
        return encoder.encode_poolings(texts, list(poolings), show_progress=show)
    if hasattr(encoder, "encode_poolings"):
        found = encoder.encode_poolings(texts, list(poolings), show_progress=show)
        # Encoder keys results by canonical pooling name; map back to what was asked.
        from whitevec.encoders.pooling import get_pooling

        return {p: found[get_pooling(p).name] for p in poolings}
    if len(poolings) != 1:
        raise BadInputError("this encoder computes one pooling only; give one pooling")
    return {poolings[0]: encoder.encode(texts, show_progress=show)}


def encode_cost(encoder: Any, texts: Sequence[str], sample: int = ENCODE_COST_SAMPLE) -> float:
    """Milliseconds per 1,000 texts: one timed encode of the first ``sample`` texts, with the vector cache off
    (cached vectors would time a disk read), after the encoder has run once."""
    timed = encoder.without_cache() if hasattr(encoder, "without_cache") else encoder
    chosen = list(texts[:sample])
    started = time.perf_counter()
    timed.encode(chosen, show_progress=False)
    return 1e6 * (time.perf_counter() - started) / max(1, len(chosen))


def model_poolings(
    models: Sequence[str], poolings: Sequence[str], encoders: Mapping[str, Any] | None
) -> dict[str, list[str]]:
    """The poolings each model is tuned with: ``static`` for a static encoder folder (its only one); the asked
    poolings other than ``static`` for a transformers model (its default pooling when none is left), each
    checked before anything loads."""
    from whitevec.encoders.loading import default_pooling_of, is_static_model

    given = dict(encoders or {})
    asked = [p for p in poolings if p != STATIC_POOLING]
    out: dict[str, list[str]] = {}
    for model in models:
        static = isinstance(given[model], StaticEncoder) if model in given else is_static_model(model)
        if static:
            out[model] = [STATIC_POOLING]
        elif asked:
            out[model] = list(asked)
        elif model in given:
            out[model] = [str(given[model].describe()["pooling"])]
        else:
            out[model] = [default_pooling_of(model, "last-avg")]
    if any(p != STATIC_POOLING for each in out.values() for p in each):
        from whitevec.encoders.pooling import get_pooling

        for pooling in {p for each in out.values() for p in each if p != STATIC_POOLING}:
            get_pooling(pooling)
    return out


@contextlib.contextmanager
def _progress(show: bool | None, total: int) -> Iterator[Callable[[], None]]:
    """A progress bar over ``total`` candidates (``show`` None: on a terminal only); yields its advance."""
    if show is None:
        show = sys.stderr.isatty()
    if not show:
        yield lambda: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("tuning {task.fields[what]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task("tune", total=total, what="candidates")
        yield lambda: progress.advance(task)


# Over 80 lines only by its 19 documented keyword arguments: the body is the module docstring's protocol, one
# step a call (check, items, encode, plan, score, choose, check by folds, configuration).
def tune(
    dev: StsTask | Sequence[Pair] | RetrievalDataset,
    *,
    models: Sequence[str] = (DEFAULT_MODEL,),
    poolings: Sequence[str] = ("last-avg",),
    fit_texts: Sequence[str] | None = None,
    test: StsTask | Sequence[Pair] | None = None,
    test_queries: Sequence[str] | None = None,
    transforms: Sequence[str] | None = None,
    encodings: Sequence[str] = ("float32",),
    metric: str | None = None,
    folds: int = 5,
    seed: int = 0,
    n_boot: int = 1000,
    max_bytes_per_vector: int | None = None,
    max_seconds: float | None = None,
    include_flow: bool = True,
    encoders: Mapping[str, Any] | None = None,
    encoder_options: Mapping[str, Any] | None = None,
    show_progress: bool | None = None,
) -> TuneResult:
    """Choose model, pooling, transform and encoding on labelled dev data; see the module docstring.

    Args:
        dev: scored sentence pairs (an StsTask: all its evaluated pairs; or a list of Pair), or a retrieval
            dataset (corpus, queries, graded qrels; its judged queries are the dev items).
        models, poolings: what to consider; the first model with the first pooling and no transform is the
            baseline every gain is measured against. A model may be a static encoder folder: it is tuned with
            its one pooling, ``static``, whatever ``poolings`` says (which then applies to the transformers
            models; ``static`` in it is for the static folders only).
        fit_texts: unlabelled text every transform is fitted on. Default: the sentences of the dev (and test)
            pairs, or the corpus for retrieval.
        test: separate scored pairs to report the choice on (STS). ``test_queries``: query ids of ``dev`` held
            out as test (retrieval). Without test data the choice is checked by ``folds``-fold over the dev items.
        transforms: transform specs (default: :func:`whitevec.tuning.space.default_transforms`; ``none`` is
            always added). ``encodings``: index encoding specs (:func:`whitevec.index.encodings.parse_encoding`;
            ``float32`` is always added), or ``all``: every spec
            :func:`whitevec.index.encodings.list_encodings` gives each transform's output dimension.
        metric: ``spearman`` for pairs; ``ndcg@10`` (default), ``recall@K``, ``mrr@K`` or ``map`` for retrieval.
        max_bytes_per_vector: only candidates whose code bytes per vector fit are fitted and scored (and the
            baseline); BadInputError when none does.
        max_seconds: stop fitting further candidates once this many seconds have passed since the call began
            (encoding the texts included: a wall-clock budget for the whole run).
        encoders: model name -> an already made encoder (e.g. an :class:`whitevec.encoders.transformer.Encoder`);
        other
            models are loaded with ``encoder_options`` and closed afterwards.
        show_progress: None: a progress bar on a terminal only.

    Raises:
        ModelNotFoundError: a model (other than those of ``encoders``) cannot be found; before any loads.
        BadInputError: unknown metric, transform, encoding or pooling; constant gold scores; fewer than 2
            items; nonsensical folds, n_boot or budget. A warning (WhitevecWarning) when the dev data is small
            (< 50 pairs or < 10 queries): then ``none`` is kept unless a gain is significant even so.
    """
    started = time.perf_counter()
    kind = "retrieval" if isinstance(dev, RetrievalDataset) else "sts"
    metric_name = check_metric(metric, kind)
    specs = check_transforms(transforms) if transforms is not None else None
    encoding_names = check_encodings(encodings)
    if kind == "sts":
        check_pair_encodings(encoding_names)
    models, poolings = _check_options(models, poolings, encoders, encoder_options)
    model_poolings_ = model_poolings(models, poolings, encoders)
    _check_run_options(folds, n_boot, max_bytes_per_vector, max_seconds)
    items = _gather_items(kind, metric_name, dev, test, test_queries, fit_texts)
    notes = list(items.notes)
    for note in notes:
        warnings.warn(note, WhitevecWarning, stacklevel=2)
    vectors, known, info = _encode_texts(model_poolings_, items.texts, encoders, encoder_options, show_progress)
    unknown_texts = {model: int((~mask).sum()) for model, mask in known.items()}
    notes += [
        f"{count} of {len(items.texts)} texts have no token {model} knows: left out of the fits, scored as no "
        "meaning (similarity 0, a query ranking nothing, a document never found)"
        for model, count in unknown_texts.items()
        if count
    ]
    grid = _Grid(model_poolings_, specs, encoding_names, include_flow, max_bytes_per_vector)
    plan = _plan_candidates(grid, info, items, notes)
    box = _TimeBox(started, max_seconds)
    results, scored = _score_candidates(plan, vectors, known, info, items, box, show_progress)
    if box.cut:
        notes.append(f"{box.cut} candidates not scored: the time box of {max_seconds:g} s ran out")
    choice = _choose_on_dev(scored, items, n_boot, seed, max_bytes_per_vector)
    checks = [] if items.n_test else _check_by_folds(scored, items, folds, n_boot, seed, max_bytes_per_vector)
    config = _tuned_config(scored, choice, info, items, seed, n_boot)
    result = TuneResult(
        kind=kind,
        metric=metric_name,
        n_dev=items.n_dev,
        n_test=items.n_test,
        n_fit=len(items.fit),
        seed=seed,
        n_boot=n_boot,
        folds=folds,
        max_bytes_per_vector=max_bytes_per_vector,
        candidates=results,
        config=config,
        checks=checks,
        notes=notes,
        unknown_texts=unknown_texts,
    )
    result.seconds = round(time.perf_counter() - started, 3)
    config.selection["check"] = result.check_summary()
    return result


# --- the steps of a run ----------------------------------------------------------------------------------------
def _check_options(
    models: Sequence[str],
    poolings: Sequence[str],
    encoders: Mapping[str, Any] | None,
    encoder_options: Mapping[str, Any] | None,
) -> tuple[list[str], list[str]]:
    """The models and poolings as lists of names; every model to load found (and the cache usable) before the
    first one loads."""
    model_names = [str(m) for m in models]
    pooling_names = [str(p) for p in poolings]
    if not model_names or not pooling_names:
        raise BadInputError("give at least one model and one pooling")
    for model in model_names:
        if model not in (encoders or {}):
            check_encoder(model, (encoder_options or {}).get("cache", True))
    return model_names, pooling_names


def _check_run_options(
    folds: int, n_boot: int, max_bytes_per_vector: int | None, max_seconds: float | None
) -> None:
    """The options of the choice and its check, refused before any model loads."""
    if folds < 2:
        raise BadInputError(f"folds must be at least 2, got {folds}")
    if n_boot < 100:
        raise BadInputError(f"n_boot must be at least 100 for a 95% interval, got {n_boot}")
    if max_bytes_per_vector is not None and max_bytes_per_vector < 1:
        raise BadInputError(f"max_bytes_per_vector must be a positive number of bytes, got {max_bytes_per_vector}")
    if max_seconds is not None and max_seconds <= 0:
        raise BadInputError(f"max_seconds must be positive, got {max_seconds}")


@dataclass
class _Items:
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
    dev_rows: _Rows = field(default_factory=lambda: _Rows())
    test_rows: _Rows | None = None
    fit_rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    scored_rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    stored_rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


def _gather_items(
    kind: str,
    metric: str,
    dev: Any,
    test: Any,
    test_queries: Sequence[str] | None,
    fit_texts: Sequence[str] | None,
) -> _Items:
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


def _sts_items(dev: Any, test: Any, fit_texts: Sequence[str] | None, metric: str) -> _Items:
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
    items = _Items("sts", metric, dev, texts, fit, len(dev_pairs), len(test_pairs), gold, test_gold)
    if items.n_dev < MIN_PAIRS:
        items.notes.append(
            f"only {items.n_dev} dev pairs (fewer than {MIN_PAIRS}): too few for a stable choice; none is kept "
            "unless a gain is significant even so"
        )
    return items


def _retrieval_items(
    dev: RetrievalDataset, test_queries: Sequence[str] | None, fit_texts: Sequence[str] | None, metric: str
) -> _Items:
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
    items = _Items("retrieval", metric, dev, texts, fit, len(dev_q), len(test_q))
    if items.n_dev < MIN_QUERIES:
        items.notes.append(
            f"only {items.n_dev} judged dev queries (fewer than {MIN_QUERIES}): too few for a stable choice; none "
            "is kept unless a gain is significant even so"
        )
    return items


def _encode_texts(
    model_poolings_: dict[str, list[str]],
    texts: list[str],
    encoders: Mapping[str, Any] | None,
    options: Mapping[str, Any] | None,
    show_progress: bool | None,
) -> tuple[dict[tuple[str, str], np.ndarray], dict[str, np.ndarray], dict[str, dict[str, Any]]]:
    """Every text encoded once per model, all its poolings from one pass: ``{(model, pooling): vectors}`` (zero
    rows for texts with no token the model knows), ``{model: known}`` (a bool per text, see
    :func:`whitevec.encoders.protocol.known_token_mask`), and each model's description (dimension, max_length,
    fingerprint) with its encode cost."""
    vectors: dict[tuple[str, str], np.ndarray] = {}
    known: dict[str, np.ndarray] = {}
    info: dict[str, dict[str, Any]] = {}
    for model, own in model_poolings_.items():
        given = (encoders or {}).get(model)
        encoder = given if given is not None else _make_encoder(model, own[0], options)
        try:
            for pooling in own:  # fail on a pooling the model cannot compute before encoding
                if hasattr(encoder, "with_pooling"):
                    encoder.with_pooling(pooling)
            found = _encode_poolings(encoder, texts, own, show_progress)
            known[model] = known_token_mask(encoder, texts)
            info[model] = {**encoder.describe(), "encode_ms_per_1000": encode_cost(encoder, texts)}
        finally:
            if given is None:
                encoder.close()
        for pooling in own:
            vectors[(model, pooling)] = zero_unknown_rows(found[pooling], known[model])
    return vectors, known, info


@dataclass
class _Grid:
    """What the user asked to consider: the axes of the candidate grid, and the budget."""

    poolings: dict[str, list[str]]  # model -> the poolings it is tuned with
    specs: list[str] | None  # None: each model's default transforms
    encodings: list[str]
    include_flow: bool
    budget: int | None  # max bytes per vector


@dataclass
class _Plan:
    """The candidates to score, baseline first, flow last; those the plan already knows it cannot score, with
    the reason (an encoding that cannot take the transform's output)."""

    candidates: list[Candidate]
    skipped: dict[Candidate, str]


def _plan_candidates(grid: _Grid, info: dict[str, dict[str, Any]], items: _Items, notes: list[str]) -> _Plan:
    """Every candidate of the grid, cheapest first and flow last (so a time box cuts the slow ones); those over
    the budget left out (the baseline excepted). Notes what was lowered, skipped or left out."""
    from whitevec.index.faiss_store import TRAIN_SAMPLE

    n_train = min(items.stored_rows.size, TRAIN_SAMPLE)
    plan: list[Candidate] = []
    skipped: dict[Candidate, str] = {}
    over_budget = 0
    for model, poolings in grid.poolings.items():
        dim = int(info[model]["dim"])
        specs = grid.specs
        if specs is None:
            specs = check_transforms(default_transforms(dim, include_flow=grid.include_flow))
        for spec in specs:
            check_transform_for_dim(spec, dim)
        for pooling in poolings:
            for spec in specs:
                out_dim = output_dim(spec, dim)
                for asked in _expand_encodings(grid.encodings, out_dim, searched=items.kind == "retrieval"):
                    try:
                        encoding, lowered = _effective_encoding(asked, out_dim, n_train)
                    except BadInputError as exc:
                        reason = str(exc).split("; ")[0]
                        skipped[Candidate(model, pooling, spec, asked)] = f"skipped: {_short(reason)}"
                        if str(exc) not in notes:
                            notes.append(str(exc))
                        plan.append(Candidate(model, pooling, spec, asked))
                        continue
                    if lowered and lowered not in notes:
                        notes.append(lowered)
                    baseline = not plan
                    if (
                        not baseline
                        and grid.budget is not None
                        and encoding_bytes(encoding, out_dim) > grid.budget
                    ):
                        over_budget += 1
                        continue
                    plan.append(Candidate(model, pooling, spec, encoding))
    plan = list(dict.fromkeys(plan))  # two asked encodings may come to the same one (pq96, pq96x5)
    _note_plan(plan, skipped, grid.budget, over_budget, notes)
    plan.sort(key=lambda c: c.family == "flow")  # stable: the order above otherwise
    return _Plan(plan, skipped)


def _note_plan(
    plan: list[Candidate], skipped: dict[Candidate, str], budget: int | None, over_budget: int, notes: list[str]
) -> None:
    """Refuse a budget no candidate fits; note the candidates left out or skipped."""
    if budget is not None:
        within = [c for c in plan[1:] if c not in skipped]
        if not within:
            raise BadInputError(
                f"no candidate fits in {budget} bytes per vector (the encodings' code bytes at each "
                "transform's output dimension); raise --max-bytes-per-vector, or add smaller encodings (sq4, pqM "
                "with a small M) or lower-dimensional transforms (whitening-K)"
            )
        if over_budget:
            notes.append(
                f"{over_budget} candidates over the budget of {budget} bytes per vector left out "
                "(none / float32 is scored as the baseline all the same)"
            )
    if skipped:
        notes.append(
            f"{len(skipped)} candidates skipped: their encoding does not fit the transform's output (above)"
        )


@dataclass
class _TimeBox:
    """``max_seconds`` from the start of the run: candidates with a transform are not fitted once it is spent."""

    started: float
    max_seconds: float | None
    cut: int = 0  # candidates left unscored because it ran out

    def spent(self, candidate: Candidate) -> bool:
        over = self.max_seconds is not None and time.perf_counter() - self.started > self.max_seconds
        return over and candidate.transform != "none"


def _score_candidates(
    plan: _Plan,
    vectors: dict[tuple[str, str], np.ndarray],
    known: dict[str, np.ndarray],
    info: dict[str, dict[str, Any]],
    items: _Items,
    box: _TimeBox,
    show_progress: bool | None,
) -> tuple[list[CandidateResult], list[_Scored]]:
    """One result row per planned candidate; the scored ones with their per-item scores (baseline first)."""
    results: list[CandidateResult] = []
    scored: list[_Scored] = []
    fits = _Fits()
    with _progress(show_progress, len(plan.candidates)) as advance:
        for candidate in plan.candidates:
            raw = vectors[(candidate.model, candidate.pooling)]
            dim = output_dim(candidate.transform, raw.shape[1])
            result = CandidateResult(
                candidate.model,
                candidate.pooling,
                candidate.transform,
                candidate.encoding,
                dim,
                encoding_bytes(candidate.encoding, dim),
            )
            result.encode_ms_per_1000 = info[candidate.model]["encode_ms_per_1000"]
            result.disk_bytes_per_vector = encoding_disk_bytes(candidate.encoding, dim)
            results.append(result)
            if candidate in plan.skipped:
                result.status = plan.skipped[candidate]
            elif box.spent(candidate):
                result.status = f"skipped: time box of {box.max_seconds:g} s spent"
                box.cut += 1
            else:
                try:
                    scored.append(_score_candidate(candidate, result, raw, items, fits, known[candidate.model]))
                except BadInputError as exc:
                    result.status = f"failed: {exc}"
            advance()
    if not scored or scored[0].result is not results[0]:
        raise BadInputError("the baseline (no transform) could not be scored")
    return results, scored


@dataclass
class _Fits:
    """Fits reused across candidates: one whitening (or All-but-the-Top) fit per model and pooling serves all
    its variants, and the transformed vectors of one transform serve each of its encodings."""

    shared: dict[tuple[str, str, str], tuple[Transform, float]] = field(default_factory=dict)
    last_space: dict[tuple[str, str, str], tuple[np.ndarray, float]] = field(default_factory=dict)


def _score_candidate(
    candidate: Candidate, result: CandidateResult, raw: np.ndarray, items: _Items, fits: _Fits, known: np.ndarray
) -> _Scored:
    """Fit (or reuse) the candidate's transform, store the vectors with its encoding, score every item. Texts
    with no token the model knows (``known`` False) stay out of the fit and the codes' training, and keep zero
    vectors."""
    from whitevec.index.faiss_store import encoded_vectors

    key = (candidate.model, candidate.pooling, candidate.transform)
    if key not in fits.last_space:
        fits.last_space.clear()
        fit_rows = items.fit_rows[known[items.fit_rows]]
        space, seconds = _fit_apply(candidate, raw, fit_rows, items.scored_rows, fits.shared)
        fits.last_space[key] = zero_unknown_rows(space, known), seconds
    space, result.fit_seconds = fits.last_space[key]
    coded = time.perf_counter()
    searched = parse_encoding(candidate.encoding).scoring == "search"  # coded in the scoring
    stored_rows = items.stored_rows[known[items.stored_rows]]
    stored = (
        space if searched else zero_unknown_rows(encoded_vectors(space, candidate.encoding, stored_rows), known)
    )
    result.fit_seconds += time.perf_counter() - coded
    dev_items, test_items = _item_scores(
        items.kind, stored, items.dev_rows, items.test_rows, items.data, items.metric, candidate.encoding, known
    )
    return _Scored(result, dev_items, test_items)


def _choose_on_dev(scored: list[_Scored], items: _Items, n_boot: int, seed: int, budget: int | None) -> int:
    """The choice on all dev items (index into ``scored``), marked; every candidate's gain recorded."""
    choice, gains = _choose(items.kind, scored, items.gold, np.arange(items.n_dev), n_boot, seed, budget)
    for s, g in zip(scored, gains, strict=True):
        s.result.dev, s.result.gain, s.result.low, s.result.high = g.score, g.gain, g.low, g.high
        s.result.bound, s.result.significant = g.bound, g.significant
        if s.test_items is not None:
            s.result.test = _statistic(items.kind, s.test_items, items.test_gold, np.arange(items.n_test))
    scored[choice].result.chosen = True
    return choice


def _check_by_folds(
    scored: list[_Scored], items: _Items, folds: int, n_boot: int, seed: int, budget: int | None
) -> list[FoldCheck]:
    """The procedure checked by k-fold over the dev items: chosen without each fold, scored on it beside raw
    (each candidate's fold scores recorded too)."""
    kind, gold, n_dev = items.kind, items.gold, items.n_dev
    checks: list[FoldCheck] = []
    fold_of = _fold_ids(n_dev, min(folds, n_dev), seed)
    for fold in range(min(folds, n_dev)):
        inside, held_out = np.flatnonzero(fold_of != fold), np.flatnonzero(fold_of == fold)
        if inside.size < 2 or held_out.size < 2:
            continue
        if kind == "sts" and (np.ptp(gold[inside]) == 0 or np.ptp(gold[held_out]) == 0):  # type: ignore[index]
            continue
        pick, _ = _choose(kind, scored, gold, inside, n_boot, seed + 1 + fold, budget)
        for s in scored:
            s.result.folds.append(_statistic(kind, s.dev_items, gold, held_out))
        checks.append(
            FoldCheck(
                fold,
                int(held_out.size),
                scored[pick].result.candidate.label,
                _statistic(kind, scored[0].dev_items, gold, held_out),
                _statistic(kind, scored[pick].dev_items, gold, held_out),
            )
        )
    return checks


def _tuned_config(
    scored: list[_Scored], choice: int, info: dict[str, dict[str, Any]], items: _Items, seed: int, n_boot: int
) -> TunedConfig:
    """The chosen candidate as a configuration ``index build --config`` and ``apply_config`` read."""
    chosen = scored[choice].result
    model_info = info[chosen.model]
    return TunedConfig(
        model=chosen.model,
        pooling=chosen.pooling,
        transform=chosen.transform,
        encoding=chosen.encoding,
        dim=chosen.dim,
        bytes_per_vector=chosen.bytes_per_vector,
        disk_bytes_per_vector=chosen.disk_bytes_per_vector,
        metric=items.metric,
        max_length=_max_length(model_info),
        model_fingerprint=model_info.get("model_fingerprint"),
        fit_on=f"{len(items.fit)} unlabelled texts",
        selection={
            "dev_score": chosen.dev,
            "baseline_dev_score": scored[0].result.dev,
            "gain": chosen.gain,
            "ci95": [chosen.low, chosen.high],
            "significant": chosen.significant,
            "n_dev": items.n_dev,
            "n_candidates": len(scored),
            "seed": seed,
            "n_boot": n_boot,
        },
    )


def _max_length(info: Mapping[str, Any]) -> int | None:
    """The encoder's token limit for the configuration: None only for a static folder without one."""
    value = info.get("max_length", 512)
    return None if value is None else int(value)


def _expand_encodings(names: Sequence[str], dim: int, *, searched: bool = True) -> list[str]:
    """The encoding specs to try at output dimension ``dim``: ``all`` becomes every spec
    :func:`whitevec.index.encodings.list_encodings` gives (the budget is applied afterwards, to the bytes of the
    encoding the index would really use), without those only a search scores unless ``searched`` (retrieval);
    float32 stays first."""
    from whitevec.index.encodings import list_encodings

    out: list[str] = []
    for name in names:
        if name == ALL_ENCODINGS:
            out += [e for e in list_encodings(dim) if searched or parse_encoding(e).scoring != "search"]
        else:
            out.append(name)
    return list(dict.fromkeys(["float32", *out]))


def _short(reason: str) -> str:
    """A table-sized reason: ``pq48: PQ with M=48 sub-quantizers needs M to divide the dimension d=128`` ->
    ``M=48 does not divide d=128``."""
    match = re.search(r"M=(\d+) sub-quantizers needs M to divide the dimension d=(\d+)", reason)
    if match:
        return f"M={match.group(1)} does not divide d={match.group(2)}"
    match = re.search(r"needs at least (\d+) training vectors", reason)
    return f"needs {match.group(1)} training vectors" if match else reason


def _effective_encoding(spec: str, dim: int, n_train: int) -> tuple[str, str | None]:
    """The encoding a flat index of ``n_train`` training vectors would store at dimension ``dim`` (PQ bits lowered
    when too few train it, :func:`whitevec.index.encodings.fit_to_training`), and the note saying so; BadInputError
    when the encoding cannot take ``dim`` (PQ's M must divide it) or has too few training vectors at all."""
    from whitevec.index.encodings import fit_to_training, parse_encoding

    encoding = parse_encoding(spec)
    encoding.check_dim(dim)
    used, _, notes = fit_to_training(encoding, "flat", {}, n_train)
    if n_train < used.min_training(dim):
        raise BadInputError(
            f"{used.spec} needs at least {used.min_training(dim)} training vectors at d={dim}; got {n_train}"
        )
    return used.spec, ("; ".join(notes) if notes else None)


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


def _make_encoder(model: str, pooling: str, options: Mapping[str, Any] | None) -> Any:
    from whitevec.encoders.loading import load_encoder

    return load_encoder(model, pooling, **dict(options or {}))


@dataclass
class _Rows:
    left: np.ndarray | None = None  # STS: rows of sentence1 / sentence2
    right: np.ndarray | None = None
    docs: np.ndarray | None = None  # retrieval: rows of the documents / queries
    queries: np.ndarray | None = None
    qrels: list[Mapping[str, int]] = field(default_factory=list)


def _item_rows(
    kind: str,
    dev: Any,
    test: Any,
    test_queries: Sequence[str] | None,
    row_of: dict[str, int],
) -> tuple[_Rows, _Rows | None]:
    if kind == "sts":

        def rows(pairs: list[Pair]) -> _Rows:
            return _Rows(
                left=np.array([row_of[p.sentence1] for p in pairs], dtype=np.int64),
                right=np.array([row_of[p.sentence2] for p in pairs], dtype=np.int64),
            )

        return rows(_pairs(dev, "dev")), (rows(_pairs(test, "test")) if test is not None else None)
    judged = dev.judged_queries()
    held = set(test_queries or ())
    docs = np.array([row_of[d.text] for d in dev.corpus], dtype=np.int64)

    def query_rows(ids: list[str]) -> _Rows:
        return _Rows(
            docs=docs,
            queries=np.array([row_of[judged[q]] for q in ids], dtype=np.int64),
            qrels=[dev.qrels[q] for q in ids],
        )

    dev_rows = query_rows([q for q in judged if q not in held])
    test_ids = [q for q in judged if q in held]
    return dev_rows, (query_rows(test_ids) if test_ids else None)


def _scored_rows(dev: _Rows, test: _Rows | None) -> tuple[np.ndarray, np.ndarray]:
    """(every row an item reads, the rows an index would store: the documents; for pairs, all of them)."""
    parts = [
        r for rows in (dev, test) if rows is not None for r in (rows.left, rows.right, rows.docs, rows.queries)
    ]
    scored = np.unique(np.concatenate([r for r in parts if r is not None]))
    # The documents in corpus order, a repeated text as often as the index would hold it (training sees it so).
    stored = dev.docs if dev.docs is not None else scored
    return scored, stored


def _item_scores(
    kind: str,
    space: np.ndarray,
    dev: _Rows,
    test: _Rows | None,
    data: Any,
    metric: str,
    encoding: str,
    known: np.ndarray,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Each item's score; a pair with a text the model knows no token of scores 0 (its zero vector), a query
    without one 0, and a document without one is not ranked."""
    searchable = known[dev.docs] if dev.docs is not None else None
    if searchable is not None and not searchable.any():
        raise BadInputError("no document has a token the model knows; nothing to rank")

    def score(rows: _Rows) -> np.ndarray:
        if kind == "sts":
            assert rows.left is not None and rows.right is not None
            return cosine_rows(space[rows.left], space[rows.right])
        assert rows.docs is not None and rows.queries is not None and searchable is not None
        doc_ids = [d.id for d, ok in zip(data.corpus, searchable, strict=True) if ok]
        out = _per_query_scores(
            space[rows.docs[searchable]], space[rows.queries], doc_ids, rows.qrels, metric, encoding
        )
        out[~known[rows.queries]] = 0.0
        return out

    return score(dev), (score(test) if test is not None else None)


def _fit_apply(
    candidate: Candidate,
    raw: np.ndarray,
    fit_rows: np.ndarray,
    scored_rows: np.ndarray,
    shared: dict[tuple[str, str, str], tuple[Transform, float]],
) -> tuple[np.ndarray, float]:
    """Fit the candidate's transform on the fit rows and apply it to the rows the items score (other rows stay
    0); (vectors, seconds)."""
    transform: Transform | None = make_transform(candidate.transform)
    if transform is None:
        return raw, 0.0
    started = time.perf_counter()
    fitted: Transform
    seconds = 0.0
    with warnings.catch_warnings():
        # Floored eigenvalues (near-singular covariance): the candidate just scores what it scores.
        warnings.simplefilter("ignore", WhitevecWarning)
        if isinstance(transform, Whitening) or (
            isinstance(transform, AllButTheTop)
            and _abtt_d(transform, raw.shape[1]) <= min(_ABTT_SHARED, raw.shape[1])
        ):
            # One fit per model and pooling serves every variant, exactly: whitening's k, beta and gamma are read
            # when it is applied, and All-but-the-Top's D directions are the first D of the largest D's fit.
            kind = type(transform).__name__
            key = (candidate.model, candidate.pooling, kind)
            if key not in shared:
                base: Transform = (
                    Whitening() if kind == "Whitening" else AllButTheTop(n_remove=min(_ABTT_SHARED, raw.shape[1]))
                )
                base.fit(raw[fit_rows])
                shared[key] = (base, time.perf_counter() - started)
                started = time.perf_counter()
            base, seconds = shared[key]
            if isinstance(transform, Whitening):
                fitted = copy.copy(base)
                fitted.set_params(**transform.get_params(deep=False))
            else:
                fitted = _abtt_from(base, transform)  # type: ignore[arg-type]
        else:
            fitted = transform.fit(raw[fit_rows])
        applied = np.asarray(fitted.transform(raw[scored_rows]), dtype=np.float32)
    out = np.zeros((raw.shape[0], applied.shape[1]), dtype=np.float32)
    out[scored_rows] = applied
    return out, seconds + time.perf_counter() - started


# All-but-the-Top variants are cut from one fit removing this many directions (the grid's largest D).
_ABTT_SHARED = 8


def _abtt_d(transform: AllButTheTop, dim: int) -> int:
    """The number of directions ``transform`` removes from vectors of dimension ``dim`` (its default rule)."""
    return int(transform.n_remove) if transform.n_remove is not None else max(1, round(dim / 100))


def _abtt_from(base: AllButTheTop, wanted: AllButTheTop) -> AllButTheTop:
    """``wanted`` (an unfitted AllButTheTop) fitted by taking the first D of ``base``'s directions, which is what
    its own fit would compute (the same eigendecomposition of the same scatter)."""
    D = _abtt_d(wanted, base.n_features_in_)
    out = AllButTheTop(n_remove=wanted.n_remove)
    out.n_features_in_, out.n_remove_ = base.n_features_in_, int(D)
    out.mean_, out.directions_ = base.mean_, np.ascontiguousarray(base.directions_[:D])
    return out
