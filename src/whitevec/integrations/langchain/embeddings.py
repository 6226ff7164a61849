"""``WhitevecEmbeddings``: a whitevec encoder, and a fitted transform after it, as a LangChain ``Embeddings``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

from whitevec.encoders.protocol import EncoderLike, known_token_mask
from whitevec.errors import BadInputError
from whitevec.transforms.frozen import AppliesVectors, load_to_apply

ModelLike = str | os.PathLike[str] | EncoderLike


class WhitevecEmbeddings(Embeddings):
    """A whitevec encoder, and optionally a fitted transform after it, as a LangChain ``Embeddings``: whitened,
    compressed or static-table vectors for any LangChain store.

    ``model``: a model name or folder (:func:`whitevec.encoders.load_encoder`: a transformers model or a static
    table) or an encoder object. ``transform``: a fitted :class:`~whitevec.transforms.Transform`, or the path of
    one saved as ``.safetensors`` (``whitevec fit``); its input must be the encoder's dimension. A text with no
    token the model knows (empty, blank, only emoji) gets a row of zeros, never the one direction a transform
    gives all of them. ``device``: as the CLI's ``--device``.
    """

    def __init__(
        self,
        model: ModelLike = "all-MiniLM-L6-v2",
        transform: AppliesVectors | str | os.PathLike[str] | None = None,
        *,
        device: str | None = None,
    ) -> None:
        if isinstance(model, str | os.PathLike):
            from whitevec.encoders.loading import load_encoder

            self.encoder: EncoderLike = load_encoder(model, device=device)
        elif isinstance(model, EncoderLike):
            self.encoder = model
        else:
            raise BadInputError(
                f"model is a model name, a folder or a whitevec encoder, not {type(model).__name__}"
            )
        self.transform = _applier(transform)
        dim = int(self.encoder.describe()["dim"])
        if self.transform is not None and self.transform.n_features_in_ != dim:
            raise BadInputError(
                f"the transform takes {self.transform.n_features_in_}-d vectors; the encoder gives {dim}-d ones"
            )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 ``(len(texts), d)``: the encoder's vectors, transformed; zeros for a text without a known
        token."""
        items = list(texts)
        known = known_token_mask(self.encoder, items)
        raw = np.zeros((len(items), int(self.encoder.describe()["dim"])), dtype=np.float32)
        if known.any():
            raw[known] = self.encoder.encode(
                [t for t, ok in zip(items, known, strict=True) if ok], show_progress=False
            )
        if self.transform is None:
            return raw
        out = np.asarray(self.transform.transform(raw), dtype=np.float32)
        out[~known] = 0
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed(texts).tolist() if texts else []

    def embed_query(self, text: str) -> list[float]:
        return list(self.embed_documents([text])[0])


def _applier(transform: AppliesVectors | str | os.PathLike[str] | None) -> AppliesVectors | None:
    """A transform to apply: given (fitted), or read from its saved file (numpy alone for a whitening)."""
    if transform is None:
        return None
    if not isinstance(transform, str | os.PathLike):
        if not callable(getattr(transform, "transform", None)):
            raise BadInputError(
                f"transform is a fitted Transform or a saved file's path, not {type(transform).__name__}"
            )
        if not hasattr(transform, "n_features_in_"):
            raise BadInputError("the transform is not fitted; fit it first, or give the path of a saved one")
        return transform
    path = Path(transform)
    if not path.is_file():
        raise BadInputError(f"no saved transform at {path}")
    return load_to_apply(path.read_bytes(), source=str(path))
