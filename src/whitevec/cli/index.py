"""``whitevec index build | info | export-faiss`` and ``whitevec search``."""

from __future__ import annotations

import inspect
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import whitevec.cli._options as _options
from whitevec.cli._options import (
    ConfigOpt,
    DeviceOpt,
    EngineOpt,
    GpusOpt,
    IndexModelOpt,
    MetricOpt,
    ModelOpt,
    RayAddressOpt,
    RunOptions,
    StoreOpt,
    WorkersOpt,
    _from_config,
    _group,
    with_run_options,
)
from whitevec.cli._output import FormatOpt, TableFormat, _print, _print_table, _Table
from whitevec.encoders.models.resolution import DEFAULT_MODEL
from whitevec.errors import BadInputError, WhitevecWarning
from whitevec.preflight import check_output, existing_folder

if TYPE_CHECKING:
    from whitevec.index import SearchHit

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
        help="How vectors are stored: float32, fp16, sq8, sq4, pqM, pqMxB, opqM,pqM, binary, binary-rr, itq, "
        "rabitq[-qbN], faiss:FACTORY; +refine re-ranks from float32 in memory, +rescore[=K][:fp16|:int8] the top "
        "K x k from vectors on disk.",
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


# Options of index build alone, one line each in its signature.
CorpusOpt = Annotated[Path, typer.Option("--corpus", help="Text (one doc a line), CSV/TSV or JSONL (id, text).")]
IndexOutOpt = Annotated[Path, typer.Option("--out", "-o", help="Index folder to write (replaced atomically).")]
IndexTransformOpt = Annotated[
    str,
    typer.Option(
        "--transform",
        "-t",
        help="none, whitening, whitening-K, center, or a .safetensors file. Default none: raw vectors, since "
        "whitening costs contrastively trained sentence encoders such as the default model; run `whitevec tune`, "
        "or pass --transform whitening-K for anisotropic encoders such as static tables or CLS vectors.",
    ),
]
IndexFitOnOpt = Annotated[str, typer.Option("--fit-on", help="corpus, or a text file to fit the transform on.")]
IndexKindOpt = Annotated[str, typer.Option("--kind", help="flat (exact), hnsw or ivf.")]
IndexUriOpt = Annotated[
    str | None, typer.Option("--uri", help="Milvus URI: file.db (Milvus Lite) or http://host:19530.")
]
HnswLinksOpt = Annotated[int | None, typer.Option("--M", help="HNSW links per node.")]
EfConstructionOpt = Annotated[int | None, typer.Option("--ef-construction", help="HNSW build depth.")]
EfSearchOpt = Annotated[int | None, typer.Option("--ef-search", help="HNSW search depth.")]
NlistOpt = Annotated[int | None, typer.Option("--nlist", help="IVF lists (default ~4 sqrt(n)).")]
NprobeOpt = Annotated[int | None, typer.Option("--nprobe", help="IVF lists searched.")]
TrainSampleOpt = Annotated[
    int | None, typer.Option("--train-sample", help="Train SQ/PQ/IVF on N vectors drawn with a fixed seed.")
]
RefineFactorOpt = Annotated[
    int | None, typer.Option("--refine-factor", help="+refine: candidates re-ranked = factor x k (4).")
]
FitSampleOpt = Annotated[
    int | None,
    typer.Option(
        "--fit-sample",
        help="With --engine ray: fit the transform on N corpus vectors drawn with --fit-seed (any transform, "
        "flow included) instead of exactly on all of them (whitening forms only).",
    ),
]
FitSeedOpt = Annotated[int, typer.Option("--fit-seed", help="Seed of the --fit-sample draw.")]
EmptyDocumentsOpt = Annotated[
    str | None,
    typer.Option(
        "--empty-documents",
        help="Documents with no token the model knows (empty, blank, only emoji): skip (the default; not "
        "indexed), keep (indexed as they encode) or error (refuse the build). Counted in a warning. --engine ray "
        "keeps them.",
    ),
]
LexicalOpt = Annotated[
    str | None,
    typer.Option(
        "--lexical",
        help="none or bm25: bm25 keeps a BM25 index of the documents' text beside the vectors (bm25s, in the same "
        "index version), for lexical and hybrid search. Default: none. On --backend milvus (and --engine ray), "
        "Milvus's own BM25 on the collection's text field (analyzers english and plain; Milvus Lite does not "
        "stem).",
    ),
]
AnalyzerOpt = Annotated[
    str,
    typer.Option(
        "--analyzer",
        help="How --lexical bm25 cuts documents and queries into terms: english (lower case, English stop words, "
        "Snowball stemmer), plain (lower-cased words), cjk-bigram (Chinese, Japanese, Korean: overlapping "
        "character bigrams, no dictionary) or encoder (the model's own tokens). On Milvus: english or plain.",
    ),
]

KeepRawVectorsOpt = Annotated[
    bool,
    typer.Option(
        "--keep-raw-vectors",
        help="Keep the encoder's vectors before the transform in the index folder (float32, 4 bytes per "
        "dimension per document; adds keep theirs too), so `index refit` fits on them without encoding again. "
        "Local builds on --backend faiss.",
    ),
]

VectorsOpt = Annotated[
    Path | None,
    typer.Option(
        "--vectors",
        help="The documents' own vectors (an embedding API's, say): .npy, or .safetensors holding one tensor; a "
        "float row per document, in the corpus's order. No model loads: the index's encoder is external "
        "(--encoder-name), searched with --query-vectors and added to with `index add --vectors`.",
    ),
]
EncoderNameOpt = Annotated[
    str | None,
    typer.Option(
        "--encoder-name", help="With --vectors or --dim: the name of what made the vectors, kept in the manifest."
    ),
]


BuildFusionOpt = Annotated[
    str | None,
    typer.Option(
        "--fusion",
        help="The index's own hybrid fusion (with --lexical bm25): convex[:ALPHA] or rrf[:K], as search takes it. "
        "Default: chosen on pseudo-queries cut from the corpus.",
    ),
]


@index_app.command("build")
@with_run_options
def index_build_command(
    corpus: CorpusOpt,
    out: IndexOutOpt,
    model: ModelOpt = DEFAULT_MODEL,
    pooling: IndexPoolingOpt = None,
    transform: IndexTransformOpt = "none",
    fit_on: IndexFitOnOpt = "corpus",
    kind: IndexKindOpt = "flat",
    metric: MetricOpt = "cosine",
    backend: StoreOpt = "faiss",
    uri: IndexUriOpt = None,
    m: HnswLinksOpt = None,
    ef_construction: EfConstructionOpt = None,
    ef_search: EfSearchOpt = None,
    nlist: NlistOpt = None,
    nprobe: NprobeOpt = None,
    config: ConfigOpt = None,
    encoding: EncodingOpt = "float32",
    train_sample: TrainSampleOpt = None,
    refine_factor: RefineFactorOpt = None,
    engine: EngineOpt = "local",
    ray_address: RayAddressOpt = None,
    workers: WorkersOpt = None,
    gpus_per_worker: GpusOpt = 0.0,
    fit_sample: FitSampleOpt = None,
    fit_seed: FitSeedOpt = 0,
    empty_documents: EmptyDocumentsOpt = None,
    lexical: LexicalOpt = None,
    analyzer: AnalyzerOpt = "english",  # = DEFAULT_ANALYZER; whitevec.index is too heavy for start-up
    keep_raw_vectors: KeepRawVectorsOpt = False,
    vectors: VectorsOpt = None,
    encoder_name: EncoderNameOpt = None,
    fusion: BuildFusionOpt = None,
    *,
    run: RunOptions,
) -> None:
    """Encode a corpus, fit the transform, and write an index folder (manifest, transform, index, documents).

    With --lexical bm25, a BM25 index of the documents' text too, in the same index version; its fusion is
    --fusion, a --config's, or chosen on pseudo-queries cut from the corpus (index info: fusion_choice).

    With --vectors, the documents' own vectors are indexed (the transform fitted on them) and no model loads.

    With --engine ray (--backend milvus), --corpus may be a quoted glob of shards (JSONL, CSV/TSV, text,
    Parquet); the documents are kept in the Milvus collection, and a killed build resumes when run again."""
    from whitevec.workflows import build_index_file

    search = None
    if config is not None:
        model, pooling, transform, encoding, run = _from_config(
            config, index_build_command, run, model=model, pooling=pooling, transform=transform, encoding=encoding
        )
        lexical, analyzer, search = _search_from_config(config, lexical, analyzer)
    search = _given_fusion(fusion, config, search)
    params = _index_params(m, ef_construction, ef_search, nlist, nprobe)
    index_params = _encoding_params(params, encoding, train_sample, refine_factor)
    settings: dict[str, Any] = dict(kind=kind, metric=metric, backend=backend, uri=uri, index_params=index_params)
    settings.update(lexical=lexical, analyzer=analyzer, keep_raw_vectors=keep_raw_vectors, search=search)
    if vectors is not None or encoder_name is not None:
        flags = (model, pooling, config, engine, fit_on, empty_documents)
        built = _build_given_vectors(corpus, out, vectors, encoder_name, transform, flags, settings)
    else:
        built = build_index_file(
            corpus,
            out,
            encoder=run.encoder(model, pooling),
            engine=engine,
            transform=transform,
            fit_on=fit_on,
            ray_address=ray_address,
            workers=workers,
            gpus_per_worker=gpus_per_worker,
            fit_sample=fit_sample,
            fit_seed=fit_seed,
            show_progress=run.show_progress,
            make_encoder=_options._encoder,
            empty_documents=empty_documents,
            **settings,
        )
    typer.echo(f"wrote {built}", err=True)


def _given_fusion(fusion: str | None, config: Path | None, search: dict[str, str] | None) -> dict[str, str] | None:
    """The index's own search of ``index build --fusion`` (hybrid), refused beside --config in one line;
    without it, ``search`` (a configuration's, or None: a build with a lexical part chooses its own)."""
    if fusion is None:
        return search
    if config is not None:
        raise BadInputError("--fusion and --config both set the index's fusion; give one")
    return {"mode": "hybrid", "fusion": fusion}


def _build_given_vectors(
    corpus: Path,
    out: Path,
    vectors: Path | None,
    encoder_name: str | None,
    transform: str,
    flags: tuple[Any, ...],
    settings: dict[str, Any],
) -> Any:
    """``index build --vectors``: the options an index of given vectors refuses (one line: those of a model, of
    encoding, of Ray; --encoder-name without --vectors), then the build. ``flags``: --model, --pooling,
    --config, --engine, --fit-on and --empty-documents as given."""
    if vectors is None:
        raise BadInputError("--encoder-name names the encoder of --vectors; give the vectors file too")
    model, pooling, config, engine, fit_on, empty_documents = flags
    given = {"--model": model != DEFAULT_MODEL, "--pooling": bool(pooling), "--config": config is not None}
    given.update(
        {"--engine": engine != "local", "--fit-on": fit_on != "corpus", "--empty-documents": bool(empty_documents)}
    )
    named = [flag for flag, present in given.items() if present]
    if named:
        raise BadInputError(
            f"--vectors indexes the documents' own vectors and no model encodes them: leave {', '.join(named)} out"
        )
    from whitevec.workflows.given_vectors import build_from_vectors_file

    return build_from_vectors_file(
        corpus, out, vectors, encoder_name=encoder_name, transform=transform, **settings
    )


@index_app.command("create")
@with_run_options
def index_create_command(
    out: Annotated[Path, typer.Argument(help="Index folder to write (replaced atomically).")],
    dim: Annotated[
        int | None, typer.Option("--dim", help="The vectors' dimension: an index of vectors given by the caller.")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="A model (alias, folder or hub id): an index of its vectors."),
    ] = None,
    pooling: IndexPoolingOpt = None,
    encoder_name: EncoderNameOpt = None,
    transform: IndexTransformOpt = "none",
    kind: IndexKindOpt = "flat",
    metric: MetricOpt = "cosine",
    m: HnswLinksOpt = None,
    ef_construction: EfConstructionOpt = None,
    ef_search: EfSearchOpt = None,
    nlist: NlistOpt = None,
    nprobe: NprobeOpt = None,
    encoding: EncodingOpt = "float32",
    train_sample: TrainSampleOpt = None,
    refine_factor: RefineFactorOpt = None,
    lexical: LexicalOpt = None,
    analyzer: AnalyzerOpt = "english",
    keep_raw_vectors: KeepRawVectorsOpt = False,
    *,
    run: RunOptions,
) -> None:
    """Write an empty index (no documents) with build's settings, grown by `index add` (faiss backend).

    --dim D: its vectors are given by the caller (`index add --vectors`, `search --query-vectors`); --model M:
    its model's (loaded once, to record it). A transform that needs data (whitening, whitening-K) is fitted on
    the first add, which must bring more documents than the directions it keeps (refused, nothing written,
    until one does)."""
    from whitevec.workflows.given_vectors import create_empty_index

    params = _encoding_params(
        _index_params(m, ef_construction, ef_search, nlist, nprobe), encoding, train_sample, refine_factor
    )
    created = create_empty_index(
        out,
        dim=dim,
        encoder=None if model is None else run.encoder(model, pooling),
        make_encoder=_options._encoder,
        encoder_name=encoder_name,
        transform=transform,
        kind=kind,
        metric=metric,
        index_params=params,
        lexical=lexical,
        analyzer=analyzer,
        keep_raw_vectors=keep_raw_vectors,
    )
    typer.echo(f"wrote {created}", err=True)


def _search_from_config(
    config: Path, lexical: str | None, analyzer: str
) -> tuple[str | None, str, dict[str, str]]:
    """(--lexical, --analyzer, the manifest's search field) of a tuned configuration: a lexical or hybrid mode
    builds the lexical part with the configuration's analyzer; --lexical none or another --analyzer contradicts
    it (one line)."""
    from whitevec.tuning.config import ConfigMismatchError, TunedConfig

    tuned = TunedConfig.load(config)
    if not tuned.needs_lexical:
        return lexical, analyzer, tuned.search
    if lexical is not None and lexical.strip().lower() == "none":
        raise ConfigMismatchError(
            f"--lexical none contradicts the tuned configuration {config}, which searches in {tuned.mode} mode "
            "(a BM25 part); leave --lexical out"
        )
    default = inspect.signature(index_build_command).parameters["analyzer"].default
    if analyzer.strip().lower() not in (default, tuned.analyzer):
        raise ConfigMismatchError(
            f"--analyzer {analyzer} contradicts the tuned configuration {config}, which was tuned with analyzer "
            f"{tuned.analyzer!r}; leave --analyzer out, or tune again"
        )
    return lexical or "bm25", tuned.analyzer, tuned.search


@index_app.command("info")
def index_info_command(index_dir: Annotated[Path, typer.Argument(help="Index folder.")]) -> None:
    """Print an index's manifest (checksums verified) as JSON, with its size under "size": encoding, code bytes
    per vector, index bytes, and the bytes a vector costs in memory (ram_bytes_per_vector) and on disk
    (disk_bytes_per_vector: +rescore's vectors, read from disk on demand); the lexical part's bytes
    (lexical_bytes, lexical_bytes_per_document), or how to add one. Under "state": documents live and deleted
    (kept until a merge), segments, the version (each write adds one), and how stale the transform is (rows
    added since its fit: docs/results/staleness.md measures what that costs), and whether the raw vectors a refit
    fits on without encoding are kept (--keep-raw-vectors) and their bytes on disk."""
    existing_folder(index_dir, "index folder")
    from whitevec.index import index_size, read_manifest
    from whitevec.index.folder.layout import index_state
    from whitevec.index.folder.raw_vectors import raw_vectors_state
    from whitevec.index.folder.staleness import transform_staleness
    from whitevec.index.lexical.bm25 import lexical_size

    manifest = read_manifest(index_dir)
    size = {**index_size(manifest), **lexical_size(manifest)}
    state = {**index_state(manifest), "transform": transform_staleness(manifest)}
    state["raw_vectors"] = raw_vectors_state(manifest)
    _print(json.dumps({**manifest, "size": size, "state": state}, indent=2, sort_keys=True))


@index_app.command("export-faiss")
def index_export_faiss_command(
    index_dir: Annotated[Path, typer.Argument(help="Index folder (faiss backend, linear transform).")],
    out: Annotated[Path, typer.Argument(help="FAISS file to write: takes raw encoder vectors.")],
) -> None:
    """One FAISS file with the whitening in its pre-transform chain: faiss.read_index(OUT).search(raw, k)."""
    existing_folder(index_dir, "index folder")
    check_output(out, "FAISS file")
    from whitevec.export import export_faiss

    export_faiss(index_dir, out)
    typer.echo(f"wrote {out} (ids are the rows of {index_dir / 'docs.sqlite'})", err=True)


SearchModeOpt = Annotated[
    str | None,
    typer.Option(
        "--mode",
        help="dense (the vectors), lexical (the BM25 part) or hybrid (both, fused). Default: the index's own "
        "(hybrid when it was built with --lexical bm25, else dense).",
    ),
]
FusionOpt = Annotated[
    str | None,
    typer.Option(
        "--fusion",
        help="How hybrid fuses the two rankings: convex[:ALPHA] = ALPHA x min-max(dense) + (1 - ALPHA) x "
        "min-max(lexical), ALPHA the dense weight (convex alone: 0.5); rrf[:K] = the sum of 1/(K + rank) (rrf "
        "alone: 60). Default: the index's own, else convex:0.5. Given without --mode, it asks for hybrid.",
    ),
]
CandidatesOpt = Annotated[
    int | None,
    typer.Option(
        "--candidates",
        help="Hybrid: each ranker's top N x k documents are fused (default 10). Given without --mode, it asks "
        "for hybrid.",
    ),
]
FilterOpt = Annotated[
    str | None,
    typer.Option(
        "--filter",
        help='Only documents whose metadata pass EXPR, e.g. \'year >= 2000 and lang in ["en", "fr"]\': ==, !=, <, '
        "<=, >, >=, in [...], and, or, not, parentheses; strings, numbers, true/false (docs/how-to/filters.md). "
        "The hits are the k best of those that pass.",
    ),
]


def search_command(
    index_dir: Annotated[Path, typer.Argument(help="Index folder.")],
    query: Annotated[
        list[str] | None, typer.Argument(help="One or more queries (none: --query-vectors alone, dense).")
    ] = None,
    k: Annotated[int, typer.Option("-k", help="Results per query (clamped to the corpus size).")] = 10,
    json_out: Annotated[
        bool, typer.Option("--json", help="Same as --format json: the hits of each query, with their metadata.")
    ] = False,
    table_format: FormatOpt = TableFormat.auto,
    device: DeviceOpt = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="A tuned configuration (whitevec tune) the index must follow, checked first."
        ),
    ] = None,
    model: IndexModelOpt = None,
    mode: SearchModeOpt = None,
    fusion: FusionOpt = None,
    candidates: CandidatesOpt = None,
    filter: FilterOpt = None,
    query_vectors: Annotated[
        Path | None,
        typer.Option(
            "--query-vectors",
            help="The queries' own vectors (.npy or one-tensor .safetensors, a row per query, in the space of the "
            "index's encoder): searched instead of encoding the queries; an index built from --vectors needs "
            "them for dense and hybrid search (hybrid: with the query texts too, one per row).",
        ),
    ] = None,
) -> None:
    """Search an index; queries are encoded with the index's own model, pooling and transform, or given as
    vectors (--query-vectors).

    --format json (or --json) prints, per query, its hits with their whole text, metadata and, for lexical and
    hybrid searches, the rank and score each ranker gave it (rankers); csv a row per hit with the whole text; a
    drawn table and Markdown cut texts at 100 characters. Lexical and hybrid tables add each ranker's rank
    ("-": not among its candidates)."""
    if json_out:
        if table_format not in (TableFormat.auto, TableFormat.json):
            raise BadInputError(f"--json is --format json; give it or --format {table_format}, not both")
        table_format = TableFormat.json
    from whitevec.workflows import search_index

    results = search_index(
        index_dir,
        query or None,
        k=k,
        device=device,
        config=config,
        model=model,
        mode=mode,
        fusion=fusion,
        candidates=candidates,
        filter=filter,
        query_vectors=query_vectors,
    )
    # A query given as a vector alone is named by its row.
    query = query or [f"vector {row}" for row in range(1, len(results) + 1)]
    for position, hits in enumerate(results):
        if hits.note is not None:
            warnings.warn(f"query {position + 1}: {hits.note}", WhitevecWarning, stacklevel=1)
    if table_format is TableFormat.json:
        payload = [
            {"query": q, "hits": [h.to_dict() for h in hits], **({"note": hits.note} if hits.note else {})}
            for q, hits in zip(query, results, strict=True)
        ]
        _print(json.dumps(payload, indent=2, ensure_ascii=False))
    else:
        shown = None if table_format is TableFormat.csv else _SHOWN_TEXT
        _print_table(_hits_table(index_dir, query, results, shown), table_format)


# Characters of a document's text a drawn or Markdown table shows; csv and json keep the whole text.
_SHOWN_TEXT = 100


def _hits_table(
    index_dir: Path, queries: list[str], results: Sequence[Sequence[SearchHit]], shown: int | None
) -> _Table:
    """A row per hit: the query, its rank, the document's id, the score and its text (cut to ``shown``
    characters with "...", or whole for None); after a lexical or hybrid search, also the rank each ranker gave
    it (None where it was not among that ranker's candidates)."""
    top = max(map(len, results), default=0)
    rankers = [name for name in _RANKERS if any(name in (hit.rankers or ()) for hits in results for hit in hits)]
    table = _Table(
        f"{index_dir} - top {top} per query",
        ("query", "rank", "id", "score", *rankers, "text"),
        text=("query", "id", "text"),
        formats={"score": ".4f"},
    )
    for q, hits in zip(queries, results, strict=True):
        for rank, hit in enumerate(hits, start=1):
            text = hit.text if shown is None or len(hit.text) <= shown else hit.text[: shown - 3] + "..."
            found = [(hit.rankers or {}).get(name, {}).get("rank") for name in rankers]
            table.add_row(q, rank, hit.id, hit.score, *found, text)
    return table


# The ranker columns of a lexical or hybrid search's table (SearchHit.rankers' names).
_RANKERS = ("dense", "lexical")
