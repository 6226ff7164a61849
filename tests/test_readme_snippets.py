"""The docs' Python snippets that need assertions, and the README's length.

A snippet is the ```python block of a docs page right below ``<!-- tested-by: tests/FILE.py::TEST -->``: the docs
runner (tests/test_docs.py) leaves such blocks to the test named, which extracts the block by that marker and runs
it as written (in a temporary folder, with the shared data)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_MAX_LINES = 250  # the front page: what whitevec is, a tour, links into the docs (issue 29)


def marked_block(page: str, test: str) -> tuple[str, Path]:
    """The ```python block of ``page`` (relative to the repository) right below the marker naming ``test``
    (``tests/FILE.py::TEST``), and the page's path."""
    path = ROOT / page
    text = path.read_text(encoding="utf-8")
    marker = f"<!-- tested-by: {test} -->\n```python\n"
    start = text.find(marker)
    assert start != -1, f"no python block marked tested-by {test} in {page}"
    body = text[start + len(marker) :]
    end = re.search(r"^```[ \t]*$", body, re.MULTILINE)
    assert end, f"the block marked tested-by {test} in {page} is never closed"
    return body[: end.start()], path


def run_snippet(code: str, source: Path, folder: Path, data_dir: Path) -> str:
    before = Path.cwd()
    os.environ["WHITEVEC_DATA"] = str(data_dir)
    printed = io.StringIO()
    try:
        os.chdir(folder)
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(source), "exec"), {"__name__": "__docs__"})
    finally:
        os.chdir(before)
    return printed.getvalue()


ST_PAGE = "docs/how-to/sentence-transformers-and-scikit-learn.md"


@pytest.mark.model
@pytest.mark.data
def test_use_with_sentence_transformers(data_dir: Path, minilm_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers")
    code, page = marked_block(ST_PAGE, "tests/test_readme_snippets.py::test_use_with_sentence_transformers")
    out = run_snippet(code, page, tmp_path, data_dir)
    assert "mean pooling, Normalize" in out and "256" in out
    difference = float(re.search(r"max abs difference (\S+)", out).group(1))  # type: ignore[union-attr]
    assert difference <= 1e-5
    assert (tmp_path / "minilm-whitened-128" / "modules.json").is_file()


@pytest.mark.model
@pytest.mark.data
def test_use_in_a_scikit_learn_pipeline(data_dir: Path, minilm_dir: Path, tmp_path: Path) -> None:
    code, page = marked_block(ST_PAGE, "tests/test_readme_snippets.py::test_use_in_a_scikit_learn_pipeline")
    out = run_snippet(code, page, tmp_path, data_dir)
    assert "whitening__n_components" in out


def test_the_readme_is_a_front_page() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; keep it a front page (<= 250)"
    targets = re.findall(r"\]\(((?:docs/)?[\w./-]+\.(?:md|png))(?:#[\w-]*)?\)", text)
    assert targets, "the README links into the docs"
    missing = [t for t in targets if not (ROOT / t).is_file()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


@pytest.mark.data
def test_the_readme_counts_what_its_pairs_file_holds(data_dir: Path, tmp_path: Path) -> None:
    """The tour's numbers about pairs.tsv (pairs, distinct sentences) are what its awk line and the reader give."""
    text = README.read_text(encoding="utf-8")
    (cut,) = [line for line in text.splitlines() if line.startswith("awk ") and line.endswith("> pairs.tsv")]
    env = {**os.environ, "WHITEVEC_DATA": str(data_dir)}
    subprocess.run(["bash", "-euo", "pipefail", "-c", cut], cwd=tmp_path, env=env, check=True)
    from whitevec.datasets import read_pairs_file

    pairs = read_pairs_file(tmp_path / "pairs.tsv")
    said_pairs = re.search(r"\((\d+) scored STS-B test pairs", text)
    said_sentences = re.search(r"# (\d+) unlabelled sentences", text)
    assert said_pairs is not None and said_sentences is not None, "the README no longer states the counts"
    assert int(said_pairs.group(1)) == pairs.n_pairs
    assert int(said_sentences.group(1)) == len(pairs.sentences())


def test_the_cranfield_figures_quoted_are_the_results_scripts() -> None:
    """The guide's pasted eval-retrieval output and the README's Cranfield row are the figures
    benchmarks/maintained/results_retrieval.py wrote (docs/results/retrieval.json), at the settings the guide's
    command names: a figure quoted next to a command is one that command prints."""
    reports = json.loads((ROOT / "docs" / "results" / "retrieval.json").read_text(encoding="utf-8"))["reports"]
    (minilm,) = [report for report in reports if report["model"] == "all-MiniLM-L6-v2"]
    ndcg = {s["transform"]: f"{100 * s['ndcg_10']:.2f}" for s in minilm["scores"] if s["pooling"] == "last-avg"}
    script = (ROOT / "benchmarks" / "maintained" / "results_retrieval.py").read_text(encoding="utf-8")
    max_length = re.search(r"^MAX_LENGTH = (\d+)", script, re.MULTILINE)
    guide = (ROOT / "docs" / "how-to" / "index-and-compress.md").read_text(encoding="utf-8")
    assert max_length is not None and f"--pooling last-avg --max-length {max_length.group(1)}" in guide
    pasted = dict(
        re.findall(r"^\| last-avg \| (\S+) \| float32 \| \d+ \| [\d,]+ \| ([\d.]+) \|", guide, re.MULTILINE)
    )
    # Raw vectors rank Cranfield's two empty abstracts nowhere near the top, so the raw row is the results page's
    # figure to the digit; the whitened rows moved when texts with no known token left the index (the page says
    # so, and the guide quotes the page's figures beside its own).
    assert pasted["none"] == ndcg["none"]
    for transform in set(pasted) - {"none"}:
        assert pasted[transform] != ndcg[transform] and ndcg[transform] in guide
    row = re.search(
        r"^\| all-MiniLM-L6-v2, last-avg \| Cranfield \|(.*)\|$", README.read_text(encoding="utf-8"), re.MULTILINE
    )
    assert row is not None
    assert [cell.strip() for cell in row.group(1).split("|")] == [
        ndcg[transform] for transform in ("none", "whitening", "whitening-128", "flow")
    ]
