"""--engine ray: the same index as a single-process build, actors killed, a driver killed and resumed, bad input.

One local Ray cluster (2 CPUs, a small object store) serves the whole file; skipped when Ray is not installed.
Where the encoder is not the point (a bad row, BM25, which rows a sample draws) the actors load a tiny static
table: an actor then imports no torch or transformers, seconds of CPU each on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import VOCAB_WORDS
from whitevec.errors import BadInputError

ray = pytest.importorskip("ray")

N_DOCS = 2000
UNIT_BYTES = 6 << 10  # about 18 units for the corpus below
POOLING = "last-avg"
# Ray reads its settings from RAY_<name> with the name in its own (lower) case.
WORKER_NICENESS = "RAY_worker_niceness"
# The rows of a Milvus index: {row: (document id, stored vector)}.
Rows = dict[int, tuple[str, np.ndarray]]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """One local Ray instance for the file; yields its address for drivers in other processes.

    Its workers run at niceness 0, not Ray's default 15: a niced actor gets a few percent of a core beside any
    other busy process (a benchmark, a second test run), and the waits below then time out with no unit encoded.
    """
    before = os.environ.get(WORKER_NICENESS)
    os.environ[WORKER_NICENESS] = "0"  # read by the raylet that ray.init starts
    ray.init(
        num_cpus=2,
        object_store_memory=500 * 1024 * 1024,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        if before is None:
            os.environ.pop(WORKER_NICENESS, None)
        else:
            os.environ[WORKER_NICENESS] = before


def _sentence(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(VOCAB_WORDS, size=int(rng.integers(6, 16))).tolist())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(7)
    path = tmp_path_factory.mktemp("ray-corpus") / "docs.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(N_DOCS):
            row: dict[str, Any] = {"id": f"d{i:05d}", "text": _sentence(rng)}
            if i % 7 == 0:
                row["year"] = 1950 + i % 20
            handle.write(json.dumps(row) + "\n")
    return path


@pytest.fixture(scope="module")
def queries() -> list[str]:
    rng = np.random.default_rng(11)
    return [_sentence(rng) for _ in range(50)]


def _encoder_args(model: Path) -> dict[str, Any]:
    return {"model": str(model), "pooling": POOLING, "batch_size": 32}


@pytest.fixture(scope="module")
def static_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny static table over the corpus's words (16 dimensions, no cut at 6 tokens)."""
    from tests.static_helpers import tiny_static_folder

    return tiny_static_folder(tmp_path_factory.mktemp("static") / "table", dim=16, max_length=64)


def _static_args(model: Path) -> dict[str, Any]:
    return {"model": str(model), "batch_size": 32}


@pytest.fixture(scope="module")
def local_index(
    tmp_path_factory: pytest.TempPathFactory, corpus: Path, tiny_bert_dir: Path, ray_cluster: str
) -> Path:
    from whitevec.encoders.transformer import Encoder
    from whitevec.index import build_index

    out = tmp_path_factory.mktemp("local") / "index"
    with Encoder(str(tiny_bert_dir), POOLING, batch_size=32, cache=False) as encoder:
        build_index(corpus, out, encoder=encoder, transform="whitening", backend="milvus")
    return out


@pytest.fixture(scope="module")
def ray_index(
    tmp_path_factory: pytest.TempPathFactory, corpus: Path, tiny_bert_dir: Path, ray_cluster: str
) -> Path:
    from whitevec.engines.ray import ray_build

    out = tmp_path_factory.mktemp("ray") / "index"
    ray_build(
        corpus,
        out,
        encoder=_encoder_args(tiny_bert_dir),
        transform="whitening",
        workers=2,
        unit_bytes=UNIT_BYTES,
    )
    return out


@pytest.fixture(scope="module")
def ray_rows(ray_index: Path) -> Rows:
    """The rows of ``ray_index``, read once: the reference the builds below are compared with."""
    return _rows(ray_index)


def _rows(index: Path) -> Rows:
    """Every row of a Milvus index: {row: (document id, stored vector)}; the ids must each be there once."""
    from whitevec.index import Retriever

    with Retriever.load(index) as retriever:
        store: Any = retriever.store
        found = store.client.query(store.collection, filter="id >= 0", output_fields=["id", "vector"], limit=16384)
        assert store.count == len(found)
        docs = retriever._docs.get([int(r["id"]) for r in found])
    out = {int(r["id"]): (docs[int(r["id"])].id, np.asarray(r["vector"], dtype=np.float32)) for r in found}
    assert len(out) == len(found)
    return out


@pytest.mark.slow
def test_ray_build_equals_the_single_process_build(
    local_index: Path, ray_index: Path, ray_rows: Rows, queries: list[str]
) -> None:
    from whitevec.index import Retriever, read_manifest
    from whitevec.transforms import Transform

    local_manifest, ray_manifest = read_manifest(local_index), read_manifest(ray_index)
    assert ray_manifest["count"] == local_manifest["count"] == N_DOCS
    assert ray_manifest["docs"] == "milvus" and not (ray_index / "docs.sqlite").exists()
    assert ray_manifest["transform"]["fit_rows"] == N_DOCS
    local_w = Transform.load(local_index / "transform.safetensors")
    ray_w = Transform.load(ray_index / "transform.safetensors")
    np.testing.assert_allclose(ray_w.mean_, local_w.mean_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(ray_w.covariance_, local_w.covariance_, rtol=0, atol=1e-8)
    # The decomposition is a function of those moments; its eigenvectors amplify their rounding by 1/gap (the
    # tiny random model's covariance is near-singular), so the derived arrays are compared more loosely.
    np.testing.assert_allclose(ray_w.eigenvalues_, local_w.eigenvalues_, rtol=1e-6, atol=1e-8)
    with Retriever.load(local_index) as local, Retriever.load(ray_index) as remote:
        local_hits, ray_hits = local.search(queries, k=10), remote.search(queries, k=10)
        for a, b in zip(local_hits, ray_hits, strict=True):
            assert [h.id for h in a] == [h.id for h in b]
            assert [h.text for h in a] == [h.text for h in b]
            assert [h.metadata for h in a] == [h.metadata for h in b]
    # The service reads the documents from Milvus as search does.
    from fastapi.testclient import TestClient

    from whitevec.service.app import create_app

    with Retriever.load(ray_index, cache=False) as remote, TestClient(create_app(remote)) as client:
        answer = client.post("/search", json={"queries": queries[:2], "k": 10})
        assert answer.status_code == 200, answer.text
        assert [r["ids"] for r in answer.json()["results"]] == [[h.id for h in hits] for hits in ray_hits[:2]]
    local_rows = _rows(local_index)
    assert sorted(ray_rows) == list(range(N_DOCS))
    assert {r: d for r, (d, _) in ray_rows.items()} == {r: d for r, (d, _) in local_rows.items()}
    gap = max(float(np.abs(ray_rows[r][1] - v).max()) for r, (_, v) in local_rows.items())
    assert gap < 1e-4, gap


def _encoder_pids() -> list[int]:
    """Processes of the pool's actors (Ray names them after the class)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"MapWorker(MapBatches(EncodeUnits))" in cmdline:
            pids.append(int(entry.name))
    return pids


def _wait_for(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _logged(folder: Path) -> int:
    log = folder / "encoded.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.slow
def test_an_actor_killed_mid_run_is_replaced(
    tmp_path: Path, corpus: Path, tiny_bert_dir: Path, ray_cluster: str, ray_rows: Rows
) -> None:
    from whitevec.engines.ray import ray_build, work_folder

    out = tmp_path / "index"
    errors: list[BaseException] = []

    def build() -> None:
        try:
            ray_build(
                corpus,
                out,
                encoder=_encoder_args(tiny_bert_dir),
                transform="whitening",  # as ray_index, built without a kill
                workers=2,
                unit_bytes=UNIT_BYTES,
            )
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=build)
    thread.start()
    work = work_folder(out)
    _wait_for(lambda: _logged(work) >= 2 or not thread.is_alive(), 120, "two encoded units")
    victims = _encoder_pids()
    units_at_kill = _logged(work)
    assert victims and thread.is_alive(), "the build ended before an actor could be killed"
    os.kill(victims[0], signal.SIGKILL)
    thread.join(180)
    assert not errors, errors
    from whitevec.datasets.shards import plan_units

    assert units_at_kill < len(plan_units([corpus], UNIT_BYTES)), "killed after the last unit"
    assert (out / "manifest.json").exists() and not work.exists()
    rows, reference = _rows(out), ray_rows
    assert sorted(rows) == list(range(N_DOCS))
    assert {r: d for r, (d, _) in rows.items()} == {r: d for r, (d, _) in reference.items()}
    for row, (_, vector) in reference.items():  # the same units, so the same batches: the same bits
        np.testing.assert_array_equal(rows[row][1], vector)


_DRIVER = """
import sys
from whitevec.engines.ray import ray_build
ray_build(sys.argv[1], sys.argv[2], encoder={"model": sys.argv[3], "pooling": "last-avg", "batch_size": 32},
          transform="whitening", workers=2, unit_bytes=int(sys.argv[4]), ray_address=sys.argv[5])
"""


def _kill_driver_when(
    out: Path, ray_cluster: str, tiny_bert_dir: Path, corpus: Path, ready: Any, what: str
) -> None:
    """Run a build in another process (a driver of the same cluster) and SIGKILL it once ``ready()``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [str(corpus), str(out), str(tiny_bert_dir), str(UNIT_BYTES), ray_cluster]
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        _wait_for(lambda: ready() or driver.poll() is not None, 120, what)
        assert driver.poll() is None, f"the build ended before {what}: " + (
            driver.stderr.read().decode()[-2000:] if driver.stderr else ""
        )
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        if driver.stderr:
            driver.stderr.close()


@pytest.mark.slow
def test_resume_after_the_driver_is_killed(
    tmp_path: Path, corpus: Path, tiny_bert_dir: Path, ray_cluster: str, ray_rows: Rows
) -> None:
    """Killed while encoding, then killed again while writing to Milvus, then run to the end: the same
    collection as an uninterrupted build, every row once."""
    from whitevec.engines.ray import INSERTED_LOG, ray_build, work_folder

    out = tmp_path / "index"
    work = work_folder(out)
    _kill_driver_when(out, ray_cluster, tiny_bert_dir, corpus, lambda: _logged(work) >= 3, "three encoded units")
    encoded_before = _logged(work)
    assert encoded_before >= 3 and not out.exists()

    def writing() -> bool:
        log = work / INSERTED_LOG
        return log.exists() and len(log.read_text().splitlines()) >= 2

    _kill_driver_when(out, ray_cluster, tiny_bert_dir, corpus, writing, "two shards written to Milvus")
    assert not out.exists()
    ray_build(
        corpus, out, encoder=_encoder_args(tiny_bert_dir), transform="whitening", workers=2, unit_bytes=UNIT_BYTES
    )
    assert not work.exists()
    rows, reference = _rows(out), ray_rows
    assert sorted(rows) == list(range(N_DOCS))
    assert {r: d for r, (d, _) in rows.items()} == {r: d for r, (d, _) in reference.items()}
    for row, (_, vector) in reference.items():  # the same units, so the same batches: the same bits
        np.testing.assert_array_equal(rows[row][1], vector)


def test_resume_rewrites_lite_data_a_killed_driver_left_unloadable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Milvus Lite writes a segment's index file in place: a driver killed while it wrote one leaves a file the
    next load cannot read (seen once in the killed-driver test above: "file seems not fully written"). The resume
    starts the build's own Lite data again, so every shard is written anew, instead of failing."""
    from whitevec.engines.ray import INSERTED_LOG, open_collection
    from whitevec.index.milvus.store import MILVUS_LOCAL, MilvusStore, new_collection_name

    folder = tmp_path / "work"
    name = new_collection_name()
    store = MilvusStore(str(folder / MILVUS_LOCAL), name, 8, "cosine", "flat", None, create=True, docs=True)
    x = np.random.default_rng(0).normal(size=(76, 8)).astype(np.float32)
    store.upsert_documents(np.arange(76), x, [f"d{i}" for i in range(76)], ["t"] * 76, [None] * 76)
    store.flush()
    store.close()
    segments = list((folder / MILVUS_LOCAL).rglob("*.idx"))
    assert segments
    for segment in segments:
        os.truncate(segment, 0)  # the write a SIGKILL cut short
    (folder / INSERTED_LOG).write_text("0\n1\n")
    with caplog.at_level("WARNING", logger="whitevec.engines.ray"):
        reopened = open_collection(folder, {"collection": name}, 8, "cosine", "flat", None, None)
    try:
        assert reopened.count == 0 and reopened.collection == name
        assert not (folder / INSERTED_LOG).exists(), "no shard counts as written in the new collection"
        assert "writing every shard again" in caplog.text
    finally:
        reopened.close()


# --- bad input ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_row_that_does_not_parse_is_named_and_leaves_nothing(
    tmp_path: Path, corpus: Path, static_dir: Path, ray_cluster: str
) -> None:
    from whitevec.engines.ray import ray_build, work_folder

    lines = corpus.read_text(encoding="utf-8").splitlines()
    lines[345] = '{"id": "broken", "text": "an unclosed string}'
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines[:500]) + "\n", encoding="utf-8")
    out = tmp_path / "index"
    with pytest.raises(BadInputError, match=rf"{bad}, line 346: not valid JSON"):
        ray_build(bad, out, encoder=_static_args(static_dir), workers=1, unit_bytes=UNIT_BYTES)
    assert not out.exists() and not work_folder(out).exists()


def test_a_discarded_work_folder_stays_removed_though_a_call_still_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the test above once lost: an actor call still running after the bad row had stopped the build
    added a file while rmtree removed the folder (its rmdir then failed and left it), or made the folder anew."""
    import shutil

    from whitevec.datasets.retrieval import Document
    from whitevec.engines.ray import shard_name, work_folder, write_shard
    from whitevec.engines.ray.workdir import discard_work

    folder = work_folder(tmp_path / "index")
    folder.mkdir()
    (folder / "shard-000000.parquet").write_bytes(b"x")
    real_rmtree, calls = shutil.rmtree, []

    def rmtree_beside_a_writer(path: Path, ignore_errors: bool = False) -> None:
        calls.append(path)
        real_rmtree(path, ignore_errors=ignore_errors)
        if len(calls) == 1:  # what the lost race leaves: the folder, holding the file the call added meanwhile
            folder.mkdir()
            (folder / "shard-000001.parquet.tmp").write_bytes(b"x")

    monkeypatch.setattr(shutil, "rmtree", rmtree_beside_a_writer)
    discard_work(folder, {"config": {}})
    assert not folder.exists() and len(calls) == 2
    with pytest.raises(FileNotFoundError):  # a write after the removal fails; it does not make the folder
        write_shard(folder / shard_name(2), [Document("a", "text")], np.ones((1, 3), np.float32))
    assert not folder.exists()


def test_ray_not_installed_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from whitevec.engines import ray as ray_engine

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(BadInputError, match=r"pip install 'whitevec\[ray\]'"):
        ray_engine.require_ray()


def test_an_unreachable_ray_address_is_named_within_seconds() -> None:
    from whitevec.engines.ray import check_address

    started = time.monotonic()
    with pytest.raises(BadInputError, match=r"127\.0\.0\.1:9"):
        check_address("127.0.0.1:9")
    with pytest.raises(BadInputError, match=r"ray://127\.0\.0\.1:9"):
        check_address("ray://127.0.0.1:9")
    assert time.monotonic() - started < 10


def test_cli_refuses_faiss_with_the_ray_engine(tmp_path: Path, corpus: Path, tiny_bert_dir: Path) -> None:
    from whitevec.cli import main

    argv = ["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "i"), "--model", str(tiny_bert_dir)]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--engine", "ray", "--backend", "faiss"])
    assert exit_info.value.code == 2
    assert not (tmp_path / "i").exists()


def test_units_read_the_same_documents_as_the_whole_file(tmp_path: Path) -> None:
    """Pieces cut anywhere give the documents, ids (defaults too), metadata and line numbers of a whole read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from whitevec.datasets.retrieval import read_corpus_file
    from whitevec.datasets.shards import corpus_files, plan_units, read_unit

    rng = np.random.default_rng(3)
    rows = [{"text": _sentence(rng), **({"tag": i} if i % 3 else {})} for i in range(300)]
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text(
        "\ufeff" + "".join(json.dumps(r) + ("\n\n" if i % 50 == 0 else "\r\n") for i, r in enumerate(rows)),
        encoding="utf-8",
    )
    text = tmp_path / "b.txt"
    text.write_text("".join(r["text"] + ("\n\n" if i % 40 == 0 else "\n") for i, r in enumerate(rows)))
    csv = tmp_path / "c.csv"
    csv.write_text("id,text\n" + "".join(f'c{i},"{r["text"]}, quoted"\n' for i, r in enumerate(rows)))
    for file in (jsonl, text, csv):
        units = plan_units(corpus_files(file), unit_bytes=997)
        assert len(units) == 1 if file is csv else len(units) > 5
        assert [d for u in units for d in read_unit(u)] == read_corpus_file(file)
    parquet = tmp_path / "d.parquet"
    pq.write_table(
        pa.table({"text": [r["text"] for r in rows], "n": list(range(300))}), parquet, row_group_size=70
    )
    units = plan_units(corpus_files(tmp_path / "*.parquet"), unit_bytes=997)
    docs = [d for u in units for d in read_unit(u)]
    assert len(units) == 5 and [d.id for d in docs] == [str(i) for i in range(1, 301)]
    assert docs[299].metadata == {"n": 299} and docs[0].text == rows[0]["text"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows[:200]) + "{oops\n")
    units = plan_units([bad], unit_bytes=997)
    with pytest.raises(BadInputError, match=rf"{bad}, line 201: not valid JSON"):
        read_unit(units[-1])


# --- a fit on a seeded sample, units grouped per call, one build at a time ------------------------------------
@pytest.mark.slow
def test_a_fit_on_a_seeded_sample_with_units_grouped_per_call(
    tmp_path: Path, corpus: Path, static_dir: Path, ray_cluster: str, ray_rows: Rows
) -> None:
    """Small units (several per actor call): the same documents in the same rows, and the transform equals a
    fit on the rows that sample_rows draws from the corpus's vectors in corpus order (any encoder's vectors: the
    static table's)."""
    from whitevec.datasets.shards import plan_units
    from whitevec.encoders.loading import load_encoder
    from whitevec.engines.ray import ray_build, units_per_call
    from whitevec.index.stores.vector import sample_rows
    from whitevec.transforms import Transform, Whitening

    unit_bytes = 1 << 10
    assert units_per_call(len(plan_units([corpus], unit_bytes)), 2) > 1
    out = tmp_path / "index"
    ray_build(
        corpus,
        out,
        encoder=_static_args(static_dir),
        transform="whitening-8",
        workers=2,
        unit_bytes=unit_bytes,
        fit_sample=300,
        fit_seed=5,
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["transform"]["fit_on"] == "corpus sample (seed 5)"
    assert manifest["transform"]["fit_rows"] == 300
    rows, reference = _rows(out), ray_rows
    assert {r: d for r, (d, _) in rows.items()} == {r: d for r, (d, _) in reference.items()}
    texts = [json.loads(line)["text"] for line in corpus.read_text(encoding="utf-8").splitlines()]
    with load_encoder(**_static_args(static_dir), cache=False) as encoder:
        raw = encoder.encode(texts, show_progress=False)
    expected = Whitening(n_components=8).fit(raw[sample_rows(N_DOCS, 300, 5)])
    fitted = Transform.load(out / "transform.safetensors")
    assert isinstance(fitted, Whitening)
    np.testing.assert_allclose(fitted.mean_, expected.mean_, atol=1e-5)
    np.testing.assert_allclose(np.abs(fitted.components_), np.abs(expected.components_), atol=1e-3)


def test_fit_on_sample_fits_the_drawn_rows_of_the_shards(tmp_path: Path) -> None:
    """Any transform (flow too) on the rows drawn from shards in unit order; without a sample, only whitening."""
    from whitevec.datasets.retrieval import Document
    from whitevec.datasets.shards import CorpusUnit
    from whitevec.engines.ray import fit_on_sample, shard_name, transform_plan, write_shard
    from whitevec.index.stores.vector import sample_rows
    from whitevec.transforms import Whitening

    rng = np.random.default_rng(0)
    sizes = [40, 0, 25, 60]
    vectors = rng.normal(size=(sum(sizes), 6)).astype(np.float32)
    units, counts, row = [], {}, 0
    for index, size in enumerate(sizes):
        unit = CorpusUnit(index=index, file="x.jsonl", kind="jsonl", start=0, stop=0, first_line=1, first_doc=row)
        docs = [Document(f"d{row + i}", "text") for i in range(size)]
        write_shard(tmp_path / shard_name(index), docs, vectors[row : row + size])
        units.append(unit)
        counts[index] = size
        row += size
    fitted = Whitening()
    assert fit_on_sample(tmp_path, units, counts, fitted, 50, 9) == 50
    expected = Whitening().fit(vectors[sample_rows(len(vectors), 50, 9)])
    np.testing.assert_array_equal(fitted.mean_, expected.mean_)
    flow, _, needs_fit = transform_plan("flow", sampled=True)
    assert needs_fit and flow is not None
    with pytest.raises(BadInputError, match="--fit-sample"):
        transform_plan("flow", sampled=False)


def test_a_second_build_of_the_same_out_is_refused_at_once(tmp_path: Path, corpus: Path) -> None:
    from whitevec.engines.ray import build_lock, ray_build

    out = tmp_path / "index"
    with build_lock(out):
        started = time.monotonic()
        with pytest.raises(BadInputError, match=r"another build of .* is running"):
            ray_build(corpus, out, encoder={"model": "unused"}, workers=1)
        assert time.monotonic() - started < 5
    assert not list(tmp_path.iterdir()), "the lock file is removed when the build ends"
    with build_lock(out):  # and can be taken again
        pass


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--fit-sample", "500"], "--fit-sample is for --engine ray"),
        (["--engine", "ray", "--backend", "milvus", "-t", "whitening", "--fit-sample", "1"], "at least 2"),
        (
            ["--engine", "ray", "--backend", "milvus", "-t", "whitening", "--fit-seed", "-3", "--fit-sample", "9"],
            "--fit-seed",
        ),
        (["--engine", "ray", "--backend", "milvus", "--fit-sample", "9"], "--transform none fits nothing"),
    ],
)
def test_cli_checks_fit_sample_before_anything_runs(
    tmp_path: Path,
    corpus: Path,
    tiny_bert_dir: Path,
    extra: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.test_cli import run_cli

    argv = ["index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "i"), "--model", str(tiny_bert_dir)]
    code, _, err = run_cli([*argv, *extra], capsys)
    assert code != 0 and message in err and "Traceback" not in err
    assert not (tmp_path / "i").exists()


def test_ray_build_refuses_sign_codes_before_it_starts(tmp_path: Path, corpus: Path) -> None:
    from whitevec.engines.ray import ray_build

    with pytest.raises(BadInputError, match="--engine ray does not write 1-bit sign codes"):
        ray_build(
            corpus,
            tmp_path / "i",
            encoder={"model": "unused"},
            uri="http://milvus.invalid:19530",
            index_params={"encoding": "binary-rr"},
            workers=1,
        )
    assert not (tmp_path / "i").exists()


@pytest.mark.slow
def test_ray_build_with_milvus_bm25(
    tmp_path: Path, corpus: Path, static_dir: Path, queries: list[str], ray_cluster: str
) -> None:
    """--lexical bm25 on the Ray engine: the collection's text field gets Milvus's BM25, searched as a local
    Milvus build's is (BM25 needs no model: the local one is built with a stand-in encoder, the Ray one with
    the tiny static table)."""
    from tests.index_helpers import HashEncoder
    from whitevec.engines.ray import ray_build
    from whitevec.errors import WhitevecWarning
    from whitevec.index import Retriever, build_index, read_manifest

    out, local = tmp_path / "ray", tmp_path / "local"
    with pytest.warns(WhitevecWarning, match="does not stem"):
        ray_build(
            corpus,
            out,
            encoder=_static_args(static_dir),
            workers=2,
            unit_bytes=UNIT_BYTES,
            lexical="bm25",
        )
        build_index(corpus, local, encoder=HashEncoder(), backend="milvus", lexical="bm25")  # type: ignore[arg-type]
    record = read_manifest(out)["lexical"]
    assert record["library"] == "milvus" and record["documents"] == N_DOCS
    assert record == read_manifest(local)["lexical"]
    with Retriever.load(out) as remote, Retriever.load(local, encoder=HashEncoder()) as here:  # type: ignore[arg-type]
        ray_hits, local_hits = remote.search(queries, 10, mode="lexical"), here.search(queries, 10, mode="lexical")
        # Milvus Lite scores BM25 with each segment's own statistics (milvus_lite.index.sparse_inverted): the Ray
        # build writes shard by shard, so more segments than the local build's one insert, and scores differ by
        # up to a few percent; the rankings mostly agree.
        overlap = [
            len({h.id for h in a} & {h.id for h in b}) / 10 for a, b in zip(ray_hits, local_hits, strict=True)
        ]
        assert np.mean(overlap) >= 0.7, overlap
        for a, b in zip(ray_hits, local_hits, strict=True):
            np.testing.assert_allclose(a[0].score, b[0].score, rtol=0.1)
        hybrid = remote.search(queries, 10, mode="hybrid", fusion="rrf")
        assert all(len(hits) == 10 and hits[0].rankers for hits in hybrid)
