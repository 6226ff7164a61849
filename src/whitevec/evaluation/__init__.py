"""Evaluation: STS correlation and retrieval quality."""

from whitevec.evaluation.metrics import cosine_rows, spearman100
from whitevec.evaluation.sts import StsReport, StsScore, SubsetScore, aggregate, evaluate_sts, score_pairs

__all__ = [
    "StsReport",
    "StsScore",
    "SubsetScore",
    "aggregate",
    "cosine_rows",
    "evaluate_sts",
    "score_pairs",
    "spearman100",
]
