"""Filters that once answered wrong or crashed (issue 49): integers past 2**53 compared exactly; the check of a
filter before the model loads reading every segment of the live index, as the search does; nesting and number
literals bounded, one line each; metadata that is not an object refused at the write, and tolerated where an
older index holds it. On the CLI, in Python and over HTTP."""

from __future__ import annotations

import itertools
import json
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import HashEncoder, sentences
from tests.static_helpers import tiny_static_folder
from tests.test_cli import run_cli
from tests.test_filters import OPS, _brute_force
from whitevec.errors import BadInputError
from whitevec.index import Document, Retriever, read_manifest
from whitevec.index.filters.language import MAX_DEPTH, MAX_NUMBER_CHARS, parse_filter
from whitevec.index.filters.rows import MetadataColumns, row_filter
from whitevec.index.milvus.filters import milvus_expression

TEXTS = sentences(40, seed=31)
BIG = 2**53  # past it, float64 holds only some integers: 2**53 + 1 rounds to 2**53

STORED: list[Any] = [BIG + 1, BIG, BIG - 1, BIG + 2, 2**70, 2**70 - 1, -(2**64) - 1, 10**400, 1, 1.0, 0.5]
STORED += [float(BIG), 1e300, -1e300, 0]
LITERALS = [BIG, BIG + 1, BIG - 1, 2**70 - 1, 2**70, 2**70 + 1, -(2**64) - 1, 10**63, 1, 1.5, float(BIG), 1e20]


def test_numbers_past_2_53_compare_exactly_as_python_does() -> None:
    """Every comparison of a stored number (integers past 2**53 and past float64's range among them) with a
    literal (past 2**53 too) passes exactly the rows Python's exact int/float comparisons pass. Held as float64,
    ``n == 9007199254740992`` passed 9007199254740993 and a stored 10**400 raised OverflowError."""
    metadata: dict[int, Any] = {row: {"n": value} for row, value in enumerate(STORED)}
    columns = MetadataColumns(metadata, len(STORED))
    for literal, op in itertools.product(LITERALS, OPS):
        expression = f"n {op} {literal!r}"
        expected = [_brute_force(expression, metadata[row]) for row in range(len(STORED))]
        assert row_filter(parse_filter(expression), columns).mask.tolist() == expected, expression
    exact = row_filter(parse_filter(f"n == {BIG}"), columns).mask
    assert np.flatnonzero(exact).tolist() == [1, 11]  # BIG and float(BIG), not BIG + 1 or BIG + 2


def test_the_milvus_translation_keeps_every_digit_or_refuses() -> None:
    assert milvus_expression(parse_filter(f"n == {BIG + 1}")) == f'metadata["n"] == {BIG + 1}'
    with pytest.raises(BadInputError, match="past Milvus's 64-bit integers"):
        milvus_expression(parse_filter(f"n == {2**70 - 1}"))


def test_milvus_compares_the_translated_big_integers_exactly(tmp_path: Path) -> None:
    """Milvus Lite, given the translation, selects the rows the filter's own evaluation passes, for integers
    past 2**53 within int64."""
    pytest.importorskip("milvus_lite", reason="the Milvus tests need milvus-lite (local file URIs)")
    from pymilvus import DataType, MilvusClient

    stored = [BIG + 1, BIG, BIG - 1, 2**62 + 1, 2**63 - 1, 1, 0.5]
    client = MilvusClient(str(tmp_path / "big.db"))
    try:
        schema = client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
        schema.add_field("metadata", DataType.JSON)
        index = client.prepare_index_params()
        index.add_index("vector", index_type="FLAT", metric_type="L2")
        client.create_collection("big", schema=schema, index_params=index)
        client.insert("big", [{"id": i, "vector": [0.0, 1.0], "metadata": {"n": v}} for i, v in enumerate(stored)])
        columns = MetadataColumns({i: {"n": v} for i, v in enumerate(stored)}, len(stored))
        for literal, op in itertools.product([BIG, BIG + 1, 2**62, 2**63 - 1], OPS):
            expression = parse_filter(f"n {op} {literal}")
            selected = client.query("big", filter=milvus_expression(expression), output_fields=["id"])
            expected = np.flatnonzero(row_filter(expression, columns).mask).tolist()
            assert sorted(row["id"] for row in selected) == expected, expression.text
    finally:
        client.close()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("(" * 400 + "n == 1" + ")" * 400, f"nested more than {MAX_DEPTH} deep"),  # was RecursionError
        ("not " * 1000 + "n == 1", f"nested more than {MAX_DEPTH} deep"),
        ("(" * (MAX_DEPTH + 1) + "n == 1" + ")" * (MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} deep"),
        ("n == 1" + "0" * 400, f"a number of 401 characters (at most {MAX_NUMBER_CHARS})"),  # was OverflowError
        ("n < -1" + "0" * 5000, f"a number of 5002 characters (at most {MAX_NUMBER_CHARS})"),  # was ValueError
    ],
)
def test_deep_or_huge_filters_are_one_line(text: str, problem: str) -> None:
    with pytest.raises(BadInputError) as caught:
        parse_filter(text)
    message = str(caught.value)
    assert "\n" not in message and problem in message and len(message) < 300  # a long filter is quoted in part


def test_filters_at_the_limits_are_searched() -> None:
    columns = MetadataColumns({0: {"n": 1}, 1: {"n": 2}}, 2)
    deepest = "(" * (MAX_DEPTH - 1) + "not n == 1" + ")" * (MAX_DEPTH - 1)
    assert row_filter(parse_filter(deepest), columns).mask.tolist() == [False, True]
    longest = "0" * (MAX_NUMBER_CHARS - 1) + "1"
    assert row_filter(parse_filter(f"n <= {longest}"), columns).mask.tolist() == [True, False]


def test_metadata_that_is_not_an_object_is_refused_at_the_write(tmp_path: Path) -> None:
    """A list, string or number as metadata once went into the index, and every later filtered search raised
    AttributeError; now the write refuses it in one line and writes nothing."""
    good = [Document(f"d{i}", text, {"n": i}) for i, text in enumerate(TEXTS[:5])]
    for bad in ([1, 2], "red", 5):
        with pytest.raises(BadInputError, match=f"document 'x' has metadata of type {type(bad).__name__}"):
            Retriever.build([*good, Document("x", TEXTS[9], bad)], tmp_path / "idx", encoder=HashEncoder())  # type: ignore[arg-type]
        assert not (tmp_path / "idx").exists()
    with Retriever.build(good, tmp_path / "idx", encoder=HashEncoder(), transform="none") as retriever:
        with pytest.raises(BadInputError, match="metadata of type list"):
            retriever.add([Document("x", TEXTS[9], [1])])  # type: ignore[arg-type]
        assert read_manifest(tmp_path / "idx").get("generation", 0) == 0
        (hits,) = retriever.search([TEXTS[1]], 3, filter="n == 1")
        assert [hit.id for hit in hits] == ["d1"]


def test_metadata_nested_past_the_recursion_limit_is_one_line(tmp_path: Path) -> None:
    deep: dict[str, Any] = {}
    inner = deep
    for _ in range(5000):  # json.dumps raised RecursionError
        inner["a"] = inner = {}
    docs = [Document("deep", TEXTS[0], deep), Document("b", TEXTS[1], {"n": 1})]
    with pytest.raises(BadInputError, match="document 'deep' has metadata nested too deep"):
        Retriever.build(docs, tmp_path / "idx", encoder=HashEncoder(), transform="none")
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize(
    ("metadata", "key"),
    [({1: "a", "1": "b"}, "1 of type int"), ({"n": [{None: 2}]}, "None of type NoneType"), ({True: 1}, "True")],
)
def test_a_metadata_key_that_is_not_a_string_is_refused_at_the_write(
    tmp_path: Path, metadata: dict[Any, Any], key: str
) -> None:
    """json.dumps wrote a non-string key as a string: {1: "a", "1": "b"} went in as two "1" keys, of which a
    reader keeps one (a value lost), and {True: 1} came back as {"true": 1}. Refused in one line, nothing
    written."""
    good = [Document(f"d{i}", text, {"n": i}) for i, text in enumerate(TEXTS[:5])]
    with Retriever.build(good, tmp_path / "idx", encoder=HashEncoder(), transform="none") as retriever:
        with pytest.raises(BadInputError, match=f"document 'x' has the metadata key {key}"):
            retriever.add([Document("x", TEXTS[9], metadata)])
        assert read_manifest(tmp_path / "idx").get("generation", 0) == 0
        assert retriever.count == 5


def test_rows_whose_metadata_is_not_an_object_hold_no_field() -> None:
    """What an index written by older versions may hold: such a row is unknown to every comparison."""
    columns = MetadataColumns({0: [1, 2], 1: "red", 2: 5, 3: {"n": 1}, 4: None}, 5)
    assert row_filter(parse_filter("n == 1"), columns).mask.tolist() == [False, False, False, True, False]
    assert row_filter(parse_filter("not n == 2"), columns).mask.tolist() == [False, False, False, True, False]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_the_command_line_checks_every_segment_of_the_live_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``search --filter``'s check before the model loads read the build segment's documents only: a field only
    added documents hold was refused, and once a merge removed the build segment every filtered search failed
    (``docs.sqlite is not a readable document store``). A field only deleted documents held is refused, as the
    search itself refuses it."""
    model = str(tiny_static_folder(tmp_path / "static"))
    idx = str(tmp_path / "idx")
    one = _jsonl(tmp_path / "one.jsonl", [{"id": "first", "text": TEXTS[0]}])
    code, _, err = run_cli(["index", "build", "--corpus", one, "--out", idx, "--model", model, "-q"], capsys)
    assert code == 0, err
    twenty = [{"id": f"t{i}", "text": TEXTS[1 + i], "n": i, "tag": "q"} for i in range(20)]
    code, _, err = run_cli(["index", "add", idx, "--corpus", _jsonl(tmp_path / "20.jsonl", twenty)], capsys)
    assert code == 0, err
    code, out, err = run_cli(["search", idx, TEXTS[3], "-k", "30", "--json", "--filter", "tag == 'q'"], capsys)
    assert code == 0 and len(json.loads(out)[0]["hits"]) == 20, err
    for i in range(8):  # past 8 segments, a merge: the build segment's files go
        single = _jsonl(tmp_path / "single.jsonl", [{"id": f"s{i}", "text": TEXTS[25 + i], "n": 100 + i}])
        code, _, err = run_cli(["index", "add", idx, "--corpus", single], capsys)
        assert code == 0, err
    assert not (tmp_path / "idx" / "docs.sqlite").exists()
    code, out, err = run_cli(["search", idx, TEXTS[26], "-k", "1", "--json", "--filter", "n >= 100"], capsys)
    assert code == 0 and [hit["id"] for hit in json.loads(out)[0]["hits"]] == ["s1"], err
    code, _, err = run_cli(["index", "delete", idx, *(f"t{i}" for i in range(20))], capsys)
    assert code == 0, err
    shutil.rmtree(model)  # refused before the model would load (it no longer can)
    code, _, err = run_cli(["search", idx, "x", "--filter", "tag == 'q'"], capsys)
    assert code == 2 and err.count("\n") == 1 and "no document has the metadata field 'tag'" in err, err


def test_big_integers_and_bounds_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = str(tiny_static_folder(tmp_path / "static"))
    idx = str(tmp_path / "idx")
    rows = [{"id": "a", "text": TEXTS[0], "n": BIG + 1}, {"id": "b", "text": TEXTS[1], "n": 1}]
    corpus = _jsonl(tmp_path / "c.jsonl", rows)
    code, _, err = run_cli(["index", "build", "--corpus", corpus, "--out", idx, "--model", model, "-q"], capsys)
    assert code == 0, err
    for expression, ids in [(f"n == {BIG}", []), (f"n == {BIG + 1}", ["a"]), (f"n > {BIG}", ["a"])]:
        code, out, err = run_cli(["search", idx, TEXTS[0], "--json", "--filter", expression], capsys)
        assert code == 0 and [hit["id"] for hit in json.loads(out)[0]["hits"]] == ids, (expression, err)
    for expression in ["(" * 400 + "n == 1" + ")" * 400, "not " * 1000 + "n == 1", "n == 1" + "0" * 5000]:
        code, _, err = run_cli(["search", idx, "x", "--filter", expression], capsys)
        assert code == 2 and err.count("\n") == 1 and err.startswith("whitevec: error: filter"), err


fastapi = pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
from fastapi.testclient import TestClient  # noqa: E402

from whitevec.service.app import create_app  # noqa: E402
from whitevec.service.settings import ServeSettings  # noqa: E402


@pytest.fixture(scope="module", params=["faiss", "milvus"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    if request.param == "milvus":
        pytest.importorskip("milvus_lite", reason="the Milvus tests need milvus-lite (local file URIs)")
    docs = [Document("a", TEXTS[0], {"n": BIG + 1}), Document("b", TEXTS[1], {"n": 1})]
    folder = tmp_path_factory.mktemp("served-big") / "idx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        retriever = Retriever.build(docs, folder, encoder=HashEncoder(), transform="none", backend=request.param)
    settings = ServeSettings(writable=True)
    with retriever, TestClient(create_app(retriever, settings), raise_server_exceptions=False) as client:
        yield client


def test_http_compares_big_integers_exactly(served: TestClient) -> None:
    for expression, ids in [(f"n == {BIG}", []), (f"n == {BIG + 1}", ["a"]), (f"n != {BIG}", ["a", "b"])]:
        answer = served.post("/search", json={"queries": [TEXTS[0]], "k": 2, "filter": expression})
        assert answer.status_code == 200 and sorted(answer.json()["results"][0]["ids"]) == ids, answer.text


@pytest.mark.parametrize(
    "expression", ["(" * 400 + "n == 1" + ")" * 400, "not " * 1000 + "n == 1", "n == 1" + "0" * 400]
)
def test_http_deep_or_huge_filters_are_a_422(served: TestClient, expression: str) -> None:
    answer = served.post("/search", json={"queries": ["x"], "filter": expression})
    assert answer.status_code == 422 and "\n" not in answer.json()["detail"], answer.text
