"""Quality per byte: the Pareto front of retrieval configurations and its plot.

A configuration (transform, encoding) is on the front when no other one has at most its code bytes per vector
and a strictly higher quality (or the same quality for fewer bytes). The plot (matplotlib on an Agg canvas,
never pyplot, as ``whitevec.diagnostics.plots``) draws quality against bytes per vector on a log x axis, one
marker per configuration (colour by transform family, shape by encoding family) and the front as a step line.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from whitevec.evaluation.retrieval import RetrievalScore
from whitevec.utils.io import atomic_path

T = TypeVar("T")
_COLORS = ("#1f5fa8", "#d1495b", "#2a9d55", "#e08a00", "#7b4fa8", "#4d4d4d", "#00a6a6", "#a65628")
_MARKERS = {"float32": "o", "fp16": "D", "sq8": "s", "sq4": "v", "pq": "^", "opq": "P", "faiss": "X"}
_DPI = 110


def pareto_front(items: Sequence[T], cost: Callable[[T], float], quality: Callable[[T], float]) -> list[T]:
    """The items no other item dominates (no more cost and more quality, or less cost and the same quality),
    cheapest first."""
    ordered = sorted(items, key=lambda item: (cost(item), -quality(item)))
    front: list[T] = []
    best = float("-inf")
    for item in ordered:
        if quality(item) > best:
            front.append(item)
            best = quality(item)
    return front


def transform_family(name: str) -> str:
    """``whitening-128:gamma=0.5`` -> ``whitening:gamma=0.5``: the spec without its K (one colour each)."""
    head, _, knobs = name.partition(":")
    stem = head.rsplit("-", 1)[0] if head.rsplit("-", 1)[-1].isdigit() else head
    return stem + (":" + knobs if knobs else "")


def encoding_family(spec: str) -> str:
    """``opq32,pq32x5+refine`` -> ``opq``; ``sq8`` -> ``sq8``; ``faiss:...`` -> ``faiss``."""
    head = spec.split("+")[0].split(":")[0].split(",")[0]
    return "pq" if head.startswith("pq") else "opq" if head.startswith("opq") else head


def plot_frontier(
    scores: Sequence[RetrievalScore],
    out: str | os.PathLike[str] | None = None,
    *,
    title: str = "",
    metric: str = "ndcg_10",
) -> bytes:
    """PNG of ``metric`` (x 100) against code bytes per vector (log x) for ``scores``, the Pareto front drawn;
    written atomically to ``out`` when given. Returns the PNG bytes."""
    fig = Figure(figsize=(9.5, 5.8), layout="constrained")
    ax = fig.add_subplot()
    families = sorted({transform_family(s.transform) for s in scores})
    colors = {family: _COLORS[i % len(_COLORS)] for i, family in enumerate(families)}
    seen: set[str] = set()
    for s in scores:
        family = transform_family(s.transform)
        ax.scatter(
            s.code_bytes,
            100 * getattr(s, metric),
            color=colors[family],
            marker=_MARKERS.get(encoding_family(s.encoding), "x"),
            s=38,
            alpha=0.85,
            label=family if family not in seen else None,
        )
        seen.add(family)
    front = pareto_front(scores, lambda s: s.code_bytes, lambda s: getattr(s, metric))
    xs = [s.code_bytes for s in front]
    ys = [100 * getattr(s, metric) for s in front]
    ax.step(xs, ys, where="post", color="black", lw=1.2, label="Pareto front")
    for s, y in zip(front, ys, strict=True):
        ax.annotate(
            f"{s.transform} / {s.encoding}",
            (s.code_bytes, y),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=7,
        )
    for family, marker in _MARKERS.items():
        if any(encoding_family(s.encoding) == family for s in scores):
            ax.scatter([], [], color="grey", marker=marker, label=f"encoding {family}")
    ax.set_xscale("log")
    ax.set_xlabel("code bytes per vector (log)")
    ax.set_ylabel(f"{metric.replace('_', '@')} x 100")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    if title:
        ax.set_title(title, fontsize=10)
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI)
    png = buffer.getvalue()
    if out is not None:
        with atomic_path(Path(out).expanduser()) as tmp:
            tmp.write_bytes(png)
    return png
