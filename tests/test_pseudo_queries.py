"""Pseudo-queries cut from a corpus, the fusion chosen on them, and the build that chooses its own (issue 53).

Tiny data only: synthetic rankings where the right choice is known, and a tiny static table's index."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import VOCAB_WORDS
from tests.static_helpers import tiny_static_folder
from whitevec.datasets.retrieval import Document
from whitevec.encoders import load_encoder
from whitevec.errors import BadInputError
from whitevec.index import Retriever
from whitevec.index.folder.manifest import CHOICE_FIELD
from whitevec.index.search.fusion import DEFAULT_FUSION, Fusion
from whitevec.index.search.pseudo_queries import (
    check_pseudo_count,
    choose_fusion,
    make_pseudo_queries,
    sentences,
)

LONG = "the first sentence has enough words. a second sentence with enough words here. a third one with words too."


def test_a_pseudo_query_leaves_its_document_and_short_documents_are_counted() -> None:
    texts = [LONG, "too short. to cut.", LONG.replace("words", "terms"), "one sentence of five words only."]
    made = make_pseudo_queries(texts, 10, seed=3)
    assert made.report() == {"form": "ict", "seed": 3, "asked": 10, "made": 2, "documents": 4, "too_short": 2}
    assert made.relevant.tolist() == [0, 2]
    for query, row in zip(made.queries, made.relevant.tolist(), strict=True):
        assert query in sentences(texts[row]) and query not in made.corpus[row]
        assert len(sentences(made.corpus[row])) == 2
    assert made.corpus[1] == texts[1] and made.corpus[3] == texts[3]  # untouched
    again = make_pseudo_queries(texts, 10, seed=3)
    assert again.queries == made.queries  # seeded
    first = make_pseudo_queries(texts, 1, form="first", seed=0)
    assert first.queries[0] in {sentences(LONG)[0], sentences(texts[2])[0]} and len(first.queries) == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10", 10**6])
def test_a_bad_number_of_pseudo_queries_is_one_line(bad: object) -> None:
    with pytest.raises(BadInputError, match="number of pseudo-queries") as caught:
        check_pseudo_count(bad)
    assert "\n" not in str(caught.value)


def _rankings(right: np.ndarray, n_docs: int, good: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ranking of ``n_docs`` rows: its right row first (``good``) or last, the rest by row."""
    rows = []
    for want in right.tolist():
        others = [r for r in range(n_docs) if r != want]
        rows.append([want, *others] if good else [*others, want])
    scores = np.tile(np.linspace(1.0, 0.0, n_docs, dtype=np.float32), (len(right), 1))
    return np.asarray(rows, dtype=np.int64), scores


def test_the_choice_follows_the_ranker_that_finds_the_pseudo_queries_documents() -> None:
    right = np.arange(40) % 30
    good, bad = _rankings(right, 30, True), _rankings(right, 30, False)
    lexical_wins = choose_fusion(bad, good, right)
    assert lexical_wins.fusion == Fusion("convex", alpha=0.0) and lexical_wins.rule.startswith("best on 40")
    dense_wins = choose_fusion(good, bad, right)
    assert dense_wins.fusion == Fusion("convex", alpha=1.0)
    both = choose_fusion(good, good, right)  # nothing beats the default: it stays
    assert both.fusion == DEFAULT_FUSION and both.rule.startswith("default kept")
    assert set(both.scores) == {f"convex:{a / 10:g}" for a in range(11)}


def test_one_lucky_query_does_not_move_the_default() -> None:
    """A gain on one pseudo-query of 40 is within the bootstrap's noise (and below the margin): kept."""
    right = np.arange(40) % 30
    dense, lexical = _rankings(right, 30, True), _rankings(right, 30, True)
    d_rows = dense[0].copy()
    d_rows[0] = np.roll(d_rows[0], -1)  # dense misses query 0's document
    assert choose_fusion((d_rows, dense[1]), lexical, right).fusion == DEFAULT_FUSION
    with pytest.raises(BadInputError, match="no pseudo-queries"):
        choose_fusion(dense, lexical, np.zeros(0, dtype=np.int64))


def _corpus(n: int = 24, seed: int = 0) -> list[Document]:
    rng = np.random.default_rng(seed)
    words = [w for w in VOCAB_WORDS if len(w) > 2]

    def sentence() -> str:
        return " ".join(rng.choice(words, size=6)) + "."

    return [Document(f"d{i}", " ".join(sentence() for _ in range(3))) for i in range(n)]


@pytest.fixture(scope="module")
def static_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tiny_static_folder(tmp_path_factory.mktemp("pq") / "static"))


def test_a_build_with_bm25_chooses_its_fusion_and_records_how(tmp_path: Path, static_model: str) -> None:
    encoder = load_encoder(static_model)
    with Retriever.build(_corpus(), tmp_path / "idx", encoder=encoder, lexical="bm25") as index:
        manifest = index.manifest
        chosen = manifest[CHOICE_FIELD]
        assert manifest["search"] == {"mode": "hybrid", "fusion": chosen["fusion"]}
        assert chosen["pseudo_queries"]["made"] == 24 and chosen["pseudo_queries"]["too_short"] == 0
        assert set(chosen["scores"]) >= {"convex:0.5", "convex:0", "convex:1"}
        assert index.search_plan().fusion.spec == chosen["fusion"]
    on_disk = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert on_disk[CHOICE_FIELD] == chosen  # read back through the checked manifest above, and kept as written
    with Retriever.load(tmp_path / "idx") as loaded:
        loaded.add([Document("new", LONG)])
        assert loaded.manifest[CHOICE_FIELD] == chosen  # a write keeps the choice


def test_a_given_fusion_wins_and_a_build_without_bm25_is_unchanged(tmp_path: Path, static_model: str) -> None:
    encoder = load_encoder(static_model)
    given = {"mode": "hybrid", "fusion": "rrf:60"}
    with Retriever.build(_corpus(), tmp_path / "a", encoder=encoder, lexical="bm25", search=given) as index:
        assert index.manifest["search"] == given and CHOICE_FIELD not in index.manifest
    with Retriever.build(_corpus(), tmp_path / "b", encoder=encoder) as index:
        assert "search" not in index.manifest and CHOICE_FIELD not in index.manifest


def test_a_corpus_too_short_to_cut_keeps_the_default_and_says_why(tmp_path: Path, static_model: str) -> None:
    docs = [Document(f"d{i}", doc.text.split(".")[0]) for i, doc in enumerate(_corpus())]
    with Retriever.build(docs, tmp_path / "idx", encoder=load_encoder(static_model), lexical="bm25") as index:
        chosen = index.manifest[CHOICE_FIELD]
    assert chosen["fusion"] == DEFAULT_FUSION.spec and "no document long enough" in chosen["rule"]
    assert chosen["pseudo_queries"]["too_short"] == len(docs)


def test_a_refit_chooses_again_and_a_given_fusion_stays(
    tmp_path: Path, static_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import whitevec.index.build as build

    calls: list[int] = []
    real = build.build_fusion_choice

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(build, "build_fusion_choice", counted)
    encoder = load_encoder(static_model)
    with Retriever.build(_corpus(), tmp_path / "chosen", encoder=encoder, lexical="bm25") as index:
        index.refit()
        assert len(calls) == 2 and CHOICE_FIELD in index.manifest
    given = {"mode": "hybrid", "fusion": "convex:0.3"}
    with Retriever.build(_corpus(), tmp_path / "given", encoder=encoder, lexical="bm25", search=given) as index:
        index.refit()
        assert len(calls) == 2 and index.manifest["search"] == given and CHOICE_FIELD not in index.manifest


def _write_corpus(path: Path, docs: list[Document]) -> Path:
    path.write_text("".join(json.dumps({"_id": d.id, "text": d.text}) + "\n" for d in docs))
    return path


def test_tune_with_pseudo_queries_writes_a_hybrid_configuration(
    tmp_path: Path, static_model: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.test_cli import run_cli

    corpus = _write_corpus(tmp_path / "corpus.jsonl", _corpus())
    out = tmp_path / "tuned.json"
    argv = ["tune", "--pseudo-queries", "30", "--corpus", str(corpus), "--model", static_model, "--out", str(out)]
    code, stdout, err = run_cli([*argv, "--no-cache", "-q"], capsys)
    assert code == 0, err
    config = json.loads(out.read_text())
    chosen = config["selection"]["label_free"]
    assert (config["mode"], config["fusion"], config["transform"]) == ("hybrid", chosen["fusion"], "none")
    assert chosen["pseudo_queries"]["made"] == 24 and f"chosen: hybrid {chosen['fusion']}" in stdout
    index = tmp_path / "idx"
    code, _, err = run_cli(
        ["index", "build", "--corpus", str(corpus), "--config", str(out), "--out", str(index)], capsys
    )
    assert code == 0, err
    assert json.loads((index / "manifest.json").read_text())["search"]["fusion"] == chosen["fusion"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--pseudo-queries", "0"], "the number of pseudo-queries must be an integer from 1 to 100000, got 0"),
        (["--pseudo-queries", "5"], "--pseudo-queries N and --corpus FILE go together"),
        (["--pseudo-queries", "5", "--corpus", "C", "--dataset", "cranfield"], "leave out --dataset"),
        (["--pseudo-queries", "5", "--corpus", "C", "--model", "a,b"], "one model and pooling"),
        (["--pseudo-queries", "5", "--corpus", "C", "--analyzer", "encoder"], "tune's --analyzer must be one of"),
    ],
)
def test_tune_without_labels_refuses_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    from tests.test_cli import run_cli

    corpus = _write_corpus(tmp_path / "corpus.jsonl", _corpus(4))
    extra = [str(corpus) if arg == "C" else arg for arg in extra]
    code, _, err = run_cli(["tune", "--out", str(tmp_path / "t.json"), *extra], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "t.json").exists()


def test_index_build_fusion_is_kept_and_refused_with_config_or_without_bm25(
    tmp_path: Path, static_model: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.test_cli import run_cli

    corpus = _write_corpus(tmp_path / "corpus.jsonl", _corpus())
    argv = ["index", "build", "--corpus", str(corpus), "--model", static_model, "--no-cache", "-q"]
    code, _, err = run_cli([*argv, "--out", str(tmp_path / "a"), "--lexical", "bm25", "--fusion", "rrf"], capsys)
    assert code == 0, err
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["search"] == {"mode": "hybrid", "fusion": "rrf:60"} and CHOICE_FIELD not in manifest
    code, _, err = run_cli([*argv, "--out", str(tmp_path / "b"), "--fusion", "rrf"], capsys)
    assert code == 2 and "needs a lexical part" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli([*argv, "--out", str(tmp_path / "c"), "--fusion", "convex:2"], capsys)
    assert code == 2 and "ALPHA must be a number from 0 to 1" in err
    config = tmp_path / "cfg.json"
    config.write_text("{}")
    code, _, err = run_cli(
        [*argv, "--out", str(tmp_path / "d"), "--fusion", "rrf", "--config", str(config)], capsys
    )
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert not any((tmp_path / name).exists() for name in "bcd")


def test_noise_vectors_move_the_choice_and_info_and_searches_follow(tmp_path: Path) -> None:
    """Dense is noise (a hash of the text) and the sentences of document i name words i to i+3, so BM25 ranks
    its document first and its neighbours close behind, where the noise reorders them at convex:0.5: the build
    moves toward BM25, and /info's default fusion and a search follow it."""
    from tests.index_helpers import HashEncoder
    from whitevec.service.manifest import search_choices

    def sentence(i: int, j: int) -> str:
        return " ".join(f"word{(i + shift) % 60}" for shift in range(4)) + f" and some filler {j}."

    docs = [Document(f"d{i}", " ".join(sentence(i, j) for j in range(3))) for i in range(60)]
    with Retriever.build(docs, tmp_path / "idx", encoder=HashEncoder(), lexical="bm25") as index:  # type: ignore[arg-type]
        chosen = index.manifest[CHOICE_FIELD]
        assert float(chosen["fusion"].partition(":")[2]) <= 0.2, chosen
        assert chosen["rule"].startswith("best on 50 pseudo-queries")  # a tenth of 60, at least 50
        assert index.search_plan().fusion.spec == chosen["fusion"]
        _, info = search_choices(index.manifest)
        assert info.default_fusion == chosen["fusion"] != DEFAULT_FUSION.spec


def test_the_manifest_checks_the_choice_by_name_and_type(tmp_path: Path, static_model: str) -> None:
    from whitevec.errors import CorruptFileError
    from whitevec.index.folder.manifest import SELF_CHECKSUM, check_manifest, manifest_digest

    def sealed(fields: dict[str, object]) -> dict[str, object]:  # its own checksum made again, as a build would
        return {**fields, SELF_CHECKSUM: manifest_digest(fields)}

    with Retriever.build(_corpus(), tmp_path / "idx", encoder=load_encoder(static_model), lexical="bm25") as index:
        manifest = dict(index.manifest)
    assert manifest[CHOICE_FIELD]["seconds"] >= 0
    check_manifest(manifest, tmp_path / "idx" / "manifest.json")  # as written
    check_manifest(sealed({k: v for k, v in manifest.items() if k != CHOICE_FIELD}), tmp_path)  # an older index
    for broken in (
        {**manifest[CHOICE_FIELD], "fusion": "convex:7"},
        {**manifest[CHOICE_FIELD], "seconds": "fast"},
        {k: v for k, v in manifest[CHOICE_FIELD].items() if k != "rule"},
        {**manifest[CHOICE_FIELD], "scores": {"convex:0.5": "high"}},
    ):
        with pytest.raises(CorruptFileError, match=CHOICE_FIELD):
            check_manifest(sealed({**manifest, CHOICE_FIELD: broken}), tmp_path)
