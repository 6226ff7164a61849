"""Files an earlier whitevec wrote keep loading and give the same numbers (fixtures: tests/fixtures/saved/,
written once by ``make_saved.py`` at the commit its ``written_by.json`` names, never rewritten by a later one).

Saved files name code: a transform file its class as ``module:qualname``, an exported sentence-transformers
folder whitevec's module classes by import path, an index its transform and encodings. Moving a module breaks
them silently unless something loads the old files; this does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from whitevec.index.retriever import Retriever
from whitevec.transforms import Transform

SAVED = Path(__file__).parent / "fixtures" / "saved"
TEXTS = json.loads((SAVED / "texts.json").read_text())


@pytest.mark.parametrize("name", ["whitening-4", "abtt-1", "flow"])
def test_a_saved_transform_loads_and_maps_as_before(name: str) -> None:
    transform = Transform.load(SAVED / "transforms" / f"{name}.safetensors")
    got = transform.transform(np.load(SAVED / "transforms" / "input.npy"))
    np.testing.assert_allclose(got, np.load(SAVED / "transforms" / f"{name}.expected.npy"), rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ["flat-whitening", "binary-rescore"])
def test_a_saved_index_loads_and_finds_what_it_found(name: str, tmp_path: Path) -> None:
    # A copy: loading may write beside the index (its lock), and the fixture must stay as it was written.
    index = shutil.copytree(SAVED / f"index-{name}", tmp_path / "index")
    record = json.loads((SAVED / "index-hits.json").read_text())
    with Retriever.load(index, model=SAVED / "static") as retriever:
        hits = [[[hit.id, round(hit.score, 6)] for hit in row] for row in retriever.search(record["queries"], k=5)]
    assert [[h[0] for h in row] for row in hits] == [[h[0] for h in row] for row in record["hits"][name]]
    np.testing.assert_allclose(
        [[h[1] for h in row] for row in hits], [[h[1] for h in row] for row in record["hits"][name]], atol=1e-5
    )


def test_a_saved_lexical_index_of_the_former_english_analyzer_finds_what_it_found(tmp_path: Path) -> None:
    """Written before the english analyzer changed (make_saved_lexical.py): its queries are still analysed by the
    english it was built with (one-character words and numbers dropped, bm25s's stop words), so the hits agree."""
    index = shutil.copytree(SAVED / "index-lexical-english", tmp_path / "index")
    record = json.loads((SAVED / "index-lexical-hits.json").read_text())
    with Retriever.load(index, model=SAVED / "static") as retriever:
        found = retriever.search(record["queries"], k=4, mode="lexical")
    assert [[hit.id for hit in row] for row in found] == [[h[0] for h in row] for row in record["hits"]]
    np.testing.assert_allclose(
        [hit.score for row in found for hit in row], [h[1] for row in record["hits"] for h in row], atol=1e-5
    )


def test_a_saved_lexical_index_without_term_counts_makes_them_at_its_first_write(tmp_path: Path) -> None:
    """Built before builds kept their term counts: its first write analyses its documents again, once, and keeps
    them; a deleted document then leaves the others' scores as a fresh build of them gives."""
    from whitevec.datasets.retrieval import Document
    from whitevec.index.folder.layout import LEXICAL_COUNTS

    index = shutil.copytree(SAVED / "index-lexical-english", tmp_path / "index")
    assert LEXICAL_COUNTS not in json.loads((index / "manifest.json").read_text())["files"]
    record = json.loads((SAVED / "index-lexical-hits.json").read_text())
    with Retriever.load(index, model=SAVED / "static") as retriever:
        first = [hit.id for hit in retriever.search(record["queries"][:1], k=1, mode="lexical")[0]]
        retriever.add([Document("new", "a text of words the saved queries never use")])
        assert LEXICAL_COUNTS in retriever.manifest["files"]
        retriever.delete(first)
        again = retriever.search(record["queries"], k=4, mode="lexical")
    assert all(hit.id not in first for row in again for hit in row)
    want = [[h[0] for h in row if h[0] not in first] for row in record["hits"]]
    assert [[hit.id for hit in row][: len(w)] for row, w in zip(again, want, strict=True)] == want


@pytest.mark.parametrize("name", ["st-bert-flow", "st-static-whitening"])
def test_an_exported_sentence_transformers_folder_loads_with_the_same_vectors(name: str) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(SAVED / name), device="cpu", trust_remote_code=True)
    got = model.encode(TEXTS, convert_to_numpy=True)
    np.testing.assert_allclose(got, np.load(SAVED / f"{name}.expected.npy"), rtol=0, atol=1e-5)


def test_the_fixtures_name_the_module_paths_they_guard() -> None:
    """Guards the guard: if a rewrite of the fixtures dropped the old class paths, the tests above would prove
    nothing about them."""
    modules = (SAVED / "st-bert-flow" / "modules.json").read_text()
    assert "whitevec.st_modules.LayerMeanPooling" in modules and "whitevec.st_modules.FlowModule" in modules
    header = (SAVED / "transforms" / "flow.safetensors").read_bytes()[:4096]
    assert b"whitevec.transforms.flow:Flow" in header
