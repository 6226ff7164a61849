"""A corpus split into units of work for a distributed build: one file or a glob of shards, each cut into pieces
that a worker parses on its own with the same strict readers as :func:`whitevec.datasets.read_corpus_file`.

A unit is a byte range of a JSON-lines or text file (cut at line ends, so a piece holds whole lines; the line
number and the count of documents before it are known, so errors name the file's own line and default ids
number the documents of the whole file), a whole CSV/TSV file (a quoted field may span lines, so it is never
cut), or one row group of a Parquet file. The plan depends only on the files' contents and ``unit_bytes``:
the same corpus gives the same units, in the same order, which is what lets a killed build resume.
"""

from __future__ import annotations

import glob
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from whitevec.datasets.paths import existing_file
from whitevec.datasets.retrieval import (
    Document,
    jsonl_corpus,
    read_corpus_file,
    text_lines_corpus,
)
from whitevec.errors import BadInputError, DataNotFoundError

JSON_LINES = (".jsonl", ".ndjson", ".json")
DELIMITED = (".csv", ".tsv")
PARQUET = (".parquet", ".pq")
DEFAULT_UNIT_BYTES = 8 << 20
_SCAN = 8 << 20  # bytes read at a time while looking for line ends


@dataclass(frozen=True)
class CorpusUnit:
    """One piece of a corpus: ``file``; for line files the bytes ``[start, stop)`` whose first line is
    ``first_line`` with ``first_doc`` documents before it; for Parquet the row group ``start`` (``first_doc``
    rows before it)."""

    index: int
    file: str
    kind: str  # "jsonl", "text", "csv", "tsv" or "parquet"
    start: int
    stop: int
    first_line: int
    first_doc: int

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CorpusUnit:
        return cls(**json.loads(text))


def corpus_files(pattern: str | os.PathLike[str]) -> list[Path]:
    """The files of a corpus given as one file or a glob (``shards/*.jsonl``), sorted by name.

    Raises:
        DataNotFoundError: no file matches.
    """
    text = os.path.expanduser(os.fspath(pattern))
    if glob.has_magic(text):
        files = sorted(Path(p) for p in glob.glob(text, recursive=True) if os.path.isfile(p))
        if not files:
            raise DataNotFoundError(f"no corpus file matches {text}")
        return files
    return [existing_file(text, "corpus file")]


def _kind(file: Path) -> str:
    suffix = file.suffix.lower()
    if suffix in JSON_LINES:
        return "jsonl"
    if suffix in DELIMITED:
        return suffix[1:]
    if suffix in PARQUET:
        return "parquet"
    return "text"


def plan_units(files: list[Path], unit_bytes: int = DEFAULT_UNIT_BYTES) -> list[CorpusUnit]:
    """Cut ``files`` into units of about ``unit_bytes`` (see the module docstring); reads each line file once.

    Raises:
        BadInputError: ``unit_bytes`` is not positive, or a Parquet file cannot be read (named).
    """
    if unit_bytes < 1:
        raise BadInputError(f"unit_bytes must be positive, got {unit_bytes}")
    units: list[CorpusUnit] = []
    for file in files:
        kind = _kind(file)
        if kind in ("csv", "tsv"):
            units.append(CorpusUnit(len(units), str(file), kind, 0, file.stat().st_size, 1, 0))
        elif kind == "parquet":
            for group, rows_before in enumerate(_row_groups(file)):
                units.append(CorpusUnit(len(units), str(file), kind, group, group + 1, 1, rows_before))
        else:
            for start, stop, line, docs in _line_pieces(file, unit_bytes):
                units.append(CorpusUnit(len(units), str(file), kind, start, stop, line, docs))
    return units


def _line_pieces(file: Path, unit_bytes: int) -> list[tuple[int, int, int, int]]:
    """``(start, stop, first line, non-blank lines before)`` of the pieces of a line file, cut after a line end."""
    pieces: list[tuple[int, int, int, int]] = []
    start, line, docs = 0, 1, 0
    offset = 0
    piece_lines, piece_docs = 0, 0
    carry = b""
    with open(file, "rb") as handle:
        while block := handle.read(_SCAN):
            data = carry + block
            base = offset - len(carry)
            lines = data.split(b"\n")
            carry = lines.pop()  # the unfinished last line
            position = base
            for raw in lines:
                position += len(raw) + 1
                piece_lines += 1
                piece_docs += bool(raw.strip())
                if position - start >= unit_bytes:
                    pieces.append((start, position, line, docs))
                    start, line, docs = position, line + piece_lines, docs + piece_docs
                    piece_lines = piece_docs = 0
            offset += len(block)
    if offset > start:
        pieces.append((start, offset, line, docs))
    return pieces


def _row_groups(file: Path) -> list[int]:
    """Rows before each row group of a Parquet file."""
    parquet = _pyarrow_parquet()
    try:
        meta = parquet.ParquetFile(file).metadata
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ...
        raise BadInputError(f"{file} is not a readable Parquet file ({exc})") from None
    before, out = 0, []
    for group in range(meta.num_row_groups):
        out.append(before)
        before += meta.row_group(group).num_rows
    return out


def _pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as parquet
    except ImportError:
        raise BadInputError("reading Parquet needs pyarrow: pip install 'whitevec[ray]'") from None
    return parquet


def read_unit(unit: CorpusUnit) -> list[Document]:
    """The documents of one unit, parsed as :func:`whitevec.datasets.read_corpus_file` parses the whole file.

    Raises:
        BadInputError: a malformed row (file and line named, or ``row N`` for Parquet).
        DataNotFoundError: the file went missing.
    """
    file = Path(unit.file)
    if unit.kind in ("csv", "tsv"):
        return read_corpus_file(file) if file.stat().st_size else []
    if unit.kind == "parquet":
        return _parquet_documents(file, unit.start, unit.first_doc)
    lines = _decode_lines(file, unit.start, unit.stop, unit.first_line)
    if unit.kind == "jsonl":
        return jsonl_corpus(file, lines, unit.first_line, unit.first_doc)
    return text_lines_corpus(lines, unit.first_line)


def _decode_lines(file: Path, start: int, stop: int, first_line: int) -> list[str]:
    """Lines of ``file[start:stop]``, as :func:`whitevec.datasets.paths.read_lines` gives those of a file."""
    try:
        with open(file, "rb") as handle:
            handle.seek(start)
            raw = handle.read(stop - start)
    except FileNotFoundError:
        raise DataNotFoundError(f"corpus file {file} does not exist (removed during the build?)") from None
    try:
        text = raw.decode("utf-8-sig" if start == 0 else "utf-8")
    except UnicodeDecodeError as exc:
        line_no = first_line + raw[: exc.start].count(b"\n")
        raise BadInputError(
            f"{file}, line {line_no}: not valid UTF-8 ({exc.reason}); save the file as UTF-8"
        ) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _parquet_documents(file: Path, group: int, rows_before: int) -> list[Document]:
    """Documents of one row group: column ``text`` (required), ``id`` (string or integer; default the 1-based
    row number in the file), ``title`` (prepended when not blank); other columns go to metadata."""
    parquet = _pyarrow_parquet()
    try:
        table = parquet.ParquetFile(file).read_row_group(group)
    except Exception as exc:
        raise BadInputError(f"{file}, row group {group}: cannot be read ({exc})") from None
    names = [name.lower() for name in table.column_names]
    if "text" not in names:
        raise BadInputError(f"{file}: no 'text' column (columns: {', '.join(table.column_names)})")
    columns = {name: table.column(i).to_pylist() for i, name in enumerate(table.column_names)}
    lookup = {name.lower(): name for name in table.column_names}
    docs: list[Document] = []
    for i in range(table.num_rows):
        row_no = rows_before + i + 1
        where = f"{file}, row {row_no}"
        text = columns[lookup["text"]][i]
        if not isinstance(text, str):
            raise BadInputError(f"{where}: field 'text' is missing or not a string")
        title = columns[lookup["title"]][i] if "title" in lookup else None
        if title is not None and not isinstance(title, str):
            raise BadInputError(f"{where}: title {title!r} must be a string or null")
        if title and title.strip():
            text = f"{title.strip()} {text}"
        if "id" in lookup:
            value = columns[lookup["id"]][i]
            if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
                raise BadInputError(f"{where}: id {value!r} must be a non-empty string or an integer")
            doc_id = str(value).strip()
        else:
            doc_id = str(row_no)
        meta = {
            name: columns[name][i] for name in table.column_names if name.lower() not in ("text", "title", "id")
        }
        for key, value in meta.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise BadInputError(f"{where}: column {key!r} holds {value}, which is not a JSON number")
        try:
            json.dumps(meta, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise BadInputError(f"{where}: metadata columns must hold JSON values ({exc})") from None
        docs.append(Document(doc_id, text.strip(), meta or None))
    return docs
