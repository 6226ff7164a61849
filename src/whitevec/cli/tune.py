"""``whitevec tune``: pooling, transform and index encoding chosen on labelled dev data."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from whitevec.cli._options import (
    DataDirOpt,
    PoolingListOpt,
    RunOptions,
    _default_pooling,
    split_list,
    with_run_options,
)
from whitevec.cli._output import FormatOpt, TableFormat, _check_json_file, _print_table, _save_json, _say, _Table
from whitevec.encoders.models.resolution import DEFAULT_MODEL
from whitevec.preflight import check_output

if TYPE_CHECKING:
    from whitevec.tuning import TuneResult

# Options of tune alone, one line each in its signature.
TuneOutOpt = Annotated[Path, typer.Option("--out", "-o", help="Where to write the tuned configuration (JSON).")]
TuneModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model alias, folder or hub id; a comma list.")]
TaskOpt = Annotated[
    str | None,
    typer.Option("--task", help="STS task: tuned on its dev/valid split, tested on test (SemEval: k-fold)."),
]
PairsOpt = Annotated[Path | None, typer.Option("--pairs", help="Dev pairs file (TSV/CSV/JSONL, scored).")]
TestPairsOpt = Annotated[Path | None, typer.Option("--test-pairs", help="Separate test pairs file.")]
DatasetOpt = Annotated[
    str | None, typer.Option("--dataset", help="Retrieval: cranfield or a BEIR-style folder (query folds).")
]
TuneFitOnOpt = Annotated[
    str,
    typer.Option("--fit-on", help="target (the task's or pairs' sentences; a dataset's corpus) or a text file."),
]
CandidatesOpt = Annotated[
    str, typer.Option("--candidates", help="'default' (the grid) or a comma list of transform specs.")
]
NoFlowOpt = Annotated[bool, typer.Option("--no-flow", help="Leave flow out of the default grid.")]
EncodingsOpt = Annotated[
    str,
    typer.Option(
        "--encodings",
        help="Index encodings to search, comma list (float32, fp16, sq8, sq4, pqM, pqMxB, opqM,pqM, binary, "
        "binary-rr, itq, rabitq, any lossy one +rescore), or all. float32 is always scored.",
    ),
]
ModesOpt = Annotated[
    str | None,
    typer.Option(
        "--modes",
        help="How the candidates search, comma list: dense, lexical (BM25 alone), hybrid (each transform and "
        "encoding fused with BM25 by rrf:60 and convex:0.3..0.8). Default: all three for --dataset, dense for "
        "pairs (which take dense only). The baseline is always plain dense.",
    ),
]
TuneAnalyzerOpt = Annotated[
    str,
    typer.Option(
        "--analyzer",
        help="How the lexical candidates cut texts into terms: english (stop words, Snowball stemmer), plain or "
        "cjk-bigram; index build --config builds the lexical part with it.",
    ),
]
TuneMetricOpt = Annotated[
    str | None, typer.Option("--metric", help="spearman (pairs); ndcg@10 (default), recall@K, mrr@K, map.")
]
MaxBytesOpt = Annotated[
    int | None,
    typer.Option(
        "--max-bytes-per-vector",
        help="Score and choose only configurations whose code bytes a vector in memory fit (+rescore's vectors "
        "on disk not counted).",
    ),
]
MaxSecondsOpt = Annotated[
    float | None,
    typer.Option(
        "--max-seconds",
        help="Stop fitting new candidates once this many seconds have passed since the run began (encoding "
        "included).",
    ),
]
FoldsOpt = Annotated[int, typer.Option("--folds", help="k of the k-fold check without test data.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of folds and bootstrap resamples.")]
BootstrapOpt = Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples.")]
TuneJsonOpt = Annotated[Path | None, typer.Option("--json", help="Write every candidate's figures here.")]
PseudoQueriesOpt = Annotated[
    int | None,
    typer.Option(
        "--pseudo-queries",
        help="Without labels: cut N pseudo-queries (a sentence each) from --corpus and choose the hybrid fusion "
        "on them; the transform stays none.",
    ),
]
TuneCorpusOpt = Annotated[
    Path | None, typer.Option("--corpus", help="The corpus --pseudo-queries cuts from (as index build reads it).")
]
TunePlotOpt = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        help="PNG: dev score against bytes per vector (default with several encodings: next to --out, .png).",
    ),
]


@with_run_options
def tune_command(
    out: TuneOutOpt,
    model: TuneModelOpt = DEFAULT_MODEL,
    pooling: PoolingListOpt = None,
    task: TaskOpt = None,
    pairs: PairsOpt = None,
    test_pairs: TestPairsOpt = None,
    dataset: DatasetOpt = None,
    fit_on: TuneFitOnOpt = "target",
    candidates: CandidatesOpt = "default",
    no_flow: NoFlowOpt = False,
    encodings: EncodingsOpt = "float32",
    modes: ModesOpt = None,
    analyzer: TuneAnalyzerOpt = "english",  # = DEFAULT_ANALYZER; whitevec.index is too heavy for start-up
    metric: TuneMetricOpt = None,
    max_bytes_per_vector: MaxBytesOpt = None,
    max_seconds: MaxSecondsOpt = None,
    folds: FoldsOpt = 5,
    seed: SeedOpt = 0,
    n_boot: BootstrapOpt = 1000,
    data_dir: DataDirOpt = None,
    json_out: TuneJsonOpt = None,
    table_format: FormatOpt = TableFormat.auto,
    plot: TunePlotOpt = None,
    pseudo_queries: PseudoQueriesOpt = None,
    corpus: TuneCorpusOpt = None,
    *,
    run: RunOptions,
) -> None:
    """Choose pooling, transform, index encoding and, on retrieval data, the search mode and fusion on your
    labelled dev data; keep plain dense none unless a gain is significant. Writes the choice as a tuned
    configuration for index build / eval --config. Without labels, --pseudo-queries N --corpus FILE chooses
    the hybrid fusion on pseudo-queries cut from the corpus."""
    if pseudo_queries is not None or corpus is not None:
        given = {"--task": task, "--pairs": pairs, "--dataset": dataset, "--json": json_out, "--plot": plot}
        _tune_label_free(pseudo_queries, corpus, out, model, pooling, analyzer, seed, given, run)
        return
    from whitevec.workflows import load_tuning_data

    data = load_tuning_data(
        task=task, pairs=pairs, test_pairs=test_pairs, dataset=dataset, fit_on=fit_on, data_dir=data_dir
    )
    check_output(out, "--out file")
    _check_json_file(json_out)
    encoding_list, plot = _encodings_and_plot(encodings, out, plot)
    from whitevec.tuning import tune

    models = split_list(model)
    result = tune(
        data.dev,
        models=models,
        poolings=split_list(pooling)
        if pooling is not None
        else [_default_pooling(m, "last-avg") for m in models[:1]],
        fit_texts=data.fit_texts,
        test=data.test,
        transforms=None if candidates.strip().lower() == "default" else split_list(candidates),
        encodings=encoding_list,
        modes=None if modes is None else split_list(modes),
        analyzer=analyzer,
        metric=metric,
        folds=folds,
        seed=seed,
        n_boot=n_boot,
        max_bytes_per_vector=max_bytes_per_vector,
        max_seconds=max_seconds,
        include_flow=not no_flow,
        encoder_options=run.encoder_options(),
        show_progress=run.show_progress,
    )
    _print_table(_candidates_table(result, several_models=len(models) > 1), table_format)
    _print_choice(result, table_format)
    result.save_config(out)
    typer.echo(f"wrote {out}", err=True)
    _save_json(result, json_out)
    if plot is not None:
        result.plot(plot)
        typer.echo(f"wrote {plot}", err=True)


def _encodings_and_plot(encodings: str, out: Path, plot: Path | None) -> tuple[list[str], Path | None]:
    """The --encodings checked, and the --plot file checked: by default, with several encodings, next to --out
    (the quality-per-byte picture is then part of the answer)."""
    from whitevec.index.encodings.spec import split_encoding_list
    from whitevec.tuning.space import check_encodings

    encoding_list = check_encodings(split_encoding_list(encodings))
    if plot is None and len(encoding_list) > 1:
        plot = out.with_suffix(".png")
    if plot is not None:
        check_output(plot, "--plot file")
    return encoding_list, plot


def _candidates_table(result: TuneResult, several_models: bool) -> _Table:
    """A row per candidate, the chosen one marked '* '; the mode column (with a hybrid's fusion) only when
    lexical or hybrid candidates were tuned, the model column only when several were tuned, the disk
    bytes (a +rescore encoding's vectors on disk) only when a candidate has them, the test column only with test
    data."""
    disk = any(row.disk_bytes_per_vector for row in result.candidates)
    searched = any(row.mode != "dense" for row in result.candidates)
    columns = (
        *(("model",) if several_models else ()),
        "pooling",
        "transform",
        "encoding",
        *(("mode",) if searched else ()),
        "dim",
        "bytes",
        *(("disk bytes",) if disk else ()),
        "fit s",
        "encode ms/1k",
        "dev",
        "gain",
        "95% interval",
        "sig",
        *(("test",) if result.n_test else ()),
    )
    items = "pairs" if result.kind == "sts" else "queries"
    table = _Table(
        f"whitevec tune - {result.metric} x 100 on {result.n_dev} dev {items}",
        columns,
        text=("model", "pooling", "transform", "encoding", "mode", "sig"),
        formats={
            "bytes": ",",
            "disk bytes": ",",
            "fit s": ".2f",
            "encode ms/1k": ",.1f",
            "dev": ".2f",
            "gain": "+.2f",
            "test": ".2f",
        },
    )
    for row in result.candidates:
        table.add_row(
            *([row.model] if several_models else []),
            row.pooling,
            ("* " if row.chosen else "") + row.transform,
            row.encoding,
            *([f"{row.mode} {row.fusion}".strip()] if searched else []),
            row.dim,
            row.bytes_per_vector,
            *([row.disk_bytes_per_vector] if disk else []),
            row.fit_seconds,
            row.encode_ms_per_1000,
            row.dev if row.status == "scored" else row.status,
            row.gain,
            None if row.low is None else f"[{row.low:+.2f}, {row.high:+.2f}]",
            "yes" if row.significant else "",
            *([row.test] if result.n_test else []),
        )
    return table


def _print_choice(result: TuneResult, table_format: TableFormat) -> None:
    """The choice and its gain, its check on test data or held-out folds, and the notes (on stderr)."""
    chosen = result.chosen
    _say(
        table_format,
        f"chosen: {chosen.candidate.label} ({chosen.bytes_per_vector:,} bytes per vector"
        + (f" in memory, {chosen.disk_bytes_per_vector:,} on disk" if chosen.disk_bytes_per_vector else "")
        + "); dev gain over none "
        f"{chosen.gain:+.2f} [{chosen.low:+.2f}, {chosen.high:+.2f}]"
        + ("" if chosen.significant or chosen is result.baseline else " (not significant: chosen for the budget)"),
    )
    check = result.check_summary()
    if check is not None:
        side = "test" if result.n_test else f"held-out folds ({len(result.checks)}-fold)"
        _say(table_format, f"on {side}: raw {check['raw']:.2f}, tuned {check['tuned']:.2f} ({check['gain']:+.2f})")
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)


def _tune_label_free(
    n: int | None,
    corpus: Path | None,
    out: Path,
    model: str,
    pooling: str | None,
    analyzer: str,
    seed: int,
    given: Mapping[str, object],
    run: RunOptions,
) -> None:
    """``tune --pseudo-queries N --corpus FILE``: checked before any model loads (one line each), then the fusion
    chosen on the pseudo-queries and written as a tuned configuration."""
    from whitevec.errors import BadInputError
    from whitevec.index.search.pseudo_queries import check_pseudo_count
    from whitevec.tuning.searches import check_tune_analyzer

    count = None if n is None else check_pseudo_count(n)
    if count is None or corpus is None:
        raise BadInputError("--pseudo-queries N and --corpus FILE go together (tune without labels)")
    clash = [name for name, value in given.items() if value is not None]
    if clash:
        raise BadInputError(f"--pseudo-queries tunes without labels; leave out {', '.join(clash)}")
    if (pooling is not None and len(split_list(pooling)) > 1) or len(split_list(model)) > 1:
        raise BadInputError("--pseudo-queries chooses the fusion of one model and pooling; give one of each")
    analyzer = check_tune_analyzer(analyzer)
    from whitevec.datasets.retrieval import read_corpus_file

    docs = read_corpus_file(corpus)
    check_output(out, "--out file")
    from whitevec.tuning.label_free import tune_label_free

    config, choice = tune_label_free(
        docs,
        count,
        model=model,
        pooling=pooling,
        analyzer=analyzer,
        seed=seed,
        encoder_options=run.encoder_options(),
        show_progress=run.show_progress,
    )
    made = choice.made
    typer.echo(
        f"pseudo-queries: {made['made']} made of {made['asked']} asked from {made['documents']} documents "
        f"({made['too_short']} too short to cut), seed {made['seed']}",
        err=True,
    )
    scores = ", ".join(f"{name} {100 * score:.2f}" for name, score in choice.scores.items())
    typer.echo(f"nDCG@10 on them: {scores}", err=True)
    typer.echo(f"chosen: hybrid {choice.fusion.spec} ({choice.rule})")
    config.save(out)
    typer.echo(f"wrote {out}", err=True)
