"""Static encoder folders (Model2Vec's format): what whitevec writes loads in Model2Vec's StaticModel and in
sentence-transformers and gives the same vectors; reading refuses broken folders by file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.static_helpers import reference_vectors, tiny_table, tiny_tokenizer
from whitevec.encoders.static_format import StaticTable, is_static_folder, read_static_folder, write_static_folder
from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError

# Known words only (sentence-transformers keeps [UNK] in its mean, see below), at most 18 characters (max_length 6
# x the tiny vocabulary's median token length 3: Model2Vec cuts longer texts, sentence-transformers does not);
# the last has more than max_length tokens.
KNOWN = ["a man is playing", "the dogs", "", "girl", "a a a a a a man"]
# Longer than 18 characters: Model2Vec cuts them before tokenising.
LONG = ["the big red car and the small blue car on the street", "a man is playing guitar."]
# Unknown words, alone and among known ones.
UNKNOWN = ["zebra", "a zebra is eating food", "qqq the cat"]


def test_written_folder_reads_back_whole(tmp_path: Path) -> None:
    table = tiny_table(normalize=False, max_length=None, base_model="tiny", dims=8)
    folder = write_static_folder(tmp_path / "static", table)
    back = read_static_folder(folder)
    np.testing.assert_array_equal(back.embeddings, table.embeddings)
    assert (back.normalize, back.max_length, back.dim) == (False, None, 8)
    assert back.provenance["base_model"] == "tiny" and "whitevec_version" in back.provenance
    assert back.tokenizer.get_vocab() == table.tokenizer.get_vocab()
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["hidden_dim"], config["apply_pca"]) == ("model2vec", 8, 8)
    assert is_static_folder(folder)


def test_model2vec_loads_it_and_agrees(tmp_path: Path) -> None:
    from model2vec import StaticModel

    table = tiny_table(max_length=6)
    folder = write_static_folder(tmp_path / "static", table)
    model = StaticModel.from_pretrained(folder, force_download=False)
    assert (model.normalize, model.max_length) == (True, 6)
    texts = KNOWN + UNKNOWN + LONG
    np.testing.assert_allclose(model.encode(texts), reference_vectors(table, texts), atol=1e-5)


@pytest.mark.parametrize("normalize", [True, False])
def test_sentence_transformers_loads_it_and_agrees(tmp_path: Path, normalize: bool) -> None:
    from sentence_transformers import SentenceTransformer

    table = tiny_table(normalize=normalize, max_length=6)
    model = SentenceTransformer(str(write_static_folder(tmp_path / "static", table)), device="cpu")
    assert len(model) == (2 if normalize else 1)
    # The tokenizer is saved truncating at max_length, so sentence-transformers truncates as Model2Vec does.
    np.testing.assert_allclose(model.encode(KNOWN), reference_vectors(table, KNOWN), atol=1e-5)


def test_sentence_transformers_differs_on_unknown_tokens_and_long_texts(tmp_path: Path) -> None:
    """The documented differences: StaticEmbedding averages the [UNK] row too, Model2Vec (and whitevec) drop it;
    and it truncates by tokens only, without Model2Vec's cut in characters. If this starts failing,
    sentence-transformers changed and the docs' caveat can go."""
    from sentence_transformers import SentenceTransformer

    table = tiny_table(normalize=False, max_length=6)
    model = SentenceTransformer(str(write_static_folder(tmp_path / "cut", table)), device="cpu")
    np.testing.assert_allclose(model.encode(LONG), reference_vectors(table, LONG, cut_characters=False), atol=1e-5)
    assert np.abs(model.encode(LONG) - reference_vectors(table, LONG)).max() > 0.01

    table = tiny_table(normalize=False, max_length=None)
    model = SentenceTransformer(str(write_static_folder(tmp_path / "no-limit", table)), device="cpu")
    unk = table.embeddings[table.tokenizer.token_to_id("[UNK]")]
    cat = table.embeddings[table.tokenizer.token_to_id("cat")]
    np.testing.assert_allclose(model.encode(["zebra cat"])[0], (unk + cat) / 2, atol=1e-6)
    np.testing.assert_allclose(reference_vectors(table, ["zebra cat"])[0], cat, atol=1e-6)


def test_reads_model2vec_folders_with_a_vocabulary_mapping_and_weights(tmp_path: Path) -> None:
    from model2vec import StaticModel

    tokenizer = tiny_tokenizer()
    vocab = tokenizer.get_vocab_size()
    rng = np.random.default_rng(1)
    clusters = rng.normal(size=(7, 4)).astype(np.float32)
    mapping = rng.integers(0, 7, size=vocab)
    weights = rng.uniform(0.5, 2.0, size=vocab).astype(np.float32)
    model = StaticModel(clusters, tokenizer, weights=weights, token_mapping=mapping, normalize=False)
    model.save_pretrained(tmp_path / "m2v")
    table = read_static_folder(tmp_path / "m2v")
    assert is_static_folder(tmp_path / "m2v") and table.embeddings.shape == (vocab, 4)
    np.testing.assert_allclose(table.embeddings, clusters[mapping] * weights[:, None], rtol=1e-6)
    texts = KNOWN + UNKNOWN + LONG
    np.testing.assert_allclose(model.encode(texts), reference_vectors(table, texts), atol=1e-5)


def test_an_existing_folder_is_replaced_only_with_overwrite(tmp_path: Path) -> None:
    folder = write_static_folder(tmp_path / "static", tiny_table(seed=0))
    with pytest.raises(BadInputError, match="exists; pass overwrite=True"):
        write_static_folder(folder, tiny_table(seed=1))
    assert np.array_equal(read_static_folder(folder).embeddings, tiny_table(seed=0).embeddings)
    write_static_folder(folder, tiny_table(seed=1, normalize=False), overwrite=True)
    assert np.array_equal(read_static_folder(folder).embeddings, tiny_table(seed=1).embeddings)
    assert not (folder / "1_Normalize").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["static"]


def test_bad_tables_are_refused() -> None:
    good = tiny_table()
    with pytest.raises(BadInputError, match="float32"):
        StaticTable(good.embeddings.astype(np.float64), good.tokenizer, True, 6)
    with pytest.raises(BadInputError, match="one row per token id"):
        StaticTable(good.embeddings[:-1], good.tokenizer, True, 6)
    with pytest.raises(BadInputError, match="max_length"):
        StaticTable(good.embeddings, good.tokenizer, True, 0)
    bad = good.embeddings.copy()
    bad[3, 1] = np.nan
    with pytest.raises(BadInputError, match="NaN"):
        StaticTable(bad, good.tokenizer, True, 6)


@pytest.mark.parametrize("damage", ["missing tokenizer.json", "bad safetensors", "bad config", "wrong rows"])
def test_broken_folders_are_named_by_file(tmp_path: Path, damage: str) -> None:
    folder = write_static_folder(tmp_path / "static", tiny_table())
    if damage == "missing tokenizer.json":
        (folder / "tokenizer.json").unlink()
        expected = "tokenizer.json is missing"
    elif damage == "bad safetensors":
        (folder / "model.safetensors").write_bytes(b"not a table")
        expected = "model.safetensors: not a readable safetensors"
    elif damage == "bad config":
        (folder / "config.json").write_text("{")
        expected = "config.json: not readable JSON"
    else:
        write_static_folder(folder, tiny_table(), overwrite=True)
        from safetensors.numpy import save_file

        save_file({"embeddings": np.zeros((3, 8), np.float32)}, str(folder / "model.safetensors"))
        expected = "3 rows but its tokenizer has"
    with pytest.raises(CorruptFileError, match=expected):
        read_static_folder(folder)
    with pytest.raises(DataNotFoundError, match="no static encoder folder"):
        read_static_folder(tmp_path / "nowhere")


def test_a_transformers_model_folder_is_not_static(tiny_bert_dir: Path, tmp_path: Path) -> None:
    assert not is_static_folder(tiny_bert_dir)
    assert not is_static_folder(tmp_path / "nowhere")
    assert not is_static_folder(tmp_path)
