"""Anisotropy diagnostics: measure the cone sentence vectors sit in, and what a transform changes.

>>> from whitevec.diagnostics import cosine_stats, spectrum, isotropy_mu, isoscore  # doctest: +SKIP
>>> report = diagnose(Encoder(), task=load_sts_task("stsb"), transforms=["none", "whitening"])  # doctest: +SKIP
>>> write_report(report, "diag/")  # report.html, PNG plots, metrics.json   # doctest: +SKIP

Plotting (matplotlib) is imported only by :func:`write_report`, so the measures work without it.
"""

from whitevec.diagnostics.frequency import FrequencyLink, NormLink, frequency_link, token_norms
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
from whitevec.diagnostics.report import DiagnosticsReport, KSweep, SpaceReport, diagnose, write_report

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
    "effective_rank",
    "frequency_link",
    "isoscore",
    "isotropy_mu",
    "spectrum",
    "token_norms",
    "write_report",
]
