"""The name exported sentence-transformers folders give whitevec's modules (``whitevec.st_modules.X`` in their
``modules.json``); the modules live in :mod:`whitevec.export.st_modules`. Kept so folders written before the
move keep loading (``tests/test_saved_files.py``)."""

from whitevec.export.st_modules import FlowModule, LayerMeanPooling

__all__ = ["FlowModule", "LayerMeanPooling"]
