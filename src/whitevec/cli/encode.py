"""``whitevec encode``, ``fit`` and ``frequencies count``: vectors, transforms and token counts as files."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import whitevec.cli._options as _options
from whitevec.cli._options import (
    EngineOpt,
    GpusOpt,
    MaxLengthOpt,
    ModelOpt,
    PoolingOpt,
    RayAddressOpt,
    RunOptions,
    TokenFrequenciesOpt,
    TokenWeightsOpt,
    WorkersOpt,
    _group,
    _token_weights,
    with_run_options,
)
from whitevec.datasets.paths import existing_file
from whitevec.encoders.models.resolution import DEFAULT_MODEL
from whitevec.errors import BadInputError
from whitevec.preflight import check_encoder, check_output, model_hidden_size

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder


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
    from whitevec.workflows import encode_file

    weights = _token_weights(token_weights, token_frequencies, model, [pooling])
    written = encode_file(
        input_file,
        out,
        encoder=run.encoder(model, pooling, *weights),
        transform=transform,
        engine=engine,
        ray_address=ray_address,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        show_progress=run.show_progress,
        make_encoder=_options._encoder,
    )
    typer.echo(f"wrote {written}", err=True)


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
        weights = _token_weights(token_weights, token_frequencies, model, [pooling])
    elif token_weights is not None or token_frequencies is not None:
        raise BadInputError("--token-weights applies when encoding --texts, not to --vectors")
    from whitevec.workflows.vectors import fit_transform_file

    encoding: contextlib.AbstractContextManager[AnyEncoder | None] = (
        contextlib.nullcontext() if texts is None else _options._encoder(**run.encoder(model, pooling, *weights))
    )
    with encoding as encoder:
        fitted, n_rows = fit_transform_file(
            transform, out, vectors=vectors, texts=texts, encoder=encoder, show_progress=run.show_progress
        )
    typer.echo(f"fitted {fitted} on {n_rows} vectors; wrote {out}", err=True)


frequencies_app = _group(help="Token frequencies for --token-weights.")


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

    from whitevec.encoders.tokenization import count_model_frequencies

    counted = with_source(count_model_frequencies(model, texts, max_length), source=corpus.name)
    counted.save(out)
    typer.echo(
        f"wrote {out}: {counted.n_tokens} tokens of {counted.n_types} types in {counted.n_texts} texts ({model})",
        err=True,
    )
