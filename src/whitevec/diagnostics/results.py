"""What :func:`~whitevec.diagnostics.measure.diagnose` returns: result dataclasses and their JSON form.

The same :class:`DiagnosticsReport` feeds ``metrics.json``, the HTML report and the ``whitevec diagnose`` table,
so the numbers a person reads are the numbers the Python API returns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from whitevec._version import __version__
from whitevec.diagnostics.frequency import FrequencyLink
from whitevec.diagnostics.metrics import AlignmentUniformity, CosineStats, IsoScoreResult, Isotropy, Spectrum
from whitevec.evaluation.metrics import non_finite_to_none
from whitevec.utils.io import write_json


@dataclass
class SpaceReport:
    """All measures of one vector space (the raw vectors or one transform's output)."""

    transform: str
    n_vectors: int
    dim: int
    fit_seconds: float
    cosine: CosineStats
    spectrum: Spectrum
    isotropy: Isotropy
    isoscore: IsoScoreResult
    alignment_uniformity: AlignmentUniformity | None
    sts_spearman: float | None  # Spearman x 100 on the task's evaluated pairs ("all"), when a task is given
    # 2-D coordinates of (a sample of) the rows on the top two eigenvectors of X^T X (uncentred PCA).
    projection: np.ndarray = field(repr=False, compare=False)
    # A Flow's loss curve, rows (step, training bits/dim, validation bits/dim or NaN); None for other transforms.
    loss_curve: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types without the projection; ``sts_spearman`` is None when NaN (constant cosines). A
        flow's loss curve is ``loss_curve``: ``[step, train bits/dim, validation bits/dim or None]`` rows."""
        extra: dict[str, Any] = {}
        if self.loss_curve is not None:
            extra["loss_curve"] = non_finite_to_none(np.asarray(self.loss_curve, dtype=float).tolist())
        return {
            "transform": self.transform,
            "n_vectors": self.n_vectors,
            "dim": self.dim,
            "fit_seconds": self.fit_seconds,
            "cosine": self.cosine.to_dict(),
            "spectrum": self.spectrum.to_dict(),
            "isotropy": self.isotropy.to_dict(),
            "isoscore": self.isoscore.to_dict(),
            "alignment_uniformity": None
            if self.alignment_uniformity is None
            else self.alignment_uniformity.to_dict(),
            "sts_spearman": non_finite_to_none(self.sts_spearman),
            **extra,
        }


@dataclass
class KSweep:
    """STS Spearman x 100 (``all``) against the number of whitening components k, fitted on the sentences."""

    task: str
    n_pairs: int
    ks: list[int]
    spearman: list[float]
    reference: dict[str, float]  # the full transforms of the report, for comparison

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types; a Spearman score that is NaN (constant cosines) becomes None."""
        return {
            "task": self.task,
            "n_pairs": self.n_pairs,
            "ks": self.ks,
            "spearman": non_finite_to_none(self.spearman),
            "reference": non_finite_to_none(self.reference),
        }


@dataclass
class DiagnosticsReport:
    """What :func:`diagnose` measured; ``notes`` says why a part is missing (``frequency``, ``sweep``, ...)."""

    model: dict[str, Any]
    source: str
    n_sentences: int
    spaces: list[SpaceReport]
    frequency: FrequencyLink | None
    sweep: KSweep | None
    notes: dict[str, str]
    settings: dict[str, Any]
    whitevec: str = __version__

    def space(self, transform: str) -> SpaceReport:
        """The measures of one transform's space, by its spec (``"none"`` for the raw vectors)."""
        for each in self.spaces:
            if each.transform == transform:
                return each
        raise KeyError(f"no space {transform!r} in this report; have {[s.transform for s in self.spaces]}")

    def summary(self) -> list[dict[str, Any]]:
        """One flat row of headline numbers per transform (what the CLI table and the HTML table show)."""
        rows = []
        for s in self.spaces:
            au = s.alignment_uniformity
            rows.append(
                {
                    "transform": s.transform,
                    "dim": s.dim,
                    "mean_cosine": s.cosine.mean,
                    "std_cosine": s.cosine.std,
                    "top1_share": s.spectrum.top_share.get("1"),
                    "top10_share": s.spectrum.top_share.get("10"),
                    "top100_share": s.spectrum.top_share.get("100"),
                    "effective_rank": s.spectrum.effective_rank,
                    "isotropy_iw": s.isotropy.value,
                    "log_z_ratio": s.isotropy.log_z_min - s.isotropy.log_z_max,
                    "isoscore": s.isoscore.score,
                    "alignment": None if au is None else au.alignment,
                    "uniformity": None if au is None else au.uniformity,
                    "sts_spearman": s.sts_spearman,
                }
            )
        return rows

    def to_dict(self) -> dict[str, Any]:
        """What ``metrics.json`` holds; a Spearman score that is NaN (constant cosines) becomes None."""
        return {
            "whitevec": self.whitevec,
            "model": self.model,
            "source": self.source,
            "n_sentences": self.n_sentences,
            "settings": self.settings,
            "summary": non_finite_to_none(self.summary()),
            "spaces": [s.to_dict() for s in self.spaces],
            "frequency": None if self.frequency is None else self.frequency.to_dict(),
            "sweep": None if self.sweep is None else self.sweep.to_dict(),
            "notes": self.notes,
        }

    def save_json(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_dict` as JSON (atomically, UTF-8); returns ``path``."""
        return write_json(path, self.to_dict())
