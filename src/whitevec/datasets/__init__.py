"""STS benchmark readers and generic pairs/text files; plain dataclasses, no models.

>>> task = load_sts_task("stsb", data_dir="../shared/data")   # doctest: +SKIP
>>> task.n_pairs, len(task.sentences("target"))               # doctest: +SKIP
"""

from whitevec.datasets.pairs import read_pairs_file, read_texts_file
from whitevec.datasets.paths import ENV_VAR, resolve_data_dir
from whitevec.datasets.sts import (
    CHINESE_TASKS,
    DEFAULT_TASKS,
    STS_TASKS,
    VARIANTS,
    Pair,
    StsTask,
    available_tasks,
    canonical_task_name,
    check_scores_vary,
    load_sts_task,
    read_semeval_folder,
    read_semeval_subset,
)

__all__ = [
    "CHINESE_TASKS",
    "DEFAULT_TASKS",
    "ENV_VAR",
    "STS_TASKS",
    "VARIANTS",
    "Pair",
    "StsTask",
    "available_tasks",
    "canonical_task_name",
    "check_scores_vary",
    "load_sts_task",
    "read_pairs_file",
    "read_semeval_folder",
    "read_semeval_subset",
    "read_texts_file",
    "resolve_data_dir",
]
