"""Generic user files: a scored pairs file (TSV, CSV or JSONL) and a plain text file (one text per line).

Pairs file formats, picked by extension (``.jsonl``/``.json`` JSON lines, ``.csv`` comma-separated, anything
else TAB-separated):

- TSV or CSV with a header naming ``sentence1``, ``sentence2`` and ``score`` columns (any order, other
  columns ignored; ``label`` is accepted for ``score``), or exactly 3 columns without a header
  (sentence1, sentence2, score). TSV is read with quoting off, as STS-B is; CSV follows normal CSV quoting.
- JSONL: one object per line with ``sentence1``, ``sentence2`` (strings) and ``score`` (a number).

Blank lines are skipped; sentences are stripped of surrounding white space (as the STS readers do).
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any

from whitevec.datasets.paths import existing_file, read_lines
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


def _bad(file: Path, line_no: int, what: str) -> BadInputError:
    return BadInputError(f"{file}, line {line_no}: {what}")


def _score(value: Any, file: Path, line_no: int) -> float:
    if isinstance(value, bool):
        raise _bad(file, line_no, f"score {value!r} is not a number")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise _bad(file, line_no, f"score {value!r} is not a number") from None
    else:
        raise _bad(file, line_no, f"score {value!r} is not a number")
    if not math.isfinite(number):
        raise _bad(file, line_no, f"score {value!r} is not a finite number")
    return number


def _sentence(value: Any, column: str, file: Path, line_no: int) -> str:
    if not isinstance(value, str):
        raise _bad(file, line_no, f"{column} must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise _bad(file, line_no, f"{column} is empty")
    return text


def _read_jsonl(file: Path) -> list[Pair]:
    pairs = []
    for line_no, line in enumerate(read_lines(file, BadInputError), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(file, line_no, f"not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise _bad(file, line_no, "expected a JSON object with sentence1, sentence2, score")
        missing = [k for k in ("sentence1", "sentence2") if k not in obj]
        score_key = next((k for k in _SCORE_NAMES if k in obj), None)
        if score_key is None:
            missing.append("score")
        if missing:
            raise _bad(file, line_no, f"object lacks {', '.join(missing)}")
        pairs.append(
            Pair(
                _sentence(obj["sentence1"], "sentence1", file, line_no),
                _sentence(obj["sentence2"], "sentence2", file, line_no),
                _score(obj[score_key], file, line_no),
            )
        )
    return pairs


def _read_delimited(file: Path, delimiter: str) -> list[Pair]:
    lines = read_lines(file, BadInputError)
    if delimiter == "\t":
        # Quoting off, as for STS-B: sentences may hold unbalanced quotes.
        rows = [(no, line.split("\t")) for no, line in enumerate(lines, start=1) if line.strip()]
    else:
        rows = _csv_rows(file, lines)
    if not rows:
        return []
    first_no, first = rows[0]
    header = [h.strip().lower() for h in first]
    if "sentence1" in header or "sentence2" in header:
        missing = [c for c in ("sentence1", "sentence2") if c not in header]
        score_col = next((c for c in _SCORE_NAMES if c in header), None)
        if score_col is None:
            missing.append("score")
        if missing:
            raise _bad(file, first_no, f"header lacks column(s) {', '.join(missing)}")
        cols = (header.index("sentence1"), header.index("sentence2"), header.index(str(score_col)))
        width = len(header)
        body = rows[1:]
    else:
        cols = (0, 1, 2)
        width = 3
        body = rows
    kind = "TAB" if delimiter == "\t" else "comma"
    pairs = []
    for line_no, fields in body:
        if len(fields) != width:
            shape = "as many as the header" if body is not rows else "sentence1, sentence2, score"
            raise _bad(file, line_no, f"expected {width} {kind}-separated columns ({shape}), found {len(fields)}")
        pairs.append(
            Pair(
                _sentence(fields[cols[0]], "sentence1", file, line_no),
                _sentence(fields[cols[1]], "sentence2", file, line_no),
                _score(fields[cols[2]], file, line_no),
            )
        )
    return pairs


def _csv_rows(file: Path, lines: list[str]) -> list[tuple[int, list[str]]]:
    """Parse CSV keeping the line number where each record starts (a quoted field may span lines)."""
    reader = csv.reader((line + "\n" for line in lines), strict=True)
    rows: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for record in reader:
            if record and any(field.strip() for field in record):
                rows.append((start, record))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise _bad(file, reader.line_num or start, f"bad CSV ({exc})") from None
    return rows
