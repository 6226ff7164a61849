"""Texts to vectors: the transformer :class:`Encoder` (an exactly defined pooling over a transformers model,
its vector cache), the torch-free :class:`StaticEncoder` over a static folder, and :func:`load_encoder`, the one
place a model name becomes either.

Names load on first use, so ``import whitevec.encoders.protocol`` (what an index asks of an encoder) or the
static encoder bring in no torch.

- ``protocol.py``: ``EncoderLike`` and ``known_token_mask``, the one rule for texts no token of which is known.
- ``transformer.py``: ``Encoder``; ``pooling.py`` the pooling registry; ``token_pooling.py`` its arithmetic on
  torch tensors; ``cache.py`` the SQLite vector cache; ``tokenization.py`` tokenizers and folder fingerprints;
  ``compute.py`` the bf16 / int8 backends and length batches.
- ``static.py``: ``StaticEncoder``; ``static_format.py`` its folder (Model2Vec's format).
- ``loading.py``: ``load_encoder``; ``models/`` which model: names to folders (``resolution.py``), which model
  an index was built with (``identity.py``), a sentence-transformers folder's configuration (``st_config.py``).
- ``token_weights.py``: token frequencies and the weights a weighted mean uses.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "Encoder": "transformer",
    "Pooling": "pooling",
    "get_pooling": "pooling",
    "StaticEncoder": "static",
    "StaticTable": "static_format",
    "read_static_folder": "static_format",
    "write_static_folder": "static_format",
    "is_static_folder": "static_format",
    "AnyEncoder": "loading",
    "load_encoder": "loading",
    "default_pooling_of": "loading",
    "EncoderLike": "protocol",
    "known_token_mask": "protocol",
    "DEFAULT_MODEL": "models",
    "resolve_model": "models",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
