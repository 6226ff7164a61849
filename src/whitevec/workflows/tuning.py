"""The data :func:`whitevec.tuning.tune` chooses on, named as ``whitevec tune`` names it: an STS task, a scored
pairs file (and a separate test file), or a retrieval dataset; and the unlabelled text the transforms fit on."""

from __future__ import annotations

import os
from dataclasses import dataclass

from whitevec.datasets.retrieval import RetrievalDataset
from whitevec.datasets.sts import Pair, StsTask
from whitevec.errors import BadInputError
from whitevec.preflight import input_file


@dataclass
class TuningData:
    """``dev``: the scored pairs or the retrieval dataset the choice is made on; ``test``: scored pairs it is
    reported on (None: held-out folds of ``dev``); ``fit_texts``: the text transforms fit on (None: the dev and
    test sentences, or the corpus)."""

    dev: StsTask | list[Pair] | RetrievalDataset
    test: StsTask | list[Pair] | None = None
    fit_texts: list[str] | None = None

    @property
    def kind(self) -> str:
        """``sts`` (scored pairs) or ``retrieval``."""
        return "retrieval" if isinstance(self.dev, RetrievalDataset) else "sts"


def load_tuning_data(
    *,
    task: str | None = None,
    pairs: str | os.PathLike[str] | None = None,
    test_pairs: str | os.PathLike[str] | None = None,
    dataset: str | os.PathLike[str] | None = None,
    fit_on: str | os.PathLike[str] = "target",
    data_dir: str | os.PathLike[str] | None = None,
) -> TuningData:
    """Read the dev data: exactly one of ``task`` (an STS task: its dev or valid split, tested on test; a
    SemEval year, all its pairs), ``pairs`` (a scored pairs file; ``test_pairs`` a separate test file) or
    ``dataset`` (``cranfield`` or a BEIR-style folder). ``fit_on``: ``target`` (a task's own sentences; for
    pairs and datasets, their sentences or corpus), ``corpus``, or a text file (one text a line).

    Raises:
        BadInputError: not exactly one source, ``test_pairs`` without ``pairs``, constant gold scores in a
            pairs file; DataNotFoundError: a missing file or task. All as the files are read.
    """
    from whitevec.datasets import load_sts_task, read_pairs_file, read_texts_file
    from whitevec.datasets.retrieval import load_retrieval_dataset

    if sum(x is not None for x in (task, pairs, dataset)) != 1:
        raise BadInputError("give exactly one of --task NAME, --pairs FILE or --dataset NAME|FOLDER as dev data")
    if test_pairs is not None and pairs is None:
        raise BadInputError("--test-pairs goes with --pairs")
    fit_file = input_file(fit_on, "--fit-on file", keywords=("target", "corpus"))
    data: TuningData
    if task is not None:
        data = _task_data(load_sts_task(task, data_dir=data_dir))
    elif pairs is not None:
        data = TuningData(read_pairs_file(pairs), read_pairs_file(test_pairs) if test_pairs is not None else None)
        for scored in (data.dev, data.test):
            if isinstance(scored, StsTask):
                scored.check_scores_vary()  # as eval: refused as the file is read, before any model loads
    else:
        assert dataset is not None
        data = TuningData(load_retrieval_dataset(dataset, data_dir=data_dir))
    if fit_file is not None:
        data.fit_texts = read_texts_file(fit_file)
    return data


def _task_data(loaded: StsTask) -> TuningData:
    """A task's dev (or valid) split, tested on its test split; without one (SemEval), all its pairs, checked
    by folds. Transforms fit on the task's own sentences."""
    dev_split = next((s for s in ("dev", "valid") if s in loaded.splits), None)
    dev = loaded.all_pairs() if dev_split is None else loaded.splits[dev_split]
    test = None if dev_split is None else loaded.splits["test"]
    return TuningData(dev, test, loaded.sentences("target"))
