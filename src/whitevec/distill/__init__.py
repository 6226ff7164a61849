"""``whitevec distill``: a static encoder folder from a model. ``run.py`` the steps (checks before any model
loads, PCA, token weights, the folded transform, provenance); ``token_table.py`` the raw token vectors made with
an Encoder."""

from whitevec.distill.run import distill

__all__ = ["distill"]
