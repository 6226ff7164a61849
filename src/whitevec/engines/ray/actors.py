"""The Ray Data actor that encodes corpus units: each holds one encoder and writes, per unit, a Parquet shard,
the ids' hashes and (for an exact fit) the whitening moments."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.datasets.retrieval import Document
from whitevec.datasets.shards import CorpusUnit, read_unit
from whitevec.engines.ray.shards import hashes_name, id_hashes, moments_name, shard_name, write_shard
from whitevec.errors import BadInputError
from whitevec.index.build import encoder_fields
from whitevec.transforms import Transform
from whitevec.transforms.whitening import Whitening
from whitevec.utils.io import atomic_path


def actor_encoder(encoder: Mapping[str, Any]) -> dict[str, Any]:
    """The :func:`~whitevec.encoders.loading.load_encoder` arguments each actor builds its encoder from: those
    given, less the vector cache (actors keep none). Token weights are refused: the actors do not take them."""
    if encoder.get("token_weights") is not None or encoder.get("token_frequencies") is not None:
        raise BadInputError("--token-weights and --token-frequencies are not supported with --engine ray")
    return {k: v for k, v in encoder.items() if k not in ("cache", "token_weights", "token_frequencies")}


class EncodeUnits:
    """A Ray Data actor: one Encoder; each call parses, encodes and writes the units of its batch (see
    :mod:`whitevec.engines.ray`) and returns their row counts."""

    def __init__(
        self,
        encoder: dict[str, Any],
        folder: str,
        *,
        moments: bool,
        transform_file: str | None = None,
        max_text_bytes: int | None = None,
        threads: int = 1,
    ) -> None:
        from whitevec.encoders.loading import load_encoder
        from whitevec.encoders.static import StaticEncoder

        self.encoder = load_encoder(**encoder, cache=False)
        if not isinstance(self.encoder, StaticEncoder):  # a static encoder never imports torch
            import torch

            torch.set_num_threads(max(1, threads))
        self.folder = Path(folder)
        self.moments = moments
        self.transform = Transform.load(transform_file) if transform_file else None
        self.max_text_bytes = max_text_bytes

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Returns ``unit``, ``count`` and ``error`` per unit: a bad input is handed back as its message (an
        empty string when none), not raised, so that Ray neither retries it nor buries it in its own errors.

        The units of one call are encoded in one :meth:`Encoder.encode`: sorted by length together, their
        batches are padded less than unit by unit and fewer (22,438 STS sentences in 64 units: 347,672 padded
        tokens in 413 forward calls at 4 units a call, against 359,011 in 601 unit by unit, and 337,672 in 357
        for one sort of the whole corpus). Each unit still gets its own shard, moments and hashes."""
        units = [CorpusUnit.from_json(unit) for group in batch["units"] for unit in json.loads(str(group))]
        parsed: list[tuple[CorpusUnit, list[Document]]] = []
        errors: dict[int, str] = {}
        for unit in units:
            try:
                docs = read_unit(unit)
                if self.max_text_bytes is not None:
                    _check_text_sizes(docs, unit, self.max_text_bytes)
                parsed.append((unit, docs))
            except BadInputError as exc:
                errors[unit.index] = str(exc) or type(exc).__name__
        vectors = self.encoder.encode([d.text for _, docs in parsed for d in docs], show_progress=False)
        if self.transform is not None:
            vectors = self.transform.transform(vectors)
        counts: dict[int, int] = {}
        start = 0
        for unit, docs in parsed:
            self.write_unit(unit, docs, vectors[start : start + len(docs)])
            counts[unit.index] = len(docs)
            start += len(docs)
        return {
            "unit": np.array([u.index for u in units], dtype=np.int64),
            "count": np.array([counts.get(u.index, -1) for u in units], dtype=np.int64),
            "error": np.array([errors.get(u.index, "") for u in units], dtype=object),
            # What the manifest records of the encoder: the driver need not load the model itself.
            "encoder": np.array([json.dumps(encoder_fields(self.encoder))] * len(units), dtype=object),
        }

    def write_unit(self, unit: CorpusUnit, docs: list[Document], vectors: np.ndarray) -> None:
        """The unit's moments, hashes and shard, into the work folder the driver made: never a new one (a call
        still running after its build was discarded must not bring the folder back)."""
        if self.moments and docs:
            part = Whitening().partial_fit(vectors)
            with atomic_path(
                self.folder / moments_name(unit.index), suffix=".safetensors", create_parent=False
            ) as tmp:
                part.save(tmp)
        hashes = self.folder / hashes_name(unit.index)
        with atomic_path(hashes, suffix=".npy", create_parent=False) as tmp, open(tmp, "wb") as handle:
            np.save(handle, id_hashes([d.id for d in docs]), allow_pickle=False)
        write_shard(self.folder / shard_name(unit.index), docs, vectors)


def _check_text_sizes(docs: list[Document], unit: CorpusUnit, limit: int) -> None:
    for doc in docs:
        size = len(doc.text.encode("utf-8"))
        if size > limit:
            raise BadInputError(
                f"document {doc.id!r} of {unit.file} is {size} bytes of text; Milvus keeps at most {limit} "
                "bytes per text field. Split it, or build with --engine local (documents in SQLite)."
            )
