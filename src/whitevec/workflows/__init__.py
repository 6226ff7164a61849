"""The work behind a command as one library call: named inputs (files, a dataset, a model and its options) in,
a file, an index or a report out.

Each workflow checks everything it can with light imports first (files, the model and cache, ``out``, the
options), so a wrong path fails in a fraction of a second, and only then imports torch, an index library or
scipy and loads the model (``encoder``: the keyword arguments of :func:`whitevec.encoders.loading.load_encoder`,
made
with ``make_encoder``). Importing this package loads none of them.
"""

from whitevec.engines import ENGINES, check_engine
from whitevec.workflows.encode import EncodedFile, encode_file
from whitevec.workflows.index import BuiltIndex, build_index_file, search_index
from whitevec.workflows.retrieval import evaluate_retrieval_dataset
from whitevec.workflows.tuning import TuningData, load_tuning_data

__all__ = [
    "ENGINES",
    "BuiltIndex",
    "EncodedFile",
    "TuningData",
    "build_index_file",
    "check_engine",
    "encode_file",
    "evaluate_retrieval_dataset",
    "load_tuning_data",
    "search_index",
]
