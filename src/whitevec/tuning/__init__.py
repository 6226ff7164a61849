"""Choosing the transform and index encoding on the user's own labelled dev data: ``whitevec tune``.

:func:`tune` scores every candidate (model x pooling x transform x encoding) and keeps ``none`` unless a gain is
significant; :class:`TunedConfig` is the choice, saved as JSON and applied by ``index build --config``,
``eval --config`` and :func:`apply_config`.
"""

from whitevec.tuning.config import ConfigMismatchError, TunedConfig, apply_config
from whitevec.tuning.results import CandidateResult, FoldCheck, TuneResult
from whitevec.tuning.run import model_poolings, tune
from whitevec.tuning.scoring import check_metric
from whitevec.tuning.space import Candidate, default_transforms

__all__ = [
    "Candidate",
    "CandidateResult",
    "ConfigMismatchError",
    "FoldCheck",
    "TuneResult",
    "TunedConfig",
    "apply_config",
    "check_metric",
    "default_transforms",
    "model_poolings",
    "tune",
]
