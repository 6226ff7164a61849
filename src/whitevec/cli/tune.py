"""``whitevec tune``: pooling, transform and index encoding chosen on labelled dev data."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

import whitevec.cli._options as _options
from whitevec.cli._options import (
    DataDirOpt,
    PoolingListOpt,
    RunOptions,
    _check_specs,
    _default_pooling,
    split_list,
    with_run_options,
)
from whitevec.cli._output import FormatOpt, TableFormat, _check_json_file, _print_table, _save_json, _say, _Table
from whitevec.errors import BadInputError
from whitevec.models import DEFAULT_MODEL
from whitevec.preflight import check_encoder, check_output, input_file


@with_run_options
def tune_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the tuned configuration (JSON).")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model alias, folder or hub id; a comma list.")] = (
        DEFAULT_MODEL
    ),
    pooling: PoolingListOpt = None,
    task: Annotated[
        str | None,
        typer.Option("--task", help="STS task: tuned on its dev/valid split, tested on test (SemEval: k-fold)."),
    ] = None,
    pairs: Annotated[Path | None, typer.Option("--pairs", help="Dev pairs file (TSV/CSV/JSONL, scored).")] = None,
    test_pairs: Annotated[Path | None, typer.Option("--test-pairs", help="Separate test pairs file.")] = None,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="Retrieval: cranfield or a BEIR-style folder (query folds).")
    ] = None,
    fit_on: Annotated[
        str,
        typer.Option(
            "--fit-on", help="target (the task's or pairs' sentences; a dataset's corpus) or a text file."
        ),
    ] = "target",
    candidates: Annotated[
        str, typer.Option("--candidates", help="'default' (the grid) or a comma list of transform specs.")
    ] = "default",
    no_flow: Annotated[bool, typer.Option("--no-flow", help="Leave flow out of the default grid.")] = False,
    encodings: Annotated[
        str,
        typer.Option(
            "--encodings",
            help="Index encodings to search, comma list (float32, fp16, sq8, sq4, pqM, pqMxB, opqM,pqM), or all. "
            "float32 is always scored.",
        ),
    ] = "float32",
    metric: Annotated[
        str | None, typer.Option("--metric", help="spearman (pairs); ndcg@10 (default), recall@K, mrr@K, map.")
    ] = None,
    max_bytes_per_vector: Annotated[
        int | None,
        typer.Option(
            "--max-bytes-per-vector", help="Score and choose only configurations whose code bytes a vector fit."
        ),
    ] = None,
    max_seconds: Annotated[
        float | None, typer.Option("--max-seconds", help="Stop fitting new candidates after this long.")
    ] = None,
    folds: Annotated[int, typer.Option("--folds", help="k of the k-fold check without test data.")] = 5,
    seed: Annotated[int, typer.Option("--seed", help="Seed of folds and bootstrap resamples.")] = 0,
    n_boot: Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples.")] = 1000,
    data_dir: DataDirOpt = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write every candidate's figures here.")] = None,
    table_format: FormatOpt = TableFormat.auto,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="PNG: dev score against bytes per vector (default with several encodings: next to --out, .png).",
        ),
    ] = None,
    *,
    run: RunOptions,
) -> None:
    """Choose pooling, transform and index encoding on your labelled dev data; keep none unless a gain is
    significant. Writes the choice as a tuned configuration for index build / eval --config."""
    from whitevec.datasets import load_sts_task, read_pairs_file, read_texts_file
    from whitevec.datasets.retrieval import load_retrieval_dataset

    if sum(x is not None for x in (task, pairs, dataset)) != 1:
        raise BadInputError("give exactly one of --task NAME, --pairs FILE or --dataset NAME|FOLDER as dev data")
    if test_pairs is not None and pairs is None:
        raise BadInputError("--test-pairs goes with --pairs")
    dev: Any
    test: Any = None
    fit_texts: list[str] | None = None
    fit_file = input_file(fit_on, "--fit-on file", keywords=("target", "corpus"))
    if task is not None:
        loaded = load_sts_task(task, data_dir=data_dir)
        dev_split = next((s for s in ("dev", "valid") if s in loaded.splits), None)
        if dev_split is not None:
            dev, test = loaded.splits[dev_split], loaded.splits["test"]
        else:
            dev = loaded.all_pairs()
        fit_texts = loaded.sentences("target")
    elif pairs is not None:
        dev = read_pairs_file(pairs)
        test = read_pairs_file(test_pairs) if test_pairs is not None else None
        for scored in (dev, test):
            if scored is not None:
                scored.check_scores_vary()  # as eval: refused as the file is read, before any model loads
    else:
        assert dataset is not None
        dev = load_retrieval_dataset(dataset, data_dir=data_dir)
    if fit_file is not None:
        fit_texts = read_texts_file(fit_file)
    check_output(out, "--out file")
    _check_json_file(json_out)
    from whitevec.index.encodings import split_encoding_list
    from whitevec.tuning.space import check_encodings, check_transforms

    encoding_list = check_encodings(split_encoding_list(encodings))
    if plot is None and len(encoding_list) > 1:
        plot = out.with_suffix(".png")  # several encodings: the quality-per-byte picture is part of the answer
    if plot is not None:
        check_output(plot, "--plot file")
    models = split_list(model)
    for each in models:
        check_encoder(each, run.cache)
    from whitevec.tuning import check_metric

    check_metric(metric, "retrieval" if dataset is not None else "sts")
    specs = None if candidates.strip().lower() == "default" else check_transforms(split_list(candidates))
    poolings = split_list(pooling) if pooling is not None else [_default_pooling(models[0], "last-avg")]
    _check_specs(poolings, [])
    from whitevec.tuning import tune

    encoders = {each: _options._encoder(each, poolings[0], run) for each in models}
    try:
        result = tune(
            dev,
            models=models,
            poolings=poolings,
            fit_texts=fit_texts,
            test=test,
            transforms=specs,
            encodings=encoding_list,
            metric=metric,
            folds=folds,
            seed=seed,
            n_boot=n_boot,
            max_bytes_per_vector=max_bytes_per_vector,
            max_seconds=max_seconds,
            include_flow=not no_flow,
            encoders=encoders,
            show_progress=run.show_progress,
        )
    finally:
        for encoder in encoders.values():
            encoder.close()
    several = len(models) > 1
    columns = (
        *(("model",) if several else ()),
        "pooling",
        "transform",
        "encoding",
        "dim",
        "bytes",
        "fit s",
        "dev",
        "gain",
        "95% interval",
        "sig",
        *(("test",) if result.n_test else ()),
    )
    items = "pairs" if result.kind == "sts" else "queries"
    title = f"whitevec tune - {result.metric} x 100 on {result.n_dev} dev {items}"
    table = _Table(
        title,
        columns,
        text=("model", "pooling", "transform", "encoding", "sig"),
        formats={"bytes": ",", "fit s": ".2f", "dev": ".2f", "gain": "+.2f", "test": ".2f"},
    )
    for row in result.candidates:
        table.add_row(
            *([row.model] if several else []),
            row.pooling,
            ("* " if row.chosen else "") + row.transform,
            row.encoding,
            row.dim,
            row.bytes_per_vector,
            row.fit_seconds,
            row.dev if row.status == "scored" else row.status,
            row.gain,
            None if row.low is None else f"[{row.low:+.2f}, {row.high:+.2f}]",
            "yes" if row.significant else "",
            *([row.test] if result.n_test else []),
        )
    _print_table(table, table_format)
    chosen = result.chosen
    _say(
        table_format,
        f"chosen: {chosen.candidate.label} ({chosen.bytes_per_vector:,} bytes per vector); dev gain over none "
        f"{chosen.gain:+.2f} [{chosen.low:+.2f}, {chosen.high:+.2f}]"
        + ("" if chosen.significant or chosen is result.baseline else " (not significant: chosen for the budget)"),
    )
    check = result.check_summary()
    if check is not None:
        side = "test" if result.n_test else f"held-out folds ({len(result.checks)}-fold)"
        _say(table_format, f"on {side}: raw {check['raw']:.2f}, tuned {check['tuned']:.2f} ({check['gain']:+.2f})")
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    result.save_config(out)
    typer.echo(f"wrote {out}", err=True)
    _save_json(result, json_out)
    if plot is not None:
        result.plot(plot)
        typer.echo(f"wrote {plot}", err=True)
