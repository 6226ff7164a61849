"""What the STS benchmarks share: the tasks, their texts, the Spearman table of a results page, and the
token-weight methods (results_token_weights.py's rows, which results_static.py and the zipf investigations run
too). whitevec and torch load inside the functions: a page renders without them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from whitevec.datasets import StsTask
    from whitevec.encoders.token_weights import TokenFrequencies
    from whitevec.encoders.transformer import Encoder
    from whitevec.evaluation.sts import StsScore
    from whitevec.transforms import Whitening

STS_TASKS = ["stsb", "sts12", "sts13", "sts14", "sts15"]  # the five English tasks
ZH_TASKS = ["atec", "bq", "lcqmc", "pawsx", "stsb-zh"]  # the five Chinese tasks


def stsb_sentences(limit: int | None) -> list[str]:
    """STS-B's sentences (every split, file order), the first ``limit`` of them: what encoding is timed on."""
    from whitevec.datasets import load_sts_task

    texts = load_sts_task("stsb").sentences("target")
    return texts if limit is None or limit >= len(texts) else texts[:limit]


def target_union(tasks: list[StsTask]) -> list[str]:
    """Every target sentence of ``tasks``, once each, in first-seen order: the text token counts are made on."""
    return list(dict.fromkeys(s for task in tasks for s in task.sentences("target")))


def seeded_sample(pairs: list[Any], limit: int) -> list[Any]:
    """At most ``limit`` pairs, a seeded sample kept in file order."""
    if len(pairs) <= limit:
        return pairs
    keep = np.sort(np.random.default_rng(0).choice(len(pairs), size=limit, replace=False))
    return [pairs[i] for i in keep]


def sts_table(scores: Sequence[StsScore], tasks: list[str]) -> list[str]:
    """The Markdown table of a results page: a row per (model, pooling, transform), each task's ``all`` and
    ``wmean`` (STS-B: wmean), their average and its change against the same pooling's raw row."""
    by_key: dict[tuple[str, str, str], dict[str, StsScore]] = {}
    for s in scores:
        by_key.setdefault((s.model, s.pooling, s.transform), {})[s.task] = s
    head = ["model", "pooling", "transform"]
    for task in tasks:
        head += [f"{task} wmean"] if task == "stsb" else [f"{task} all", f"{task} wmean"]
    head += ["avg wmean", "Δ avg vs none"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (model, pooling, transform), per_task in by_key.items():
        cells = [model, pooling, transform]
        for task in tasks:
            s = per_task[task]
            cells += [f"{s.wmean:.2f}"] if task == "stsb" else [f"{s.all:.2f}", f"{s.wmean:.2f}"]
        avg = sum(per_task[t].wmean for t in tasks) / len(tasks)
        base = by_key[(model, pooling, "none")]
        base_avg = sum(base[t].wmean for t in tasks) / len(tasks)
        cells += [f"{avg:.2f}", "" if transform == "none" else f"{avg - base_avg:+.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# ---- the token-weight methods --------------------------------------------------------------------------------
class Prefitted:
    """A transform fitted beforehand (on token vectors, or with sentence weights); evaluate_sts's fit: no-op."""

    def __init__(self, whitening: Whitening) -> None:
        self.whitening = whitening

    def fit(self, X: Any) -> Prefitted:
        return self

    def transform(self, X: Any) -> np.ndarray:
        return self.whitening.transform(X)


def run_method(encoder: Encoder, method: str, task: StsTask, frequencies: TokenFrequencies) -> StsScore:
    """One method on one task: the encoder (weighted as the method says) and its transform, via evaluate_sts."""
    from whitevec.encoders.token_weights import TokenWeighting, fit_zipfian_whitening, sentence_weights
    from whitevec.evaluation.sts import evaluate_sts
    from whitevec.transforms import Whitening

    specs = {"raw": "none", "whitening": "whitening", "flow": "flow", "sif": "sif-pc", "usif": "usif-pc"}
    make: Callable[[str], Any] | None = None
    if method in ("sif", "usif", "zipfian"):
        encoder = encoder.with_token_weights(
            TokenWeighting(method if method != "zipfian" else "zipf", frequencies)
        )
    target = task.sentences("target")
    if method == "zipfian":
        fitted = fit_zipfian_whitening(encoder, target, frequencies)
        make = lambda spec: Prefitted(fitted)  # noqa: E731
    elif method == "zipfian-sent":
        vectors = encoder.encode(target, show_progress=False)
        weights = sentence_weights(encoder.tokenizer, target, frequencies, encoder.max_length)
        sentence_fitted = Whitening().fit(vectors, sample_weight=weights)
        make = lambda spec: Prefitted(sentence_fitted)  # noqa: E731
    spec = specs.get(method, method)
    if make is None:
        report = evaluate_sts(encoder, [task], [spec], "target", show_progress=False)
    else:
        report = evaluate_sts(encoder, [task], [spec], "target", show_progress=False, make=make)
    score = report.scores[0]
    score.transform = "none" if method == "raw" else method
    return score
