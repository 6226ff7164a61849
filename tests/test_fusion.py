"""Hybrid search (issue 39): the fusion specs, convex and RRF fusion against a slow per-document oracle, the
search modes through a Retriever with a fake lexical part, the queries one ranker cannot search, and the CLI's
one-line refusals."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import HashEncoder
from tests.test_cli import run_cli
from tests.test_cli_usage import check_bad_input
from whitevec.cli.index import _hits_table
from whitevec.errors import BadInputError, CorruptFileError
from whitevec.index import Document, Retriever
from whitevec.index.search.fusion import (
    CANDIDATE_FACTOR,
    CONVEX_ALPHA,
    DEFAULT_FUSION,
    FUSION_FORMS,
    RRF_K,
    FusedHit,
    Fusion,
    Ranked,
    fuse,
    parse_fusion,
)
from whitevec.index.search.hits import (
    DENSE_ALONE_NOTE,
    LEXICAL_ALONE_NOTE,
    NEITHER_NOTE,
    NO_TERM_NOTE,
    UNKNOWN_QUERY_NOTE,
    QueryHits,
    SearchHit,
    SearchResults,
)
from whitevec.index.search.modes import MODES, plan_search, search_defaults


# --- the specs ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("rrf", Fusion("rrf", k=60)),
        ("rrf:1", Fusion("rrf", k=1)),
        ("RRF : 10 ", Fusion("rrf", k=10)),
        ("convex", Fusion("convex", alpha=0.5)),
        ("convex:0", Fusion("convex", alpha=0.0)),
        ("convex:1", Fusion("convex", alpha=1.0)),
        ("convex:0.25", Fusion("convex", alpha=0.25)),
    ],
)
def test_good_specs_parse_and_read_back(spec: str, expected: Fusion) -> None:
    fusion = parse_fusion(spec)
    assert fusion == expected and parse_fusion(fusion.spec) == fusion and parse_fusion(fusion) is fusion


@pytest.mark.parametrize(
    "spec",
    ["convex:1.5", "convex:-0.1", "convex:nan", "convex:x", "convex:", "rrf:0", "rrf:-1", "rrf:2.5", "foo", ""],
)
def test_bad_specs_are_one_line_naming_the_valid_forms(spec: str) -> None:
    with pytest.raises(BadInputError) as info:
        parse_fusion(spec)
    assert FUSION_FORMS in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "arguments", [{"method": "convex", "alpha": 1.5}, {"method": "rrf", "k": 0}, {"method": "sum"}]
)
def test_a_fusion_made_directly_is_checked_too(arguments: dict[str, Any]) -> None:
    with pytest.raises(BadInputError, match=re.escape(FUSION_FORMS)):
        Fusion(**arguments)


def test_the_default_fusion_is_convex_at_the_dense_weight_of_issue_39() -> None:
    assert Fusion("convex", alpha=0.5) == DEFAULT_FUSION and MODES == ("dense", "lexical", "hybrid")


def test_search_defaults_come_from_the_manifest() -> None:
    assert search_defaults({}) == ("dense", DEFAULT_FUSION)
    assert search_defaults({"lexical": {"method": "bm25"}}) == ("hybrid", DEFAULT_FUSION)
    recorded = {"lexical": {}, "search": {"mode": "lexical", "fusion": "rrf:5"}}
    assert search_defaults(recorded) == ("lexical", Fusion("rrf", k=5))
    with pytest.raises(CorruptFileError, match="search field"):
        search_defaults({"search": {"mode": "sparse", "fusion": "rrf"}})


# --- the fusion against a slow, obvious oracle --------------------------------------------------------------
def oracle(
    dense: Sequence[tuple[int, float]], lexical: Sequence[tuple[int, float]], fusion: Fusion, k: int, metric: str
) -> list[tuple[int, float]]:
    """Fusion written per document over the union of the two candidate lists (best first, (row, score))."""

    def scaled(ranking: Sequence[tuple[int, float]], sign: float) -> dict[int, float]:
        values = [sign * score for _, score in ranking]
        low, high = min(values, default=0.0), max(values, default=0.0)
        return {row: 1.0 if high == low else (sign * s - low) / (high - low) for row, s in ranking}

    d_rank = {row: rank for rank, (row, _) in enumerate(dense, start=1)}
    l_rank = {row: rank for rank, (row, _) in enumerate(lexical, start=1)}
    d_scaled, l_scaled = scaled(dense, -1.0 if metric == "l2" else 1.0), scaled(lexical, 1.0)
    fused = {}
    for row in set(d_rank) | set(l_rank):
        if fusion.method == "rrf":
            fused[row] = sum(1.0 / (fusion.k + ranks[row]) for ranks in (d_rank, l_rank) if row in ranks)
        else:
            fused[row] = fusion.alpha * d_scaled.get(row, 0.0) + (1.0 - fusion.alpha) * l_scaled.get(row, 0.0)
    never = 10**9
    order = sorted(fused, key=lambda r: (-fused[r], d_rank.get(r, never), l_rank.get(r, never), r))
    return [(row, fused[row]) for row in order[:k]]


def _padded(rankings: list[list[tuple[int, float]]], depth: int) -> tuple[np.ndarray, np.ndarray]:
    rows = np.full((len(rankings), depth), -1, dtype=np.int64)
    scores = np.full((len(rankings), depth), -np.inf, dtype=np.float32)
    for i, ranking in enumerate(rankings):
        for j, (row, score) in enumerate(ranking):
            rows[i, j], scores[i, j] = row, score
    return rows, scores


def _random_ranking(
    rng: np.random.Generator, depth: int, ties: bool, lower_first: bool
) -> list[tuple[int, float]]:
    """Up to ``depth`` distinct rows of 0..29, best first; integer scores when ``ties`` (many equal)."""
    size = int(rng.integers(0, depth + 1))
    rows = rng.choice(30, size=size, replace=False)
    scores = rng.integers(0, 3, size) if ties else rng.normal(size=size)
    values = np.asarray(scores, dtype=np.float32).tolist()
    ranked = sorted(zip(rows.tolist(), values, strict=True), key=lambda p: p[1])
    return ranked if lower_first else ranked[::-1]


@pytest.mark.parametrize("fusion", [Fusion("convex", alpha=0.6), Fusion("convex", alpha=0.0), Fusion("rrf", k=2)])
@pytest.mark.parametrize("metric", ["cosine", "l2"])
@pytest.mark.parametrize("ties", [False, True])
def test_fuse_matches_the_per_document_oracle(fusion: Fusion, metric: str, ties: bool) -> None:
    rng = np.random.default_rng(7)
    dense = [_random_ranking(rng, 8, ties, lower_first=metric == "l2") for _ in range(40)]
    lexical = [_random_ranking(rng, 6, ties, lower_first=False) for _ in range(40)]
    got = fuse(*_padded(dense, 8), *_padded(lexical, 6), fusion, 5, metric=metric)
    for query, d, lx in zip(got, dense, lexical, strict=True):
        expected = oracle(d, lx, fusion, 5, metric)
        assert [hit.row for hit in query] == [row for row, _ in expected]
        np.testing.assert_allclose([hit.score for hit in query], [s for _, s in expected], rtol=1e-12)


def test_convex_and_rrf_on_a_hand_computed_example() -> None:
    # dense: 3 (0.9), 1 (0.5), 2 (0.1) -> scaled 1, 0.5, 0; lexical: 2 (10), 4 (4) -> scaled 1, 0.
    dense = _padded([[(3, 0.9), (1, 0.5), (2, 0.1)]], 3)
    lexical = _padded([[(2, 10.0), (4, 4.0)]], 3)
    convex = fuse(*dense, *lexical, Fusion("convex", alpha=0.6), 4)[0]
    # 3: 0.6; 2: 0 + 0.4; 1: 0.3; 4: 0 (absent from dense, last of lexical)
    assert [(h.row, round(h.score, 6)) for h in convex] == [(3, 0.6), (2, 0.4), (1, 0.3), (4, 0.0)]
    assert convex[1] == FusedHit(2, pytest.approx(0.4), Ranked(3, pytest.approx(0.1)), Ranked(1, 10.0))
    assert convex[0].lexical is None and convex[3].dense is None
    rrf = fuse(*dense, *lexical, Fusion("rrf", k=1), 4)[0]
    # 2: 1/4 + 1/2; 3: 1/2; 1 and 4 tie at 1/3: the one the dense ranker found goes first
    assert [(h.row, round(h.score, 6)) for h in rrf] == [
        (2, 0.75),
        (3, 0.5),
        (1, round(1 / 3, 6)),
        (4, round(1 / 3, 6)),
    ]


def test_l2_distances_are_flipped_before_scaling() -> None:
    # The same ranking as cosine 0.9 / 0.5 / 0.1, as squared distances (lower is closer, best first).
    lexical = _padded([[(2, 10.0), (4, 4.0)]], 2)
    as_cosine = fuse(*_padded([[(3, 0.9), (1, 0.5), (2, 0.1)]], 3), *lexical, DEFAULT_FUSION, 4)
    as_l2 = fuse(*_padded([[(3, 0.1), (1, 0.5), (2, 0.9)]], 3), *lexical, DEFAULT_FUSION, 4, metric="l2")
    assert [h.row for h in as_l2[0]] == [h.row for h in as_cosine[0]] == [3, 2, 1, 4]
    assert [h.score for h in as_l2[0]] == pytest.approx([h.score for h in as_cosine[0]], abs=1e-7)
    assert as_l2[0][0].dense == Ranked(1, pytest.approx(0.1))  # the store's own score is what a hit shows


def test_ties_and_equal_scores() -> None:
    # Every dense score equal: each scales to 1 (each is the list's best), so the ranks decide.
    dense = _padded([[(5, 0.3), (6, 0.3)]], 2)
    lexical = _padded([[(6, 2.0), (7, 2.0)]], 2)
    hits = fuse(*dense, *lexical, Fusion("convex", alpha=0.5), 3)[0]
    assert [(h.row, h.score) for h in hits] == [(6, 1.0), (5, 0.5), (7, 0.5)]
    # Found by neither ranker's first place and tied on RRF: the dense rank, then the lexical rank, then the row.
    hits = fuse(*_padded([[(9, 1.0)]], 1), *_padded([[(8, 1.0)]], 1), Fusion("rrf", k=60), 2)[0]
    assert [h.row for h in hits] == [9, 8]


def test_one_empty_list_gives_the_other_ranking_alone() -> None:
    dense = _padded([[(4, 0.2), (2, 0.1)], []], 2)
    lexical = _padded([[], [(1, 3.0), (0, 1.0)]], 2)
    first, second = fuse(*dense, *lexical, DEFAULT_FUSION, 2)
    assert [h.row for h in first] == [4, 2] and [h.row for h in second] == [1, 0]
    assert all(h.lexical is None for h in first) and all(h.dense is None for h in second)


# --- through a Retriever ------------------------------------------------------------------------------------
STOP = {"the", "a", "of", "and"}
TEXTS = [
    "wing stall at high angle",
    "the engine of the car",
    "car engine manual 1234",
    "stall speed of a wing",
    "red car and blue car",
    "angle of attack and lift",
    "engine noise in the cabin",
    "lift and drag of a wing",
    "pressure on the tail",
    "flight test data",
    "landing gear load",
    "fuel flow rate",
]


class WordsEncoder(HashEncoder):
    """HashEncoder knowing only texts with a letter: digits, emoji and punctuation alone are unknown."""

    def known_token_mask(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([bool(re.search("[a-z]", text)) for text in texts])


class FakeLexical:
    """A lexical part scoring shared words (stop words left out); records the depths asked."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.docs = [self._terms(text) for text in texts]
        self.count = len(texts)
        self.depths: list[int] = []

    @staticmethod
    def _terms(text: str) -> set[str]:
        return {word for word in re.findall(r"\w+", text.lower()) if word not in STOP}

    def has_terms(self, queries: Sequence[str]) -> np.ndarray:
        return np.array([bool(self._terms(query)) for query in queries])

    def search(self, queries: Sequence[str], depth: int) -> tuple[np.ndarray, np.ndarray]:
        self.depths.append(depth)
        rows = np.full((len(queries), depth), -1, dtype=np.int64)
        scores = np.full((len(queries), depth), -np.inf, dtype=np.float32)
        for i, query in enumerate(queries):
            terms = self._terms(query)
            shared = [(len(terms & doc), row) for row, doc in enumerate(self.docs) if terms & doc]
            ranked = sorted(shared, key=lambda p: (-p[0], p[1]))[:depth]
            rows[i, : len(ranked)] = [row for _, row in ranked]
            scores[i, : len(ranked)] = [float(n) for n, _ in ranked]
        return rows, scores


@pytest.fixture(scope="module", params=["cosine", "l2"])
def hybrid(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Retriever]:
    docs = [Document(f"d{i}", text) for i, text in enumerate(TEXTS)]
    folder = tmp_path_factory.mktemp("hybrid") / "idx"
    retriever = Retriever.build(docs, folder, encoder=WordsEncoder(), metric=request.param)
    retriever.lexical = FakeLexical(TEXTS)
    yield retriever
    retriever.close()


def _ids(hits: Sequence[SearchHit]) -> list[str]:
    return [hit.id for hit in hits]


def test_a_hybrid_search_is_the_fusion_of_both_rankings(hybrid: Retriever) -> None:
    queries = ["wing stall", "car engine"]
    depth = 2 * 3
    dense_scores, dense_rows = hybrid.store.search(hybrid.embed(queries), depth)
    lexical_rows, lexical_scores = hybrid.lexical.search(queries, depth)
    for fusion in ("convex:0.3", "rrf:2"):
        results = hybrid.search(queries, k=2, mode="hybrid", fusion=fusion, candidates=3)
        for hits, d_rows, d_scores, l_rows, l_scores in zip(
            results, dense_rows, dense_scores, lexical_rows, lexical_scores, strict=True
        ):
            dense = [(int(r), float(s)) for r, s in zip(d_rows, d_scores, strict=True) if r >= 0]
            lexical = [(int(r), float(s)) for r, s in zip(l_rows, l_scores, strict=True) if r >= 0]
            expected = oracle(dense, lexical, parse_fusion(fusion), 2, hybrid.manifest["metric"])
            assert _ids(hits) == [f"d{row}" for row, _ in expected] and hits.note is None
            np.testing.assert_allclose([h.score for h in hits], [s for _, s in expected], rtol=1e-6)
            for hit in hits:
                row = int(hit.id[1:])
                assert hit.rankers is not None and set(hit.rankers) <= {"dense", "lexical"}
                if "lexical" in hit.rankers:
                    rank = hit.rankers["lexical"]["rank"]
                    assert lexical[int(rank) - 1] == (row, hit.rankers["lexical"]["score"])


def test_the_candidates_limit_is_what_each_ranker_is_asked(
    hybrid: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []
    search = hybrid.store.search
    monkeypatch.setattr(hybrid.store, "search", lambda x, k: (asked.append(k), search(x, k))[1])
    lexical = hybrid.lexical
    lexical.depths.clear()
    hybrid.search(["wing"], k=2, mode="hybrid", candidates=3)
    hybrid.search(["wing"], k=1, fusion="rrf")  # a fusion alone asks for hybrid, with the default factor
    hybrid.search(["wing"], k=2, candidates=4)  # so do candidates alone
    hybrid.search(["wing"], k=2, mode="hybrid")  # 2 x CANDIDATE_FACTOR is more than the 12 documents
    assert asked == lexical.depths == [6, CANDIDATE_FACTOR, 8, 12]


def test_lexical_mode_is_the_bm25_ranking_with_its_scores(hybrid: Retriever) -> None:
    hits = hybrid.search(["car engine", "wing"], k=3, mode="lexical")
    assert _ids(hits[0]) == ["d1", "d2", "d4"] and [h.score for h in hits[0]] == [2.0, 2.0, 1.0]
    assert hits[0][1].rankers == {"lexical": {"rank": 2, "score": 2.0}}
    assert _ids(hits[1]) == ["d0", "d3", "d7"] and hits.unknown_queries == []


def test_dense_mode_is_the_dense_search_of_before(hybrid: Retriever) -> None:
    dense = hybrid.search(["wing stall"], k=3, mode="dense")
    scores, rows = hybrid.store.search(hybrid.embed(["wing stall"]), 3)
    assert _ids(dense[0]) == [f"d{r}" for r in rows[0]] and [h.score for h in dense[0]] == scores[0].tolist()
    assert all(hit.rankers is None for hit in dense[0])
    assert _ids(hybrid.search(["wing stall"], k=3)[0]) == _ids(dense[0])  # no search field, no lexical field


def test_the_index_default_comes_from_its_manifest(hybrid: Retriever, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hybrid, "manifest", {**hybrid.manifest, "search": {"mode": "hybrid", "fusion": "rrf:1"}})
    assert (
        hybrid.search(["wing stall"], k=3)[0]
        == hybrid.search(["wing stall"], k=3, mode="hybrid", fusion="rrf:1")[0]
    )
    assert hybrid.search_plan().fusion == Fusion("rrf", k=1)
    monkeypatch.setattr(hybrid, "manifest", {**hybrid.manifest, "search": {"mode": "lexical", "fusion": "rrf:1"}})
    assert hybrid.search(["wing"], k=2)[0][0].rankers == {"lexical": {"rank": 1, "score": 1.0}}


def test_a_query_with_no_term_left(hybrid: Retriever) -> None:
    lexical = hybrid.search(["the of", "wing"], k=3, mode="lexical")
    assert lexical[0] == [] and lexical[0].note == NO_TERM_NOTE and lexical.unknown_queries == [0]
    fused = hybrid.search(["the of"], k=3, mode="hybrid")
    assert _ids(fused[0]) == _ids(hybrid.search(["the of"], k=3, mode="dense")[0])  # the dense ranking alone
    assert fused[0].note == DENSE_ALONE_NOTE and fused.unknown_queries == []
    assert all(set(hit.rankers or {}) == {"dense"} for hit in fused[0])


def test_a_query_with_no_token_the_model_knows(hybrid: Retriever) -> None:
    queries = ["1234", "🙂", "wing"]
    dense = hybrid.search(queries, k=2, mode="dense")
    assert dense[0] == dense[1] == [] and dense[0].note == UNKNOWN_QUERY_NOTE and dense.unknown_queries == [0, 1]
    fused = hybrid.search(queries, k=2, mode="hybrid")
    assert _ids(fused[0]) == ["d2"] and fused[0].note == LEXICAL_ALONE_NOTE  # the lexical ranking alone
    assert fused[1] == [] and fused[1].note == NEITHER_NOTE and fused.unknown_queries == [1]
    assert fused[2].note is None and len(fused[2]) == 2
    assert _ids(hybrid.search(queries, k=2, mode="lexical")[0]) == ["d2"]  # lexical mode: unaffected
    assert hybrid.search(["🙂"], k=2, mode="hybrid")[0].note == NEITHER_NOTE  # nothing to search densely at all


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"mode": "sparse"}, "valid: dense, lexical, hybrid"),
        ({"fusion": "convex:1.5"}, FUSION_FORMS),
        ({"candidates": 0}, "candidates must be an integer >= 1"),
        ({"mode": "dense", "fusion": "rrf"}, "hybrid search only"),
        ({"mode": "lexical", "candidates": 2}, "hybrid search only"),
    ],
)
def test_bad_search_arguments_are_refused(hybrid: Retriever, arguments: dict[str, Any], needle: str) -> None:
    with pytest.raises(BadInputError, match=re.escape(needle)):
        hybrid.search(["wing"], k=2, **arguments)


def test_lexical_and_hybrid_need_a_lexical_part(hybrid: Retriever, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hybrid, "lexical", None)
    for mode in ("lexical", "hybrid"):
        with pytest.raises(BadInputError, match="rebuild it with --lexical bm25"):
            hybrid.search(["wing"], k=2, mode=mode)
    with pytest.raises(BadInputError, match="--lexical bm25"):
        hybrid.search(["wing"], k=2, fusion="rrf")
    assert len(hybrid.search(["wing"], k=2)[0]) == 2


def test_plan_search_without_lexical_defaults() -> None:
    plan = plan_search(None, None, None, defaults=("hybrid", Fusion("rrf", k=3)), has_lexical=True)
    assert (plan.mode, plan.fusion, plan.candidates) == ("hybrid", Fusion("rrf", k=3), CANDIDATE_FACTOR)
    assert plan.depth(10, 50) == 50 and plan.depth(2, 50) == 20


# --- the CLI ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dense_index(hybrid: Retriever) -> Path:
    return hybrid.path


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (["--fusion", "convex:1.5"], FUSION_FORMS),
        (["--fusion", "rrf:0"], FUSION_FORMS),
        (["--mode", "sparse"], "valid: dense, lexical, hybrid"),
        (["--candidates", "0"], "candidates must be an integer >= 1"),
        (["--mode", "lexical"], "rebuild it with --lexical bm25"),
        (["--mode", "hybrid"], "rebuild it with --lexical bm25"),
        (["--mode", "dense", "--fusion", "rrf"], "hybrid search only"),
    ],
)
def test_the_cli_refuses_in_one_line_before_the_model_loads(
    dense_index: Path,
    options: list[str],
    needle: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The index's model is the test's HashEncoder, which nothing could load: an error from loading would show.
    monkeypatch.setattr(Retriever, "load", lambda *a, **kw: pytest.fail("the index was loaded"))
    code, out, err = run_cli(["search", str(dense_index), "wing", *options], capsys)
    check_bad_input(code, out, err, needle)


class _Borrowed:
    """A loaded Retriever lent to a workflow: leaving its ``with`` does not close it."""

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever

    def __enter__(self) -> Retriever:
        return self.retriever

    def __exit__(self, *exc: object) -> None:
        pass


def test_the_search_workflow_passes_the_mode_on(hybrid: Retriever, monkeypatch: pytest.MonkeyPatch) -> None:
    from whitevec.workflows import search_index

    # An index with a lexical part, as its manifest says and the loaded retriever has.
    monkeypatch.setattr("whitevec.index.read_manifest", lambda *a, **kw: {**hybrid.manifest, "lexical": {}})
    monkeypatch.setattr(Retriever, "load", lambda *a, **kw: _Borrowed(hybrid))
    for options in ({"mode": "lexical"}, {"fusion": "rrf:2", "candidates": 2}):
        found = search_index(hybrid.path, ["car engine"], k=3, **options)
        assert found == hybrid.search(["car engine"], k=3, **options)


def _results() -> SearchResults:
    both = SearchHit(
        "d1", 0.9, "a wing", None, {"dense": {"rank": 1, "score": 0.8}, "lexical": {"rank": 3, "score": 2.5}}
    )
    lexical_only = SearchHit("d2", 0.4, "a stall", None, {"lexical": {"rank": 1, "score": 7.0}})
    noted = QueryHits([lexical_only])
    noted.note = LEXICAL_ALONE_NOTE
    return SearchResults([QueryHits([both]), noted])


def test_the_table_shows_which_rankers_found_each_hit() -> None:
    table = _hits_table(Path("idx"), ["wing", "1234"], _results(), None)
    assert list(table.columns) == ["query", "rank", "id", "score", "dense", "lexical", "text"]
    assert table.rows == [["wing", 1, "d1", 0.9, 1, 3, "a wing"], ["1234", 1, "d2", 0.4, None, 1, "a stall"]]
    dense_only = SearchResults([QueryHits([SearchHit("d1", 0.9, "a wing")])])
    assert list(_hits_table(Path("idx"), ["wing"], dense_only, None).columns) == [
        "query",
        "rank",
        "id",
        "score",
        "text",
    ]


def test_the_json_carries_the_rankers_and_each_note_warns(
    dense_index: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def search_index(index_dir: Path, queries: list[str], **options: Any) -> SearchResults:
        seen.update(options)
        return _results()

    monkeypatch.setattr("whitevec.workflows.search_index", search_index)
    argv = [
        "search",
        str(dense_index),
        "wing",
        "1234",
        "--mode",
        "hybrid",
        "--fusion",
        "rrf:5",
        "--candidates",
        "4",
    ]
    code, out, err = run_cli([*argv, "--format", "json"], capsys)
    assert code == 0 and (seen["mode"], seen["fusion"], seen["candidates"]) == ("hybrid", "rrf:5", 4)
    payload = json.loads(out)
    assert payload[0]["hits"][0]["rankers"] == {
        "dense": {"rank": 1, "score": 0.8},
        "lexical": {"rank": 3, "score": 2.5},
    }
    assert payload[1]["note"] == LEXICAL_ALONE_NOTE and payload[1]["hits"][0]["id"] == "d2"
    assert err == f"whitevec: warning: query 2: {LEXICAL_ALONE_NOTE}\n"


def test_the_search_help_quotes_the_fusion_defaults() -> None:
    # The CLI writes them as literals (importing the index at start-up would cost every command): a change of
    # the constants must change the help too.
    from whitevec.cli.index import CandidatesOpt, FusionOpt

    help_text = " ".join(FusionOpt.__metadata__[0].help.split())
    assert f"convex alone: {CONVEX_ALPHA:g}" in help_text and f"rrf alone: {RRF_K}" in help_text
    assert f"else {DEFAULT_FUSION.spec}." in help_text
    candidates = " ".join(CandidatesOpt.__metadata__[0].help.split())
    assert f"(default {CANDIDATE_FACTOR})" in candidates


def test_every_page_and_help_names_the_default_fusion_that_ships() -> None:
    """A default quoted in the CLI's help or the HTTP contract is the one the code applies (one was left at a
    planning figure, convex:0.6, after the default moved to convex:0.5)."""
    root = Path(__file__).resolve().parents[1]
    quoted = []
    for page in ("docs/reference/cli.md", "docs/reference/http.md", "docs/reference/openapi.json"):
        text = (root / page).read_text()
        quoted += re.findall(r"(?:Default: (?:the index's own, else )?|e\.g\. )(convex:[0-9]+(?:\.[0-9]+)?)", text)
    assert quoted, "no default fusion quoted: the pattern above no longer matches the pages"
    assert set(quoted) == {DEFAULT_FUSION.spec}, quoted


def test_the_commands_default_analyzer_is_the_index_default() -> None:
    """The CLI and the index workflow name the analyzer default as a literal (importing whitevec.index at
    start-up would load scipy and sklearn before a bad option is refused): it must be the index's own."""
    import inspect

    from whitevec.cli.index import index_build_command
    from whitevec.cli.tune import tune_command
    from whitevec.index.lexical.analyzers import DEFAULT_ANALYZER
    from whitevec.workflows.index import build_index_file

    for command in (index_build_command, tune_command, build_index_file):
        assert inspect.signature(command).parameters["analyzer"].default == DEFAULT_ANALYZER, command.__name__
