"""Readers for the semantic textual similarity (STS) benchmarks, as published.

Layout under the data folder (see ``resolve_data_dir``)::

    sts/stsb/{original,senteval-tokenized}/sts-{train,dev,test}.csv
    sts/sts1X/{original,senteval-tokenized}/STS.input.<subset>.txt + STS.gs.<subset>.txt   (X = 2..6)
    sts/sickr/[original/]SICK_{train,trial,test_annotated}.txt   (or SICK.txt with a SemEval_set column)
    zh/<TASK>/<TASK>.{train,valid,test}.data   (ATEC, BQ, LCQMC, PAWSX, STS-B)

Every reader strips white space around each sentence and otherwise keeps the text as published: several
SemEval files (all of STS14 deft-news, for instance) and some STS-B rows carry leading or trailing spaces that
mean nothing, and stripping them lets identical sentences count once when a transform is fitted.
Readers know nothing of models; they return :class:`StsTask` objects holding :class:`Pair` lists.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from whitevec.datasets.paths import read_lines, resolve_data_dir
from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError

STS_TASKS: tuple[str, ...] = ("stsb", "sts12", "sts13", "sts14", "sts15", "sts16", "sickr")
"""English STS tasks whitevec can read (``sts16`` and ``sickr`` only where their folder is on disk)."""

DEFAULT_TASKS: tuple[str, ...] = ("stsb", "sts12", "sts13", "sts14", "sts15")
"""The English tasks in the shared data and in the published whitening tables."""

CHINESE_TASKS: tuple[str, ...] = ("atec", "bq", "lcqmc", "pawsx", "stsb-zh")
"""Chinese matching/STS tasks in the ``<TASK>/<TASK>.{train,valid,test}.data`` layout."""

VARIANTS: tuple[str, ...] = ("original", "senteval-tokenized")

_ALIASES = {
    "sts-b": "stsb",
    "sts_b": "stsb",
    "sick": "sickr",
    "sick-r": "sickr",
    "sick_r": "sickr",
    "sts-b-zh": "stsb-zh",
    "stsb_zh": "stsb-zh",
    "sts-b_zh": "stsb-zh",
    "zh-stsb": "stsb-zh",
}

# Folder names under <data>/zh/ for the Chinese tasks.
_CHINESE_FOLDERS = {"atec": "ATEC", "bq": "BQ", "lcqmc": "LCQMC", "pawsx": "PAWSX", "stsb-zh": "STS-B"}

# Fitting on "target" walks the splits in this order, so the first-seen sentence order is train, dev, test.
_SPLIT_ORDER = ("train", "dev", "valid", "test")
_SPLIT_ALIASES = {"dev": "valid", "valid": "dev", "trial": "dev"}


@dataclass(frozen=True)
class Pair:
    """One scored sentence pair; ``score`` is the gold similarity (0-5 for STS, 0/1 for matching sets)."""

    sentence1: str
    sentence2: str
    score: float


@dataclass
class StsTask:
    """A task: the named subsets that are evaluated, and every split on disk (used for fitting).

    Attributes:
        name: task name (``stsb``, ``sts12``, ..., or a pairs file's stem).
        subsets: what is evaluated, e.g. STS12's ``MSRpar``, ``MSRvid``...; STS-B: ``{"test": ...}``.
        splits: every split the task has on disk (``train``, ``dev``/``valid``, ``test``), in that order;
            SemEval years have only ``test`` (all subsets concatenated).
        source: the folder or file the task was read from.
        variant: ``original`` or ``senteval-tokenized`` text.
    """

    name: str
    subsets: dict[str, list[Pair]]
    splits: dict[str, list[Pair]]
    source: str = ""
    variant: str = "original"

    def sentences(self, fit_on: str = "target") -> list[str]:
        """Unique sentences, in first-seen order (sentence1 then sentence2 of each pair).

        Args:
            fit_on: ``"target"``: every sentence of the task in all splits (STS-B train+dev+test, every SemEval
                subset, every Chinese ``.data`` file present); ``"train"``: the train split only; any other
                split name on disk (``"dev"``, ``"valid"``, ``"test"``) selects that split.

        Raises:
            BadInputError: the task has no such split (e.g. ``train`` for STS12 or ATEC here).
        """
        if fit_on == "target":
            groups = list(self.splits.values())
        else:
            split = self._split_key(fit_on)
            if split is None:
                have = ", ".join(self.splits) or "none"
                raise BadInputError(
                    f"task {self.name} has no {fit_on} split on disk (it has: {have}); "
                    "fit on the task's own sentences with --fit-on target, or name a text file "
                    "(one sentence per line) with --fit-on FILE"
                )
            groups = [self.splits[split]]
        seen: dict[str, None] = {}
        for pairs in groups:
            for pair in pairs:
                seen.setdefault(pair.sentence1)
                seen.setdefault(pair.sentence2)
        return list(seen)

    def evaluated_sentences(self) -> list[str]:
        """Unique sentences of the evaluated pairs (``subsets``), in first-seen order (sentence1 then sentence2
        of each pair): what scoring the task encodes, where :meth:`sentences` gives what a transform is fitted
        on."""
        return list(dict.fromkeys(s for pair in self.all_pairs() for s in (pair.sentence1, pair.sentence2)))

    def _split_key(self, name: str) -> str | None:
        if name in self.splits:
            return name
        alias = _SPLIT_ALIASES.get(name)
        if alias is not None and alias in self.splits:
            return alias
        return None

    def all_pairs(self) -> list[Pair]:
        """Every evaluated pair, subsets concatenated in order (the ``all`` aggregation)."""
        return [pair for pairs in self.subsets.values() for pair in pairs]

    @property
    def n_pairs(self) -> int:
        """Number of evaluated pairs."""
        return sum(len(pairs) for pairs in self.subsets.values())

    def check_scores_vary(self) -> None:
        """Raise BadInputError when an evaluated subset's gold scores are all equal (see ``check_scores_vary``):
        every subset gets its own correlation, so one constant subset inside a real task is refused too."""
        where = self.source or self.name
        for name, pairs in self.subsets.items():
            check_scores_vary(pairs, where if len(self.subsets) == 1 else f"subset {name} of {where}")


def check_scores_vary(pairs: Sequence[Pair], what: str) -> None:
    """Raise BadInputError unless ``pairs`` (``what`` names them: "the dev data", a file) hold at least two
    different gold scores: a rank correlation against constant scores is undefined (SciPy warns and gives NaN).
    The one check of ``whitevec eval`` (made as the pairs are read, before the model loads), ``evaluate_sts`` and
    ``tune``."""
    scores = {pair.score for pair in pairs}
    if len(scores) > 1:
        return
    if len(pairs) < 2:
        raise BadInputError(
            f"{what} holds {len(pairs)} scored pair(s); a correlation needs two or more with different gold scores"
        )
    raise BadInputError(
        f"every pair of {what} has the same gold score ({scores.pop():g}); a correlation needs varying scores"
    )


def canonical_task_name(name: str) -> str:
    """Lower-case ``name`` and map aliases (``sts-b``, ``sick-r``...) to the names whitevec uses.

    Raises:
        BadInputError: an unknown name; the message lists the valid ones.
    """
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in STS_TASKS and key not in CHINESE_TASKS:
        raise BadInputError(
            f"unknown STS task {name!r}; valid tasks: {', '.join(STS_TASKS + CHINESE_TASKS)} "
            "(or evaluate your own pairs file with --pairs FILE)"
        )
    return key


def available_tasks(data_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Names of the tasks whose folder exists under the data folder, English first."""
    root = resolve_data_dir(data_dir)
    found = [name for name in STS_TASKS if (root / "sts" / name).is_dir()]
    found += [name for name in CHINESE_TASKS if (root / "zh" / _CHINESE_FOLDERS[name]).is_dir()]
    return found


def load_sts_task(
    name: str,
    data_dir: str | os.PathLike[str] | None = None,
    variant: str = "original",
    split: str = "test",
) -> StsTask:
    """Read one STS task from the data folder.

    Args:
        name: one of :data:`STS_TASKS` or :data:`CHINESE_TASKS` (case-insensitive; ``sts-b``, ``sick-r`` accepted).
        data_dir: the data folder; ``None`` reads ``$WHITEVEC_DATA``.
        variant: ``original`` (text as published) or ``senteval-tokenized`` (SentEval's Moses-tokenised,
            lower-cased copy; English STS-B and STS12-16 only).
        split: for tasks with several splits (STS-B, SICK-R, Chinese), the split evaluated: ``test`` (default),
            ``dev``/``valid`` or ``train``. SemEval years have only ``test``.

    Raises:
        BadInputError: unknown task, variant or split.
        DataNotFoundError: data folder or the task's files are missing.
        CorruptFileError: a file does not have the published format (the message names file and line).
    """
    task = canonical_task_name(name)
    if variant not in VARIANTS:
        raise BadInputError(f"unknown data variant {variant!r}; valid variants: {', '.join(VARIANTS)}")
    root = resolve_data_dir(data_dir)
    if task == "stsb":
        folder = _task_folder(root / "sts" / "stsb" / variant, task)
        splits = {s: _read_stsb_csv(folder / f"sts-{s}.csv") for s in ("train", "dev", "test")}
        return _with_eval_split(task, splits, split, folder, variant)
    if task == "sickr":
        if variant != "original":
            raise BadInputError("sickr has no senteval-tokenized variant here; use variant 'original'")
        base = root / "sts" / "sickr"
        folder = base / "original" if (base / "original").is_dir() else base
        folder = _task_folder(folder, task)
        return _with_eval_split(task, _read_sick(folder), split, folder, variant)
    if task in CHINESE_TASKS:
        if variant != "original":
            raise BadInputError(f"{task} is only available as published; use variant 'original'")
        stem = _CHINESE_FOLDERS[task]
        folder = _task_folder(root / "zh" / stem, task)
        splits = {}
        for s in ("train", "valid", "test"):
            path = folder / f"{stem}.{s}.data"
            if path.is_file():
                splits[s] = _read_chinese(path)
        if not splits:
            raise DataNotFoundError(f"no {stem}.{{train,valid,test}}.data files in {folder} for task {task}")
        return _with_eval_split(task, splits, split, folder, variant)
    # SemEval STS 2012-2016: named subsets, test only.
    folder = _task_folder(root / "sts" / task / variant, task)
    if split != "test":
        raise BadInputError(f"task {task} has only a test split (its subsets); got split {split!r}")
    subsets = read_semeval_folder(folder)
    if not subsets:
        raise DataNotFoundError(
            f"no STS.input.<subset>.txt / STS.gs.<subset>.txt pairs of files in {folder} for task {task}"
        )
    every = [pair for pairs in subsets.values() for pair in pairs]
    return StsTask(task, subsets, {"test": every}, source=str(folder), variant=variant)


# Tasks the shared data folder does not hold; readers still work when someone adds their files.
_OPTIONAL = {"sts16", "sickr"}


def _task_folder(folder: Path, task: str) -> Path:
    if not folder.is_dir():
        hint = (
            f"{task} is optional and not part of the shared data; add its published files there to use it"
            if task in _OPTIONAL
            else "check --data-dir / $WHITEVEC_DATA (it should hold sts/ and zh/, e.g. ../shared/data)"
        )
        raise DataNotFoundError(f"data for task {task} not found: {folder} is not a folder; {hint}")
    return folder


def _with_eval_split(task: str, splits: dict[str, list[Pair]], split: str, folder: Path, variant: str) -> StsTask:
    ordered = {s: splits[s] for s in _SPLIT_ORDER if s in splits}
    probe = StsTask(task, {}, ordered)
    key = probe._split_key(split)
    if key is None:
        raise BadInputError(f"task {task} has no split {split!r} on disk; it has: {', '.join(ordered)}")
    return StsTask(task, {key: ordered[key]}, ordered, source=str(folder), variant=variant)


def _parse_score(text: str, path: Path, line_no: int, what: str = "score") -> float:
    try:
        value = float(text)
    except ValueError:
        raise CorruptFileError(f"{path}, line {line_no}: {what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise CorruptFileError(f"{path}, line {line_no}: {what} {text!r} is not a finite number")
    return value


def _read_stsb_csv(path: Path) -> list[Pair]:
    """STS-B ``sts-*.csv``: TAB-separated, quoting off; 7 or 9 columns; score, sentences in fields 4, 5, 6.

    Quoting must stay off: sentences hold unbalanced double quotes that a CSV parser would run across lines.
    """
    if not path.is_file():
        raise DataNotFoundError(f"STS-B file {path} does not exist")
    pairs = []
    for line_no, line in enumerate(read_lines(path, CorruptFileError), start=1):
        fields = line.split("\t")
        if len(fields) not in (7, 9):
            raise CorruptFileError(
                f"{path}, line {line_no}: expected 7 or 9 TAB-separated columns (genre, file, year, id, score, "
                f"sentence1, sentence2[, source, license]), found {len(fields)}"
            )
        score = _parse_score(fields[4].strip(), path, line_no)
        pairs.append(Pair(fields[5].strip(), fields[6].strip(), score))
    return pairs


def read_semeval_folder(folder: Path) -> dict[str, list[Pair]]:
    """Read every ``STS.input.<subset>.txt`` with its ``STS.gs.<subset>.txt`` in a SemEval STS folder.

    Subsets come in case-insensitive name order (SentEval's order for 2012-2016). ``STS.gs.ALL.txt`` (the
    2012 concatenation) and gold files without an input file (2013 SMT, not redistributable) are skipped;
    an input file without gold is skipped too (nothing to score).
    """
    subsets: dict[str, list[Pair]] = {}
    inputs = sorted(folder.glob("STS.input.*.txt"), key=lambda p: p.name.lower())
    for input_path in inputs:
        subset = input_path.name[len("STS.input.") : -len(".txt")]
        if subset.upper() == "ALL":
            continue
        gold_path = folder / f"STS.gs.{subset}.txt"
        if not gold_path.is_file():
            continue
        subsets[subset] = read_semeval_subset(input_path, gold_path)
    return subsets


def read_semeval_subset(input_path: Path, gold_path: Path) -> list[Pair]:
    """Pair input line i (``sentence1<TAB>sentence2[<TAB>...]``) with gold line i; blank gold lines dropped.

    Blank gold lines (2015, 2016) mark pairs that were never scored. Columns after the second (source
    columns in some releases) are ignored.

    Raises:
        CorruptFileError: the two files have different line counts, an input line has fewer than two
            columns, or a gold value is not a number.
    """
    inputs = read_lines(input_path, CorruptFileError)
    golds = read_lines(gold_path, CorruptFileError)
    if len(inputs) != len(golds):
        raise CorruptFileError(
            f"{input_path} has {len(inputs)} lines but its gold file {gold_path.name} has {len(golds)}; "
            "line i of one must pair with line i of the other"
        )
    pairs = []
    for line_no, (line, gold) in enumerate(zip(inputs, golds, strict=True), start=1):
        gold = gold.strip()
        if not gold:
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise CorruptFileError(
                f"{input_path}, line {line_no}: expected sentence1<TAB>sentence2, found {len(fields)} column(s)"
            )
        score = _parse_score(gold, gold_path, line_no, what="gold score")
        pairs.append(Pair(fields[0].strip(), fields[1].strip(), score))
    return pairs


def _read_chinese(path: Path) -> list[Pair]:
    """``sentence1<TAB>sentence2<TAB>label``, UTF-8, no header."""
    pairs = []
    for line_no, line in enumerate(read_lines(path, CorruptFileError), start=1):
        fields = line.split("\t")
        if len(fields) != 3:
            raise CorruptFileError(
                f"{path}, line {line_no}: expected sentence1<TAB>sentence2<TAB>label, "
                f"found {len(fields)} column(s)"
            )
        score = _parse_score(fields[2].strip(), path, line_no, what="label")
        pairs.append(Pair(fields[0].strip(), fields[1].strip(), score))
    return pairs


# SentEval's SICK files name the dev split "trial".
_SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
_SICK_SETS = {"TRAIN": "train", "TRIAL": "dev", "TEST": "test"}


def _read_sick(folder: Path) -> dict[str, list[Pair]]:
    """SICK relatedness: SentEval's three files, or the full ``SICK.txt`` split by its ``SemEval_set`` column.

    Both are TAB-separated with a header naming ``sentence_A``, ``sentence_B``, ``relatedness_score``.
    """
    if all((folder / name).is_file() for name in _SICK_FILES.values()):
        return {split: _read_sick_file(folder / name)[0] for split, name in _SICK_FILES.items()}
    full = folder / "SICK.txt"
    if full.is_file():
        pairs, sets = _read_sick_file(full, set_column=True)
        splits: dict[str, list[Pair]] = {"train": [], "dev": [], "test": []}
        for pair, name in zip(pairs, sets, strict=True):
            splits[name].append(pair)
        return splits
    raise DataNotFoundError(
        f"no SICK files in {folder}: expected {', '.join(_SICK_FILES.values())} (SentEval) or SICK.txt"
    )


def _read_sick_file(path: Path, set_column: bool = False) -> tuple[list[Pair], list[str]]:
    lines = read_lines(path, CorruptFileError)
    if not lines:
        raise CorruptFileError(f"{path} is empty; expected a header line and SICK rows")
    header = [h.strip() for h in lines[0].split("\t")]
    wanted = ["sentence_A", "sentence_B", "relatedness_score"] + (["SemEval_set"] if set_column else [])
    missing = [w for w in wanted if w not in header]
    if missing:
        raise CorruptFileError(f"{path}, line 1: header lacks column(s) {', '.join(missing)}")
    cols = [header.index(w) for w in wanted]
    pairs: list[Pair] = []
    sets: list[str] = []
    for line_no, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise CorruptFileError(
                f"{path}, line {line_no}: expected {len(header)} columns like the header, found {len(fields)}"
            )
        score = _parse_score(fields[cols[2]].strip(), path, line_no)
        pairs.append(Pair(fields[cols[0]].strip(), fields[cols[1]].strip(), score))
        if set_column:
            name = _SICK_SETS.get(fields[cols[3]].strip().upper())
            if name is None:
                raise CorruptFileError(
                    f"{path}, line {line_no}: SemEval_set {fields[cols[3]]!r} is not TRAIN, TRIAL or TEST"
                )
            sets.append(name)
    return pairs, sets
