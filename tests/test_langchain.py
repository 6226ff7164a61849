"""whitevec's LangChain integration beside LangChain's own suites (tests/test_langchain_standard.py): LangChain's
dict filters in whitevec's language (each operator, and the refused ones in one line), hybrid search through search
keyword arguments, bad vectors refused with nothing written, a persisted folder reopened, relevance scores,
maximal marginal relevance, and WhitevecEmbeddings (a static table and a transform; the default MiniLM once)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("langchain_core")

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from whitevec.errors import BadInputError, WhitevecError
from whitevec.index import Retriever
from whitevec.index.filters.language import parse_filter
from whitevec.integrations.langchain import WhitevecEmbeddings, WhitevecVectorStore, filter_expression

SAVED_STATIC = Path(__file__).parent / "fixtures" / "saved" / "static"
SENTENCES: list[str] = json.loads((Path(__file__).parent / "fixtures" / "saved" / "texts.json").read_text())

# Metadata of every kind a filter compares, and documents missing a field (three-valued logic).
PAPERS = [
    Document(id="a", page_content="heat transfer at hypersonic speed", metadata={"year": 1962, "lang": "en"}),
    Document(id="b", page_content="boundary layer on a flat plate", metadata={"year": 1958, "lang": "en"}),
    Document(id="c", page_content="transfert de chaleur hypersonique", metadata={"year": 1965, "lang": "fr"}),
    Document(id="d", page_content="heat flux on a blunt body", metadata={"year": 1971.5, "reviewed": True}),
    Document(id="e", page_content="stall of a wing", metadata={"lang": "de", "reviewed": False}),
]


def embeddings() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=6)


@pytest.fixture
def papers() -> Iterator[WhitevecVectorStore]:
    with WhitevecVectorStore(embeddings(), lexical="bm25") as store:
        store.add_documents(PAPERS)
        yield store


# --- filters ---------------------------------------------------------------------------------------------------
FILTERS: list[tuple[dict[str, Any], str, set[str]]] = [
    ({"lang": "en"}, 'lang == "en"', {"a", "b"}),
    ({"lang": {"$eq": "fr"}}, 'lang == "fr"', {"c"}),
    ({"lang": {"$ne": "en"}}, 'lang != "en"', {"c", "e"}),  # d has no lang: unknown, not passed
    ({"year": {"$gt": 1962}}, "year > 1962", {"c", "d"}),
    ({"year": {"$gte": 1962}}, "year >= 1962", {"a", "c", "d"}),
    ({"year": {"$lt": 1962}}, "year < 1962", {"b"}),
    ({"year": {"$lte": 1962.0}}, "year <= 1962.0", {"a", "b"}),
    ({"year": {"$gte": 1960, "$lt": 1970}}, "(year >= 1960) and (year < 1970)", {"a", "c"}),
    ({"lang": {"$in": ["fr", "de"]}}, 'lang in ["fr", "de"]', {"c", "e"}),
    ({"lang": {"$nin": ["fr", "de"]}}, 'not lang in ["fr", "de"]', {"a", "b"}),
    ({"reviewed": True}, "reviewed == true", {"d"}),
    ({"lang": "en", "year": {"$lt": 1960}}, '(lang == "en") and (year < 1960)', {"b"}),
    ({"$and": [{"lang": "en"}, {"year": 1962}]}, '(lang == "en") and (year == 1962)', {"a"}),
    ({"$or": [{"lang": "fr"}, {"reviewed": False}]}, '(lang == "fr") or (reviewed == false)', {"c", "e"}),
    ({"$not": {"lang": "en"}}, 'not (lang == "en")', {"c", "e"}),
    ({"year": {"$not": {"$gt": 1962}}}, "not (year > 1962)", {"a", "b"}),
    ({"lang": 'q"\\'}, 'lang == "q\\"\\\\"', set()),  # quotes and backslashes escaped
]


@pytest.mark.parametrize(("spec", "expression", "passing"), FILTERS, ids=[e for _, e, _ in FILTERS])
def test_each_filter_operator_is_whitevecs_expression_and_passes_its_documents(
    papers: WhitevecVectorStore, spec: dict[str, Any], expression: str, passing: set[str]
) -> None:
    assert filter_expression(spec) == expression
    parse_filter(expression)  # whitevec's own parser reads it
    found = papers.similarity_search("heat transfer", k=5, filter=spec)
    assert {doc.id for doc in found} == passing


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"lang": {"$exists": True}}, "$exists on 'lang' cannot be expressed"),
    ({"lang": {"$like": "e%"}}, "$like on 'lang' cannot be expressed"),
    ({"lang": {"$contains": "e"}}, "$contains on 'lang' cannot be expressed"),
    ({"meta.lang": "en"}, "field 'meta.lang' cannot be expressed"),
    ({"in": "en"}, "field 'in' cannot be expressed"),
    ({"lang": None}, "None cannot be expressed"),
    ({"lang": ["en"]}, "['en'] cannot be expressed"),
    ({"year": float("nan")}, "nan cannot be expressed"),
    ({"lang": {"$in": []}}, "$in on 'lang' takes a non-empty list"),
    ({"lang": {"$regex": "e"}}, "unknown filter operator '$regex' on 'lang'"),
    ({"$nor": [{"lang": "en"}]}, "unknown filter operator '$nor'"),
    ({"$or": {"lang": "en"}}, "$or takes a non-empty list"),
    ({"lang": {}}, "an empty dict of operators"),
]


@pytest.mark.parametrize(("spec", "problem"), REFUSED, ids=[p for _, p in REFUSED])
def test_a_filter_whitevec_cannot_express_is_one_line(
    papers: WhitevecVectorStore, spec: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=r"cannot be expressed|takes|unknown|empty") as caught:
        papers.similarity_search("heat", k=2, filter=spec)
    assert isinstance(caught.value, BadInputError) and problem in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_filter_on_a_field_no_document_has_is_whitevecs_one_line(papers: WhitevecVectorStore) -> None:
    with pytest.raises(BadInputError, match="no document has the metadata field 'venue'"):
        papers.similarity_search("heat", k=2, filter={"venue": "AIAA"})


# --- hybrid and scores -----------------------------------------------------------------------------------------
def test_hybrid_search_through_search_kwargs_is_whitevecs_hybrid_search(papers: WhitevecVectorStore) -> None:
    query, retriever = "hypersonic heat transfer", papers.retriever
    assert retriever is not None
    vector = np.asarray([embeddings().embed_query(query)], dtype=np.float32)
    for fusion in ("rrf:60", "convex:0.3"):
        (hits,) = retriever.search([query], 3, mode="hybrid", fusion=fusion, query_vectors=vector)
        assert hits[0].rankers is not None and "lexical" in hits[0].rankers  # both rankers ran
        found = papers.similarity_search_with_score(query, k=3, mode="hybrid", fusion=fusion)
        assert [(doc.id, score) for doc, score in found] == [(hit.id, hit.score) for hit in hits]
        chain = papers.as_retriever(search_kwargs={"k": 3, "mode": "hybrid", "fusion": fusion})
        assert [doc.id for doc in chain.invoke(query)] == [hit.id for hit in hits]
    (lexical,) = retriever.search([query], 2, mode="lexical")
    assert [d.id for d in papers.similarity_search(query, k=2, mode="lexical")] == [h.id for h in lexical]


def test_a_vector_alone_searches_densely_on_an_index_searching_hybrid_by_default(
    papers: WhitevecVectorStore,
) -> None:
    retriever, vector = papers.retriever, embeddings().embed_query("heat transfer")
    assert retriever is not None and retriever.search_plan().mode == "hybrid"
    (hits,) = retriever.search(query_vectors=np.asarray([vector], dtype=np.float32), k=3, mode="dense")
    assert [d.id for d in papers.similarity_search_by_vector(vector, k=3)] == [h.id for h in hits]


class Counted(DeterministicFakeEmbedding):
    """The suite's fake embeddings, counting the queries embedded (an API's calls)."""

    queries: int = 0

    def embed_query(self, text: str) -> list[float]:
        self.queries += 1
        return super().embed_query(text)


def test_a_lexical_search_embeds_no_query_and_mmr_embeds_it_once() -> None:
    counted = Counted(size=6)
    with WhitevecVectorStore(counted, lexical="bm25") as store:
        store.add_documents(PAPERS)
        assert store.similarity_search("flat plate", k=1, mode="lexical")[0].id == "b"
        assert counted.queries == 0
        store.similarity_search("flat plate", k=1)
        assert counted.queries == 1
        store.max_marginal_relevance_search("flat plate", k=1, fetch_k=3)  # the query embedded once for both steps
        assert counted.queries == 2


def test_a_closed_store_is_refused_in_one_line() -> None:
    store = WhitevecVectorStore(embeddings())
    store.close()
    for call in (
        lambda: store.add_texts(["x"]),
        lambda: store.similarity_search("x"),
        lambda: store.get_by_ids(["1"]),
    ):
        with pytest.raises(BadInputError, match="is closed"):
            call()
    assert not store.folder.parent.exists()  # the temporary folder is gone and no add made it again


def test_hybrid_on_an_index_without_a_lexical_part_is_one_line() -> None:
    with WhitevecVectorStore(embeddings()) as store:
        store.add_texts(["one text", "another"])
        with pytest.raises(BadInputError, match="needs a lexical index") as caught:
            store.similarity_search("text", mode="hybrid")
        assert "\n" not in str(caught.value)


def test_relevance_scores_are_in_0_1_for_dense_and_convex_and_refused_for_rrf(papers: WhitevecVectorStore) -> None:
    dense = papers.similarity_search_with_score("heat transfer", k=5, mode="dense")
    relevance = papers.similarity_search_with_relevance_scores("heat transfer", k=5, mode="dense")
    assert [doc.id for doc, _ in relevance] == [doc.id for doc, _ in dense]
    assert [r for _, r in relevance] == pytest.approx([(1 + s) / 2 for _, s in dense])  # cosine
    assert all(0 <= r <= 1 for _, r in relevance)
    convex = papers.similarity_search_with_relevance_scores("heat", k=5, mode="hybrid", fusion="convex:0.5")
    assert all(0 <= r <= 1 for _, r in convex)
    with pytest.raises(BadInputError, match="no \\[0, 1\\] scale"):
        papers.similarity_search_with_relevance_scores("heat", k=5, mode="hybrid", fusion="rrf")


def test_max_marginal_relevance_passes_over_a_duplicate() -> None:
    with WhitevecVectorStore(embeddings()) as store:
        store.add_texts(["dog", "dog", "cat", "bird"], ids=["d1", "d2", "c", "b"])
        assert {d.id for d in store.similarity_search("dog", k=2)} == {"d1", "d2"}
        # The query is the duplicates' vector: at 0.5, every other candidate would tie with the second duplicate.
        diverse = store.max_marginal_relevance_search("dog", k=2, fetch_k=4, lambda_mult=0.25)
        assert diverse[0].id in ("d1", "d2") and diverse[1].id not in ("d1", "d2")
        vector = embeddings().embed_query("dog")
        by_vector = store.max_marginal_relevance_search_by_vector(vector, k=2, fetch_k=4, lambda_mult=0.25)
        assert [d.id for d in by_vector] == [d.id for d in diverse]


def test_langchains_default_k_past_the_documents_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with WhitevecVectorStore(embeddings()) as store:
        store.add_texts(["one", "two"])
        with caplog.at_level("WARNING", logger="whitevec"):
            assert len(store.similarity_search("one")) == 2  # k=4, LangChain's default
        assert not caplog.records


# --- bad input: one line, nothing written ----------------------------------------------------------------------
class Scripted(Embeddings):
    """Embeddings that give the rows they are told to, once per call."""

    def __init__(self, *calls: list[list[float]]) -> None:
        self.calls = list(calls)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.calls.pop(0)

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0, 0.0]


def test_nan_in_the_first_vectors_is_one_line_and_makes_no_index(tmp_path: Path) -> None:
    store = WhitevecVectorStore(Scripted([[1.0, 0.0, 0.0], [0.0, float("nan"), 1.0]]), folder=tmp_path / "idx")
    with pytest.raises(BadInputError, match="NaN or inf in rows 1") as caught:
        store.add_texts(["one", "two"])
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "idx").exists() and store.retriever is None
    assert store.similarity_search("one") == []


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ([[1.0, 0.0]], "2-d; this index takes 3-d"),
        ([[float("nan"), 0.0, 1.0]], "NaN"),
        ([[1.0, 0.0, 0.0], [1.0]], "rows of numbers of one length"),
    ],
    ids=["wrong-dimension", "nan", "ragged"],
)
def test_bad_vectors_for_a_held_index_are_one_line_and_nothing_is_written(
    tmp_path: Path, rows: list[list[float]], problem: str
) -> None:
    store = WhitevecVectorStore(Scripted([[1.0, 0.0, 0.0]], rows), folder=tmp_path / "idx")
    store.add_texts(["one"], ids=["1"])
    texts = ["two", "three"][: len(rows)]
    with pytest.raises(WhitevecError, match=problem) as caught:  # a wrong width: DimensionMismatchError
        store.add_texts(texts, ids=["2", "3"][: len(rows)])
    assert "\n" not in str(caught.value)
    assert store.retriever is not None and store.retriever.count == 1
    assert Retriever.load(tmp_path / "idx").count == 1
    store.close()


def test_a_query_vector_of_the_wrong_dimension_is_one_line() -> None:
    with WhitevecVectorStore(embeddings()) as store:
        store.add_texts(["one"])
        with pytest.raises(WhitevecError, match="2-d; this index takes 6-d") as caught:
            store.similarity_search_by_vector([0.5, 0.5], k=1)
        assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (lambda s: s.delete(), "delete takes the ids"),
        (lambda s: s.similarity_search("x", k=1, where="lang"), "takes no keyword argument 'where'"),
        (lambda s: s.add_texts(["x", "y"], ids=["1"]), "1 ids for 2 texts"),
        (lambda s: s.add_texts(["x", "y"], ids=["1", "1"]), "'1' occurs more than once"),
        (lambda s: s.add_texts(["x"], ids=[" 1"]), "no white space at either end"),
    ],
    ids=["delete-all", "unknown-kwarg", "ids-count", "duplicate-id", "bad-id"],
)
def test_bad_calls_are_one_line(tmp_path: Path, call: Any, problem: str) -> None:
    with WhitevecVectorStore(embeddings(), folder=tmp_path / "idx") as store:
        with pytest.raises(BadInputError, match=problem) as caught:
            call(store)
        assert "\n" not in str(caught.value) and not (tmp_path / "idx").exists()


def test_bad_index_settings_are_refused_when_the_store_is_made(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="unknown index kind 'nope'") as caught:
        WhitevecVectorStore(embeddings(), folder=tmp_path / "idx", kind="nope")
    assert "\n" not in str(caught.value) and not (tmp_path / "idx").exists()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep me")
    with pytest.raises(BadInputError, match="non-empty folder that is not a whitevec index"):
        WhitevecVectorStore(embeddings(), folder=tmp_path / "notes")


@pytest.mark.parametrize("was_folder", [False, True], ids=["new-folder", "empty-folder"])
def test_a_first_add_too_small_for_the_transform_is_refused_and_leaves_the_folder_as_it_was(
    tmp_path: Path, was_folder: bool
) -> None:
    folder = tmp_path / "idx"
    if was_folder:
        folder.mkdir()
    store = WhitevecVectorStore(DeterministicFakeEmbedding(size=8), folder=folder, transform="whitening-4")
    with pytest.raises(BadInputError, match="needs at least 5 documents; this one brings 2"):
        store.add_texts(["one", "two"])
    assert store.retriever is None and folder.exists() == was_folder and not any(tmp_path.glob("idx/*"))
    with store:
        store.add_texts([f"text {i}" for i in range(12)])
        assert store.retriever is not None and store.retriever.count == 12 and store.retriever.dim == 4
        assert store.similarity_search("text 3", k=1)[0].page_content == "text 3"


# --- persistence -----------------------------------------------------------------------------------------------
def test_a_persisted_folder_is_reopened_with_its_documents(tmp_path: Path) -> None:
    folder = tmp_path / "kept"
    with WhitevecVectorStore.from_documents(PAPERS, embeddings(), folder=folder, lexical="bm25") as store:
        before = store.similarity_search_with_score("heat transfer", k=3, filter={"lang": "en"}, mode="dense")
        store.delete(["b"])
    assert (folder / "manifest.json").is_file()  # a given folder stays
    with WhitevecVectorStore(embeddings(), folder=folder) as again:
        assert again.get_by_ids(["a", "b", "c"]) == PAPERS[0:1] + PAPERS[2:3]
        after = again.similarity_search_with_score("heat transfer", k=3, filter={"lang": "en"}, mode="dense")
        kept = [(doc, score) for doc, score in before if doc.id != "b"]
        assert [doc for doc, _ in after] == [doc for doc, _ in kept]
        assert [score for _, score in after] == pytest.approx([score for _, score in kept], abs=1e-6)
        assert again.similarity_search("hypersonic", k=1, mode="lexical")[0].id in ("a", "c")
        with pytest.raises(BadInputError, match="vectors made elsewhere"):
            WhitevecVectorStore(folder=folder)  # no Embeddings for an index of given vectors


def test_a_temporary_folder_is_removed_on_close() -> None:
    store = WhitevecVectorStore(embeddings())
    store.add_texts(["one"])
    owned = store.folder.parent
    assert owned.is_dir()
    store.close()
    assert not owned.exists()


# --- whitevec's own encoder ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def whitening(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from whitevec.encoders import StaticEncoder
    from whitevec.transforms import Whitening

    path = tmp_path_factory.mktemp("whitening") / "w.safetensors"
    Whitening(n_components=4).fit(StaticEncoder(SAVED_STATIC).encode(SENTENCES)).save(path)
    return path


def test_embeddings_are_the_encoders_vectors_transformed(whitening: Path) -> None:
    from whitevec.encoders import StaticEncoder
    from whitevec.transforms import Transform

    encoder = StaticEncoder(SAVED_STATIC)
    plain = WhitevecEmbeddings(SAVED_STATIC)
    assert np.allclose(plain.embed_documents(SENTENCES[:3]), encoder.encode(SENTENCES[:3]))
    whitened = WhitevecEmbeddings(encoder, transform=whitening)
    expected = Transform.load(whitening).transform(encoder.encode(SENTENCES[:3]))
    assert np.allclose(whitened.embed_documents(SENTENCES[:3]), expected, atol=1e-5)
    # A text with no token the model knows: zeros, not the one direction the transform gives them all.
    assert whitened.embed_query("zzz qqq") == [0.0] * 4 and len(whitened.embed_query(SENTENCES[0])) == 4


def test_a_transform_of_another_dimension_is_one_line(tmp_path: Path) -> None:
    from whitevec.transforms import Whitening

    path = tmp_path / "w16.safetensors"
    Whitening().fit(np.random.default_rng(0).normal(size=(40, 16))).save(path)
    with pytest.raises(BadInputError, match="takes 16-d vectors; the encoder gives 8-d"):
        WhitevecEmbeddings(SAVED_STATIC, transform=path)


def test_own_encoder_store_encodes_in_the_index_and_takes_its_transform(tmp_path: Path, whitening: Path) -> None:
    folder = tmp_path / "own"
    store = WhitevecVectorStore(WhitevecEmbeddings(SAVED_STATIC, transform=whitening), folder=folder)
    ids = store.add_texts(SENTENCES, metadatas=[{"n": i} for i in range(len(SENTENCES))])
    retriever = store.retriever
    assert retriever is not None and not retriever.is_external and retriever.transform is not None
    (hits,) = retriever.search([SENTENCES[3]], 3)
    assert [d.id for d in store.similarity_search(SENTENCES[3], k=3)] == [h.id for h in hits]
    # Vectors by vector are in the encoder's space, before the index's transform.
    vector = store.embeddings.embed_query(SENTENCES[3])
    assert len(vector) == 8
    assert [d.id for d in store.similarity_search_by_vector(vector, k=3)] == [h.id for h in hits]
    store.close()
    with WhitevecVectorStore(folder=folder) as again:  # reopened with the model the index records
        assert again.get_by_ids(ids[:1]) == [Document(id=ids[0], page_content=SENTENCES[0], metadata={"n": 0})]


@pytest.mark.model
def test_minilm_with_a_whitening_as_langchain_embeddings(minilm_dir: Path, tmp_path: Path) -> None:
    from whitevec.encoders import Encoder
    from whitevec.transforms import Whitening

    texts = [
        "A man is playing a guitar.",
        "Someone plays the guitar.",
        "A woman is slicing an onion.",
        "She cuts vegetables in the kitchen.",
        "The stock market fell sharply today.",
        "Shares dropped at the close of trading.",
    ]
    encoder = Encoder(minilm_dir, cache=False)
    raw = np.asarray(WhitevecEmbeddings(encoder).embed_documents(texts))
    unit = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    similar = unit @ unit.T
    np.fill_diagonal(similar, -1)
    assert [int(np.argmax(row)) for row in similar] == [1, 0, 3, 2, 5, 4]  # each finds its paraphrase
    whitening = Whitening(n_components=4).fit(raw)
    whitening.save(tmp_path / "w.safetensors")
    whitened = WhitevecEmbeddings(encoder, transform=tmp_path / "w.safetensors").embed_documents(texts)
    assert np.allclose(whitened, whitening.transform(raw), atol=1e-5) and len(whitened[0]) == 4
