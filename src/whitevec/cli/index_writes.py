"""``whitevec index add | delete | compact | refit``: writing to a built index (one new version each; see
docs/how-to/updates.md)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from whitevec.cli._options import DeviceOpt, IndexModelOpt
from whitevec.cli.index import CorpusOpt, EmptyDocumentsOpt, index_app

IndexDirArg = Annotated[Path, typer.Argument(help="Index folder.")]
# Ids are exact (whitevec.datasets.retrieval.ID_RULE): a line loses its line end only.
IdsFileOpt = Annotated[
    Path | None,
    typer.Option("--ids", help="A file of ids to delete, one a line, taken as written (only the line end goes)."),
]
# Ids a delete names but the index does not hold: reported, the rest deleted, and this exit status.
MISSING_IDS_EXIT = 1


class OnExisting(StrEnum):
    """What an add does with a document whose id the index holds (whitevec.workflows.index_writes.ON_EXISTING)."""

    ERROR = "error"
    REPLACE = "replace"
    SKIP = "skip"


@index_app.command("add")
def index_add_command(
    index_dir: IndexDirArg,
    corpus: CorpusOpt,
    on_existing: Annotated[
        OnExisting,
        typer.Option(
            "--on-existing",
            help="An id the index holds: error (refuse the add, nothing written), replace (upsert) or skip.",
        ),
    ] = OnExisting.ERROR,
    empty_documents: EmptyDocumentsOpt = None,
    device: DeviceOpt = None,
    model: IndexModelOpt = None,
    vectors: Annotated[
        Path | None,
        typer.Option(
            "--vectors",
            help="The documents' own vectors (.npy or one-tensor .safetensors, a row per document in the corpus's "
            "order, in the space of the index's encoder): none encoded. An index built from --vectors needs them.",
        ),
    ] = None,
) -> None:
    """Add a corpus file's documents to an index, encoded with its own model, pooling and transform (or with
    their own --vectors): one new segment; the files already written are linked, not rewritten. The first add
    to an empty index (`index create`) builds it, fitting its transform."""
    from whitevec.workflows.index_writes import add_documents_file

    report = add_documents_file(
        index_dir,
        corpus,
        on_existing=on_existing.value,
        empty_documents=empty_documents,
        device=device,
        model=model,
        vectors=vectors,
    )
    done = f"added {report.changed}, replaced {report.replaced}, skipped {report.skipped} documents"
    typer.echo(f"{done}; {index_dir}: {report.state()}", err=True)


@index_app.command("delete")
def index_delete_command(
    index_dir: IndexDirArg,
    ids: Annotated[list[str] | None, typer.Argument(help="Ids of the documents to delete.")] = None,
    ids_file: IdsFileOpt = None,
) -> None:
    """Delete documents by id (a tombstone list in a new version; the rows go at the next merge; on a Milvus index,
    Milvus's delete). Ids the index does not hold are reported (how many, the first few) and the rest deleted; the
    exit status is then 1."""
    from whitevec.workflows.index_writes import delete_documents

    report = delete_documents(index_dir, ids or [], ids_file)
    typer.echo(f"deleted {report.changed} documents; {index_dir}: {report.state()}", err=True)
    if report.missing:
        first = ", ".join(repr(doc_id) for doc_id in report.missing[:5])
        typer.echo(f"whitevec: {len(report.missing)} id(s) were not in the index: {first}", err=True)
        raise typer.Exit(MISSING_IDS_EXIT)


@index_app.command("compact")
def index_compact_command(index_dir: IndexDirArg) -> None:
    """Merge an index's segments into one and drop its deleted rows (readers keep their version meanwhile). On a
    Milvus index: Milvus Lite's rows rewritten as one collection segment, or a Milvus server's own compaction."""
    from whitevec.workflows.index_writes import compact_index

    report = compact_index(index_dir)
    typer.echo(f"merged {report.changed} segment(s); {index_dir}: {report.state()}", err=True)


@index_app.command("refit")
def index_refit_command(
    index_dir: IndexDirArg,
    transform: Annotated[
        str | None,
        typer.Option(
            "--transform", "-t", help="Fit this transform instead of the index's own (e.g. whitening-128)."
        ),
    ] = None,
    device: DeviceOpt = None,
    model: IndexModelOpt = None,
) -> None:
    """Fit the index's transform again on every document it holds now and rewrite the index with it: on the raw
    vectors it keeps when it was built with --keep-raw-vectors (the model not loaded), else every document encoded
    again. `index info` shows, under state.transform, how many documents came after the fit."""
    from whitevec.workflows.index_writes import refit_index

    def notice(line: str) -> None:
        typer.echo(f"whitevec: {line}", err=True)

    report = refit_index(index_dir, transform=transform, device=device, model=model, notice=notice)
    typer.echo(f"refitted on {report.changed} documents; {index_dir}: {report.state()}", err=True)
