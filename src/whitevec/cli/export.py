"""``whitevec export-st``: a sentence-transformers folder from a model and a transform, or from an index."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from whitevec.cli._options import DeviceOpt, MaxLengthOpt, ModelOpt, PoolingOpt
from whitevec.datasets.paths import existing_file
from whitevec.encoders.models.resolution import DEFAULT_MODEL
from whitevec.errors import BadInputError
from whitevec.preflight import check_encoder, check_output, existing_folder


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
    """Write a sentence-transformers folder: SentenceTransformer(OUT).encode(texts) gives whitevec's vectors. From
    a static encoder folder: a static folder with the transform folded into its table (linear transforms only)."""
    from whitevec.export.sentence_transformers import check_export_target

    check_export_target(out, overwrite)
    check_output(out, "--out folder", folder=True)  # its parent can be written; the folder is made at the end
    if index is not None:
        if transform is not None or pooling is not None or max_length is not None or model != DEFAULT_MODEL:
            raise BadInputError("--index takes the model, pooling, max_length and transform from the index")
        existing_folder(index, "index folder")
        from whitevec.export.sentence_transformers import export_index

        written = export_index(index, out, overwrite=overwrite, normalize=normalize, device=device)
    else:
        if transform is not None:
            existing_file(transform, "transform file")
        check_encoder(model, cache=False)
        from whitevec.encoders.loading import load_encoder
        from whitevec.export.sentence_transformers import export_sentence_transformer
        from whitevec.transforms import Transform

        fitted = Transform.load(transform) if transform is not None else None
        with load_encoder(model, pooling, max_length=max_length, device=device, cache=False) as encoder:
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
