"""The measuring run: encode the sentences (or take vectors already made), fit each transform, take every
anisotropy measure of each space, and return them as one :class:`~whitevec.diagnostics.results.DiagnosticsReport`.

Protocol: each transform is fitted on the diagnosed sentences themselves (the "target" protocol of BERT-flow
and BERT-whitening) and the measures are taken on those same sentences after the transform.

:func:`diagnose_encoder` starts from a model and sentences, :func:`diagnose_vectors` from vectors already made;
both hand their spaces to one measuring core, :func:`_measure_spaces`. :func:`diagnose` takes either.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from whitevec.datasets import Pair, StsTask
from whitevec.diagnostics.frequency import DEFAULT_BUCKETS, DEFAULT_MIN_TYPES, frequency_link
from whitevec.diagnostics.metrics import (
    DEFAULT_PAIRS,
    DEFAULT_SEED,
    alignment_uniformity,
    check_matrix,
    cosine_stats,
    isoscore,
    isotropy_mu,
    spectrum,
)
from whitevec.diagnostics.results import DiagnosticsReport, KSweep, SpaceReport
from whitevec.encoders.static import StaticEncoder
from whitevec.errors import BadInputError
from whitevec.evaluation.sts import score_pairs
from whitevec.preflight import not_one_string
from whitevec.transforms import Transform, Whitening, make_transform

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder

SWEEP_K = (8, 16, 32, 64, 128, 256)
POSITIVE_SCORE = 4.0
MAX_PROJECTED = 3000


def _unique(texts: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(t.strip() for t in texts if isinstance(t, str) and t.strip()))


def _projection(X: np.ndarray, seed: int) -> np.ndarray:
    """Coordinates of (at most MAX_PROJECTED of) the rows on the top two eigenvectors of ``X^T X``.

    Uncentred PCA on purpose: the directions are those I(W) uses, and a common offset of the vectors (the cone)
    shows as a cloud far from the origin at (0, 0); centred PCA would move every cloud onto the origin.
    """
    rows = X
    if len(X) > MAX_PROJECTED:
        rows = X[np.sort(np.random.default_rng(seed).choice(len(X), MAX_PROJECTED, replace=False))]
    _, eigenvectors = np.linalg.eigh(X.T @ X)
    axes = eigenvectors[:, ::-1][:, :2]
    # Fix the signs so the bulk of the cloud lies on the positive side: stable plots across runs.
    signs = np.where((rows @ axes).mean(axis=0) < 0, -1.0, 1.0)
    return np.asarray(rows @ (axes * signs))


def _filtered_task(task: StsTask, keep: set[str]) -> StsTask | None:
    """The task's evaluated subsets restricted to pairs whose two sentences are in ``keep``."""
    subsets = {
        name: [p for p in pairs if p.sentence1.strip() in keep and p.sentence2.strip() in keep]
        for name, pairs in task.subsets.items()
    }
    subsets = {name: pairs for name, pairs in subsets.items() if len(pairs) >= 2}
    if not subsets:
        return None
    return StsTask(task.name, subsets, task.splits, source=task.source, variant=task.variant)


def _positive_pairs(task: StsTask, keep: set[str] | None) -> list[Pair]:
    seen: set[tuple[str, str]] = set()
    out = []
    for pairs in [*task.splits.values(), *task.subsets.values()]:
        for p in pairs:
            a, b = p.sentence1.strip(), p.sentence2.strip()
            if p.score >= POSITIVE_SCORE and (keep is None or (a in keep and b in keep)) and (a, b) not in seen:
                seen.add((a, b))
                out.append(p)
    return out


def _sts_all(task: StsTask, space: np.ndarray, row_of: Mapping[str, int]) -> float:
    def vectors_of(sentences: list[str]) -> np.ndarray:
        return space[[row_of[s.strip()] for s in sentences]]

    return score_pairs(task, vectors_of)[1]


def _measure(
    label: str,
    space: np.ndarray,
    fit_rows: np.ndarray,
    row_of: Mapping[str, int],
    eval_task: StsTask | None,
    positives: Sequence[Pair],
    fit_seconds: float,
    max_pairs: int,
    seed: int,
) -> SpaceReport:
    X = check_matrix(space[fit_rows], f"vectors after {label!r}")
    au = None
    if positives:
        left = space[[row_of[p.sentence1.strip()] for p in positives]]
        right = space[[row_of[p.sentence2.strip()] for p in positives]]
        au = alignment_uniformity(left, right, vectors=X, max_pairs=max(max_pairs, 1), seed=seed)
    return SpaceReport(
        transform=label,
        n_vectors=X.shape[0],
        dim=X.shape[1],
        fit_seconds=fit_seconds,
        cosine=cosine_stats(X, max_pairs=max_pairs, seed=seed),
        spectrum=spectrum(X),
        isotropy=isotropy_mu(X),
        isoscore=isoscore(X),
        alignment_uniformity=au,
        sts_spearman=None if eval_task is None else _sts_all(eval_task, space, row_of),
        projection=_projection(X, seed),
    )


def _measure_spaces(
    spaces: Mapping[str, tuple[np.ndarray, float]],
    raw: np.ndarray | None,
    fit_rows: np.ndarray,
    row_of: Mapping[str, int],
    keep: set[str],
    task: StsTask | None,
    sweep_k: Sequence[int] | None,
    max_pairs: int,
    seed: int,
    notes: dict[str, str],
) -> tuple[list[SpaceReport], KSweep | None]:
    """Measure each space ``{label: (vectors, fit seconds)}`` on its rows ``fit_rows``, and the k sweep.

    ``row_of`` maps a (stripped) sentence to its row in every space; ``keep`` holds the sentences whose pairs
    may be scored; ``raw`` is the untransformed vectors the whitening k sweep is fitted on (None: no sweep).
    Why a part is missing goes into ``notes``.
    """
    eval_task = None
    positives: list[Pair] = []
    if task is not None:
        eval_task = _filtered_task(task, keep)
        positives = _positive_pairs(task, keep)
        if eval_task is None:
            notes["sts"] = "no evaluated pair has both sentences among the diagnosed ones: no STS scores"
        if not positives:
            notes["alignment"] = (
                f"no pair scored >= {POSITIVE_SCORE:g} among the diagnosed sentences: no alignment/uniformity"
            )
    else:
        notes["alignment"] = "alignment/uniformity need positive pairs: give an STS task"

    reports = [
        _measure(name, space, fit_rows, row_of, eval_task, positives, secs, max_pairs, seed)
        for name, (space, secs) in spaces.items()
    ]

    sweep = None
    if eval_task is None:
        notes["sweep"] = (
            "STS Spearman against whitening k needs a task with gold scores (--task); skipped for a plain corpus"
            if task is None
            else notes.get("sts", "no evaluable pairs")
        )
    elif raw is None:
        notes["sweep"] = "the k sweep needs the raw vectors (label 'none')"
    elif sweep_k:
        dim = raw.shape[1]
        ks = sorted({k for k in sweep_k if 0 < k < dim and k < len(fit_rows)} | {dim})
        with warnings.catch_warnings():
            # Near-zero eigenvalues floored: expected when there are fewer sentences than dimensions.
            warnings.simplefilter("ignore")
            whitened = np.asarray(Whitening().fit(raw[fit_rows]).transform(raw))
        # Whitening keeping k components is the first k columns of full whitening (eigenvalues descending),
        # so one fit serves the whole sweep.
        scores = [_sts_all(eval_task, whitened[:, :k], row_of) for k in ks]
        reference = {r.transform: r.sts_spearman for r in reports if r.sts_spearman is not None}
        sweep = KSweep(eval_task.name, eval_task.n_pairs, ks, scores, reference)
    return reports, sweep


def _texts_to_diagnose(
    texts: Sequence[str] | None, task: StsTask | None, max_sentences: int | None
) -> Sequence[str] | None:
    """``texts``, else (with a task) its evaluated pairs' sentences then the rest of its sentences, so that a
    ``max_sentences`` cut keeps evaluable pairs; None when neither is given."""
    if max_sentences is not None and max_sentences < 2:
        raise BadInputError(f"max_sentences must be at least 2, got {max_sentences}")
    if texts is None and task is not None:
        texts = _unique([*task.evaluated_sentences(), *task.sentences("target")])
    return None if texts is None else not_one_string(texts)


def _settings(labels: Sequence[str], max_sentences: int | None, max_pairs: int, seed: int) -> dict[str, Any]:
    return {
        "transforms": list(labels),
        "max_sentences": max_sentences,
        "max_pairs": max_pairs,
        "seed": seed,
        "fit_on": "the diagnosed sentences (target protocol)",
        "positive_score": POSITIVE_SCORE,
    }


def _source_label(given: str | None, task: StsTask | None, default: str) -> str:
    if given:
        return given
    return default if task is None else f"task {task.name}"


def diagnose_encoder(
    encoder: AnyEncoder,
    texts: Sequence[str] | None = None,
    *,
    task: StsTask | None = None,
    transforms: Sequence[str] = ("none", "whitening"),
    max_sentences: int | None = None,
    sweep_k: Sequence[int] | None = SWEEP_K,
    frequency: bool = True,
    n_buckets: int = DEFAULT_BUCKETS,
    min_types_per_bucket: int = DEFAULT_MIN_TYPES,
    max_pairs: int = DEFAULT_PAIRS,
    seed: int = DEFAULT_SEED,
    source_label: str | None = None,
    show_progress: bool | None = None,
    make: Callable[[str], Transform | None] = make_transform,
) -> DiagnosticsReport:
    """Encode sentences, fit each transform on them, and measure anisotropy raw and per transform.

    Args:
        encoder: the model and pooling whose sentence vectors are diagnosed.
        texts: the sentences to diagnose. Default with a ``task``: its evaluated pairs' sentences, then the
            rest of its sentences (all splits), so a ``max_sentences`` cut keeps evaluable pairs.
        task: an STS task: enables alignment/uniformity (pairs scored >= 4), STS Spearman per transform and the
            whitening k sweep.
        transforms: transform specs (see ``make_transform``), each fitted on the diagnosed sentences.
        max_sentences: keep the first N unique sentences; pairs are then limited to those whose two sentences
            are kept (so at most N sentences are encoded).
        sweep_k: whitening sizes k for the sweep (those <= dim and < number of sentences are used, plus dim).
        frequency: compute the token frequency link.
        n_buckets, min_types_per_bucket: frequency buckets, see :mod:`whitevec.diagnostics.frequency`.
        max_pairs, seed: random pairs for the cosine statistics and uniformity.
        source_label: what the sentences are, for the report (default: the task, else "texts").

    Raises:
        BadInputError: no texts and no task, fewer than two sentences, NaN or constant vectors, a bad spec.
    """
    notes: dict[str, str] = {}
    fit_texts, keep = _sentences(texts, task, max_sentences, notes)
    for spec in transforms:
        make(spec)  # reject a bad spec before encoding
    # Without a cut, the task's pairs are encoded too (beyond the texts) so that every pair can be scored.
    extra: list[str] = []
    if task is not None and keep is None:
        extra = task.evaluated_sentences()
        extra += [s for p in _positive_pairs(task, keep) for s in (p.sentence1, p.sentence2)]
    every = _unique([*fit_texts, *extra])
    raw = encoder.encode(every, show_progress=show_progress)
    row_of = {t: i for i, t in enumerate(every)}
    fit_rows = np.arange(len(fit_texts))
    check_matrix(raw[fit_rows], "raw sentence vectors")
    spaces, curves = _fit_spaces(raw, fit_rows, transforms, make)
    scored = keep if keep is not None else set(row_of)
    reports, sweep = _measure_spaces(spaces, raw, fit_rows, row_of, scored, task, sweep_k, max_pairs, seed, notes)
    for each in reports:
        each.loss_curve = curves.get(each.transform)
    freq = None
    if not frequency:
        notes["frequency"] = "frequency link not computed (turned off)"
    elif isinstance(encoder, StaticEncoder):
        notes["frequency"] = (
            "frequency link not computed: it needs a transformers model's contextual token vectors, and a static "
            "encoder folder has none"
        )
    else:
        freq = frequency_link(encoder, fit_texts, n_buckets, min_types_per_bucket)
        if not freq.buckets_ok:
            notes["frequency"] = freq.message
    return DiagnosticsReport(
        encoder.describe(),
        _source_label(source_label, task, "texts"),
        len(fit_rows),
        reports,
        freq,
        sweep,
        notes,
        _settings(transforms, max_sentences, max_pairs, seed),
    )


def _sentences(
    texts: Sequence[str] | None, task: StsTask | None, max_sentences: int | None, notes: dict[str, str]
) -> tuple[list[str], set[str] | None]:
    """The distinct sentences to diagnose (the transforms are fitted on them), and, under a ``max_sentences``
    cut, the set that pairs must stay within (None: no cut)."""
    chosen = _texts_to_diagnose(texts, task, max_sentences)
    if chosen is None:
        raise BadInputError("diagnose needs texts or an STS task to take sentences from")
    fit_texts = _unique(chosen)
    if max_sentences is not None and len(fit_texts) > max_sentences:
        fit_texts = fit_texts[:max_sentences]
        notes["sentences"] = f"limited to the first {max_sentences} sentences"
    if len(fit_texts) < 2:
        raise BadInputError(f"diagnose needs at least two distinct non-empty texts, got {len(fit_texts)}")
    return fit_texts, (set(fit_texts) if max_sentences is not None else None)


def _fit_spaces(
    raw: np.ndarray, fit_rows: np.ndarray, transforms: Sequence[str], make: Callable[[str], Transform | None]
) -> tuple[dict[str, tuple[np.ndarray, float]], dict[str, np.ndarray]]:
    """Each transform fitted on the fit rows and applied to every row: ``{spec: (vectors, fit seconds)}``, and
    the loss curves of those that keep one (a Flow's ``history_``)."""
    spaces: dict[str, tuple[np.ndarray, float]] = {}
    curves: dict[str, np.ndarray] = {}
    for spec in transforms:
        transform = make(spec)
        started = time.perf_counter()
        if transform is None:
            spaces[spec] = (raw, 0.0)
            continue
        transform.fit(raw[fit_rows])
        spaces[spec] = (np.asarray(transform.transform(raw)), time.perf_counter() - started)
        history = getattr(transform, "history_", None)
        if isinstance(history, np.ndarray) and history.size:
            curves[spec] = history
    return spaces, curves


def diagnose_vectors(
    vectors: Mapping[str, Any],
    texts: Sequence[str] | None = None,
    *,
    task: StsTask | None = None,
    max_sentences: int | None = None,
    sweep_k: Sequence[int] | None = SWEEP_K,
    max_pairs: int = DEFAULT_PAIRS,
    seed: int = DEFAULT_SEED,
    source_label: str | None = None,
) -> DiagnosticsReport:
    """Measure anisotropy of vectors already made (and already transformed): ``{label: matrix}``.

    Args:
        vectors: one matrix per space, rows aligned across them (and with ``texts`` when texts are given);
            ``"none"`` (or ``"raw"``) names the untransformed vectors, which the whitening k sweep is fitted on.
        texts: the sentences of the rows; default with a ``task``: its sentences in :func:`diagnose_encoder`'s
            order. Needed for anything that pairs sentences (STS, alignment/uniformity, the k sweep).
        task: an STS task, as for :func:`diagnose_encoder`.
        max_sentences: measure only the first N rows.
        sweep_k, max_pairs, seed, source_label: as for :func:`diagnose_encoder` (label default "vectors").

    The frequency link is not computed: it needs the model's tokenizer.

    Raises:
        BadInputError: no vectors, texts that do not match the row counts, fewer than two rows, NaN.
    """
    texts = _texts_to_diagnose(texts, task, max_sentences)
    if not vectors:
        raise BadInputError("diagnose got an empty mapping of vectors; give at least one {label: matrix}")
    arrays = {str(k): check_matrix(v, f"vectors {k!r}", allow_constant=True) for k, v in vectors.items()}
    n_rows = {len(a) for a in arrays.values()}
    fit_texts: list[str] = []
    if texts is not None:
        fit_texts = [t.strip() for t in texts]
        if n_rows != {len(fit_texts)}:
            raise BadInputError(f"{len(fit_texts)} texts for vectors with row counts {sorted(n_rows)}")
    n = max(n_rows)
    stop = min(n, max_sentences) if max_sentences is not None else n
    fit_rows = np.arange(stop)
    row_of = {t: i for i, t in enumerate(fit_texts[:stop])}
    notes: dict[str, str] = {}
    reports, sweep = _measure_spaces(
        {label: (array, 0.0) for label, array in arrays.items()},
        arrays["none"] if "none" in arrays else arrays.get("raw"),
        fit_rows,
        row_of,
        set(row_of),
        task,
        sweep_k,
        max_pairs,
        seed,
        notes,
    )
    notes["frequency"] = "the frequency link needs the model and its tokenizer: pass an Encoder"
    return DiagnosticsReport(
        {},
        _source_label(source_label, task, "vectors"),
        len(fit_rows),
        reports,
        None,
        sweep,
        notes,
        _settings(list(arrays), max_sentences, max_pairs, seed),
    )


def diagnose(
    source: AnyEncoder | Mapping[str, Any],
    texts: Sequence[str] | None = None,
    *,
    task: StsTask | None = None,
    transforms: Sequence[str] = ("none", "whitening"),
    max_sentences: int | None = None,
    sweep_k: Sequence[int] | None = SWEEP_K,
    frequency: bool = True,
    n_buckets: int = DEFAULT_BUCKETS,
    min_types_per_bucket: int = DEFAULT_MIN_TYPES,
    max_pairs: int = DEFAULT_PAIRS,
    seed: int = DEFAULT_SEED,
    source_label: str | None = None,
    show_progress: bool | None = None,
    make: Callable[[str], Transform | None] = make_transform,
) -> DiagnosticsReport:
    """Measure anisotropy of sentence vectors raw and under each transform; see the module docstring.

    ``source`` is an :class:`~whitevec.encoders.transformer.Encoder` (see :func:`diagnose_encoder`: texts are
    encoded and each
    spec in ``transforms`` is fitted on them) or a mapping ``{label: matrix}`` of vectors already transformed
    (see :func:`diagnose_vectors`; ``transforms``, the frequency options, ``show_progress`` and ``make`` apply
    to an Encoder only).
    """
    if isinstance(source, Mapping):
        return diagnose_vectors(
            source,
            texts,
            task=task,
            max_sentences=max_sentences,
            sweep_k=sweep_k,
            max_pairs=max_pairs,
            seed=seed,
            source_label=source_label,
        )
    return diagnose_encoder(
        source,
        texts,
        task=task,
        transforms=transforms,
        max_sentences=max_sentences,
        sweep_k=sweep_k,
        frequency=frequency,
        n_buckets=n_buckets,
        min_types_per_bucket=min_types_per_bucket,
        max_pairs=max_pairs,
        seed=seed,
        source_label=source_label,
        show_progress=show_progress,
        make=make,
    )
