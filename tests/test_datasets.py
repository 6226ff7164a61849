"""Readers: hand-written fixtures (tests/fixtures) for formats and quirks; the shared data for real counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from whitevec.datasets import (
    CHINESE_TASKS,
    DEFAULT_TASKS,
    Pair,
    StsTask,
    available_tasks,
    load_sts_task,
    read_pairs_file,
    read_texts_file,
    resolve_data_dir,
)
from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError

FIXTURES = Path(__file__).parent / "fixtures"
DATA = FIXTURES / "data"


def _copy_tree(src: Path, dst: Path) -> Path:
    for file in src.rglob("*"):
        if file.is_file():
            target = dst / file.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(file.read_bytes())
    return dst


# --- data folder -------------------------------------------------------------------------------------------


def test_resolve_data_dir_argument_env_and_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WHITEVEC_DATA", raising=False)
    assert resolve_data_dir(DATA) == DATA
    with pytest.raises(DataNotFoundError, match=r"--data-dir DIR or set WHITEVEC_DATA="):
        resolve_data_dir()
    monkeypatch.setenv("WHITEVEC_DATA", str(DATA))
    assert resolve_data_dir() == DATA
    missing = tmp_path / "nowhere"
    with pytest.raises(DataNotFoundError, match=r"nowhere.*from --data-dir.*does not exist.*WHITEVEC_DATA"):
        resolve_data_dir(missing)
    monkeypatch.setenv("WHITEVEC_DATA", str(missing))
    with pytest.raises(DataNotFoundError, match=r"nowhere.*from \$WHITEVEC_DATA"):
        resolve_data_dir()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(DataNotFoundError, match="is not a folder"):
        resolve_data_dir(a_file)


def test_unknown_task_variant_split_and_absent_task() -> None:
    with pytest.raises(BadInputError, match=r"unknown STS task 'sts99'.*stsb, sts12.*stsb-zh"):
        load_sts_task("sts99", DATA)
    with pytest.raises(BadInputError, match="original, senteval-tokenized"):
        load_sts_task("stsb", DATA, variant="moses")
    with pytest.raises(BadInputError, match=r"no split 'validation'.*train, dev, test"):
        load_sts_task("stsb", DATA, split="validation")
    with pytest.raises(BadInputError, match="only a test split"):
        load_sts_task("sts15", DATA, split="dev")
    with pytest.raises(DataNotFoundError, match=r"sickr.*not a folder.*optional"):
        load_sts_task("sickr", DATA)
    with pytest.raises(DataNotFoundError, match=r"sts12.*not a folder"):
        load_sts_task("sts12", DATA)
    assert available_tasks(DATA) == ["stsb", "sts15", "atec", "stsb-zh"]


# --- STS-B ---------------------------------------------------------------------------------------------------


def test_stsb_reads_7_and_9_columns_with_unbalanced_quotes() -> None:
    task = load_sts_task("STS-B", DATA)
    assert task.name == "stsb"
    assert list(task.splits) == ["train", "dev", "test"]
    assert {k: len(v) for k, v in task.splits.items()} == {"train": 3, "dev": 2, "test": 3}
    assert list(task.subsets) == ["test"] and task.n_pairs == 3
    assert task.splits["train"][1] == Pair('He said "no way to the plan.', "He refused the plan.", 2.4)
    assert task.splits["dev"][1] == Pair("Why?", 'Because "it is.', 1.25)
    # Surrounding spaces stripped, the text otherwise as published.
    assert task.splits["train"][2].sentence1 == "A man is playing a flute."
    assert task.all_pairs() == task.splits["test"]
    assert task.all_pairs()[1] == Pair('Stocks fall "sharply', "A plane is taking off.", 0.0)


def test_stsb_dev_split_and_tokenized_variant() -> None:
    dev = load_sts_task("stsb", DATA, split="dev")
    assert list(dev.subsets) == ["dev"] and dev.n_pairs == 2
    assert load_sts_task("stsb", DATA, split="valid").subsets == dev.subsets
    tok = load_sts_task("stsb", DATA, variant="senteval-tokenized")
    assert tok.variant == "senteval-tokenized"
    assert tok.splits["train"][0] == Pair("a plane is taking off.", "an air plane is taking off.", 5.0)


def test_sentences_target_and_train_unique_first_seen() -> None:
    task = load_sts_task("stsb", DATA)
    target = task.sentences("target")
    assert target == [
        "A plane is taking off.",
        "An air plane is taking off.",
        'He said "no way to the plan.',
        "He refused the plan.",
        "A man is playing a flute.",
        "A dog runs.",
        "Why?",
        'Because "it is.',
        "A cat sleeps.",
        "A cat is sleeping.",
        'Stocks fall "sharply',
    ]
    assert task.sentences() == target
    assert task.sentences("train") == target[:5]
    assert task.sentences("test") == ["A cat sleeps.", "A cat is sleeping.", 'Stocks fall "sharply',
                                      "A plane is taking off.", "A dog runs."]  # fmt: skip


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("a\tb\tc\td\t1.0\tx\n", "expected 7 or 9 TAB-separated columns.*found 6"),
        ("a\tb\tc\td\t1.0\tx\ty\tz\n", "found 8"),
        ("a\tb\tc\td\tfive\tx\ty\n", "score 'five' is not a number"),
        ("a\tb\tc\td\tnan\tx\ty\n", "not a finite number"),
        ("\n", "found 1"),
    ],
)
def test_stsb_bad_row_names_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    data = _copy_tree(DATA, tmp_path / "data")
    path = data / "sts" / "stsb" / "original" / "sts-dev.csv"
    path.write_text(path.read_text(encoding="utf-8") + row, encoding="utf-8")
    with pytest.raises(CorruptFileError, match=rf"sts-dev\.csv, line 3: .*{message}"):
        load_sts_task("stsb", data)


def test_stsb_missing_split_file(tmp_path: Path) -> None:
    data = _copy_tree(DATA, tmp_path / "data")
    (data / "sts" / "stsb" / "original" / "sts-train.csv").unlink()
    with pytest.raises(DataNotFoundError, match=r"sts-train\.csv does not exist"):
        load_sts_task("stsb", data)


def test_non_utf8_names_line(tmp_path: Path) -> None:
    data = _copy_tree(DATA, tmp_path / "data")
    path = data / "sts" / "stsb" / "original" / "sts-test.csv"
    path.write_bytes(path.read_bytes() + b"a\tb\tc\td\t1.0\tcaf\xe9\tx\n")
    with pytest.raises(CorruptFileError, match=r"sts-test\.csv, line 4: not valid UTF-8"):
        load_sts_task("stsb", data)


# --- SemEval -------------------------------------------------------------------------------------------------


def test_semeval_blank_gold_dropped_all_and_gold_only_skipped() -> None:
    task = load_sts_task("sts15", DATA)
    # Case-insensitive order; STS.gs.ALL.txt and STS.gs.SMT.txt (no input) are not subsets; outputs ignored.
    assert list(task.subsets) == ["Answers-forums", "headlines"]
    assert task.subsets["headlines"] == [
        Pair("Obama visits Paris", "Obama in Paris", 4.2),
        Pair("Markets rise", "Markets fall", 1.0),
        Pair("A dog barks", "A dog is barking", 5.0),
    ]
    # Extra input columns ignored.
    assert task.subsets["Answers-forums"][0] == Pair("Is it safe?", "Is this safe?", 3.6)
    assert task.n_pairs == 5 and list(task.splits) == ["test"]
    assert task.all_pairs() == task.subsets["Answers-forums"] + task.subsets["headlines"]
    # The unscored pair's sentences are not part of the target either; duplicates count once.
    assert task.sentences("target") == [
        "Is it safe?", "Is this safe?", "Obama visits Paris", "No idea", "Obama in Paris",
        "Markets rise", "Markets fall", "A dog barks", "A dog is barking",
    ]  # fmt: skip
    with pytest.raises(BadInputError, match=r"task sts15 has no train split.*--fit-on target.*--fit-on FILE"):
        task.sentences("train")


def test_semeval_line_count_mismatch_and_bad_gold(tmp_path: Path) -> None:
    data = _copy_tree(DATA, tmp_path / "data")
    folder = data / "sts" / "sts15" / "original"
    gold = folder / "STS.gs.headlines.txt"
    gold.write_text("4.20\n\n1.00\n")
    with pytest.raises(CorruptFileError, match=r"STS\.input\.headlines\.txt has 4 lines.*has 3"):
        load_sts_task("sts15", data)
    gold.write_text("4.20\n\nhigh\n5.00\n")
    with pytest.raises(CorruptFileError, match=r"STS\.gs\.headlines\.txt, line 3: gold score 'high'"):
        load_sts_task("sts15", data)
    gold.write_text("4.20\n\n1.00\n5.00\n")
    (folder / "STS.input.headlines.txt").write_text("a\tb\nc\td\nno tab here\ne\tf\n")
    with pytest.raises(CorruptFileError, match=r"STS\.input\.headlines\.txt, line 3: expected sentence1<TAB>"):
        load_sts_task("sts15", data)


def test_semeval_crlf_reads_like_lf(tmp_path: Path) -> None:
    data = _copy_tree(DATA, tmp_path / "data")
    folder = data / "sts" / "sts15" / "original"
    for path in folder.glob("STS.*.txt"):
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert load_sts_task("sts15", data).subsets == load_sts_task("sts15", DATA).subsets


# --- Chinese -------------------------------------------------------------------------------------------------


def test_chinese_layout() -> None:
    sts = load_sts_task("stsb-zh", DATA)
    assert list(sts.splits) == ["train", "valid", "test"]
    assert sts.subsets["test"][0] == Pair("一个女孩在梳头。", "一只猫在睡觉。", 0.0)
    assert len(sts.sentences("train")) == 4
    assert sts.sentences()[0] == "一个女孩在梳头。" and len(sts.sentences()) == 8
    atec = load_sts_task("ATEC", DATA, split="dev")
    assert list(atec.splits) == ["valid", "test"] and list(atec.subsets) == ["valid"]
    assert {p.score for p in atec.splits["test"]} == {0.0, 1.0}
    assert atec.splits["test"][1].sentence1 == "蚂蚁借呗 提前还款"
    with pytest.raises(BadInputError, match="task atec has no train split"):
        atec.sentences("train")
    with pytest.raises(BadInputError, match="use variant 'original'"):
        load_sts_task("atec", DATA, variant="senteval-tokenized")


def test_chinese_bad_row(tmp_path: Path) -> None:
    data = _copy_tree(DATA, tmp_path / "data")
    path = data / "zh" / "ATEC" / "ATEC.valid.data"
    path.write_text(path.read_text(encoding="utf-8") + "只有一列\t1\n", encoding="utf-8")
    with pytest.raises(
        CorruptFileError, match=r"ATEC\.valid\.data, line 3: expected sentence1<TAB>sentence2<TAB>"
    ):
        load_sts_task("atec", data)


def test_sick_senteval_files(tmp_path: Path) -> None:
    folder = tmp_path / "sts" / "sickr"
    folder.mkdir(parents=True)
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    for name, rows in (
        ("SICK_train.txt", "1\tA dog runs\tA dog is running\t4.9\tENTAILMENT\n"),
        ("SICK_trial.txt", "2\tA cat sleeps\tA man sings\t1.1\tNEUTRAL\n"),
        ("SICK_test_annotated.txt", "3\tA boy plays\tA boy is playing\t4.5\tENTAILMENT\n"),
    ):
        (folder / name).write_text(header + rows)
    task = load_sts_task("sick-r", tmp_path)
    assert task.name == "sickr" and list(task.splits) == ["train", "dev", "test"]
    assert task.all_pairs() == [Pair("A boy plays", "A boy is playing", 4.5)]


# --- pairs and texts files -----------------------------------------------------------------------------------


def test_pairs_tsv_with_header_in_any_order() -> None:
    task = read_pairs_file(FIXTURES / "pairs" / "mine.tsv")
    assert isinstance(task, StsTask) and task.name == "mine" and list(task.subsets) == ["mine"]
    assert task.all_pairs() == [
        Pair("A cat sleeps.", "A cat is sleeping.", 4.5),
        Pair('A plane "flies.', "A dog runs.", 1.0),
    ]
    assert task.sentences("target") == ["A cat sleeps.", "A cat is sleeping.", 'A plane "flies.', "A dog runs."]


def test_pairs_csv_jsonl_and_headerless_agree() -> None:
    csv_task = read_pairs_file(FIXTURES / "pairs" / "mine.csv")
    assert csv_task.all_pairs() == [
        Pair("A cat, asleep.", "A cat is sleeping.", 4.5),
        Pair('He said "hi".', "A dog runs.", 0.5),
    ]
    expected = [Pair("A cat sleeps.", "A cat is sleeping.", 4.5), Pair("A dog runs.", "A plane flies.", 0.0)]
    assert read_pairs_file(FIXTURES / "pairs" / "noheader.tsv").all_pairs() == expected
    assert read_pairs_file(FIXTURES / "pairs" / "mine.jsonl").all_pairs() == expected


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.tsv", "x\ty\t1\nx\ty\n", r"a\.tsv, line 2: expected 3 TAB-separated columns"),
        ("b.tsv", "x\ty\t1\n\nx\ty\tgood\n", r"b\.tsv, line 3: score 'good' is not a number"),
        ("c.tsv", "sentence1\tscore\nx\t1\n", r"c\.tsv, line 1: header lacks column\(s\) sentence2"),
        ("d.tsv", "x\t \t1\n", r"d\.tsv, line 1: sentence2 is empty"),
        ("e.csv", "sentence1,sentence2,score\na,b,1\na,b\n", r"e\.csv, line 3: expected 3 comma-separated"),
        ("f.csv", "x,y,inf\n", r"f\.csv, line 1: score 'inf' is not a finite number"),
        ("g.jsonl", '{"sentence1": "a", "sentence2": "b", "score": 1}\n{"x"\n', r"line 2: not valid JSON"),
        ("h.jsonl", '{"sentence1": "a", "score": 1}\n', r"h\.jsonl, line 1: object lacks sentence2"),
        ("i.jsonl", '[1, 2, 3]\n', r"line 1: expected a JSON object"),
        ("j.jsonl", '{"sentence1": "a", "sentence2": 3, "score": 1}\n', r"1: sentence2 must be a string"),
        ("k.jsonl", '{"sentence1": "a", "sentence2": "b", "score": true}\n', r"1: score True is not a number"),
        ("l.tsv", "\n\n", r"l\.tsv holds no pairs"),
        ("m.csv", 'x,y,1\na,"b\n', r"m\.csv, line 2: bad CSV"),
        ("n.csv", 'x,"y\nz",1\na,b,c\n', r"n\.csv, line 3: score 'c'"),
    ],
)  # fmt: skip
def test_pairs_bad_rows(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BadInputError, match=message):
        read_pairs_file(path)


def test_pairs_csv_quoted_newline(tmp_path: Path) -> None:
    path = tmp_path / "multi.csv"
    path.write_text('sentence1,sentence2,score\n"two\nlines",b,1\n', encoding="utf-8")
    assert read_pairs_file(path).all_pairs() == [Pair("two\nlines", "b", 1.0)]


def test_pairs_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match=r"pairs file .*absent\.tsv does not exist"):
        read_pairs_file(tmp_path / "absent.tsv")


def test_read_texts_file(tmp_path: Path) -> None:
    assert read_texts_file(FIXTURES / "texts.txt") == ["first text", "second text", "third text"]
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(BadInputError, match="holds no text"):
        read_texts_file(empty)
    with pytest.raises(DataNotFoundError, match="does not exist"):
        read_texts_file(tmp_path / "absent.txt")
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(BadInputError, match=r"bin\.txt, line 2: not valid UTF-8"):
        read_texts_file(binary)


def test_line_separator_characters_stay_inside_sentences(tmp_path: Path) -> None:
    # str.splitlines would break these rows in two; the readers split on "\n" only.
    path = tmp_path / "odd.tsv"
    path.write_text("a\u2028b\tc\x85d\t2\n", encoding="utf-8")
    assert read_pairs_file(path).all_pairs() == [Pair("a\u2028b", "c\x85d", 2.0)]


# --- the shared data (skipped where absent) ------------------------------------------------------------------


@pytest.mark.data
def test_real_row_counts(data_dir: Path) -> None:
    stsb = load_sts_task("stsb", data_dir)
    assert {k: len(v) for k, v in stsb.splits.items()} == {"train": 5749, "dev": 1500, "test": 1379}
    assert stsb.n_pairs == 1379
    expected = {"sts12": 3108, "sts13": 1500, "sts14": 3750, "sts15": 3000}
    for name, count in expected.items():
        assert load_sts_task(name, data_dir).n_pairs == count, name
    assert list(load_sts_task("sts13", data_dir).subsets) == ["FNWN", "headlines", "OnWN"]
    assert list(load_sts_task("sts12", data_dir).subsets) == [
        "MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews",
    ]  # fmt: skip
    for name in DEFAULT_TASKS:
        tok = load_sts_task(name, data_dir, variant="senteval-tokenized")
        assert tok.n_pairs == load_sts_task(name, data_dir).n_pairs, name


@pytest.mark.data
def test_real_unique_target_sentences(data_dir: Path) -> None:
    # Measured with this reader (surrounding white space stripped); pins the fitting set for the reports.
    counts = {name: len(load_sts_task(name, data_dir).sentences("target")) for name in DEFAULT_TASKS}
    assert counts == {"stsb": 15457, "sts12": 4960, "sts13": 2644, "sts14": 6354, "sts15": 5183}


@pytest.mark.data
def test_real_chinese_tasks_load(data_dir: Path) -> None:
    for name in CHINESE_TASKS:
        task = load_sts_task(name, data_dir)
        scores = {p.score for pairs in task.splits.values() for p in pairs}
        if name == "stsb-zh":
            assert scores == {0.0, 1.0, 2.0, 3.0, 4.0, 5.0}
            assert {k: len(v) for k, v in task.splits.items()} == {"train": 5231, "valid": 1458, "test": 1361}
        else:
            assert scores == {0.0, 1.0}, name
            assert list(task.splits) == ["valid", "test"], name
        assert task.n_pairs == len(task.splits["test"])
