"""``whitevec index build | info | export-faiss`` and ``whitevec search``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

import whitevec.cli._options as _options
from whitevec.cli._options import (
    ConfigOpt,
    DeviceOpt,
    EngineOpt,
    GpusOpt,
    MetricOpt,
    ModelOpt,
    RayAddressOpt,
    RunOptions,
    StoreOpt,
    WorkersOpt,
    _check_engine,
    _default_pooling,
    _encoder_args,
    _from_config,
    _group,
    with_run_options,
)
from whitevec.cli._output import FormatOpt, TableFormat, _print, _print_table, _Table
from whitevec.datasets.paths import existing_file
from whitevec.errors import BadInputError
from whitevec.models import DEFAULT_MODEL
from whitevec.preflight import check_encoder, check_output, existing_folder, input_file

index_app = _group(help="Build a searchable index, inspect it, export it for plain FAISS.")
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
        _options._encoder(model, pooling or _default_pooling(model, "last-avg"), run) as encoder,
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
