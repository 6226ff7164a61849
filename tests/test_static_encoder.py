"""StaticEncoder: Model2Vec's vectors (1e-5) from a static folder, fast, and without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from tests.static_helpers import reference_vectors, tiny_static_folder, tiny_table
from whitevec.encoders.protocol import EncoderLike
from whitevec.encoders.static import StaticEncoder, unknown_token_id
from whitevec.encoders.static_format import StaticTable, write_static_folder
from whitevec.errors import BadInputError

REPO = Path(__file__).resolve().parents[1]
# Empty, unknown-only, unknown among known, more tokens than max_length (6), longer than Model2Vec's cut in
# characters (6 x median token length 3), whitespace only, repeated.
TEXTS = [
    "a man is playing",
    "",
    "zebra",
    "qqq the cat",
    "a a a a a a man",
    "the big red car and the small blue car on the street",
    "   ",
    "a man is playing",
    "dogs, cats; and girls!",
    "the woman is styling her hair",
]


@pytest.mark.parametrize(("normalize", "max_length"), [(True, 6), (False, 6), (True, None), (False, 3)])
def test_vectors_equal_model2vec(tmp_path: Path, normalize: bool, max_length: int | None) -> None:
    from model2vec import StaticModel

    folder = tiny_static_folder(tmp_path / "static", normalize=normalize, max_length=max_length)
    encoder = StaticEncoder(folder)
    theirs = StaticModel.from_pretrained(folder, force_download=False).encode(TEXTS)
    for batch_size in (1, 3, 1024):  # batches that split the texts anywhere, and one batch
        ours = encoder.encode(TEXTS, batch_size=batch_size)
        assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), 8)
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    np.testing.assert_allclose(encoder.encode(TEXTS), reference_vectors(encoder.table, TEXTS), atol=1e-5)
    assert not encoder.encode(["", "zebra"]).any()  # no tokens left: zeros, normalised or not


def test_a_max_length_given_overrides_the_folders_as_in_model2vec(tmp_path: Path) -> None:
    from model2vec import StaticModel

    folder = tiny_static_folder(tmp_path / "static", max_length=6)
    theirs = StaticModel.from_pretrained(folder, force_download=False).encode(TEXTS, max_length=2)
    encoder = StaticEncoder(folder, max_length=2)
    np.testing.assert_allclose(encoder.encode(TEXTS), theirs, atol=1e-5)
    assert encoder.describe()["max_length"] == 2


def test_a_unigram_tokenizers_unknown_id_is_dropped(tmp_path: Path) -> None:
    """Unigram models name their unknown token by id, not by string (Model2Vec reads it from the JSON)."""
    from model2vec import StaticModel

    pieces = [("<unk>", 0.0), ("▁a", -1.0), ("▁man", -2.0), ("▁dog", -2.0), ("s", -3.0), ("▁", -3.0)]
    tokenizer = Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=False))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    assert unknown_token_id(tokenizer) == 0
    table = np.random.default_rng(3).normal(size=(len(pieces), 5)).astype(np.float32)
    folder = write_static_folder(tmp_path / "unigram", StaticTable(table, tokenizer, False, None))
    texts = ["a man", "dogs", "a zzz man", "zzz", ""]
    theirs = StaticModel.from_pretrained(folder, force_download=False).encode(texts)
    np.testing.assert_allclose(StaticEncoder(folder).encode(texts), theirs, atol=1e-5)


def test_it_is_an_encoder_like_and_describes_itself(tmp_path: Path) -> None:
    folder = tiny_static_folder(tmp_path / "static")
    encoder = StaticEncoder(str(folder))
    assert isinstance(encoder, EncoderLike)
    info = encoder.describe()
    assert {k: info[k] for k in ("model", "pooling", "max_length", "dim", "backend", "normalize")} == {
        "model": str(folder),
        "pooling": "static",
        "max_length": 6,
        "dim": 8,
        "backend": "static",
        "normalize": True,
    }
    assert info["model_fingerprint"] == StaticEncoder(folder).model_fingerprint
    other = tiny_static_folder(tmp_path / "other", seed=1)
    assert StaticEncoder(other).model_fingerprint != info["model_fingerprint"]
    assert not encoder.caches_vectors and encoder.without_cache() is encoder


def test_only_its_own_pooling_and_sane_settings(tmp_path: Path) -> None:
    folder = tiny_static_folder(tmp_path / "static")
    assert StaticEncoder(folder, "static").pooling.name == "static"
    with pytest.raises(BadInputError, match=r"its only pooling is 'static'.*not 'cls'"):
        StaticEncoder(folder, "cls")
    with pytest.raises(BadInputError, match="max_length must be at least 1"):
        StaticEncoder(folder, max_length=0)
    with pytest.raises(BadInputError, match="not one string"):
        StaticEncoder(folder).encode("a man")  # type: ignore[arg-type]


def test_a_large_table_and_batch_agree_with_the_reference(tmp_path: Path) -> None:
    """Many texts across batches, a wider table: the sparse product against the one-by-one mean."""
    rng = np.random.default_rng(7)
    words = ["a", "man", "dog", "cat", "zebra", "the", "playing", "guitar", "qq", "red"]
    texts = [" ".join(rng.choice(words, rng.integers(0, 12))) for _ in range(500)]
    table = tiny_table(dim=64, max_length=5)
    encoder = StaticEncoder(write_static_folder(tmp_path / "static", table))
    np.testing.assert_allclose(encoder.encode(texts, batch_size=64), reference_vectors(table, texts), atol=1e-5)


_NO_TORCH = """
import json, sys
from pathlib import Path
from whitevec.index import Retriever
from whitevec.encoders.static import StaticEncoder

folder, corpus, index = sys.argv[1:4]
Retriever.build(corpus, index, encoder=StaticEncoder(folder))
hits = Retriever.load(index, encoder=StaticEncoder(folder)).search(["a man is playing"], k=2)[0]
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers"))
print(json.dumps({"top": hits[0].text, "heavy": heavy}))
"""


def test_a_static_index_is_built_and_searched_without_torch(tmp_path: Path) -> None:
    folder = tiny_static_folder(tmp_path / "static")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a man is playing\nthe dog is running\na cat is eating food\nthe girl is styling her hair\n")
    done = subprocess.run(
        [sys.executable, "-c", _NO_TORCH, str(folder), str(corpus), str(tmp_path / "index")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "WHITEVEC_CACHE": str(tmp_path / "cache")},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"top": "a man is playing", "heavy": []}
