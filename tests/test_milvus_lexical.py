"""The lexical part on Milvus (Milvus Lite here): Milvus's own BM25 against bm25s, its RRF hybrid_search against
whitevec's fusion of the same two rankings, the manifest, and what is refused."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import HashEncoder
from whitevec.errors import BadInputError, WhitevecWarning
from whitevec.index import Document, Retriever
from whitevec.index.lexical.bm25 import DEFAULT_K1
from whitevec.index.search.fusion import Fusion, fuse
from whitevec.index.stores.lexical import FusesItself

pytest.importorskip("pymilvus", reason="the Milvus tests need pip install 'whitevec[milvus]'")
pytest.importorskip("milvus_lite", reason="the Milvus tests need milvus-lite (local file URIs)")

# Words of two letters or more that no stemmer changes and no stop list holds: here Milvus Lite's analyzer (no
# stemmer, one-letter words kept) and whitevec's give the same terms.
WORDS = [
    "red",
    "blue",
    "green",
    "cat",
    "dog",
    "fox",
    "owl",
    "bird",
    "fish",
    "tree",
    "rock",
    "sand",
    "wind",
    "rain",
    "snow",
    "moon",
    "star",
    "sun",
]
QUERIES = ["red cat", "blue fox moon", "green tree rock", "owl", "snow rain wind", "fish bird sun star"]


def corpus(n: int = 60, seed: int = 3) -> list[Document]:
    rng = np.random.default_rng(seed)
    return [
        Document(f"d{i}", " ".join(rng.choice(WORDS, size=int(rng.integers(3, 9))).tolist())) for i in range(n)
    ]


def build(folder: Path, docs: list[Document], **options: Any) -> Retriever:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WhitevecWarning)  # Milvus Lite does not stem: said at build
        return Retriever.build(docs, folder, encoder=HashEncoder(), **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def milvus_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("milvus-bm25") / "idx"
    build(folder, corpus(), backend="milvus", lexical="bm25").close()
    return folder


def test_milvus_bm25_ranks_as_bm25s_does_where_the_terms_agree(milvus_index: Path, tmp_path: Path) -> None:
    """Same terms, same k1 and b: the same ranking. Milvus scores tf (k1 + 1) / (tf + k1 (...)) and bm25s's
    Lucene variant drops the (k1 + 1): the scores differ by that factor, 2.2 at whitevec's k1, and only by it."""
    local = build(tmp_path / "faiss", corpus(), lexical="bm25", analyzer="plain")
    with Retriever.load(milvus_index, encoder=HashEncoder()) as on_milvus, local:  # type: ignore[arg-type]
        assert on_milvus.lexical is not None and local.lexical is not None
        m_rows, m_scores = on_milvus.lexical.search(QUERIES, 20)
        b_rows, b_scores = local.lexical.search(QUERIES, 20)
    found = b_rows >= 0
    np.testing.assert_array_equal(m_rows >= 0, found)
    np.testing.assert_allclose(m_scores[found], (DEFAULT_K1 + 1) * b_scores[found], rtol=1e-4)
    for m, b, scores in zip(m_rows, b_rows, b_scores, strict=True):  # rows equal but within ties of equal score
        assert {(r, round(float(s), 4)) for r, s in zip(m, scores, strict=True) if r >= 0} == {
            (r, round(float(s), 4)) for r, s in zip(b, scores, strict=True) if r >= 0
        }


def test_hybrid_rrf_is_milvus_hybrid_search_and_equals_whitevec_rrf(milvus_index: Path) -> None:
    with Retriever.load(milvus_index, encoder=HashEncoder()) as retriever:  # type: ignore[arg-type]
        assert isinstance(retriever.lexical, FusesItself)
        store: Any = retriever.store
        calls: list[int] = []
        original = store.client.hybrid_search

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            return original(*args, **kwargs)

        store.client.hybrid_search = counted
        got = retriever.search(QUERIES, 10, mode="hybrid", fusion="rrf:60", candidates=3)
        assert calls == [1]
        dense = retriever.search(QUERIES, 30, mode="dense")
        lexical = retriever.search(QUERIES, 30, mode="lexical")

    def arrays(results: Any) -> tuple[np.ndarray, np.ndarray]:
        rows = np.full((len(QUERIES), 30), -1, dtype=np.int64)
        scores = np.full((len(QUERIES), 30), -np.inf, dtype=np.float32)
        for i, query in enumerate(results):
            for j, hit in enumerate(query):
                rows[i, j], scores[i, j] = int(hit.id[1:]), hit.score
        return rows, scores

    # Every fused candidate, to name the documents tied with the tenth: Milvus orders equal RRF scores its own
    # way (a document ranked r by one ranker alone ties with one ranked r by the other alone).
    want = fuse(*arrays(dense), *arrays(lexical), Fusion("rrf", k=60), 60)
    for query, expected in zip(got, want, strict=True):
        rows, scores = [int(hit.id[1:]) for hit in query], [hit.score for hit in query]
        np.testing.assert_allclose(scores, [hit.score for hit in expected[:10]], rtol=1e-5)
        for row, score in zip(rows, scores, strict=True):
            tied = {hit.row for hit in expected if abs(hit.score - score) <= 1e-6 * score}
            assert row in tied
        assert len(set(rows)) == 10
        fused = {hit.row: hit for hit in expected}
        for hit in query:  # each hit says where each ranker put it
            assert {name: at["rank"] for name, at in (hit.rankers or {}).items()} == {
                name: at.rank for name, at in fused[int(hit.id[1:])].rankers()
            }


def test_convex_on_milvus_is_whitevec_fuse_over_milvus_lists(milvus_index: Path) -> None:
    with Retriever.load(milvus_index, encoder=HashEncoder()) as retriever:  # type: ignore[arg-type]
        store: Any = retriever.store
        store.client.hybrid_search = None  # a convex fusion never asks Milvus to fuse
        got = retriever.search(QUERIES, 5, mode="hybrid", fusion="convex:0.5")
        assert all(len(query) == 5 for query in got)
        assert all(0.0 <= hit.score <= 1.0 for query in got for hit in query)


def test_the_manifest_says_milvus_keeps_the_lexical_part(milvus_index: Path) -> None:
    from whitevec.index.folder.snapshot import read_manifest
    from whitevec.index.lexical.bm25 import lexical_size

    manifest = read_manifest(milvus_index)
    record = manifest["lexical"]
    assert (
        record["library"] == "milvus" and record["documents"] == 60 and (record["k1"], record["b"]) == (1.2, 0.75)
    )
    params = record["milvus_analyzer"]
    assert params["tokenizer"] == "standard" and params["filter"][0] == "lowercase"
    assert {"type": "stemmer", "language": "english"} in params["filter"]
    stop = next(f for f in params["filter"] if isinstance(f, dict) and f["type"] == "stop")
    assert "the" in stop["stop_words"]
    assert record["analyzer"]["name"] == "english"
    assert not (milvus_index / "lexical.safetensors").exists()
    assert "in the Milvus collection" in lexical_size(manifest)["lexical"]


def test_milvus_gets_the_english_analyzers_filters_in_its_order() -> None:
    """Folding and the length limit before the stemmer, the stop words on the stems (whitevec's order); the
    former english (an older index's record) keeps its own: stop words, then the stemmer."""
    from whitevec.index.lexical.analyzers import FORMER_DEFINITIONS, NLTK_ENGLISH_STOP_WORDS, make_analyzer
    from whitevec.index.milvus.bm25 import milvus_analyzer_params

    stem = {"type": "stemmer", "language": "english"}
    params = milvus_analyzer_params(make_analyzer("english"))
    assert params["filter"] == [
        "lowercase",
        "asciifolding",
        {"type": "length", "max": 39},  # Milvus drops a token longer than max; whitevec one of 40 or more
        stem,
        {"type": "stop", "stop_words": sorted(NLTK_ENGLISH_STOP_WORDS)},
    ]
    former = milvus_analyzer_params(FORMER_DEFINITIONS["english"][0])["filter"]
    assert former[0] == "lowercase" and former[1]["type"] == "stop" and former[2] == stem and len(former) == 3


def test_stop_words_only_and_bad_choices(milvus_index: Path, tmp_path: Path) -> None:
    with Retriever.load(milvus_index, encoder=HashEncoder()) as retriever:  # type: ignore[arg-type]
        alone, mixed = retriever.search(["the of and"], 5, mode="lexical"), retriever.search(["the of"], 5)
        assert alone[0] == [] and alone[0].note and mixed[0] and mixed[0].note
    with pytest.raises(BadInputError, match="'cjk-bigram' has no Milvus counterpart"):
        build(tmp_path / "x", corpus(), backend="milvus", lexical="bm25", analyzer="cjk-bigram")
    assert not (tmp_path / "x").exists()


def test_a_build_on_milvus_lite_says_it_does_not_stem(tmp_path: Path) -> None:
    with pytest.warns(WhitevecWarning, match="does not stem"):
        Retriever.build(corpus(), tmp_path / "i", encoder=HashEncoder(), backend="milvus", lexical="bm25").close()  # type: ignore[arg-type]
