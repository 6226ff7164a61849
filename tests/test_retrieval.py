"""Retrieval metrics against hand-computed values, dataset readers, and the evaluation runner."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.index_helpers import sentences, tiny_bert
from whitevec.datasets.retrieval import load_retrieval_dataset, read_beir, read_cranfield
from whitevec.encoders.transformer import Encoder
from whitevec.errors import BadInputError, DataNotFoundError
from whitevec.evaluation.retrieval import (
    average_precision,
    evaluate_retrieval,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
    score_rankings,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# One query, hand-made: relevant a (gain 3), c (gain 1), e (gain 2); b, d judged/unjudged non-relevant.
QRELS = {"a": 3, "c": 1, "e": 2, "b": 0}
RANKED = ["b", "a", "d", "c", "x", "y", "z", "u", "v", "w", "e"]


def test_recall_by_hand() -> None:
    assert recall_at_k(RANKED, QRELS, 1) == 0.0
    assert recall_at_k(RANKED, QRELS, 2) == pytest.approx(1 / 3)
    assert recall_at_k(RANKED, QRELS, 10) == pytest.approx(2 / 3)
    assert recall_at_k(RANKED, QRELS, 11) == pytest.approx(1.0)
    assert recall_at_k(RANKED, {"q": 0}, 10) == 0.0


def test_mrr_by_hand() -> None:
    assert mrr_at_k(RANKED, QRELS, 10) == pytest.approx(0.5)  # first relevant (a) at rank 2
    assert mrr_at_k(["x", "y", "e"], QRELS, 2) == 0.0  # relevant only at rank 3 > k
    assert mrr_at_k(["e"], QRELS, 10) == 1.0


def test_ndcg_by_hand() -> None:
    # DCG@10: a at rank 2 -> 3/log2(3); c at rank 4 -> 1/log2(5); e at rank 11 is outside the cut.
    dcg = 3 / math.log2(3) + 1 / math.log2(5)
    # IDCG: gains sorted 3, 2, 1 at ranks 1..3.
    idcg = 3 / 1 + 2 / math.log2(3) + 1 / 2
    assert ndcg_at_k(RANKED, QRELS, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(["a", "e", "c"], QRELS, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["c", "e", "a"], QRELS, 3) == pytest.approx((1 + 2 / math.log2(3) + 3 / 2) / idcg)
    assert ndcg_at_k(RANKED, {}, 10) == 0.0


def test_average_precision_by_hand() -> None:
    # relevant at ranks 2, 4, 11: precisions 1/2, 2/4, 3/11; divided by 3 relevant.
    assert average_precision(RANKED, QRELS) == pytest.approx((1 / 2 + 2 / 4 + 3 / 11) / 3)
    # a relevant document never retrieved counts as precision 0
    assert average_precision(RANKED[:5], QRELS) == pytest.approx((1 / 2 + 2 / 4) / 3)


def test_score_rankings_averages_over_judged_queries() -> None:
    rankings = {"q1": ["a", "b"], "q2": ["z"], "q3": ["k"]}
    qrels = {"q1": {"a": 1}, "q2": {"y": 2}, "q3": {"k": 0}}  # q3 has no relevant document: not scored
    scores = score_rankings(rankings, qrels, ks=(1,))
    assert scores.n_queries == 2
    assert scores.recall_at[1] == pytest.approx(0.5) and scores.mrr_10 == pytest.approx(0.5)
    assert scores.map == pytest.approx(0.5) and scores.ndcg_10 == pytest.approx(0.5)
    with pytest.raises(BadInputError):
        score_rankings({"q3": ["k"]}, qrels)


def _write_beir(folder: Path, docs: list[str], queries: list[str]) -> Path:
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w") as f:
        for i, text in enumerate(docs):
            f.write(json.dumps({"_id": f"d{i}", "title": "", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w") as f:
        for i, text in enumerate(queries):
            f.write(json.dumps({"_id": f"q{i}", "text": text}) + "\n")
        f.write(json.dumps({"_id": "unjudged", "text": "never asked"}) + "\n")
    # each query's relevant document is the one it was cut from
    lines = ["query-id\tcorpus-id\tscore"] + [f"q{i}\td{i}\t1" for i in range(len(queries))]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return folder


def test_beir_reader_and_runner(tmp_path: Path) -> None:
    docs = sentences(40, seed=11)
    queries = [" ".join(d.split()[:4]) for d in docs[:6]]
    folder = _write_beir(tmp_path / "mini-beir", docs, queries)
    data = read_beir(folder)
    assert len(data.corpus) == 40 and list(data.queries) == [f"q{i}" for i in range(6)]
    assert data.qrels["q2"] == {"d2": 1} and data.corpus[3].text == docs[3]
    assert load_retrieval_dataset(folder).name == "mini-beir"
    encoder = Encoder(tiny_bert(tmp_path / "bert"), "last-avg")
    report = evaluate_retrieval(encoder, data, ["none", "whitening-16"], latency_queries=3, workdir=tmp_path / "w")
    assert [s.transform for s in report.scores] == ["none", "whitening-16"]
    for s in report.scores:
        assert s.n_docs == 40 and s.n_queries == 6 and 0 <= s.ndcg_10 <= 1 and s.recall_100 == 1.0
        assert s.p50_query_ms > 0 and s.p50_search_ms > 0 and s.index_bytes > 0
    assert report.scores[1].dim == 16 and report.scores[1].index_bytes < report.scores[0].index_bytes
    assert json.loads(json.dumps(report.to_dict()))["scores"][0]["transform"] == "none"
    with pytest.raises(DataNotFoundError):
        read_beir(tmp_path / "nowhere")


def test_cranfield_reader(data_dir: Path) -> None:
    data = read_cranfield(data_dir / "retrieval" / "cranfield")
    assert len(data.corpus) == 1400 and len(data.queries) == 225 and len(data.judged_queries()) == 225
    assert sum(len(v) for v in data.qrels.values()) == 1837
    texts = {d.id: d.text for d in data.corpus}
    assert texts["471"] == "" and texts["995"] == ""
    assert texts["1"].startswith("experimental investigation of the aerodynamics of a wing in a slipstream")
    # position mapping: the 3rd query in cran.qry is numbered .I 004 there and 3 in cranqrel
    assert data.queries["3"].startswith("what problems of heat conduction in composite slabs")
    # gains: cranqrel "1 184 2" -> 3, "1 13 4" -> 1, "1 486 -1" -> 0
    assert data.qrels["1"]["184"] == 3 and data.qrels["1"]["13"] == 1 and data.qrels["1"]["486"] == 0
    gains = [g for q in data.qrels.values() for g in q.values()]
    assert {g: gains.count(g) for g in set(gains)} == {4: 128, 3: 387, 2: 734, 1: 363, 0: 225}


@pytest.mark.model
@pytest.mark.slow
def test_cranfield_minilm_quality(data_dir: Path, minilm_dir: Path, tmp_path: Path) -> None:
    """all-MiniLM-L6-v2 on a Cranfield slice (first 10 queries; their judged documents plus the first 50
    others, to stay fast on 2 cores), raw vectors and whitening: far above chance (random nDCG@10 ~ 0.05)."""
    data = read_cranfield(data_dir / "retrieval" / "cranfield")
    data.queries = dict(list(data.queries.items())[:10])
    judged = {d for q in data.queries for d in data.qrels[q]}
    data.corpus = [d for d in data.corpus if d.id in judged] + [d for d in data.corpus if d.id not in judged][:50]
    encoder = Encoder(minilm_dir, "last-avg", max_length=256)
    report = evaluate_retrieval(encoder, data, ["none", "whitening-128"], latency_queries=0)
    assert report.scores[0].n_queries == 10 and report.scores[0].ndcg_10 > 0.3
    assert report.scores[1].dim == 128 and report.scores[1].ndcg_10 > 0.3
