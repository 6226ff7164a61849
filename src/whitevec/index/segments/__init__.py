"""Writes after the build: a version seen as segments (``view``), several segments searched as one
(``merged``), one write as one new version (``writing``), and what a write is given and answers on every surface
(``requests``)."""
