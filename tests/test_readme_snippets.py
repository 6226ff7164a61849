"""The README's Python snippets for sentence-transformers and scikit-learn, extracted from README.md and run as
they are written (in a temporary folder, with the shared data)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_block(heading: str) -> str:
    """The first ```python block under the README section ``heading``."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, f"no python snippet under '## {heading}'"
    return match.group(1)


def run_snippet(code: str, folder: Path, data_dir: Path) -> str:
    before = Path.cwd()
    os.environ["WHITEVEC_DATA"] = str(data_dir)
    printed = io.StringIO()
    try:
        os.chdir(folder)
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    finally:
        os.chdir(before)
    return printed.getvalue()


@pytest.mark.model
@pytest.mark.data
def test_use_with_sentence_transformers(data_dir: Path, minilm_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    out = run_snippet(python_block("Use with sentence-transformers"), tmp_path, data_dir)
    assert "mean pooling, Normalize" in out and "256" in out
    difference = float(re.search(r"max abs difference (\S+)", out).group(1))  # type: ignore[union-attr]
    assert difference <= 1e-5
    assert (tmp_path / "minilm-whitened-128" / "modules.json").is_file()


@pytest.mark.model
@pytest.mark.data
def test_use_in_a_scikit_learn_pipeline(data_dir: Path, minilm_dir: Path, tmp_path: Path) -> None:
    out = run_snippet(python_block("Use in a scikit-learn pipeline"), tmp_path, data_dir)
    assert "whitening__n_components" in out
