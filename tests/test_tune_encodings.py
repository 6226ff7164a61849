"""whitevec tune's encoding axis: the index's own encodings, filtered by bytes per vector before any fitting,
scored on decoded codes exactly as a FAISS store with that encoding scores them, ties to fewer bytes, and the
encoding carried by the tuned configuration."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.test_tune import MODEL, TableEncoder, anisotropic_pairs, retrieval_data, run
from whitevec.errors import BadInputError
from whitevec.evaluation.retrieval import ndcg_at_k
from whitevec.index.encodings.spec import parse_encoding
from whitevec.index.faiss.encoded import cosine_scores, decoded_codes, encoded_vectors
from whitevec.index.faiss.store import FaissStore, one_faiss_thread
from whitevec.transforms import make_transform
from whitevec.tuning import TunedConfig, tune
from whitevec.tuning.choice import choose as _choose
from whitevec.tuning.results import CandidateResult
from whitevec.tuning.scoring import Scored as _Scored
from whitevec.tuning.space import check_encodings, cost_key, encoding_bytes
from whitevec.utils.linalg import unit_rows


def test_encodings_are_the_index_specs_with_float32_first() -> None:
    assert check_encodings(["SQ8", "pq4", "opq4,pq4", "pq4x8", "fp16"]) == [
        "float32",
        "sq8",
        "pq4",
        "opq4,pq4",
        "fp16",
    ]
    assert encoding_bytes("pq48", 384) == parse_encoding("pq48").code_bytes(384) == 48
    assert encoding_bytes("sq8", 128) == 128 and encoding_bytes("float32", 128) == 512
    with pytest.raises(BadInputError, match=r"unknown encoding 'pq'; valid: float32, fp16, sq8, sq4, pqM"):
        check_encodings(["pq"])


@pytest.mark.parametrize("spec", ["sq8", "sq4", "fp16", "pq4x4", "opq4,pq4x4"])
def test_decoded_scores_equal_a_real_faiss_store(spec: str) -> None:
    rng = np.random.default_rng(1)
    docs = unit_rows(rng.normal(size=(700, 16)) + np.r_[3.0, np.zeros(15)])
    queries = unit_rows(rng.normal(size=(25, 16)) + np.r_[3.0, np.zeros(15)])
    decoded, used, notes = decoded_codes(docs, spec)
    assert used.spec == spec and notes == []
    assert not np.allclose(decoded, docs)  # lossy: the codes are what is scored
    ours = cosine_scores(queries, decoded, spec)
    store = FaissStore(16, "cosine", "flat", {"encoding": spec})
    with one_faiss_thread():  # as decoded_codes trains small sets (faiss's threads only slow a shared machine)
        store.add(np.arange(700), docs)
    scores, ids = store.search(queries, 10)
    for q in range(25):
        np.testing.assert_allclose(ours[q, ids[q]], scores[q], atol=2e-5)
        top = np.argsort(-ours[q], kind="stable")[:10]
        assert list(top) == list(ids[q]) or np.allclose(ours[q, top], scores[q], atol=2e-5)  # exact ties only


def test_tune_scores_an_encoding_as_a_real_index_ranks() -> None:
    data, table = retrieval_data(40)
    result = tune(
        data,
        models=[MODEL],
        encoders={MODEL: TableEncoder(table)},
        transforms=["whitening"],
        encodings=["sq4"],
        modes=["dense"],
        include_flow=False,
    )
    rows = {(c.transform, c.encoding): c for c in result.candidates}
    assert set(rows) == {("none", "float32"), ("none", "sq4"), ("whitening", "float32"), ("whitening", "sq4")}
    assert (
        rows[("whitening", "sq4")].bytes_per_vector == 4 and rows[("whitening", "float32")].bytes_per_vector == 32
    )
    # The same nDCG@10 from a FaissStore holding the whitened corpus as sq4 codes, searched with float queries.
    docs = np.array([table[d.text] for d in data.corpus])
    judged = data.judged_queries()
    queries = np.array([table[judged[q]] for q in judged])
    whitening = make_transform("whitening")
    assert whitening is not None
    whitening.fit(docs)
    store = FaissStore(8, "cosine", "flat", {"encoding": "sq4"})
    store.add(np.arange(len(docs)), unit_rows(whitening.transform(docs)))
    _, ids = store.search(unit_rows(whitening.transform(queries)), 10)
    expected = np.mean(
        [ndcg_at_k([data.corpus[i].id for i in ids[j]], data.qrels[q], 10) for j, q in enumerate(judged)]
    )
    assert rows[("whitening", "sq4")].dev == pytest.approx(100 * expected, abs=1e-6)
    assert rows[("whitening", "sq4")].dev != rows[("whitening", "float32")].dev


def test_budget_filters_transform_x_encoding_before_fitting() -> None:
    table, pairs = anisotropic_pairs(n_pairs=400)
    result = run(
        pairs, table, transforms=["whitening", "whitening-8"], encodings=["sq8", "pq4"], max_bytes_per_vector=8
    )
    got = [(c.transform, c.encoding, c.bytes_per_vector) for c in result.candidates]
    # float32 none is the baseline, scored over the budget; everything else fits 8 bytes. 800 sentences train
    # 2^4 centroids per sub-quantizer at most (39 points each), so pq4 is lowered to pq4x4 as the index would.
    assert got[0] == ("none", "float32", 64)
    assert all(size <= 8 for _, _, size in got[1:]) and ("whitening-8", "sq8", 8) in got
    assert ("whitening", "pq4x4", 2) in got and not any(e == "float32" for _, e, _ in got[1:])
    assert any("pq4 needs 9984 training vectors" in n for n in result.notes)
    assert any("over the budget of 8 bytes" in n for n in result.notes)
    assert result.chosen.bytes_per_vector <= 8 and result.config.encoding == result.chosen.encoding
    with pytest.raises(BadInputError, match="no candidate fits in 1 bytes per vector"):
        run(pairs, table, transforms=["whitening-8"], encodings=["sq8"], max_bytes_per_vector=1)


def test_pq_that_does_not_divide_the_dimension_is_skipped_for_that_transform() -> None:
    table, pairs = anisotropic_pairs(n_pairs=400)
    result = run(pairs, table, transforms=["whitening-10"], encodings=["pq5x4"])
    status = {(c.transform, c.encoding): c.status for c in result.candidates}
    assert status[("none", "pq5x4")] == "skipped: M=5 does not divide d=16"
    assert any(
        n.startswith("pq5x4: PQ with M=5") and "valid M for d=16: 1, 2, 4, 8, 16" in n for n in result.notes
    )
    assert status[("whitening-10", "pq5x4")] == "scored"
    assert any("skipped: their encoding does not fit" in n for n in result.notes)


def test_a_tie_between_float32_and_sq8_goes_to_sq8() -> None:
    rng = np.random.default_rng(0)
    gold = rng.normal(size=200)
    raw = gold + rng.normal(scale=3.0, size=200)
    better = gold + rng.normal(scale=0.5, size=200)
    sq8 = better + 0.02 * (raw - gold)  # a shade below float32: tied with it, not beaten

    def scored(encoding: str, items: np.ndarray) -> _Scored:
        size = encoding_bytes(encoding, 16)
        return _Scored(CandidateResult(MODEL, "last-avg", "whitening", encoding, 16, size), items, None)

    pool = [
        _Scored(CandidateResult(MODEL, "last-avg", "none", "float32", 16, 64), raw, None),
        scored("float32", better),
        scored("sq8", sq8),
    ]
    choice, gains = _choose("sts", pool, gold, np.arange(200), 500, 0, None)
    assert gains[2].gain < gains[1].gain and gains[2].significant
    assert pool[choice].result.encoding == "sq8"
    assert cost_key(pool[2].result.candidate, 16) == (16, 1, 0) < cost_key(pool[1].result.candidate, 16)
    # At the same bytes and family, dense is cheaper than a search that keeps a lexical index too.
    hybrid = replace(pool[1].result.candidate, mode="hybrid", fusion="rrf:60")
    assert cost_key(pool[1].result.candidate, 16) < cost_key(hybrid, 16) == (64, 1, 1)


def test_sts_stores_both_sides_and_the_config_carries_the_encoding(tmp_path: Path) -> None:
    table, pairs = anisotropic_pairs()
    result = run(pairs, table, transforms=["whitening"], encodings=["sq4"])
    row = next(c for c in result.candidates if (c.transform, c.encoding) == ("whitening", "sq4"))
    # Every sentence of the pairs is stored: both sides decoded, then compared by cosine.
    texts = list(dict.fromkeys(s for p in pairs for s in (p.sentence1, p.sentence2)))
    vectors = TableEncoder(table).encode(texts)
    whitening = make_transform("whitening")
    assert whitening is not None
    space = np.asarray(whitening.fit(vectors).transform(vectors), dtype=np.float32)
    decoded = encoded_vectors(space, "sq4", np.arange(len(texts)))
    at = {t: i for i, t in enumerate(texts)}
    left, right = decoded[[at[p.sentence1] for p in pairs]], decoded[[at[p.sentence2] for p in pairs]]
    from whitevec.evaluation.metrics import cosine_rows, spearman100

    assert row.dev == pytest.approx(spearman100(cosine_rows(left, right), np.array([p.score for p in pairs])))
    config: Any = TunedConfig(
        model=MODEL, pooling="last-avg", transform="whitening", encoding="SQ4", dim=16, bytes_per_vector=8
    )
    loaded = TunedConfig.load(config.save(tmp_path / "c.json"))
    assert loaded.encoding == "sq4" and loaded.bytes_per_vector == 8


def test_all_encodings_are_the_index_list_within_the_budget() -> None:
    table, pairs = anisotropic_pairs(n_pairs=400)
    result = run(pairs, table, transforms=["whitening-8"], encodings=["all"], max_bytes_per_vector=4, n_boot=200)
    rows = [(c.transform, c.encoding, c.bytes_per_vector) for c in result.candidates[1:]]
    assert ("whitening-8", "sq4", 4) in rows and ("none", "pq4x4", 2) in rows
    assert all(size <= 4 for _, _, size in rows) and not any(e in ("float32", "fp16", "sq8") for _, e, _ in rows)
