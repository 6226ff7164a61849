"""Indexes of the caller's own vectors, from files (``whitevec index build --vectors``, ``whitevec index
create``): the light checks first (the vectors file by its name, the corpus parsed, the output folder and the
index options), then the index (:meth:`whitevec.index.Retriever.build` with ``vectors``,
:meth:`whitevec.index.Retriever.create`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from whitevec.engines import make
from whitevec.errors import BadInputError
from whitevec.preflight import check_output
from whitevec.workflows.index import BuiltIndex, check_transform_file, index_pooling

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder


def build_from_vectors_file(
    corpus: str | os.PathLike[str],
    out: str | os.PathLike[str],
    vectors: str | os.PathLike[str],
    *,
    encoder_name: str | None = None,
    transform: str = "none",
    show_progress: bool | None = None,
    **settings: Any,
) -> BuiltIndex:
    """The index ``out`` of the corpus file ``corpus`` and the vectors file ``vectors`` (``.npy``, or
    ``.safetensors`` holding one tensor: a float row per document, in the corpus's order), its encoder external
    (named ``encoder_name``, no model); ``settings``: :meth:`whitevec.index.Retriever.build`'s (kind, metric,
    backend, index_params, lexical, analyzer, search, keep_raw_vectors). Checked before the vectors are read: the
    file's name and presence, the corpus (every row parsed), the transform file, the options, ``out``."""
    from whitevec.datasets.retrieval import read_corpus_file
    from whitevec.index.given_vectors import check_vectors_file

    file = check_vectors_file(vectors, "--vectors")
    docs = read_corpus_file(corpus)
    check_transform_file(transform)
    check_output(out, "index folder", need_bytes=2 * file.stat().st_size, folder=True)
    from whitevec.index import Retriever, check_build

    check_build(out, **_build_checks(settings))
    with Retriever.build(
        docs,
        out,
        vectors=file,
        encoder_name=encoder_name,
        transform=transform,
        show_progress=show_progress,
        **settings,
    ) as retriever:
        return BuiltIndex(Path(out), repr(retriever))


def create_empty_index(
    out: str | os.PathLike[str],
    *,
    dim: int | None = None,
    encoder: Mapping[str, Any] | None = None,
    make_encoder: Callable[..., AnyEncoder] | None = None,
    encoder_name: str | None = None,
    transform: str = "none",
    **settings: Any,
) -> BuiltIndex:
    """An empty index at ``out`` (:meth:`whitevec.index.Retriever.create`): of vectors given by the caller, of
    ``dim`` numbers each (named ``encoder_name``), or of the model ``encoder`` names (the keyword arguments of
    :func:`whitevec.encoders.loading.load_encoder`, made with ``make_encoder``; loaded to record it); ``settings``:
    kind, metric, index_params, lexical, analyzer, search, keep_raw_vectors. Checked before any model loads: one
    of ``dim`` and ``encoder``, the transform file, the options, ``out``."""
    if (dim is None) == (encoder is None):
        raise BadInputError("give an empty index --dim D (vectors given by the caller) or --model M, not both")
    check_transform_file(transform)
    check_output(out, "index folder", folder=True)
    from whitevec.index import Retriever, check_build

    check_build(out, **_build_checks(settings))
    if encoder is None:
        with Retriever.create(out, dim=dim, encoder_name=encoder_name, transform=transform, **settings) as made:
            return BuiltIndex(Path(out), repr(made))
    if encoder_name is not None:
        raise BadInputError("--encoder-name names the encoder of given vectors (--dim); a model names itself")
    pooling = index_pooling(encoder["model"], encoder.get("pooling"))
    with (
        make({**encoder, "pooling": pooling}, make_encoder) as model,
        Retriever.create(out, encoder=model, transform=transform, **settings) as made,
    ):
        return BuiltIndex(Path(out), repr(made))


def _build_checks(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The settings :func:`whitevec.index.check_build` checks before anything is read or loaded."""
    names = ("kind", "metric", "backend", "index_params", "lexical", "analyzer", "search")
    return {name: settings[name] for name in names if name in settings}
