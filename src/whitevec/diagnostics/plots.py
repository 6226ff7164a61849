"""PNG plots of a :class:`~whitevec.diagnostics.results.DiagnosticsReport` (matplotlib, Agg).

Figures are built with ``matplotlib.figure.Figure`` on an Agg canvas, never through ``pyplot``: no global
backend is switched and no window can open, whatever backend the user's matplotlib is configured with.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from whitevec.diagnostics.results import DiagnosticsReport

_COLORS = ("#1f5fa8", "#d1495b", "#2a9d55", "#e08a00", "#7b4fa8", "#4d4d4d")
_DPI = 110


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()


def _who(report: DiagnosticsReport) -> str:
    model = report.model.get("model")
    pooling = report.model.get("pooling")
    if model is None:
        return report.source
    return f"{model}, {pooling} pooling"


def _grid(n: int) -> tuple[int, int]:
    cols = min(n, 3)
    return (n + cols - 1) // cols, cols


def eigen_spectrum(report: DiagnosticsReport) -> bytes:
    """Share of variance per principal direction, log y, one line per transform."""
    fig = Figure(figsize=(8.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    for color, space in zip(_COLORS * 4, report.spaces, strict=False):
        values = np.asarray(space.spectrum.eigenvalues) / space.spectrum.total_variance
        # Below ~1e-12 of the total an eigenvalue is rounding noise (e.g. fewer sentences than dimensions).
        positive = values > 1e-12
        index = np.arange(1, len(values) + 1)
        ax.plot(
            index[positive],
            values[positive],
            color=color,
            lw=1.8,
            label=f"{space.transform} (eff. rank {space.spectrum.effective_rank:.0f} of {space.dim})",
        )
    ax.set_yscale("log")
    ax.set_xlabel("principal direction (sorted by variance)")
    ax.set_ylabel("share of total variance (log)")
    ax.set_title(f"Eigen-spectrum of the covariance ({report.n_sentences} sentences)\n{_who(report)}")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(frameon=False)
    return _png(fig)


def cosine_hist(report: DiagnosticsReport) -> bytes:
    """Histogram of random-pair cosines, one panel per transform, shared x in [-1, 1]."""
    rows, cols = _grid(len(report.spaces))
    fig = Figure(figsize=(max(7.0, 3.6 * cols + 0.6), 3.2 * rows + 0.9), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    bins = np.linspace(-1, 1, 81)
    for k, (ax, space) in enumerate(zip(axes.flat, report.spaces, strict=False)):
        color = _COLORS[k % len(_COLORS)]
        ax.hist(space.cosine.values, bins=bins, color=color, alpha=0.85)
        ax.axvline(space.cosine.mean, color="black", lw=1, ls="--")
        ax.set_title(f"{space.transform}: mean {space.cosine.mean:.3f}, std {space.cosine.std:.3f}", fontsize=10)
        ax.set_xlabel("cosine similarity")
        ax.set_ylabel("pairs")
        ax.set_xlim(-1, 1)
    for ax in list(axes.flat)[len(report.spaces) :]:
        ax.set_visible(False)
    n_pairs = report.spaces[0].cosine.n_pairs if report.spaces else 0
    fig.suptitle(f"Cosine similarity of {n_pairs} random sentence pairs\n{_who(report)}")
    return _png(fig)


def projection_2d(report: DiagnosticsReport) -> bytes:
    """2-D scatter per transform (uncentred PCA) with the origin marked."""
    rows, cols = _grid(len(report.spaces))
    fig = Figure(figsize=(max(7.0, 3.8 * cols + 0.6), 3.6 * rows + 0.9), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for k, (ax, space) in enumerate(zip(axes.flat, report.spaces, strict=False)):
        points = space.projection
        ax.scatter(points[:, 0], points[:, 1], s=3, alpha=0.35, color=_COLORS[k % len(_COLORS)], linewidths=0)
        ax.scatter([0.0], [0.0], marker="x", s=70, color="black", linewidths=2, label="origin (zero vector)")
        ax.set_title(f"{space.transform}", fontsize=10)
        ax.set_xlabel("direction 1")
        ax.set_ylabel("direction 2")
        # Equal scales so distances from the origin read true; include the origin in view.
        ax.set_aspect("equal", adjustable="datalim")
        ax.legend(loc="best", fontsize=8, frameon=False)
    for ax in list(axes.flat)[len(report.spaces) :]:
        ax.set_visible(False)
    fig.suptitle(f"Sentence vectors on the top two eigenvectors of X^T X (uncentred PCA)\n{_who(report)}")
    return _png(fig)


def token_norms(report: DiagnosticsReport) -> bytes | None:
    """Token norm against log frequency (static and contextual), with bucket means; None without buckets."""
    freq = report.frequency
    if freq is None or not freq.buckets_ok:
        return None
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    axes = fig.subplots(1, 2)
    counts = freq.counts.astype(np.float64)
    ranges = freq.bucket_ranges
    centres = [float(np.sqrt(low * high)) for low, high in ranges]
    for ax, link, norms, color in (
        (axes[0], freq.static, freq.static_norms, _COLORS[0]),
        (axes[1], freq.contextual, freq.contextual_norms, _COLORS[1]),
    ):
        if len(counts) > 2000:
            ax.hexbin(counts, norms, xscale="log", gridsize=45, bins="log", cmap="Greys", mincnt=1)
        else:
            ax.scatter(counts, norms, s=6, alpha=0.4, color="grey", linewidths=0)
            ax.set_xscale("log")
        ax.plot(centres, link.bucket_means, "o-", color=color, lw=2, label="mean norm per frequency bucket")
        rho = "n/a" if link.spearman is None else f"{link.spearman:+.2f}"
        which = "input word embedding" if link.kind == "static" else "last-layer token vector (mean per type)"
        ax.set_title(f"{link.kind}: {which}\nSpearman rho = {rho} over {link.n_types} token types", fontsize=10)
        ax.set_xlabel("token frequency in the corpus (log)")
        ax.set_ylabel("L2 norm")
        ax.legend(frameon=False, fontsize=9)
    fig.suptitle(
        f"Token norm against frequency ({freq.n_tokens} tokens, {freq.n_sentences} sentences)\n{_who(report)}"
    )
    return _png(fig)


def sts_sweep(report: DiagnosticsReport) -> bytes | None:
    """STS Spearman against whitening k (log2 x), reference lines for the report's transforms."""
    sweep = report.sweep
    if sweep is None:
        return None
    fig = Figure(figsize=(8.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(sweep.ks, sweep.spearman, "o-", color=_COLORS[0], lw=2, label="whitening-k")
    for k, spearman in zip(sweep.ks, sweep.spearman, strict=True):
        ax.annotate(
            f"{spearman:.1f}", (k, spearman), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8
        )
    for color, (name, value) in zip(_COLORS[1:] * 3, sweep.reference.items(), strict=False):
        ax.axhline(value, color=color, ls="--", lw=1.2, label=f"{name}: {value:.2f}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sweep.ks, [str(k) for k in sweep.ks])
    ax.set_xlabel("whitening components kept (k)")
    ax.set_ylabel("Spearman x 100 (all pairs)")
    ax.set_title(f"STS {sweep.task} ({sweep.n_pairs} pairs) against whitening k\n{_who(report)}")
    ax.grid(True, alpha=0.3)
    ax.legend(frameon=False, fontsize=9, loc="best")
    return _png(fig)


def flow_loss(report: DiagnosticsReport) -> bytes | None:
    """Each flow's loss curve: training and held-out bits/dim against the optimisation step; None without one."""
    curves = [(space.transform, space.loss_curve) for space in report.spaces if space.loss_curve is not None]
    if not curves:
        return None
    fig = Figure(figsize=(8.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    for color, (name, curve) in zip(_COLORS * 4, curves, strict=False):
        steps, train, held = curve[:, 0], curve[:, 1], curve[:, 2]
        ax.plot(steps, train, color=color, lw=1.8, label=f"{name}: training")
        kept = np.isfinite(held)
        if kept.any():
            ax.plot(
                steps[kept], held[kept], color=color, lw=1.8, ls="--", marker="o", ms=3, label=f"{name}: held out"
            )
    ax.set_xlabel("optimisation step")
    ax.set_ylabel("bits per dimension (lower is better)")
    ax.set_title(f"Flow loss curve\n{_who(report)}")
    ax.grid(True, alpha=0.3)
    ax.legend(frameon=False, fontsize=9)
    return _png(fig)


def render_plots(report: DiagnosticsReport) -> dict[str, bytes]:
    """``{name: png bytes}`` for every plot the report's data allows (see ``report.notes`` for the others)."""
    out: dict[str, bytes] = {
        "eigen_spectrum": eigen_spectrum(report),
        "cosine_hist": cosine_hist(report),
        "projection_2d": projection_2d(report),
    }
    optional: dict[str, Any] = {
        "token_norms": token_norms(report),
        "sts_sweep": sts_sweep(report),
        "flow_loss": flow_loss(report),
    }
    out.update({k: v for k, v in optional.items() if v is not None})
    return out
