"""Retrieval quality of an encoder on a named dataset (``whitevec eval-retrieval``): every configuration checked
before the model loads, then :func:`whitevec.evaluation.retrieval.evaluate_retrieval`."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from whitevec.engines import make
from whitevec.errors import BadInputError
from whitevec.preflight import check_encoder, input_file
from whitevec.workflows.index import index_pooling

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder
    from whitevec.evaluation.retrieval import RetrievalReport


def evaluate_retrieval_dataset(
    dataset: str | os.PathLike[str],
    transforms: Sequence[str],
    *,
    encoder: Mapping[str, Any],
    poolings: Sequence[str] | None = None,
    encodings: str | Sequence[str] = ("float32",),
    fit_on: str = "corpus",
    kind: str = "flat",
    metric: str = "cosine",
    backend: str = "faiss",
    uri: str | None = None,
    latency_queries: int = 100,
    data_dir: str | os.PathLike[str] | None = None,
    show_progress: bool | None = None,
    make_encoder: Callable[..., AnyEncoder] | None = None,
    modes: Sequence[str] | None = None,
    fusions: Sequence[str] | None = None,
    analyzer: str | None = None,
) -> RetrievalReport:
    """Score every (pooling, transform, encoding) on ``dataset`` (``cranfield`` or a BEIR-style folder, read
    from ``data_dir``); see :func:`~whitevec.evaluation.retrieval.evaluate_retrieval` for the rest.
    ``poolings`` None: the model folder's sentence-transformers pooling, else last-avg; ``encodings``: specs,
    or one string listing them (commas; ``;`` between ``faiss:`` factory strings). ``modes`` (None: dense
    only), ``fusions`` and ``analyzer``: the rows beside the dense ones (see
    :func:`whitevec.evaluation.modes.plan_modes`).

    Checked before the model loads: the dataset, the modes, fusions and analyzer (and a backend that keeps a
    lexical part), the poolings, the ``fit_on`` file, the model and its cache, every pooling, transform and
    encoding, and that some (transform, encoding) pair fits.
    """
    from whitevec.datasets.retrieval import load_retrieval_dataset

    data = load_retrieval_dataset(dataset, data_dir=data_dir)
    from whitevec.evaluation.modes import plan_modes  # the index's parsers: after the light checks

    plan = plan_modes(modes, fusions, analyzer, backend)
    names = list(poolings) if poolings is not None else [index_pooling(encoder["model"], None)]
    if not names:
        raise BadInputError("give at least one pooling")
    input_file(fit_on, "--fit-on file", keywords=("corpus",))
    dim = check_encoder(encoder["model"], encoder.get("cache", True))
    from whitevec.encoders.loading import check_poolings
    from whitevec.evaluation.retrieval import evaluate_retrieval, plan_configurations
    from whitevec.index.encodings.spec import split_encoding_list
    from whitevec.transforms import make_transform

    check_poolings(encoder["model"], names)
    for spec in transforms:
        make_transform(spec)
    specs = split_encoding_list(encodings) if isinstance(encodings, str) else list(encodings)
    plan_configurations(transforms, specs, dim)  # the encodings, and which of them fit each transform
    with make({**encoder, "pooling": names[0]}, make_encoder) as model:
        return evaluate_retrieval(
            model,
            data,
            transforms,
            poolings=names,
            encodings=specs,
            fit_on=fit_on,
            kind=kind,
            metric=metric,
            backend=backend,
            uri=uri,
            latency_queries=latency_queries,
            show_progress=show_progress,
            modes=plan,
        )
