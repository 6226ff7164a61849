"""Searching: the search modes and the fusion of two rankings (``fusion``), what a search answers (``hits``)."""
