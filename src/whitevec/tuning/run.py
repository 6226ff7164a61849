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
   (:func:`whitevec.index.faiss.encoded.encoded_vectors`): a flat FAISS store
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
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from whitevec.datasets.retrieval import RetrievalDataset
from whitevec.datasets.sts import Pair, StsTask
from whitevec.encoders.models.resolution import DEFAULT_MODEL
from whitevec.encoders.protocol import known_token_mask, zero_unknown_rows
from whitevec.encoders.static import StaticEncoder
from whitevec.encoders.static_format import STATIC_POOLING
from whitevec.errors import BadInputError, WhitevecWarning
from whitevec.index.lexical.analyzers import DEFAULT_ANALYZER
from whitevec.index.search.fusion import DEFAULT_FUSION
from whitevec.preflight import check_encoder
from whitevec.tuning.choice import check_by_folds, choose_on_dev
from whitevec.tuning.config import TunedConfig, config_max_length
from whitevec.tuning.fits import Fits
from whitevec.tuning.items import Items, gather_items
from whitevec.tuning.planning import Grid, Plan, TimeBox, plan_candidates
from whitevec.tuning.results import CandidateResult, TuneResult
from whitevec.tuning.scoring import Scored, check_metric, score_candidate
from whitevec.tuning.searches import TUNE_FUSIONS, Searches, check_modes, check_tune_analyzer
from whitevec.tuning.space import (
    Candidate,
    check_encodings,
    check_pair_encodings,
    check_transforms,
    encoding_bytes,
    encoding_disk_bytes,
    output_dim,
)

# Texts timed once per model for its encode cost (encode_ms_per_1000).
ENCODE_COST_SAMPLE = 1000


# Over 60 lines only by its 19 keyword arguments and their documentation: the body is one call a step of the
# module docstring's protocol (check, items, encode, plan, score, choose and check by folds).
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
    modes: Sequence[str] | None = None,
    analyzer: str = DEFAULT_ANALYZER,
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
            always added). ``encodings``: index encoding specs
            (:func:`whitevec.index.encodings.spec.parse_encoding`; ``float32`` is always added), or ``all``: every
            spec :func:`whitevec.index.encodings.spec.list_encodings` gives each transform's output dimension.
        modes, analyzer: the search modes to tune and the BM25 analyzer (retrieval only; see
            :mod:`whitevec.tuning.searches`; None: all modes for retrieval data, ``dense`` for pairs).
        metric: ``spearman`` for pairs; ``ndcg@10`` (default), ``recall@K``, ``mrr@K`` or ``map`` for retrieval.
        max_bytes_per_vector: only candidates whose code bytes per vector fit are fitted and scored (and the
            baseline); BadInputError when none does.
        max_seconds: stop fitting further candidates once this many seconds have passed since the call began
            (encoding the texts included: a wall-clock budget for the whole run).
        encoders: model name -> an already made encoder (e.g. an :class:`whitevec.encoders.transformer.Encoder`);
            other models are loaded with ``encoder_options`` and closed afterwards.
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
    mode_names, analyzer_name = check_modes(modes, kind), check_tune_analyzer(analyzer)
    specs, encoding_names = _check_specs(kind, transforms, encodings)
    model_names, pooling_names = _check_options(models, poolings, encoders, encoder_options)
    asked = model_poolings(model_names, pooling_names, encoders)
    _check_run_options(folds, n_boot, max_bytes_per_vector, max_seconds)
    items = gather_items(kind, metric_name, dev, test, test_queries, fit_texts)
    notes = _warned(items.notes)
    vectors, known, info = _encode_texts(asked, items.texts, encoders, encoder_options, show_progress)
    unknown_texts = _note_unknown_texts(known, len(items.texts), notes)
    fusions = TUNE_FUSIONS if "hybrid" in mode_names else ()
    grid = Grid(asked, specs, encoding_names, include_flow, max_bytes_per_vector, mode_names, fusions)
    plan = plan_candidates(grid, info, items, notes)
    box = TimeBox(started, max_seconds)
    results, scored = _score_candidates(plan, vectors, known, info, items, box, show_progress, analyzer_name)
    if box.cut:
        notes.append(f"{box.cut} candidates not scored: the time box of {max_seconds:g} s ran out")
    result = _chosen(scored, results, items, info, notes, unknown_texts, folds, seed, n_boot, max_bytes_per_vector)
    result.config.analyzer = analyzer_name
    result.seconds = round(time.perf_counter() - started, 3)
    return result


# --- the steps of a run ----------------------------------------------------------------------------------------
def _check_specs(
    kind: str, transforms: Sequence[str] | None, encodings: Sequence[str]
) -> tuple[list[str] | None, list[str]]:
    """The transform specs (None: each model's defaults) and the encoding specs, checked before any model loads
    (pairs refuse the encodings only a search can score)."""
    specs = check_transforms(transforms) if transforms is not None else None
    encoding_names = check_encodings(encodings)
    if kind == "sts":
        check_pair_encodings(encoding_names)
    return specs, encoding_names


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


def _warned(notes: list[str]) -> list[str]:
    """``notes`` each warned (WhitevecWarning, at the caller of :func:`tune`), as a new list the run adds to."""
    for note in notes:
        warnings.warn(note, WhitevecWarning, stacklevel=3)
    return list(notes)


def _note_unknown_texts(known: dict[str, np.ndarray], n_texts: int, notes: list[str]) -> dict[str, int]:
    """Per model, how many texts have no token it knows (see :class:`TuneResult`), noted where there are any."""
    unknown_texts = {model: int((~mask).sum()) for model, mask in known.items()}
    notes += [
        f"{count} of {n_texts} texts have no token {model} knows: left out of the fits, scored as no "
        "meaning (similarity 0, a query ranking nothing, a document never found)"
        for model, count in unknown_texts.items()
        if count
    ]
    return unknown_texts


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


def _make_encoder(model: str, pooling: str, options: Mapping[str, Any] | None) -> Any:
    from whitevec.encoders.loading import load_encoder

    return load_encoder(model, pooling, **dict(options or {}))


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


def _score_candidates(
    plan: Plan,
    vectors: dict[tuple[str, str], np.ndarray],
    known: dict[str, np.ndarray],
    info: dict[str, dict[str, Any]],
    items: Items,
    box: TimeBox,
    show_progress: bool | None,
    analyzer: str = DEFAULT_ANALYZER,
) -> tuple[list[CandidateResult], list[Scored]]:
    """One result row per planned candidate; the scored ones with their per-item scores (baseline first)."""
    results: list[CandidateResult] = []
    scored: list[Scored] = []
    fits = Fits(searches=Searches(analyzer))
    with _progress(show_progress, len(plan.candidates)) as advance:
        for candidate in plan.candidates:
            raw = vectors[(candidate.model, candidate.pooling)]
            result = _result_row(candidate, raw.shape[1], info[candidate.model])
            results.append(result)
            if candidate in plan.skipped:
                result.status = plan.skipped[candidate]
            elif box.spent(candidate):
                result.status = f"skipped: time box of {box.max_seconds:g} s spent"
                box.cut += 1
            else:
                try:
                    scored.append(score_candidate(candidate, result, raw, items, fits, known[candidate.model]))
                except BadInputError as exc:
                    result.status = f"failed: {exc}"
            advance()
    if not scored or scored[0].result is not results[0]:
        raise BadInputError("the baseline (no transform) could not be scored")
    return results, scored


def _result_row(candidate: Candidate, model_dim: int, model_info: Mapping[str, Any]) -> CandidateResult:
    """A candidate's row before it is scored: output dimension, bytes per vector, its model's encode cost."""
    dim = output_dim(candidate.transform, model_dim)
    result = CandidateResult(
        candidate.model,
        candidate.pooling,
        candidate.transform,
        candidate.encoding,
        dim,
        encoding_bytes(candidate.encoding, dim),
    )
    result.encode_ms_per_1000 = model_info["encode_ms_per_1000"]
    result.mode, result.fusion = candidate.mode, candidate.fusion
    result.disk_bytes_per_vector = encoding_disk_bytes(candidate.encoding, dim)
    return result


def _chosen(
    scored: list[Scored],
    results: list[CandidateResult],
    items: Items,
    info: dict[str, dict[str, Any]],
    notes: list[str],
    unknown_texts: dict[str, int],
    folds: int,
    seed: int,
    n_boot: int,
    budget: int | None,
) -> TuneResult:
    """The choice on all dev items, checked by k-fold over them when there is no test data, as the result."""
    choice = choose_on_dev(scored, items, n_boot, seed, budget)
    checks = [] if items.n_test else check_by_folds(scored, items, folds, n_boot, seed, budget)
    config = _tuned_config(scored, choice, info, items, seed, n_boot)
    result = TuneResult(
        kind=items.kind,
        metric=items.metric,
        n_dev=items.n_dev,
        n_test=items.n_test,
        n_fit=len(items.fit),
        seed=seed,
        n_boot=n_boot,
        folds=folds,
        max_bytes_per_vector=budget,
        candidates=results,
        config=config,
        checks=checks,
        notes=notes,
        unknown_texts=unknown_texts,
    )
    config.selection["check"] = result.check_summary()
    return result


def _tuned_config(
    scored: list[Scored], choice: int, info: dict[str, dict[str, Any]], items: Items, seed: int, n_boot: int
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
        mode=chosen.mode,
        fusion=chosen.fusion or DEFAULT_FUSION.spec,
        metric=items.metric,
        max_length=config_max_length(model_info),
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
