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
from whitevec.errors import BadInputError, WhitevecError
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


# --- the vector store ----------------------------------------------------------------------------------------
SOURCES = [  # (text, metadata): LlamaIndex Documents, one node each
    ("a man is playing the guitar on the street", {"year": 1999, "lang": "en"}),
    ("a woman is playing the piano", {"year": 2005, "lang": "en"}),
    ("the dog is running in the street", {"year": 2010, "lang": "fr"}),
    ("a girl is brushing her hair", {"year": 2015, "lang": "en"}),
    ("the cat is eating food", {"year": 2020, "lang": "de"}),
    ("a boy is playing the guitar and the piano", {"year": 2021, "lang": "en"}),
    ("the big red car is on the street", {"year": 2022, "lang": "fr"}),
    ("a small blue car", {"year": 2023, "lang": "en"}),
]
QUERY = "a man playing the guitar"
RECENT = MetadataFilters(filters=[MetadataFilter(key="year", value=2005, operator=FilterOperator.GTE)])
RECENT_EXPRESSION = "year >= 2005"


def _documents() -> list[Any]:
    from llama_index.core import Document as LlamaDocument

    return [
        LlamaDocument(text=text, metadata=metadata, id_=f"doc-{i}") for i, (text, metadata) in enumerate(SOURCES)
    ]


def _answers(index: Any, mode: str, **options: Any) -> list[tuple[str, float]]:
    retriever = index.as_retriever(similarity_top_k=4, vector_store_query_mode=mode, **options)
    return [(hit.node.node_id, hit.score) for hit in retriever.retrieve(QUERY)]


@pytest.fixture()
def built(static_model: Path, tmp_path: Path) -> tuple[Any, WhitevecEmbedding, Path]:
    """A VectorStoreIndex of SOURCES in a WhitevecVectorStore (folder ``tmp_path/idx``), embedded by the tiny
    static table."""
    from llama_index.core import StorageContext, VectorStoreIndex

    from whitevec.integrations.llama_index import WhitevecVectorStore

    embedding = WhitevecEmbedding(str(static_model))
    store = WhitevecVectorStore(tmp_path / "idx")
    context = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex.from_documents(_documents(), storage_context=context, embed_model=embedding)
    return index, embedding, tmp_path / "idx"


def _whitevec_answers(
    folder: Path, embedding: WhitevecEmbedding, mode: str, **options: Any
) -> list[tuple[str, float]]:
    from whitevec.index import Retriever

    vector = np.asarray([embedding.get_query_embedding(QUERY)], dtype=np.float32)
    texts = None if mode == "dense" else [QUERY]
    with Retriever.load(folder) as index:
        (hits,) = index.search(texts, 4, mode=mode, query_vectors=vector, **options)
    return [(hit.id, hit.score) for hit in hits]


def test_a_vector_store_index_answers_as_whitevec_s_own_search_before_and_after_reloading(
    built: tuple[Any, WhitevecEmbedding, Path], tmp_path: Path
) -> None:
    from llama_index.core import StorageContext, load_index_from_storage

    from whitevec.index.search.fusion import Fusion
    from whitevec.integrations.llama_index import WhitevecVectorStore

    index, embedding, folder = built
    cases = {  # LlamaIndex's query, whitevec's search of the same folder
        "dense, filtered": (("default", {"filters": RECENT}), ("dense", {"filter": RECENT_EXPRESSION})),
        "hybrid, alpha": (
            ("hybrid", {"alpha": 0.3}),
            ("hybrid", {"fusion": Fusion("convex", alpha=0.3)}),
        ),
        "hybrid, filtered": (
            ("hybrid", {"alpha": 0.7, "filters": RECENT}),
            ("hybrid", {"fusion": "convex:0.7", "filter": RECENT_EXPRESSION}),
        ),
        "text search": (("text_search", {}), ("lexical", {})),
    }
    expected = {
        name: _whitevec_answers(folder, embedding, mode, **options) for name, (_, (mode, options)) in cases.items()
    }
    assert expected["dense, filtered"] != expected["hybrid, filtered"]  # the cases tell the modes apart
    held = index.vector_store.get_nodes([i for i, _ in expected["dense, filtered"]])
    assert len(held) == 4 and all(node.metadata["year"] >= 2005 for node in held)  # the filter held
    for name, (ours, _) in cases.items():
        found = _answers(index, ours[0], **ours[1])
        assert [i for i, _ in found] == [i for i, _ in expected[name]], name
        assert [s for _, s in found] == [s for _, s in expected[name]], name  # the same floats

    index.storage_context.persist(tmp_path / "storage")
    store = WhitevecVectorStore.from_persist_dir(folder)
    context = StorageContext.from_defaults(persist_dir=str(tmp_path / "storage"), vector_store=store)
    reloaded = load_index_from_storage(context, embed_model=embedding)
    for name, (ours, _) in cases.items():
        assert _answers(reloaded, ours[0], **ours[1]) == _answers(index, ours[0], **ours[1]), name


def test_nodes_come_back_whole_and_go_by_their_source_document(built: tuple[Any, WhitevecEmbedding, Path]) -> None:
    index, _, _ = built
    store = index.vector_store
    (node,) = store.get_nodes(filters=_year(2015))
    assert node.get_content() == SOURCES[3][0]
    assert node.metadata == SOURCES[3][1] and node.ref_doc_id == "doc-3"
    assert [n.get_content() for n in store.get_nodes([node.node_id, "no-such-node"])] == [SOURCES[3][0]]

    index.delete_ref_doc("doc-3")
    assert store.get_nodes(filters=_year(2015)) == []
    assert len(store.get_nodes()) == len(SOURCES) - 1
    store.delete_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="lang", value="fr")]))
    assert sorted(n.ref_doc_id for n in store.get_nodes()) == ["doc-0", "doc-1", "doc-4", "doc-5", "doc-7"]
    store.clear()
    assert store.get_nodes() == [] and _answers(index, "default") == []
    index.delete_ref_doc("doc-1")  # nothing left to delete, nothing refused
    assert store.get_nodes(filters=_year(2005)) == []


def _year(year: int) -> MetadataFilters:
    return MetadataFilters(filters=[MetadataFilter(key="year", value=year)])


def _node(node_id: str, embedding: list[float] | None) -> Any:
    from llama_index.core.schema import TextNode

    return TextNode(id_=node_id, text="a dog", embedding=embedding, metadata={"year": 1})


@pytest.mark.parametrize(
    ("embeddings", "problem"),
    [
        ([[1.0] * 8, None], "node 'n1' has no embedding"),
        ([[1.0] * 8, [1.0] * 7], "node 'n1' has an embedding of 7 values"),
        ([[1.0] * 8, [1.0] * 7 + [float("nan")]], "finite"),
    ],
)
def test_a_bad_node_is_one_line_and_nothing_is_written(
    tmp_path: Path, embeddings: list[list[float] | None], problem: str
) -> None:
    from whitevec.integrations.llama_index import WhitevecVectorStore

    store = WhitevecVectorStore(tmp_path / "idx")
    nodes = [_node(f"n{i}", embedding) for i, embedding in enumerate(embeddings)]
    with pytest.raises(BadInputError, match=problem) as caught:  # the first add: no index is created
        store.add(nodes)
    assert "\n" not in str(caught.value) and not (tmp_path / "idx").exists()
    store.add([_node("first", [0.5] * 8)])
    with pytest.raises(BadInputError, match=problem):  # a later one: the index is as it was
        store.add(nodes)
    assert [n.node_id for n in store.get_nodes()] == ["first"]


def test_a_node_of_another_dimension_than_the_index_s_is_one_line(tmp_path: Path) -> None:
    from whitevec.errors import DimensionMismatchError
    from whitevec.integrations.llama_index import WhitevecVectorStore

    store = WhitevecVectorStore(tmp_path / "idx")
    store.add([_node("first", [0.5] * 8)])
    with pytest.raises(DimensionMismatchError, match="9-d; this index takes 8-d") as caught:
        store.add([_node("wide", [0.5] * 9)])
    assert "\n" not in str(caught.value)
    assert [n.node_id for n in store.get_nodes()] == ["first"]


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ({"mode": "mmr"}, "query mode MMR has no whitevec equivalent"),
        ({"mode": "default", "alpha": 0.5}, "alpha weighs a hybrid search"),
        ({"node_ids": ["first"]}, "node_ids has no whitevec equivalent"),
        ({"query_embedding": None}, "needs its embedding"),
        ({"mode": "hybrid", "query_str": None}, "needs its text"),
        ({"mode": "hybrid", "alpha": 1.5}, "between 0 and 1"),
        ({"query_embedding": [0.5] * 7}, "7-d; this index takes 8-d"),
        ({"query_embedding": [float("nan")] * 8}, "NaN"),
        ({"filters": MetadataFilters(filters=[MetadataFilter(key="year", value="one")])}, "'year' holds numbers"),
    ],
)
def test_a_query_whitevec_cannot_answer_is_one_line(tmp_path: Path, query: dict[str, Any], problem: str) -> None:
    from llama_index.core.vector_stores.types import VectorStoreQuery

    from whitevec.integrations.llama_index import WhitevecVectorStore

    store = WhitevecVectorStore(tmp_path / "idx")
    store.add([_node("first", [0.5] * 8)])
    asked = {"query_embedding": [0.5] * 8, "query_str": "a dog", **query}
    with pytest.raises(WhitevecError, match=problem) as caught:  # BadInputError, DimensionMismatchError
        store.query(VectorStoreQuery(**asked))
    assert "\n" not in str(caught.value)


def test_the_async_twins_do_the_same_work(static_model: Path, tmp_path: Path) -> None:
    import asyncio

    from llama_index.core.vector_stores.types import VectorStoreQuery

    from whitevec.integrations.llama_index import WhitevecVectorStore

    store = WhitevecVectorStore(tmp_path / "idx")
    nodes = [_node(f"n{i}", [float(i + 1), 1.0, *[0.0] * 6]) for i in range(4)]

    async def work() -> tuple[Any, Any, Any]:
        await store.async_add(nodes)
        query = VectorStoreQuery(query_embedding=[1.0, 0.0, *[0.0] * 6], similarity_top_k=2)
        found = await store.aquery(query)
        await store.adelete_nodes(["n3"])
        kept = await store.aget_nodes()
        await store.aclear()
        return found, kept, await store.aget_nodes()

    found, kept, cleared = asyncio.run(work())
    assert found.ids == ["n3", "n2"] and len(found.similarities) == 2
    assert [n.node_id for n in kept] == ["n0", "n1", "n2"] and cleared == []


def test_an_add_of_a_held_node_id_replaces_it(tmp_path: Path) -> None:
    from llama_index.core.schema import TextNode

    from whitevec.integrations.llama_index import WhitevecVectorStore

    store = WhitevecVectorStore(tmp_path / "idx")
    store.add([_node("a", [1.0] * 8), _node("b", [0.5] * 8)])
    store.add([TextNode(id_="a", text="the cat", embedding=[2.0] * 8, metadata={"year": 2})])
    assert [(n.node_id, n.get_content(), n.metadata) for n in store.get_nodes(["a", "b"])] == [
        ("a", "the cat", {"year": 2}),
        ("b", "a dog", {"year": 1}),
    ]


def test_the_store_s_settings_make_its_index(tmp_path: Path) -> None:
    from llama_index.core.vector_stores.types import VectorStoreQuery

    from whitevec.index import Retriever
    from whitevec.integrations.llama_index import WhitevecVectorStore

    rng = np.random.default_rng(0)
    nodes = [_node(f"n{i}", rng.normal(size=8).tolist()) for i in range(12)]
    store = WhitevecVectorStore(tmp_path / "idx", transform="whitening-4", lexical=None)
    store.add(nodes)  # the first add builds the index: whitening-4 fitted on these 12 embeddings
    with Retriever.load(tmp_path / "idx") as index:
        assert index.is_external and index.input_dim == 8 and index.dim == 4 and index.lexical is None
        assert index.manifest["model"] == "llama_index"
    found = store.query(VectorStoreQuery(query_embedding=nodes[3].embedding, similarity_top_k=1))
    assert found.ids == ["n3"]
    with pytest.raises(BadInputError, match="needs a lexical index") as caught:
        store.query(VectorStoreQuery(query_embedding=nodes[3].embedding, query_str="a dog", mode="hybrid"))
    assert "\n" not in str(caught.value)


def test_an_index_built_by_whitevec_opens_as_a_store_of_text_nodes(tmp_path: Path) -> None:
    from llama_index.core.vector_stores.types import VectorStoreQuery

    from whitevec.datasets.retrieval import Document
    from whitevec.index import Retriever
    from whitevec.integrations.llama_index import WhitevecVectorStore

    vectors = np.eye(3, 8, dtype=np.float32)
    docs = [Document("a", "a dog", {"year": 1}), Document("b", "the cat", None), Document("c", "a car", {})]
    Retriever.build(docs, tmp_path / "idx", vectors=vectors, encoder_name="api").close()
    store = WhitevecVectorStore(tmp_path / "idx")
    found = store.query(VectorStoreQuery(query_embedding=vectors[1].tolist(), similarity_top_k=1))
    (node,) = found.nodes or []
    assert (node.node_id, node.get_content(), node.metadata, found.ids) == ("b", "the cat", {}, ["b"])
    assert [(n.node_id, n.metadata) for n in store.get_nodes(["a"])] == [("a", {"year": 1})]
