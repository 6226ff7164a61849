"""``whitevec distill``: a static encoder folder (Model2Vec's format) from a model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from whitevec.cli._options import DeviceOpt, QuietOpt
from whitevec.errors import BadInputError


def _dims(value: str) -> int | None:
    """--dims: a positive number, or none (no PCA)."""
    if value.strip().lower() == "none":
        return None
    try:
        return int(value)
    except ValueError:
        raise BadInputError(f"--dims takes a number of dimensions or none, not {value!r}") from None


def distill_command(
    model: Annotated[str, typer.Argument(help="Model alias, local folder or hub id to distil.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Static encoder folder to write.")],
    method: Annotated[
        str,
        typer.Option(
            "--method",
            help="tokens: each vocabulary token alone through the model (Model2Vec's); corpus: each token's mean "
            "contextual vector over --corpus (tokens never seen: as tokens).",
        ),
    ] = "tokens",
    corpus: Annotated[
        Path | None,
        typer.Option(
            "--corpus",
            help="Your text, one text a line: for --method corpus, the counts of --token-weights sif/usif/zipf "
            "and the fit of --transform.",
        ),
    ] = None,
    sample: Annotated[
        int, typer.Option("--sample", help="Corpus lines drawn for the model passes and the transform's fit.")
    ] = 10_000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the corpus sample.")] = 0,
    dims: Annotated[
        str, typer.Option("--dims", help="PCA dimensions fitted on the token table, or none (no PCA).")
    ] = "256",
    token_weights: Annotated[
        str,
        typer.Option(
            "--token-weights",
            help="sif-rank (Model2Vec's: SIF over the token rank), sif, usif or zipf (counted on --corpus or "
            "read from --frequencies), or none.",
        ),
    ] = "sif-rank",
    frequencies: Annotated[
        Path | None,
        typer.Option(
            "--frequencies",
            help="Token counts for --token-weights: a `whitevec frequencies count` file (.json) or a text file.",
        ),
    ] = None,
    transform: Annotated[
        str | None,
        typer.Option(
            "--transform",
            "-t",
            help="A linear transform fitted on the corpus's static sentence vectors and folded into the table: "
            "whitening, whitening-K, pca-K, abtt, ...",
        ),
    ] = None,
    pooling: Annotated[
        str, typer.Option("--pooling", "-p", help="A mean pooling for the token vectors (last-avg, a layer list).")
    ] = "last-avg",
    normalize: Annotated[
        bool, typer.Option("--normalize/--no-normalize", help="The folder's vectors L2-normalised (Model2Vec's).")
    ] = True,
    max_length: Annotated[
        int | None,
        typer.Option("--max-length", help="Tokens kept per text (the folder's, and the corpus passes')."),
    ] = 512,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an existing --out folder.")] = False,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Texts per forward pass of the model.")
    ] = 64,
    device: DeviceOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Distil MODEL into a static encoder folder: one vector per vocabulary token, a mean per sentence."""
    from whitevec.distill.run import distill

    result = distill(
        model,
        out,
        method=method,
        corpus=corpus,
        sample=sample,
        seed=seed,
        dims=_dims(dims),
        token_weights=token_weights,
        frequencies=frequencies,
        transform=transform,
        normalize=normalize,
        max_length=max_length,
        pooling=pooling,
        batch_size=batch_size,
        device=device,
        overwrite=overwrite,
        show_progress=False if quiet else None,
    )
    seen = f", {result.n_seen:,} tokens seen in {result.n_texts:,} texts" if method == "corpus" else ""
    folded = f", {transform} folded" if transform else ""
    typer.echo(
        f"wrote {result.path}: {result.vocab_size:,} tokens x {result.dim} ({method}{seen}, "
        f"{token_weights} weights{folded}) in {result.seconds:.1f} s; load with "
        f"StaticModel.from_pretrained({str(result.path)!r})",
        err=True,
    )
