"""eval-retrieval --mode dense,lexical,hybrid --fusion ...: one row per mode x fusion beside the encodings (the
lexical row once, without a transform), the queries with no term counted, bad choices refused before the model
loads, and the dense output unchanged without the options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import sentences, tiny_bert
from tests.test_cli import run_cli as _run
from whitevec.datasets.retrieval import Document
from whitevec.evaluation.modes import plan_modes
from whitevec.evaluation.retrieval import score_rankings
from whitevec.index.lexical.analyzers import make_analyzer
from whitevec.index.lexical.bm25 import LexicalIndex

STOP_WORDS_ONLY = "the of and"
Collection = tuple[Path, Path, list[str], list[str]]  # the model folder, the BEIR folder, documents, queries


def _write_beir(folder: Path, docs: list[str], queries: list[str], qrels: dict[str, dict[str, int]]) -> Path:
    """A BEIR-style folder: documents ``d{i}``, queries ``q{i}``, graded judgements ``qrels``."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(docs))
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n" for i, q in enumerate(queries))
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{g}\n" for q, row in qrels.items() for d, g in row.items())
    )
    return folder


def _collection(folder: Path) -> tuple[Path, list[str], list[str]]:
    docs = sentences(30, seed=31)
    queries = [docs[i][:20] for i in range(5)] + [STOP_WORDS_ONLY]
    return _write_beir(folder, docs, queries, {f"q{i}": {f"d{i}": 2} for i in range(len(queries))}), docs, queries


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Collection:
    root = tmp_path_factory.mktemp("eval-modes")
    return (tiny_bert(root / "bert"), *_collection(root / "beir"))


def _eval(
    args: list[str], collection: Collection, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, dict[str, Any]]:
    """eval-retrieval on the collection with ``args``: its exit code, stderr and JSON report ({} on failure)."""
    bert, folder, _, _ = collection
    out = tmp_path / "report.json"
    base = ["eval-retrieval", "--model", str(bert), "--dataset", str(folder), "--latency-queries", "0"]
    code, _, err = _run([*base, *args, "--json", str(out), "-q"], capsys)
    return code, err, json.loads(out.read_text()) if code == 0 else {}


def test_a_row_per_mode_and_fusion_beside_the_transforms(
    collection: Collection, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--transform", "none,whitening-8", "--mode", "dense,lexical,hybrid", "--fusion", "rrf:60,convex:0.5"]
    code, err, report = _eval(args, collection, tmp_path, capsys)
    assert code == 0, err
    rows = [(s["mode"], s["transform"], s["fusion"]) for s in report["scores"]]
    assert rows == [
        ("lexical", "bm25 (english)", None),  # once: the lexical ranking needs no encoder or transform
        ("dense", "none", None),
        ("hybrid", "none + bm25 rrf:60", "rrf:60"),
        ("hybrid", "none + bm25 convex:0.5", "convex:0.5"),
        ("dense", "whitening-8", None),
        ("hybrid", "whitening-8 + bm25 rrf:60", "rrf:60"),
        ("hybrid", "whitening-8 + bm25 convex:0.5", "convex:0.5"),
    ]
    # The lexical row is bm25s's ranking with the english analyzer, scored as any other.
    _, _, docs, queries = collection
    lexical = LexicalIndex.build(docs, make_analyzer("english"))
    found, _ = lexical.search(queries, len(docs))
    rankings = {f"q{i}": [f"d{r}" for r in row if r >= 0] for i, row in enumerate(found.tolist())}
    qrels = {f"q{i}": {f"d{i}": 2} for i in range(len(queries))}
    expected = score_rankings(rankings, qrels, ks=(10, 100))
    row = report["scores"][0]
    assert row["ndcg_10"] == pytest.approx(expected.ndcg_10) and row["map"] == pytest.approx(expected.map)
    # The stop-words-only query: no term; the lexical row ranks nothing for it, the hybrid rows the dense ranking.
    assert row["no_term_queries"] == 1 and row["unknown_queries"] == 1 and row["encoding"] == "-"
    hybrid, dense = report["scores"][2], report["scores"][1]
    assert hybrid["no_term_queries"] == 1 and hybrid["unknown_queries"] == 0
    assert hybrid["code_bytes"] == dense["code_bytes"] > 0 and row["code_bytes"] == 0  # the vectors it searches
    assert row["index_bytes"] > 0 and row["dim"] == 0  # the BM25 part's own bytes; no vectors
    assert any("1 of 6 queries have no term left after analysis (analyzer english)" in n for n in report["notes"])
    assert "no term left after analysis" in err


def test_without_the_options_the_rows_are_the_dense_ones(
    collection: Collection, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err, report = _eval(["--transform", "none"], collection, tmp_path, capsys)
    assert code == 0, err
    assert [(s["mode"], s["transform"], s["no_term_queries"]) for s in report["scores"]] == [("dense", "none", 0)]
    assert not any("no term" in note for note in report["notes"])


def test_hybrid_alone_uses_the_default_fusion_and_the_analyzer_given(
    collection: Collection, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--transform", "none", "--mode", "hybrid", "--analyzer", "plain"]
    code, err, report = _eval(args, collection, tmp_path, capsys)
    assert code == 0, err
    assert [(s["mode"], s["fusion"]) for s in report["scores"]] == [("hybrid", "convex:0.5")]
    # plain keeps stop words: the query has terms.
    assert report["scores"][0]["no_term_queries"] == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--mode", "sparse"], "unknown search mode 'sparse'"),
        (["--mode", "dense,lexical", "--fusion", "rrf"], "--fusion applies to hybrid rows"),
        (["--mode", "hybrid", "--fusion", "convex:1.5"], "ALPHA must be a number from 0 to 1"),
        (["--mode", "lexical", "--analyzer", "klingon"], "unknown analyzer 'klingon'"),
        (["--analyzer", "plain"], "--analyzer applies to lexical and hybrid rows"),
        (["--mode", "hybrid", "--backend", "milvus"], "rows run on --backend faiss"),
    ],
)
def test_bad_choices_are_one_line_before_the_model_loads(
    args: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _, _ = _collection(tmp_path / "beir")
    # A model that does not exist: the choice is refused before anything looks for it.
    base = ["eval-retrieval", "--model", str(tmp_path / "no-model"), "--dataset", str(folder)]
    code, _, err = _run([*base, *args], capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_plan_modes_reads_each_choice_once() -> None:
    plan = plan_modes(["hybrid", "Dense", "hybrid"], ["rrf", "rrf:60", "convex"])
    assert plan.dense and not plan.lexical and plan.analyzer == "english"
    assert [row.fusion.spec for row in plan.hybrid if row.fusion] == ["rrf:60", "convex:0.5"]
    assert plan_modes().index_rows()[0].mode == "dense" and plan_modes().analyzer is None


def test_a_hybrid_row_scores_the_top_10_a_user_asking_for_10_gets(
    collection: Collection, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hybrid search fuses each ranker's top candidates x k, each scaled over its own list, so its top 10 at
    k = 10 is not the top 10 of a search at the MAP depth: the row's nDCG@10 is that of a k = 10 search."""
    from whitevec.encoders import Encoder
    from whitevec.evaluation.retrieval import ndcg_at_k
    from whitevec.index import Retriever

    bert = collection[0]
    docs = sentences(400, seed=8)
    queries = [" ".join(docs[i].split()[:3]) for i in range(0, 60, 3)]
    qrels = {f"q{i}": {f"d{3 * i + j}": 2 - (j > 0) for j in range(4)} for i in range(len(queries))}
    folder = _write_beir(tmp_path / "beir", docs, queries, qrels)
    code, err, report = _eval(
        ["--dataset", str(folder), "--transform", "none", "--mode", "hybrid", "--fusion", "convex:0.5"],
        (bert, folder, docs, queries),
        tmp_path,
        capsys,
    )
    assert code == 0, err
    (row,) = [r for r in report["scores"] if r["mode"] == "hybrid"]
    encoder = Encoder(str(bert), pooling="last-avg")
    with Retriever.build(
        [Document(f"d{i}", t) for i, t in enumerate(docs)], tmp_path / "idx", encoder=encoder, lexical="bm25"
    ) as index:

        def ndcg(k: int) -> float:
            hits = index.search(queries, k, mode="hybrid", fusion="convex:0.5")
            return float(np.mean([ndcg_at_k([h.id for h in hs], qrels[f"q{i}"], 10) for i, hs in enumerate(hits)]))

        at_10, deep = ndcg(10), ndcg(len(docs))
    assert at_10 != pytest.approx(deep)  # the setting tells the two apart
    assert row["ndcg_10"] == pytest.approx(at_10)
