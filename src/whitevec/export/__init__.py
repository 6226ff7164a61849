"""Whitevec's work for other tools: a sentence-transformers folder (``sentence_transformers.py``, with the
modules it names in ``st_modules.py``), one plain FAISS file with the whitening inside (``faiss_index.py``).
Names load on first use: an exported folder imports ``st_modules`` alone, without the exporters."""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "export_sentence_transformer": "sentence_transformers",
    "export_static": "sentence_transformers",
    "export_faiss": "faiss_index",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
