"""Metadata filters (whitevec.index.filters.language, filter_rows): the language, its one-line faults, and filtered
searches against brute force: exactly the top k of the documents that pass, for several encodings, dense,
lexical and hybrid."""

from __future__ import annotations

import contextlib
import operator
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import HashEncoder, sentences
from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError
from whitevec.index import Retriever
from whitevec.index.encodings.spec import parse_encoding
from whitevec.index.faiss import store as faiss_store
from whitevec.index.faiss.filtered import (
    DECODED,
    FAISS_SEARCH,
    STORAGE_SCAN,
    decoded_vectors,
    filtered_path,
    filtered_setting,
    work_per_query,
)
from whitevec.index.faiss.store import DEFAULT_PARAMS, FaissStore
from whitevec.index.filters.language import Compare, Junction, Member, Not, parse_filter
from whitevec.index.filters.rows import MetadataColumns, row_filter
from whitevec.index.milvus.filters import milvus_expression
from whitevec.index.search.fusion import fuse

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
    """Whether one document passes, written out plainly over the parsed tree (per document, plain Python, no
    arrays): three-valued, None for unknown (a field missing or of another kind), as SQL and Milvus."""
    fields = metadata or {}

    def kind(value: Any) -> str:
        return "bool" if isinstance(value, bool) else "str" if isinstance(value, str) else "num"

    def truth(node: Any) -> bool | None:
        if isinstance(node, Not):
            inner = truth(node.inner)
            return None if inner is None else not inner
        if isinstance(node, Junction):
            parts = [truth(part) for part in node.parts]
            if node.op == "and":
                return False if False in parts else None if None in parts else True
            return True if True in parts else None if None in parts else False
        if isinstance(node, Member):
            return truth(Junction("or", tuple(Compare(node.field, "==", v, 0) for v in node.values)))
        value = fields.get(node.field)
        if node.field not in fields or kind(value) != kind(node.value):
            return None
        return bool(OPS[node.op](value, node.value))

    return truth(parse_filter(expression).root) is True


OPS: dict[str, Callable[[Any, Any], Any]] = {"==": operator.eq, "!=": operator.ne, "<": operator.lt}
OPS |= {"<=": operator.le, ">": operator.gt, ">=": operator.ge}


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
@pytest.mark.parametrize("encoding", ["float32", "fp16", "sq8", "pq4x4", "opq4,pq4x4", "binary"])
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

            expected_fused = fuse(
                *_restricted(dense_rows, dense_scores, passing, depth),
                *_restricted(lexical_rows, lexical_scores, passing, depth),
                plan.fusion,
                k,
            )
            hybrid = retriever.search(queries, k, mode="hybrid", filter=expression)
            for hits, fused in zip(hybrid, expected_fused, strict=True):
                assert [hit.id for hit in hits] == [f"d{hit.row}" for hit in fused], expression


def _restricted(
    rows: np.ndarray, scores: np.ndarray, passing: np.ndarray, depth: int
) -> tuple[np.ndarray, np.ndarray]:
    """A ranker's full ranking cut to the passing rows, then to ``depth``: what a filtered ranker gives fusion."""
    out_rows = np.full((len(rows), depth), -1)
    out_scores = np.full((len(rows), depth), -np.inf, dtype=np.float32)
    for i, (row_list, score_list) in enumerate(zip(rows, scores, strict=True)):
        keep = (row_list >= 0) & passing[np.maximum(row_list, 0)]
        n = min(depth, int(keep.sum()))
        out_rows[i, :n], out_scores[i, :n] = row_list[keep][:n], score_list[keep][:n]
    return out_rows, out_scores


# Float codes take the id selector (then every list, or efSearch at the index size); 1-bit codes do not: a wider
# search, the last one reaching every row.
@pytest.mark.parametrize(("kind", "encoding"), [("hnsw", "float32"), ("ivf", "float32"), ("ivf", "binary")])
def test_filtered_graph_and_list_searches_are_never_short(
    tmp_path: Path, corpus: list[Document], kind: str, encoding: str
) -> None:
    with _build(tmp_path / "index", corpus, encoding, kind=kind) as retriever:
        for expression in ["year == 2000", 'lang == "de" and ok == true', "year >= 1991"]:
            passing = _passing(expression, corpus)
            for hits in retriever.search(sentences(4, seed=1), 10, mode="dense", filter=expression):
                assert len(hits) == min(10, int(passing.sum()))
                assert all(passing[int(hit.id[1:])] for hit in hits)


def _exact_top_k(store: FaissStore, x: np.ndarray, k: int, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Brute force over every code as faiss decodes it: the ids of the best ``k`` passing rows (fewer where
    fewer pass), and their scores as the store gives them."""
    import faiss

    ids = faiss.vector_to_array(store.index.id_map)
    vectors = decoded_vectors(store.index, np.arange(len(ids)))  # IVF: through the direct map
    l2 = store._faiss_metric() == faiss.METRIC_L2
    distances = ((x[:, None, :] - vectors[None]) ** 2).sum(axis=2)
    ranked = np.where(allowed[ids], distances if l2 else -(x @ vectors.T), np.inf)
    best = np.argsort(ranked, axis=1, kind="stable")[:, : min(k, int(allowed[ids].sum()))]
    scores = np.take_along_axis(distances if l2 else x @ vectors.T, best, axis=1)
    return ids[best], (1.0 - scores / 2.0 if store._l2_for_cosine else scores)


# The exact paths, each forced where the cost model may choose it: HNSW's rows decoded or its storage scanned,
# IVF's rows read through the direct map; ids out of order (the id map's positions are not the ids).
@pytest.mark.parametrize(
    ("kind", "encoding", "metric", "path"),
    [
        ("hnsw", "float32", "l2", DECODED),
        ("hnsw", "float32", "ip", STORAGE_SCAN),
        ("hnsw", "sq8", "cosine", STORAGE_SCAN),
        ("ivf", "float32", "cosine", DECODED),
        ("ivf", "sq8", "l2", DECODED),
    ],
)
def test_the_exact_paths_give_the_brute_force_top_k_under_random_filters(
    corpus: list[Document], kind: str, encoding: str, metric: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[str] = []
    for name, label in (("storage_scan", STORAGE_SCAN), ("decoded_search", DECODED)):
        real = getattr(faiss_store, name)
        monkeypatch.setattr(faiss_store, name, lambda *a, real=real, label=label: taken.append(label) or real(*a))
    monkeypatch.setattr(faiss_store, "filtered_path", lambda *args: path)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((len(corpus), 16)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    structure = {"nlist": 8, "nprobe": 1} if kind == "ivf" else {"M": 8, "efSearch": 8}
    store = FaissStore(16, metric, kind, {"encoding": encoding, **structure})
    order = rng.permutation(len(corpus))
    store.add(order[::-1].astype(np.int64), x[order[::-1]])  # id i is corpus row i, added in another order
    queries = rng.standard_normal((3, 16)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    tested = 0
    while tested < 12:
        allowed = _passing(_random_filter(rng), corpus)
        if not allowed.any():
            continue
        tested += 1
        scores, ids = store.search(queries, 10, allowed)
        expected_ids, expected_scores = _exact_top_k(store, queries, 10, allowed)
        width = expected_ids.shape[1]
        assert (ids[:, width:] == -1).all()
        assert np.allclose(scores[:, :width], expected_scores, atol=1e-4)
        if encoding == "float32":  # no ties among exact random vectors: the same rows in the same order
            assert np.array_equal(ids[:, :width], expected_ids)
        else:  # SQ's codes tie: the passing rows at the same scores
            assert allowed[ids[:, :width]].all()
    assert set(taken) == {path}


def test_an_ivf_index_saves_as_before_its_direct_map(tmp_path: Path) -> None:
    """The direct map the IVF's rows are read through is dropped before a save (the file is the one a store
    never searched with a filter writes) and before a delete (which faiss refuses with one)."""
    x = np.random.default_rng(0).standard_normal((400, 8)).astype(np.float32)
    store = FaissStore(8, "l2", "ivf", {"nlist": 4})
    store.add(np.arange(400), x)
    (tmp_path / "before").mkdir()
    store.save(tmp_path / "before")
    allowed = np.arange(400) == 7
    assert filtered_path("ivf", store.encoding, 8, store.params(), 400, 1, 1) == DECODED
    assert store.search(x[7:8], 3, allowed)[1][0].tolist() == [7, -1, -1]
    (tmp_path / "after").mkdir()
    store.save(tmp_path / "after")
    assert (tmp_path / "after" / "index.faiss").read_bytes() == (tmp_path / "before" / "index.faiss").read_bytes()
    store.search(x[7:8], 3, allowed)  # the map made again
    store.delete(np.array([5]))  # faiss's IVF then keeps ids 0-4, 6-399 inside: no direct map can be made
    assert store.count == 399
    for _ in range(2):  # faiss's own search each time, never a half-made map
        assert store.search(x[7:8], 3, allowed)[1].shape == (1, 3)


def test_a_graph_search_few_rows_pass_is_exact(
    tmp_path: Path, corpus: list[Document], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the passing rows' decoded codes are less work than the graph's walk (few pass), an HNSW search
    compares them alone, never the graph with a selector (which walks most of itself, then goes wide: the cost
    is the benchmark's to show): the hits are the exact top k among them."""
    from whitevec.index.faiss.store import FaissStore

    def no_selector(*args: object, **kwargs: object) -> None:
        raise AssertionError("the graph was searched with a selector")

    monkeypatch.setattr(FaissStore, "_selector_params", no_selector)

    expression = 'year == 2000 and lang == "de"'
    passing = _passing(expression, corpus)
    queries = sentences(6, seed=3)
    with (
        _build(tmp_path / "hnsw", corpus, "float32", kind="hnsw") as graph,
        _build(tmp_path / "flat", corpus, "float32") as flat,
    ):
        float32, params = parse_encoding("float32"), graph.store.params()
        path = filtered_path("hnsw", float32, 16, params, len(corpus), int(passing.sum()), len(queries))
        assert path in (DECODED, STORAGE_SCAN)
        assert passing.sum() >= 2
        for got, truth in zip(
            graph.search(queries, 3, mode="dense", filter=expression),
            flat.search(queries, len(corpus), mode="dense"),
            strict=True,
        ):
            exact = [hit.id for hit in truth if passing[int(hit.id[1:])]][:3]
            assert [hit.id for hit in got] == exact


# The cost model's choice either way, forced: each path must be exact wherever it is chosen.
@pytest.mark.parametrize("decoded", [True, False], ids=["passing-rows-decoded", "faiss-search"])
@pytest.mark.parametrize("encoding", ["float32", "fp16", "sq8", "sq4", "pq4x4", "opq4,pq4x4"])
def test_a_flat_search_is_exact_at_every_share_on_either_path(
    tmp_path: Path, corpus: list[Document], encoding: str, decoded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(faiss_store, "filtered_path", lambda *args: DECODED if decoded else FAISS_SEARCH)
    docs = [Document(d.id, d.text, {"bucket": i % 200}) for i, d in enumerate(corpus)]
    queries = sentences(4, seed=8)
    with _build(tmp_path / "index", docs, encoding) as retriever:
        vectors = retriever.embed(queries)
        all_scores, all_rows = retriever.store.search(vectors, retriever.count)
        brute = vectors @ retriever.store.index.index.reconstruct_n(0, retriever.count).T
        for buckets in (200, 100, 20, 4, 1):  # 100%, 50%, 10%, 2%, 0.5% (4 documents) pass
            expression = f"bucket < {buckets}"
            passing = np.arange(len(docs)) % 200 < buckets
            for j, hits in enumerate(retriever.search(queries, 10, mode="dense", filter=expression)):
                keep = passing[all_rows[j]]
                assert len(hits) == min(10, int(passing.sum())), expression
                assert all(passing[int(hit.id[1:])] for hit in hits), expression
                expected = np.sort(all_scores[j][keep][:10])
                assert np.allclose(np.sort([hit.score for hit in hits]), expected, atol=1e-5), expression
                score_of = dict(zip(all_rows[j].tolist(), all_scores[j].tolist(), strict=True))
                assert all(np.isclose(hit.score, score_of[int(hit.id[1:])], atol=1e-5) for hit in hits)
            scores, rows = retriever.store.search(vectors, 60, allowed=passing)  # deeper: the order within k
            assert all(
                (np.diff(row_scores[row >= 0]) <= 1e-6).all() for row_scores, row in zip(scores, rows, strict=True)
            )
            if encoding == "float32":  # exactly the brute-force ranking of the passing rows
                best = np.argsort(-np.where(passing, brute, -np.inf), axis=1, kind="stable")[:, :60]
                assert np.array_equal(np.where(rows >= 0, rows, best), best), expression


def test_each_share_takes_the_path_of_least_work() -> None:
    """The choices the filters benchmark measured on 100,000 x 384 (docs/results/filters.md)."""

    def path(kind: str, encoding: str, share: float, queries: int = 1) -> str:
        count = 100_000
        params = {**DEFAULT_PARAMS[kind], "nlist": 512} if kind == "ivf" else DEFAULT_PARAMS[kind]
        return filtered_path(kind, parse_encoding(encoding), 384, params, count, int(share * count), queries)

    # Decoding 10,000 codes cost sq8 2.3x and pq48 4.5x an unfiltered search: the selector's scan, the wider
    # search; few passing, the passing rows alone.
    assert path("flat", "sq8", 0.1) == path("flat", "pq48", 0.1) == path("flat", "float32", 0.1) == FAISS_SEARCH
    assert path("flat", "sq8", 0.001) == path("flat", "pq48", 0.02) == path("flat", "float32", 0.001) == DECODED
    assert path("flat", "float32", 0.02) == FAISS_SEARCH and path("flat", "float32", 0.02, queries=64) == DECODED
    # HNSW: the graph's walk where many pass, its storage scanned from about 8% down to 3%, the rows decoded below.
    assert path("hnsw", "float32", 0.5) == path("hnsw", "float32", 0.1) == FAISS_SEARCH
    assert path("hnsw", "float32", 0.05) == STORAGE_SCAN
    assert path("hnsw", "float32", 0.01) == path("hnsw", "float32", 0.001) == DECODED
    # IVF: the lists probed with a selector where many pass; at 1% (every list probed, 1.06 ms a query) the
    # passing rows read through the direct map (0.22 ms).
    assert path("ivf", "float32", 0.5) == path("ivf", "float32", 0.1) == FAISS_SEARCH
    assert path("ivf", "float32", 0.01) == path("ivf", "float32", 0.001) == DECODED
    # Codes only faiss's search scores (re-ranked, rescored, RaBitQ, 1-bit) take it at every share.
    assert path("hnsw", "sq8+refine", 0.001) == path("ivf", "binary", 0.001) == FAISS_SEARCH


def _recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=True)]))


@pytest.mark.parametrize(
    ("kind", "params"), [("ivf", {"nlist": 64, "nprobe": 4}), ("hnsw", {"M": 8, "efSearch": 16})]
)
def test_a_graph_or_list_search_at_a_tenth_passing_keeps_its_unfiltered_recall(
    kind: str, params: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a selector passing a tenth of the rows, efSearch and nprobe scale by ten: the filtered recall@10
    stays near the unfiltered one (0.998 IVF, 0.968 HNSW against 0.972 and 0.974; unscaled 0.772 and 0.740). One
    query a search, as a service asks: a batch widens as a whole where one query is short."""
    monkeypatch.setattr(
        faiss_store, "filtered_path", lambda *args: FAISS_SEARCH
    )  # the selector's path, not the rows'
    filtered, unfiltered = _recalls(FaissStore(32, "l2", kind, params), clusters=40, spread=1.0, share=0.1)
    assert filtered >= unfiltered - 0.05, (filtered, unfiltered)


def _recalls(store: FaissStore, *, clusters: int, spread: float, share: float) -> tuple[float, float]:
    """Recall@10 of ``store`` filled with 4,000 clustered rows, with a filter passing ``share`` of them at random
    (one query a search, as a service asks: a batch widens as a whole where one query is short) and without."""
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((clusters, 32)).astype(np.float32)
    x = centres[rng.integers(0, clusters, 4000)] + spread * rng.standard_normal((4000, 32)).astype(np.float32)
    queries = x[rng.choice(4000, 50, replace=False)] + 0.3 * rng.standard_normal((50, 32)).astype(np.float32)
    allowed = rng.random(4000) < share
    store.add(np.arange(4000), x)
    distances = ((queries[:, None, :] - x[None]) ** 2).sum(axis=2)
    unfiltered = _recall(store.search(queries, 10)[1], np.argsort(distances, axis=1)[:, :10])
    truth = np.argsort(np.where(allowed, distances, np.inf), axis=1)[:, :10]
    filtered = _recall(np.concatenate([store.search(q[None], 10, allowed)[1] for q in queries]), truth)
    return filtered, unfiltered


def test_an_ivf_search_a_quarter_passes_probes_as_deep_as_their_top_k_lie(monkeypatch: pytest.MonkeyPatch) -> None:
    """The passing rows' top 10 lie about 1 / share deeper in the whole ranking, and reaching that deep takes
    more than 1 / share the lists: nprobe / share ** 1.5 keeps recall@10 within 0.01 of the unfiltered one on
    400 small clusters (0.982 and 0.982; nprobe / share, 16 lists: 0.896)."""
    monkeypatch.setattr(faiss_store, "filtered_path", lambda *args: FAISS_SEARCH)
    store = FaissStore(32, "l2", "ivf", {"nlist": 64, "nprobe": 4})
    filtered, unfiltered = _recalls(store, clusters=400, spread=0.5, share=0.25)
    assert filtered >= unfiltered - 0.01, (filtered, unfiltered)


@pytest.mark.parametrize(
    ("kind", "params"), [("ivf", {"nlist": 16, "nprobe": 1}), ("hnsw", {"M": 8, "efSearch": 16})]
)
def test_a_filtered_search_is_priced_at_the_setting_it_searches_with(
    kind: str, params: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What decides faiss's thread pool is the work of the search faiss is given: a filtered one's efSearch or
    nprobe scaled by the share passing (1 in 20 here: HNSW's efSearch 20x, IVF every list), not the index's
    own, which priced it at a tenth of its work or less."""
    monkeypatch.setattr(faiss_store, "filtered_path", lambda *args: FAISS_SEARCH)  # the selector's path
    x = np.random.default_rng(0).standard_normal((2000, 32)).astype(np.float32)
    store = FaissStore(32, "l2", kind, params)
    store.add(np.arange(2000), x)
    allowed = np.arange(2000) % 20 == 0
    setting = filtered_setting(kind, store.params(), 2000, int(allowed.sum()))
    assert setting == (16 if kind == "ivf" else 320)
    unfiltered, filtered = store._work_per_query(), work_per_query(kind, store.params(), 2000, 32, setting)
    assert filtered >= 10 * unfiltered
    monkeypatch.setattr(faiss_store, "POOL_WORK", (unfiltered + filtered) // 2)  # only the filtered one is big
    one_thread = _one_thread_searches(monkeypatch)
    store.search(x[:1], 5)
    assert one_thread == ["one thread"]
    store.search(x[:1], 5, allowed)
    assert one_thread == ["one thread"], "the filtered search was priced at the unscaled setting"


def test_a_widened_search_reaching_every_list_is_priced_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """1-bit IVF takes no selector: where one row passes, the widened search probes every list at once, and is
    priced so (the index's own nprobe priced it at a fifteenth)."""
    x = np.random.default_rng(0).standard_normal((2000, 64)).astype(np.float32)
    store = FaissStore(64, "cosine", "ivf", {"nlist": 16, "nprobe": 1, "encoding": "binary"})
    store.add(np.arange(2000), x)
    unfiltered, widest = store._work_per_query(), store._work_per_query(16)
    assert widest >= 10 * unfiltered
    monkeypatch.setattr(faiss_store, "POOL_WORK", (unfiltered + widest) // 2)
    one_thread = _one_thread_searches(monkeypatch)
    allowed = np.arange(2000) == 7
    _, ids = store.search(x[7:8], 5, allowed)
    assert ids[0, 0] == 7 and (ids[0, 1:] == -1).all()
    assert one_thread == [], "the search of every list was priced at the index's own nprobe"


def _one_thread_searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that gets an item for each faiss search run on one thread (priced as small) from now on."""
    one_thread: list[str] = []
    real = faiss_store.one_faiss_thread

    @contextlib.contextmanager
    def counted() -> Iterator[None]:
        one_thread.append("one thread")
        with real():
            yield

    monkeypatch.setattr(faiss_store, "one_faiss_thread", counted)
    return one_thread


def test_the_passing_rows_decoded_follow_adds_and_deletes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows' ids the decoded path reads once per index state are read again after a delete (the rows move
    up) and an add (a row more): the hits are the brute-force top k of the live passing rows each time."""
    monkeypatch.setattr(faiss_store, "filtered_path", lambda *args: DECODED)
    rng = np.random.default_rng(3)
    vectors = {i: v for i, v in enumerate(rng.standard_normal((300, 16)).astype(np.float32))}
    store = FaissStore(16, "l2", "flat", {"encoding": "float32"})
    store.add(np.arange(300), np.stack(list(vectors.values())))
    query, allowed = rng.standard_normal((1, 16)).astype(np.float32), np.zeros(1000, bool)
    allowed[::3] = True

    def brute_force() -> list[int]:
        live = [i for i in vectors if allowed[i]]
        return sorted(live, key=lambda i: float(((vectors[i] - query[0]) ** 2).sum()))[:5]

    for step in range(3):
        assert store.search(query, 5, allowed)[1][0].tolist() == brute_force(), step
        if step == 0:
            gone = brute_force()[:2]
            store.delete(np.array(gone))
            for i in gone:
                del vectors[i]
        elif step == 1:
            vectors[999] = query[0] + 0.01  # the nearest of all, passing
            store.add(np.array([999]), vectors[999][None])


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


def test_an_expression_is_parsed_once_and_a_fault_every_time() -> None:
    """parse_filter keeps the trees of expressions it parsed (a server's repeated filters skip the tokenizer);
    a fault is raised again each time, never kept as an answer."""
    text = 'year >= 2001 and lang in ["en", "fr"]'
    assert parse_filter(text) is parse_filter(text)
    for _ in range(2):
        with pytest.raises(BadInputError, match=r"expected '\)'"):
            parse_filter("(year > 1")


def test_filters_translate_to_milvus_expressions() -> None:
    text = 'year >= 2000 and (lang in ["en", "fr"] or not ok == false) and score < -0.5'
    assert milvus_expression(parse_filter(text)) == (
        '(metadata["year"] >= 2000) and (((metadata["lang"] == "en") or (metadata["lang"] == "fr")) or '
        '(not (metadata["ok"] == false))) and (metadata["score"] < -0.5)'
    )


def test_keywords_are_case_insensitive_and_strings_take_escapes() -> None:
    columns = MetadataColumns({0: {"name": 'say "hi"', "ok": True}, 1: {"name": "x", "ok": False}}, 2)
    assert row_filter(parse_filter("name == 'say \"hi\"' AND ok == True"), columns).mask.tolist() == [True, False]
    assert row_filter(parse_filter(r'NOT name == "say \"hi\""'), columns).mask.tolist() == [False, True]


def test_a_strings_escapes_are_jsons_and_an_unknown_one_is_one_line() -> None:
    """``\\n`` in a filter's string stood for ``n`` (``s == "a\\nb"`` passed "anb", not the value with a line
    break, which Milvus's own filters read it as), and ``\\q`` for ``q``."""
    values = ["a\nb", "anb", "tab\there", "é", "back\\slash", "it's"]
    columns = MetadataColumns({row: {"s": value} for row, value in enumerate(values)}, len(values))
    for expression, passing in [
        (r's == "a\nb"', "a\nb"),
        (r"s == 'tab\there'", "tab\there"),
        (r's == "\u00e9"', "é"),
        (r's == "back\\slash"', "back\\slash"),
        (r"s == 'it\'s'", "it's"),
    ]:
        mask = row_filter(parse_filter(expression), columns).mask
        assert [values[row] for row in np.flatnonzero(mask)] == [passing], expression
    with pytest.raises(BadInputError, match=r"column 9: unknown escape '\\\\q' in a string"):
        parse_filter(r's == "C:\q"')


def test_filters_on_a_milvus_index_pass_the_same_documents(tmp_path: Path, corpus: list[Document]) -> None:
    pytest.importorskip("milvus_lite", reason="the Milvus tests need milvus-lite (local file URIs)")
    docs = corpus[:300]
    queries = sentences(3, seed=17)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on_faiss = Retriever.build(docs, tmp_path / "faiss", encoder=HashEncoder(), transform="none")
        on_milvus = Retriever.build(
            docs, tmp_path / "milvus", encoder=HashEncoder(), transform="none", backend="milvus"
        )
    with on_faiss, on_milvus:
        for expression in ['lang == "fr" and year < 2000', "not ok == true", "score > 1.5 or year == 2010"]:
            passing = _passing(expression, docs)
            expected = on_faiss.search(queries, 10, filter=expression)
            found = on_milvus.search(queries, 10, filter=expression)
            for a, b in zip(expected, found, strict=True):
                assert len(b) == min(10, int(passing.sum())) and all(passing[int(hit.id[1:])] for hit in b)
                assert [hit.id for hit in a] == [hit.id for hit in b], expression


def test_the_milvus_translation_selects_what_the_filter_passes(tmp_path: Path, corpus: list[Document]) -> None:
    """Each random filter's Milvus expression, run by Milvus Lite over the metadata as a JSON field, selects
    exactly the rows the filter's own evaluation passes."""
    pytest.importorskip("milvus_lite", reason="the Milvus tests need milvus-lite (local file URIs)")
    from pymilvus import DataType, MilvusClient

    docs = corpus[:300]
    client = MilvusClient(str(tmp_path / "translation.db"))
    try:
        schema = client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=2)
        schema.add_field("metadata", DataType.JSON, nullable=True)
        index = client.prepare_index_params()
        index.add_index("vector", index_type="FLAT", metric_type="L2")
        client.create_collection("filters", schema=schema, index_params=index)
        rows = [{"id": i, "vector": [0.0, 1.0], "metadata": d.metadata} for i, d in enumerate(docs)]
        client.insert("filters", rows)
        client.load_collection("filters")
        columns = MetadataColumns({i: d.metadata for i, d in enumerate(docs)}, len(docs))
        rng = np.random.default_rng(23)
        for _ in range(40):
            expression = parse_filter(_random_filter(rng))
            selected = client.query(
                "filters", filter=milvus_expression(expression), output_fields=["id"], limit=16384
            )
            expected = np.flatnonzero(row_filter(expression, columns).mask).tolist()
            assert sorted(row["id"] for row in selected) == expected, milvus_expression(expression)
    finally:
        client.close()


def test_an_add_brings_its_metadata_into_filters(tmp_path: Path, corpus: list[Document]) -> None:
    with _build(tmp_path / "index", corpus[:100], "float32") as retriever:
        first = retriever.row_filter("year >= 2000")
        assert retriever.row_filter("year >= 2000").mask is first.mask  # kept for the same filter
        with pytest.raises(BadInputError, match="'colour'"):
            retriever.search(["x"], 3, filter='colour == "red"')
        retriever.add([Document("new", sentences(1, seed=404)[0], {"colour": "red", "year": 2020})])
        (hits,) = retriever.search(["x"], 3, filter='colour == "red"')
        assert [hit.id for hit in hits] == ["new"]
        assert retriever.row_filter("year >= 2000").passing == first.passing + 1


def test_documents_are_the_live_ones_with_the_ids_given_that_pass_the_filter(
    tmp_path: Path, corpus: list[Document]
) -> None:
    docs = corpus[:80]
    index = _build(tmp_path / "idx", docs, "float32")
    index.delete(["d3", "d7"])
    live = [doc for doc in docs if doc.id not in ("d3", "d7")]
    expression = 'year >= 2005 or lang == "en"'
    assert [doc.id for doc in index.documents()] == [doc.id for doc in live]
    passing = index.documents(filter=expression)
    assert [doc.id for doc in passing] == [doc.id for doc in live if _brute_force(expression, doc.metadata)]
    assert passing[0] == next(doc for doc in live if doc.id == passing[0].id)  # text and metadata whole
    asked = ["d9", "d3", "no-such-id", "d1", *[doc.id for doc in passing[:3]]]
    assert [doc.id for doc in index.documents(asked)] == [i for i in asked if i in {d.id for d in live}]
    assert [doc.id for doc in index.documents(asked, filter=expression)] == [
        i for i in asked if i in {d.id for d in passing}
    ]
    with pytest.raises(BadInputError, match="no document has the metadata field 'nope'"):
        index.documents(filter="nope == 1")
