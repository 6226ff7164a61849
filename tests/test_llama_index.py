"""whitevec inside LlamaIndex (issue 51, item 3): ``whitevec.integrations.llama_index``.

The filters are checked against LlamaIndex's own evaluator of ``MetadataFilters``
(``llama_index.core.vector_stores.utils.build_metadata_filter_fn``, SimpleVectorStore's), on metadata where every
document has every field (where one lacks it, whitevec's three-valued logic is SQL's: documented, and tested). The
store is checked by its target: a ``VectorStoreIndex`` built from documents, queried with filters and in hybrid
mode, persisted and reloaded, answers what whitevec's own search of the same folder answers. llama-index-core
ships no reusable test suite for vector stores (nothing under ``llama_index/core`` defines tests), so the store's
contract is tested here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)
from llama_index.core.vector_stores.utils import build_metadata_filter_fn

from tests.static_helpers import tiny_static_folder
from whitevec.errors import BadInputError
from whitevec.index.filters.language import parse_filter
from whitevec.index.filters.rows import MetadataColumns
from whitevec.integrations.llama_index import SUPPORTED_OPERATORS, WhitevecEmbedding, filter_expression

# Every document has every field: where LlamaIndex's evaluator and whitevec's agree by definition.
ROWS: list[dict[str, Any]] = [
    {"year": 1999, "lang": "en", "score": 0.5, "title": 'say "hi"\n'},
    {"year": 2000, "lang": "fr", "score": 1.5, "title": "été"},
    {"year": 2001, "lang": "en", "score": 2.5, "title": "b"},
    {"year": 2024, "lang": "de", "score": -1.0, "title": "a"},
]


def whitevec_passing(filters: MetadataFilters, rows: list[dict[str, Any]] = ROWS) -> list[int]:
    expression = filter_expression(filters)
    assert expression is not None
    parsed = parse_filter(expression)  # what every whitevec search parses
    columns = MetadataColumns(dict(enumerate(rows)), len(rows))
    parsed.check(columns.kinds)
    return np.flatnonzero(columns.matching(parsed.root)).tolist()


def llama_index_passing(filters: MetadataFilters, rows: list[dict[str, Any]] = ROWS) -> list[int]:
    passes = build_metadata_filter_fn(lambda row: rows[int(row)], filters)
    return [row for row in range(len(rows)) if passes(str(row))]


ONE_EACH = [
    MetadataFilter(key="year", value=2000, operator=FilterOperator.EQ),
    MetadataFilter(key="lang", value="en", operator=FilterOperator.NE),
    MetadataFilter(key="year", value=2000, operator=FilterOperator.GT),
    MetadataFilter(key="score", value=1.5, operator=FilterOperator.GTE),
    MetadataFilter(key="score", value=1.5, operator=FilterOperator.LT),
    MetadataFilter(key="year", value=2001, operator=FilterOperator.LTE),
    MetadataFilter(key="lang", value=["en", "de"], operator=FilterOperator.IN),
    MetadataFilter(key="year", value=[1999, 2024], operator=FilterOperator.NIN),
    MetadataFilter(key="title", value='say "hi"\n', operator=FilterOperator.EQ),
    MetadataFilter(key="title", value="été", operator=FilterOperator.EQ),
    MetadataFilter(key="title", value="b", operator=FilterOperator.GT),
]


def test_every_supported_operator_is_the_one_llama_index_means() -> None:
    assert {f.operator for f in ONE_EACH} == set(SUPPORTED_OPERATORS)
    for one in ONE_EACH:
        filters = MetadataFilters(filters=[one])
        passing = whitevec_passing(filters)
        assert passing == llama_index_passing(filters), filter_expression(filters)
        assert 0 < len(passing) < len(ROWS), one  # each one tells the rows apart


@pytest.mark.parametrize("condition", list(FilterCondition))
def test_conditions_and_nesting_are_llama_index_s(condition: FilterCondition) -> None:
    parts = [ONE_EACH[1], ONE_EACH[4]]
    flat = MetadataFilters(filters=parts, condition=condition)
    assert whitevec_passing(flat) == llama_index_passing(flat)
    # LlamaIndex's evaluator takes no nesting: a nested group is checked against its flat equivalent.
    nested = MetadataFilters(
        filters=[ONE_EACH[6], MetadataFilters(filters=parts, condition=condition)], condition=FilterCondition.AND
    )
    expected = set(llama_index_passing(MetadataFilters(filters=[ONE_EACH[6]]))) & set(llama_index_passing(flat))
    assert set(whitevec_passing(nested)) == expected


def test_a_missing_field_passes_neither_ne_nor_nin_as_in_sql() -> None:
    """The documented difference: LlamaIndex's SimpleVectorStore lets a document without the field pass != and
    NIN; whitevec, like SQL and Milvus, calls the comparison unknown, and unknown does not pass."""
    rows = [{"lang": "en"}, {"lang": "fr"}, {"year": 1}]
    for operator, value in ((FilterOperator.NE, "en"), (FilterOperator.NIN, ["en"])):
        filters = MetadataFilters(filters=[MetadataFilter(key="lang", value=value, operator=operator)])
        assert whitevec_passing(filters, rows) == [1]
        assert llama_index_passing(filters, rows) == [1, 2]


def test_no_filter_is_none() -> None:
    assert filter_expression(None) is None
    assert filter_expression(MetadataFilters(filters=[])) is None


@pytest.mark.parametrize("operator", [op for op in FilterOperator if op not in SUPPORTED_OPERATORS])
def test_an_operator_whitevec_cannot_express_is_one_line_naming_it(operator: FilterOperator) -> None:
    value: Any = ["a"] if operator in (FilterOperator.ANY, FilterOperator.ALL) else "a"
    filters = MetadataFilters(filters=[ONE_EACH[0], MetadataFilter(key="tags", value=value, operator=operator)])
    with pytest.raises(BadInputError, match=f"operator {operator.name} ") as caught:
        filter_expression(filters)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("one", "problem"),
    [
        (MetadataFilter(key="file-name", value="a"), "not a field whitevec can filter on"),
        (MetadataFilter(key="meta.year", value=1), "not a field whitevec can filter on"),
        (MetadataFilter(key="in", value=1), "not a field whitevec can filter on"),
        (MetadataFilter(key="year", value=None), "needs one string or number"),
        (MetadataFilter(key="year", value=[1, 2], operator=FilterOperator.GT), "needs one string or number"),
        (MetadataFilter(key="year", value=1, operator=FilterOperator.IN), "needs a non-empty list"),
        (MetadataFilter(key="year", value=[], operator=FilterOperator.NIN), "needs a non-empty list"),
        (MetadataFilter(key="score", value=float("nan")), "finite numbers"),
    ],
)
def test_a_filter_whitevec_cannot_read_is_one_line(one: MetadataFilter, problem: str) -> None:
    with pytest.raises(BadInputError, match=problem) as caught:
        filter_expression(MetadataFilters(filters=[one]))
    assert "\n" not in str(caught.value)


# --- the embedding -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def static_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_static_folder(tmp_path_factory.mktemp("llama-static") / "static", dim=8)


TEXTS = ["a man is playing the guitar", "a dog is running on the street", "the girl is eating food"]


def test_the_embedding_is_the_encoder_s_vectors_then_the_transform(static_model: Path, tmp_path: Path) -> None:
    from whitevec.encoders.loading import load_encoder
    from whitevec.transforms import make_transform

    encoder = load_encoder(static_model)
    raw = encoder.encode(TEXTS)
    plain = WhitevecEmbedding(str(static_model))
    assert np.array_equal(np.asarray(plain.get_text_embedding_batch(TEXTS), dtype=np.float32), raw)
    assert np.array_equal(np.asarray(plain.get_query_embedding(TEXTS[0]), dtype=np.float32), raw[0])
    assert plain.model_name == encoder.describe()["model"]

    transform = make_transform("whitening-4")
    assert transform is not None
    transform.fit(encoder.encode([*TEXTS, "the cat", "a boy and a woman", "red car", "big blue piano"] * 2))
    saved = transform.save(tmp_path / "w.safetensors")
    for given in (transform, saved):  # a fitted Transform, or a saved one's path
        whitened = WhitevecEmbedding(encoder, transform=given)
        vectors = np.asarray(whitened.get_text_embedding_batch(TEXTS), dtype=np.float32)
        assert vectors.shape == (3, 4)
        np.testing.assert_allclose(vectors, transform.transform(raw), rtol=1e-5, atol=1e-6)


def test_the_embedding_s_async_twins_answer_alike(static_model: Path) -> None:
    import asyncio

    embedding = WhitevecEmbedding(str(static_model))
    assert asyncio.run(embedding.aget_query_embedding(TEXTS[1])) == embedding.get_query_embedding(TEXTS[1])
    assert asyncio.run(embedding.aget_text_embedding_batch(TEXTS)) == embedding.get_text_embedding_batch(TEXTS)


def test_an_unfitted_transform_is_one_line(static_model: Path) -> None:
    from whitevec.transforms import make_transform

    with pytest.raises(BadInputError, match="is not fitted") as caught:
        WhitevecEmbedding(str(static_model), transform=make_transform("whitening"))
    assert "\n" not in str(caught.value)
