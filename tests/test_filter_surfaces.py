"""Metadata filters on every surface: ``whitevec search --filter`` (hits that pass; a bad filter one line, exit 2,
before any model loads) and HTTP /search's ``filter`` (the same hits; 422 with the one line; a note when nothing
passes)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.index_helpers import HashEncoder, sentences, tiny_bert
from tests.test_cli import run_cli
from whitevec.index import Document, Retriever

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TEXTS = sentences(40, seed=8)


def _metadata(i: int) -> dict[str, Any]:
    return {"year": 2000 + i % 10, "lang": ["en", "fr"][i % 2], **({"draft": True} if i % 7 == 0 else {})}


def test_search_filter_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bert = tiny_bert(tmp_path / "bert")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"c{i}", "text": t, **_metadata(i)}) + "\n" for i, t in enumerate(TEXTS))
    )
    out = tmp_path / "idx"
    code, _, err = run_cli(
        ["index", "build", "--corpus", str(corpus), "--out", str(out), "--model", str(bert), "-q"], capsys
    )
    assert code == 0, err
    expression = 'year >= 2005 and lang == "fr"'
    passing = {f"c{i}" for i in range(len(TEXTS)) if _metadata(i)["year"] >= 2005 and i % 2 == 1}
    code, stdout, err = run_cli(
        ["search", str(out), TEXTS[3], "-k", "30", "--json", "--filter", expression], capsys
    )
    hits = json.loads(stdout)[0]["hits"]
    assert code == 0, err
    assert {hit["id"] for hit in hits} == passing  # k = 30 > the 8 that pass: every one of them
    code, stdout, err = run_cli(["search", str(out), TEXTS[3], "--json", "--filter", "year > 2100"], capsys)
    (answer,) = json.loads(stdout)
    assert code == 0 and answer["hits"] == [] and "passed 0 of the 40 documents" in answer["note"]
    shutil.rmtree(bert)  # a bad filter is refused before the model would load (it no longer can)
    for bad, place in [
        ("yeer > 2000", "column 1: no document has the metadata field 'yeer'"),
        ('year > "abc"', "column 1: 'year' holds numbers, not strings"),
        ("year >= 2000 and", "column 17: expected a metadata field name"),
    ]:
        code, _, err = run_cli(["search", str(out), "x", "--filter", bad], capsys)
        assert code == 2 and err.count("\n") == 1 and err.startswith("whitevec: error: filter") and place in err


fastapi = pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
from fastapi.testclient import TestClient  # noqa: E402

from whitevec.service.app import create_app  # noqa: E402
from whitevec.service.settings import ServeSettings  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Retriever, TestClient]]:
    docs = [Document(f"d{i}", text, _metadata(i)) for i, text in enumerate(TEXTS)]
    folder = tmp_path_factory.mktemp("served-filter") / "idx"
    with (
        Retriever.build(docs, folder, encoder=HashEncoder(), lexical="bm25", transform="none") as retriever,
        TestClient(create_app(retriever, ServeSettings()), raise_server_exceptions=False) as client,
    ):
        yield retriever, client


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_http_search_filter_answers_the_library_hits(served: tuple[Retriever, TestClient], mode: str) -> None:
    retriever, client = served
    expression = "year in [2001, 2003] or draft == true"
    queries = [TEXTS[5], TEXTS[6]]
    body: dict[str, Any] = {"queries": queries, "k": 5, "mode": mode, "filter": expression}
    answer = client.post("/search", json=body)
    assert answer.status_code == 200, answer.text
    expected = retriever.search(queries, 5, mode=mode, filter=expression)
    for result, hits in zip(answer.json()["results"], expected, strict=True):
        assert result["ids"] == [hit.id for hit in hits] and len(hits) == 5
        assert all(m["year"] in (2001, 2003) or m.get("draft") for m in result["metadata"])


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("colour == 'red'", "column 1: no document has the metadata field 'colour'"),
        ("lang > 3", "column 1: 'lang' holds strings, not numbers"),
        ("year = 2001", "column 6: unexpected character '='"),
    ],
)
def test_http_bad_filter_is_a_422_with_one_line(
    served: tuple[Retriever, TestClient], expression: str, problem: str
) -> None:
    answer = client_post(served, {"queries": ["x"], "filter": expression})
    assert answer.status_code == 422
    detail = answer.json()["detail"]
    assert "\n" not in detail and problem in detail


def test_http_filter_nothing_passes_is_noted(served: tuple[Retriever, TestClient]) -> None:
    answer = client_post(served, {"queries": ["x"], "filter": "year < 1900"})
    (result,) = answer.json()["results"]
    assert answer.status_code == 200 and result["ids"] == [] and "passed 0 of the 40 documents" in result["note"]


def client_post(served: tuple[Retriever, TestClient], body: dict[str, Any]) -> Any:
    return served[1].post("/search", json=body)
