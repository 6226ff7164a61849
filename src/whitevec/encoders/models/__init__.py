"""Which model: names to local folders (``resolution``), which model an index was built with (``identity``), a
sentence-transformers folder's configuration (``st_config``)."""

from whitevec.encoders.models.resolution import DEFAULT_MODEL, resolve_model

__all__ = ["DEFAULT_MODEL", "resolve_model"]
