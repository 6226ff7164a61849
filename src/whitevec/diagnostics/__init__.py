"""Anisotropy diagnostics: measure the cone sentence vectors sit in, and what a transform changes.

>>> from whitevec.diagnostics import cosine_stats, spectrum, isotropy_mu, isoscore  # doctest: +SKIP
>>> report = diagnose(Encoder(), task=load_sts_task("stsb"), transforms=["none", "whitening"])  # doctest: +SKIP
>>> write_report(report, "diag/")  # report.html, PNG plots, metrics.json   # doctest: +SKIP

Plotting (matplotlib) is imported only by :func:`write_report`, so the measures work without it.

Modules, each importing only those above it: ``metrics`` and ``frequency`` (the measures), ``results`` (the
report's dataclasses and JSON), ``measure`` (:func:`diagnose`: encode, fit, measure), ``plots`` (PNGs of a
report), ``writer`` (``metrics.json``, the plots and ``report.html``).
"""

from whitevec.diagnostics.frequency import FrequencyLink, NormLink, frequency_link, token_norms
from whitevec.diagnostics.measure import diagnose, diagnose_encoder, diagnose_vectors
from whitevec.diagnostics.metrics import (
    AlignmentUniformity,
    CosineStats,
    IsoScoreResult,
    Isotropy,
    Spectrum,
    alignment_uniformity,
    cosine_stats,
    effective_rank,
    isoscore,
    isotropy_mu,
    spectrum,
)
from whitevec.diagnostics.results import DiagnosticsReport, KSweep, SpaceReport
from whitevec.diagnostics.writer import write_report

__all__ = [
    "AlignmentUniformity",
    "CosineStats",
    "DiagnosticsReport",
    "FrequencyLink",
    "IsoScoreResult",
    "Isotropy",
    "KSweep",
    "NormLink",
    "SpaceReport",
    "Spectrum",
    "alignment_uniformity",
    "cosine_stats",
    "diagnose",
    "diagnose_encoder",
    "diagnose_vectors",
    "effective_rank",
    "frequency_link",
    "isoscore",
    "isotropy_mu",
    "spectrum",
    "token_norms",
    "write_report",
]
