"""transform_staleness: the rows an index's transform was fitted on against the rows it holds now, from the
manifest alone (docs/results/staleness.md measures what a stale fit costs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.index_helpers import HashEncoder, sentences
from whitevec.datasets.retrieval import Document
from whitevec.index import Retriever, read_manifest
from whitevec.index.folder.staleness import transform_staleness


def _manifest(count: int, fit_on: str | None, fit_rows: int = 0, **extra: Any) -> dict[str, Any]:
    """The fields transform_staleness reads, as a build writes them."""
    transform = None if fit_on is None else {"spec": "whitening", "fit_on": fit_on, "fit_rows": fit_rows}
    return {"count": count, "transform": transform, **extra}


def test_a_corpus_fit_counts_every_row_beyond_it_as_added() -> None:
    assert transform_staleness(_manifest(1000, "corpus", 800)) == {
        "fit_on": "corpus",
        "fit_rows": 800,
        "count": 1000,
        "added_since_fit": 200,
        "share_added": 0.2,
    }


def test_a_fresh_corpus_fit_has_nothing_added() -> None:
    figures = transform_staleness(_manifest(50, "corpus", 50))
    assert (figures["added_since_fit"], figures["share_added"]) == (0, 0.0)


def test_no_transform_has_nothing_to_go_stale() -> None:
    assert transform_staleness(_manifest(7, None)) == {
        "fit_on": None,
        "fit_rows": None,
        "count": 7,
        "added_since_fit": None,
        "share_added": None,
    }


@pytest.mark.parametrize(("fit_on", "fit_rows"), [("given", 0), ("corpus", 0)])
def test_a_transform_that_came_fitted_leaves_the_fit_unknown(fit_on: str, fit_rows: int) -> None:
    # ("corpus", 0): the Ray engine's record of a transform it was given already fitted.
    figures = transform_staleness(_manifest(30, fit_on, fit_rows, updated="2026-12-06T07:00:00+0000"))
    unknown = {"fit_rows": None, "count": 30, "added_since_fit": None, "share_added": None}
    assert figures == {"fit_on": "given", **unknown}


@pytest.mark.parametrize("fit_on", ["/data/fit-texts.txt", "corpus sample (seed 0)"])
def test_a_file_or_sample_fit_is_known_only_until_the_first_add(fit_on: str) -> None:
    built = transform_staleness(_manifest(1000, fit_on, 100))
    assert (built["fit_rows"], built["added_since_fit"], built["share_added"]) == (100, 0, 0.0)
    added = transform_staleness(_manifest(1200, fit_on, 100, updated="2026-12-06T07:00:00+0000"))
    assert (added["fit_rows"], added["added_since_fit"], added["share_added"]) == (100, None, None)


def test_an_empty_index_has_no_share() -> None:
    assert transform_staleness(_manifest(0, "corpus", 2))["share_added"] == 0.0


def test_a_built_then_added_index_reports_its_adds(tmp_path: Path) -> None:
    texts = sentences(30, seed=3)
    docs = [Document(f"d{i}", text) for i, text in enumerate(texts)]
    folder = tmp_path / "idx"
    encoder: Any = HashEncoder(dim=8)
    with Retriever.build(docs[:20], folder, encoder=encoder, transform="whitening") as index:
        assert transform_staleness(read_manifest(folder))["added_since_fit"] == 0
        index.add(docs[20:])
    figures = transform_staleness(read_manifest(folder))
    assert figures == {
        "fit_on": "corpus",
        "fit_rows": 20,
        "count": 30,
        "added_since_fit": 10,
        "share_added": 1 / 3,
    }


def test_more_fit_rows_than_rows_counts_no_adds() -> None:
    # A writer that counted rows it then left out must not show a negative number of adds.
    figures = transform_staleness(_manifest(90, "corpus", 100))
    assert (figures["added_since_fit"], figures["share_added"]) == (0, 0.0)
