"""A static encoder folder goes wherever a model does: load_encoder, the CLI's encode / eval / fit / diagnose /
index build / search / tune, eval-retrieval, the server, the Ray actor, and export-st (a linear transform folded
into the table; SentenceTransformer gives whitevec's vectors)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.index_helpers import sentences, tiny_cli_inputs
from tests.static_helpers import tiny_static_folder
from tests.test_cli import run_cli
from whitevec.encoders.loading import load_encoder
from whitevec.encoders.static import StaticEncoder
from whitevec.errors import BadInputError, ModelNotFoundError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# Known words, no text past max_length (16): texts whose vectors both sentence-transformers and Model2Vec give.
TEXTS = ["a man is playing the guitar", "the dog is running", "a cat", "girls and boys", "the red car"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """tiny_cli_inputs' BERT, pairs and corpus, and a static folder that does not normalise (``static``) and one
    that does (``normalized``); read only."""
    tmp_path = tmp_path_factory.mktemp("static-inputs")
    found = tiny_cli_inputs(tmp_path)
    found["static"] = tiny_static_folder(tmp_path / "static", normalize=False, max_length=16)
    found["normalized"] = tiny_static_folder(tmp_path / "normalized", normalize=True, max_length=16, seed=2)
    return found


def test_load_encoder_picks_the_kind_and_refuses_what_a_static_folder_cannot_take(
    files: dict[str, Path], tmp_path: Path
) -> None:
    encoder = load_encoder(files["static"], max_length=8, batch_size=5, device="cpu", cache=True)
    assert isinstance(encoder, StaticEncoder) and (encoder.max_length, encoder.batch_size) == (8, 5)
    assert type(load_encoder(files["bert"], "cls", cache=False)).__name__ == "Encoder"
    with pytest.raises(BadInputError, match="--compute bf16 does not apply"):
        load_encoder(files["static"], backend="bf16")
    with pytest.raises(BadInputError, match="token weights are already in its table"):
        load_encoder(files["static"], token_weights="sif", token_frequencies=files["corpus"])
    with pytest.raises(BadInputError, match="its only pooling is 'static'"):
        load_encoder(files["static"], "last-avg")
    (tmp_path / "bare").mkdir()
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "config.json").write_text("{}")
    for folder in ("bare", "odd"):
        with pytest.raises(ModelNotFoundError, match=r"neither a transformers model.* nor a static encoder"):
            load_encoder(tmp_path / folder)


def test_encoder_of_a_static_folder_names_load_encoder(files: dict[str, Path]) -> None:
    from whitevec.encoders.transformer import Encoder

    with pytest.raises(BadInputError, match=r"static encoder folder.*use whitevec\.encoders\.load_encoder\("):
        Encoder(files["static"], cache=False)


def test_cli_encode_eval_fit_diagnose_with_a_static_folder(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    static = str(files["static"])
    out = tmp_path / "v.npy"
    code, _, err = run_cli(["encode", str(files["corpus"]), "-o", str(out), "-m", static, "-q"], capsys)
    assert code == 0, err
    texts = files["corpus"].read_text().splitlines()
    np.testing.assert_allclose(np.load(out), StaticEncoder(static).encode(texts), atol=1e-6)
    code, stdout, err = run_cli(
        ["eval", "--tasks", "", "--pairs", str(files["pairs"]), "-m", static, "-t", "none,whitening-4", "-q"],
        capsys,
    )
    assert code == 0, err
    assert "| static | whitening-4 |" in stdout and "pooling static (token mean); max_length 16" in stdout
    fitted = tmp_path / "w.safetensors"
    code, _, err = run_cli(
        ["fit", "--texts", str(files["corpus"]), "-m", static, "-t", "whitening-4", "-o", str(fitted), "-q"],
        capsys,
    )
    assert code == 0 and fitted.is_file(), err
    code, _, err = run_cli(
        ["diagnose", "-m", static, "--corpus", str(files["corpus"]), "-o", str(tmp_path / "d"), "--json-only"],
        capsys,
    )
    assert code == 0 and "a static encoder folder has none" in err, err


def test_cli_leaves_the_batch_size_to_each_encoder(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A static encoder tokenises 1024 texts at a time, a model runs 64: the CLI imposes neither unless asked.
    import whitevec.cli._options as options
    from whitevec.encoders.static import DEFAULT_BATCH_SIZE
    from whitevec.encoders.transformer import Encoder

    made: list[object] = []

    def recording_encoder(**kwargs: object) -> object:
        encoder = load_encoder(**kwargs)  # type: ignore[arg-type]
        made.append(encoder)
        return encoder

    monkeypatch.setattr(options, "_encoder", recording_encoder)
    for model, extra in ((files["static"], []), (files["static"], ["--batch-size", "7"]), (files["bert"], [])):
        argv = ["encode", str(files["corpus"]), "-o", str(tmp_path / "v.npy"), "-m", str(model), "-q", *extra]
        code, _, err = run_cli(argv, capsys)
        assert code == 0, err
    static, asked, model = made
    assert isinstance(static, StaticEncoder) and static.batch_size == DEFAULT_BATCH_SIZE == 1024
    assert isinstance(asked, StaticEncoder) and asked.batch_size == 7
    assert isinstance(model, Encoder) and model.batch_size == 64


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pooling", "cls"], "its only pooling is 'static' (a token mean), not 'cls'"),
        (["--compute", "int8"], "--compute int8 does not apply"),
        (["--token-weights", "sif", "--token-frequencies", "CORPUS"], "--token-weights does not apply"),
    ],
)
def test_cli_options_a_static_folder_cannot_take_are_one_line(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    args = [str(files["corpus"]) if a == "CORPUS" else a for a in args]
    argv = ["encode", str(files["corpus"]), "-o", str(tmp_path / "v.npy"), "-m", str(files["static"]), *args]
    code, _, err = run_cli(argv, capsys)
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "v.npy").exists()


def test_cli_index_built_and_searched_from_a_static_folder(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from whitevec.index import Retriever

    index = tmp_path / "index"
    argv = [
        "index",
        "build",
        "--corpus",
        str(files["corpus"]),
        "--out",
        str(index),
        "-m",
        str(files["normalized"]),
    ]
    code, _, err = run_cli([*argv, "-t", "whitening-4", "-q"], capsys)
    assert code == 0, err
    first = files["corpus"].read_text().splitlines()[0]
    code, stdout, err = run_cli(["search", str(index), first, "-k", "1", "--json"], capsys)
    assert code == 0, err
    assert json.loads(stdout)[0]["hits"][0]["text"] == first
    with Retriever.load(index) as retriever:  # the encoder comes from the manifest: a StaticEncoder
        assert isinstance(retriever.encoder, StaticEncoder)
        assert retriever.manifest["encoder_backend"] == "static" and retriever.manifest["pooling"] == "static"


def test_a_static_folder_without_a_token_limit_builds_an_index(tmp_path: Path) -> None:
    from whitevec.index import Retriever

    folder = tiny_static_folder(tmp_path / "static", max_length=None)
    texts = sentences(30, seed=3)
    with Retriever.build(
        _documents(texts), tmp_path / "index", encoder=StaticEncoder(folder), transform="none"
    ) as built:
        assert built.manifest["max_length"] is None
    with Retriever.load(tmp_path / "index") as loaded:
        assert loaded.search([texts[4]], k=1)[0][0].text == texts[4]


def test_tune_weighs_a_static_folder_against_a_model_and_records_encode_cost(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, report = tmp_path / "tuned.json", tmp_path / "report.json"
    models = f"{files['bert']},{files['static']}"
    argv = ["tune", "--pairs", str(files["pairs"]), "-m", models, "--candidates", "whitening-4", "-o", str(config)]
    code, stdout, err = run_cli([*argv, "--json", str(report), "-q"], capsys)
    assert code == 0, err
    assert "encode ms/1k" in stdout
    rows = json.loads(report.read_text())["candidates"]
    kinds = {(Path(r["model"]).name, r["pooling"], r["transform"]) for r in rows}
    assert kinds == {
        ("bert", "last-avg", "none"),
        ("bert", "last-avg", "whitening-4"),
        ("static", "static", "none"),
        ("static", "static", "whitening-4"),
    }
    assert all(r["encode_ms_per_1000"] > 0 for r in rows)
    # A static folder alone: its configuration names pooling static, and index build --config applies it.
    argv = ["tune", "--pairs", str(files["pairs"]), "-m", str(files["static"]), "-o", str(config)]
    code, _, err = run_cli([*argv, "--candidates", "center", "-q"], capsys)
    assert code == 0, err
    assert json.loads(config.read_text())["pooling"] == "static"
    index = tmp_path / "index"
    code, _, err = run_cli(
        ["index", "build", "--corpus", str(files["corpus"]), "--out", str(index), "--config", str(config), "-q"],
        capsys,
    )
    assert code == 0, err
    # The index is built as the configuration says: the static folder (not the default model), its pooling, and
    # the transform tune chose (here none: centring gains nothing on these cosines).
    tuned = json.loads(config.read_text())
    code, stdout, err = run_cli(["index", "info", str(index)], capsys)
    assert code == 0, err
    info = json.loads(stdout)
    assert Path(info["model"]).resolve() == Path(tuned["model"]).resolve() == files["static"].resolve()
    assert info["pooling"] == tuned["pooling"] == "static"
    assert info["model_fingerprint"] == tuned["model_fingerprint"] and info["max_length"] == tuned["max_length"]
    assert (info["transform"] or {"spec": "none"})["spec"] == tuned["transform"]


def test_eval_retrieval_with_a_static_encoder(files: dict[str, Path]) -> None:
    from whitevec.datasets.retrieval import Document, RetrievalDataset
    from whitevec.evaluation.retrieval import evaluate_retrieval

    texts = sentences(40, seed=9)
    docs = [Document(f"d{i}", t) for i, t in enumerate(texts)]
    # Queries that are not the documents: the last four words of every fourth one, so that the ranking (and
    # nDCG) depends on the vectors rather than on finding a text's own copy.
    queries = {f"q{i}": " ".join(texts[i].split()[-4:]) for i in range(0, 40, 4)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(0, 40, 4)}
    dataset = RetrievalDataset("tiny", docs, queries, qrels)
    encoder = StaticEncoder(files["normalized"])
    report = evaluate_retrieval(encoder, dataset, ["none"], latency_queries=0)
    # nDCG@10 of one relevant document a query: 1 / log2(1 + its rank) within the top 10, from plain cosines.
    scores = encoder.encode(list(queries.values())) @ encoder.encode(texts).T
    ranks = [1 + int((row > row[int(q[1:])]).sum()) for q, row in zip(queries, scores, strict=True)]
    want = np.mean([1 / np.log2(1 + rank) if rank <= 10 else 0.0 for rank in ranks])
    assert 0.2 < want < 0.95  # neither every query's own document first nor none
    assert report.scores[0].pooling == "static" and report.scores[0].ndcg_10 == pytest.approx(want, abs=1e-6)


def test_the_server_serves_a_static_index(files: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from whitevec.index import Retriever
    from whitevec.service.app import create_app
    from whitevec.service.run import load_retriever
    from whitevec.service.settings import ServeSettings

    texts = sentences(30, seed=4)
    encoder = StaticEncoder(files["static"])
    Retriever.build(_documents(texts), tmp_path / "index", encoder=encoder, transform="whitening-4").close()
    retriever = load_retriever(tmp_path / "index")
    assert isinstance(load_retriever(tmp_path / "index", "torch").encoder, StaticEncoder)  # type: ignore[attr-defined]
    with pytest.raises(BadInputError, match="--compute bf16 does not apply"):
        load_retriever(tmp_path / "index", "bf16")
    with TestClient(create_app(retriever, ServeSettings())) as client:
        body = client.post("/search", json={"queries": [texts[7]], "k": 1}).json()
        assert body["results"][0]["texts"] == [texts[7]]
        vectors = client.post("/embed", json={"texts": texts[:3]}).json()["vectors"]
    np.testing.assert_allclose(np.array(vectors), retriever.embed(texts[:3]), rtol=1e-5, atol=1e-6)


def test_the_ray_actor_encodes_with_a_static_folder(files: dict[str, Path], tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    from whitevec.datasets.shards import plan_units
    from whitevec.engines.ray import EncodeUnits

    args = {"model": str(files["static"]), "pooling": None, "max_length": None, "batch_size": 64}
    actor = EncodeUnits({**args, "device": None, "backend": "torch"}, str(tmp_path), moments=True)
    assert isinstance(actor.encoder, StaticEncoder)
    units = plan_units([files["corpus"]])
    done = actor({"units": [json.dumps([u.to_json() for u in units])]})
    assert json.loads(done["encoder"][0])["encoder_backend"] == "static"
    shard = pq.read_table(next(tmp_path.glob("shard-*.parquet"))).to_pydict()
    np.testing.assert_allclose(
        np.array(shard["vector"]), StaticEncoder(files["static"]).encode(shard["text"]), atol=1e-6
    )


# --- export-st -------------------------------------------------------------------------------------------------
def _documents(texts: list[str]) -> list[object]:
    from whitevec.index import Document

    return [Document(str(i), text) for i, text in enumerate(texts)]


def _fitted(spec: str, folder: Path) -> object:
    from whitevec.transforms import make_transform

    transform = make_transform(spec)
    assert transform is not None
    return transform.fit(StaticEncoder(folder).encode(sentences(60, seed=1)))


@pytest.mark.parametrize("spec", ["whitening-4", "center", "whitening", "abtt-1", "sif-pc"])
def test_export_st_folds_a_linear_transform_into_the_table(
    files: dict[str, Path], tmp_path: Path, spec: str
) -> None:
    from model2vec import StaticModel
    from sentence_transformers import SentenceTransformer

    from whitevec.export.sentence_transformers import export_sentence_transformer

    encoder = StaticEncoder(files["static"])
    transform = _fitted(spec, files["static"])
    out = export_sentence_transformer(tmp_path / "st", encoder, transform, normalize=True)  # type: ignore[arg-type]
    expected = transform.transform(encoder.encode(TEXTS))  # type: ignore[attr-defined]
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(TEXTS), expected, atol=1e-5)
    np.testing.assert_allclose(
        StaticModel.from_pretrained(out, force_download=False).encode(TEXTS), expected, atol=1e-5
    )
    folded = StaticEncoder(out)  # a static folder again: whitevec loads it too
    np.testing.assert_allclose(folded.encode(TEXTS), expected, atol=1e-5)
    assert folded.table.provenance["folded_transforms"][0]["class"] == type(transform).__name__
    assert not folded.encode([""]).any()  # the documented difference: no tokens give zeros, not t(0)


def test_export_st_after_a_normalising_static_folder_writes_modules(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shift after normalising cannot fold into the table: StaticEmbedding, Normalize, Dense; exact, empty
    texts included. Through the CLI, from a saved transform."""
    from sentence_transformers import SentenceTransformer

    transform = _fitted("whitening-4", files["normalized"])
    saved = tmp_path / "w.safetensors"
    transform.save(saved)  # type: ignore[attr-defined]
    out = tmp_path / "st"
    code, _, err = run_cli(["export-st", "-m", str(files["normalized"]), "-t", str(saved), "-o", str(out)], capsys)
    assert code == 0, err
    texts = [*TEXTS, ""]
    expected = transform.transform(StaticEncoder(files["normalized"]).encode(texts))  # type: ignore[attr-defined]
    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(texts), expected, atol=1e-5)
    modules = [m["type"].rsplit(".", 1)[1] for m in json.loads((out / "modules.json").read_text())]
    assert modules == ["StaticEmbedding", "Normalize", "Dense"]


def test_export_st_refuses_a_flow_by_name(files: dict[str, Path], tmp_path: Path) -> None:
    from whitevec.export.sentence_transformers import export_sentence_transformer
    from whitevec.transforms.flow import Flow

    with pytest.raises(BadInputError, match="a Flow transform is not linear, so it cannot be folded"):
        export_sentence_transformer(tmp_path / "st", StaticEncoder(files["static"]), Flow())
    assert not (tmp_path / "st").exists()


def test_export_st_of_a_static_index(files: dict[str, Path], tmp_path: Path) -> None:
    from sentence_transformers import SentenceTransformer

    from whitevec.export.sentence_transformers import export_index
    from whitevec.index import Retriever

    texts = sentences(40, seed=6)
    encoder = StaticEncoder(files["static"])
    Retriever.build(_documents(texts), tmp_path / "idx", encoder=encoder, transform="whitening-4").close()
    out = export_index(tmp_path / "idx", tmp_path / "st")
    with Retriever.load(tmp_path / "idx") as retriever:
        expected = retriever.embed(TEXTS)
    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(TEXTS), expected, atol=1e-5)
