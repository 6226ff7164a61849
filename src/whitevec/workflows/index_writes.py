"""Writing to a built index from files (``whitevec index add | delete | compact``): each checks its inputs and
the index's manifest with light imports, then loads the index and writes one new version
(:mod:`whitevec.index.segments.writing`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from whitevec.datasets.paths import existing_file, read_lines
from whitevec.encoders.protocol import check_empty_documents
from whitevec.errors import BadInputError
from whitevec.preflight import check_device, check_output, existing_folder

# Retriever.add's choices (whitevec.index.segments.requests.ON_EXISTING, held equal by a test): importing the index
# here would load numpy and faiss before a bad choice is refused.
ON_EXISTING = ("error", "replace", "skip")


@dataclass(frozen=True)
class WriteReport:
    """What a write did and the index after it: documents live and deleted, segments, and its version."""

    changed: int
    count: int
    deleted: int
    segments: int
    version: int
    missing: tuple[str, ...] = ()
    replaced: int = 0
    skipped: int = 0

    @classmethod
    def of(
        cls,
        manifest: dict[str, Any],
        changed: int,
        missing: Sequence[str] = (),
        replaced: int = 0,
        skipped: int = 0,
    ) -> WriteReport:
        segments = len(manifest.get("segments") or [None])
        deleted, version = int(manifest.get("deleted", 0)), int(manifest.get("generation", 0))
        return cls(changed, int(manifest["count"]), deleted, segments, version, tuple(missing), replaced, skipped)

    def state(self) -> str:
        return (
            f"{self.count} documents ({self.deleted} deleted rows kept until a merge) in {self.segments} "
            f"segment(s), version {self.version}"
        )


def add_documents_file(
    index_dir: str | os.PathLike[str],
    corpus: str | os.PathLike[str],
    *,
    on_existing: str = "error",
    empty_documents: str | None = None,
    device: str | None = None,
    model: str | os.PathLike[str] | None = None,
    show_progress: bool | None = None,
    vectors: str | os.PathLike[str] | None = None,
) -> WriteReport:
    """Add the documents of the corpus file ``corpus`` to the index ``index_dir`` (``on_existing``: what an id
    it holds does, see :meth:`whitevec.index.Retriever.add`), with their ``vectors`` (a ``.npy`` /
    ``.safetensors`` file, a row per document in the encoder's space: none encoded) where given. Checked before
    the model loads: the folder, the choices, the vectors file's name, the corpus (every row parsed; ids
    unique)."""
    check_index_writable(index_dir)
    if vectors is not None:
        from whitevec.index.given_vectors import check_vectors_file

        check_vectors_file(vectors, "--vectors")
    choice = check_on_existing_choice(on_existing)
    empty = "skip" if empty_documents is None else check_empty_documents(empty_documents)
    from whitevec.datasets.retrieval import check_unique_ids, is_text_corpus, read_corpus_file

    docs = read_corpus_file(existing_file(corpus, "--corpus file"))
    if not docs:
        raise BadInputError(f"{corpus} holds no documents; nothing to add")
    check_unique_ids(docs, where=str(corpus))
    from whitevec.index import Retriever
    from whitevec.index.segments.requests import HeldIdsError

    with Retriever.load(index_dir, device=device, model=model) as retriever:
        try:
            done = retriever.write(docs, show_progress, vectors=vectors, empty_documents=empty, on_existing=choice)
        except HeldIdsError as exc:  # worded with the command's flags, and the cause numbered ids may be
            flags = ("--on-existing replace", "--on-existing skip")
            numbered = all(d.id == str(i) for i, d in enumerate(docs, start=1))  # as a corpus without ids gets
            text = is_text_corpus(corpus)
            raise BadInputError(exc.worded(*flags, line_numbers=text, maybe_line_numbers=numbered)) from None
        return WriteReport.of(retriever.manifest, done.added, replaced=done.replaced, skipped=done.skipped)


def delete_documents(
    index_dir: str | os.PathLike[str], ids: Sequence[str], ids_file: str | os.PathLike[str] | None = None
) -> WriteReport:
    """Delete the documents ``ids`` and those listed in ``ids_file`` (one id a line, taken exactly) from the index
    ``index_dir``; ids it does not hold are in the report's ``missing``. The index's encoder is not loaded."""
    check_index_writable(index_dir)
    wanted = list(ids)
    if ids_file is not None:
        # Ids are exact: a line loses only its line end (an id an older index holds with white space at either
        # end stays deletable); empty lines name no id.
        wanted += [line for line in read_lines(existing_file(ids_file, "--ids file"), BadInputError) if line]
    if not wanted:
        raise BadInputError("no document ids to delete: give ids or --ids FILE")
    from whitevec.index import Retriever

    with Retriever.load(index_dir, encoder=_NoEncoder.for_index(index_dir, tokens=True)) as retriever:
        result = retriever.delete(wanted)
        return WriteReport.of(retriever.manifest, result.deleted, result.missing)


def compact_index(index_dir: str | os.PathLike[str]) -> WriteReport:
    """Merge every segment of the index ``index_dir`` into one, dropping deleted rows; the report's ``changed``
    counts the segments merged (0: nothing to do, nothing written)."""
    check_index_writable(index_dir)
    from whitevec.index import Retriever

    with Retriever.load(index_dir, encoder=_NoEncoder.for_index(index_dir, tokens=True)) as retriever:
        merged = retriever.compact()
        return WriteReport.of(retriever.manifest, merged)


def refit_index(
    index_dir: str | os.PathLike[str],
    *,
    transform: str | None = None,
    device: str | None = None,
    model: str | os.PathLike[str] | None = None,
    show_progress: bool | None = None,
    notice: Callable[[str], None] | None = None,
) -> WriteReport:
    """Fit the transform of the index ``index_dir`` again on its live documents (``transform``: another spec)
    and rewrite the index with it (:meth:`whitevec.index.Retriever.refit`); the report's ``changed`` counts the
    documents refitted on. An index built with raw vectors kept is refitted on them, its model not loaded;
    another encodes every document, and ``notice`` is told so (one line) first."""
    check_index_writable(index_dir)
    if transform is not None and not transform.strip():
        raise BadInputError("--transform is empty; give a spec such as whitening-128, or leave it out")
    device = check_device(device)  # a device this machine lacks is the one line, not after the notice
    from whitevec.index import Retriever, read_manifest
    from whitevec.index.folder.raw_vectors import keeps_raw_vectors

    encoder = None
    if keeps_raw_vectors(read_manifest(index_dir, verify=False)):
        encoder = _NoEncoder.for_index(index_dir, tokens=True)  # None: an encoder analyzer needs the model
        model = None if encoder is not None else model
    elif notice is not None:
        notice(
            "encoding every document: this index keeps no raw vectors to refit on (build it with "
            "--keep-raw-vectors to refit without encoding)"
        )
    with Retriever.load(index_dir, encoder=encoder, device=device, model=model) as retriever:
        retriever.refit(transform, show_progress)
        return WriteReport.of(retriever.manifest, retriever.count)


def check_index_writable(index_dir: str | os.PathLike[str]) -> None:
    """The index folder exists and a new version of it can be made where it will be (a probe file beside what
    it names): a read-only folder is one line before the index or a model loads, not after every document is
    encoded."""
    existing_folder(index_dir, "index folder")
    check_output(index_dir, "index folder", folder=True)


def check_on_existing_choice(on_existing: str) -> str:
    key = str(on_existing).strip().lower()
    if key not in ON_EXISTING:
        raise BadInputError(f"unknown --on-existing {on_existing!r}; valid: {', '.join(ON_EXISTING)}")
    return key


class _NoEncoder:
    """The index's encoder as its manifest describes it, for writes that encode nothing (delete, compact, a
    refit from raw vectors): the model is not loaded. Encoding with it is a bug (it raises)."""

    def __init__(self, manifest: dict[str, Any]) -> None:
        self._manifest = manifest
        self.model_name = str(manifest["model"])
        self.max_length = manifest["max_length"]

    @classmethod
    def for_index(cls, index_dir: str | os.PathLike[str], tokens: bool = False) -> Any:
        """One for the index at ``index_dir``; with ``tokens``, None (the model loads) when its lexical part
        analyses text with the model's tokenizer (a merge rebuilds a lexical part; the first write counts the
        build's terms)."""
        from whitevec.index import read_manifest

        manifest = read_manifest(index_dir, verify=False)
        if tokens and (manifest.get("lexical") or {}).get("analyzer", {}).get("name") == "encoder":
            return None
        return cls(manifest)

    def describe(self) -> dict[str, Any]:
        m = self._manifest
        return {
            "model": m["model"],
            "model_fingerprint": m.get("model_fingerprint"),
            "pooling": m["pooling"],
            "layers": m["layers"],
            "max_length": m["max_length"],
            "backend": m["encoder_backend"],
            "dim": m["encoder_dim"],
        }

    def encode(self, texts: Sequence[str], **_: Any) -> Any:
        raise AssertionError("a delete or compaction encodes no text")
