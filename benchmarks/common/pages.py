"""What a maintained benchmark and its page share: the hand-written notes a regenerated page keeps, and the names
of the static encoders' page (results_static.py measures them, pages/static.py renders them)."""

from __future__ import annotations

from pathlib import Path

NOTES_MARK = "<!-- notes: kept when the file is regenerated -->"


def kept_notes(out: Path | None) -> str:
    """The hand-written part of an existing page (below NOTES_MARK), kept when the page is written again."""
    if out is not None and out.is_file() and NOTES_MARK in out.read_text():
        return out.read_text().split(NOTES_MARK, 1)[1]
    return ""


# ---- the static encoders' page ---------------------------------------------------------------------------------
ENGLISH = ["all-MiniLM-L6-v2", "all-mpnet-base-v2"]
CHINESE = ["m3e-small"]
MODELS = [*ENGLISH, *CHINESE]
# How each table was made: whitevec distill's method, and which corpus its counts (and `corpus` passes) read.
# "eval": the unlabelled text of the evaluations; "heldout": STS-B's train split, text no evaluation scores.
METHODS = ["tokens", "corpus", "corpus-heldout"]
CORPUS_OF = {"tokens": "eval", "corpus": "eval", "corpus-heldout": "heldout"}
CONTEXTUAL = "contextual"
MODEL2VEC = "model2vec"
