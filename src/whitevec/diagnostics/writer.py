"""Writing a diagnostics report: ``metrics.json``, the PNG plots and a self-contained ``report.html``.

The page shows the numbers of :meth:`DiagnosticsReport.summary`, the same ones ``metrics.json`` holds.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.diagnostics.results import DiagnosticsReport
from whitevec.utils.io import atomic_path

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1.2em;color:#1d2329;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #dde;
padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #d4d8de;padding:.3em .7em;text-align:right}th{background:#f1f3f6}
td:first-child,th:first-child{text-align:left}
.meta td{text-align:left}.note{background:#fff6e0;border-left:4px solid #e0a800;padding:.6em 1em;margin:.8em 0}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #e4e6ea}figcaption{color:#555;font-size:.9em}
code{background:#f3f4f6;padding:0 .25em;border-radius:3px}
"""

_ROWS = (
    ("mean_cosine", "mean cosine of random pairs", "{:.3f}"),
    ("std_cosine", "std of cosine", "{:.3f}"),
    ("top1_share", "variance share, top 1 direction", "{:.1%}"),
    ("top10_share", "variance share, top 10", "{:.1%}"),
    ("top100_share", "variance share, top 100", "{:.1%}"),
    ("effective_rank", "effective rank", "{:.1f}"),
    ("isotropy_iw", "I(W) (Mu & Viswanath)", "{:.3g}"),
    ("log_z_ratio", "log I(W) = log Z_min - log Z_max", "{:.2f}"),
    ("isoscore", "IsoScore", "{:.3f}"),
    ("alignment", "alignment (pairs scored >= 4)", "{:.3f}"),
    ("uniformity", "uniformity (t = 2)", "{:.3f}"),
    ("sts_spearman", "STS Spearman x 100 (all)", "{:.2f}"),
)

_CAPTIONS = {
    "eigen_spectrum": "Share of variance per principal direction (log scale). A steep head means a few directions "
    "dominate (anisotropy); whitening flattens it.",
    "cosine_hist": "Cosine similarity of random pairs of different sentences. Raw vectors sit in a cone: all "
    "cosines are high; an isotropic space centres them on 0.",
    "projection_2d": "Sentence vectors on the top two eigenvectors of X^T X (uncentred PCA, the directions I(W) "
    "uses). A cloud far from the origin (cross) means the vectors share a common direction: the cone.",
    "token_norms": "L2 norm of each token type against its corpus frequency (log); line: mean norm per "
    "log-spaced frequency bucket.",
    "flow_loss": "The flow's loss curve: mean training bits/dim between checks (solid) and held-out bits/dim "
    "(dashed), against the optimisation step. A held-out curve that flattens means the fit converged.",
    "sts_sweep": "STS Spearman x 100 of whitening keeping k components, fitted on the diagnosed sentences; "
    "dashed lines: the report's transforms.",
}


def _format(value: Any, pattern: str) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "-"
    return pattern.format(value)


def render_html(report: DiagnosticsReport, images: Mapping[str, bytes], command: str | None = None) -> str:
    """The self-contained HTML page (PNGs inlined as base64 data URIs)."""
    esc = html.escape
    model = report.model.get("model", "(vectors)")
    pooling = report.model.get("pooling", "-")
    rows = report.summary()
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>whitevec diagnostics: {esc(str(model))}</title><style>{_CSS}</style></head><body>",
        f"<h1>Anisotropy diagnostics: {esc(str(model))}</h1>",
        "<table class='meta'>",
        f"<tr><th>model</th><td>{esc(str(model))}</td></tr>",
        f"<tr><th>pooling</th><td>{esc(str(pooling))}</td></tr>",
        f"<tr><th>sentences</th><td>{report.n_sentences} ({esc(report.source)})</td></tr>",
        f"<tr><th>transforms fitted on</th><td>{esc(str(report.settings.get('fit_on', '-')))}</td></tr>",
        f"<tr><th>whitevec</th><td>{esc(report.whitevec)}</td></tr>",
    ]
    if command:
        parts.append(f"<tr><th>command</th><td><code>{esc(command)}</code></td></tr>")
    parts.append("</table>")
    parts.append("<h2>Measures</h2><table><tr><th>measure</th>")
    parts += [f"<th>{esc(r['transform'])} (d={r['dim']})</th>" for r in rows]
    parts.append("</tr>")
    for key, name, pattern in _ROWS:
        if all(r[key] is None for r in rows):
            continue
        parts.append(f"<tr><td>{esc(name)}</td>" + "".join(f"<td>{_format(r[key], pattern)}</td>" for r in rows))
        parts.append("</tr>")
    parts.append("</table>")
    freq = report.frequency
    if freq is not None:
        parts.append(
            "<h2>Token frequency and norm</h2><table><tr><th>norm</th><th>Spearman rho with frequency</th>"
            "<th>token types</th></tr>"
        )
        for link in (freq.static, freq.contextual):
            rho = "-" if link.spearman is None else f"{link.spearman:+.3f}"
            parts.append(f"<tr><td>{link.kind}</td><td>{rho}</td><td>{link.n_types}</td></tr>")
        parts.append(f"</table><p>{freq.n_tokens} tokens in {freq.n_sentences} sentences.</p>")
    for key, text in report.notes.items():
        parts.append(f"<div class='note'><b>{esc(key)}:</b> {esc(text)}</div>")
    parts.append("<h2>Plots</h2>")
    for name, png in images.items():
        data = base64.b64encode(png).decode("ascii")
        caption = _CAPTIONS.get(name, "")
        parts.append(
            f"<figure id='{esc(name)}'><img alt='{esc(name)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{esc(caption)}</figcaption></figure>"
        )
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(
    report: DiagnosticsReport,
    out: str | os.PathLike[str],
    json_only: bool = False,
    command: str | None = None,
) -> dict[str, Path]:
    """Write ``metrics.json`` and (unless ``json_only``) the PNG plots and ``report.html`` into ``out``.

    Every file is written atomically. Returns ``{name: path}`` of what was written.
    """
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {"metrics": report.save_json(folder / "metrics.json")}
    if json_only:
        return written
    from whitevec.diagnostics.plots import render_plots  # matplotlib loads only when plots are written

    images = render_plots(report)
    for name, png in images.items():
        written[name] = _write(folder / f"{name}.png", png)
    written["report"] = _write(folder / "report.html", render_html(report, images, command).encode("utf-8"))
    return written


def _write(path: Path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return path
