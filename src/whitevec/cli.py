"""The ``whitevec`` command: argument parsing, one library call, printing. No logic the library lacks."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import click
import typer

from whitevec.errors import BadInputError, WhitevecError

app = typer.Typer(
    name="whitevec",
    help="Sentence vectors from pretrained encoders, made isotropic, measured, and searchable.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def split_list(value: str) -> list[str]:
    """'a, b,c' -> ['a', 'b', 'c'] for the comma-separated options."""
    return [item.strip() for item in value.split(",") if item.strip()]


# ---- foundation commands (encode, fit, eval) -------------------------------------------------------------
# [section: foundation]
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model alias, local folder or hub id.")]
PoolingOpt = Annotated[str, typer.Option("--pooling", "-p", help="Pooling name or comma list of layer indices.")]
MaxLengthOpt = Annotated[int, typer.Option("--max-length", help="Tokens kept per text (longer ones truncated).")]
BatchOpt = Annotated[int, typer.Option("--batch-size", help="Texts per forward pass.")]
DeviceOpt = Annotated[Optional[str], typer.Option("--device", help="torch device (default: cuda if present).")]  # noqa: UP045
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the vector cache.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


def _encoder(
    model: str, pooling: str, max_length: int, batch_size: int, device: str | None, no_cache: bool
) -> Any:
    from whitevec.encoder import Encoder

    return Encoder(model, pooling, max_length=max_length, batch_size=batch_size, device=device, cache=not no_cache)


def _progress_flag(quiet: bool) -> bool | None:
    return False if quiet else None


@app.command("eval")
def eval_command(
    model: ModelOpt = "all-MiniLM-L6-v2",
    pooling: Annotated[
        str, typer.Option("--pooling", "-p", help="One pooling or a comma list.")
    ] = "first-last-avg",
    transform: Annotated[
        str, typer.Option("--transform", "-t", help="Comma list: none, whitening, whitening-K, flow, ...")
    ] = "none,whitening,whitening-256",
    fit_on: Annotated[
        str, typer.Option("--fit-on", help="target, train, or a text file (one sentence a line).")
    ] = ("target"),
    tasks: Annotated[
        str, typer.Option("--tasks", help="Comma list of STS tasks.")
    ] = "stsb,sts12,sts13,sts14,sts15",
    pairs: Annotated[
        Optional[Path], typer.Option("--pairs", help="Also evaluate a pairs file (TSV/CSV/JSONL).")
    ] = (  # noqa: UP045
        None
    ),
    data_dir: Annotated[
        Optional[Path], typer.Option("--data-dir", help="Data folder (default $WHITEVEC_DATA).")
    ] = (  # noqa: UP045
        None
    ),
    variant: Annotated[str, typer.Option("--variant", help="original or senteval-tokenized text.")] = "original",
    json_out: Annotated[
        Optional[Path], typer.Option("--json", help="Write the full results as JSON here.")
    ] = None,  # noqa: UP045
    max_length: MaxLengthOpt = 512,
    batch_size: BatchOpt = 64,
    device: DeviceOpt = None,
    no_cache: NoCacheOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Spearman x 100 on STS tasks, raw and transformed: all / mean / wmean side by side."""
    from whitevec.datasets import load_sts_task, read_pairs_file
    from whitevec.evaluation.sts import evaluate_sts_poolings

    task_names = split_list(tasks)
    loaded = [load_sts_task(name, data_dir=data_dir, variant=variant) for name in task_names]
    if pairs is not None:
        loaded.append(read_pairs_file(pairs))
    encoder = _encoder(
        model, split_list(pooling)[0] if pooling else pooling, max_length, batch_size, device, no_cache
    )
    report = evaluate_sts_poolings(
        encoder, split_list(pooling), loaded, split_list(transform), fit_on, _progress_flag(quiet)
    )
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"STS Spearman x 100 - {model} (transform fitted on {fit_on})")
    for column in ("task", "pooling", "transform", "pairs", "all", "mean", "wmean"):
        table.add_column(column, justify="left" if column in ("task", "pooling", "transform") else "right")
    for score in report.scores:
        n_pairs = sum(s.n_pairs for s in score.subsets)
        table.add_row(
            score.task,
            score.pooling,
            score.transform,
            str(n_pairs),
            f"{score.all:.2f}",
            f"{score.mean:.2f}",
            f"{score.wmean:.2f}",
        )
    Console().print(table)
    if json_out is not None:
        report.save_json(json_out)
        typer.echo(f"wrote {json_out}", err=True)


@app.command("encode")
def encode_command(
    input_file: Annotated[Path, typer.Argument(help="Text file, one text a line (blank lines skipped).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the .npy matrix.")],
    model: ModelOpt = "all-MiniLM-L6-v2",
    pooling: PoolingOpt = "first-last-avg",
    transform: Annotated[
        Optional[Path], typer.Option("--transform", help="A saved transform applied after encoding.")  # noqa: UP045
    ] = None,
    max_length: MaxLengthOpt = 512,
    batch_size: BatchOpt = 64,
    device: DeviceOpt = None,
    no_cache: NoCacheOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Encode texts to a float32 .npy matrix (one row a line), optionally through a saved transform."""
    from whitevec.datasets import read_texts_file
    from whitevec.vectors import encode_to_file

    texts = read_texts_file(input_file)
    encoder = _encoder(model, pooling, max_length, batch_size, device, no_cache)
    shape = encode_to_file(encoder, texts, out, transform, show_progress=_progress_flag(quiet))
    typer.echo(f"wrote {out} ({shape[0]} x {shape[1]})", err=True)


@app.command("fit")
def fit_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the transform (.safetensors).")],
    transform: Annotated[str, typer.Option("--transform", "-t", help="whitening, whitening-K, flow, ...")] = (
        "whitening"
    ),
    vectors: Annotated[Optional[Path], typer.Option("--vectors", help="A .npy matrix to fit on.")] = None,  # noqa: UP045
    texts: Annotated[Optional[Path], typer.Option("--texts", help="A text file to encode and fit on.")] = None,  # noqa: UP045
    model: ModelOpt = "all-MiniLM-L6-v2",
    pooling: PoolingOpt = "first-last-avg",
    max_length: MaxLengthOpt = 512,
    batch_size: BatchOpt = 64,
    device: DeviceOpt = None,
    no_cache: NoCacheOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Fit a transform on vectors (.npy) or on texts encoded with a model, and save it."""
    from whitevec.vectors import fit_transform_file

    if (vectors is None) == (texts is None):
        raise BadInputError("give exactly one of --vectors FILE.npy or --texts FILE.txt")
    encoder = None if texts is None else _encoder(model, pooling, max_length, batch_size, device, no_cache)
    fitted, n_rows = fit_transform_file(
        transform, out, vectors=vectors, texts=texts, encoder=encoder, show_progress=_progress_flag(quiet)
    )
    typer.echo(f"fitted {fitted} on {n_rows} vectors; wrote {out}", err=True)


# ---- diagnostics (issue 4) -----------------------------------------------------------------------------
# [section: diagnostics]

# ---- index and search (issue 5) ------------------------------------------------------------------------
# [section: index]

# ---- serve (issue 7) -----------------------------------------------------------------------------------
# [section: serve]


def main(argv: list[str] | None = None) -> Any:
    """Entry point: known errors become one line on stderr and exit status 2; bugs keep their traceback."""
    try:
        return app(args=argv, standalone_mode=False)
    except WhitevecError as exc:
        print(f"whitevec: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except click.exceptions.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except click.ClickException as exc:  # bad usage: click's own one-line message
        exc.show()
        raise SystemExit(exc.exit_code) from None
    except (KeyboardInterrupt, click.exceptions.Abort):
        print("whitevec: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
