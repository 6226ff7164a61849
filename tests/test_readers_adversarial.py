"""Hostile input files for every reader: each is read exactly or refused with one BadInputError naming the file
and the line; never changed silently, never a traceback from deep inside json or csv."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from whitevec.cli import main
from whitevec.datasets import Pair, read_pairs_file
from whitevec.datasets.retrieval import Document, read_beir, read_corpus_file
from whitevec.errors import BadInputError

LONG = "word " * 40_000  # 200,000 characters: past csv's default field limit of 131,072


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


# --- CSV quoting: the corpus reader parses CSV as the pairs reader does -------------------------------------


def test_csv_corpus_unterminated_quote_is_refused_not_swallowed(tmp_path: Path) -> None:
    path = _write(tmp_path, "c.csv", 'id,text\n1,alpha\n2,"beta never closed\n3,gamma\n4,delta\n')
    with pytest.raises(
        BadInputError, match=r"c\.csv, line 3: bad CSV: a quote opened in this row is never closed"
    ):
        read_corpus_file(path)


def test_csv_corpus_junk_after_closing_quote_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "c.csv", 'id,text\n1,"abc"junk\n')
    with pytest.raises(BadInputError, match=r"c\.csv, line 2: bad CSV"):
        read_corpus_file(path)


def test_csv_corpus_quoted_newline_is_kept_and_lines_counted(tmp_path: Path) -> None:
    # CRLF file: the line end inside the quotes reads as "\n", as Python's universal newlines do.
    path = _write(tmp_path, "c.csv", 'id,text\r\n1,"two\r\nlines"\r\n2,b\r\n3,"x\r\n')
    with pytest.raises(BadInputError, match=r"c\.csv, line 5: "):
        read_corpus_file(path)
    path.write_text('id,text\n1,"two\nlines"\n2,b\n', encoding="utf-8")
    assert read_corpus_file(path) == [Document("1", "two\nlines"), Document("2", "b")]


@pytest.mark.parametrize("name", ["c.csv", "c.tsv"])
def test_delimited_corpus_reads_fields_longer_than_csvs_default_limit(tmp_path: Path, name: str) -> None:
    sep = "," if name.endswith(".csv") else "\t"
    path = _write(tmp_path, name, f"id{sep}text\n1{sep}{LONG}\n2{sep}short\n")
    assert read_corpus_file(path) == [Document("1", LONG.strip()), Document("2", "short")]


def test_pairs_csv_reads_long_sentences(tmp_path: Path) -> None:
    path = _write(tmp_path, "p.csv", f'sentence1,sentence2,score\n"{LONG}",b,1\n')
    assert read_pairs_file(path).all_pairs() == [Pair(LONG.strip(), "b", 1.0)]


def test_tsv_corpus_keeps_a_bare_carriage_return_inside_a_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "c.tsv", 'id\ttext\tnote\n1\ta\rb\t"q\n')
    assert read_corpus_file(path) == [Document("1", "a\rb", {"note": '"q'})]


def test_tsv_corpus_more_tabs_than_header_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "c.tsv", "id\ttext\n1\ta\n2\tb\textra\n")
    with pytest.raises(BadInputError, match=r"c\.tsv, line 3: 3 columns, the header has 2"):
        read_corpus_file(path)


def test_csv_header_keeps_metadata_names_and_refuses_repeated_columns(tmp_path: Path) -> None:
    path = _write(tmp_path, "c.csv", "ID,Text,Lang\n1,a,en\n")
    assert read_corpus_file(path) == [Document("1", "a", {"Lang": "en"})]
    path.write_text("id,text,src,Src\n1,a,web,book\n", encoding="utf-8")
    with pytest.raises(BadInputError, match=r"c\.csv, line 1: .*'src'.*more than once"):
        read_corpus_file(path)
    pairs = _write(tmp_path, "p.tsv", "sentence1\tsentence2\tscore\tscore\na\tb\t1\t2\n")
    with pytest.raises(BadInputError, match=r"p\.tsv, line 1: .*'score'.*more than once"):
        read_pairs_file(pairs)


# --- JSON lines: lone surrogates, deep nesting, non-finite and oversized numbers, repeated keys --------------

_CORPUS_BAD_JSON = [
    ('{"id": "a", "text": "x\\ud800"}', r"'text'.*surrogate"),
    ('{"id": "a\\udfff", "text": "x"}', r"'id'.*surrogate"),
    ('{"text": "x", "title": "\\ud800"}', r"'title'.*surrogate"),
    ('{"text": "x", "tags": ["ok", "\\udc00"]}', r"'tags\[1\]'.*surrogate"),
    ('{"text": "x", "\\ud800": 1}', r"key.*surrogate"),
    ('{"text": "x", "m": ' + "[" * 100_000 + "]" * 100_000 + "}", r"nested too deeply"),
    (
        '{"text": "x", "n": ' + "9" * 5000 + "}",
        r"a number cannot be read \(.*value has 5000 digits\); write it as a string",
    ),
    ('{"text": "x", "score": NaN}', r"'score'.*NaN"),
    ('{"text": "x", "m": {"a": [Infinity]}}', r"'m\.a\[0\]'.*Infinity"),
    ('{"text": "x", "low": -Infinity}', r"'low'.*-Infinity"),
    ('{"text": "x", "big": 1e400}', r"'big'.*1e400"),
    ('{"text": "x", "text": "y"}', r"key 'text' appears twice"),
    ('{"text": "x", "m": {"a": 1, "a": 2}}', r"key 'a' appears twice"),
    ('{"text": "x", "title": 123}', r"title 123 must be a string"),
]


@pytest.mark.parametrize(("row", "message"), _CORPUS_BAD_JSON)
def test_jsonl_corpus_refuses_what_it_cannot_keep(tmp_path: Path, row: str, message: str) -> None:
    path = _write(tmp_path, "c.jsonl", '{"text": "fine"}\n\n' + row + "\n")
    with pytest.raises(BadInputError, match=rf"c\.jsonl, line 3: .*{message}"):
        read_corpus_file(path)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('{"sentence1": "a\\ud800", "sentence2": "b", "score": 1}', r"'sentence1'.*surrogate"),
        ('{"sentence1": "a", "sentence2": "b", "score": NaN}', r"'score'.*NaN"),
        ('{"sentence1": "a", "sentence2": "b", "score": 1e999}', r"'score'.*1e999"),
        ('{"sentence1": "a", "sentence2": "b", "score": 1, "x": ' + "[" * 50_000 + "]" * 50_000 + "}",
         "nested too deeply"),
        ('{"sentence1": "a", "sentence2": "b", "score": 1, "score": 2}', r"key 'score' appears twice"),
    ],
)  # fmt: skip
def test_jsonl_pairs_refuse_what_they_cannot_keep(tmp_path: Path, row: str, message: str) -> None:
    path = _write(tmp_path, "p.jsonl", row + "\n")
    with pytest.raises(BadInputError, match=rf"p\.jsonl, line 1: .*{message}"):
        read_pairs_file(path)


def test_jsonl_corpus_id_and_underscore_id(tmp_path: Path) -> None:
    # "id" names the document; a "_id" beside it is kept as metadata rather than dropped.
    path = _write(tmp_path, "c.jsonl", '{"id": "a", "_id": "b", "text": "x"}\n{"_id": "c", "text": "y"}\n')
    assert read_corpus_file(path) == [Document("a", "x", {"_id": "b"}), Document("c", "y")]
    path.write_text('{"id": null, "text": "x"}\n', encoding="utf-8")
    with pytest.raises(BadInputError, match=r"c\.jsonl, line 1: id None must be a string or an integer"):
        read_corpus_file(path)


def test_jsonl_corpus_null_or_blank_title_adds_nothing(tmp_path: Path) -> None:
    path = _write(tmp_path, "c.jsonl", '{"text": "x", "title": null}\n{"text": "y", "title": " "}\n')
    assert read_corpus_file(path) == [Document("1", "x"), Document("2", "y")]


def test_jsonl_keeps_surrogate_pairs_and_escaped_backslashes(tmp_path: Path) -> None:
    # A proper pair is one character; "\\ud800" written with an escaped backslash is plain text.
    path = _write(tmp_path, "c.jsonl", json.dumps({"text": "smile \U0001f600 C:\\ud800"}) + "\n")
    assert read_corpus_file(path) == [Document("1", "smile \U0001f600 C:\\ud800")]


# --- BEIR folders -------------------------------------------------------------------------------------------


def _beir(tmp_path: Path, queries: str, qrels: str) -> Path:
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "one"}\n{"_id": "d2", "text": "two"}\n')
    (folder / "queries.jsonl").write_text(queries)
    (folder / "qrels" / "test.tsv").write_text(qrels)
    return folder


def test_beir_queries_and_qrels_refuse_bad_rows(tmp_path: Path) -> None:
    good_qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"
    folder = _beir(tmp_path, '{"_id": "q1", "text": "NaN?", "score": NaN}\n', good_qrels)
    with pytest.raises(BadInputError, match=r"queries\.jsonl, line 1: .*'score'.*NaN"):
        read_beir(folder)
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "one"}\n')
    assert read_beir(folder).qrels == {"q1": {"d1": 1}}
    (folder / "qrels" / "test.tsv").write_text("q1\td1\t1.5\nq1\td2\t1\n")
    with pytest.raises(BadInputError, match=r"test\.tsv, line 1: score '1\.5' is not an integer"):
        read_beir(folder)
    (folder / "qrels" / "test.tsv").write_text(good_qrels + "q1\td1\t2\n")
    with pytest.raises(BadInputError, match=r"test\.tsv, line 3: .*'q1'.*'d1'.*judged again"):
        read_beir(folder)


def test_csv_bare_carriage_return_is_refused_with_a_useful_hint(tmp_path: Path) -> None:
    path = _write(tmp_path, "c.csv", "id,text\n1,ok\n2,a\rb\n")
    with pytest.raises(
        BadInputError, match=r"c\.csv, line 3: bad CSV: a carriage return \(\\r\) inside an unquoted"
    ):
        read_corpus_file(path)
    path.write_text('id,text\n1,"a\rb"\n', encoding="utf-8")
    assert read_corpus_file(path) == [Document("1", "a\rb")]


# --- the command line: one line on stderr, exit 2, before any model is loaded ---------------------------------


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.csv", 'id,text\n1,"never closed\n2,b\n', r"bad\.csv, line 2: bad CSV: a quote opened"),
        ("bad.jsonl", '{"text": "x", "n": NaN}\n', r"bad\.jsonl, line 1: key 'n' holds NaN"),
        ("bad.ndjson", '{"text": "x\\ud800"}\n', r"bad\.ndjson, line 1: key 'text' holds a lone surrogate"),
    ],
)
def test_index_build_refuses_a_bad_corpus_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, message: str
) -> None:
    corpus = _write(tmp_path, name, text)
    with pytest.raises(SystemExit) as exit_info:
        main(
            ["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "idx"), "--model", "no-such-model"]
        )
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert re.match(rf"whitevec: error: .*{message}", err) and not (tmp_path / "idx").exists()
