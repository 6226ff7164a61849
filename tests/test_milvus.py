"""Milvus Lite backend against FAISS flat on the same vectors (needs the extra whitevec[milvus])."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.index_helpers import HashEncoder
from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError, WhitevecError
from whitevec.index import Document, FaissStore, Retriever

pytest.importorskip("pymilvus", reason="the Milvus tests need pip install 'whitevec[milvus]'")
pytest.importorskip("milvus_lite", reason="the Milvus tests need milvus-lite (local file URIs)")

from pymilvus import DataType

from tests.milvus_fake import FakeMilvusClient
from whitevec.index.encodings.sign_codes import SIGN_FILE, SignCodes
from whitevec.index.milvus.store import MilvusStore


@pytest.mark.parametrize(("metric", "kind"), [("ip", "flat"), ("l2", "flat"), ("ip", "hnsw")])
def test_milvus_matches_faiss_flat(tmp_path: Path, metric: str, kind: str) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(500, 24)).astype(np.float32)
    queries = rng.normal(size=(40, 24)).astype(np.float32)
    ids = np.arange(500, dtype=np.int64)
    faiss_backend = FaissStore(24, metric, "flat")
    faiss_backend.add(ids, vectors)
    params = {"efSearch": 500} if kind == "hnsw" else None  # ef >= n: HNSW is exhaustive here
    milvus = MilvusStore(str(tmp_path / "m.db"), "c1", 24, metric, kind, params, create=True)
    milvus.add(ids, vectors)
    assert milvus.count == 500
    f_scores, f_ids = faiss_backend.search(queries, 10)
    m_scores, m_ids = milvus.search(queries, 10)
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(f_ids, m_ids, strict=True)])
    assert overlap >= 0.99
    np.testing.assert_allclose(np.sort(m_scores, axis=1), np.sort(f_scores, axis=1), rtol=1e-4, atol=1e-4)
    milvus.release()


def test_retriever_on_milvus_lite(tmp_path: Path) -> None:
    encoder = HashEncoder(dim=16)
    docs = [Document(f"d{i}", f"text number {i}") for i in range(200)]
    queries = [f"query {i}" for i in range(20)]
    on_faiss = Retriever.build(docs, tmp_path / "faiss", encoder=encoder, transform="whitening")  # type: ignore[arg-type]
    on_milvus = Retriever.build(
        docs,
        tmp_path / "milvus",
        encoder=encoder,
        transform="whitening",  # type: ignore[arg-type]
        backend="milvus",
    )
    assert (tmp_path / "milvus" / "milvus.db").is_dir() and not (tmp_path / "milvus" / "index.faiss").exists()
    m = on_milvus.manifest
    assert m["backend"] == "milvus" and m["backend_uri"] is None and m["milvus_collection"].startswith("whitevec_")
    f_hits, m_hits = on_faiss.search(queries, 10), on_milvus.search(queries, 10)
    overlap = np.mean(
        [len({h.id for h in a} & {h.id for h in b}) / 10 for a, b in zip(f_hits, m_hits, strict=True)]
    )
    assert overlap >= 0.99
    np.testing.assert_allclose([h.score for h in m_hits[0]], [h.score for h in f_hits[0]], rtol=1e-4, atol=1e-4)
    # add keeps ids unique and persists
    assert on_milvus.add([Document("new", "a brand new text")]) == 201
    with pytest.raises(BadInputError, match="'new'"):
        on_milvus.add([Document("new", "again")])
    assert on_milvus.search(["a brand new text"], 1)[0][0].id == "new"
    on_milvus.close()
    # an explicit local URI outside the folder; the manifest records it
    uri = str(tmp_path / "shared" / "store.db")
    other = Retriever.build(docs, tmp_path / "ext", encoder=encoder, transform="none", backend="milvus", uri=uri)  # type: ignore[arg-type]
    assert other.manifest["backend_uri"] == uri and other.count == 200
    assert [h.id for h in other.search(queries[:2], 3)[0]] == [h.id for h in other.search(queries[:2], 3)[0]]
    with pytest.raises(BadInputError, match=r"\.db"):
        Retriever.build(docs, tmp_path / "bad", encoder=encoder, backend="milvus", uri=str(tmp_path / "x"))  # type: ignore[arg-type]


def test_a_milvus_build_records_its_own_library_and_older_ones_still_load(tmp_path: Path) -> None:
    """The store reports its library's version: a Milvus build records pymilvus's, not faiss's (which a Milvus
    index never used); an index built before, which recorded faiss's, still loads and answers."""
    import pymilvus

    from whitevec.index.folder.manifest import write_manifest
    from whitevec.index.folder.snapshot import read_manifest

    docs = [Document(f"d{i}", f"text number {i}") for i in range(20)]
    out = tmp_path / "idx"
    with Retriever.build(docs, out, encoder=HashEncoder(dim=16), transform="none", backend="milvus") as built:  # type: ignore[arg-type]
        expected = [hit.id for hit in built.search(["text number 3"], k=3)[0]]
    manifest = read_manifest(out)
    assert manifest["pymilvus"] == pymilvus.__version__ and "faiss" not in manifest
    older = {k: v for k, v in manifest.items() if k != "pymilvus"}
    write_manifest(out, {**older, "faiss": "1.8.0"}, list(manifest["files"]))  # as builds before wrote it
    with Retriever.load(out, encoder=HashEncoder(dim=16)) as again:  # type: ignore[arg-type]
        assert [hit.id for hit in again.search(["text number 3"], k=3)[0]] == expected


def test_milvus_lite_in_another_process_is_named(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    out = tmp_path / "idx"
    docs = [Document(f"d{i}", f"text number {i}") for i in range(20)]
    Retriever.build(docs, out, encoder=HashEncoder(dim=16), transform="none", backend="milvus").close()  # type: ignore[arg-type]
    holder = textwrap.dedent(
        """
        import sys, time
        sys.path.insert(0, sys.argv[1])
        from tests.index_helpers import HashEncoder
        from whitevec.index import Retriever
        r = Retriever.load(sys.argv[2], encoder=HashEncoder(dim=16))
        print("OPEN", flush=True)
        time.sleep(120)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", holder, str(Path(__file__).resolve().parents[1]), str(out)],
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "holder.err").open("w"),
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "OPEN", (
            tmp_path / "holder.err"
        ).read_text()
        with pytest.raises(WhitevecError, match="open in another process"):
            Retriever.load(out, encoder=HashEncoder(dim=16))  # type: ignore[arg-type]
    finally:
        child.kill()
        child.wait()
    assert Retriever.load(out, encoder=HashEncoder(dim=16)).count == 20  # type: ignore[arg-type]


def test_missing_external_milvus_lite_data_is_not_created(tmp_path: Path) -> None:
    uri = tmp_path / "shared" / "store.db"
    docs = [Document(f"d{i}", f"text number {i}") for i in range(20)]
    out = tmp_path / "idx"
    Retriever.build(
        docs, out, encoder=HashEncoder(dim=16), transform="none", backend="milvus", uri=str(uri)
    ).close()  # type: ignore[arg-type]
    from milvus_lite.server_manager import server_manager_instance

    server_manager_instance.release_server(str(uri))
    shutil.rmtree(tmp_path / "shared")
    with pytest.raises(DataNotFoundError, match="does not exist"):
        Retriever.load(out, encoder=HashEncoder(dim=16))  # type: ignore[arg-type]
    assert not (tmp_path / "shared").exists()


def test_an_older_lite_version_still_open_in_this_process_is_named(tmp_path: Path) -> None:
    out = tmp_path / "idx"
    docs = [Document(f"d{i}", f"text number {i}") for i in range(20)]
    old = Retriever.build(docs, out, encoder=HashEncoder(dim=16), transform="none", backend="milvus")  # type: ignore[arg-type]
    with pytest.raises(WhitevecError, match="older version of the Milvus Lite data"):
        # the rebuild is written and swapped in; loading it while `old` holds the path's server is refused
        Retriever.build(docs[:10], out, encoder=HashEncoder(dim=16), transform="none", backend="milvus")  # type: ignore[arg-type]
    old.close()
    assert Retriever.load(out, encoder=HashEncoder(dim=16)).count == 10  # type: ignore[arg-type]


# Milvus Lite 3.2.2 builds these with faiss itself (milvus_lite/index/faiss_ivf_sq8.py, faiss_hnsw_sq.py); its
# k-means and SQ ranges are trained on its own segment, so codes can differ from whitevec's by a rounding step:
# the floor is 0.9 mean top-10 overlap (exhaustive settings: nprobe = nlist, ef >= n), not 0.99 as for float32.
# Milvus Lite indexes a flushed segment in a background thread and searches it exhaustively until then, which
# made this test pass or fail by timing (an index built with nlist 128, not 8, scored 0.66): the store is
# reopened before the search, since closing waits for that build and opening loads the index, every run.
@pytest.mark.parametrize(("kind", "params"), [("ivf", {"nlist": 8, "nprobe": 8}), ("hnsw", {"efSearch": 600})])
def test_milvus_lite_sq8_matches_faiss_sq8(tmp_path: Path, kind: str, params: dict[str, int]) -> None:
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(600, 24)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = vectors[:40] + 0.1 * rng.normal(size=(40, 24)).astype(np.float32)
    ids = np.arange(600, dtype=np.int64)
    faiss_backend = FaissStore(24, "ip", kind, {"encoding": "sq8", **params})
    faiss_backend.add(ids, vectors)
    uri, options = str(tmp_path / "m.db"), {"encoding": "sq8", **params}
    milvus = MilvusStore(uri, "c1", 24, "ip", kind, options, create=True)
    assert milvus.index_type == ("IVF_SQ8" if kind == "ivf" else "HNSW_SQ")
    milvus.add(ids, vectors)
    milvus.release()
    milvus = MilvusStore(uri, "c1", 24, "ip", kind, options)
    _, f_ids = faiss_backend.search(queries, 10)
    _, m_ids = milvus.search(queries, 10)
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(f_ids, m_ids, strict=True)])
    assert overlap >= 0.9
    milvus.release()


@pytest.mark.parametrize(
    ("kind", "encoding"),
    [
        ("ivf", "pq8"),
        ("hnsw", "pq8"),
        ("flat", "sq8"),
        ("hnsw", "fp16"),
        ("ivf", "sq8+refine"),
        # Milvus Lite 3.2.2 has no BINARY_VECTOR field (create_collection refuses it) and no IVF_RABITQ (the
        # build fails and Lite searches every float vector silently): both are refused up front.
        ("flat", "binary"),
        ("ivf", "binary-rr"),
        ("flat", "itq"),
        ("ivf", "rabitq"),
        ("flat", "rabitq"),
    ],
)
def test_milvus_lite_names_what_it_supports(tmp_path: Path, kind: str, encoding: str) -> None:
    with pytest.raises(BadInputError, match=r"Milvus Lite has no index .* ivf\+sq8 \(IVF_SQ8\), .*hnsw\+sq8"):
        MilvusStore.check_options(kind, {"encoding": encoding}, None)
    with pytest.raises(BadInputError, match="Milvus Lite has no index"):
        MilvusStore(str(tmp_path / "m.db"), "c1", 24, "ip", kind, {"encoding": encoding}, create=True)


# --- 1-bit codes on a Milvus server (Milvus Lite has none): against an in-memory fake of the server client ----
SERVER = "http://milvus.invalid:19530"


@pytest.fixture
def fake_server(monkeypatch: pytest.MonkeyPatch) -> type[FakeMilvusClient]:
    import pymilvus

    monkeypatch.setattr(pymilvus, "MilvusClient", FakeMilvusClient)
    monkeypatch.setattr(FakeMilvusClient, "collections", {})
    return FakeMilvusClient


def _sign_codes_match_faiss(uri: str, codec: str, dim: int, tmp_path: Path) -> MilvusStore:
    """A store of ``codec`` codes at ``uri`` and a FAISS store of the same vectors: every query's top-10 scores
    equal (the same Hamming distances, best first); the sign step saved beside the manifest codes queries alike."""
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(300, dim)).astype(np.float32) + 0.3
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = vectors[:30] + 0.2 * rng.normal(size=(30, dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    ids = np.arange(300, dtype=np.int64)
    on_faiss = FaissStore(dim, "cosine", "flat", {"encoding": codec})
    on_faiss.add(ids, vectors)
    milvus = MilvusStore(uri, "c1", dim, "cosine", "flat", {"encoding": codec}, create=True)
    assert milvus.index_type == "BIN_FLAT"
    milvus.add(ids, vectors)
    assert milvus.signs is not None
    f_scores, f_ids = on_faiss.search(queries, 10)
    m_scores, m_ids = milvus.search(queries, 10)
    np.testing.assert_allclose(m_scores, f_scores, atol=1e-6)  # equal Hamming distances, best first
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(f_ids, m_ids, strict=True)]) >= 0.9  # ties aside
    assert milvus.save(tmp_path) == [SIGN_FILE]
    again = SignCodes.from_bytes((tmp_path / SIGN_FILE).read_bytes(), SIGN_FILE, codec, dim)
    np.testing.assert_array_equal(again.encode(queries), milvus.signs.encode(queries))
    return milvus


@pytest.mark.parametrize(("codec", "dim"), [("binary", 20), ("binary-rr", 24), ("itq", 24)])
def test_sign_codes_on_a_milvus_server_are_the_faiss_stores(
    tmp_path: Path, fake_server: type[FakeMilvusClient], codec: str, dim: int
) -> None:
    """What the store asks of the server (the fake keeps it): BINARY_VECTOR rows of dim bits rounded up to bytes,
    the FAISS store's own codes, BIN_FLAT searched by HAMMING; and the FAISS store's scores."""
    milvus = _sign_codes_match_faiss(SERVER, codec, dim, tmp_path)
    collection = fake_server.collections["c1"]
    field = next(f for f in collection["schema"].fields if f.name == "vector")
    assert field.dtype == DataType.BINARY_VECTOR and field.params["dim"] == 8 * ((dim + 7) // 8)
    assert collection["index"]["index_type"] == "BIN_FLAT" and collection["index"]["metric_type"] == "HAMMING"
    vectors = np.random.default_rng(3).normal(size=(300, dim)).astype(np.float32) + 0.3
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    assert collection["rows"][7]["vector"] == milvus.signs.encode(vectors[7:8]).tobytes()  # type: ignore[union-attr]


def _lite_has_binary_vectors(folder: Path) -> str | None:
    """Why this Milvus Lite cannot hold a BINARY_VECTOR field searched by HAMMING, or None when it can (asked
    with pymilvus alone, so that a fault of whitevec's store is never taken for the lack)."""
    from pymilvus import MilvusClient
    from pymilvus.exceptions import MilvusException

    client = MilvusClient(str(folder / "probe.db"))
    try:
        schema = client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("code", DataType.BINARY_VECTOR, dim=16)
        index = client.prepare_index_params()
        index.add_index("code", index_type="BIN_FLAT", metric_type="HAMMING")
        client.create_collection("probe", schema=schema, index_params=index)
    except MilvusException as exc:
        return str(exc)
    finally:
        client.close()
    return None


@pytest.mark.parametrize(("codec", "dim"), [("binary", 20), ("itq", 24)])
def test_sign_codes_on_milvus_lite_itself_are_the_faiss_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str, dim: int
) -> None:
    """The binary path against a real Milvus (the fake above only keeps what the store asks): Milvus Lite,
    treated as a server so that the store sends its BINARY_VECTOR schema and HAMMING index. Skipped where
    Milvus Lite has no binary vectors (milvus-lite 3.2 has none; a server has)."""
    lack = _lite_has_binary_vectors(tmp_path)
    if lack is not None:
        pytest.skip(f"this Milvus Lite has no BINARY_VECTOR / HAMMING: {lack}")
    import whitevec.index.milvus.index_types as index_types

    monkeypatch.setattr(index_types, "LITE_INDEX_TYPES", index_types._MILVUS_TYPES)
    _sign_codes_match_faiss(str(tmp_path / "m.db"), codec, dim, tmp_path).release()


def test_milvus_server_index_types_for_one_bit_codes(fake_server: type[FakeMilvusClient]) -> None:
    store = MilvusStore(SERVER, "c2", 32, "ip", "ivf", {"encoding": "binary-rr", "nlist": 4}, create=True)
    assert store.index_type == "BIN_IVF_FLAT" and fake_server.collections["c2"]["index"]["nlist"] == 4
    rabitq = MilvusStore(SERVER, "c3", 32, "ip", "ivf", {"encoding": "rabitq-qb6"}, create=True)
    index = fake_server.collections["c3"]["index"]
    assert index["index_type"] == "IVF_RABITQ" and index["metric_type"] == "IP"
    assert rabitq._type_search_params == {"rbq_query_bits": 6}
    for kind, encoding, message in [
        ("hnsw", "binary", "the Milvus backend has no index for kind 'hnsw' with encoding 'binary'"),
        ("flat", "rabitq", r"supports .*ivf\+rabitq \(IVF_RABITQ\)"),
        ("flat", "binary+rescore", "does not rescore"),
        ("ivf", "rabitq+rescore=10", "does not rescore"),
    ]:
        with pytest.raises(BadInputError, match=message):
            MilvusStore.check_options(kind, {"encoding": encoding}, SERVER)


def test_an_index_of_sign_codes_on_a_milvus_server_keeps_its_sign_step(
    tmp_path: Path, fake_server: type[FakeMilvusClient]
) -> None:
    encoder = HashEncoder(dim=20)
    docs = [Document(f"d{i}", f"text number {i}") for i in range(120)]
    queries = [f"text number {i}" for i in range(0, 120, 12)]
    out = tmp_path / "idx"
    built = Retriever.build(
        docs,
        out,
        encoder=encoder,
        transform="none",
        backend="milvus",
        uri=SERVER,
        index_params={"encoding": "itq"},
    )  # type: ignore[arg-type]
    assert SIGN_FILE in built.manifest["files"] and built.store.index_type == "BIN_FLAT"
    before = [[(h.id, h.score) for h in row] for row in built.search(queries, 5)]
    assert [row[0][0] for row in before] == [f"d{i}" for i in range(0, 120, 12)]  # each text finds itself
    built.close()
    with Retriever.load(out, encoder=encoder) as loaded:  # type: ignore[arg-type]
        assert [[(h.id, h.score) for h in row] for row in loaded.search(queries, 5)] == before
        loaded.add([Document("new", "a brand new text")])  # the next version keeps the same sign step
        assert loaded.search(["a brand new text"], 1)[0][0].id == "new"
        # a server compacts its collection itself: asked and waited for, no new version
        generation = loaded.manifest["generation"]
        assert loaded.compact() == 0 and loaded.manifest["generation"] == generation
        collection = fake_server.collections[loaded.manifest["milvus_collection"]]
        assert collection["compacted"] == 1 and collection["options"] == {"consistency_level": "Strong"}
        kept = SignCodes.from_bytes((out / SIGN_FILE).read_bytes(), SIGN_FILE, "itq", 20)
        assert built.store.signs is not None and built.store.signs.rotation_ is not None
        np.testing.assert_array_equal(kept.rotation_, built.store.signs.rotation_)
    (out / SIGN_FILE).write_bytes(b"damaged")
    with pytest.raises(CorruptFileError):
        Retriever.load(out, encoder=encoder)  # type: ignore[arg-type]


def test_a_write_cut_off_after_its_milvus_calls_is_retried_without_duplicates(
    tmp_path: Path, fake_server: type[FakeMilvusClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that dies after its Milvus calls (nothing cleaned up, as after SIGKILL) leaves its rows on the
    server, which does not deduplicate inserted ids; the retry gives the same rows again and upserts them, so each
    row is held once (tests/test_milvus_server.py kills a writer against a real server)."""
    encoder = HashEncoder(dim=8)
    docs = [Document(f"d{i}", f"text number {i}") for i in range(12)]
    new = [Document("x", "a new text"), Document("y", "another new text")]
    built = Retriever.build(docs, tmp_path / "idx", encoder=encoder, backend="milvus", uri=SERVER)  # type: ignore[arg-type]
    with built as retriever:
        with monkeypatch.context() as patched:
            patched.setattr(MilvusStore, "abandon", lambda *_: None)  # a killed writer takes nothing back
            patched.setattr(MilvusStore, "flush", lambda *_: (_ for _ in ()).throw(OSError("killed")))
            with pytest.raises(OSError, match="killed"):
                retriever.add(new)
        rows = fake_server.collections[retriever.manifest["milvus_collection"]]["rows"]
        assert (retriever.count, len(rows)) == (12, 14)
        assert retriever.add(new) == 14
        assert sorted(row["id"] for row in rows) == list(range(14))
        assert [h.id for h in retriever.search(["a new text"], 3)[0]].count("x") == 1
