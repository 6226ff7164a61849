"""Shared fixtures: a tiny random BERT, the shared data folder, the bundled default model; the order in which
`make test`'s workers take the files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

# Tiny vocabulary: enough word pieces for test sentences; anything else maps to [UNK].
_VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "a",
    "the",
    "is",
    "are",
    "man",
    "woman",
    "girl",
    "boy",
    "dog",
    "cat",
    "playing",
    "guitar",
    "piano",
    "eating",
    "food",
    "running",
    "on",
    "in",
    "street",
    "hair",
    "her",
    "his",
    "styling",
    "brushing",
    "car",
    "red",
    "blue",
    "big",
    "small",
    ".",
    ",",
    "!",
    "?",
    "and",
    "of",
    "to",
    "##s",
    "##ing",
    "##ed",
    "x",
    "y",
]
# The whole words of that vocabulary (no special tokens, punctuation or suffix pieces), for making test sentences.
VOCAB_WORDS = [word for word in _VOCAB if word.isalpha()]


def build_tiny_bert(folder: Path, *, layers: int = 2, hidden: int = 32, max_positions: int = 64) -> Path:
    """Write a random BERT (seeded) and a matching WordPiece tokenizer into ``folder``."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("\n".join(_VOCAB) + "\n")
    # transformers 5 ignores vocab_file here: pass the vocabulary itself, or every word becomes [UNK].
    tokenizer = BertTokenizerFast(
        vocab={word: i for i, word in enumerate(_VOCAB)}, do_lower_case=True, model_max_length=max_positions
    )
    tokenizer.save_pretrained(str(folder))
    config = BertConfig(
        vocab_size=len(_VOCAB),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=hidden * 2,
        max_position_embeddings=max_positions,
    )
    torch.manual_seed(0)
    BertModel(config).eval().save_pretrained(str(folder))
    return folder


# The files that take longest, longest first (`pytest -n 2 --dist loadfile --durations=0`, summed per file;
# docs/development.md "The suite"). A name that no longer exists fails tests/test_architecture.py.
LONGEST_FILES = (
    "test_docs.py",
    "test_cli.py",
    "test_dependency_faults.py",
    "test_ray_engine.py",
    "test_diagnostics.py",
    "test_service.py",
    "test_fail_early.py",
    "test_sklearn_checks.py",
    "test_sentence_transformers.py",
    "test_cli_usage.py",
    "test_service_protection.py",
    "test_flow.py",
    "test_probe_surfaces.py",
    "test_milvus_server.py",
)


def longest_first(files: list[str]) -> list[str]:
    """``files`` (test file names, in collection order) with those of LONGEST_FILES first, in its order."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    return sorted(files, key=lambda name: rank.get(name, len(rank)))


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist hands out whole files (--dist loadfile) by default in order of their number of tests, which puts
    # a long file of few tests (the Milvus server's: 5 tests, over a minute) last, where a worker may run it alone.
    # Collection order instead, with the longest files first, so the two workers end together.
    if getattr(config.option, "dist", "no") == "loadfile":
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Only in a pytest-xdist worker (they collect, and the controller hands out files in their order; a worker's
    # own config says dist "no"): one process keeps the files in the order asked for.
    if not hasattr(config, "workerinput"):
        return
    order = {name: i for i, name in enumerate(longest_first(list(dict.fromkeys(i.path.name for i in items))))}
    items.sort(key=lambda item: order[item.path.name])  # stable: a file's own tests keep their order


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Vector caches and model checksums of tests go to a temporary folder, never the user's cache."""
    monkeypatch.setenv("WHITEVEC_CACHE", str(tmp_path_factory.getbasetemp() / "vector-cache"))
    monkeypatch.setenv("WHITEVEC_CHECKSUMS", str(tmp_path_factory.getbasetemp() / "checksum-cache"))


def _shared_data() -> Path | None:
    env = os.environ.get("WHITEVEC_DATA")
    for candidate in (Path(env) if env else None, SHARED_DATA):
        if candidate is not None and (candidate / "sts").is_dir():
            return candidate
    return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    found = _shared_data()
    if found is None:
        pytest.skip("shared benchmark data not found: set WHITEVEC_DATA or place it at ../shared/data")
    return found


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The bundled all-MiniLM-L6-v2 folder (skips when the package is not installed)."""
    from whitevec.encoders.models.resolution import resolve_model
    from whitevec.errors import ModelNotFoundError

    try:
        return resolve_model("all-MiniLM-L6-v2")
    except ModelNotFoundError as exc:
        pytest.skip(str(exc))
