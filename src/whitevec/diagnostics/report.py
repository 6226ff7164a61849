"""``diagnose``: every anisotropy measure for a set of sentences under several transforms, as one report.

The same :class:`DiagnosticsReport` feeds ``metrics.json``, the HTML report and the ``whitevec diagnose`` table,
so the numbers a person reads are the numbers the Python API returns.

Protocol: each transform is fitted on the diagnosed sentences themselves (the "target" protocol of BERT-flow
and BERT-whitening) and the measures are taken on those same sentences after the transform.
"""

from __future__ import annotations

import base64
import html
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from whitevec._io import atomic_path, write_json
from whitevec._version import __version__
from whitevec.diagnostics.frequency import DEFAULT_BUCKETS, DEFAULT_MIN_TYPES, FrequencyLink, frequency_link
from whitevec.diagnostics.metrics import (
    DEFAULT_PAIRS,
    DEFAULT_SEED,
    AlignmentUniformity,
    CosineStats,
    IsoScoreResult,
    Isotropy,
    Spectrum,
    alignment_uniformity,
    check_matrix,
    cosine_stats,
    isoscore,
    isotropy_mu,
    spectrum,
)
from whitevec.errors import BadInputError
from whitevec.evaluation.metrics import non_finite_to_none
from whitevec.transforms import Transform, Whitening, make_transform

if TYPE_CHECKING:
    from whitevec.datasets import Pair, StsTask
    from whitevec.encoder import Encoder

SWEEP_K = (8, 16, 32, 64, 128, 256)
POSITIVE_SCORE = 4.0
MAX_PROJECTED = 3000


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

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types without the projection; ``sts_spearman`` is None when NaN (constant cosines)."""
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


# --- measuring -------------------------------------------------------------------------------------------
def _unique(texts: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(t.strip() for t in texts if isinstance(t, str) and t.strip()))


def _projection(X: np.ndarray, seed: int) -> np.ndarray:
    """Coordinates of (at most MAX_PROJECTED of) the rows on the top two eigenvectors of ``X^T X``.

    Uncentred PCA on purpose: the directions are those I(W) uses, and a common offset of the vectors (the cone)
    shows as a cloud far from the origin at (0, 0); centred PCA would move every cloud onto the origin.
    """
    rows = X
    if len(X) > MAX_PROJECTED:
        rows = X[np.sort(np.random.default_rng(seed).choice(len(X), MAX_PROJECTED, replace=False))]
    _, eigenvectors = np.linalg.eigh(X.T @ X)
    axes = eigenvectors[:, ::-1][:, :2]
    # Fix the signs so the bulk of the cloud lies on the positive side: stable plots across runs.
    signs = np.where((rows @ axes).mean(axis=0) < 0, -1.0, 1.0)
    return np.asarray(rows @ (axes * signs))


def _filtered_task(task: StsTask, keep: set[str]) -> StsTask | None:
    """The task's evaluated subsets restricted to pairs whose two sentences are in ``keep``."""
    from whitevec.datasets import StsTask

    subsets = {
        name: [p for p in pairs if p.sentence1.strip() in keep and p.sentence2.strip() in keep]
        for name, pairs in task.subsets.items()
    }
    subsets = {name: pairs for name, pairs in subsets.items() if len(pairs) >= 2}
    if not subsets:
        return None
    return StsTask(task.name, subsets, task.splits, source=task.source, variant=task.variant)


def _positive_pairs(task: StsTask, keep: set[str] | None) -> list[Pair]:
    seen: set[tuple[str, str]] = set()
    out = []
    for pairs in [*task.splits.values(), *task.subsets.values()]:
        for p in pairs:
            a, b = p.sentence1.strip(), p.sentence2.strip()
            if p.score >= POSITIVE_SCORE and (keep is None or (a in keep and b in keep)) and (a, b) not in seen:
                seen.add((a, b))
                out.append(p)
    return out


def _sts_all(task: StsTask, space: np.ndarray, row_of: Mapping[str, int]) -> float:
    from whitevec.evaluation.sts import score_pairs

    def vectors_of(sentences: list[str]) -> np.ndarray:
        return space[[row_of[s.strip()] for s in sentences]]

    return score_pairs(task, vectors_of)[1]


def _measure(
    label: str,
    space: np.ndarray,
    fit_rows: np.ndarray,
    row_of: Mapping[str, int],
    eval_task: StsTask | None,
    positives: Sequence[Pair],
    fit_seconds: float,
    max_pairs: int,
    seed: int,
) -> SpaceReport:
    X = check_matrix(space[fit_rows], f"vectors after {label!r}")
    au = None
    if positives:
        left = space[[row_of[p.sentence1.strip()] for p in positives]]
        right = space[[row_of[p.sentence2.strip()] for p in positives]]
        au = alignment_uniformity(left, right, vectors=X, max_pairs=max(max_pairs, 1), seed=seed)
    return SpaceReport(
        transform=label,
        n_vectors=X.shape[0],
        dim=X.shape[1],
        fit_seconds=fit_seconds,
        cosine=cosine_stats(X, max_pairs=max_pairs, seed=seed),
        spectrum=spectrum(X),
        isotropy=isotropy_mu(X),
        isoscore=isoscore(X),
        alignment_uniformity=au,
        sts_spearman=None if eval_task is None else _sts_all(eval_task, space, row_of),
        projection=_projection(X, seed),
    )


def diagnose(
    source: Encoder | Mapping[str, Any],
    texts: Sequence[str] | None = None,
    *,
    task: StsTask | None = None,
    transforms: Sequence[str] = ("none", "whitening"),
    max_sentences: int | None = None,
    sweep_k: Sequence[int] | None = SWEEP_K,
    frequency: bool = True,
    n_buckets: int = DEFAULT_BUCKETS,
    min_types_per_bucket: int = DEFAULT_MIN_TYPES,
    max_pairs: int = DEFAULT_PAIRS,
    seed: int = DEFAULT_SEED,
    source_label: str | None = None,
    show_progress: bool | None = None,
    make: Callable[[str], Transform | None] = make_transform,
) -> DiagnosticsReport:
    """Measure anisotropy of sentence vectors raw and under each transform; see the module docstring.

    Args:
        source: an :class:`~whitevec.encoder.Encoder` (texts are encoded, each transform spec in ``transforms``
            is fitted on them), or a mapping ``{label: matrix}`` of vectors already transformed (rows aligned
            with ``texts`` when texts are given; ``"none"`` names the raw vectors used for the k sweep).
        texts: the sentences to diagnose. Default with a ``task``: its evaluated pairs' sentences, then the
            rest of its sentences (all splits), so a ``max_sentences`` cut keeps evaluable pairs.
        task: an STS task: enables alignment/uniformity (pairs scored >= 4), STS Spearman per transform and the
            whitening k sweep.
        max_sentences: keep the first N unique sentences; pairs are then limited to those whose two sentences
            are kept (so at most N sentences are encoded).
        sweep_k: whitening sizes k for the sweep (those <= dim and < number of sentences are used, plus dim).
        frequency: compute the token frequency link (needs an Encoder).
        n_buckets, min_types_per_bucket: frequency buckets, see :mod:`whitevec.diagnostics.frequency`.
        max_pairs, seed: random pairs for the cosine statistics and uniformity.

    Raises:
        BadInputError: no texts and no task, fewer than two sentences, NaN or constant vectors, a bad spec.
    """
    if max_sentences is not None and max_sentences < 2:
        raise BadInputError(f"max_sentences must be at least 2, got {max_sentences}")
    is_encoder = not isinstance(source, Mapping)
    if texts is None:
        if task is None:
            if is_encoder:
                raise BadInputError("diagnose needs texts or an STS task to take sentences from")
        else:
            texts = _unique([*task.evaluated_sentences(), *task.sentences("target")])
    if texts is not None and isinstance(texts, str):
        raise BadInputError("texts must be a sequence of strings, not a single string")
    notes: dict[str, str] = {}
    settings = {
        "transforms": list(transforms),
        "max_sentences": max_sentences,
        "max_pairs": max_pairs,
        "seed": seed,
        "fit_on": "the diagnosed sentences (target protocol)",
        "positive_score": POSITIVE_SCORE,
    }

    if is_encoder:
        encoder: Encoder = source  # type: ignore[assignment]
        assert texts is not None
        fit_texts = _unique(texts)
        if max_sentences is not None and len(fit_texts) > max_sentences:
            fit_texts = fit_texts[:max_sentences]
            notes["sentences"] = f"limited to the first {max_sentences} sentences"
        if len(fit_texts) < 2:
            raise BadInputError(f"diagnose needs at least two distinct non-empty texts, got {len(fit_texts)}")
        keep: set[str] | None = set(fit_texts) if max_sentences is not None else None
        for spec in transforms:
            make(spec)  # reject a bad spec before encoding
        extra: list[str] = []
        if task is not None:
            extra = task.evaluated_sentences()
            extra += [s for p in _positive_pairs(task, keep) for s in (p.sentence1, p.sentence2)]
        every = _unique([*fit_texts, *(extra if keep is None else [])])
        raw = encoder.encode(every, show_progress=show_progress)
        row_of = {t: i for i, t in enumerate(every)}
        fit_rows = np.arange(len(fit_texts))
        check_matrix(raw[fit_rows], "raw sentence vectors")
        spaces: dict[str, tuple[np.ndarray, float]] = {}
        for spec in transforms:
            transform = make(spec)
            started = time.perf_counter()
            if transform is None:
                spaces[spec] = (raw, 0.0)
            else:
                transform.fit(raw[fit_rows])
                spaces[spec] = (np.asarray(transform.transform(raw)), time.perf_counter() - started)
        model_info = encoder.describe()
        label = source_label or "texts"
    else:
        mapping = cast(Mapping[str, Any], source)
        if not mapping:
            raise BadInputError("diagnose got an empty mapping of vectors; give at least one {label: matrix}")
        arrays = {str(k): check_matrix(v, f"vectors {k!r}", allow_constant=True) for k, v in mapping.items()}
        n_rows = {len(a) for a in arrays.values()}
        if texts is not None:
            fit_texts = [t.strip() for t in texts]
            if n_rows != {len(fit_texts)}:
                raise BadInputError(f"{len(fit_texts)} texts for vectors with row counts {sorted(n_rows)}")
        else:
            fit_texts = []
        n = max(n_rows)
        stop = min(n, max_sentences) if max_sentences is not None else n
        fit_rows = np.arange(stop)
        row_of = {t: i for i, t in enumerate(fit_texts[:stop])}
        keep = set(row_of)
        spaces = {k: (a, 0.0) for k, a in arrays.items()}
        model_info = {}
        label = source_label or "vectors"
        encoder = None  # type: ignore[assignment]

    eval_task = positives = None
    if task is not None:
        eval_task = _filtered_task(task, keep if keep is not None else set(row_of))
        positives = _positive_pairs(task, keep if keep is not None else set(row_of))
        if eval_task is None:
            notes["sts"] = "no evaluated pair has both sentences among the diagnosed ones: no STS scores"
        if not positives:
            notes["alignment"] = (
                f"no pair scored >= {POSITIVE_SCORE:g} among the diagnosed sentences: no alignment/uniformity"
            )
    else:
        notes["alignment"] = "alignment/uniformity need positive pairs: give an STS task"

    reports = [
        _measure(name, space, fit_rows, row_of, eval_task, positives or [], secs, max_pairs, seed)
        for name, (space, secs) in spaces.items()
    ]

    sweep = None
    if eval_task is None:
        notes["sweep"] = (
            "STS Spearman against whitening k needs a task with gold scores (--task); skipped for a plain corpus"
            if task is None
            else notes.get("sts", "no evaluable pairs")
        )
    elif "none" not in spaces and "raw" not in spaces and not is_encoder:
        notes["sweep"] = "the k sweep needs the raw vectors (label 'none')"
    elif sweep_k:
        base = spaces["none"][0] if "none" in spaces else spaces["raw"][0] if "raw" in spaces else raw
        dim = base.shape[1]
        ks = sorted({k for k in sweep_k if 0 < k < dim and k < len(fit_rows)} | {dim})
        with warnings.catch_warnings():
            # Near-zero eigenvalues floored: expected when there are fewer sentences than dimensions.
            warnings.simplefilter("ignore")
            whitened = np.asarray(Whitening().fit(base[fit_rows]).transform(base))
        # Whitening keeping k components is the first k columns of full whitening (eigenvalues descending),
        # so one fit serves the whole sweep.
        scores = [_sts_all(eval_task, whitened[:, :k], row_of) for k in ks]
        reference = {r.transform: r.sts_spearman for r in reports if r.sts_spearman is not None}
        sweep = KSweep(eval_task.name, sum(len(p) for p in eval_task.subsets.values()), ks, scores, reference)

    freq = None
    if not frequency:
        notes["frequency"] = "frequency link not computed (turned off)"
    elif encoder is None:
        notes["frequency"] = "the frequency link needs the model and its tokenizer: pass an Encoder"
    else:
        freq = frequency_link(encoder, fit_texts, n_buckets, min_types_per_bucket)
        if not freq.buckets_ok:
            notes["frequency"] = freq.message

    if task is not None:
        label = source_label or f"task {task.name}"
    return DiagnosticsReport(model_info, label, len(fit_rows), reports, freq, sweep, notes, settings)


# --- writing ---------------------------------------------------------------------------------------------
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
    from whitevec.diagnostics.plots import render_plots

    images = render_plots(report)
    for name, png in images.items():
        written[name] = _write(folder / f"{name}.png", png)
    written["report"] = _write(folder / "report.html", render_html(report, images, command).encode("utf-8"))
    return written


def _write(path: Path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return path
