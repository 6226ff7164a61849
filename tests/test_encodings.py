"""Index encodings (float32, fp16, SQ, PQ, OPQ, refine, IVF-PQ, HNSW-SQ/PQ): parsing, recall against exact search,
bytes on disk, the manifest, export-faiss, bad input."""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pytest

from tests.index_helpers import HashEncoder
from whitevec.cli import main
from whitevec.errors import BadInputError, CorruptFileError
from whitevec.export import export_faiss
from whitevec.index import (
    Document,
    FaissStore,
    Retriever,
    check_build,
    index_size,
    list_encodings,
    parse_encoding,
    read_manifest,
    storage_estimate,
)
from whitevec.index.encodings.spec import split_encoding_list
from whitevec.index.folder.manifest import SELF_CHECKSUM, manifest_digest
from whitevec.transforms import WhitevecWarning

N, D = 4000, 32


def _clustered(n: int, d: int, seed: int) -> np.ndarray:
    """Unit vectors from 64 Gaussian clusters with a decaying spectrum (0.8^i): nearest neighbours are local,
    as with sentence vectors, rather than uniform noise on the sphere."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(size=(64, d)) * 2
    x = centres[rng.integers(0, 64, n)] + rng.normal(size=(n, d)) * 0.8 ** np.arange(d)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


VECTORS = _clustered(N, D, seed=0)
QUERIES = _clustered(100, D, seed=1)
EXACT = np.argsort(-(QUERIES @ VECTORS.T), axis=1)[:, :10]

# Recall@10 against exact search on VECTORS (4000 x 32) for 100 QUERIES. Each floor sits about 0.1 below what
# faiss 1.15.1 gave when the test was written (in brackets), so a code change that breaks an encoding (wrong
# codes, codes ignored, a refine that does not re-rank, an IVF that probes one list) fails, while a faiss
# version's k-means seeding does not. A random ranking scores 0.0025. PQ here trains on 4000 vectors, so 8 bits
# fall to 6 (39 per centroid); "pq16x4" keeps its 4 bits.
FLOORS: dict[tuple[str, str], float] = {
    ("flat", "float32"): 0.999,  # [1.000] exact
    ("flat", "fp16"): 0.98,  # [0.999]
    ("flat", "sq8"): 0.9,  # [0.988]
    ("flat", "sq4"): 0.6,  # [0.729] (0.386 when cosine on codes was an inner product)
    ("flat", "pq16"): 0.6,  # [0.713] (0.319 by inner product: see FaissStore._l2_for_cosine)
    ("flat", "pq16x4"): 0.3,  # [0.420]
    ("flat", "pq8+refine"): 0.8,  # [0.914]
    ("ivf", "float32"): 0.99,  # [1.000] nprobe = nlist: exhaustive
    ("ivf", "sq8"): 0.9,  # [0.981]
    ("ivf", "pq16"): 0.72,  # [0.837] IVF-PQ encodes residuals
    ("ivf", "pq8+refine"): 0.9,  # [0.991]
    ("hnsw", "float32"): 0.9,  # [1.000] M=16, efSearch=128
    ("hnsw", "sq8"): 0.9,  # [0.988]
    ("hnsw", "pq16"): 0.6,  # [0.714]
}
KIND_PARAMS: dict[str, dict[str, Any]] = {
    "flat": {},
    "ivf": {"nlist": 64, "nprobe": 64},
    "hnsw": {"M": 16, "efSearch": 128},
}


@functools.cache
def _built(kind: str, encoding: str) -> FaissStore:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WhitevecWarning)  # the PQ bits lowered: tested below
        store = FaissStore(D, "cosine", kind, {"encoding": encoding, **KIND_PARAMS[kind]})
        store.add(np.arange(N), VECTORS)
    return store


def _recall(ids: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / exact.shape[1] for a, b in zip(ids, exact, strict=True)]))


@pytest.mark.parametrize(("kind", "encoding"), list(FLOORS))
def test_recall_against_exact_above_floor(kind: str, encoding: str) -> None:
    _, ids = _built(kind, encoding).search(QUERIES, 10)
    assert _recall(ids, EXACT) >= FLOORS[(kind, encoding)]


def assert_estimate_matches_the_file(store: FaissStore, folder: Path) -> None:
    """storage_estimate within 5% of the index.faiss ``store`` writes, in all and per vector."""
    store.save(folder)
    on_disk = (folder / "index.faiss").stat().st_size
    params, n = store.params(), store.count
    per_vector, fixed = storage_estimate(parse_encoding(params["encoding"]), store.kind, params, store.dim)
    assert abs(fixed + n * per_vector - on_disk) <= 0.05 * on_disk
    measured_per_vector = (on_disk - fixed) / n
    assert abs(measured_per_vector - per_vector) <= 0.05 * per_vector


@pytest.mark.parametrize(("kind", "encoding"), list(FLOORS))
def test_bytes_per_vector_match_the_file(tmp_path: Path, kind: str, encoding: str) -> None:
    assert_estimate_matches_the_file(_built(kind, encoding), tmp_path)


def test_opq_rotates_before_pq() -> None:
    x, q = _clustered(1300, 16, seed=3), _clustered(50, 16, seed=4)
    exact = np.argsort(-(q @ x.T), axis=1)[:, :10]
    with pytest.warns(WhitevecWarning, match="using opq4,pq4x5"):
        store = FaissStore(16, "cosine", "flat", {"encoding": "opq4,pq4"})
        store.add(np.arange(len(x)), x)
    assert store.params()["encoding"] == "opq4,pq4x5"
    assert isinstance(faiss.downcast_index(store.index.index), faiss.IndexPreTransform)
    _, ids = store.search(q, 10)
    assert _recall(ids, exact) >= 0.3  # [0.42 when written]


def test_parse_canonical_forms_and_bytes() -> None:
    assert parse_encoding("PQ48").spec == "pq48" and parse_encoding("pq48x8").spec == "pq48"
    assert parse_encoding(" opq32 , pq32x4 ").spec == "opq32,pq32x4"
    assert parse_encoding("sq8+refine").spec == "sq8+refine" and parse_encoding(None).spec == "float32"
    assert [parse_encoding(s).code_bytes(384) for s in ("float32", "fp16", "sq8", "sq4", "pq96", "pq48x4")] == [
        1536,
        768,
        384,
        192,
        96,
        24,
    ]
    assert parse_encoding("pq48+refine").code_bytes(384) == 48 + 1536
    assert split_encoding_list("float32,sq8,opq32,pq32,pq16") == ["float32", "sq8", "opq32,pq32", "pq16"]
    assert split_encoding_list("sq8;faiss:IVF8,PQ4") == ["sq8", "faiss:IVF8,PQ4"]
    specs = list_encodings(128, max_bytes=128)
    assert "sq8" in specs and "pq64" in specs and "fp16" not in specs and "pq48" not in specs
    assert all(parse_encoding(s).code_bytes(128) <= 128 for s in specs)


@pytest.mark.parametrize("spec", ["pq", "sq16", "int8", "pq0", "pq8x17", "opq8,pq16", "faiss:", "faiss:Bogus12"])
def test_unknown_encoding_lists_the_valid_ones(spec: str) -> None:
    with pytest.raises(BadInputError) as info:
        parse_encoding(spec)
    message = str(info.value)
    assert repr(spec) in message or spec.split(":")[-1] in message
    if spec in ("pq", "sq16", "int8"):
        assert "float32, fp16, sq8, sq4, pqM" in message


def test_pq_m_must_divide_the_dimension(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"d=30; valid M for d=30: 1, 2, 3, 5, 6, 10, 15, 30"):
        FaissStore(30, "cosine", "flat", {"encoding": "pq7"})
    # before any document is read: check_build with the dimension the transform will give
    with pytest.raises(BadInputError, match="d=128"):
        check_build(tmp_path / "idx", index_params={"encoding": "pq96"}, dim=128)


def test_too_few_training_vectors_lower_pq_bits_with_one_warning() -> None:
    x = _clustered(700, 16, seed=5)
    with pytest.warns(WhitevecWarning) as caught:
        store = FaissStore(16, "ip", "flat", {"encoding": "pq8"})
        store.add(np.arange(700), x)
    assert len(caught) == 1
    assert "pq8 needs 9984 training vectors" in str(caught[0].message) and "using pq8x4" in str(caught[0].message)
    assert store.params()["encoding"] == "pq8x4"


def test_too_few_training_vectors_below_the_smallest_setting_is_an_error() -> None:
    store = FaissStore(16, "ip", "flat", {"encoding": "pq8"})
    with pytest.raises(BadInputError, match="needs at least 624 training vectors"):
        store.add(np.arange(500), _clustered(500, 16, seed=6))
    sampled = FaissStore(16, "ip", "flat", {"encoding": "pq8x4", "train_sample": 300})
    with pytest.raises(BadInputError, match="got 300"):
        sampled.add(np.arange(1000), _clustered(1000, 16, seed=6))


def test_ivf_lists_lowered_to_what_the_training_vectors_support() -> None:
    with pytest.warns(
        WhitevecWarning, match=r"nlist=50 needs 1950 training vectors .* got 1000, so using nlist=25"
    ):
        store = FaissStore(16, "ip", "ivf", {"nlist": 50, "encoding": "sq8"})
        store.add(np.arange(1000), _clustered(1000, 16, seed=7))
    assert store.params()["nlist"] == 25


def test_train_sample_is_seeded() -> None:
    x = _clustered(2000, 16, seed=8)
    a = FaissStore(16, "ip", "flat", {"encoding": "pq4x4", "train_sample": 700})
    b = FaissStore(16, "ip", "flat", {"encoding": "pq4x4", "train_sample": 700})
    assert np.array_equal(a.training_rows(x), b.training_rows(x)) and a.training_rows(x).shape == (700, 16)
    a.add(np.arange(2000), x)
    b.add(np.arange(2000), x)
    assert faiss.serialize_index(a.index).tobytes() == faiss.serialize_index(b.index).tobytes()


def test_expert_factory_string() -> None:
    store = FaissStore(16, "ip", "ivf", {"encoding": "faiss:IVF8,SQ8", "nprobe": 8})
    store.add(np.arange(1000), _clustered(1000, 16, seed=9))
    assert store.params()["nlist"] == 8 and faiss.extract_index_ivf(store.index).nprobe == 8
    with pytest.raises(BadInputError, match="builds a ivf index; give --kind ivf"):
        FaissStore(16, "ip", "flat", {"encoding": "faiss:IVF8,SQ8"})
    with pytest.raises(BadInputError, match="drop IDMap"):
        parse_encoding("faiss:IDMap,Flat")


# --- through the Retriever: manifest, export, index info ------------------------------------------------------
DOCS = [Document(f"d{i}", f"text number {i}") for i in range(1300)]
TEXTS = [f"query {i}" for i in range(20)]


def _build(folder: Path, encoding: str, kind: str = "flat") -> Retriever:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WhitevecWarning)
        return Retriever.build(
            DOCS,
            folder,
            encoder=HashEncoder(dim=32),  # type: ignore[arg-type]
            transform="whitening-16",
            kind=kind,
            index_params={"encoding": encoding, **({"nlist": 8, "nprobe": 8} if kind == "ivf" else {})},
        )


def test_manifest_round_trip_with_the_encoding(tmp_path: Path) -> None:
    built = _build(tmp_path / "idx", "pq8")  # 1300 training vectors: 8 bits become 5
    before = [[h.id for h in row] for row in built.search(TEXTS, 10)]
    built.close()
    manifest = read_manifest(tmp_path / "idx")
    assert manifest["index_params"]["encoding"] == "pq8x5"
    size = index_size(manifest)
    assert size["encoding"] == "pq8x5" and size["code_bytes_per_vector"] == 5
    assert size["index_bytes"] == (tmp_path / "idx" / "index.faiss").stat().st_size
    with Retriever.load(tmp_path / "idx", encoder=HashEncoder(dim=32)) as loaded:  # type: ignore[arg-type]
        assert [[h.id for h in row] for row in loaded.search(TEXTS, 10)] == before
        assert loaded.store.encoding.spec == "pq8x5"  # type: ignore[attr-defined]
    # an encoding the manifest check refuses, even with a recomputed self-checksum
    data = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    data["index_params"]["encoding"] = "pq8x99"
    data[SELF_CHECKSUM] = manifest_digest(data)
    (tmp_path / "idx" / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(CorruptFileError, match="index_params"):
        read_manifest(tmp_path / "idx")


@pytest.mark.parametrize(
    ("encoding", "kind"),
    [("sq8", "flat"), ("pq8x4", "flat"), ("sq4+refine", "flat"), ("pq8x4", "ivf"), ("rabitq-qb0", "flat")],
)
def test_export_faiss_of_a_compressed_index_equals_whitevec(tmp_path: Path, encoding: str, kind: str) -> None:
    built = _build(tmp_path / "idx", encoding, kind)
    raw = HashEncoder(dim=32).encode(TEXTS)
    _, rows = built.store.search(built.embed(TEXTS), 10)
    built.close()
    out = export_faiss(tmp_path / "idx", tmp_path / "plain.faiss")
    _, exported_rows = faiss.read_index(str(out)).search(raw, 10)
    assert np.array_equal(exported_rows, rows)


def test_index_info_reports_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _build(tmp_path / "idx", "sq8").close()
    assert main(["index", "info", str(tmp_path / "idx")]) == 0
    size = json.loads(capsys.readouterr().out)["size"]
    on_disk = (tmp_path / "idx" / "index.faiss").stat().st_size
    assert size["code_bytes_per_vector"] == 16 and size["index_bytes"] == on_disk
    assert size["bytes_per_vector"] == round(on_disk / len(DOCS), 2)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--encoding", "int8"], "unknown encoding 'int8'; valid: float32, fp16, sq8"),
        (["--encoding", "pq12", "--transform", "whitening-16"], "d=16; valid M for d=16: 1, 2, 4, 8, 16"),
        (["--encoding", "faiss:IVF8,Flat"], "builds a ivf index; give --kind ivf"),
        (["--backend", "milvus", "--encoding", "pq8", "--kind", "ivf"], "Milvus Lite has no index for kind"),
        (["--encoding", "float32+rescore"], "+rescore is redundant on float32 codes"),
        (["--encoding", "rabitq", "--kind", "hnsw", "--metric", "ip"], "searches by L2 only"),
        (["--backend", "milvus", "--encoding", "sq8+rescore"], "the Milvus backend does not rescore"),
        (["--backend", "milvus", "--encoding", "binary"], "Milvus Lite has no index for kind 'flat'"),
    ],
)
def test_cli_refuses_bad_encodings_before_the_model_loads(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    needle: str,
) -> None:

    def no_encoder(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was loaded before the encoding was checked")

    monkeypatch.setattr("whitevec.cli._options._encoder", no_encoder)
    corpus = tmp_path / "c.txt"
    corpus.write_text("one doc\nanother doc\n")
    argv = ["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "idx"), *extra]
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_transform_knob_specs() -> None:
    from whitevec.transforms import Whitening, make_transform

    soft = make_transform("whitening-128:gamma=0.5")
    assert isinstance(soft, Whitening) and (soft.n_components, soft.gamma, soft.beta) == (128, 0.5, 1.0)
    pca = make_transform("pca-64:beta=0")
    assert isinstance(pca, Whitening) and (pca.n_components, pca.gamma, pca.beta) == (64, 0.0, 0.0)
    for bad, needle in (("center:gamma=1", "only whitening"), ("whitening:eps=1", "not one of gamma=NUMBER")):
        with pytest.raises(BadInputError, match=needle):
            make_transform(bad)
    with pytest.raises(BadInputError, match="not one of"):
        make_transform("whitening-8:gamma=inf")
