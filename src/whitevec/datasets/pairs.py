"""Generic user files: a scored pairs file (TSV, CSV or JSONL) and a plain text file (one text per line).

Pairs file formats, picked by extension (``.jsonl``/``.json`` JSON lines, ``.csv`` comma-separated, anything
else TAB-separated):

- TSV or CSV with a header naming ``sentence1``, ``sentence2`` and ``score`` columns (any order, other
  columns ignored; ``label`` is accepted for ``score``, and ``score`` wins when both are there; a column named
  twice is refused), or exactly 3 columns without a header (sentence1, sentence2, score). TSV is read with
  quoting off, as STS-B is; CSV follows normal CSV quoting strictly (a quoted sentence may span lines and
  keeps its line breaks; a quote never closed is an error), and fields of any length are read.
- JSONL: one object per line with ``sentence1``, ``sentence2`` (strings) and ``score`` (a finite number;
  ``label`` accepted as for the header); other keys are ignored. JSON lines are checked as corpus files are
  (see :func:`whitevec.datasets.rows.json_object`): no ``NaN``/``Infinity``, lone surrogates or repeated keys.

Blank lines are skipped; sentences are stripped of surrounding white space (as the STS readers do).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from whitevec.datasets.paths import existing_file, read_lines
from whitevec.datasets.rows import bad_row, header_columns, json_object, read_delimited_file
from whitevec.datasets.sts import Pair, StsTask
from whitevec.errors import BadInputError

_SCORE_NAMES = ("score", "label")


def read_pairs_file(path: str | os.PathLike[str]) -> StsTask:
    """Read a scored pairs file into a task with one subset (and one ``test`` split) named after the file stem.

    Raises:
        DataNotFoundError: the file does not exist.
        BadInputError: a row is malformed (the message names the file and line), or the file holds no pairs.
    """
    file = existing_file(path, "pairs file")
    suffix = file.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        pairs = _read_jsonl(file)
    else:
        pairs = _read_delimited(file, "," if suffix == ".csv" else "\t")
    if not pairs:
        raise BadInputError(f"pairs file {file} holds no pairs; expected sentence1, sentence2, score per row")
    name = file.stem
    return StsTask(name, {name: pairs}, {"test": pairs}, source=str(file), variant="original")


def read_texts_file(path: str | os.PathLike[str]) -> list[str]:
    """Read one text per line (UTF-8), surrounding white space stripped, blank lines skipped.

    Raises:
        DataNotFoundError: the file does not exist.
        BadInputError: the file is not UTF-8 or holds no text.
    """
    file = existing_file(path, "text file")
    texts = [line.strip() for line in read_lines(file, BadInputError)]
    texts = [t for t in texts if t]
    if not texts:
        raise BadInputError(f"text file {file} holds no text; expected one text per line")
    return texts


def _score(value: Any, file: Path, line_no: int) -> float:
    if isinstance(value, bool):
        raise bad_row(file, line_no, f"score {value!r} is not a number")
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # JSON reads integers of any size; one past 1.8e308 has no float
            raise bad_row(file, line_no, "score is an integer too large for a float (above 1.8e308)") from None
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise bad_row(file, line_no, f"score {value!r} is not a number") from None
    else:
        raise bad_row(file, line_no, f"score {value!r} is not a number")
    if not math.isfinite(number):
        raise bad_row(file, line_no, f"score {value!r} is not a finite number")
    return number


def _sentence(value: Any, column: str, file: Path, line_no: int) -> str:
    if not isinstance(value, str):
        raise bad_row(file, line_no, f"{column} must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise bad_row(file, line_no, f"{column} is empty")
    return text


def _read_jsonl(file: Path) -> list[Pair]:
    pairs = []
    for line_no, line in enumerate(read_lines(file, BadInputError), start=1):
        if not line.strip():
            continue
        obj = json_object(line, file, line_no, "sentence1, sentence2, score")
        score_key = next((k for k in _SCORE_NAMES if k in obj), None)
        missing = [k for k in ("sentence1", "sentence2") if k not in obj] + ([] if score_key else ["score"])
        if missing or score_key is None:
            raise bad_row(file, line_no, f"object lacks {', '.join(missing)}")
        pairs.append(
            Pair(
                _sentence(obj["sentence1"], "sentence1", file, line_no),
                _sentence(obj["sentence2"], "sentence2", file, line_no),
                _score(obj[score_key], file, line_no),
            )
        )
    return pairs


def _pair_columns(file: Path, line_no: int, fields: list[str]) -> tuple[tuple[int, int, int], int]:
    """The header's (sentence1, sentence2, score) column positions and its width; a missing column refused."""
    header = [h.lower() for h in header_columns(file, line_no, fields)]
    missing = [c for c in ("sentence1", "sentence2") if c not in header]
    score_col = next((c for c in _SCORE_NAMES if c in header), None)
    if score_col is None:
        missing.append("score")
    if missing:
        raise bad_row(file, line_no, f"header lacks column(s) {', '.join(missing)}")
    return (header.index("sentence1"), header.index("sentence2"), header.index(str(score_col))), len(header)


def _read_delimited(file: Path, delimiter: str) -> list[Pair]:
    rows = read_delimited_file(file, delimiter)
    has_header = bool(rows) and any(h.strip().lower() in ("sentence1", "sentence2") for h in rows[0][1])
    cols, width = _pair_columns(file, *rows[0]) if has_header else ((0, 1, 2), 3)
    body = rows[1:] if has_header else rows
    kind = "TAB" if delimiter == "\t" else "comma"
    pairs = []
    for line_no, fields in body:
        if len(fields) != width:
            shape = "as many as the header" if body is not rows else "sentence1, sentence2, score"
            raise bad_row(
                file, line_no, f"expected {width} {kind}-separated columns ({shape}), found {len(fields)}"
            )
        pairs.append(
            Pair(
                _sentence(fields[cols[0]], "sentence1", file, line_no),
                _sentence(fields[cols[1]], "sentence2", file, line_no),
                _score(fields[cols[2]], file, line_no),
            )
        )
    return pairs
