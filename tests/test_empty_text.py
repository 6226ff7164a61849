"""Texts with no token the encoder knows (empty, blank, only emoji or characters the vocabulary lacks): the one
rule (``whitevec.encoders.protocol.known_token_mask``) on every surface. Such a text has no meaning: a query finds
nothing (no hits, a note), a document is skipped at build (counted), /embed gives zeros, evaluation scores 0."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.index_helpers import HashEncoder, sentences
from tests.static_helpers import tiny_static_folder
from tests.test_cli import run_cli as _run
from tests.test_tune import MODEL, TableEncoder, retrieval_data
from whitevec.datasets.retrieval import RetrievalDataset
from whitevec.datasets.sts import Pair, StsTask
from whitevec.encoders.protocol import known_token_mask
from whitevec.encoders.static import StaticEncoder
from whitevec.encoders.transformer import Encoder
from whitevec.errors import BadInputError, WhitevecWarning
from whitevec.evaluation.retrieval import evaluate_retrieval
from whitevec.evaluation.sts import evaluate_sts
from whitevec.index import Document, Retriever
from whitevec.service.app import create_app
from whitevec.service.settings import ServeSettings
from whitevec.tuning import tune

# Texts neither test vocabulary knows a token of: emoji, a zero-width space, circled letters, empty, blank.
UNKNOWN = ["😀😀", "\u200b", "ⓩⓩⓩ", "", "   "]
MEANINGFUL = sentences(30, seed=3)
EMPTY_DOCS = [Document(f"e{i}", text) for i, text in enumerate(["", "😀", "ⓩⓩⓩ", "   "])]
DOCS = [Document(f"d{i}", text) for i, text in enumerate(MEANINGFUL)] + EMPTY_DOCS


@pytest.fixture(scope="module")
def bert(tiny_bert_dir: Path) -> Encoder:
    return Encoder(str(tiny_bert_dir), "last-avg", cache=False, device="cpu")


@pytest.fixture(scope="module")
def static(tmp_path_factory: pytest.TempPathFactory) -> StaticEncoder:
    return StaticEncoder(tiny_static_folder(tmp_path_factory.mktemp("static") / "tiny"))


# --- the mask ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["bert", "static"])
def test_known_token_mask(which: str, request: pytest.FixtureRequest) -> None:
    encoder = request.getfixturevalue(which)
    texts = [*UNKNOWN, "a man 😀", "the dog", "[CLS] [SEP]"]
    # A known word beside an emoji carries meaning; special tokens alone do not.
    assert encoder.known_token_mask(texts).tolist() == [False] * 5 + [True, True, False]
    assert known_token_mask(encoder, texts).tolist() == [False] * 5 + [True, True, False]


def test_an_encoder_without_the_method_knows_every_non_blank_text() -> None:
    assert known_token_mask(HashEncoder(), ["", "  ", "😀", "text"]).tolist() == [False, False, True, True]


# --- the index: build, add, search, embed -----------------------------------------------------------------------
def _skipped_warning(kept: str) -> str:
    return rf"4 of 34 documents have no token the model knows \('e0', 'e1', 'e2', 'e3'\); {kept}"


@pytest.fixture(scope="module")
def whitened(bert: Encoder, tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    with pytest.warns(WhitevecWarning, match=_skipped_warning("not indexed")):
        out = tmp_path_factory.mktemp("idx") / "idx"
        return Retriever.build(DOCS, out, encoder=bert, transform="whitening-8", show_progress=False)


def test_build_skips_documents_without_known_tokens(whitened: Retriever) -> None:
    assert whitened.count == 30 and whitened.manifest["skipped_documents"] == 4
    hits = whitened.search(MEANINGFUL[:5], k=30)
    assert all(hit.id.startswith("d") for row in hits for hit in row)


def test_query_without_known_tokens_gets_no_hits_and_a_note(whitened: Retriever) -> None:
    results = whitened.search(["😀", MEANINGFUL[0], "ⓩⓩⓩ", "\u200b"], k=5)
    assert results.unknown_queries == [0, 2, 3]
    assert results[0] == [] and results[0].note is not None and "no token the model knows" in results[0].note
    assert results[1][0].id == "d0" and results[1].note is None
    assert whitened.search(["😀"], k=3).unknown_queries == [0]  # none to search at all


def test_embed_gives_zeros_for_texts_without_known_tokens(whitened: Retriever) -> None:
    vectors, known = whitened.embed_marked(["😀", MEANINGFUL[0], "ⓩⓩⓩ"])
    assert known.tolist() == [False, True, False]
    assert not vectors[[0, 2]].any() and np.linalg.norm(vectors[1]) == pytest.approx(1.0, abs=1e-5)
    assert not whitened.embed(["😀"]).any()


def test_build_keeps_or_refuses_when_asked(bert: Encoder, tmp_path: Path) -> None:
    with pytest.warns(WhitevecWarning, match=_skipped_warning("indexed as they are")):
        kept = Retriever.build(DOCS, tmp_path / "keep", encoder=bert, transform="center", empty_documents="keep")
    with kept:
        assert kept.count == 34 and "skipped_documents" not in kept.manifest
    with pytest.raises(BadInputError, match=r"4 of 34 documents have no token the model knows \('e0'"):
        Retriever.build(DOCS, tmp_path / "error", encoder=bert, empty_documents="error")
    assert not (tmp_path / "error").exists()
    with pytest.raises(BadInputError, match="none of the 4 documents"):
        Retriever.build(EMPTY_DOCS, tmp_path / "none", encoder=bert)
    with pytest.raises(BadInputError, match="unknown empty_documents choice 'drop'"):
        Retriever.build(DOCS, tmp_path / "bad", encoder=bert, empty_documents="drop")


def test_a_refit_keeps_the_documents_the_build_kept(bert: Encoder, tmp_path: Path) -> None:
    # A refit that encodes builds the index again: documents without a known token, admitted by the build's
    # "keep", stay (the refit from raw vectors keeps every row too).
    with pytest.warns(WhitevecWarning, match=_skipped_warning("indexed as they are")):
        kept = Retriever.build(DOCS, tmp_path / "keep", encoder=bert, transform="center", empty_documents="keep")
    with kept, pytest.warns(WhitevecWarning, match=_skipped_warning("indexed as they are")):
        kept.refit()
        assert kept.count == 34 and kept.existing_ids(["e0", "e3"]) == ["e0", "e3"]


def test_add_skips_documents_without_known_tokens(bert: Encoder, tmp_path: Path) -> None:
    with Retriever.build(DOCS[:30], tmp_path / "idx", encoder=bert, transform="whitening-8") as retriever:
        with pytest.warns(WhitevecWarning, match=r"1 of 2 documents .*\('n2'\); not indexed"):
            assert retriever.add([Document("n1", "a cat is eating"), Document("n2", "😀")]) == 31
        assert retriever.manifest["skipped_documents"] == 1
        with pytest.warns(WhitevecWarning, match="not indexed"):
            assert retriever.add([Document("n3", "ⓩ")]) == 31
        with pytest.raises(BadInputError, match=r"\('n4'\)"):
            retriever.add([Document("n4", "")], empty_documents="error")


def test_static_index_follows_the_rule(static: StaticEncoder, tmp_path: Path) -> None:
    with pytest.warns(WhitevecWarning, match=_skipped_warning("not indexed")):
        retriever = Retriever.build(DOCS, tmp_path / "idx", encoder=static, transform="whitening")
    with retriever:
        assert retriever.count == 30
        results = retriever.search(["😀 ⓩ", MEANINGFUL[1]], k=3)
        assert results.unknown_queries == [0] and results[0] == [] and results[1][0].id == "d1"


# --- the command line -------------------------------------------------------------------------------------------


def test_cli_build_and_search(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in DOCS))
    build = ["index", "build", "--corpus", str(corpus), "--model", str(tiny_bert_dir), "-t", "whitening-8", "-q"]
    code, _, err = _run([*build, "--out", str(tmp_path / "error"), "--empty-documents", "error"], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("whitevec: error: 4 of 34 documents")
    assert not (tmp_path / "error").exists()
    index = tmp_path / "idx"
    # The command line prints each warning as one line of its own (cli.main), not through Python's format.
    code, _, err = _run([*build, "--out", str(index)], capsys)
    assert code == 0, err
    assert re.fullmatch("whitevec: warning: " + _skipped_warning("not indexed"), err.splitlines()[0]), err
    code, stdout, err = _run(["search", str(index), "😀", MEANINGFUL[2], "ⓩⓩⓩ", "-k", "3", "--json"], capsys)
    assert code == 0, err
    assert err.splitlines() == [
        "whitevec: warning: query 1: the query has no token the model knows; no hits",
        "whitevec: warning: query 3: the query has no token the model knows; no hits",
    ]
    payload = json.loads(stdout)
    assert payload[0]["hits"] == [] and "no token the model knows" in payload[0]["note"]
    assert payload[1]["hits"][0]["id"] == "d2" and "note" not in payload[1]
    code, stdout, _ = _run(["index", "info", str(index)], capsys)
    assert code == 0 and json.loads(stdout)["skipped_documents"] == 4


# --- HTTP -------------------------------------------------------------------------------------------------------
def test_http_search_note_and_embed_zeros(whitened: Retriever) -> None:
    with TestClient(create_app(whitened, ServeSettings())) as client:
        body = client.post("/search", json={"queries": ["😀", MEANINGFUL[3]], "k": 3}).json()
        assert body["results"][0]["ids"] == [] and "no token the model knows" in body["results"][0]["note"]
        assert body["results"][1]["ids"][0] == "d3" and body["results"][1]["note"] is None
        embedded = client.post("/embed", json={"texts": [MEANINGFUL[3], "ⓩⓩⓩ"]}).json()
        assert embedded["unknown"] == [1] and not any(embedded["vectors"][1]) and any(embedded["vectors"][0])
        schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert "note" in schemas["QueryResult"]["properties"] and "unknown" in schemas["EmbedResponse"]["properties"]


# --- evaluation and tuning --------------------------------------------------------------------------------------
def test_eval_retrieval_counts(bert: Encoder) -> None:
    queries = {"q0": MEANINGFUL[0], "q1": "😀", "q2": MEANINGFUL[5]}
    qrels = {"q0": {"d0": 1}, "q1": {"d1": 1}, "q2": {"d5": 1}}
    data = RetrievalDataset("tiny", DOCS, queries, qrels)
    report = evaluate_retrieval(bert, data, ["whitening-8"], latency_queries=0)
    score = report.scores[0]
    assert (score.unknown_queries, score.skipped_documents, score.n_docs, score.n_queries) == (1, 4, 30, 3)
    assert score.mrr_10 <= 2 / 3  # the query that ranks nothing scores 0
    assert any("1 of 3 queries have no token the model knows" in note for note in report.notes)


def test_sts_pairs_with_unknown_sentences_score_zero(bert: Encoder) -> None:
    pairs = [Pair(MEANINGFUL[i], MEANINGFUL[i + 1], float(i % 5)) for i in range(0, 24, 2)]
    pairs += [Pair("😀", MEANINGFUL[0], 4.0), Pair(MEANINGFUL[1], "ⓩⓩⓩ", 0.5)]
    task = StsTask(name="tiny", subsets={"all": pairs}, splits={"test": pairs})
    report = evaluate_sts(bert, [task], ["none", "whitening"])
    assert [s.unknown_pairs for s in report.scores] == [2, 2]
    assert report.scores[1].n_fit == len(task.sentences("target")) - 2


class MaskedTableEncoder(TableEncoder):
    """TableEncoder that knows no token of a text starting with an emoji."""

    def known_token_mask(self, texts: Sequence[str]) -> Any:
        return np.array([not text.startswith("😀") for text in texts])


def test_tune_scores_unknown_texts_as_no_meaning() -> None:
    data, table = retrieval_data(20)
    table["😀 doc"] = table["doc 0"]  # the twin of d0, but unknown: it must never be found
    table["😀 query"] = table["doc 0"]  # d0 itself, but unknown: it must score 0
    data.corpus.append(Document("dx", "😀 doc"))
    data.queries["qx"] = "😀 query"
    data.qrels["qx"] = {"d0": 1}
    dense = {"transforms": ["whitening"], "modes": ["dense"]}
    result = tune(data, models=[MODEL], encoders={MODEL: MaskedTableEncoder(table)}, **dense)
    assert result.unknown_texts == {MODEL: 2}
    assert any("2 of" in note and "no token table knows" in note for note in result.notes)
    plain = tune(data, models=[MODEL], encoders={MODEL: TableEncoder(table)}, **dense)
    whitened, whitened_plain = result.candidates[1], plain.candidates[1]
    assert whitened.transform == "whitening" and whitened.dev is not None and whitened_plain.dev is not None
    assert whitened.dev < whitened_plain.dev  # qx no longer finds d0 first
