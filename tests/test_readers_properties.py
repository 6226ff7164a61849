"""Property-based tests of the file readers (hypothesis): a reader returns exactly what a file holds (round trips
of valid files generated here, from arbitrary Unicode with quotes, tabs, CR/LF, byte-order marks, NUL and blank
lines mixed in, and arbitrary numbers) or raises one BadInputError naming the file and the line; never another
exception, never a silent change. The hand-written hostile cases are in test_readers_adversarial.py.

What a format cannot tell apart is modelled, as each reader's docstring states it: surrounding white space of
texts, ids and header names is stripped; blank lines and rows are skipped; a line end inside a quoted CSV field
reads as ``\\n``, ``\\r\\n`` included; a file may start with a byte-order mark. A TSV value cannot hold a TAB or a
line end, nor end a line with a CR (that is a CRLF line end).

The runs are derandomized (the same examples every run: no run is flaky). WHITEVEC_PROPERTY_EXAMPLES=N runs N
fresh random examples per property instead, to explore.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from whitevec.datasets import Pair, read_pairs_file, read_texts_file
from whitevec.datasets.retrieval import Document, read_corpus_file
from whitevec.errors import BadInputError

EXPLORE = int(os.environ.get("WHITEVEC_PROPERTY_EXAMPLES", "0"))
EXAMPLES = EXPLORE or 60
PROPERTY = settings(
    max_examples=EXAMPLES,
    derandomize=not EXPLORE,
    deadline=timedelta(seconds=5),  # one example writes and reads one small file: milliseconds
    database=None,  # nothing written to the working tree
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# A high surrogate before a low one: a proper pair once written as JSON escapes, so no lone surrogate.
PAIRED = re.compile("[\ud800-\udbff][\udc00-\udfff]")
# Characters that break naive readers, mixed into arbitrary Unicode.
AWKWARD = [*"\",;'\\{}[]:\t\r\n\x00\ufeff\u2028\x85\xa0 é\U0001f600"]


def chars(exclude: str = "", surrogates: bool = False) -> st.SearchStrategy[str]:
    """One character: an awkward one or any Unicode code point (lone surrogates only with ``surrogates``)."""
    pool = st.one_of(st.sampled_from(AWKWARD), st.characters(exclude_categories=["Cs"]))
    if surrogates:
        pool = st.one_of(pool, st.characters(categories=["Cs"]))
    return pool.filter(lambda c: c not in exclude) if exclude else pool


def texts(exclude: str = "", surrogates: bool = False, max_size: int = 10) -> st.SearchStrategy[str]:
    made = st.text(chars(exclude, surrogates), max_size=max_size)
    return made.filter(lambda t: not PAIRED.search(t)) if surrogates else made


def filled(exclude: str = "", max_size: int = 10) -> st.SearchStrategy[str]:
    """Text that is not blank."""
    return texts(exclude, max_size=max_size).filter(lambda t: bool(t.strip()))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("properties")


def write(folder: Path, name: str, text: str, bom: bool = False) -> Path:
    """``text`` as UTF-8 (a lone surrogate as the bytes of surrogatepass, which are not UTF-8), with a byte-order
    mark when asked or when the text starts with U+FEFF (which any reader takes for one)."""
    path = folder / name
    mark = "\ufeff" if bom or text.startswith("\ufeff") else ""
    path.write_bytes((mark + text).encode("utf-8", "surrogatepass"))
    return path


def refused(read: Callable[[Path], Any], path: Path, line: int | None = None, *needles: str) -> str:
    """``read(path)`` raises BadInputError naming ``path`` (and ``line``, when given) and saying one of ``needles``
    (when given); returns the message."""
    with pytest.raises(BadInputError) as info:
        read(path)
    message = str(info.value)
    if line is not None:
        assert message.startswith(f"{path}, line {line}: "), message
    assert str(path) in message, message
    assert not needles or any(needle in message for needle in needles), message
    return message


def line_of(written: str) -> int:
    """The number of the line that starts after ``written``."""
    return written.count("\n") + 1


def canonical(value: Any) -> str:
    """JSON that tells 1 from 1.0 and 0.0 from -0.0: equal only for the very same values."""
    return json.dumps(value, ensure_ascii=True, allow_nan=True)


def has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_surrogate(v) for v in value)
    return False


def has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(has_non_finite(v) for v in value)
    return False


def csv_line(fields: list[str], quote_all: bool) -> str:
    """One CSV record as RFC 4180 has it: a field with a comma, quote or line break quoted, quotes doubled."""
    return ",".join(
        '"' + f.replace('"', '""') + '"' if quote_all or any(c in f for c in ',"\r\n') else f for f in fields
    )


def as_read_from_csv(value: str) -> str:
    return value.replace("\r\n", "\n")  # a line end inside quotes reads as \n


def header_key(name: str) -> str:
    """A header name as the readers compare them (stripped, any case; CSV's quoted line ends as read)."""
    return as_read_from_csv(name).strip().lower()


# --- plain text: one text (or document) a line ---------------------------------------------------------------


@PROPERTY
@given(
    lines=st.lists(texts(exclude="\n"), max_size=8),
    bom=st.booleans(),
    end=st.sampled_from(["\n", "\r\n"]),
    final=st.booleans(),
)
def test_plain_text_files_keep_every_line(
    folder: Path, lines: list[str], bom: bool, end: str, final: bool
) -> None:
    path = write(folder, "t.txt", end.join(lines) + (end if final and lines else ""), bom)
    kept = [(number, line.strip()) for number, line in enumerate(lines, start=1) if line.strip()]
    if not kept:
        refused(read_texts_file, path, None, "holds no text")
        refused(read_corpus_file, path, None, "holds no documents")
        return
    assert read_texts_file(path) == [text for _, text in kept]
    assert read_corpus_file(path) == [Document(str(number), text) for number, text in kept]


# --- JSON lines corpus: ids, titles, metadata of any JSON, lone surrogates, non-finite numbers ---------------

RESERVED = ("id", "_id", "text", "title")
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts(surrogates=True, max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(texts(surrogates=True, max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def jsonl_documents(draw: st.DrawFn) -> dict[str, Any]:
    ids = st.one_of(texts(surrogates=True), st.integers())
    row: dict[str, Any] = {}
    for key in draw(st.sampled_from([(), ("id",), ("_id",), ("id", "_id")])):
        row[key] = draw(ids)
    row["text"] = draw(texts(surrogates=True))
    if draw(st.booleans()):
        row["title"] = draw(st.none() | texts(surrogates=True))
    keys = texts(surrogates=True, max_size=4).filter(lambda k: k not in RESERVED)
    row.update(draw(st.dictionaries(keys, json_values, max_size=3)))
    return row


def expected_document(row: dict[str, Any], position: int) -> Document | tuple[str, ...]:
    """The document a JSON line holding ``row`` reads as, or the reasons it may be refused for."""
    faults = (("lone surrogate",) if has_surrogate(row) else ()) + (
        ("not a JSON number",) if has_non_finite(row) else ()
    )
    if faults:
        return faults
    id_key = "id" if "id" in row else "_id" if "_id" in row else None
    doc_id = str(position) if id_key is None else str(row[id_key])
    if not doc_id:
        return ("empty id",)
    if doc_id != doc_id.strip():  # ids are exact: refused, never stripped
        return ("no white space at either end",)
    title, text = row.get("title"), row["text"]
    if title and title.strip():
        text = f"{title.strip()} {text}"
    metadata = {k: v for k, v in row.items() if k not in ("text", "title", id_key)}
    return Document(doc_id, text.strip(), metadata or None)


@PROPERTY
@given(
    rows=st.lists(
        st.tuples(jsonl_documents(), st.lists(st.sampled_from(["", " ", "\t", "\r"]), max_size=2), st.booleans()),
        min_size=1,
        max_size=4,
    ),
    bom=st.booleans(),
)
def test_jsonl_corpus_is_read_exactly_or_refused_at_the_line(
    folder: Path, rows: list[tuple[dict[str, Any], list[str], bool]], bom: bool
) -> None:
    written, expected, undecodable, refusals = "", [], [], []
    for position, (row, blanks, ascii_only) in enumerate(rows, start=1):
        written += "".join(blank + "\n" for blank in blanks)
        line = line_of(written)
        outcome = expected_document(row, position)
        if isinstance(outcome, Document):
            expected.append(outcome)
        else:
            refusals.append((line, outcome))
            if "lone surrogate" in outcome and not ascii_only:
                undecodable.append(line)  # a raw surrogate is not UTF-8: the whole file is refused at its line
        written += json.dumps(row, ensure_ascii=ascii_only) + "\n"
    path = write(folder, "c.jsonl", written, bom)
    if undecodable:
        refused(read_corpus_file, path, undecodable[0], "not valid UTF-8")
    elif refusals:
        refused(read_corpus_file, path, refusals[0][0], *refusals[0][1])
    elif len({doc.id for doc in expected}) < len(expected):
        refused(read_corpus_file, path, None, "more than once")
    else:
        read = read_corpus_file(path)
        assert canonical([[d.id, d.text, d.metadata] for d in read]) == canonical(
            [[d.id, d.text, d.metadata] for d in expected]
        )


# --- CSV and TSV corpora: a header, an optional id column, metadata columns ----------------------------------


@st.composite
def delimited_corpus(draw: st.DrawFn) -> tuple[str, list[str], list[dict[str, str]], bool]:
    """(kind, header, rows as {column: value}, quote every CSV field) for a valid file."""
    kind = draw(st.sampled_from(["csv", "tsv"]))
    exclude = "\t\n" if kind == "tsv" else ""
    names = st.lists(
        filled(exclude, max_size=6).filter(lambda n: header_key(n) not in ("id", "text")),
        max_size=3,
        unique_by=header_key,
    )
    header = draw(st.permutations([*(["id"] if draw(st.booleans()) else []), "text", *draw(names)]))
    rows = []
    for _ in range(draw(st.integers(1, 4))):
        row = {name: draw(filled(exclude) if name == "id" else texts(exclude)) for name in header}
        if kind == "tsv":  # a CR ending the line is the CR of a CRLF line end
            row[header[-1]] = row[header[-1]].rstrip("\r")
        rows.append(row)
    return kind, header, rows, draw(st.booleans())


@PROPERTY
@given(
    corpus=delimited_corpus(),
    end=st.sampled_from(["\n", "\r\n"]),
    bad_at=st.none() | st.integers(0, 4),
    bom=st.booleans(),
)
def test_delimited_corpus_is_read_exactly_or_refused_at_the_line(
    folder: Path,
    corpus: tuple[str, list[str], list[dict[str, str]], bool],
    end: str,
    bad_at: int | None,
    bom: bool,
) -> None:
    kind, header, rows, quote_all = corpus

    def record(fields: list[str]) -> str:
        return (csv_line(fields, quote_all) if kind == "csv" else "\t".join(fields)) + end

    read_as = as_read_from_csv if kind == "csv" else str
    written, refusal = record(header), None
    for index, row in enumerate(rows):
        if index == bad_at and refusal is None:
            refusal = (line_of(written), f"{len(header) + 1} columns")
            written += record(["bad"] * (len(header) + 1))  # one column too many
        spaced = "id" in row and read_as(row["id"]) != read_as(row["id"]).strip()
        if spaced and refusal is None:  # ids are exact: refused, never stripped
            refusal = (line_of(written), "no white space at either end")
        written += record([row[name] for name in header])
    path = write(folder, f"c.{kind}", written, bom)
    if refusal is not None:
        refused(read_corpus_file, path, *refusal)
        return
    expected: list[Document] = []
    for row in rows:
        if not any(value.strip() for value in row.values()):
            continue  # a blank row
        metadata = {read_as(name).strip(): read_as(row[name]) for name in header if name not in ("id", "text")}
        doc_id = read_as(row["id"]) if "id" in row else str(len(expected) + 1)
        expected.append(Document(doc_id, read_as(row["text"]).strip(), metadata or None))
    if not expected:
        refused(read_corpus_file, path, None, "holds no documents")
    elif len({doc.id for doc in expected}) < len(expected):
        refused(read_corpus_file, path, None, "more than once")
    else:
        assert read_corpus_file(path) == expected


# --- scored pairs: TSV and CSV with or without a header, JSON lines ------------------------------------------

PAIR_FORMATS = ["tsv", "tsv-header", "csv", "csv-header", "jsonl"]
BAD_SCORES = {
    "text": ["nan", "inf", "-Infinity", "1e400", "abc", ""],
    "jsonl": ["NaN", "Infinity", "-Infinity", "1e400", '"abc"', '"nan"', "true", "null", "9" * 400],
}
scores = st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**53), 2**53)


@st.composite
def pairs_file(draw: st.DrawFn) -> tuple[str, list[tuple[str, str, float | int]], str, bool]:
    """(format, pairs (sentence1, sentence2, score), score column name, quote every CSV field)."""
    form = draw(st.sampled_from(PAIR_FORMATS))
    exclude = "\t\n" if form.startswith("tsv") else ""
    pair = st.tuples(filled(exclude), filled(exclude), scores)
    listed = draw(st.lists(pair, min_size=1, max_size=4))
    return form, listed, draw(st.sampled_from(["score", "label"])), draw(st.booleans())


def looks_like_a_header(fields: tuple[str, ...]) -> bool:
    return any(field.strip().lower() in ("sentence1", "sentence2") for field in fields)


@PROPERTY
@given(
    data=pairs_file(),
    end=st.sampled_from(["\n", "\r\n"]),
    order=st.permutations(["sentence1", "sentence2", "score", "note"]),
    bad=st.none() | st.tuples(st.integers(0, 4), st.sampled_from(["score", "blank"]), st.integers(0, 8)),
    blank_lines=st.booleans(),
)
def test_pairs_files_are_read_exactly_or_refused_at_the_line(
    folder: Path,
    data: tuple[str, list[tuple[str, str, float | int]], str, bool],
    end: str,
    order: list[str],
    bad: tuple[int, str, int] | None,
    blank_lines: bool,
) -> None:
    form, pairs, score_name, quote_all = data
    kind = form.split("-")[0]
    if form in ("tsv", "csv"):
        assume(not looks_like_a_header(pairs[0][:2]))
        order = ["sentence1", "sentence2", "score"]
    tokens = BAD_SCORES["jsonl" if kind == "jsonl" else "text"]

    def record(s1: str, s2: str, score: str) -> str:
        if kind == "jsonl":
            return (
                f'{{"sentence1": {json.dumps(s1)}, "sentence2": {json.dumps(s2)}, "{score_name}": {score}}}' + end
            )
        values = {"sentence1": s1, "sentence2": s2, "score": score, "note": "n"}
        fields = [values[column] for column in order]
        return (csv_line(fields, quote_all) if kind == "csv" else "\t".join(fields)) + end

    written = ""
    if form.endswith("header"):
        header = [score_name if column == "score" else column for column in order]
        written = (csv_line(header, quote_all) if kind == "csv" else "\t".join(header)) + end
    bad_line = None
    for index, (s1, s2, score) in enumerate(pairs):
        if bad is not None and index == bad[0]:
            bad_line = line_of(written)
            token = tokens[bad[2] % len(tokens)]
            written += record(" ", "b", "1") if bad[1] == "blank" else record("a", "b", token)
        if blank_lines:
            written += "  " + end
        written += record(s1, s2, json.dumps(score) if kind == "jsonl" else repr(score))
    path = write(folder, f"p.{kind}", written)
    if bad_line is not None:
        refused(read_pairs_file, path, bad_line)
        return
    read_as = as_read_from_csv if kind == "csv" else str
    expected = [Pair(read_as(s1).strip(), read_as(s2).strip(), float(score)) for s1, s2, score in pairs]
    read = read_pairs_file(path).all_pairs()
    assert read == expected
    assert [p.score.hex() for p in read] == [p.score.hex() for p in expected]  # -0.0 stays -0.0


# --- numbers as written: any size, any exponent ----------------------------------------------------------------

number_tokens = st.one_of(
    st.builds(
        lambda sign, whole, fraction, exponent: (
            f"{sign}{whole}{'.' + fraction if fraction else ''}{'' if exponent is None else f'e{exponent}'}"
        ),
        st.sampled_from(["", "-"]),
        st.integers(0, 10**30).map(str),
        st.text("0123456789", max_size=20),
        st.none() | st.integers(-800, 800),
    ),
    st.integers(1, 5000).map(lambda n: "9" * n),  # integers past the float range and past Python's 4,300 digits
)


@PROPERTY
@given(token=number_tokens)
def test_numbers_are_read_exactly_or_refused(folder: Path, token: str) -> None:
    whole = re.fullmatch(r"-?\d+", token) is not None
    as_float = float(token)

    corpus = write(folder, "n.jsonl", f'{{"text": "x", "n": {token}}}\n')
    if whole and len(token.lstrip("-")) > 4300:
        refused(read_corpus_file, corpus, 1, "a number cannot be read")
    elif whole:
        assert canonical(read_corpus_file(corpus)[0].metadata) == canonical({"n": int(token)})
    elif math.isfinite(as_float):
        assert canonical(read_corpus_file(corpus)[0].metadata) == canonical({"n": as_float})
    else:
        refused(read_corpus_file, corpus, 1, "not a JSON number")

    for name, row in (
        ("n.tsv", f"a\tb\t{token}\n"),
        ("p.jsonl", f'{{"sentence1": "a", "sentence2": "b", "score": {token}}}\n'),
    ):
        pairs = write(folder, name, row)
        json_int = name.endswith(".jsonl") and whole  # JSON reads an integer (so -0 is 0), then it becomes a float
        if json_int and len(token.lstrip("-")) > 4300:
            refused(read_pairs_file, pairs, 1, "a number cannot be read")
            continue
        score = as_float if not json_int else float(int(token)) if abs(int(token)) < 2**1024 else math.inf
        if math.isfinite(score):
            assert read_pairs_file(pairs).all_pairs()[0].score.hex() == score.hex()
        else:
            refused(read_pairs_file, pairs, 1, "not a finite number", "not a JSON number", "too large for a float")


# --- anything at all: read, or refused in one line naming the file -------------------------------------------

READERS: dict[str, Callable[[Path], Any]] = {
    "c.txt": read_corpus_file,
    "c.jsonl": read_corpus_file,
    "c.csv": read_corpus_file,
    "c.tsv": read_corpus_file,
    "p.tsv": read_pairs_file,
    "p.csv": read_pairs_file,
    "p.jsonl": read_pairs_file,
    "t.txt": read_texts_file,
}
PIECES = [
    "id",
    "text",
    "title",
    "_id",
    "sentence1",
    "sentence2",
    "score",
    '"text": ',
    '"id": ',
    '"score": ',
    "{",
    "}",
    "[",
    "]",
    '"',
    ",",
    ":",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "\x00",
    "\ufeff",
    "NaN",
    "Infinity",
    "1e400",
    "9" * 5000,
    "\\ud800",
    "\\u0000",
    "3.5",
    "-0",
]
soup = st.lists(st.one_of(st.sampled_from(PIECES), texts(max_size=3)), max_size=30).map("".join)


@PROPERTY
@given(
    name=st.sampled_from(sorted(READERS)),
    content=st.one_of(soup.map(lambda text: text.encode("utf-8")), st.binary(max_size=60)),
)
def test_any_file_is_read_or_refused_naming_it(folder: Path, name: str, content: bytes) -> None:
    path = folder / name
    path.write_bytes(content)
    try:
        READERS[name](path)
    except BadInputError as exc:
        message = str(exc)
        assert str(path) in message and "\n" not in message.strip(), message
        assert re.match(rf"{re.escape(str(path))}, line \d+: ", message) or re.search(
            r"holds no|more than once", message
        ), message
