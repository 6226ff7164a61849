"""The lexical index beside the vectors (issue 39 item 1): analyzers, BM25 scores against bm25s used directly,
its two files (persisted, checksummed, in the index version), build, add and load with and without it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import pytest
import Stemmer

from tests.index_helpers import HashEncoder, sentences
from tests.static_helpers import tiny_static_folder
from tests.test_cli import run_cli
from whitevec.encoders.static import StaticEncoder
from whitevec.errors import BadInputError, CorruptFileError
from whitevec.index import Document, Retriever, read_manifest
from whitevec.index.folder.layout import LEXICAL_COUNTS, LEXICAL_FILES, LEXICAL_MATRIX, LEXICAL_TERMS
from whitevec.index.folder.manifest import is_lexical_record
from whitevec.index.lexical.analyzers import FORMER_DEFINITIONS
from whitevec.index.lexical.bm25 import (
    DEFAULT_LEXICAL,
    METHODS,
    Analyzer,
    LexicalIndex,
    check_lexical,
    lexical_size,
    make_analyzer,
)
from whitevec.index.versions import check_index_manifest

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
SAVED = Path(__file__).parent / "fixtures" / "saved"

TEXTS = [
    "The cats were running across the streets",
    "A dog runs in the street",
    "Wings stall at high angles of attack",
    "",
    "the of and to",
    "Cats and dogs, cats and more cats",
    "Boundary layers on a flat plate",
    "Running dogs chase running cats",
]
QUERIES = ["running cat", "dog street", "stall wing attack", "plate boundary layer cats"]


def docs_of(texts: list[str], tag: str = "d") -> list[Document]:
    return [Document(f"{tag}{i}", text) for i, text in enumerate(texts)]


# --- analyzers ------------------------------------------------------------------------------------------------
def test_the_former_english_gives_the_terms_bm25s_tokenize_gives() -> None:
    texts = [*TEXTS, "Flows; FLOWING, flowed! 3D x-ray naïve café"]
    theirs = bm25s.tokenize(
        texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False, show_progress=False
    )
    former = FORMER_DEFINITIONS["english"][0]
    assert former.analyze(texts) == theirs
    # Lucene's 33 English stop words (bm25s's list): "were" is not one of them.
    assert former.analyze(["The cats were running"]) == [["cat", "were", "run"]]


def test_english_keeps_one_character_words_and_numbers_as_lancedb_does() -> None:
    english = make_analyzer("english")
    # Runs of letters and digits: "b", "52", "3", "d" and "x" kept ("x-ray" is two words, "b52" one, "_" splits).
    assert english.analyze(["The B-52 at Mach 3", "3D x-ray b52 snake_case"]) == [
        ["b", "52", "mach", "3"],
        ["3d", "x", "ray", "b52", "snake", "case"],
    ]


def test_english_drops_nltks_stop_words_matched_against_the_stems() -> None:
    english = make_analyzer("english")
    # NLTK's list: "were", "i", "very", "would"n't... ("were" and "i" are not in bm25s's 33). Matched after
    # stemming: "its" stems to "it" (dropped); "very" stems to "veri" and "only" to "onli" (kept, as LanceDB).
    assert english.analyze(["The cats were running", "I saw its very only wing"]) == [
        ["cat", "run"],
        ["saw", "veri", "onli", "wing"],
    ]


def test_english_folds_accents_and_drops_run_on_terms() -> None:
    english = make_analyzer("english")
    assert english.analyze(["Naïve CAFÉ Straße Ørsted Œuvre"]) == [["naiv", "cafe", "strass", "orst", "oeuvr"]]
    # Other scripts are left as they are (no ASCII form); a term of 40 characters or more is dropped.
    assert english.analyze(["東京 αβγ " + "z" * 39 + " " + "y" * 40]) == [["東京", "αβγ", "z" * 39]]


def test_plain_keeps_every_word_as_written_lower_cased() -> None:
    assert make_analyzer("plain").analyze(["The Cats were running, a b"]) == [["the", "cats", "were", "running"]]


def test_cjk_bigram_pairs_characters_of_cjk_runs_and_keeps_other_words() -> None:
    terms = make_analyzer("cjk-bigram").analyze(["我爱北京 iPhone 15 中", "ＡＢＣ東京タワー", "한국어"])
    assert terms == [
        ["我爱", "爱北", "北京", "iphone", "15", "中"],
        ["abc", "東京", "京タ", "タワ", "ワー"],
        ["한국", "국어"],
    ]


def test_encoder_analyzer_uses_the_encoders_tokens_without_the_unknown_one(tmp_path: Path) -> None:
    encoder = StaticEncoder(tiny_static_folder(tmp_path / "static"))
    analyzer = make_analyzer("encoder", encoder)
    # "dogs" is two pieces of the tiny vocabulary; "zebra" is unknown (dropped); no cut at the encoder's 6 tokens.
    assert analyzer.analyze(["The dogs zebra", "a man a man a man a man"]) == [
        ["the", "dog", "##s"],
        ["a", "man"] * 4,
    ]
    assert analyzer.record()["model"] == encoder.describe()["model"]
    with pytest.raises(BadInputError, match="needs the encoder"):
        make_analyzer("encoder")
    with pytest.raises(BadInputError, match="token_strings"):
        make_analyzer("encoder", HashEncoder())  # type: ignore[arg-type]


def test_the_transformer_encoders_tokens(tiny_bert_dir: Path) -> None:
    from whitevec.encoders.transformer import Encoder

    encoder = Encoder(tiny_bert_dir, "last-avg", max_length=4)
    # The whole text, past max_length; special tokens and [UNK] dropped.
    assert encoder.token_strings(["The dogs zebra are eating food"]) == [
        ["the", "dog", "##s", "are", "eating", "food"]
    ]


def test_a_query_of_stop_words_punctuation_or_emoji_has_no_terms() -> None:
    index = LexicalIndex.build(TEXTS, make_analyzer("english"))
    queries = ["the of and", "?!, ...", "🙂🙂", "zebra", "cats"]
    assert index.has_terms(queries).tolist() == [False, False, False, True, True]
    rows, scores = index.search(queries, 3)
    assert (rows[:4] == -1).all() and np.isneginf(scores[:4]).all()  # zebra: a term the corpus never had
    assert (rows[4] >= 0).all()


@pytest.mark.parametrize("name", ["stemmed", "bigram", ""])
def test_an_unknown_analyzer_or_lexical_choice_is_one_line(name: str) -> None:
    with pytest.raises(BadInputError, match="unknown analyzer") as caught:
        make_analyzer(name)
    assert "\n" not in str(caught.value) and "english, cjk-bigram, plain, encoder" in str(caught.value)
    with pytest.raises(BadInputError, match="unknown --lexical 'bm26'; valid: none, bm25"):
        check_lexical("bm26", "english")


def test_a_recorded_analyzer_must_be_this_whitevecs() -> None:
    record = make_analyzer("english").record()
    assert Analyzer.from_record(record) == make_analyzer("english")
    with pytest.raises(CorruptFileError, match="not this whitevec's"):
        Analyzer.from_record({**record, "stop_stems": False})
    with pytest.raises(CorruptFileError, match="not this whitevec's"):
        Analyzer.from_record({**record, "stemmer": "porter"})
    with pytest.raises(CorruptFileError, match="unknown analyzer"):
        Analyzer.from_record({**record, "name": "klingon"})


# --- scores ---------------------------------------------------------------------------------------------------
# LanceDB 0.40.0's full-text index at its defaults on these six texts: each query's (row, _score), best first, as
# benchmarks/investigations/lexical_vs_lance.py's worker asks it (recorded 2026-12-07; LanceDB is no dependency).
LANCE_TEXTS = [
    "Apple banana cherry",
    "apple apple kiwi",
    "Banana: its running",
    "cherry date elderberry fig grape apple",
    "The i a x 42 B52 café",
    "zebra",
]
LANCE_SCORES = {
    "apple": [(1, 0.9674), (0, 0.7084), (3, 0.5074)],
    "banana run": [(2, 3.0262), (0, 1.0523)],
    "x 42": [(4, 2.7815)],
    "cafe b52": [(4, 2.7815)],
    "zebra": [(5, 2.1392)],
    "its i the": [],
    "apple apple": [(1, 1.9348), (0, 1.4168), (3, 1.0148)],
}


def test_the_default_lexical_index_ranks_and_scores_as_lancedbs_full_text_index() -> None:
    """The default analyzer and k1, b give LanceDB's BM25: its scores carry Lucene's old (k1 + 1) factor, bm25s's
    do not; the ranking is the same."""
    index = LexicalIndex.build(LANCE_TEXTS, make_analyzer("english"))
    rows, scores = index.search(list(LANCE_SCORES), len(LANCE_TEXTS))
    for (query, theirs), row, score in zip(LANCE_SCORES.items(), rows, scores, strict=True):
        ours = [
            (int(r), round(float(x) * (index.params.k1 + 1), 4)) for r, x in zip(row, score, strict=True) if r >= 0
        ]
        assert [r for r, _ in ours] == [r for r, _ in theirs], query
        np.testing.assert_allclose([x for _, x in ours], [x for _, x in theirs], atol=2e-4, err_msg=query)


def test_an_index_of_the_former_english_loads_and_analyses_as_built(tmp_path: Path) -> None:
    """A record of before the analyzer's later settings (no max_token_length, ascii_folding, stop_stems) is the
    former english: its queries are analysed as its documents were; a record mixing the two is refused."""
    former_record = {k: v for k, v in FORMER_DEFINITIONS["english"][0].record().items() if k in _FIRST_RECORD_KEYS}
    loaded = Analyzer.from_record(former_record)
    assert loaded == FORMER_DEFINITIONS["english"][0] and loaded != make_analyzer("english")
    assert loaded.analyze(["The B-52 I saw"]) == [["52", "saw"]]
    with pytest.raises(CorruptFileError, match="not this whitevec's"):
        Analyzer.from_record({**former_record, "stop_words": "nltk"})


_FIRST_RECORD_KEYS = ("name", "lowercase", "normalization", "token_pattern", "stop_words", "stemmer", "model")


@pytest.mark.parametrize("method", METHODS)
def test_scores_equal_bm25s_used_directly_on_the_same_tokens(method: str) -> None:
    analyzer = make_analyzer("english")
    index = LexicalIndex.build(TEXTS, analyzer, k1=1.2, b=0.6, method=method)
    oracle = bm25s.BM25(k1=1.2, b=0.6, method=method)
    oracle.index(analyzer.analyze(TEXTS), show_progress=False)
    rows, scores = index.search(QUERIES, len(TEXTS) + 2)
    for query, terms, row, score in zip(QUERIES, analyzer.analyze(QUERIES), rows, scores, strict=True):
        theirs = oracle.get_scores(terms)
        sharing = [i for i, doc in enumerate(analyzer.analyze(TEXTS)) if set(doc) & set(terms)]
        found = row[row >= 0]
        assert sorted(found.tolist()) == sharing, query  # every document sharing a term, no other
        np.testing.assert_array_equal(score[: found.size], theirs[found])
        assert (np.diff(score[: found.size]) <= 0).all() and (row[found.size :] == -1).all()


def test_best_first_with_equal_scores_by_row_and_depth_cut() -> None:
    index = LexicalIndex.build(["cat", "dog", "cat", "cat dog", "cat"], make_analyzer("plain"))
    rows, scores = index.search(["cat"], 3)
    assert rows.tolist() == [[0, 2, 4]] and scores.dtype == np.float32 and rows.dtype == np.int64
    with pytest.raises(BadInputError, match="depth"):
        index.search(["cat"], 0)


def test_bad_bm25_parameters_are_one_line() -> None:
    analyzer = make_analyzer("plain")
    for kwargs, needle in (
        ({"method": "bm26"}, "unknown BM25 method"),
        ({"b": 1.5}, "b must"),
        ({"k1": -1}, "k1"),
    ):
        with pytest.raises(BadInputError, match=needle):
            LexicalIndex.build(TEXTS, analyzer, **kwargs)


def test_no_document_with_a_term_builds_an_index_that_finds_nothing() -> None:
    index = LexicalIndex.build(["the", "", "of and"], make_analyzer("english"), method="bm25l")
    assert index.record()["documents_without_terms"] == 3 and index.record()["terms"] == 0
    assert (index.search(["the cat"], 2)[0] == -1).all()


# --- files ----------------------------------------------------------------------------------------------------
def test_saved_and_opened_it_answers_the_same_and_writes_the_same_bytes(tmp_path: Path) -> None:
    index = LexicalIndex.build(TEXTS, make_analyzer("english"), method="bm25+")
    for folder in (tmp_path / "a", tmp_path / "b"):
        folder.mkdir()
        assert index.save(folder) == list(LEXICAL_FILES)
    # Columns numbered by sorted term: another build of the same texts writes the same bytes.
    LexicalIndex.build(TEXTS, make_analyzer("english"), method="bm25+").save(tmp_path / "b")
    for name in LEXICAL_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # Across processes too (a set's order changes with the string hash seed): the terms are kept sorted.
    terms = json.loads((tmp_path / "a" / LEXICAL_TERMS).read_text(encoding="utf-8"))
    assert terms == sorted(terms) and len(terms) == index.record()["terms"]
    opened = LexicalIndex.open(tmp_path / "a", index.record())
    for got, expected in zip(opened.search(QUERIES, 5), index.search(QUERIES, 5), strict=True):
        np.testing.assert_array_equal(got, expected)
    assert opened.record() == index.record()


def build(tmp_path: Path, docs: list[Document], **kwargs: Any) -> Retriever:
    return Retriever.build(docs, tmp_path / "idx", encoder=HashEncoder(), **kwargs)


def test_build_with_lexical_records_it_and_lists_its_files(tmp_path: Path) -> None:
    with build(tmp_path, docs_of(TEXTS[:3] + TEXTS[4:]), lexical="bm25", transform="none") as retriever:
        manifest = retriever.manifest
        assert retriever.lexical is not None and retriever.lexical.count == retriever.count == 7
        assert "lexical=bm25/english" in repr(retriever)
    record = manifest["lexical"]
    assert (record["method"], record["k1"], record["b"], record["analyzer"]["name"]) == (
        "lucene",
        1.2,
        0.75,
        "english",
    )
    assert record["documents"] == 7 and record["documents_without_terms"] == 1  # "the of and to"
    assert set(LEXICAL_FILES) <= set(manifest["files"]) and is_lexical_record(record)
    assert read_manifest(tmp_path / "idx")["lexical"] == record  # checksums verified
    size = lexical_size(manifest)  # what index info adds under "size"
    held = (*LEXICAL_FILES, LEXICAL_COUNTS)  # the build's term counts are the lexical part's too
    assert size["lexical_bytes"] == sum((tmp_path / "idx" / name).stat().st_size for name in held)
    assert size["lexical_bytes_per_document"] == round(size["lexical_bytes"] / 7, 2)


def test_build_without_lexical_writes_none_of_it(tmp_path: Path) -> None:
    assert DEFAULT_LEXICAL == "none"
    with build(tmp_path, docs_of(TEXTS[:3])) as retriever:
        assert retriever.lexical is None and "lexical" not in retriever.manifest
    assert not any((tmp_path / "idx" / name).exists() for name in LEXICAL_FILES)


@pytest.mark.parametrize("victim", [LEXICAL_MATRIX, LEXICAL_TERMS])
def test_a_flipped_byte_in_a_lexical_file_is_caught_at_load(tmp_path: Path, victim: str) -> None:
    build(tmp_path, docs_of(TEXTS), lexical="bm25").close()
    path = tmp_path / "idx" / victim
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=f"{victim} fails its checksum"):
        Retriever.load(tmp_path / "idx", encoder=HashEncoder())


def test_the_layout_wants_the_lexical_files_exactly_when_the_manifest_has_lexical(tmp_path: Path) -> None:
    build(tmp_path, docs_of(TEXTS), lexical="bm25").close()
    manifest = read_manifest(tmp_path / "idx")
    check_index_manifest(manifest, tmp_path / "idx")
    without_record = {k: v for k, v in manifest.items() if k != "lexical"}
    without_files = {**manifest, "files": {k: v for k, v in manifest["files"].items() if k not in LEXICAL_FILES}}
    for broken in (without_record, without_files):
        with pytest.raises(CorruptFileError, match="lexical"):
            check_index_manifest(broken, tmp_path / "idx")


def test_load_answers_as_the_built_index(tmp_path: Path) -> None:
    with build(tmp_path, docs_of(TEXTS), lexical="bm25", analyzer="plain") as built:
        expected = built.lexical.search(QUERIES, 4) if built.lexical else None
    with Retriever.load(tmp_path / "idx", encoder=HashEncoder()) as loaded:
        assert loaded.lexical is not None and loaded.lexical.analyzer == make_analyzer("plain")
        for got, want in zip(loaded.lexical.search(QUERIES, 4), expected or (), strict=True):
            np.testing.assert_array_equal(got, want)


def test_an_encoder_analyzer_index_loads_with_its_model_bound(tmp_path: Path) -> None:
    folder = tiny_static_folder(tmp_path / "static")
    docs = docs_of(["a dog is running", "the cat is eating food", "red car on the street"])
    Retriever.build(
        docs, tmp_path / "idx", encoder=StaticEncoder(folder), lexical="bm25", analyzer="encoder"
    ).close()
    with Retriever.load(tmp_path / "idx") as loaded:  # the model made from the manifest
        assert loaded.lexical is not None and loaded.lexical.analyzer.name == "encoder"
        assert loaded.lexical.search(["dogs eating"], 3)[0].tolist() == [[0, 1, -1]]


# --- add ------------------------------------------------------------------------------------------------------
def test_add_keeps_the_lexical_index_in_step_with_the_vectors(tmp_path: Path) -> None:
    texts = [text for text in TEXTS if text]  # a blank one would be left out of both (no token the model knows)
    with build(tmp_path, docs_of(texts[:4]), lexical="bm25", analyzer="plain") as retriever:
        assert retriever.add(docs_of(texts[4:], tag="n")) == len(texts)
        assert retriever.lexical is not None and retriever.lexical.count == len(texts)
        added = retriever.lexical.search(QUERIES, 6)
        assert retriever.manifest["lexical"]["documents"] == len(texts)
        assert retriever.compact() == 2
        compacted = retriever.lexical.search(QUERIES, 6)
    # The same as one build over all the texts, in two segments and merged: every weight follows the lengths and
    # document counts of all of them.
    whole = LexicalIndex.build(texts, make_analyzer("plain")).search(QUERIES, 6)
    for got, want in zip(added, whole, strict=True):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(compacted, whole, strict=True):
        np.testing.assert_array_equal(got, want)
    with Retriever.load(tmp_path / "idx", encoder=HashEncoder()) as loaded:
        assert loaded.lexical is not None
        np.testing.assert_array_equal(loaded.lexical.search(QUERIES, 6)[0], compacted[0])


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_segments_score_bm25_as_one_build_of_their_live_documents(method: str) -> None:
    """Every bm25s method, weighted by the live documents of all segments (deleted ones left out): the scores of
    one bm25s index of those documents, to the bit."""
    from whitevec.index.lexical.counts import CountedSegment, TermCounts, search_segments

    texts = [*sentences(90, seed=8, length=9), "", "wing wing wing stall"]
    analyzer = make_analyzer("english")
    cuts = [(0, 40), (40, 41), (41, 92)]
    parts = []
    for start, stop in cuts:
        part = LexicalIndex.build(texts[start:stop], analyzer, method=method)
        parts.append(CountedSegment(start, part, TermCounts.of(part, texts[start:stop])))
    live = np.ones(len(texts), dtype=bool)
    live[[3, 40, 77]] = False
    queries = [*sentences(25, seed=9, length=3), "wing stall stall", "nothing here"]
    got = search_segments(parts, live, queries, 10, None)
    kept = [text for text, ok in zip(texts, live, strict=True) if ok]
    rows = np.flatnonzero(live)
    want_rows, want_scores = LexicalIndex.build(kept, analyzer, method=method).search(queries, 10)
    np.testing.assert_array_equal(got[0], np.where(want_rows >= 0, rows[np.maximum(want_rows, 0)], -1))
    np.testing.assert_array_equal(got[1], want_scores)
    allowed = np.arange(len(texts)) % 2 == 0  # a filter: the weights stay the live documents'
    filtered = search_segments(parts, live, queries, 10, allowed)
    want = LexicalIndex.build(kept, analyzer, method=method).search(queries, 10, allowed=allowed[rows])
    np.testing.assert_array_equal(filtered[1], want[1])


@pytest.mark.parametrize("method", ["lucene", "bm25+"])
def test_a_build_counts_its_terms_as_analysing_them_again_does(method: str, tmp_path: Path) -> None:
    """The counts a build keeps equal those of its texts analysed again, to the bit; their file keeps each array
    in the narrowest unsigned integer and reads back equal, and a file of the first format still reads."""
    from safetensors.numpy import save

    from whitevec.index.lexical.counts import TermCounts

    texts = [*sentences(60, seed=3, length=12), "", "wing wing wing stall"]
    made = LexicalIndex.build(texts, make_analyzer("english"), method=method, keep_counts=True)
    built, again = TermCounts.of_build(made), TermCounts.of(made, texts)
    np.testing.assert_array_equal(built.tf, again.tf)
    np.testing.assert_array_equal(built.lengths, again.lengths)
    assert built.tf.max() >= 3 and built.tf.dtype == np.float32 and built.lengths.dtype == np.int64
    data = built.to_bytes()
    read = TermCounts.from_bytes(data, tmp_path / "c", made)
    np.testing.assert_array_equal(read.tf, built.tf)
    np.testing.assert_array_equal(read.lengths, built.lengths)
    first = save({"tf": built.tf, "lengths": built.lengths}, metadata={"format": "whitevec-lexical-counts-1"})
    assert len(data) < len(first) / 3
    old = TermCounts.from_bytes(first, tmp_path / "c", made)
    np.testing.assert_array_equal(old.tf, built.tf)
    with pytest.raises(ValueError, match="read from disk"):
        TermCounts.of_build(LexicalIndex.build(texts, make_analyzer("english")))
    bad = save({"tf": built.tf, "lengths": built.lengths}, metadata={"format": "whitevec-lexical-counts-2"})
    with pytest.raises(CorruptFileError, match="does not fit"):
        TermCounts.from_bytes(bad, tmp_path / "c", made)


# --- bad input and old indexes --------------------------------------------------------------------------------
def test_a_bad_choice_refuses_the_build_before_anything_is_written(tmp_path: Path) -> None:
    for kwargs, needle in (
        ({"lexical": "bm25", "analyzer": "klingon"}, "unknown analyzer 'klingon'"),
        ({"lexical": "tf-idf"}, "unknown --lexical 'tf-idf'"),
        ({"lexical": "bm25", "backend": "milvus", "analyzer": "cjk-bigram"}, "'cjk-bigram' has no Milvus"),
    ):
        with pytest.raises(BadInputError, match=needle):
            build(tmp_path, docs_of(TEXTS), **kwargs)
        assert not (tmp_path / "idx").exists()


def test_the_command_line_refuses_a_bad_lexical_choice_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(sentences(5)) + "\n")
    model = str(tiny_static_folder(tmp_path / "static"))
    base = ["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "idx"), "--model", model]
    for extra, needle in (
        (["--lexical", "bm26"], "unknown --lexical 'bm26'"),
        (
            ["--lexical", "bm25", "--engine", "ray", "--backend", "milvus", "--analyzer", "encoder"],
            "'encoder' has no Milvus counterpart",
        ),
    ):
        code, _, err = run_cli([*base, *extra], capsys)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("whitevec: error: ") and needle in lines[0], (
            err
        )


def test_bad_lexical_choices_are_refused_before_the_model_loads(tmp_path: Path) -> None:
    from whitevec.workflows import build_index_file

    def no_model(**_: Any) -> Any:
        raise AssertionError("the model was loaded before the lexical options were checked")

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(sentences(5)) + "\n")
    model = {"model": str(tiny_static_folder(tmp_path / "static")), "pooling": None}
    for lexical, analyzer, needle in (("bm26", "english", "--lexical"), ("bm25", "klingon", "analyzer")):
        with pytest.raises(BadInputError, match=needle):
            build_index_file(
                corpus, tmp_path / "idx", encoder=model, lexical=lexical, analyzer=analyzer, make_encoder=no_model
            )


def test_the_help_names_the_default_of_lexical() -> None:
    from whitevec.cli.index import LexicalOpt

    help_text = LexicalOpt.__metadata__[0].help
    assert f"Default: {DEFAULT_LEXICAL}." in help_text


def test_an_index_written_before_the_lexical_part_loads_and_says_how_to_add_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = shutil.copytree(SAVED / "index-flat-whitening", tmp_path / "index")
    with Retriever.load(index, model=SAVED / "static") as retriever:
        assert retriever.lexical is None and retriever.search(["a query"], k=2)[0]
    code, stdout, err = run_cli(["index", "info", str(index)], capsys)
    assert code == 0, err
    assert "--lexical bm25" in json.loads(stdout)["size"]["lexical"]
