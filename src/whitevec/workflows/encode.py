"""A text file encoded into a .npy matrix (``whitevec encode``), here or on Ray."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from whitevec.datasets.paths import existing_file
from whitevec.engines import check_engine, make
from whitevec.preflight import check_encoder, check_output, check_output_folder

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder


@dataclass(frozen=True)
class EncodedFile:
    """What :func:`encode_file` wrote: ``rows`` vectors of ``dim`` in the .npy matrix ``path``; or, on Ray, in
    ``shards`` Parquet files in the folder ``path`` (``dim`` None)."""

    path: Path
    rows: int
    dim: int | None = None
    shards: int | None = None

    def __str__(self) -> str:
        if self.shards is None:
            return f"{self.path} ({self.rows} x {self.dim})"
        return f"{self.path}: {self.rows} vectors in {self.shards} shards"


def encode_file(
    texts_file: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    encoder: Mapping[str, Any],
    transform: str | os.PathLike[str] | None = None,
    engine: str = "local",
    ray_address: str | None = None,
    workers: int | None = None,
    gpus_per_worker: float = 0.0,
    show_progress: bool | None = None,
    make_encoder: Callable[..., AnyEncoder] | None = None,
) -> EncodedFile:
    """Encode a text file (one text a line) into the float32 .npy matrix ``out``, through a saved ``transform``
    file if given. Checked first: the texts, the transform file, the model and its cache, and that ``out`` can be
    written with room for the matrix.

    ``engine="ray"``: ``texts_file`` is a corpus (one file or a glob of JSONL, CSV/TSV, text or Parquet shards)
    and ``out`` a folder of Parquet shards, written by :func:`whitevec.engines.ray.ray_encode` on
    ``workers`` actors at ``ray_address`` (no vector cache, no token weights).
    """
    if check_engine(engine):
        ray = {"ray_address": ray_address, "workers": workers, "gpus_per_worker": gpus_per_worker}
        return _encode_on_ray(texts_file, out, encoder, transform, quiet=show_progress is False, **ray)
    from whitevec.datasets import read_texts_file

    texts = read_texts_file(texts_file)
    if transform is not None:
        existing_file(transform, "transform file")
    dim = check_encoder(encoder["model"], encoder.get("cache", True))
    check_output(out, "--out file", need_bytes=len(texts) * dim * 4)
    from whitevec.workflows.vectors import encode_to_file

    with make(encoder, make_encoder) as model:
        rows, dim = encode_to_file(model, texts, out, transform, show_progress=show_progress)
    return EncodedFile(Path(out), rows, dim)


def _encode_on_ray(
    corpus: str | os.PathLike[str],
    out: str | os.PathLike[str],
    encoder: Mapping[str, Any],
    transform: str | os.PathLike[str] | None,
    **ray: Any,
) -> EncodedFile:
    from whitevec.engines.ray import actor_encoder, ray_encode, require_ray

    require_ray()
    actors = actor_encoder(encoder)
    if transform is not None:
        existing_file(transform, "transform file")
    check_encoder(encoder["model"], False)
    check_output_folder(out, "--out folder")
    listing = ray_encode(
        str(corpus),
        out,
        encoder=actors,
        transform_file=transform,
        **ray,
    )
    return EncodedFile(Path(out), int(listing["count"]), shards=len(listing["shards"]))
