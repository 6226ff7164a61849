"""Tables that survive pipes: --format table|markdown|json|csv, and auto (Markdown unless a terminal fits the
drawn table). Every table-printing command runs on the tiny random BERT with a 40-column COLUMNS and a piped
stdout: whole cells (no '…'), Markdown with the table's columns, json and csv with the same numbers."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import sentences, tiny_cli_inputs
from whitevec.cli import TableFormat, _print_table, _Table, main

from .test_cli import run_cli
from .test_cli_usage import check_bad_input, check_usage_error

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny BERT, scored pairs, a corpus, an index of it, and a BEIR-style folder."""
    folder = tmp_path_factory.mktemp("format")
    inputs = tiny_cli_inputs(folder)
    bert, pairs, corpus = inputs["bert"], inputs["pairs"], inputs["corpus"]
    texts = sentences(80, seed=5)
    index = folder / "idx"
    argv = ["index", "build", "--corpus", str(corpus), "--out", str(index), "--transform", "none"]
    assert main([*argv, "--model", str(bert), "--no-cache", "-q"]) == 0
    beir = folder / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts[:30]))
    )
    (beir / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": texts[i][:20]}) + "\n" for i in range(5))
    )
    (beir / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t2\n" for i in range(5))
    )
    return {"bert": bert, "pairs": pairs, "corpus": corpus, "index": index, "beir": beir, "folder": folder}


# command -> (its arguments, the columns of its table)
COMMANDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "eval": (
        "eval --model BERT --tasks '' --pairs PAIRS --pooling cls,last-avg --transform none,whitening-4",
        ("task", "pooling", "transform", "pairs", "all", "mean", "wmean"),
    ),
    "search": ("search INDEX 'a dog is running' 'the red car' -k 3", ("query", "rank", "id", "score", "text")),
    "eval-retrieval": (
        "eval-retrieval --model BERT --dataset BEIR --transform none,whitening-8 --latency-queries 2",
        (
            *("pooling", "transform", "encoding", "dim", "bytes/vec", "nDCG@10", "R@100", "MRR@10", "index bytes"),
            *("build s", "p50 search ms", "p99 search ms", "p50 query ms", "p99 query ms", "QPS"),
        ),
    ),
    "tune": (
        "tune --pairs PAIRS --model BERT --out OUT/tuned.json --candidates whitening-8 --bootstrap 200 --folds 2",
        (
            *("pooling", "transform", "encoding", "dim", "bytes", "fit s", "encode ms/1k", "dev", "gain"),
            *("95% interval", "sig"),
        ),
    ),
    "diagnose": (
        "diagnose --corpus CORPUS --model BERT --out OUT/diag --json-only --transform none,whitening-8",
        ("transform", "mean cos", "eff. rank", "top-1 var", "I(W)", "IsoScore", "align", "unif", "STS"),
    ),
}

# Timings: each run measures its own.
VOLATILE = {"build s", "p50 search ms", "p99 search ms", "p50 query ms", "p99 query ms", "QPS", "fit s"}
VOLATILE.add("encode ms/1k")


def _argv(command: str, files: dict[str, Path], out: Path) -> list[str]:
    """``command``'s arguments with the files in; every command that encodes runs without cache or bars."""
    args = shlex.split(COMMANDS[command][0]) + ([] if command == "search" else ["--no-cache", "-q"])
    names = {"BERT": files["bert"], "PAIRS": files["pairs"], "CORPUS": files["corpus"], "INDEX": files["index"]}
    names |= {"BEIR": files["beir"]}
    return [str(names[a]) if a in names else a.replace("OUT", str(out)) for a in args]


def _markdown_rows(text: str) -> list[list[str]]:
    """The cells of each Markdown table line ('|' escaped as '\\|' stays inside its cell)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("| "):
            assert line.endswith(" |"), line
            rows.append([cell.replace("\\|", "|") for cell in re.split(r" (?<!\\)\| ", line[2:-2])])
    return rows


def _shows(shown: str, value: Any) -> bool:
    """Whether a table cell ``shown`` is ``value``: text the same; a number within the shown cell's rounding
    ('1,234', '+0.12', '12.3%'); None as '-'."""
    if value is None or isinstance(value, str):
        return shown == ("-" if value is None else value)
    scale = 100 if shown.endswith("%") else 1
    digits = shown.rstrip("%").replace(",", "")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return math.isclose(float(digits), scale * value, abs_tol=0.51 * 10**-decimals, rel_tol=1e-3)


def _json_table(command: str, document: Any) -> Any:
    """A command's --format json as the table's columns and rows. search's JSON is the hits of each query (with
    their metadata), one row of its table per hit."""
    if command != "search":
        return document
    rows = [
        {"query": entry["query"], "rank": rank, **{c: hit[c] for c in ("id", "score", "text")}}
        for entry in document
        for rank, hit in enumerate(entry["hits"], start=1)
    ]
    return {"columns": list(COMMANDS["search"][1]), "rows": rows}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_table_survives_a_narrow_pipe_in_every_format(
    command: str,
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    columns = COMMANDS[command][1]
    argv = _argv(command, files, tmp_path)

    code, out, err = run_cli(argv, capsys)  # auto, stdout a pipe: Markdown
    assert code == 0, err
    assert "…" not in out and "\x1b[" not in out
    rows = _markdown_rows(out)
    assert rows[0] == list(columns) and set(rows[1]) <= {":---", "---:"}
    table = rows[2:]
    assert table and all(len(row) == len(columns) for row in rows), out

    code, out, err = run_cli([*argv, "--format", "json"], capsys)
    assert code == 0, err
    document = _json_table(command, json.loads(out))  # stdout holds the JSON alone; other lines went to stderr
    assert document["columns"] == list(columns) and len(document["rows"]) == len(table)
    for row, shown in zip(document["rows"], table, strict=True):
        assert all(_shows(cell, row[c]) for c, cell in zip(columns, shown, strict=True) if c not in VOLATILE), (
            shown
        )
    assert any(isinstance(value, float) for row in document["rows"] for value in row.values())

    code, out, err = run_cli([*argv, "--format", "csv"], capsys)
    assert code == 0, err
    header, *records = list(csv.reader(io.StringIO(out)))
    assert header == list(columns) and len(records) == len(table)
    for record, row in zip(records, document["rows"], strict=True):
        for column, cell in zip(columns, record, strict=True):
            value = row[column]
            if column in VOLATILE:
                assert cell == "" or math.isfinite(float(cell))  # a number (or none): no thousands separators
            elif isinstance(value, int | float):
                assert float(cell) == value  # full precision
            else:
                assert cell == ("" if value is None else value)


def test_tune_can_print_json_beside_its_other_output(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--format json sends the lines after the table (chosen, held-out check) to stderr, not into the JSON."""
    code, out, err = run_cli([*_argv("tune", files, tmp_path), "--format", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["rows"] and "chosen:" in err and "chosen:" not in out


class _Terminal(io.StringIO):
    """A stdout that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _table() -> _Table:
    table = _Table("title", ("name", "score", "bytes"), text=("name",), formats={"score": ".2f", "bytes": ","})
    table.add_row("a | b\nc", 0.123456, 1234567)
    table.add_row("nan", np.float32("nan"), None)
    table.add_row("numpy", np.float64(0.5), np.int64(7))
    return table


@pytest.mark.parametrize(("columns", "drawn"), [(200, True), (20, False)], ids=["fits", "too narrow"])
def test_auto_draws_the_table_on_a_terminal_it_fits(
    columns: int, drawn: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setenv("COLUMNS", str(columns))
    _print_table(_table(), TableFormat.auto)
    out = terminal.getvalue()
    assert ("┃" in out) is drawn and ("| :---" in out) is not drawn
    assert "1,234,567" in out and "…" not in out


@pytest.mark.parametrize("no_color", [False, True])
def test_no_color_on_a_terminal(no_color: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    _print_table(_table(), TableFormat.table)
    assert ("\x1b[" in terminal.getvalue()) is not no_color


def test_table_forced_into_a_narrow_pipe_wraps_cells(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "20")
    _print_table(_table(), TableFormat.table)
    out = capsys.readouterr().out
    assert "┃" in out and "…" not in out and "\x1b[" not in out
    assert max(len(line) for line in out.splitlines()) <= 20
    # Each column's pieces, read down the lines, spell its header and every cell in full: wrapped, not cut.
    pieces = [re.split("[┃│]", line)[1:-1] for line in out.splitlines() if line.count("┃") + line.count("│") == 4]
    columns = ["".join(column.split()) for column in map("".join, zip(*pieces, strict=True))]
    assert columns == ["namea|bcnannumpy", "score0.12-0.50", "bytes1,234,567-7"]


def test_cells_in_each_format(capsys: pytest.CaptureFixture[str]) -> None:
    """Markdown escapes '|' and joins lines; a number not measured (NaN, None) is '-', null, or empty; numpy
    numbers are numbers."""
    table = _table()
    _print_table(table, TableFormat.markdown)
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "title" and out.endswith(" |\n\n")  # a line after the table is no row of it
    assert _markdown_rows(out)[2:] == [["a | b c", "0.12", "1,234,567"], ["nan", "-", "-"], ["numpy", "0.50", "7"]]
    _print_table(table, TableFormat.json)
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows == [
        {"name": "a | b\nc", "score": 0.123456, "bytes": 1234567},
        {"name": "nan", "score": None, "bytes": None},
        {"name": "numpy", "score": 0.5, "bytes": 7},
    ]
    _print_table(table, TableFormat.csv)
    assert list(csv.reader(io.StringIO(capsys.readouterr().out)))[1:] == [
        ["a | b\nc", "0.123456", "1234567"],
        ["nan", "", ""],
        ["numpy", "0.5", "7"],
    ]


def test_bad_format_is_a_usage_error(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["search", str(files["index"]), "a dog", "--format", "xml"], capsys)
    check_usage_error(code, out, err, ("search",), "--format")
    # Both options are valid alone: that is the library's bad input, one line without the usage.
    code, out, err = run_cli(["search", str(files["index"]), "a dog", "--json", "--format", "csv"], capsys)
    check_bad_input(code, out, err, "give it or --format")  # the wording names both options


def test_format_is_case_insensitive(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["search", str(files["index"]), "a dog", "-k", "2", "--format", "JSON"], capsys)
    assert code == 0 and len(json.loads(out)[0]["hits"]) == 2, err


def test_search_data_formats_keep_the_whole_text_and_json_has_one_shape(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long_text = " ".join(sentences(12, seed=8))
    assert len(long_text) > 150
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "long", "text": long_text, "source": "here"}) + "\n")
    index = tmp_path / "idx"
    argv = ["index", "build", "--corpus", str(corpus), "--out", str(index), "--model", str(files["bert"])]
    assert main([*argv, "--no-cache", "-q"]) == 0
    search = ["search", str(index), "a dog", "-k", "1"]
    code, out, err = run_cli([*search, "--format", "json"], capsys)
    assert code == 0, err
    hit = json.loads(out)[0]["hits"][0]
    assert hit["text"] == long_text and hit["metadata"] == {"source": "here"}
    code, same, err = run_cli([*search, "--json"], capsys)
    assert code == 0 and same == out, err
    code, same, err = run_cli([*search, "--json", "--format", "json"], capsys)
    assert code == 0 and same == out, err
    code, out, err = run_cli([*search, "--format", "csv"], capsys)
    assert code == 0 and [row["text"] for row in csv.DictReader(io.StringIO(out))] == [long_text], err
    code, out, err = run_cli([*search, "--format", "markdown"], capsys)
    cut = _markdown_rows(out)[2][4]
    assert code == 0 and len(cut) == 100 and cut.endswith("...") and long_text.startswith(cut[:-3]), err


def test_an_infinite_figure_is_valid_json_and_empty_csv(capsys: pytest.CaptureFixture[str]) -> None:
    """json.dumps writes an infinity as `Infinity`, which is no JSON: an infinite figure is not measured either."""
    table = _Table("title", ("name", "score"), text=("name",))
    table.add_row("inf", float("inf"))
    table.add_row("-inf", np.float64("-inf"))
    _print_table(table, TableFormat.json)
    text = capsys.readouterr().out

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is no JSON number")

    assert [row["score"] for row in json.loads(text, parse_constant=refuse)["rows"]] == [None, None]
    _print_table(table, TableFormat.csv)
    assert list(csv.reader(io.StringIO(capsys.readouterr().out)))[1:] == [["inf", ""], ["-inf", ""]]
