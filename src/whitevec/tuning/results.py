"""What :func:`whitevec.tuning.tune` measured and chose: one row per candidate, the k-fold check of the choice,
and the whole result (saved as JSON, plotted as score against bytes per vector)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.evaluation.metrics import non_finite_to_none
from whitevec.tuning.config import TunedConfig
from whitevec.tuning.space import Candidate
from whitevec.utils.io import write_json


@dataclass
class CandidateResult:
    """One candidate's row: dev score, gain over the baseline with its 95% interval, cost, and test score."""

    model: str
    pooling: str
    transform: str
    encoding: str
    dim: int
    bytes_per_vector: int  # in memory: the code (the budget counts these)
    status: str = "scored"  # or "skipped: ..." / "failed: ..."
    fit_seconds: float = 0.0
    # The model's encode cost measured in this run (see tune's docstring): milliseconds per 1,000 texts.
    encode_ms_per_1000: float | None = None
    dev: float | None = None
    gain: float | None = None
    low: float | None = None
    high: float | None = None
    bound: float | None = None
    significant: bool = False
    test: float | None = None
    folds: list[float] = field(default_factory=list)  # its score on each held-out fold (k-fold check)
    chosen: bool = False
    disk_bytes_per_vector: int = 0  # on disk: a +rescore encoding's rescoring vector
    mode: str = "dense"  # how the index searches: dense, lexical or hybrid (whitevec.index.search.fusion)
    fusion: str = ""  # hybrid: the fusion spec (rrf:60, convex:0.6); empty otherwise

    @property
    def candidate(self) -> Candidate:
        return Candidate(self.model, self.pooling, self.transform, self.encoding, self.mode, self.fusion)


@dataclass
class FoldCheck:
    """The choice made without one fold, scored on that fold beside the raw baseline."""

    fold: int
    n_items: int
    chosen: str
    raw: float
    tuned: float


@dataclass
class TuneResult:
    """What :func:`tune` measured and chose. ``config`` is the choice (see :class:`TunedConfig`)."""

    kind: str
    metric: str
    n_dev: int
    n_test: int
    n_fit: int
    seed: int
    n_boot: int
    folds: int
    max_bytes_per_vector: int | None
    candidates: list[CandidateResult]
    config: TunedConfig
    checks: list[FoldCheck] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # Per model: the texts of the run with no token it knows (whitevec.encoders.protocol.known_token_mask). They
    # are left
    # out of the fits; their vectors are zeros (a pair holding one has similarity 0), such a query scores 0 and
    # such a document cannot be retrieved, as in an index built with the default --empty-documents skip.
    unknown_texts: dict[str, int] = field(default_factory=dict)

    @property
    def chosen(self) -> CandidateResult:
        return next(c for c in self.candidates if c.chosen)

    @property
    def baseline(self) -> CandidateResult:
        return self.candidates[0]

    def held_out_score(self, row: CandidateResult) -> float | None:
        """``row``'s score on the side not used to choose: its test score, or its held-out fold scores averaged
        (weighted by fold size) under the k-fold check."""
        if self.n_test:
            return row.test
        if not self.checks or len(row.folds) != len(self.checks):
            return None
        return float(np.average(row.folds, weights=[c.n_items for c in self.checks]))

    def check_summary(self) -> dict[str, float] | None:
        """raw and tuned on the side not used to choose: test data when given, else the mean over held-out
        folds (weighted by fold size)."""
        if self.n_test:
            assert self.baseline.test is not None and self.chosen.test is not None
            return {
                "raw": self.baseline.test,
                "tuned": self.chosen.test,
                "gain": self.chosen.test - self.baseline.test,
            }
        if not self.checks:
            return None
        sizes = np.array([c.n_items for c in self.checks], dtype=np.float64)
        raw = float(np.average([c.raw for c in self.checks], weights=sizes))
        tuned = float(np.average([c.tuned for c in self.checks], weights=sizes))
        return {"raw": raw, "tuned": tuned, "gain": tuned - raw}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["config"] = self.config.to_dict()
        data["check"] = self.check_summary()
        return non_finite_to_none(data)

    def save_json(self, path: str | os.PathLike[str]) -> Path:
        """The whole result (every candidate, the folds, the choice) as JSON, written atomically."""
        return write_json(path, self.to_dict())

    def save_config(self, path: str | os.PathLike[str]) -> Path:
        """The chosen configuration (see :class:`TunedConfig`), written atomically."""
        return self.config.save(path)

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """Dev score against bytes per vector, one point per scored candidate, the choice marked (PNG)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from whitevec.utils.io import atomic_path

        scored = [c for c in self.candidates if c.dev is not None]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for encoding in dict.fromkeys(c.encoding for c in scored):
            mine = [c for c in scored if c.encoding == encoding]
            ax.scatter([c.bytes_per_vector for c in mine], [c.dev or 0.0 for c in mine], label=encoding, alpha=0.7)
        chosen = self.chosen
        ax.scatter(
            [chosen.bytes_per_vector], [chosen.dev or 0.0], marker="*", s=250, color="black", label="chosen"
        )
        ax.axhline(self.baseline.dev or 0.0, color="grey", linestyle="--", linewidth=1, label="none")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes per vector")
        ax.set_ylabel(f"dev {self.metric} x 100")
        ax.legend()
        fig.tight_layout()
        target = Path(path)
        with atomic_path(target, suffix=".png") as tmp:
            fig.savefig(tmp, format="png", dpi=120)
        plt.close(fig)
        return target
