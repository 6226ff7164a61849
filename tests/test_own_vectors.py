"""Indexes of the caller's own vectors and indexes created empty (issue #51, item 1): Retriever.build(vectors=...),
Retriever.create, writes with vectors, searches with query_vectors, and their one-line refusals."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.index_helpers import HashEncoder
from whitevec.encoders.protocol import ExternalEncoder
from whitevec.errors import BadInputError, DimensionMismatchError, WhitevecError
from whitevec.index import Document, Retriever

DIM = 16


def _docs(n: int, start: int = 0) -> list[Document]:
    topics = ("cats purr softly", "dogs bark loudly", "rain falls on hills")
    return [Document(f"d{i}", f"{topics[i % 3]} number {i}", {"n": i}) for i in range(start, start + n)]


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def _manifest_bytes(folder: Path) -> bytes:
    return (folder / "manifest.json").read_bytes()


def _cosine_top(matrix: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.argsort(-(unit @ (query / np.linalg.norm(query))), kind="stable")[:k].tolist()


@pytest.fixture
def external(tmp_path: Path) -> tuple[Retriever, np.ndarray]:
    vectors = _vectors(30)
    index = Retriever.build(
        _docs(30), tmp_path / "ix", vectors=vectors, encoder_name="api-embed-3", lexical="bm25"
    )
    yield index, vectors
    index.close()


def test_an_index_built_from_vectors_records_an_external_encoder_and_loads_no_model(
    external: tuple[Retriever, np.ndarray],
) -> None:
    index, vectors = external
    manifest = json.loads(_manifest_bytes(index.path))
    assert manifest["encoder"] == "external"
    assert (manifest["model"], manifest["encoder_dim"], manifest["model_path"]) == ("api-embed-3", DIM, None)
    loaded = Retriever.load(index.path)
    assert isinstance(loaded.encoder, ExternalEncoder)
    assert loaded.is_external and loaded.input_dim == DIM and loaded.count == 30
    hits = loaded.search(query_vectors=vectors[7:8], k=3, mode="dense")[0]
    assert [hit.id for hit in hits] == [f"d{i}" for i in _cosine_top(vectors, vectors[7], 3)]
    assert hits[0].id == "d7"
    # Vectors alone, no mode: dense, though this index's own mode is hybrid (it has a lexical part).
    assert loaded.search(query_vectors=vectors[7:8], k=3) == loaded.search(
        query_vectors=vectors[7:8], k=3, mode="dense"
    )
    loaded.close()


def test_a_dense_search_of_an_external_index_by_text_alone_is_one_line(
    external: tuple[Retriever, np.ndarray],
) -> None:
    index, vectors = external
    for mode in ("dense", "hybrid"):
        with pytest.raises(BadInputError, match=f"a {mode} search needs the queries. vectors") as caught:
            index.search(["cats"], mode=mode)
        assert "\n" not in str(caught.value)
    with pytest.raises(BadInputError, match="hybrid search needs the query texts"):
        index.search(query_vectors=vectors[:1], mode="hybrid")
    with pytest.raises(BadInputError, match="encodes no text"):
        index.embed(["cats"])


def test_an_external_index_searches_lexically_by_text_and_hybrid_by_both_with_filters(
    external: tuple[Retriever, np.ndarray],
) -> None:
    index, vectors = external
    lexical = index.search(["purr"], k=5, mode="lexical")[0]
    assert lexical and all("purr" in hit.text for hit in lexical)
    hybrid = index.search(["purr", "bark"], k=4, mode="hybrid", query_vectors=vectors[[3, 4]], filter="n >= 3")
    assert hybrid[0][0].id == "d3" and hybrid[1][0].id == "d4"  # each in both rankings' first place
    assert all(hit.metadata["n"] >= 3 for hits in hybrid for hit in hits)
    dense = index.search(query_vectors=vectors[:1], k=5, mode="dense", filter="n >= 10")[0]
    assert [hit.id for hit in dense] == [f"d{i + 10}" for i in _cosine_top(vectors[10:], vectors[0], 5)]


def test_writes_to_an_external_index_take_vectors_and_refuse_without_them(
    external: tuple[Retriever, np.ndarray],
) -> None:
    index, _ = external
    before = _manifest_bytes(index.path)
    with pytest.raises(BadInputError, match="give the documents' vectors"):
        index.add(_docs(2, start=100))
    assert _manifest_bytes(index.path) == before
    new = _vectors(2, seed=5)
    assert index.add(_docs(2, start=100), vectors=new) == 32
    assert index.search(query_vectors=new[1:2], k=1, mode="dense")[0][0].id == "d101"
    moved = _vectors(1, seed=9)
    result = index.write([Document("d0", "moved", {"n": 0})], vectors=moved, on_existing="replace")
    assert (result.added, result.replaced, result.count) == (0, 1, 32)
    assert index.upsert([Document("d1", "moved too", {"n": 1})], vectors=moved * 2) == 32
    top = index.search(query_vectors=moved, k=2, mode="dense")[0]
    assert {hit.id for hit in top} == {"d0", "d1"}
    assert index.delete(["d0"]).deleted == 1
    reloaded = Retriever.load(index.path)
    assert reloaded.count == 31 and reloaded.search(query_vectors=moved, k=1, mode="dense")[0][0].id == "d1"
    reloaded.close()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda v: v[:, :8], "8-d; this index takes 16-d"),
        (lambda v: v[:1], "1 vectors for 2 documents"),
        (lambda v: np.where(np.arange(DIM) == 3, np.nan, v), "NaN or infinite values .* row\\(s\\): 0, 1"),
        (lambda v: v[0], "2-d array"),
        (lambda v: v.astype(str), "must be numbers"),
    ],
)
def test_bad_vectors_in_a_write_are_one_line_and_write_nothing(
    external: tuple[Retriever, np.ndarray], make: object, message: str
) -> None:
    index, vectors = external
    before = _manifest_bytes(index.path)
    with pytest.raises(WhitevecError, match=message) as caught:
        index.add(_docs(2, start=200), vectors=make(vectors[:2]))  # type: ignore[operator]
    assert "\n" not in str(caught.value)
    assert _manifest_bytes(index.path) == before and index.count == 30


def test_bad_vectors_at_a_build_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "ix"
    for vectors, message in [
        (_vectors(3), "3 vectors for 4 documents"),
        (np.full((4, DIM), np.inf, np.float32), "NaN or infinite"),
        (np.ones((4, DIM, 1), np.float32), "2-d array"),
    ]:
        with pytest.raises(BadInputError, match=message):
            Retriever.build(_docs(4), out, vectors=vectors)
    with pytest.raises(BadInputError, match="give an encoder, or the documents' vectors"):
        Retriever.build(_docs(4), out)
    with pytest.raises(BadInputError, match="encoder_name names"):
        Retriever.build(_docs(4), out, encoder=HashEncoder(DIM), encoder_name="x")
    with pytest.raises(DimensionMismatchError, match="8-d; this index takes 16-d"):
        Retriever.build(_docs(4), out, encoder=HashEncoder(DIM), vectors=_vectors(4)[:, :8])
    with pytest.raises(BadInputError, match="faiss backend only"):
        Retriever.build(_docs(4), out, vectors=_vectors(4), backend="milvus")
    with pytest.raises(BadInputError, match="needs a model's tokenizer"):
        Retriever.build(_docs(4), out, vectors=_vectors(4), lexical="bm25", analyzer="encoder")
    assert not out.exists()


def test_vectors_files_npy_and_one_tensor_safetensors_are_read_others_refused(tmp_path: Path) -> None:
    vectors = _vectors(4)
    np.save(tmp_path / "v.npy", vectors)
    save_file({"embeddings": vectors}, str(tmp_path / "v.safetensors"))
    save_file({"a": vectors, "b": vectors}, str(tmp_path / "two.safetensors"))
    (tmp_path / "v.txt").write_text("1 2 3\n")
    for name in ("v.npy", "v.safetensors"):
        index = Retriever.build(_docs(4), tmp_path / name.replace(".", "-"), vectors=tmp_path / name)
        assert index.search(query_vectors=tmp_path / "v.npy", k=1, mode="dense")[3][0].id == "d3"
        index.close()
    with pytest.raises(BadInputError, match=r"must hold one tensor; it holds 2 \(a, b\)"):
        Retriever.build(_docs(4), tmp_path / "x", vectors=tmp_path / "two.safetensors")
    with pytest.raises(BadInputError, match=r"must be \.npy or \.safetensors"):
        Retriever.build(_docs(4), tmp_path / "x", vectors=tmp_path / "v.txt")
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    with pytest.raises(BadInputError, match=r"not a readable \.npy"):
        Retriever.build(_docs(4), tmp_path / "x", vectors=tmp_path / "bad.npy")
    assert not (tmp_path / "x").exists()


def test_an_own_model_index_takes_query_vectors_and_given_vectors_in_its_space(tmp_path: Path) -> None:
    encoder = HashEncoder(DIM)
    docs = _docs(12)
    index = Retriever.build(docs, tmp_path / "own", encoder=encoder, transform="whitening-8")
    assert not index.is_external and index.input_dim == DIM and index.dim == 8
    by_text = index.search(["cats purr softly number 4"], k=3, mode="dense")
    by_vector = index.search(query_vectors=encoder.encode(["cats purr softly number 4"]), k=3, mode="dense")
    assert [[h.id for h in q] for q in by_text] == [[h.id for h in q] for q in by_vector]
    with pytest.raises(DimensionMismatchError, match="8-d; this index takes 16-d"):
        index.add(_docs(1, start=50), vectors=_vectors(1)[:, :8])
    with pytest.raises(BadInputError, match="2 query_vectors for 1 queries"):
        index.search(["cats"], query_vectors=_vectors(2), mode="hybrid" if index.lexical else "dense")
    given = index.add(_docs(1, start=50), vectors=encoder.encode([_docs(1, start=50)[0].text]))
    assert given == 13 and index.search([_docs(1, start=50)[0].text], k=1)[0][0].id == "d50"
    index.close()


def test_a_build_of_given_vectors_fits_its_transform_and_encoding_on_them(tmp_path: Path) -> None:
    vectors = _vectors(40)
    index = Retriever.build(
        _docs(40), tmp_path / "w", vectors=vectors, transform="whitening-8", index_params={"encoding": "binary"}
    )
    record = index.manifest["transform"]
    assert (record["spec"], record["fit_on"], record["fit_rows"], index.dim) == ("whitening-8", "corpus", 40, 8)
    assert index.manifest["index_params"]["encoding"] == "binary"
    assert index.search(query_vectors=vectors[5:6], k=1, mode="dense")[0][0].id == "d5"
    index.close()


def test_an_external_index_refits_from_kept_raw_vectors_and_refuses_without_them(tmp_path: Path) -> None:
    vectors = _vectors(20)
    kept = Retriever.build(_docs(20), tmp_path / "kept", vectors=vectors, keep_raw_vectors=True)
    kept.add(_docs(5, start=20), vectors=_vectors(5, seed=3))
    kept.refit("whitening-4")
    assert kept.dim == 4 and kept.manifest["transform"]["fit_rows"] == 25 and kept.is_external
    assert kept.search(query_vectors=vectors[2:3], k=1, mode="dense")[0][0].id == "d2"
    kept.close()
    plain = Retriever.build(_docs(20), tmp_path / "plain", vectors=vectors, transform="whitening-4")
    before = _manifest_bytes(plain.path)
    with pytest.raises(BadInputError, match="keeps no raw vectors to fit on"):
        plain.refit()
    assert _manifest_bytes(plain.path) == before
    with pytest.raises(BadInputError, match="has no model to name"):
        Retriever.load(plain.path, model="anything")
    plain.close()


# --- the empty index -------------------------------------------------------------------------------------------
def test_an_empty_index_loads_answers_no_hits_and_grows_by_writes(tmp_path: Path) -> None:
    created = Retriever.create(tmp_path / "e", dim=DIM, encoder_name="api", lexical="bm25")
    assert (created.count, created.is_external, created.input_dim) == (0, True, DIM)
    loaded = Retriever.load(tmp_path / "e")
    for results in (
        loaded.search(query_vectors=_vectors(1), mode="dense"),
        loaded.search(["cats"], mode="lexical"),
        loaded.search(["cats"], query_vectors=_vectors(1), mode="hybrid", filter="n > 1"),
    ):
        assert results[0] == [] and results[0].note == "the index holds no documents"
    assert loaded.delete(["nope"]).missing == ["nope"] and loaded.compact() == 0
    vectors = _vectors(3)
    assert loaded.add(_docs(3), vectors=vectors) == 3
    assert loaded.search(["purr"], query_vectors=vectors[:1], k=1, mode="hybrid")[0][0].id == "d0"
    assert loaded.add(_docs(2, start=3), vectors=_vectors(2, seed=1)) == 5
    again = Retriever.load(tmp_path / "e")
    assert again.count == 5 and "unfilled" not in again.manifest and again.manifest["model"] == "api"
    for index in (created, loaded, again):
        index.close()


def test_an_empty_index_with_a_model_takes_text_writes(tmp_path: Path) -> None:
    index = Retriever.create(tmp_path / "m", encoder=HashEncoder(DIM))
    assert not index.is_external and index.count == 0
    index.add(_docs(4))
    assert index.search([_docs(4)[2].text], k=1)[0][0].id == "d2"
    index.close()
    for kwargs, message in [
        ({}, "give an encoder, or the documents' vectors"),
        ({"dim": DIM, "encoder": HashEncoder(DIM)}, "a dim .* or an encoder"),
        ({"encoder": HashEncoder(DIM), "encoder_name": "x"}, "encoder_name names"),
        ({"dim": 0}, "positive integer"),
        ({"dim": DIM, "backend": "milvus"}, "faiss backend only"),
        ({"dim": DIM, "kind": "nope"}, "index kind"),
    ]:
        with pytest.raises(BadInputError, match=message):
            Retriever.create(tmp_path / "bad", **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "bad").exists()


def test_an_empty_index_fits_its_transform_on_the_first_write_that_brings_enough(tmp_path: Path) -> None:
    index = Retriever.create(tmp_path / "w", dim=DIM, transform="whitening-4")
    assert index.dim == 4
    before = _manifest_bytes(index.path)
    with pytest.raises(
        BadInputError, match="whitening-4 on its first write, which needs at least 5 documents; this"
    ):
        index.add(_docs(4), vectors=_vectors(4))
    assert _manifest_bytes(index.path) == before and index.count == 0
    vectors = _vectors(6)
    index.add(_docs(6), vectors=vectors)
    record = index.manifest["transform"]
    assert (record["spec"], record["fit_rows"], index.dim, index.count) == ("whitening-4", 6, 4, 6)
    index.add(_docs(1, start=6), vectors=_vectors(1, seed=2))  # later writes: the fitted transform applied
    assert index.manifest["transform"]["fit_rows"] == 6 and index.count == 7
    assert index.search(query_vectors=vectors[1:2], k=1, mode="dense")[0][0].id == "d1"
    index.close()


def test_an_empty_index_of_a_trained_encoding_trains_on_its_first_write(tmp_path: Path) -> None:
    index = Retriever.create(tmp_path / "b", dim=DIM, index_params={"encoding": "binary"}, keep_raw_vectors=True)
    vectors = _vectors(10)
    index.add(_docs(10), vectors=vectors)
    assert index.manifest["index_params"]["encoding"] == "binary" and "raw_vectors" in index.manifest
    assert index.search(query_vectors=vectors[4:5], k=1, mode="dense")[0][0].id == "d4"
    index.close()


def test_a_filtered_search_of_an_index_whose_documents_are_all_deleted_answers_no_hits(tmp_path: Path) -> None:
    # An empty index's metadata names no field: a filter is checked for its syntax only, and answers no hits.
    index = Retriever.build(_docs(3), tmp_path / "gone", vectors=_vectors(3))
    index.delete(["d0", "d1", "d2"])
    found = index.search(query_vectors=_vectors(1), filter="n > 1", mode="dense")
    assert found[0] == [] and found[0].note == "the index holds no documents"
    with pytest.raises(BadInputError, match="filter"):
        index.search(query_vectors=_vectors(1), filter="n >", mode="dense")
    index.close()


def test_an_external_index_loaded_with_an_encoder_of_its_dimension_takes_texts(tmp_path: Path) -> None:
    encoder = HashEncoder(DIM)  # the caller's own client of the model that made the vectors, say
    docs = _docs(6)
    Retriever.build(docs, tmp_path / "x", vectors=encoder.encode([d.text for d in docs]), encoder_name="h").close()
    with Retriever.load(tmp_path / "x", encoder=encoder) as index:
        assert index.is_external
        assert index.search([docs[2].text], k=1, mode="dense")[0][0].id == "d2"
        index.add(_docs(1, start=9))  # encoded by the encoder given
        assert index.search([_docs(1, start=9)[0].text], k=1, mode="dense")[0][0].id == "d9"
    with pytest.raises(DimensionMismatchError, match="8-d vectors; the index holds 16-d"):
        Retriever.load(tmp_path / "x", encoder=HashEncoder(8))


def test_a_number_past_float32s_range_is_refused_in_one_line_without_a_warning(
    external: tuple[Retriever, np.ndarray],
) -> None:
    index, vectors = external
    huge = vectors[:1].astype(np.float64)
    huge[0, 0] = 1e300
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warning would be a second line
        with pytest.raises(BadInputError, match=r"NaN or infinite values \(in float32\) in 1 row\(s\): 0"):
            index.search(query_vectors=huge, mode="dense")
