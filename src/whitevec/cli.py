"""The ``whitevec`` command: argument parsing, one library call, printing. No logic the library lacks.

Options are declared once. An option several commands share is an ``Annotated`` alias below (``ModelOpt``,
``DataDirOpt``, ...); the options every encoding command ends with (``--max-length`` to ``--quiet``) are the
fields of :class:`RunOptions`, which :func:`with_run_options` adds to a command and hands it as one ``run``.

A command that prints a table fills a :class:`_Table` (title, columns, rows of text and numbers) and hands it to
:func:`_print_table` with its ``--format``: auto (a drawn table when stdout is a terminal it fits, else Markdown),
table, markdown, json or csv. Bad usage (a missing, unknown or bad option or argument, a group without a
command) is reported by :func:`main` like bad input: one line, exit status 2, no traceback.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import sqlite3
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from whitevec.datasets.paths import existing_file
from whitevec.errors import BadInputError, WhitevecError
from whitevec.models import DEFAULT_MODEL

# Every command checks its inputs, outputs and the vector cache with the light modules (whitevec.preflight,
# whitevec.datasets) first, and imports torch, scipy or an index library only after: a wrong path is reported
# in a fraction of a second, not after a model has loaded or a corpus has been encoded.
from whitevec.preflight import (
    check_encoder,
    check_output,
    check_output_folder,
    describe_fault,
    existing_folder,
    input_file,
    model_hidden_size,
    parse_device,
)

if TYPE_CHECKING:
    from whitevec.encoder import Encoder


def _no_command(ctx: typer.Context) -> None:
    """A group named without a command (``whitevec``, ``whitevec index``): its help on stderr and exit status 2,
    a usage error, so that a script whose command went missing fails. click >= 8.2 decides the same for
    no_args_is_help; this callback makes it so with any click, and keeps the help off stdout."""
    if ctx.invoked_subcommand is None:
        with contextlib.redirect_stdout(sys.stderr):  # typer's rich help prints itself, on stdout
            text = ctx.get_help()
        if text:  # without rich, click returns the help instead
            typer.echo(text, err=True)
        raise typer.Exit(2)


def _group(**kwargs: Any) -> typer.Typer:
    """A command group; without a command it is a usage error (:func:`_no_command`)."""
    return typer.Typer(callback=_no_command, invoke_without_command=True, add_completion=False, **kwargs)


app = _group(
    name="whitevec",
    help="Sentence vectors from pretrained encoders, made isotropic, measured, and searchable.",
    pretty_exceptions_enable=False,
)


def split_list(value: str) -> list[str]:
    """'a, b,c' -> ['a', 'b', 'c'] for the comma-separated options."""
    return [item.strip() for item in value.split(",") if item.strip()]


# ---- shared options --------------------------------------------------------------------------------------
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model alias, local folder or hub id.")]
PoolingOpt = Annotated[
    str | None,
    typer.Option(
        "--pooling",
        "-p",
        help="Pooling name or comma list of layer indices (default: model, the folder's own "
        "sentence-transformers modules, when it has them; else first-last-avg).",
    ),
]
PoolingListOpt = Annotated[
    str | None,
    typer.Option(
        "--pooling", "-p", help="One pooling or a comma list (default: model for a sentence-transformers folder)."
    ),
]
TransformListOpt = Annotated[
    str, typer.Option("--transform", "-t", help="Comma list: none, whitening, whitening-K, flow, ...")
]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="Data folder (default $WHITEVEC_DATA).")]
MetricOpt = Annotated[str, typer.Option("--metric", help="cosine, ip or l2.")]
StoreOpt = Annotated[str, typer.Option("--backend", help="faiss or milvus.")]
MaxLengthOpt = Annotated[
    int | None,
    typer.Option(
        "--max-length",
        help="Tokens kept per text, longer ones truncated (default: the model's max_seq_length, else 512).",
    ),
]
BatchOpt = Annotated[int, typer.Option("--batch-size", help="Texts per forward pass.")]
DeviceOpt = Annotated[
    str | None,
    # The form is checked as the option is parsed (no torch import); whether this machine has the device, by the
    # Encoder before the model loads (with --engine ray, the workers' machines).
    typer.Option(
        "--device", help="torch device: cpu, cuda, cuda:N, mps (default: cuda if present).", callback=parse_device
    ),
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the vector cache.")]
ComputeOpt = Annotated[
    str,
    typer.Option(
        "--compute",
        help="Encoder arithmetic: torch (float32), bf16 (bfloat16, ~2x on CPUs with AVX512-BF16/AMX) or int8.",
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="local (this process) or ray (an actor pool on a Ray cluster; pip install 'whitevec[ray]').",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address", help="With --engine ray: the cluster (host:port, ray://host:port); default local."
    ),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option("--workers", help="With --engine ray: encoder actors (default: the cluster's CPUs, one each)."),
]
GpusOpt = Annotated[
    float, typer.Option("--gpus-per-worker", help="With --engine ray: GPUs per encoder actor (default 0).")
]
TokenWeightsOpt = Annotated[
    str | None,
    typer.Option(
        "--token-weights",
        help="Weigh tokens in the token mean by frequency: sif, usif or zipf (mean poolings only; needs "
        "--token-frequencies).",
    ),
]
TokenFrequenciesOpt = Annotated[
    Path | None,
    typer.Option(
        "--token-frequencies",
        help="Token counts for --token-weights: a file saved by `whitevec frequencies count` (.json), or a text "
        "corpus (one text a line) counted with the model's tokenizer.",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", help="A tuned configuration (whitevec tune): its model, pooling, transform and encoding."
    ),
]


def _option(default: Any, option: Any) -> Any:
    """A RunOptions field: its default, and its command-line option (one of the aliases above)."""
    return field(default=default, metadata={"option": option})


@dataclass(frozen=True)
class RunOptions:
    """How an encoding command runs its model: the options each of them ends with, in this order."""

    max_length: int | None = _option(None, MaxLengthOpt)
    batch_size: int = _option(64, BatchOpt)
    device: str | None = _option(None, DeviceOpt)
    no_cache: bool = _option(False, NoCacheOpt)
    compute: str = _option("torch", ComputeOpt)
    quiet: bool = _option(False, QuietOpt)

    @property
    def cache(self) -> bool:
        """Whether the vector cache is read and written."""
        return not self.no_cache

    @property
    def show_progress(self) -> bool | None:
        """False with --quiet; else None: the library shows a bar for long work on a terminal."""
        return False if self.quiet else None


_RUN_PARAMETERS = [
    inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.metadata["option"])
    for f in fields(RunOptions)
]


def with_run_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the RunOptions options after ``command``'s own (typer reads the signature this sets) and call it with
    them as one keyword argument, ``run``."""
    own = inspect.signature(command, eval_str=True)
    parameters = [p for name, p in own.parameters.items() if name != "run"]

    @functools.wraps(command)
    def with_options(**kwargs: Any) -> None:
        run = RunOptions(**{p.name: kwargs.pop(p.name) for p in _RUN_PARAMETERS})
        command(**kwargs, run=run)

    with_options.__signature__ = own.replace(parameters=[*parameters, *_RUN_PARAMETERS])  # type: ignore[attr-defined]
    return with_options


def _encoder(
    model: str,
    pooling: str | None,
    run: RunOptions,
    token_weights: str | None = None,
    token_frequencies: Any = None,
) -> Encoder:
    """The Encoder a command's --model, --pooling, run options (and --token-weights) name (a module attribute,
    so that tests can replace it to show that a command stops before any model loads)."""
    from whitevec.encoder import Encoder

    return Encoder(
        model,
        pooling,
        max_length=run.max_length,
        batch_size=run.batch_size,
        device=run.device,
        cache=run.cache,
        backend=run.compute,
        token_weights=token_weights,
        token_frequencies=token_frequencies,
    )


def _check_engine(engine: str) -> bool:
    """True for --engine ray, False for local; BadInputError for anything else."""
    value = engine.strip().lower()
    if value not in ("local", "ray"):
        raise BadInputError(f"unknown --engine {engine!r}; valid: local, ray")
    return value == "ray"


def _encoder_args(model: str, pooling: str | None, run: RunOptions) -> dict[str, Any]:
    """The Encoder a command names, as the keyword arguments each Ray actor builds it from."""
    return {
        "model": model,
        "pooling": pooling,
        "max_length": run.max_length,
        "batch_size": run.batch_size,
        "device": run.device,
        "backend": run.compute,
    }


def _token_weights(
    token_weights: str | None, token_frequencies: Path | None, poolings: Sequence[str]
) -> tuple[str | None, Any]:
    """--token-weights and --token-frequencies checked before the model loads: the scheme, the poolings (mean
    kinds only) and the frequency source (a .json file loaded and checked, or an existing corpus)."""
    from whitevec.token_weights import check_scheme, read_frequencies

    scheme = check_scheme(token_weights)
    if scheme is None:
        if token_frequencies is not None:
            raise BadInputError("--token-frequencies needs --token-weights (sif, usif or zipf)")
        return None, None
    if token_frequencies is None:
        raise BadInputError(f"--token-weights {scheme} needs --token-frequencies FILE (.json counts or a corpus)")
    from whitevec.encoder import check_weighted_pooling, get_pooling

    for pooling in poolings:
        check_weighted_pooling(get_pooling(pooling))
    return scheme, read_frequencies(token_frequencies)


def _default_pooling(model: str, fallback: str) -> str:
    """The pooling a command uses when --pooling is not given: ``model`` for a sentence-transformers folder,
    else ``fallback``."""
    from whitevec.models import resolve_model
    from whitevec.st_config import default_pooling

    return default_pooling(resolve_model(model), fallback)


def _check_specs(poolings: list[str], transforms: list[str]) -> None:
    """Reject an unknown pooling or transform spec before the model loads."""
    from whitevec.encoder import get_pooling
    from whitevec.transforms import make_transform

    for pooling in poolings:
        get_pooling(pooling)
    for spec in transforms:
        make_transform(spec)


def _from_config(
    config: Path, command: Callable[..., None], run: RunOptions, **given: str | None
) -> tuple[str, str, str, str, RunOptions]:
    """(model, pooling, transform, encoding) of a tuned configuration. An option set to something other than its
    default must say what the configuration says (another --model or --pooling would make its transform invalid;
    another --encoding is not the configuration that was scored)."""
    from whitevec.index.encodings import parse_encoding
    from whitevec.tuning.config import ConfigMismatchError, TunedConfig

    tuned = TunedConfig.load(config)
    wanted = {
        "model": tuned.model,
        "pooling": tuned.pooling,
        "transform": tuned.transform,
        "encoding": tuned.encoding,
    }
    defaults = inspect.signature(command).parameters
    for name, value in given.items():
        if value is None or value == defaults[name].default:
            continue
        same = (
            parse_encoding(value).spec == tuned.encoding
            if name == "encoding"
            else value.strip().lower() == wanted[name].lower()
        )
        if not same:
            raise ConfigMismatchError(
                f"--{name} {value} contradicts the tuned configuration {config}, which names {name} "
                f"{wanted[name]!r}; leave --{name} out, or tune again"
            )
    # The token limit is part of the vectors the configuration was tuned on: apply it too.
    if run.max_length is not None and run.max_length != tuned.max_length:
        raise ConfigMismatchError(
            f"--max-length {run.max_length} contradicts the tuned configuration {config}, which was tuned with "
            f"max_length {tuned.max_length}; leave --max-length out, or tune again"
        )
    return tuned.model, tuned.pooling, tuned.transform, tuned.encoding, replace(run, max_length=tuned.max_length)


def _check_json_file(path: Path | None) -> None:
    """--json FILE, when given, can be written: checked before the work whose report it will hold."""
    if path is not None:
        check_output(path, "--json file")


def _save_json(report: Any, path: Path | None) -> None:
    if path is not None:
        report.save_json(path)
        typer.echo(f"wrote {path}", err=True)


class _StdoutClosedError(Exception):
    """stdout's reader went away (``whitevec search ... | head``); main() exits quietly."""


@contextlib.contextmanager
def _writing_stdout() -> Iterator[None]:
    """Around writes to stdout: a broken pipe there is the reader leaving, for main() to handle. (Caught inside a
    command, so typer's own handler, which exits 1, never sees it.)"""
    try:
        yield
    except BrokenPipeError:
        raise _StdoutClosedError from None


def _print(text: str) -> None:
    """``text`` and a newline on stdout."""
    with _writing_stdout():
        typer.echo(text)


def _console() -> Any:
    """A rich console on stdout whose broken pipe goes to main() (rich's own handler exits 1). It writes no ANSI
    codes to a pipe, nor with NO_COLOR set (rich alone would still write bold and italics)."""
    from rich.console import Console

    class StdoutConsole(Console):
        def on_broken_pipe(self) -> None:
            raise _StdoutClosedError from None

    return StdoutConsole(color_system=None if os.environ.get("NO_COLOR") else "auto")


# ---- tables ----------------------------------------------------------------------------------------------
class TableFormat(StrEnum):
    """How a command prints its table (``--format``)."""

    auto = "auto"
    table = "table"
    markdown = "markdown"
    json = "json"
    csv = "csv"


FormatOpt = Annotated[
    TableFormat,
    typer.Option(
        "--format",
        case_sensitive=False,
        help="How the table prints: auto (a drawn table on a terminal it fits, else Markdown), table, markdown, "
        "json or csv (the rows alone on stdout; the lines around the table then go to stderr).",
    ),
]
Cell = str | int | float | None


def _cell(value: Any) -> Cell:
    """A table cell: a numpy number as Python's (json refuses numpy integers); NaN or an infinity as None, not
    measured (neither is a JSON number)."""
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    return None if isinstance(value, float) and not math.isfinite(value) else value


@dataclass
class _Table:
    """What a command prints as a table: a title, columns, and rows of cells (text, a number, or None for a figure
    not measured, shown "-"). json and csv keep the numbers; ``formats`` (column -> format spec, e.g. ".2f") say
    how the drawn table and Markdown show them. Columns in ``text`` are left-aligned, the others right-aligned."""

    title: str
    columns: Sequence[str]
    text: Collection[str] = ()
    formats: dict[str, str] = field(default_factory=dict)
    rows: list[list[Cell]] = field(default_factory=list)

    def add_row(self, *cells: Any) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([_cell(cell) for cell in cells])

    def shown(self) -> list[list[str]]:
        """The cells as the drawn table and Markdown show them."""

        def show(cell: Cell, spec: str) -> str:
            if cell is None:
                return "-"
            return cell if isinstance(cell, str) else format(cell, spec)

        return [
            [show(cell, self.formats.get(c, "")) for c, cell in zip(self.columns, row, strict=True)]
            for row in self.rows
        ]


def _drawn(table: _Table) -> Any:
    """A rich table. Cells that do not fit wrap (fold), never cut to '…': a number is never lost."""
    from rich.table import Table

    drawn = Table(title=table.title)
    for column in table.columns:
        drawn.add_column(column, justify="left" if column in table.text else "right", overflow="fold")
    for row in table.shown():
        drawn.add_row(*row)
    return drawn


def _markdown(table: _Table) -> str:
    """The title, a blank line, a Markdown (GitHub) table, no width limit, no cell cut, and a blank line that ends
    it (a line after it would read as one more row)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(" ".join(cell.split()).replace("|", "\\|") for cell in cells) + " |"

    rule = [":---" if column in table.text else "---:" for column in table.columns]
    return "\n".join([table.title, "", line(table.columns), line(rule), *(line(row) for row in table.shown()), ""])


def _json(table: _Table) -> str:
    """``{"title", "columns", "rows": [{column: value}]}``; numbers as numbers, None as null."""
    import json

    rows = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    document = {"title": table.title, "columns": list(table.columns), "rows": rows}
    return json.dumps(document, indent=2, ensure_ascii=False)


def _csv(table: _Table) -> str:
    """A header of the columns, then the rows; numbers in full (no thousands separators), None empty."""
    import csv
    import io

    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows(["" if cell is None else cell for cell in row] for row in table.rows)
    return text.getvalue().rstrip("\n")


def _print_table(table: _Table, table_format: TableFormat) -> None:
    """``table`` on stdout in ``table_format``. auto: the drawn table when stdout is a terminal that fits it
    whole, else Markdown (a pipe, a log, a narrow terminal)."""
    if table_format in (TableFormat.auto, TableFormat.table):
        console = _console()
        drawn = _drawn(table)
        # Its natural width: measured within the console's width, a table is never wider than that.
        natural = console.measure(drawn, options=console.options.update_width(1_000_000)).maximum
        if table_format is TableFormat.table or (sys.stdout.isatty() and natural <= console.width):
            console.print(drawn)
            return
        table_format = TableFormat.markdown
    _print({TableFormat.markdown: _markdown, TableFormat.json: _json, TableFormat.csv: _csv}[table_format](table))


def _say(table_format: TableFormat, text: str) -> None:
    """A line that goes with a table: on stdout beside a table or Markdown; on stderr beside json or csv, which
    stdout then holds alone."""
    if table_format in (TableFormat.json, TableFormat.csv):
        typer.echo(text, err=True)
    else:
        _print(text)


# ---- foundation commands (encode, fit, eval) -------------------------------------------------------------
@app.command("eval")
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
    _check_specs(poolings, transforms)
    weights = _token_weights(token_weights, token_frequencies, poolings)
    with _encoder(model, poolings[0], run, *weights) as encoder:
        report = evaluate_sts_poolings(
            encoder, poolings, loaded, transforms, fit_on, run.show_progress, encoding=encoding
        )
    table = _Table(
        f"STS Spearman x 100 - {model} (transform fitted on {fit_on})",
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
    _print_table(table, table_format)
    for name in poolings:  # what ran: a name like "model" says little without the folder's modules
        _say(table_format, f"pooling {encoder.describe_pooling(name)}; max_length {encoder.max_length}")
    _save_json(report, json_out)


@app.command("encode")
@with_run_options
def encode_command(
    input_file: Annotated[Path, typer.Argument(help="Text file, one text a line (blank lines skipped).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the .npy matrix.")],
    model: ModelOpt = DEFAULT_MODEL,
    pooling: PoolingOpt = None,
    transform: Annotated[
        Path | None, typer.Option("--transform", help="A saved transform applied after encoding.")
    ] = None,
    engine: EngineOpt = "local",
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = None,
    gpus_per_worker: GpusOpt = 0.0,
    token_weights: TokenWeightsOpt = None,
    token_frequencies: TokenFrequenciesOpt = None,
    *,
    run: RunOptions,
) -> None:
    """Encode texts to a float32 .npy matrix (one row a line), optionally through a saved transform.

    With --engine ray, INPUT_FILE is a corpus (one file or a quoted glob of JSONL, CSV/TSV, text or Parquet
    shards) and --out a folder of Parquet shards (id, text, metadata, vector) listed in encode.json; a killed
    run continues where it stopped when run again."""
    from whitevec.datasets import read_texts_file

    if _check_engine(engine):
        from whitevec.index.ray_engine import ray_encode, require_ray

        require_ray()
        if token_weights is not None or token_frequencies is not None:
            raise BadInputError("--token-weights and --token-frequencies are not supported with --engine ray")
        if transform is not None:
            existing_file(transform, "transform file")
        check_encoder(model, False)
        check_output_folder(out, "--out folder")
        listing = ray_encode(
            str(input_file),
            out,
            encoder=_encoder_args(model, pooling, run),
            transform_file=transform,
            ray_address=ray_address,
            workers=workers,
            gpus_per_worker=gpus_per_worker,
            quiet=run.quiet,
        )
        typer.echo(f"wrote {out}: {listing['count']} vectors in {len(listing['shards'])} shards", err=True)
        return

    texts = read_texts_file(input_file)
    if transform is not None:
        existing_file(transform, "transform file")
    dim = check_encoder(model, run.cache)
    check_output(out, "--out file", need_bytes=len(texts) * dim * 4)
    weights = _token_weights(
        token_weights, token_frequencies, [pooling or _default_pooling(model, "first-last-avg")]
    )
    from whitevec.vectors import encode_to_file

    with _encoder(model, pooling, run, *weights) as encoder:
        shape = encode_to_file(encoder, texts, out, transform, show_progress=run.show_progress)
    typer.echo(f"wrote {out} ({shape[0]} x {shape[1]})", err=True)


@app.command("fit")
@with_run_options
def fit_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the transform (.safetensors).")],
    transform: Annotated[str, typer.Option("--transform", "-t", help="whitening, whitening-K, flow, ...")] = (
        "whitening"
    ),
    vectors: Annotated[Path | None, typer.Option("--vectors", help="A .npy matrix to fit on.")] = None,
    texts: Annotated[Path | None, typer.Option("--texts", help="A text file to encode and fit on.")] = None,
    model: ModelOpt = DEFAULT_MODEL,
    pooling: PoolingOpt = None,
    token_weights: TokenWeightsOpt = None,
    token_frequencies: TokenFrequenciesOpt = None,
    *,
    run: RunOptions,
) -> None:
    """Fit a transform on vectors (.npy) or on texts encoded with a model, and save it."""
    if (vectors is None) == (texts is None):
        raise BadInputError("give exactly one of --vectors FILE.npy or --texts FILE.txt")
    if vectors is not None:
        existing_file(vectors, "vector file")
    if texts is not None:
        existing_file(texts, "text file")
        check_encoder(model, run.cache)
    check_output(out, "--out file")
    weights: tuple[str | None, Any] = (None, None)
    if texts is not None:
        weights = _token_weights(
            token_weights, token_frequencies, [pooling or _default_pooling(model, "first-last-avg")]
        )
    elif token_weights is not None or token_frequencies is not None:
        raise BadInputError("--token-weights applies when encoding --texts, not to --vectors")
    from whitevec.vectors import fit_transform_file

    encoding: contextlib.AbstractContextManager[Encoder | None] = (
        contextlib.nullcontext() if texts is None else _encoder(model, pooling, run, *weights)
    )
    with encoding as encoder:
        fitted, n_rows = fit_transform_file(
            transform, out, vectors=vectors, texts=texts, encoder=encoder, show_progress=run.show_progress
        )
    typer.echo(f"fitted {fitted} on {n_rows} vectors; wrote {out}", err=True)


# ---- diagnostics -----------------------------------------------------------------------------------------
@app.command("diagnose")
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

    _check_specs([pooling] if pooling else [], split_list(transform))
    weights = _token_weights(
        token_weights, token_frequencies, [pooling or _default_pooling(model, "first-last-avg")]
    )
    with _encoder(model, pooling, run, *weights) as encoder:
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
    shown = {  # column: (summary key, format)
        "mean cos": ("mean_cosine", ".3f"),
        "eff. rank": ("effective_rank", ".1f"),
        "top-1 var": ("top1_share", ".1%"),
        "I(W)": ("isotropy_iw", ".3g"),
        "IsoScore": ("isoscore", ".3f"),
        "align": ("alignment", ".3f"),
        "unif": ("uniformity", ".3f"),
        "STS": ("sts_spearman", ".2f"),
    }
    table = _Table(
        f"Anisotropy - {model}, {encoder.pooling.name}, {report.n_sentences} sentences",
        ("transform", *shown),
        text=("transform",),
        formats={column: spec for column, (_, spec) in shown.items()},
    )
    for row in report.summary():
        table.add_row(row["transform"], *(row[key] for key, _ in shown.values()))
    _print_table(table, table_format)
    for key, note in report.notes.items():
        typer.echo(f"note ({key}): {note}", err=True)
    typer.echo(f"wrote {', '.join(str(p) for p in written.values())}", err=True)


# ---- token frequencies -----------------------------------------------------------------------------------
frequencies_app = _group(help="Token frequencies for --token-weights.")
app.add_typer(frequencies_app, name="frequencies")


@frequencies_app.command("count")
def frequencies_count_command(
    corpus: Annotated[Path, typer.Option("--corpus", help="Text file, one text a line.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the counts (.json).")],
    model: ModelOpt = DEFAULT_MODEL,
    max_length: MaxLengthOpt = None,
) -> None:
    """Count the tokens of a corpus with a model's tokenizer (special tokens left out) and save them as JSON."""
    from whitevec.datasets import read_texts_file

    texts = read_texts_file(corpus)
    if out.suffix.lower() != ".json":
        raise BadInputError(f"--out {out}: token frequencies are saved as JSON; name the file *.json")
    check_output(out, "--out file")
    model_hidden_size(model)  # a wrong --model fails before the tokenizer loads
    from dataclasses import replace as with_source

    from whitevec.encoder import count_model_frequencies

    counted = with_source(count_model_frequencies(model, texts, max_length), source=corpus.name)
    counted.save(out)
    typer.echo(
        f"wrote {out}: {counted.n_tokens} tokens of {counted.n_types} types in {counted.n_texts} texts ({model})",
        err=True,
    )


# ---- index and search ------------------------------------------------------------------------------------
index_app = _group(help="Build a searchable index, inspect it, export it for plain FAISS.")
app.add_typer(index_app, name="index")
IndexPoolingOpt = Annotated[
    str | None,
    typer.Option(
        "--pooling",
        "-p",
        help="Pooling (default: model, the folder's sentence-transformers modules, when it has them; else "
        "last-avg, mean pooling).",
    ),
]


def _index_params(
    m: int | None, ef_construction: int | None, ef_search: int | None, nlist: int | None, nprobe: int | None
) -> dict[str, int] | None:
    given = {"M": m, "efConstruction": ef_construction, "efSearch": ef_search, "nlist": nlist, "nprobe": nprobe}
    params = {k: v for k, v in given.items() if v is not None}
    return params or None


EncodingOpt = Annotated[
    str,
    typer.Option(
        "--encoding",
        help="How vectors are stored: float32, fp16, sq8, sq4, pqM, pqMxB, opqM,pqM, faiss:FACTORY; +refine "
        "re-ranks exactly.",
    ),
]


def _encoding_params(
    params: dict[str, int] | None, encoding: str, train_sample: int | None, refine_factor: int | None
) -> dict[str, Any] | None:
    """The index parameters with the encoding options added (those left at their defaults are not)."""
    out: dict[str, Any] = dict(params or {})
    if encoding.strip().lower() != "float32":
        out["encoding"] = encoding
    if train_sample is not None:
        out["train_sample"] = train_sample
    if refine_factor is not None:
        out["refine_factor"] = refine_factor
    return out or None


@index_app.command("build")
@with_run_options
def index_build_command(
    corpus: Annotated[Path, typer.Option("--corpus", help="Text (one doc a line), CSV/TSV or JSONL (id, text).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Index folder to write (replaced atomically).")],
    model: ModelOpt = DEFAULT_MODEL,
    pooling: IndexPoolingOpt = None,
    transform: Annotated[
        str,
        typer.Option("--transform", "-t", help="none, whitening, whitening-K, center, or a .safetensors file."),
    ] = "whitening",
    fit_on: Annotated[str, typer.Option("--fit-on", help="corpus, or a text file to fit the transform on.")] = (
        "corpus"
    ),
    kind: Annotated[str, typer.Option("--kind", help="flat (exact), hnsw or ivf.")] = "flat",
    metric: MetricOpt = "cosine",
    backend: StoreOpt = "faiss",
    uri: Annotated[
        str | None, typer.Option("--uri", help="Milvus URI: file.db (Milvus Lite) or http://host:19530.")
    ] = None,
    m: Annotated[int | None, typer.Option("--M", help="HNSW links per node.")] = None,
    ef_construction: Annotated[int | None, typer.Option("--ef-construction", help="HNSW build depth.")] = None,
    ef_search: Annotated[int | None, typer.Option("--ef-search", help="HNSW search depth.")] = None,
    nlist: Annotated[int | None, typer.Option("--nlist", help="IVF lists (default ~4 sqrt(n)).")] = None,
    nprobe: Annotated[int | None, typer.Option("--nprobe", help="IVF lists searched.")] = None,
    config: ConfigOpt = None,
    encoding: EncodingOpt = "float32",
    train_sample: Annotated[
        int | None, typer.Option("--train-sample", help="Train SQ/PQ/IVF on N vectors drawn with a fixed seed.")
    ] = None,
    refine_factor: Annotated[
        int | None, typer.Option("--refine-factor", help="+refine: candidates re-ranked = factor x k (4).")
    ] = None,
    engine: EngineOpt = "local",
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = None,
    gpus_per_worker: GpusOpt = 0.0,
    fit_sample: Annotated[
        int | None,
        typer.Option(
            "--fit-sample",
            help="With --engine ray: fit the transform on N corpus vectors drawn with --fit-seed (any transform, "
            "flow included) instead of exactly on all of them (whitening forms only).",
        ),
    ] = None,
    fit_seed: Annotated[int, typer.Option("--fit-seed", help="Seed of the --fit-sample draw.")] = 0,
    *,
    run: RunOptions,
) -> None:
    """Encode a corpus, fit the transform, and write an index folder (manifest, transform, index, documents).

    With --engine ray (--backend milvus), --corpus may be a quoted glob of shards (JSONL, CSV/TSV, text,
    Parquet); the documents are kept in the Milvus collection, and a killed build resumes when run again."""
    from whitevec.datasets.retrieval import read_corpus_file

    if config is not None:
        model, pooling, transform, encoding, run = _from_config(
            config, index_build_command, run, model=model, pooling=pooling, transform=transform, encoding=encoding
        )
    if _check_engine(engine):
        from whitevec.index.ray_engine import check_fit_sample, ray_build, require_ray

        require_ray()
        if backend.strip().lower() != "milvus":
            raise BadInputError(
                f"--engine ray writes to Milvus, not --backend {backend}: use --backend milvus (--uri "
                "http://host:19530 for a server), or --engine local for FAISS"
            )
        if input_file(fit_on, "--fit-on file", keywords=("corpus",)) is not None:
            raise BadInputError("--engine ray fits the transform on the corpus; leave --fit-on out")
        if transform.strip().lower().endswith(".safetensors"):
            existing_file(transform, "transform file")
        check_fit_sample(fit_sample, fit_seed)
        check_encoder(model, False)
        check_output(out, "index folder", folder=True)
        params = _encoding_params(
            _index_params(m, ef_construction, ef_search, nlist, nprobe), encoding, train_sample, refine_factor
        )
        built = ray_build(
            str(corpus),
            out,
            encoder=_encoder_args(model, pooling or _default_pooling(model, "last-avg"), run),
            transform=transform,
            kind=kind,
            metric=metric,
            backend=backend,
            uri=uri,
            index_params=params,
            ray_address=ray_address,
            workers=workers,
            gpus_per_worker=gpus_per_worker,
            fit_sample=fit_sample,
            fit_seed=fit_seed,
            quiet=run.quiet,
        )
        typer.echo(f"wrote {built} (Ray engine; documents in Milvus)", err=True)
        return
    if fit_sample is not None:
        raise BadInputError("--fit-sample is for --engine ray; a local build fits on every vector it encodes")

    docs = read_corpus_file(corpus)
    input_file(fit_on, "--fit-on file", keywords=("corpus",))
    if transform.strip().lower().endswith(".safetensors"):
        existing_file(transform, "transform file")
    dim = check_encoder(model, run.cache)
    # Room for the document store (about twice the corpus file, with SQLite's overhead) and float32 vectors.
    need = 2 * corpus.expanduser().stat().st_size + len(docs) * dim * 4
    check_output(out, "index folder", need_bytes=need, folder=True)
    from whitevec.index import Retriever, check_build, stored_dim

    params = _encoding_params(
        _index_params(m, ef_construction, ef_search, nlist, nprobe), encoding, train_sample, refine_factor
    )
    check_build(
        out,
        kind=kind,
        metric=metric,
        backend=backend,
        uri=uri,
        index_params=params,
        dim=stored_dim(transform, dim),
    )
    with (
        _encoder(model, pooling or _default_pooling(model, "last-avg"), run) as encoder,
        Retriever.build(
            docs,
            out,
            encoder=encoder,
            transform=transform,
            fit_on=fit_on,
            kind=kind,
            metric=metric,
            backend=backend,
            uri=uri,
            index_params=params,
            show_progress=run.show_progress,
        ) as retriever,
    ):
        typer.echo(f"wrote {out}: {retriever!r}", err=True)


@index_app.command("info")
def index_info_command(index_dir: Annotated[Path, typer.Argument(help="Index folder.")]) -> None:
    """Print an index's manifest (checksums verified) as JSON, with its size under "size": encoding, code bytes
    per vector, index bytes and bytes per vector on disk."""
    import json

    existing_folder(index_dir, "index folder")
    from whitevec.index import index_size, read_manifest

    manifest = read_manifest(index_dir)
    _print(json.dumps({**manifest, "size": index_size(manifest)}, indent=2, sort_keys=True))


@index_app.command("export-faiss")
def index_export_faiss_command(
    index_dir: Annotated[Path, typer.Argument(help="Index folder (faiss backend, linear transform).")],
    out: Annotated[Path, typer.Argument(help="FAISS file to write: takes raw encoder vectors.")],
) -> None:
    """One FAISS file with the whitening in its pre-transform chain: faiss.read_index(OUT).search(raw, k)."""
    existing_folder(index_dir, "index folder")
    check_output(out, "FAISS file")
    from whitevec.index import export_faiss

    export_faiss(index_dir, out)
    typer.echo(f"wrote {out} (ids are the rows of {index_dir / 'docs.sqlite'})", err=True)


@app.command("search")
def search_command(
    index_dir: Annotated[Path, typer.Argument(help="Index folder.")],
    query: Annotated[list[str], typer.Argument(help="One or more queries.")],
    k: Annotated[int, typer.Option("-k", help="Results per query (clamped to the corpus size).")] = 10,
    json_out: Annotated[bool, typer.Option("--json", help="Print the hits as JSON (with metadata).")] = False,
    table_format: FormatOpt = TableFormat.auto,
    device: DeviceOpt = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="A tuned configuration (whitevec tune) the index must follow, checked first."
        ),
    ] = None,
) -> None:
    """Search an index; queries are encoded with the index's own model, pooling and transform."""
    import json

    if json_out and table_format is not TableFormat.auto:
        raise BadInputError("--json prints the hits as JSON; give it or --format, not both")
    existing_folder(index_dir, "index folder")
    if config is not None:
        from whitevec.index import read_manifest
        from whitevec.tuning.config import TunedConfig

        TunedConfig.load(config).check_index(read_manifest(index_dir), where=f"index {index_dir}")
    from whitevec.preflight import check_texts

    check_texts(query)  # a blank query, refused as HTTP /search refuses it, before the index loads
    from whitevec.index import Retriever

    with Retriever.load(index_dir, device=device) as retriever:
        results = retriever.search(query, k=k)
    if json_out:
        payload = [
            {"query": q, "hits": [h.to_dict() for h in hits]} for q, hits in zip(query, results, strict=True)
        ]
        _print(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    top = max(map(len, results), default=0)
    table = _Table(
        f"{index_dir} - top {top} per query",
        ("query", "rank", "id", "score", "text"),
        text=("query", "id", "text"),
        formats={"score": ".4f"},
    )
    for q, hits in zip(query, results, strict=True):
        for rank, hit in enumerate(hits, start=1):
            text = hit.text if len(hit.text) <= 100 else hit.text[:97] + "..."
            table.add_row(q, rank, hit.id, hit.score, text)
    _print_table(table, table_format)


@app.command("eval-retrieval")
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
            help="Comma list of encodings: float32, fp16, sq8, sq4, pqM, pqMxB, opqM,pqM, ... (';' between "
            "faiss:FACTORY strings).",
        ),
    ] = "float32",
    plot: Annotated[
        Path | None, typer.Option("--plot", help="PNG of nDCG@10 against bytes per vector, Pareto front drawn.")
    ] = None,
    *,
    run: RunOptions,
) -> None:
    """Retrieval quality per configuration (transform x encoding): nDCG@10, R@100, MRR@10, code bytes per
    vector, index bytes, build time, p50/p99 latency with and without query encoding, batched QPS."""
    from whitevec.datasets.retrieval import load_retrieval_dataset

    data = load_retrieval_dataset(dataset, data_dir=data_dir)
    poolings = split_list(pooling) if pooling is not None else [_default_pooling(model, "last-avg")]
    transforms = split_list(transform)
    if not poolings:
        raise BadInputError("give at least one pooling")
    input_file(fit_on, "--fit-on file", keywords=("corpus",))
    _check_json_file(json_out)
    if plot is not None:
        check_output(plot, "--plot file")
    dim = check_encoder(model, run.cache)
    from whitevec.evaluation.retrieval import evaluate_retrieval, plan_configurations
    from whitevec.index.encodings import split_encoding_list

    _check_specs(poolings, transforms)
    encodings = split_encoding_list(encoding)
    plan_configurations(transforms, encodings, dim)  # unknown or unfitting specs fail before the model loads
    with _encoder(model, poolings[0], run) as encoder:
        report = evaluate_retrieval(
            encoder,
            data,
            transforms,
            poolings=poolings,
            encodings=encodings,
            fit_on=fit_on,
            kind=kind,
            metric=metric,
            backend=backend,
            uri=uri,
            latency_queries=latency_queries,
            show_progress=run.show_progress,
        )
    shown = {  # column: format
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
    table = _Table(
        f"{data.name} retrieval - {model} ({kind}/{metric}/{backend}, fitted on {fit_on})",
        tuple(shown),
        text=("pooling", "transform", "encoding"),
        formats=shown,
    )
    for s in report.scores:
        table.add_row(
            *(s.pooling, s.transform, s.encoding, s.dim, s.code_bytes),
            *(100 * v for v in (s.ndcg_10, s.recall_100, s.mrr_10)),
            *(s.index_bytes, s.build_s, s.p50_search_ms, s.p99_search_ms, s.p50_query_ms, s.p99_query_ms, s.qps),
        )
    _print_table(table, table_format)
    from whitevec.evaluation.frontier import pareto_front, plot_frontier

    front = pareto_front(report.scores, lambda s: s.code_bytes, lambda s: s.ndcg_10)
    _say(
        table_format,
        f"{report.scores[0].n_queries} queries, {report.scores[0].n_docs} documents; quality in percent. "
        "bytes/vec = code bytes of one vector. search ms = search + fetch of one embedded query; query ms = "
        "encode (no cache) + transform + search + fetch; QPS = all queries in one batch. build s excludes the "
        f"one-off corpus encoding ({', '.join(f'{k}: {v:.1f} s' for k, v in report.corpus_encode_s.items())}).\n"
        "Pareto front (nDCG@10 per byte): "
        + ", ".join(f"{s.label} ({s.code_bytes} B, {100 * s.ndcg_10:.2f})" for s in front),
    )
    for note in report.notes:
        typer.echo(f"note: {note}", err=True)
    if plot is not None:
        plot_frontier(report.scores, plot, title=f"{data.name}: nDCG@10 per byte - {model}")
        typer.echo(f"wrote {plot}", err=True)
    _save_json(report, json_out)


# ---- tune -------------------------------------------------------------------------------------------------
@app.command("tune")
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

    encoders = {each: _encoder(each, poolings[0], run) for each in models}
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


# ---- sentence-transformers export -------------------------------------------------------------------------
@app.command("export-st")
def export_st_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="sentence-transformers folder to write.")],
    model: ModelOpt = DEFAULT_MODEL,
    pooling: PoolingOpt = None,
    transform: Annotated[
        Path | None, typer.Option("--transform", "-t", help="A fitted transform (.safetensors) to apply last.")
    ] = None,
    index: Annotated[
        Path | None,
        typer.Option("--index", help="Export an index folder's model, pooling and transform instead."),
    ] = None,
    normalize: Annotated[
        bool | None,
        typer.Option(
            "--normalize/--no-normalize", help="Unit-length vectors last (default: no; from an index: its metric)."
        ),
    ] = None,
    max_length: MaxLengthOpt = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing --out folder.")] = False,
    device: DeviceOpt = None,
) -> None:
    """Write a sentence-transformers folder: SentenceTransformer(OUT).encode(texts) gives whitevec's vectors."""
    from whitevec.st_export import check_export_target

    check_export_target(out, overwrite)
    check_output(out, "--out folder", folder=True)  # its parent can be written; the folder is made at the end
    if index is not None:
        if transform is not None or pooling is not None or max_length is not None or model != DEFAULT_MODEL:
            raise BadInputError("--index takes the model, pooling, max_length and transform from the index")
        existing_folder(index, "index folder")
        from whitevec.st_export import export_index

        written = export_index(index, out, overwrite=overwrite, normalize=normalize, device=device)
    else:
        if transform is not None:
            existing_file(transform, "transform file")
        check_encoder(model, cache=False)
        from whitevec.encoder import Encoder
        from whitevec.st_export import export_sentence_transformer
        from whitevec.transforms import Transform

        fitted = Transform.load(transform) if transform is not None else None
        with Encoder(model, pooling, max_length=max_length, device=device, cache=False) as encoder:
            written = export_sentence_transformer(
                out, encoder, fitted, normalize=bool(normalize), overwrite=overwrite
            )
    import json

    record = json.loads((written / "whitevec_export.json").read_text(encoding="utf-8"))
    trust = ", trust_remote_code=True" if record["trust_remote_code"] else ""
    typer.echo(
        f"wrote {written}: {record['pooling_detail']}, max_length {record['max_length']}, {record['dim']}-d; "
        f"load with SentenceTransformer({str(written)!r}{trust})",
        err=True,
    )


# ---- serve -----------------------------------------------------------------------------------------------
@app.command("serve")
def serve_command(
    index_dir: Annotated[Path, typer.Argument(help="Index folder written by `whitevec index build`.")],
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; set WHITEVEC_API_KEY before leaving 127.0.0.1.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option("--workers", help="Processes, each with its own copy of the index.")] = 1,
) -> None:
    """Serve an index over HTTP: /search, /embed, /info, /health, a search page at / and API docs at /docs.

    Limits come from WHITEVEC_SERVE_* variables (see docs); WHITEVEC_API_KEY, when set, is required in the
    X-API-Key header.
    """
    existing_folder(index_dir, "index folder")
    try:
        from whitevec.service.run import serve
    except ImportError as exc:
        raise BadInputError(f"serving needs the serve extra: pip install 'whitevec[serve]' ({exc})") from None
    serve(index_dir, host=host, port=port, workers=workers)


def _click_exception() -> type[Exception]:
    """The ClickException of the click typer runs on: recent typer raises the classes of its own copy of click
    (typer._click), which ``click.ClickException`` does not catch; older typer raises click's. typer.BadParameter,
    public in every typer, is one of those classes, so its ClickException base is the one to catch."""
    base = next((cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException"), None)
    return base or typer.BadParameter


def _context_of(argv: Sequence[str]) -> Any:
    """A context for the command ``argv`` names (``index build``), for the usage of an error click raises without
    one (an option missing its value)."""
    command: Any = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="whitevec")
    for token in argv:
        command = getattr(command, "commands", {}).get(token)
        if command is None:
            break
        ctx = typer.Context(command, info_name=token, parent=ctx)
    return ctx


def _show_usage_error(exc: Any, argv: Sequence[str]) -> None:
    """A click error (bad usage) as whitevec reports bad input: the command's usage, the problem on one line, and
    where the command's help is."""
    ctx = getattr(exc, "ctx", None) or _context_of(argv)
    typer.echo(ctx.get_usage(), err=True)
    typer.echo(f"whitevec: error: {' '.join(exc.format_message().split())}", err=True)
    if ctx.help_option_names:
        typer.echo(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.", err=True)


def _stdout_is_devnull() -> bool:
    """Whether file descriptor 1 is /dev/null (where rich's broken-pipe handler points it)."""
    try:
        here, null = os.fstat(sys.stdout.fileno()), os.stat(os.devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (captured in tests, closed)
        return False
    return (here.st_dev, here.st_ino) == (null.st_dev, null.st_ino)


def main(argv: list[str] | None = None) -> int:
    """Entry point: known errors become one line on stderr; bugs keep their traceback.

    Exit status: 0 done, 2 bad input (``WhitevecError``, bad usage, a group without a command), 1 a fault of the
    environment (disk full, read-only, no permission), 130 interrupted (Ctrl-C), 141 stdout closed by its reader.
    """
    stdout_was_devnull = _stdout_is_devnull()
    try:
        code = app(args=argv, prog_name="whitevec", standalone_mode=False)
        with _writing_stdout():
            sys.stdout.flush()  # output still buffered meets a reader that left here, not at interpreter exit
    except SystemExit as exc:
        # typer prints help through its own rich console, whose broken-pipe handler points stdout at /dev/null
        # and exits 1 (`whitevec --help | head -1`): the same reader leaving as below, so the same 141.
        if exc.code == 1 and not stdout_was_devnull and _stdout_is_devnull():
            raise SystemExit(141) from None
        raise
    except _StdoutClosedError:
        # `whitevec search ... | head`: the reader had enough, which is no error of the user or the system, so
        # no message. The status is the one a shell shows for cat, grep or any tool stopped by SIGPIPE (128 +
        # 13), so `set -o pipefail` scripts see whitevec as they see those; 0 would claim all output was read.
        # stdout then writes to /dev/null: whatever is still buffered or written later (an atexit handler) cannot
        # fail at interpreter exit with "Exception ignored ... BrokenPipeError".
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        raise SystemExit(141) from None
    except WhitevecError as exc:
        print(f"whitevec: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except typer.Exit as exc:
        code = exc.exit_code
    except _click_exception() as exc:  # bad usage: a missing, unknown or bad option or argument
        _show_usage_error(exc, sys.argv[1:] if argv is None else argv)
        raise SystemExit(getattr(exc, "exit_code", 2)) from None
    except (KeyboardInterrupt, typer.Abort):
        code = 130
    except (OSError, sqlite3.Error) as exc:
        # Disk full, read-only folder, no permission: faults of the environment, not bugs, so one line and no
        # traceback. Other SQLite errors are bugs and propagate.
        line = describe_fault(exc)
        if line is None:
            raise
        print(f"whitevec: error: {line}", file=sys.stderr)
        raise SystemExit(1) from None
    # Without standalone mode typer turns Ctrl-C into Exit(130) and returns the code, as it does for any Exit:
    # an int is an exit status, whatever the path it came by.
    if code == 130:
        print("whitevec: interrupted", file=sys.stderr)
    if isinstance(code, int) and code != 0:
        raise SystemExit(code)
    return 0


if __name__ == "__main__":  # python -m whitevec.cli
    main()
