"""Metadata filters (whitevec.index.filters, filter_rows): the language, its one-line faults, and filtered
searches against brute force: exactly the top k of the documents that pass, for several encodings, dense,
lexical and hybrid."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import HashEncoder, sentences
from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError
from whitevec.index import Retriever
from whitevec.index.filter_rows import MetadataColumns, row_filter
from whitevec.index.filters import parse_filter
from whitevec.index.fusion import fuse

FIELDS = {"year": "number", "lang": "string", "score": "number", "ok": "bool"}
LANGS = ["en", "fr", "de"]


def _metadata(rng: np.random.Generator) -> dict[str, Any] | None:
    if rng.random() < 0.05:
        return None
    values = {
        "year": int(rng.integers(1990, 2021)),
        "lang": str(rng.choice(LANGS)),
        "score": round(float(rng.normal()), 3),
        "ok": bool(rng.random() < 0.5),
    }
    return {name: value for name, value in values.items() if rng.random() < 0.9}  # some fields missing


def _literal(field: str, rng: np.random.Generator) -> str:
    kind = FIELDS[field]
    if kind == "number":
        return str(int(rng.integers(1990, 2021))) if field == "year" else f"{rng.normal():.2f}"
    if kind == "string":
        return f'"{rng.choice(LANGS)}"'
    return str(bool(rng.random() < 0.5)).lower()


def _random_filter(rng: np.random.Generator, depth: int = 0) -> str:
    """A random expression of the language (what the brute-force evaluator below reads back)."""
    roll = rng.random()
    if depth < 2 and roll < 0.35:
        op = str(rng.choice(["and", "or"]))
        return f"({_random_filter(rng, depth + 1)} {op} {_random_filter(rng, depth + 1)})"
    if depth < 2 and roll < 0.45:
        return f"not {_random_filter(rng, depth + 1)}"
    field = str(rng.choice(list(FIELDS)))
    if FIELDS[field] != "bool" and rng.random() < 0.25:
        return f"{field} in [{', '.join(_literal(field, rng) for _ in range(2))}]"
    ops = ["==", "!="] if FIELDS[field] == "bool" else ["==", "!=", "<", "<=", ">", ">="]
    return f"{field} {rng.choice(ops)} {_literal(field, rng)}"


def _brute_force(expression: str, metadata: dict[str, Any] | None) -> bool:
    """The filter's meaning written out plainly: a comparison holds where the field has a value of the literal's
    kind (numbers alike), Python's own operators otherwise."""
    fields = metadata or {}

    def value_of(name: str, literal: Any) -> Any:
        value = fields.get(name)
        same = isinstance(value, bool) == isinstance(literal, bool) and (
            isinstance(value, str) == isinstance(literal, str)
        )
        return value if value is not None and same else None

    def compare(name: str, op: str, literal: Any) -> bool:
        value = value_of(name, literal)
        return value is not None and bool(eval(f"value {op} literal", {}, {"value": value, "literal": literal}))

    def member(name: str, literals: list[Any]) -> bool:
        return any(compare(name, "==", literal) for literal in literals)

    python = expression.replace("true", "True").replace("false", "False").replace("!=", "<>")
    import re

    python = re.sub(r"(\w+) in (\[[^\]]*\])", r"member('\1', \2)", python)
    python = re.sub(r"(\w+) (==|<>|<=|>=|<|>) (\"\w+\"|True|False|-?[\d.]+)", r"compare('\1', '\2', \3)", python)
    python = python.replace("'<>'", "'!='")
    return bool(eval(python, {}, {"compare": compare, "member": member}))


@pytest.fixture(scope="module")
def corpus() -> list[Document]:
    rng = np.random.default_rng(7)
    return [Document(f"d{i}", text, _metadata(rng)) for i, text in enumerate(sentences(700, seed=3))]


def _build(folder: Path, docs: list[Document], encoding: str, kind: str = "flat") -> Retriever:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Retriever.build(
            docs,
            folder,
            encoder=HashEncoder(),
            transform="none",
            kind=kind,
            index_params={"encoding": encoding},
            lexical="bm25",
        )


def _passing(expression: str, docs: list[Document]) -> np.ndarray:
    return np.array([_brute_force(expression, d.metadata) for d in docs])


# float32, fp16 and SQ take faiss's id selector; PQ is searched wider until k pass; binary's Hamming codes take it
@pytest.mark.parametrize("encoding", ["float32", "fp16", "sq8", "pq4x4", "binary"])
def test_filtered_dense_search_is_the_exact_top_k_of_the_passing_documents(
    tmp_path: Path, corpus: list[Document], encoding: str
) -> None:
    rng = np.random.default_rng(11)
    queries = sentences(3, seed=99)
    with _build(tmp_path / "index", corpus, encoding) as retriever:
        vectors = retriever.embed(queries)
        all_scores, all_rows = retriever.store.search(vectors, retriever.count)
        for _ in range(25):
            expression, k = _random_filter(rng), int(rng.choice([1, 5, 10]))
            passing = _passing(expression, corpus)
            assert np.array_equal(retriever.row_filter(expression).mask[: len(corpus)], passing), expression
            if not passing.any():
                continue
            found = retriever.search(queries, k, mode="dense", filter=expression)
            for hits, scores, rows in zip(found, all_scores, all_rows, strict=True):
                keep = passing[rows]
                expected = np.sort(scores[keep][:k])
                assert len(hits) == min(k, int(passing.sum())), expression
                assert all(passing[int(hit.id[1:])] for hit in hits), expression
                assert np.allclose(np.sort([hit.score for hit in hits]), expected, atol=1e-5), expression


def test_filtered_lexical_and_hybrid_searches_rank_only_passing_documents(
    tmp_path: Path, corpus: list[Document]
) -> None:
    rng = np.random.default_rng(5)
    queries = sentences(3, seed=42)
    with _build(tmp_path / "index", corpus, "float32") as retriever:
        assert retriever.lexical is not None
        plan = retriever.search_plan("hybrid")
        dense_scores, dense_rows = retriever.store.search(retriever.embed(queries), retriever.count)
        lexical_rows, lexical_scores = retriever.lexical.search(queries, retriever.count)
        for _ in range(15):
            expression, k = _random_filter(rng), int(rng.choice([3, 10]))
            passing = _passing(expression, corpus)
            if not passing.any():
                continue
            lexical = retriever.search(queries, k, mode="lexical", filter=expression)
            for hits, rows in zip(lexical, lexical_rows, strict=True):
                expected = [f"d{row}" for row in rows if row >= 0 and passing[row]][:k]
                assert [hit.id for hit in hits] == expected, expression
            depth = plan.depth(k, retriever.count)

            def restricted(rows: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                out_rows = np.full((len(rows), depth), -1)
                out_scores = np.full((len(rows), depth), -np.inf, dtype=np.float32)
                for i, (row_list, score_list) in enumerate(zip(rows, scores, strict=True)):
                    keep = (row_list >= 0) & passing[np.maximum(row_list, 0)]
                    n = min(depth, int(keep.sum()))
                    out_rows[i, :n], out_scores[i, :n] = row_list[keep][:n], score_list[keep][:n]
                return out_rows, out_scores

            expected_fused = fuse(
                *restricted(dense_rows, dense_scores), *restricted(lexical_rows, lexical_scores), plan.fusion, k
            )
            hybrid = retriever.search(queries, k, mode="hybrid", filter=expression)
            for hits, fused in zip(hybrid, expected_fused, strict=True):
                assert [hit.id for hit in hits] == [f"d{hit.row}" for hit in fused], expression


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_filtered_graph_and_list_searches_are_never_short(tmp_path: Path, corpus: list[Document], kind: str) -> None:
    with _build(tmp_path / "index", corpus, "float32", kind=kind) as retriever:
        for expression in ["year == 2000", 'lang == "de" and ok == true', "year >= 1991"]:
            passing = _passing(expression, corpus)
            for hits in retriever.search(sentences(4, seed=1), 10, mode="dense", filter=expression):
                assert len(hits) == min(10, int(passing.sum()))
                assert all(passing[int(hit.id[1:])] for hit in hits)


def test_a_filter_nothing_passes_answers_no_hits_with_a_note(tmp_path: Path, corpus: list[Document]) -> None:
    with _build(tmp_path / "index", corpus[:100], "float32") as retriever:
        for mode in ("dense", "lexical", "hybrid"):
            (hits,) = retriever.search(["anything"], 5, mode=mode, filter="year > 3000")
            assert hits == [] and hits.note is not None and "passed 0 of the 100 documents" in hits.note


@pytest.mark.parametrize(
    ("expression", "column", "problem"),
    [
        ("yr > 2000", 1, "no document has the metadata field 'yr'"),
        ('year > "abc"', 1, "'year' holds numbers, not strings"),
        ("year >= 2000 and lang = 'en'", 23, "unexpected character '='"),
        ("(year > 1", 10, "expected ')'"),
        ("ok < true", 1, "booleans compare with == and != only"),
        ("year in [1990,]", 15, "expected a value"),
        ("", 1, "the filter is empty"),
    ],
)
def test_bad_filters_are_one_line_naming_the_column(expression: str, column: int, problem: str) -> None:
    columns = MetadataColumns({0: {"year": 2000, "lang": "en", "ok": True}, 1: None}, 2)
    with pytest.raises(BadInputError) as caught:
        row_filter(parse_filter(expression), columns)
    message = str(caught.value)
    assert "\n" not in message and f"column {column}:" in message and problem in message


def test_filters_translate_to_milvus_expressions() -> None:
    text = 'year >= 2000 and (lang in ["en", "fr"] or not ok == false) and score < -0.5'
    assert parse_filter(text).to_milvus() == (
        '(metadata["year"] >= 2000) and ((metadata["lang"] in ["en", "fr"]) or (not (metadata["ok"] == false)))'
        ' and (metadata["score"] < -0.5)'
    )


def test_keywords_are_case_insensitive_and_strings_take_escapes() -> None:
    columns = MetadataColumns({0: {"name": 'say "hi"', "ok": True}, 1: {"name": "x", "ok": False}}, 2)
    assert row_filter(parse_filter("name == 'say \"hi\"' AND ok == True"), columns).mask.tolist() == [True, False]
    assert row_filter(parse_filter(r'NOT name == "say \"hi\""'), columns).mask.tolist() == [False, True]
