"""Rows of the user file formats the readers share: CSV, TSV and JSON lines, parsed without silent changes.

Every fault becomes a :class:`BadInputError` naming the file and the line, never a traceback from ``csv`` or
``json`` (a field past csv's size limit, a 100,000-deep JSON array, an integer of 5,000 digits) and never
a value that breaks later: a lone UTF-16 surrogate (``"\\ud800"``) cannot be stored as UTF-8 (SQLite and
tokenizers raise), and ``NaN``/``Infinity``, which Python's json accepts, are not JSON for strict parsers.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from whitevec.datasets.paths import read_lines
from whitevec.errors import BadInputError

# csv refuses fields over 131,072 characters by default, a guard against runaway quoting in streamed input.
# Here the whole file is already in memory and strict parsing reports a quote that is never closed, so the
# guard protects nothing and would refuse long documents. The limit is process-global: it is only ever
# raised, once, never restored (restoring would race with another thread reading), and 2**31 - 1 fits the
# C long that holds it on every platform (sys.maxsize overflows it on Windows).
_CSV_FIELD_LIMIT = 2**31 - 1

_CSV_HINT = (
    'a field holding a comma, a double quote or a line break must be enclosed in double quotes ("..."), '
    'with each double quote inside it doubled ("")'
)

_SURROGATE_HINT = (
    "a \\ud800-\\udfff escape without its pair cannot be stored as UTF-8; fix the escape or remove it"
)


def bad_row(file: Path, line_no: int, what: str) -> BadInputError:
    """The error for a malformed row: ``"<file>, line <n>: <what>"``."""
    return BadInputError(f"{file}, line {line_no}: {what}")


def delimited_rows(file: Path, lines: list[str], delimiter: str) -> list[tuple[int, list[str]]]:
    """Rows of a CSV (``delimiter=","``) or TSV (``"\\t"``) file as ``(line number, fields)``, blank rows left out.

    CSV follows normal quoting, strictly: a quoted field may span lines and keeps its line breaks (as
    ``\\n``), a row's number is the line where it starts, and a quote never closed, text after a closing
    quote or a bare carriage return in an unquoted field is an error. TSV is split on TAB with quoting off
    (quotes are ordinary characters), as STS-B needs.
    """
    if delimiter == "\t":
        return [(no, line.split("\t")) for no, line in enumerate(lines, start=1) if line.strip()]
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)
    # read_lines removed the line ends; the reader needs them back to keep a quoted line break.
    reader = csv.reader((line + "\n" for line in lines), delimiter=delimiter, strict=True)
    rows: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for record in reader:
            if any(field.strip() for field in record):
                rows.append((start, record))
            start = reader.line_num + 1
    except csv.Error as exc:
        # Strict mode says "unexpected end of data" only when the file ends inside quotes: name where they open.
        if "unexpected end of data" in str(exc):
            raise bad_row(
                file, start, f"bad CSV: a quote opened in this row is never closed; {_CSV_HINT}"
            ) from None
        if "new-line character" in str(exc):  # csv's own hint (open the file in newline mode) does not apply
            raise bad_row(
                file,
                reader.line_num,
                "bad CSV: a carriage return (\\r) inside an unquoted field; quote the "
                "field, or save the file with \\n or \\r\\n line ends",
            ) from None
        raise bad_row(file, reader.line_num or start, f"bad CSV ({exc}); {_CSV_HINT}") from None
    return rows


def read_delimited_file(file: Path, delimiter: str) -> list[tuple[int, list[str]]]:
    """:func:`delimited_rows` of a user's CSV or TSV file (not UTF-8: a BadInputError naming it)."""
    return delimited_rows(file, read_lines(file, BadInputError), delimiter)


def header_columns(file: Path, line_no: int, fields: list[str]) -> list[str]:
    """Header names stripped of surrounding white space; a name given twice (ignoring case) is an error."""
    names = [name.strip() for name in fields]
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise bad_row(file, line_no, f"the header names column {name.lower()!r} more than once; rename one")
        seen.add(name.lower())
    return names


class _NotFinite:
    """Stands in for ``NaN``, ``Infinity`` or an overflowing number until its place in the object is known."""

    def __init__(self, token: str) -> None:
        self.token = token


class RepeatedKeyError(ValueError):
    """A JSON object names a key twice (``json`` would keep the last silently)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A ``json.loads`` ``object_pairs_hook``: the object, or a :class:`RepeatedKeyError` naming a key given
    twice. The one rule for JSON lines and HTTP bodies alike."""
    obj = dict(pairs)
    if len(obj) != len(pairs):  # rare: the keys are looked at one by one only then
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKeyError(f"key {key!r} appears twice in one object; keep one of them")
            seen.add(key)
    return obj


def json_object(line: str, file: Path, line_no: int, expected: str) -> dict[str, Any]:
    """Parse one JSON line that must hold an object (``expected`` says with which fields, for the error).

    Refused, naming the key: ``NaN``/``Infinity``/``-Infinity`` and numbers too large for a float; strings
    (keys too) with a lone surrogate; a key repeated in one object (json would keep the last silently).
    Refused too: nesting too deep for Python's parser and integers longer than Python converts.
    """
    flagged = False

    def not_finite(token: str) -> _NotFinite:
        nonlocal flagged
        flagged = True
        return _NotFinite(token)

    def number(token: str) -> float | _NotFinite:
        value = float(token)
        return value if math.isfinite(value) else not_finite(token)

    try:
        obj = json.loads(line, parse_constant=not_finite, parse_float=number, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise bad_row(file, line_no, f"not valid JSON ({exc.msg})") from None
    except RepeatedKeyError as exc:
        raise bad_row(file, line_no, str(exc)) from None
    except BadInputError:
        raise
    except RecursionError:
        raise bad_row(file, line_no, "JSON nested too deeply to read; flatten the object") from None
    except ValueError as exc:
        # Python refuses to convert an integer of more than 4,300 digits (a guard against slow conversion).
        reason = str(exc).split(";")[0]
        raise bad_row(file, line_no, f"a number cannot be read ({reason}); write it as a string") from None
    if not isinstance(obj, dict):
        raise bad_row(file, line_no, f"expected a JSON object with {expected}")
    # An escape is the only way a surrogate gets in: decoding the file as UTF-8 already refused raw ones.
    if flagged or "\\u" in line:
        _check_values(obj, file, line_no)
    return obj


def _check_values(obj: dict[str, Any], file: Path, line_no: int) -> None:
    """Raise on the first non-finite number or unencodable string, naming its path (``a.b[2]``)."""
    stack: list[tuple[str, Any]] = [("", obj)]  # a stack, not recursion: the object may be ~1,000 deep
    while stack:
        path, value = stack.pop()
        if isinstance(value, _NotFinite):
            raise bad_row(
                file,
                line_no,
                f"key {path!r} holds {value.token}, which is not a JSON number; write a finite "
                "number, a string or null",
            )
        if isinstance(value, str) and not _encodable(value):
            raise bad_row(file, line_no, f"key {path!r} holds a lone surrogate; {_SURROGATE_HINT}")
        if isinstance(value, dict):
            for key, item in reversed(value.items()):
                if not _encodable(key):
                    where = f"a key inside {path!r}" if path else "a key"
                    raise bad_row(file, line_no, f"{where} holds a lone surrogate; {_SURROGATE_HINT}")
                stack.append((f"{path}.{key}" if path else key, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
