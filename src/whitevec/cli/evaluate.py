"""``whitevec eval``, ``eval-retrieval`` and ``diagnose``: an encoder scored and measured, printed as tables."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

import whitevec.cli._options as _options
from whitevec.cli._options import (
    ConfigOpt,
    DataDirOpt,
    MetricOpt,
    ModelOpt,
    PoolingListOpt,
    PoolingOpt,
    RunOptions,
    StoreOpt,
    TokenFrequenciesOpt,
    TokenWeightsOpt,
    TransformListOpt,
    _check_specs,
    _default_pooling,
    _from_config,
    _token_weights,
    split_list,
    with_run_options,
)
from whitevec.cli._output import FormatOpt, TableFormat, _check_json_file, _print_table, _save_json, _say, _Table
from whitevec.encoders.models.resolution import DEFAULT_MODEL
from whitevec.errors import BadInputError
from whitevec.preflight import check_encoder, check_output, check_output_folder, input_file

if TYPE_CHECKING:
    from whitevec.diagnostics.results import DiagnosticsReport
    from whitevec.evaluation.retrieval import RetrievalReport
    from whitevec.evaluation.sts import StsReport


@with_run_options
def eval_command(
    model: ModelOpt = DEFAULT_MODEL,
    pooling: PoolingListOpt = None,
    transform: TransformListOpt = "none,whitening,whitening-256",
    fit_on: Annotated[
        str, typer.Option("--fit-on", help="target, train, or a text file (one sentence a line).")
    ] = "target",
    tasks: Annotated[
        str, typer.Option("--tasks", help="Comma list of STS tasks.")
    ] = "stsb,sts12,sts13,sts14,sts15",
    pairs: Annotated[Path | None, typer.Option("--pairs", help="Also evaluate a pairs file (TSV/CSV/JSONL).")] = (
        None
    ),
    data_dir: DataDirOpt = None,
    variant: Annotated[str, typer.Option("--variant", help="original or senteval-tokenized text.")] = "original",
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the full results as JSON here.")] = None,
    table_format: FormatOpt = TableFormat.auto,
    config: ConfigOpt = None,
    token_weights: TokenWeightsOpt = None,
    token_frequencies: TokenFrequenciesOpt = None,
    *,
    run: RunOptions,
) -> None:
    """Spearman x 100 on STS tasks, raw and transformed: all / mean / wmean side by side. With --config, its
    encoding too: vectors stored with a compressed encoding are decoded before the cosines, as tune scored them."""
    from whitevec.datasets import load_sts_task, read_pairs_file

    encoding = "float32"
    if config is not None:
        model, pooling, transform, encoding, run = _from_config(
            config, eval_command, run, model=model, pooling=pooling, transform=transform
        )
        _note_search_not_scored(config)

    loaded = [load_sts_task(name, data_dir=data_dir, variant=variant) for name in split_list(tasks)]
    if pairs is not None:
        loaded.append(read_pairs_file(pairs))
    input_file(fit_on, "--fit-on file", keywords=("target", "train"))
    _check_json_file(json_out)
    for task in loaded:
        task.check_scores_vary()  # a constant subset's correlation is NaN: refused before the model loads
    check_encoder(model, run.cache)
    from whitevec.evaluation.sts import evaluate_sts_poolings

    poolings = split_list(pooling) if pooling else [_default_pooling(model, "first-last-avg")]
    transforms = split_list(transform)
    _check_specs(model, poolings, transforms)
    weights = _token_weights(token_weights, token_frequencies, model, poolings)
    with _options._encoder(**run.encoder(model, poolings[0], *weights)) as encoder:
        report = evaluate_sts_poolings(
            encoder, poolings, loaded, transforms, fit_on, run.show_progress, encoding=encoding
        )
    _print_table(_sts_table(report, f"STS Spearman x 100 - {model} (transform fitted on {fit_on})"), table_format)
    for name in poolings:  # what ran: a name like "model" says little without the folder's modules
        _say(table_format, f"pooling {encoder.describe_pooling(name)}; max_length {encoder.max_length}")
    for line in _unknown_pairs_notes(report):
        typer.echo(f"note: {line}", err=True)
    _save_json(report, json_out)


def _unknown_pairs_notes(report: StsReport) -> list[str]:
    """A line per task with pairs holding a sentence with no token the model knows (scored 0)."""
    counts = {(s.task, sum(sub.n_pairs for sub in s.subsets)): s.unknown_pairs for s in report.scores}
    return [
        f"{task}: {unknown} of {total} pairs have a sentence with no token the model knows; their similarity is 0"
        for (task, total), unknown in counts.items()
        if unknown
    ]


@with_run_options
def diagnose_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for report.html, the PNG plots, metrics.json.")],
    model: ModelOpt = DEFAULT_MODEL,
    pooling: PoolingOpt = None,
    task: Annotated[
        str | None,
        typer.Option("--task", help="STS task name (stsb, sts12, ...) or a scored pairs file."),
    ] = None,
    corpus: Annotated[
        Path | None,
        typer.Option("--corpus", help="Text file, one sentence a line (instead of --task)."),
    ] = None,
    transform: TransformListOpt = "none,whitening",
    data_dir: DataDirOpt = None,
    max_sentences: Annotated[
        int | None, typer.Option("--max-sentences", help="Diagnose only the first N sentences.")
    ] = None,
    min_types_per_bucket: Annotated[
        int, typer.Option("--min-types-per-bucket", help="Token types a frequency bucket needs to be shown.")
    ] = 20,
    json_only: Annotated[bool, typer.Option("--json-only", help="Write metrics.json only (no plots).")] = False,
    table_format: FormatOpt = TableFormat.auto,
    token_weights: TokenWeightsOpt = None,
    token_frequencies: TokenFrequenciesOpt = None,
    *,
    run: RunOptions,
) -> None:
    """Measure anisotropy raw and per transform; write an HTML report with plots and metrics.json."""
    from whitevec.datasets import load_sts_task, read_pairs_file, read_texts_file

    if (task is None) == (corpus is None):
        raise BadInputError("give exactly one of --task NAME (or pairs file) or --corpus FILE.txt")
    loaded = None
    texts = None
    if task is not None:
        loaded = read_pairs_file(task) if Path(task).is_file() else load_sts_task(task, data_dir=data_dir)
    else:
        assert corpus is not None
        texts = read_texts_file(corpus)
    check_output_folder(out, "--out folder")
    check_encoder(model, run.cache)
    from whitevec.diagnostics import diagnose, write_report

    _check_specs(model, [pooling] if pooling else [], split_list(transform))
    weights = _token_weights(token_weights, token_frequencies, model, [pooling])
    with _options._encoder(**run.encoder(model, pooling, *weights)) as encoder:
        report = diagnose(
            encoder,
            texts,
            task=loaded,
            transforms=split_list(transform),
            max_sentences=max_sentences,
            min_types_per_bucket=min_types_per_bucket,
            source_label=None if corpus is None else f"corpus {corpus.name}",
            show_progress=run.show_progress,
        )
    written = write_report(report, out, json_only=json_only, command="whitevec " + " ".join(sys.argv[1:]))
    title = f"Anisotropy - {model}, {encoder.pooling.name}, {report.n_sentences} sentences"
    _print_table(_anisotropy_table(report, title), table_format)
    for key, note in report.notes.items():
        typer.echo(f"note ({key}): {note}", err=True)
    typer.echo(f"wrote {', '.join(str(p) for p in written.values())}", err=True)


EvalModeOpt = Annotated[
    str | None,
    typer.Option(
        "--mode",
        help="Comma list of search modes: dense, lexical (BM25 alone: one row), hybrid (a row per --fusion). "
        "Default: dense.",
    ),
]
EvalFusionOpt = Annotated[
    str | None,
    typer.Option(
        "--fusion",
        help="Comma list of hybrid fusions: rrf, rrf:K, convex, convex:ALPHA. Default: convex:0.5, an "
        "index's own default.",
    ),
]
EvalAnalyzerOpt = Annotated[
    str | None,
    typer.Option(
        "--analyzer", help="The lexical rows' analyzer: english, cjk-bigram, plain, encoder. Default: english."
    ),
]


@with_run_options
def eval_retrieval_command(
    model: ModelOpt = DEFAULT_MODEL,
    pooling: PoolingListOpt = None,
    transform: Annotated[
        str, typer.Option("--transform", "-t", help="Comma list: none, whitening, whitening-K, center, ...")
    ] = "none,whitening,whitening-128,whitening-256",
    dataset: Annotated[str, typer.Option("--dataset", help="cranfield, or a BEIR-style folder.")] = "cranfield",
    data_dir: DataDirOpt = None,
    fit_on: Annotated[str, typer.Option("--fit-on", help="corpus, or a text file.")] = "corpus",
    kind: Annotated[str, typer.Option("--kind", help="flat, hnsw or ivf.")] = "flat",
    metric: MetricOpt = "cosine",
    backend: StoreOpt = "faiss",
    uri: Annotated[
        str | None, typer.Option("--uri", help="Milvus: a folder for Lite .db files, or a server URI.")
    ] = None,
    latency_queries: Annotated[
        int, typer.Option("--latency-queries", help="Single queries timed (0: no timing, no QPS).")
    ] = 100,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report as JSON here.")] = None,
    table_format: FormatOpt = TableFormat.auto,
    encoding: Annotated[
        str,
        typer.Option(
            "--encoding",
            help="Comma list of encodings: float32, fp16, sq8, sq4, pqM, pqMxB, opqM,pqM, binary, rabitq, "
            "...+rescore, ... (';' between faiss:FACTORY strings).",
        ),
    ] = "float32",
    plot: Annotated[
        Path | None, typer.Option("--plot", help="PNG of nDCG@10 against bytes per vector, Pareto front drawn.")
    ] = None,
    mode: EvalModeOpt = None,
    fusion: EvalFusionOpt = None,
    analyzer: EvalAnalyzerOpt = None,
    config: ConfigOpt = None,
    *,
    run: RunOptions,
) -> None:
    """Retrieval quality per configuration (transform x encoding): nDCG@10, R@100, MRR@10, code bytes per
    vector in memory (and on disk, for +rescore), index bytes, build time, p50/p99 latency with and without query
    encoding, batched QPS. With --mode, lexical (BM25) and hybrid rows beside the dense ones (not timed). With
    --config, the tuned configuration's row: its model, pooling, transform and encoding, and its search mode
    (a lexical or hybrid configuration adds that row, with its fusion and analyzer, beside its dense one)."""
    from whitevec.workflows import evaluate_retrieval_dataset

    if config is not None:
        model, pooling, transform, encoding, mode, fusion, analyzer, run = _retrieval_config(
            config, run, model, pooling, transform, encoding, mode, fusion, analyzer
        )
    _check_json_file(json_out)
    if plot is not None:
        check_output(plot, "--plot file")
    report = evaluate_retrieval_dataset(
        dataset,
        split_list(transform),
        encoder=run.encoder(model, None),
        poolings=None if pooling is None else split_list(pooling),
        encodings=encoding,
        fit_on=fit_on,
        kind=kind,
        metric=metric,
        backend=backend,
        uri=uri,
        latency_queries=latency_queries,
        data_dir=data_dir,
        show_progress=run.show_progress,
        make_encoder=_options._encoder,
        modes=None if mode is None else split_list(mode),
        fusions=None if fusion is None else split_list(fusion),
        analyzer=analyzer,
    )
    title = f"{report.dataset} retrieval - {model} ({kind}/{metric}/{backend}, fitted on {fit_on})"
    _print_table(_retrieval_table(report, title), table_format)
    _say(table_format, _retrieval_summary(report))
    for note in report.notes:
        typer.echo(f"note: {note}", err=True)
    if plot is not None:
        _plot_retrieval(report, plot, model)
    _save_json(report, json_out)


def _plot_retrieval(report: RetrievalReport, plot: Path, model: str) -> None:
    from whitevec.evaluation.frontier import plot_frontier

    dense = [s for s in report.scores if s.mode == "dense"]  # bytes per vector: the dense rows' measure
    plot_frontier(dense or report.scores, plot, title=f"{report.dataset}: nDCG@10 per byte - {model}")
    typer.echo(f"wrote {plot}", err=True)


def _retrieval_config(
    config: Path,
    run: RunOptions,
    model: str,
    pooling: str | None,
    transform: str,
    encoding: str,
    *search: str | None,
) -> tuple[str, str, str, str, str | None, str | None, str | None, RunOptions]:
    """eval-retrieval's options with a tuned configuration applied: its model, pooling, transform and encoding
    (others refused where they contradict it), and its search (:func:`_config_search`)."""
    model, pooling, transform, encoding, run = _from_config(
        config, eval_retrieval_command, run, model=model, pooling=pooling, transform=transform, encoding=encoding
    )
    return model, pooling, transform, encoding, *_config_search(config, *search), run


def _note_search_not_scored(config: Path) -> None:
    """STS scores a configuration's vectors; a lexical or hybrid search it names is for eval-retrieval."""
    from whitevec.tuning.config import TunedConfig

    tuned = TunedConfig.load(config)
    if tuned.mode != "dense":
        search = tuned.mode + (f" {tuned.fusion}" if tuned.mode == "hybrid" else "")
        typer.echo(
            f"note: {config} searches {search}; STS pairs score its vectors alone (eval-retrieval --config scores "
            "its search)",
            err=True,
        )


def _config_search(
    config: Path, mode: str | None, fusion: str | None, analyzer: str | None
) -> tuple[str | None, str | None, str | None]:
    """--mode, --fusion and --analyzer with a tuned configuration: its search added (a lexical or hybrid
    configuration scores that row beside its dense one); given options may add rows, never leave its own out."""
    from whitevec.index.search.fusion import parse_fusion
    from whitevec.tuning.config import ConfigMismatchError, TunedConfig

    tuned = TunedConfig.load(config)
    if tuned.mode == "dense":
        return mode, fusion, analyzer
    modes = split_list(mode) if mode is not None else ["dense", tuned.mode]
    fusions = split_list(fusion) if fusion is not None else []
    own_fusion = parse_fusion(tuned.fusion).spec
    wanted = [
        ("--mode", tuned.mode, [m.strip().lower() for m in modes]),
        ("--analyzer", tuned.analyzer, [analyzer.strip().lower()] if analyzer is not None else [tuned.analyzer]),
    ]
    if tuned.mode == "hybrid":
        wanted.append(
            ("--fusion", own_fusion, [parse_fusion(f).spec for f in fusions] if fusions else [own_fusion])
        )
    for option, own, given in wanted:
        if own not in given:
            raise ConfigMismatchError(
                f"{option} {','.join(given)} leaves out the tuned configuration's {own!r} ({config}); leave "
                f"{option} out, or add {own} to it"
            )
    own_fusions = (fusion or own_fusion) if tuned.mode == "hybrid" else fusion
    return ",".join(modes), own_fusions, analyzer or tuned.analyzer


def _sts_table(report: StsReport, title: str) -> _Table:
    """A row per task, pooling and transform (with its encoding, when not float32): all / mean / wmean."""
    table = _Table(
        title,
        ("task", "pooling", "transform", "pairs", "all", "mean", "wmean"),
        text=("task", "pooling", "transform"),
        formats=dict.fromkeys(("all", "mean", "wmean"), ".2f"),
    )
    for score in report.scores:
        table.add_row(
            score.task,
            score.pooling,
            score.transform + ("" if score.encoding == "float32" else f" / {score.encoding}"),
            sum(s.n_pairs for s in score.subsets),
            score.all,
            score.mean,
            score.wmean,
        )
    return table


# The anisotropy table: column -> (summary key, format).
_ANISOTROPY = {
    "mean cos": ("mean_cosine", ".3f"),
    "eff. rank": ("effective_rank", ".1f"),
    "top-1 var": ("top1_share", ".1%"),
    "I(W)": ("isotropy_iw", ".3g"),
    "IsoScore": ("isoscore", ".3f"),
    "align": ("alignment", ".3f"),
    "unif": ("uniformity", ".3f"),
    "STS": ("sts_spearman", ".2f"),
}


def _anisotropy_table(report: DiagnosticsReport, title: str) -> _Table:
    """A row per transform (raw first): the anisotropy measures of its vectors."""
    table = _Table(
        title,
        ("transform", *_ANISOTROPY),
        text=("transform",),
        formats={column: spec for column, (_, spec) in _ANISOTROPY.items()},
    )
    for row in report.summary():
        table.add_row(row["transform"], *(row[key] for key, _ in _ANISOTROPY.values()))
    return table


# The retrieval table: column -> format.
_RETRIEVAL = {
    "pooling": "",
    "transform": "",
    "encoding": "",
    "dim": "",
    "bytes/vec": ",",
    **dict.fromkeys(("nDCG@10", "R@100", "MRR@10"), ".2f"),
    "index bytes": ",",
    "build s": ".2f",
    **dict.fromkeys(("p50 search ms", "p99 search ms"), ".3f"),
    **dict.fromkeys(("p50 query ms", "p99 query ms"), ".1f"),
    "QPS": ",.0f",
}


def _retrieval_table(report: RetrievalReport, title: str) -> _Table:
    """A row per configuration: quality in percent, sizes (bytes a vector on disk beside those in memory when an
    encoding rescores), build time, latencies and QPS."""
    disk = any(s.disk_bytes for s in report.scores)
    columns = list(_RETRIEVAL)
    if disk:
        columns.insert(columns.index("bytes/vec") + 1, "disk B/vec")
    formats = {**_RETRIEVAL, "disk B/vec": ","}
    table = _Table(title, tuple(columns), text=("pooling", "transform", "encoding"), formats=formats)
    for s in report.scores:
        table.add_row(
            *(s.pooling, s.transform, s.encoding, s.dim, s.code_bytes, *([s.disk_bytes] if disk else [])),
            *(100 * v for v in (s.ndcg_10, s.recall_100, s.mrr_10)),
            *(s.index_bytes, s.build_s, s.p50_search_ms, s.p99_search_ms, s.p50_query_ms, s.p99_query_ms, s.qps),
        )
    return table


def _retrieval_summary(report: RetrievalReport) -> str:
    """What the columns mean, and the Pareto front of nDCG@10 against code bytes."""
    from whitevec.evaluation.frontier import pareto_front

    dense = [s for s in report.scores if s.mode == "dense"]  # lexical and hybrid rows: no bytes-per-vector trade
    front = pareto_front(dense, lambda s: s.code_bytes, lambda s: s.ndcg_10)
    return (
        f"{report.scores[0].n_queries} queries, {report.scores[0].n_docs} documents; quality in percent. "
        "bytes/vec = code bytes of one vector in memory (disk B/vec: its rescoring vector on disk). search ms = "
        "search + fetch of one embedded query; query ms = "
        "encode (no cache) + transform + search + fetch; QPS = all queries in one batch. build s excludes the "
        f"one-off corpus encoding ({', '.join(f'{k}: {v:.1f} s' for k, v in report.corpus_encode_s.items())}).\n"
        "Pareto front (nDCG@10 per byte): "
        + ", ".join(f"{s.label} ({s.code_bytes} B, {100 * s.ndcg_10:.2f})" for s in front)
    )
