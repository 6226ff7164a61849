"""``whitevec distill``: a static encoder folder (Model2Vec's format) from a model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from whitevec.cli._options import DeviceOpt, QuietOpt
from whitevec.errors import BadInputError

if TYPE_CHECKING:
    from whitevec.distill.run import DistillResult

DistillModelArg = Annotated[str, typer.Argument(help="Model alias, local folder or hub id to distil.")]
DistillOutOpt = Annotated[Path, typer.Option("--out", "-o", help="Static encoder folder to write.")]
MethodOpt = Annotated[
    str,
    typer.Option(
        "--method",
        help="tokens: each vocabulary token alone through the model (Model2Vec's); corpus: each token's mean "
        "contextual vector over --corpus (tokens never seen: as tokens).",
    ),
]
DistillCorpusOpt = Annotated[
    Path | None,
    typer.Option(
        "--corpus",
        help="Your text, one text a line: for --method corpus, the counts of --token-weights sif/usif/zipf "
        "and the fit of --transform.",
    ),
]
SampleOpt = Annotated[
    int, typer.Option("--sample", help="Corpus lines drawn for the model passes and the transform's fit.")
]
SampleSeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the corpus sample.")]
DimsOpt = Annotated[
    str, typer.Option("--dims", help="PCA dimensions fitted on the token table, or none (no PCA).")
]
TokenWeightsOpt = Annotated[
    str,
    typer.Option(
        "--token-weights",
        help="sif-rank (Model2Vec's: SIF over the token rank), sif, usif or zipf (counted on --corpus or "
        "read from --frequencies), or none.",
    ),
]
FrequenciesOpt = Annotated[
    Path | None,
    typer.Option(
        "--frequencies",
        help="Token counts for --token-weights: a `whitevec frequencies count` file (.json) or a text file.",
    ),
]
FoldedTransformOpt = Annotated[
    str | None,
    typer.Option(
        "--transform",
        "-t",
        help="A linear transform fitted on the corpus's static sentence vectors and folded into the table: "
        "whitening, whitening-K, pca-K, abtt, ...",
    ),
]
TokenPoolingOpt = Annotated[
    str, typer.Option("--pooling", "-p", help="A mean pooling for the token vectors (last-avg, a layer list).")
]
NormalizeOpt = Annotated[
    bool, typer.Option("--normalize/--no-normalize", help="The folder's vectors L2-normalised (Model2Vec's).")
]
DistillMaxLengthOpt = Annotated[
    int | None, typer.Option("--max-length", help="Tokens kept per text (the folder's, and the corpus passes').")
]
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help="Replace an existing --out folder.")]
DistillBatchSizeOpt = Annotated[
    int, typer.Option("--batch-size", min=1, help="Texts per forward pass of the model.")
]


def _dims(value: str) -> int | None:
    """--dims: a positive number, or none (no PCA)."""
    if value.strip().lower() == "none":
        return None
    try:
        return int(value)
    except ValueError:
        raise BadInputError(f"--dims takes a number of dimensions or none, not {value!r}") from None


def distill_command(
    model: DistillModelArg,
    out: DistillOutOpt,
    method: MethodOpt = "tokens",
    corpus: DistillCorpusOpt = None,
    sample: SampleOpt = 10_000,
    seed: SampleSeedOpt = 0,
    dims: DimsOpt = "256",
    token_weights: TokenWeightsOpt = "sif-rank",
    frequencies: FrequenciesOpt = None,
    transform: FoldedTransformOpt = None,
    pooling: TokenPoolingOpt = "last-avg",
    normalize: NormalizeOpt = True,
    max_length: DistillMaxLengthOpt = 512,
    overwrite: OverwriteOpt = False,
    batch_size: DistillBatchSizeOpt = 64,
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
    typer.echo(_summary(result, method, token_weights, transform), err=True)


def _summary(result: DistillResult, method: str, token_weights: str, transform: str | None) -> str:
    """The line distill prints on stderr: what it wrote, from what, and how to load it."""
    seen = f", {result.n_seen:,} tokens seen in {result.n_texts:,} texts" if method == "corpus" else ""
    folded = f", {transform} folded" if transform else ""
    return (
        f"wrote {result.path}: {result.vocab_size:,} tokens x {result.dim} ({method}{seen}, "
        f"{token_weights} weights{folded}) in {result.seconds:.1f} s; load with "
        f"StaticModel.from_pretrained({str(result.path)!r})"
    )
