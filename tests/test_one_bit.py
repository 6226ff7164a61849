"""1-bit encodings (binary, binary-rr, itq, rabitq) and rescoring from disk (+rescore): parsing and bytes, recall
against exact search, save / load / add / delete, a rescoring file missing or truncated, dimensions that are not
a multiple of 8, index info, and tune's budget counting memory."""

from __future__ import annotations

import functools
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.index_helpers import HashEncoder
from tests.test_encodings import _clustered, _recall, assert_estimate_matches_the_file
from tests.test_tune import retrieval_data
from whitevec.cli import main
from whitevec.errors import BadInputError, CorruptFileError
from whitevec.index import (
    Document,
    FaissStore,
    Retriever,
    check_build,
    parse_encoding,
    read_manifest,
)
from whitevec.index.encodings.rescore import RESCORE_FILE, RecordFile, RescoreVectors
from whitevec.index.encodings.sign_codes import SIGN_FILE, SignCodes, random_rotation
from whitevec.index.faiss.encoded import encoded_vectors, searched_rankings
from whitevec.index.faiss.store import one_faiss_thread
from whitevec.transforms import WhitevecWarning
from whitevec.utils.linalg import unit_rows

N, D = 2000, 64
VECTORS = _clustered(N, D, seed=0)
QUERIES = _clustered(60, D, seed=1)
EXACT = np.argsort(-(QUERIES @ VECTORS.T), axis=1)[:, :10]
KIND_PARAMS: dict[str, dict[str, Any]] = {
    "flat": {},
    "ivf": {"nlist": 16, "nprobe": 16},
    "hnsw": {"M": 16, "efSearch": 128},
}
# Recall@10 against exact search (2000 x 64 clustered unit vectors, 60 queries); each floor about 0.1 below what
# faiss 1.15.1 gave when written (in brackets). 64 bits cannot keep the order of 10 close neighbours; a random
# ranking scores 0.005. With +rescore (K = 10 for sign codes, 4 for RaBitQ, unless given) the top K x 10 are
# re-ranked from vectors on disk: fp16
# restores the exact order; int8 with one scale a vector blurs these clusters' close neighbours (its error is
# comparable to their cosine gaps; on Cranfield's MiniLM vectors int8 costs 0.06 nDCG@10 of exact search).
FLOORS: dict[tuple[str, str], float] = {
    ("flat", "binary"): 0.34,  # [0.443]
    ("flat", "binary-rr"): 0.45,  # [0.565]
    ("flat", "itq"): 0.45,  # [0.563]
    ("flat", "rabitq"): 0.4,  # [0.497]
    ("flat", "binary-rr+rescore"): 0.9,  # [0.993]
    ("flat", "rabitq+rescore=10:int8"): 0.84,  # [0.940]
    ("ivf", "binary-rr"): 0.45,  # [0.565] nprobe = nlist: exhaustive
    ("ivf", "rabitq+rescore"): 0.9,  # [0.993]
    ("hnsw", "itq+rescore"): 0.9,  # [0.993]
    ("hnsw", "rabitq"): 0.4,  # [0.507]
}


@functools.cache
def _built(kind: str, encoding: str) -> FaissStore:
    store = FaissStore(D, "cosine", kind, {"encoding": encoding, **KIND_PARAMS[kind]})
    with one_faiss_thread():  # faiss's thread pool only slows small builds on a shared machine (5 s against 1)
        store.add(np.arange(N), VECTORS)
    return store


@pytest.mark.parametrize(("kind", "encoding"), list(FLOORS))
def test_recall_against_exact_above_floor(kind: str, encoding: str) -> None:
    _, ids = _built(kind, encoding).search(QUERIES, 10)
    assert _recall(ids, EXACT) >= FLOORS[(kind, encoding)]


@pytest.mark.parametrize(("kind", "encoding"), [("flat", "binary-rr"), ("ivf", "binary-rr"), ("hnsw", "rabitq")])
def test_bytes_per_vector_match_the_file(tmp_path: Path, kind: str, encoding: str) -> None:
    assert_estimate_matches_the_file(_built(kind, encoding), tmp_path)


def test_rescoring_lifts_recall_and_returns_the_float_scores() -> None:
    plain, rescored = _built("flat", "binary-rr"), _built("flat", "binary-rr+rescore")
    codes_scores, codes_ids = plain.search(QUERIES, 10)
    scores, ids = rescored.search(QUERIES, 10)
    assert _recall(ids, EXACT) >= _recall(codes_ids, EXACT) + 0.3
    # Hamming scores are cosines of sign vectors (multiples of 2/64); rescored ones the fp16 vectors' products.
    assert np.allclose(codes_scores * 32, np.round(codes_scores * 32))
    expected = np.einsum("qd,qkd->qk", QUERIES, VECTORS[ids].astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    assert (np.diff(scores, axis=1) <= 1e-7).all()


@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
@pytest.mark.parametrize("encoding", ["binary-rr+rescore=10", "sq4+rescore=10:int8"])
def test_rescoring_ranks_the_candidates_best_first_under_every_metric(metric: str, encoding: str) -> None:
    # Vectors of unequal lengths, so that ip, cosine and l2 each order them differently.
    x = VECTORS[:500] * np.linspace(0.5, 2.0, 500, dtype=np.float32)[:, None]
    q = QUERIES[:20] * 1.5
    if metric == "cosine":  # the store takes unit vectors for cosine (the retriever normalises them)
        x, q = x / np.linalg.norm(x, axis=1, keepdims=True), q / np.linalg.norm(q, axis=1, keepdims=True)
    store = FaissStore(D, metric, "flat", {"encoding": encoding})
    store.add(np.arange(500), x)
    scores, ids = store.search(q, 5)
    # Each metric's float score, and which way is nearer: squared L2 smaller, inner products larger.
    nearer = 1.0 if metric == "l2" else -1.0
    want = ((q[:, None, :] - x[None, :, :]) ** 2).sum(axis=2) if metric == "l2" else q @ x.T
    exact = np.argsort(nearer * want, axis=1)[:, :5]
    assert _recall(ids, exact) >= 0.9  # what the float vectors rank first, not last
    assert (np.diff(nearer * scores, axis=1) >= 0).all()  # each row best first
    # The scores are the float query's against the stored records (fp16, or int8 with a scale a vector).
    np.testing.assert_allclose(scores, np.take_along_axis(want, ids, axis=1), rtol=0.02, atol=0.02)


def test_parse_forms_bytes_and_refusals() -> None:
    assert parse_encoding("BINARY-RR + RESCORE").spec == "binary-rr+rescore=10"
    assert parse_encoding("rabitq+rescore").spec == "rabitq+rescore=4"
    assert parse_encoding("rabitq-qb4").spec == "rabitq" and parse_encoding("rabitq-qb0").qb == 0
    assert parse_encoding("sq8+rescore=10:int8").spec == "sq8+rescore=10:int8"
    sizes = {s: (parse_encoding(s).code_bytes(384), parse_encoding(s).disk_bytes(384)) for s in ("binary", "itq")}
    assert sizes == {"binary": (48, 0), "itq": (48, 0)}
    assert parse_encoding("rabitq+rescore").code_bytes(384) == 56 and parse_encoding("rabitq").code_bytes(30) == 12
    assert parse_encoding("binary+rescore").disk_bytes(384) == 768
    assert parse_encoding("binary+rescore:int8").disk_bytes(384) == 388
    for spec, needle in [
        ("float32+rescore", "redundant on float32"),
        ("fp16+rescore", "redundant on fp16"),
        ("sq8+refine+rescore", "choose one"),
        ("binary+refine", r"use binary\+rescore"),
        ("binary+rescore=0", "K >= 1"),
        ("binary+rescore:bf16", "not 'bf16'"),
        ("rabitq-qb9", "0-8 bits"),
        ("binary+rescore+rescore", "repeated suffix"),
    ]:
        with pytest.raises(BadInputError, match=needle):
            parse_encoding(spec)
    with pytest.raises(BadInputError, match="searches by L2 only"):
        FaissStore(16, "ip", "hnsw", {"encoding": "rabitq"})


def test_a_dimension_not_a_multiple_of_8_is_padded_without_changing_the_ranking() -> None:
    x, q = _clustered(500, 30, seed=2), _clustered(20, 30, seed=3)
    store = FaissStore(30, "cosine", "flat", {"encoding": "binary"})
    store.add(np.arange(500), x)
    assert store.signs is not None and store.signs.encode(x).shape == (500, 4) and store.index.d == 32
    scores, ids = store.search(q, 500)
    mean = x.mean(axis=0)
    hamming = ((q[:, None, :] > mean) != (x[None, :, :] > mean)).sum(axis=2)  # over the 30 real bits only
    np.testing.assert_allclose(scores, 1 - 2 * np.take_along_axis(hamming, ids, axis=1) / 30, atol=1e-6)
    assert (np.diff(np.take_along_axis(hamming, ids, axis=1), axis=1) >= 0).all()


def _anisotropic(n: int, d: int, seed: int) -> np.ndarray:
    """Unit vectors of a Gaussian whose variances fall from 1 to 0.05^2, its axes turned by a random rotation:
    the structure ITQ learns (a random rotation spreads the variance evenly; the identity keeps the turn)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, d)) * np.geomspace(1.0, 0.05, d)) @ np.linalg.qr(rng.standard_normal((d, d)))[0]
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _quantization_loss(x: np.ndarray, mean: np.ndarray, rotation: np.ndarray) -> float:
    """ITQ's objective ||B - V R||^2 (Gong & Lazebnik): V the centred vectors scaled to length sqrt(d), so that
    they are comparable with the +-1 codes B = sign(V R)."""
    centred = (x - mean).astype(np.float64)
    projected = centred / np.linalg.norm(centred, axis=1, keepdims=True) * np.sqrt(x.shape[1]) @ rotation
    return float(((np.sign(projected) - projected) ** 2).sum())


def test_itq_learns_a_rotation_that_loses_less_to_the_sign_than_a_random_one() -> None:
    # A rotation that ITQ did not learn (a random one, the identity, or the learned one transposed) loses more.
    x = _anisotropic(2000, 32, seed=3)
    store = FaissStore(32, "cosine", "flat", {"encoding": "itq"})
    store.add(np.arange(len(x)), x)
    signs = store.signs
    assert signs is not None and signs.mean_ is not None and signs.rotation_ is not None
    rotation = signs.rotation_.astype(np.float64)
    np.testing.assert_allclose(rotation @ rotation.T, np.eye(32), atol=1e-4)  # orthogonal: d bits of d axes
    np.testing.assert_allclose(signs.mean_, x.mean(axis=0), atol=1e-5)
    learned = _quantization_loss(x, signs.mean_, rotation)
    others = [random_rotation(32, seed) for seed in range(8)] + [np.eye(32), rotation.T]
    # [faiss 1.15.1: learned 22162; the others 24799 to 25674]
    assert learned < 0.95 * min(_quantization_loss(x, signs.mean_, other) for other in others)


def test_itq_needs_as_many_training_vectors_as_dimensions() -> None:
    with pytest.raises(BadInputError, match="at least 30 training vectors; got 20"):
        FaissStore(30, "cosine", "flat", {"encoding": "itq"}).add(np.arange(20), _clustered(20, 30, seed=4))
    with pytest.raises(BadInputError, match=r"itq learns a 30 x 30 rotation .* needs at least d=30 .*; got 29\."):
        SignCodes("itq").fit(_clustered(29, 30, seed=4))
    exactly = SignCodes("itq").fit(_clustered(30, 30, seed=4))  # d vectors are enough
    assert exactly.mean_ is not None and exactly.rotation_ is not None
    # What is saved and compared is float32, whatever faiss hands back.
    assert exactly.mean_.dtype == exactly.rotation_.dtype == np.float32
    assert exactly.unit_signs(_clustered(3, 30, seed=5)).dtype == np.float32


def _sign_file(codec: str, file_format: str | None = "whitevec.sign_codes/1", **tensors: np.ndarray) -> bytes:
    from safetensors.numpy import save

    metadata = {"codec": codec} if file_format is None else {"format": file_format, "codec": codec}
    return bytes(save(tensors, metadata=metadata))


@pytest.mark.parametrize(
    ("data", "codec", "needle"),
    [
        (b"not safetensors", "binary", "s.st is not a readable sign-code file .*; rebuild it"),
        (
            _sign_file("binary", mean=np.zeros(8, np.float32)),
            "itq",
            r"s.st holds sign codes 'binary' \(whitevec.sign_codes/1\); manifest says itq",
        ),
        (
            _sign_file("binary", None, mean=np.zeros(8, np.float32)),
            "binary",
            r"holds sign codes 'binary' \(None\)",
        ),
        (_sign_file("binary", mean=np.zeros(4, np.float32)), "binary", "does not hold the mean .* 8-d binary"),
        (
            _sign_file("binary-rr", mean=np.zeros(8, np.float32)),
            "binary-rr",
            r"and rotation\) of 8-d binary-rr",
        ),
        (
            _sign_file("binary", mean=np.zeros(8, np.float32), rotation=np.eye(8, dtype=np.float32)),
            "binary",
            "does not hold the mean",
        ),
        (
            _sign_file("itq", mean=np.zeros(8, np.float32), rotation=np.eye(4, dtype=np.float32)),
            "itq",
            "does not hold the mean",
        ),
        (
            _sign_file("binary", mean=np.zeros(8, np.float32), extra=np.zeros(1, np.float32)),
            "binary",
            "does not hold the mean",
        ),
    ],
    ids=[
        "not safetensors",
        "another codec",
        "no format",
        "short mean",
        "no rotation",
        "a rotation too many",
        "bad rotation",
        "extra",
    ],
)
def test_a_sign_file_that_does_not_match_the_manifest_is_refused_by_name(
    data: bytes, codec: str, needle: str
) -> None:
    # The manifest's checksum stops a damaged file first; this is the check behind it (a file of another index).
    with pytest.raises(CorruptFileError, match=needle):
        SignCodes.from_bytes(data, "s.st", codec, 8)


def test_sign_codes_fit_on_one_vector_or_more_and_code_the_mean_as_zero_bits() -> None:
    with pytest.raises(BadInputError, match=r"at least one training vector, got shape \(0, 8\)"):
        SignCodes("binary").fit(np.zeros((0, 8), np.float32))
    x = _clustered(5, 8, seed=9)
    one = SignCodes("binary").fit(x[:1])  # one vector: its own mean
    np.testing.assert_array_equal(one.mean_, x[0])  # type: ignore[arg-type]
    assert not one.signs(x[:1]).any()  # (x - mean) > 0 is strict: a coordinate at the mean is a 0 bit
    np.testing.assert_array_equal(one.encode(x[:1]), np.zeros((1, 1), np.uint8))


@pytest.mark.parametrize("metric", ["cosine", "ip", "l2"])
def test_1_bit_scores_under_each_metric(metric: str) -> None:
    # 1 - 2h/d for cosine and ip (higher is nearer), 4h/d for l2 (the unit sign vectors' squared distance).
    x, q = _clustered(300, 24, seed=10), _clustered(10, 24, seed=11)
    store = FaissStore(24, metric, "flat", {"encoding": "binary"})
    store.add(np.arange(300), x)
    scores, ids = store.search(q, 5)
    mean = x.astype(np.float64).mean(axis=0)
    hamming = ((q[:, None, :] > mean) != (x[None, :, :] > mean)).sum(axis=2)
    h = np.take_along_axis(hamming, ids, axis=1)
    assert (np.diff(h, axis=1) >= 0).all() and (h[:, 0] == hamming.min(axis=1)).all()
    np.testing.assert_allclose(scores, 4 * h / 24 if metric == "l2" else 1 - 2 * h / 24, atol=1e-6)


def test_a_saved_sign_step_loads_as_it_was() -> None:
    for codec in ("binary", "binary-rr", "itq"):
        fitted = SignCodes(codec).fit(_clustered(40, 16, seed=8))
        loaded = SignCodes.from_bytes(fitted.to_bytes(), "s.st", codec, 16)
        assert loaded.codec == codec and loaded.dim == 16 and loaded.n_bits == 16
        np.testing.assert_array_equal(loaded.mean_, fitted.mean_)  # type: ignore[arg-type]
        assert (loaded.rotation_ is None) == (codec == "binary")
        assert fitted.mean_ is not None and fitted.mean_.dtype == np.float32
        assert fitted.rotation_ is None or fitted.rotation_.dtype == np.float32
        if fitted.rotation_ is not None:
            np.testing.assert_array_equal(loaded.rotation_, fitted.rotation_)  # type: ignore[arg-type]


# --- through the Retriever: files, manifest, load, add, refusals -------------------------------------------
DOCS = [Document(f"d{i}", f"text number {i}") for i in range(600)]
TEXTS = [f"query {i}" for i in range(12)]


def _build(folder: Path, encoding: str, kind: str = "flat", dim: int = 24) -> Retriever:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WhitevecWarning)
        return Retriever.build(
            DOCS,
            folder,
            encoder=HashEncoder(dim=dim),  # type: ignore[arg-type]
            transform="none",
            kind=kind,
            index_params={"encoding": encoding, **KIND_PARAMS[kind]},
        )


def _ids(retriever: Retriever) -> list[list[str]]:
    return [[h.id for h in row] for row in retriever.search(TEXTS, 5)]


@pytest.mark.parametrize(
    ("encoding", "kind", "files"),
    [
        ("binary", "hnsw", {"index.faiss", SIGN_FILE}),
        ("rabitq-qb0", "ivf", {"index.faiss"}),
        ("binary-rr+rescore", "flat", {"index.faiss", SIGN_FILE, RESCORE_FILE}),
        ("rabitq+rescore:int8", "flat", {"index.faiss", RESCORE_FILE}),
    ],
)
def test_saves_loads_and_searches_the_same(tmp_path: Path, encoding: str, kind: str, files: set[str]) -> None:
    built = _build(tmp_path / "idx", encoding, kind)
    before = _ids(built)
    built.close()
    manifest = read_manifest(tmp_path / "idx")
    assert set(manifest["files"]) == files | {"docs.sqlite"}
    with Retriever.load(tmp_path / "idx", encoder=HashEncoder(dim=24)) as loaded:  # type: ignore[arg-type]
        assert _ids(loaded) == before
        store: Any = loaded.store
        assert store.encoding.spec == parse_encoding(encoding).spec
        if store.rescore is not None:
            assert isinstance(store.rescore.disk, RecordFile)  # read from the file on demand, not loaded


def test_index_info_reports_memory_and_disk_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _build(tmp_path / "idx", "binary-rr+rescore=2:int8").close()
    assert main(["index", "info", str(tmp_path / "idx")]) == 0
    size = json.loads(capsys.readouterr().out)["size"]
    folder = tmp_path / "idx"
    ram = (folder / "index.faiss").stat().st_size + (folder / SIGN_FILE).stat().st_size
    disk = (folder / RESCORE_FILE).stat().st_size
    assert size["code_bytes_per_vector"] == 3 and size["rescore_bytes_per_vector"] == 28
    assert size["ram_bytes"] == ram and size["disk_bytes"] == disk and size["index_bytes"] == ram + disk
    assert size["ram_bytes_per_vector"] == round(ram / len(DOCS), 2)
    assert 28 <= size["disk_bytes_per_vector"] <= 28.5  # one int8 record a vector and the .npy header
    assert size["bytes_per_vector"] == round((ram + disk) / len(DOCS), 2)
    assert size["encoding"] == "binary-rr+rescore=2:int8"


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_a_damaged_rescoring_file_is_refused_by_name(tmp_path: Path, damage: str) -> None:
    _build(tmp_path / "idx", "binary+rescore").close()
    path = tmp_path / "idx" / RESCORE_FILE
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(CorruptFileError, match=f"{RESCORE_FILE} is (missing|.*truncated)"):
        Retriever.load(tmp_path / "idx", encoder=HashEncoder(dim=24))  # type: ignore[arg-type]


def test_a_short_rescoring_file_is_refused_even_when_its_size_is_believed(tmp_path: Path) -> None:
    # What the manifest's sizes stop first: the file's own header promising more records than it holds.
    store = FaissStore(8, "ip", "flat", {"encoding": "sq8+rescore"})
    store.add(np.arange(50), _clustered(50, 8, seed=5))
    store.save(tmp_path)
    path = tmp_path / RESCORE_FILE
    path.write_bytes(path.read_bytes()[:-16])
    size = path.stat().st_size  # the header, then 50 records of 8 fp16 values (16 bytes), less the 16 cut
    with pytest.raises(
        CorruptFileError,
        match=rf"rescore\.npy is {size} bytes; its 50 records need {size + 16} \(truncated or damaged\); "
        "rebuild the index$",
    ):
        RescoreVectors.open_path(path, "fp16", 8)
    np.save(path, np.zeros((5, 2), dtype=[("vector", "<f2", (8,))]))  # the right records, but a 2-d array
    with pytest.raises(
        CorruptFileError,
        match=r"rescore\.npy holds .* of shape \(5, 2\); this index keeps fp16 .* d=8\. Rebuild the index\.$",
    ):
        RescoreVectors.open_path(path, "fp16", 8)
    path.write_bytes(b"not an npy file")
    with pytest.raises(
        CorruptFileError, match=r"rescore\.npy is not a readable rescoring file \(.*magic.*\); rebuild it$"
    ):
        RescoreVectors.open_path(path, "fp16", 8)
    path.write_bytes(np.lib.format.magic(3, 0) + b"\x00" * 64)  # a later npy version than the two read here
    with pytest.raises(
        CorruptFileError, match=r"not a readable rescoring file \(npy format \(3, 0\)\); rebuild it$"
    ):
        RescoreVectors.open_path(path, "fp16", 8)


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_rescoring_returns_id_0_and_puts_missing_candidates_last(metric: str) -> None:
    # Row 0 is a document like any other (not the -1 of "no candidate"); with fewer documents than k the -1
    # slots come after every document, whichever way the metric's scores run.
    x = _clustered(6, 8, seed=12)
    store = FaissStore(8, metric, "flat", {"encoding": "sq8+rescore=2"})
    store.add(np.arange(6), x)
    scores, ids = store.search(x[:1], 9)
    assert ids[0, 0] == 0 and sorted(ids[0, :6]) == list(range(6)) and (ids[0, 6:] == -1).all()
    assert np.isfinite(scores[0, :6]).all() and (scores[0, 6:] == (np.inf if metric == "l2" else -np.inf)).all()


def test_rescoring_keeps_the_codes_order_among_equal_scores() -> None:
    # 40 records of three distinct vectors: three groups of equal scores, in the order the codes gave them.
    group = np.random.default_rng(0).integers(0, 3, 40)
    records = RescoreVectors("fp16", 4)
    records.add(np.arange(40), np.float32([[1, 0, 0, 0], [0.5, 0, 0, 0], [0, 0, 0, 0]])[group])
    candidates = np.random.default_rng(1).permutation(40)
    query = np.float32([[1, 0, 0, 0]])
    for metric, nearer in (("ip", -1.0), ("l2", 1.0)):
        _, ids = records.rescore(query, candidates[None, :], 40, metric)
        score = {"ip": [1.0, 0.5, 0.0], "l2": [0.0, 0.25, 1.0]}[metric]
        want = sorted(candidates, key=lambda i: nearer * score[group[i]])  # Python's sort is stable
        np.testing.assert_array_equal(ids[0], want)


def test_rescoring_records_keep_each_vector_within_its_form() -> None:
    x = _clustered(20, 16, seed=14) * np.linspace(0.1, 3.0, 20, dtype=np.float32)[:, None]
    x[3] = 0.0
    int8 = RescoreVectors("int8", 16)
    int8.add(np.arange(20), x)
    back = int8.vectors(np.arange(20))
    peak = np.abs(x).max(axis=1)
    # Each vector's largest value is code +-127 exactly; every value within half a step (peak / 254) of x.
    np.testing.assert_allclose(np.abs(back).max(axis=1), peak, rtol=1e-6)
    assert (np.abs(back - x) <= peak[:, None] / 254 + 1e-7).all() and not back[3].any()
    # The whole line the user reads: the fault, and the encoding that keeps such vectors.
    with pytest.raises(BadInputError) as caught:
        RescoreVectors("fp16", 2).add(np.array([0]), np.float32([[1e6, 0.0]]))
    assert str(caught.value) == (
        "a vector holds values beyond half precision's range (65504); keep rescoring vectors as int8 "
        "(+rescore:int8), which scales each vector"
    )
    with pytest.raises(BadInputError) as caught:
        RescoreVectors("fp16", 2).add(np.array([-1]), np.float32([[1.0, 0.0]]))
    assert str(caught.value) == "rescoring keeps one record per id (a row number), so ids must be >= 0"


def test_rescoring_records_through_adds_deletes_and_saves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The records a version keeps: its file's, then the rows added (a row given again replaced), less the ids
    # deleted (zeroed); each read back as it was written, whether from the file or from what was added since.
    # A version's saved records are copied 4 at a time here, so the 6 of the first file take two blocks.
    import whitevec.index.encodings.rescore

    monkeypatch.setattr(whitevec.index.encodings.rescore, "_COPY_ROWS", 4)
    x = _clustered(12, 8, seed=13)
    first = RescoreVectors("fp16", 8)
    first.add(np.arange(6), x[:6])
    first.delete(np.array([2]))  # added, not yet saved
    first.save(tmp_path / "a.npy")
    opened = RescoreVectors.open_path(tmp_path / "a.npy", "fp16", 8)
    half = x.astype(np.float16).astype(np.float32)
    want = half[:6].copy()
    want[2] = 0.0
    np.testing.assert_array_equal(opened.vectors(np.arange(6)), want)
    replaced = opened.staged()
    replaced.add(np.array([1]), x[11:12])  # a saved row given again: read from the added ones, the rest from disk
    np.testing.assert_array_equal(replaced.vectors(np.array([1, 4])), half[[11, 4]])
    staged = opened.staged()
    staged.add(np.array([6, 7, 3]), x[6:9])  # two new rows, and row 3 replaced
    staged.delete(np.array([7, 1, 10**6]))  # an added row, a saved one, and one never stored
    staged.delete(np.array([4]))
    staged.add(np.array([4, 6]), x[9:11])  # a deleted row back, and an added one given again
    want[4], half[6] = half[9], half[10]
    want = np.vstack([want, half[6:8]])
    want[3], want[7], want[1] = half[8], 0.0, 0.0
    np.testing.assert_array_equal(staged.vectors(np.array([0, 3, 4, 5, 6])), want[[0, 3, 4, 5, 6]])
    staged.save(tmp_path / "b.npy")
    again = RescoreVectors.open_path(tmp_path / "b.npy", "fp16", 8)
    assert again.rows == 7  # one per id up to the largest kept: 7 was deleted
    np.testing.assert_array_equal(again.vectors(np.arange(7)), want[:7])
    assert again.vectors(np.arange(7)).dtype == staged.vectors(np.arange(7)).dtype == np.float32
    np.testing.assert_array_equal(opened.vectors(np.arange(6))[3], half[3])  # the published file is unchanged
    for past in (7, 9):  # the first id past the records, and one further
        with pytest.raises(
            CorruptFileError,
            match=rf"b\.npy holds 7 rescoring records; the index returned id {past}\. Rebuild the index\.$",
        ):
            again.vectors(np.array([0, 1, past]))


@pytest.mark.parametrize(
    ("encoding", "needle"), [("itq", "sign codes take"), ("sq8+rescore", "rescoring vectors")]
)
def test_export_faiss_refuses_what_one_faiss_file_cannot_hold(tmp_path: Path, encoding: str, needle: str) -> None:
    from whitevec.export import export_faiss

    _build(tmp_path / "idx", encoding).close()
    with pytest.raises(BadInputError, match=needle):
        export_faiss(tmp_path / "idx", tmp_path / "plain.faiss")
    assert not (tmp_path / "plain.faiss").exists()


def test_rescore_on_float32_is_refused_before_any_document_is_read(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"\+rescore is redundant on float32"):
        check_build(tmp_path / "idx", index_params={"encoding": "float32+rescore"})


def test_adds_and_deletes_keep_codes_and_rescoring_records_together(tmp_path: Path) -> None:
    built = _build(tmp_path / "idx", "rabitq+rescore")
    new = [Document("n1", "a new text"), Document("n2", "another new text")]
    vectors = built.embed(["a new text", "another new text"])
    # A delete at the store: the id leaves the codes and its record is zeroed in the next version's file.
    staged: Any = built.store.stage_add(tmp_path / "next")
    staged.add(np.array([600, 601]), vectors)
    staged.delete(np.array([600]))
    _, ids = staged.search(vectors, 3)
    assert 600 not in ids and ids[1, 0] == 601
    (tmp_path / "next").mkdir()
    staged.save(tmp_path / "next")
    saved = np.load(tmp_path / "next" / RESCORE_FILE)
    assert saved.shape == (602,) and not saved["vector"][600].any() and saved["vector"][601].any()
    assert staged.reopen(tmp_path / "next", {}).search(vectors, 1)[1][1, 0] == 601
    # An add writes a segment of its own: its codes (RaBitQ, from the build's training) and its records together.
    assert built.add(new) == 602
    assert [row[0].id for row in built.search_vectors(vectors, 1)] == ["n1", "n2"]  # found, rescored
    prefix = built.manifest["segments"][1]["prefix"]
    records = np.load(tmp_path / "idx" / (prefix + RESCORE_FILE))
    np.testing.assert_array_equal(records["vector"], vectors.astype(np.float16))
    assert np.load(tmp_path / "idx" / RESCORE_FILE).shape == (600,)  # the build's file, linked, unchanged
    built.close()


def test_eval_and_tune_score_1_bit_codes_as_the_index_ranks() -> None:
    x, q = _clustered(400, 16, seed=6), _clustered(30, 16, seed=7)
    rows = np.arange(400)
    space = encoded_vectors(np.vstack([x, q]), "binary-rr", rows)
    store = FaissStore(16, "cosine", "flat", {"encoding": "binary-rr"})
    store.add(rows, x)
    scores, _ = store.search(q, 400)
    np.testing.assert_allclose(np.sort(space[400:] @ space[:400].T, axis=1)[:, ::-1], scores, atol=1e-6)
    # Independently of faiss and of the store: binary-rr codes sign((v - mean) R), R the seeded Haar rotation,
    # and scores a pair 1 - 2 h / d for a Hamming distance h.
    mean = x.astype(np.float64).mean(axis=0)
    q_bits, x_bits = (((v - mean) @ random_rotation(16)) > 0 for v in (q, x))
    hamming = (q_bits[:, None, :] != x_bits[None, :, :]).sum(axis=2)
    np.testing.assert_allclose(space[400:] @ space[:400].T, 1 - 2 * hamming / 16, atol=1e-6)
    with pytest.raises(BadInputError, match="scored through the index's own search"):
        encoded_vectors(x, "rabitq", rows)
    # RaBitQ +rescore: its 4 x 10 candidates re-ranked by the fp16 vectors' cosines: the float top 10 (nearly),
    # best first by those cosines.
    ranked = searched_rankings(x, q, "rabitq+rescore", 10)
    assert _recall(ranked, np.argsort(-(q @ x.T), axis=1)[:, :10]) >= 0.9
    rescored = np.take_along_axis(q @ x.astype(np.float16).astype(np.float32).T, ranked, axis=1)
    assert (np.diff(rescored, axis=1) <= 1e-6).all()


def test_tune_budget_counts_memory_and_reports_disk() -> None:
    from tests.test_tune import MODEL, TableEncoder
    from whitevec.tuning import tune

    data, table = retrieval_data(20)
    result = tune(
        data,
        models=[MODEL],
        encoders={MODEL: TableEncoder(table)},
        transforms=["none"],
        encodings=["binary-rr+rescore", "rabitq", "sq8"],
        modes=["dense"],
        max_bytes_per_vector=4,
        include_flow=False,
        n_boot=200,
    )
    rows = {c.encoding: c for c in result.candidates}
    assert set(rows) == {"float32", "binary-rr+rescore=10"}  # rabitq (9 B) and sq8 (8 B) over 4 B in memory
    assert rows["binary-rr+rescore=10"].bytes_per_vector == 1
    assert (
        rows["binary-rr+rescore=10"].disk_bytes_per_vector == 16 and rows["binary-rr+rescore=10"].dev is not None
    )
    with pytest.raises(BadInputError, match="scored pairs need one score per pair"):
        tune([], models=[MODEL], encodings=["rabitq"])
    from whitevec.evaluation.sts import evaluate_sts

    with pytest.raises(BadInputError, match="evaluate it with eval-retrieval"):
        evaluate_sts(None, [], encoding="binary+rescore")  # type: ignore[arg-type]


def test_eval_retrieval_table_shows_disk_bytes_only_when_an_encoding_rescores() -> None:
    from whitevec.cli.evaluate import _retrieval_table
    from whitevec.evaluation.retrieval import RetrievalReport, RetrievalScore

    def row(encoding: str, code: int, disk: int) -> RetrievalScore:
        quality = dict.fromkeys(("recall_10", "recall_100", "mrr_10", "ndcg_10", "map"), 0.5)
        sizes = {"index_bytes": 100, "folder_bytes": 200, "code_bytes": code, "disk_bytes": disk}
        return RetrievalScore(
            "none",
            "last-avg",
            64,
            10,
            5,
            **quality,
            build_s=0.1,
            p50_query_ms=1.0,
            p50_search_ms=0.1,
            encoding=encoding,
            **sizes,
        )

    report = RetrievalReport("m", "d", "flat", "cosine", "faiss", "corpus", {})
    report.scores = [row("float32", 256, 0)]
    assert "disk B/vec" not in _retrieval_table(report, "t").columns
    report.scores.append(row("binary+rescore=4", 8, 128))
    table = _retrieval_table(report, "t")
    assert table.columns[4:6] == ("bytes/vec", "disk B/vec") and [r[5] for r in table.rows] == [0, 128]


def test_a_rescore_multiplier_can_be_changed_on_an_open_store(tmp_path: Path) -> None:
    """The knob the benchmarks turn (FaissStore.set_rescore_multiplier): the search re-ranks multiplier x k."""
    from whitevec.index.faiss.store import FaissStore

    store = FaissStore(D, "cosine", "flat", {"encoding": "binary+rescore=2"})
    store.add(np.arange(N, dtype=np.int64), unit_rows(VECTORS))
    store.set_rescore_multiplier(20)
    assert store.params()["encoding"] == "binary+rescore=20" and store.encoding.rescore == 20
    plain = FaissStore(D, "cosine", "flat", {"encoding": "binary"})
    with pytest.raises(BadInputError, match="no \\+rescore"):
        plain.set_rescore_multiplier(4)
