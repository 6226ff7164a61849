"""Index build/search/persistence/export tests on a tiny random BERT and synthetic corpora."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import faiss
import numpy as np
import pytest

from tests.index_helpers import sentences, tiny_bert
from whitevec.encoders.transformer import Encoder
from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError, DimensionMismatchError
from whitevec.export import export_faiss
from whitevec.index import Document, Retriever, read_corpus_file
from whitevec.utils.linalg import unit_rows

# 60 vectors of a 32-d random BERT leave one direction near-singular; the whitening warns about it, as it should.
pytestmark = pytest.mark.filterwarnings("ignore::whitevec.transforms.WhitevecWarning")
N_DOCS = 60


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("tiny-bert-index"))


@pytest.fixture(scope="module")
def encoder(bert_dir: Path) -> Encoder:
    return Encoder(bert_dir, "last-avg")  # the vector cache (a temporary folder in tests) saves re-encoding


@pytest.fixture(scope="module")
def docs() -> list[Document]:
    return [Document(f"doc-{i}", text, {"n": i}) for i, text in enumerate(sentences(N_DOCS, seed=1))]


@pytest.fixture(scope="module")
def queries() -> list[str]:
    return sentences(8, seed=2, length=4)


def _reference(encoder: Encoder, retriever: Retriever, texts: list[str]) -> np.ndarray:
    """Stored vectors recomputed with numpy only: (x - beta*mu) @ W, then row normalisation for cosine."""
    x = encoder.encode(texts).astype(np.float64)
    t = retriever.transform
    if t is not None:
        x = (x - t.beta * t.mean_) @ t.components_
    if retriever.manifest["metric"] == "cosine":
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x


@pytest.mark.parametrize(("spec", "metric"), [("whitening", "cosine"), ("whitening-16", "ip"), ("none", "l2")])
def test_flat_equals_brute_force(
    encoder: Encoder, docs: list[Document], queries: list[str], tmp_path: Path, spec: str, metric: str
) -> None:
    r = Retriever.build(docs, tmp_path / "idx", encoder=encoder, transform=spec, metric=metric)
    D = _reference(encoder, r, [d.text for d in docs])
    Q = _reference(encoder, r, queries)
    if metric == "l2":
        scores = ((Q[:, None, :] - D[None, :, :]) ** 2).sum(-1)
        order = np.argsort(scores, axis=1)[:, :5]
    else:
        scores = Q @ D.T
        order = np.argsort(-scores, axis=1)[:, :5]
    hits = r.search(queries, k=5)
    for qi, row in enumerate(hits):
        assert [h.id for h in row] == [docs[j].id for j in order[qi]]
        np.testing.assert_allclose([h.score for h in row], scores[qi, order[qi]], rtol=1e-4, atol=1e-4)
        assert row[0].text == docs[order[qi][0]].text and row[0].metadata == {"n": int(order[qi][0])}
    assert r.dim == (16 if spec == "whitening-16" else 32)
    np.testing.assert_allclose(r.embed(queries), Q, rtol=1e-4, atol=1e-5)


def test_persistence_round_trip(
    encoder: Encoder, docs: list[Document], queries: list[str], tmp_path: Path, bert_dir: Path
) -> None:
    out = tmp_path / "idx"
    built = Retriever.build(docs, out, encoder=encoder, transform="whitening-16")
    expected = built.search(queries, k=7)
    assert sorted(p.name for p in out.iterdir()) == [
        "docs.sqlite",
        "index.faiss",
        "manifest.json",
        "transform.safetensors",
    ]
    m = json.loads((out / "manifest.json").read_text())
    assert m["format_version"] == 2 and m["count"] == N_DOCS and m["dim"] == 16 and m["encoder_dim"] == 32
    assert m["model"] == str(bert_dir) and m["pooling"] == "last-avg" and m["metric"] == "cosine"
    assert m["index_kind"] == "flat" and m["backend"] == "faiss" and m["faiss"] == faiss.__version__
    assert m["transform"]["spec"] == "whitening-16" and m["transform"]["fit_rows"] == N_DOCS
    assert set(m["files"]) == {"docs.sqlite", "index.faiss", "transform.safetensors"}
    again = Retriever.load(out, encoder=encoder)
    assert again.search(queries, k=7) == expected
    fresh = Retriever.load(out)  # encoder rebuilt from the manifest
    got = fresh.search(queries, k=7)
    assert [[h.id for h in row] for row in got] == [[h.id for h in row] for row in expected]
    assert m["encoder_backend"] == "torch" and fresh.encoder.backend == "torch" and fresh.encoder.caches_vectors
    assert not Retriever.load(out, cache=False).encoder.caches_vectors
    # the Retriever closes the encoder it made (its cache files), never one it was given
    assert fresh.encoder._caches and encoder._caches
    fresh.close()
    again.close()
    assert not fresh.encoder._caches and encoder._caches


def test_the_default_build_keeps_raw_vectors(
    encoder: Encoder, docs: list[Document], queries: list[str], tmp_path: Path
) -> None:
    # Whitening costs contrastively trained encoders (the default model): no transform unless one is asked for.
    built = Retriever.build(docs, tmp_path / "default", encoder=encoder)
    assert built.manifest["transform"] is None and built.transform is None
    raw = unit_rows(encoder.encode([d.text for d in docs]))
    top = built.search(queries[:1], k=1)[0][0]
    assert top.score == pytest.approx(float((raw @ unit_rows(encoder.encode(queries[:1]))[0]).max()), abs=1e-5)


def test_encoder_backend_is_recorded_and_reproduced(
    bert_dir: Path, docs: list[Document], queries: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "idx-bf16"
    built = Retriever.build(docs, out, encoder=Encoder(bert_dir, "last-avg", cache=False, backend="bf16"))
    assert json.loads((out / "manifest.json").read_text())["encoder_backend"] == "bf16"
    fresh = Retriever.load(out, cache=False)
    assert fresh.encoder.backend == "bf16"
    assert fresh.search(queries, k=5) == built.search(queries, k=5)


@pytest.mark.parametrize(
    ("spec", "metric"), [("whitening", "cosine"), ("whitening-16", "ip"), ("center", "cosine"), ("none", "l2")]
)
def test_export_faiss_matches_whitevec(
    encoder: Encoder, docs: list[Document], queries: list[str], tmp_path: Path, spec: str, metric: str
) -> None:
    r = Retriever.build(docs, tmp_path / "idx", encoder=encoder, transform=spec, metric=metric)
    out = export_faiss(tmp_path / "idx", tmp_path / "exported.faiss")
    plain = faiss.read_index(str(out))
    scores, rows = plain.search(encoder.encode(queries), 5)  # raw encoder vectors in
    ours = r.search(queries, k=5)
    id_of = {f"doc-{i}": i for i in range(N_DOCS)}
    assert rows.tolist() == [[id_of[h.id] for h in row] for row in ours]
    np.testing.assert_allclose(scores, [[h.score for h in row] for row in ours], rtol=1e-4, atol=1e-4)


def test_export_refuses_nonlinear(encoder: Encoder, docs: list[Document], tmp_path: Path) -> None:
    Retriever.build(docs, tmp_path / "idx", encoder=encoder, transform="abtt-2")
    with pytest.raises(BadInputError, match="not linear"):
        export_faiss(tmp_path / "idx", tmp_path / "x.faiss")
    assert not (tmp_path / "x.faiss").exists()


@pytest.mark.parametrize(
    ("kind", "params"), [("hnsw", {"M": 8, "efSearch": 64}), ("ivf", {"nlist": 4, "nprobe": 4})]
)
def test_approximate_kinds_agree_with_flat(
    encoder: Encoder, docs: list[Document], queries: list[str], tmp_path: Path, kind: str, params: dict[str, int]
) -> None:
    flat = Retriever.build(docs, tmp_path / "flat", encoder=encoder, transform="whitening")
    approx = Retriever.build(
        docs, tmp_path / kind, encoder=encoder, transform="whitening", kind=kind, index_params=params
    )
    # nprobe = nlist and efSearch >= corpus size make these exhaustive on 60 documents
    assert [[h.id for h in r] for r in approx.search(queries, 5)] == [
        [h.id for h in r] for r in flat.search(queries, 5)
    ]
    loaded = Retriever.load(tmp_path / kind, encoder=encoder)
    assert loaded.manifest["index_kind"] == kind
    # 60 training vectors support one IVF list (39 per list): nlist=4 is lowered to 1, with a warning
    expected = {**params, "nlist": 1} if kind == "ivf" else params
    assert {k: loaded.manifest["index_params"][k] for k in params} == expected
    with pytest.raises(BadInputError, match="does not apply"):
        Retriever.build(docs, tmp_path / "bad", encoder=encoder, kind=kind, index_params={"bogus": 1})


def test_add_documents(encoder: Encoder, docs: list[Document], tmp_path: Path) -> None:
    out = tmp_path / "idx"
    r = Retriever.build(docs[:40], out, encoder=encoder, transform="whitening")
    assert r.add(docs[40:]) == N_DOCS and r.count == N_DOCS
    target = docs[50]
    assert r.search([target.text], k=1)[0][0].id == target.id
    before = (out / "manifest.json").read_bytes()
    with pytest.raises(BadInputError, match="doc-3"):
        r.add([Document("doc-3", "a dog")])
    with pytest.raises(BadInputError, match="new-1"):
        r.add([Document("new-1", "a dog"), Document("new-1", "a cat")])
    with pytest.raises(BadInputError, match="no documents"):
        r.add([])
    assert (out / "manifest.json").read_bytes() == before
    loaded = Retriever.load(out, encoder=encoder)
    assert loaded.count == N_DOCS and loaded.search([target.text], k=1)[0][0].id == target.id
    # same vectors whether added later or built at once: compare with a full build
    full = Retriever.build(docs, tmp_path / "full", encoder=encoder, transform=r.transform)
    assert [h.id for h in full.search([target.text], 5)[0]] == [h.id for h in loaded.search([target.text], 5)[0]]


def test_bad_input(
    encoder: Encoder, docs: list[Document], queries: list[str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "idx"
    r = Retriever.build(docs, out, encoder=encoder, transform="whitening")
    snapshot = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(BadInputError, match="empty"):
        Retriever.build([], out, encoder=encoder)
    with pytest.raises(BadInputError, match="'doc-1'"):
        Retriever.build([*docs, Document("doc-1", "again")], out, encoder=encoder)
    with pytest.raises(BadInputError, match="unknown metric"):
        Retriever.build(docs, out, encoder=encoder, metric="hamming")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == snapshot  # nothing written over
    with pytest.raises(BadInputError, match="empty"):
        r.search([], k=3)
    with pytest.raises(BadInputError, match="list"):
        r.search("a dog", k=3)  # type: ignore[arg-type]
    with pytest.raises(BadInputError, match="at least 1"):
        r.search(queries, k=0)
    with caplog.at_level(logging.WARNING, logger="whitevec.index.retriever"):
        hits = r.search(queries[:1], k=500)
    assert len(hits[0]) == N_DOCS and "returning 60" in caplog.text
    # another folder that is not an index is never replaced
    other = tmp_path / "not-an-index"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(BadInputError, match="not a whitevec index"):
        Retriever.build(docs, other, encoder=encoder)
    assert (other / "keep.txt").read_text() == "mine"
    with pytest.raises(DataNotFoundError):
        Retriever.load(tmp_path / "nowhere", encoder=encoder)


def test_encoder_mismatch(encoder: Encoder, docs: list[Document], tmp_path: Path) -> None:
    out = tmp_path / "idx"
    Retriever.build(docs, out, encoder=encoder, transform="whitening")
    wider = Encoder(tiny_bert(tmp_path / "wide-bert", hidden=48), "last-avg", cache=False)
    with pytest.raises(DimensionMismatchError, match="48-d"):
        Retriever.load(out, encoder=wider)
    with pytest.raises(BadInputError, match="pooling"):
        Retriever.load(out, encoder=encoder.with_pooling("first-last-avg"))


@pytest.mark.parametrize("victim", ["index.faiss", "docs.sqlite", "transform.safetensors", "manifest.json"])
def test_corrupt_or_missing_file(encoder: Encoder, docs: list[Document], tmp_path: Path, victim: str) -> None:
    out = tmp_path / "idx"
    Retriever.build(docs, out, encoder=encoder, transform="whitening")
    path = out / victim
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=victim):
        Retriever.load(out, encoder=encoder)
    if victim != "manifest.json":
        path.unlink()
        with pytest.raises(CorruptFileError, match=f"{victim} is missing"):
            Retriever.load(out, encoder=encoder)


def test_corpus_files(tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_text("first doc\n\n  second doc \n")
    assert read_corpus_file(tmp_path / "c.txt") == [Document("1", "first doc"), Document("3", "second doc")]
    (tmp_path / "c.jsonl").write_text(
        '{"id": "a", "text": "alpha", "lang": "en"}\n{"id": 7, "title": "T", "text": "beta"}\n'
    )
    assert read_corpus_file(tmp_path / "c.jsonl") == [
        Document("a", "alpha", {"lang": "en"}),
        Document("7", "T beta", None),
    ]
    (tmp_path / "c.csv").write_text('id,text,src\nx,"hello, world",web\ny,bye,book\n')
    assert read_corpus_file(tmp_path / "c.csv") == [
        Document("x", "hello, world", {"src": "web"}),
        Document("y", "bye", {"src": "book"}),
    ]
    (tmp_path / "c.tsv").write_text('text\n"quoted" stays\nplain\n')
    assert read_corpus_file(tmp_path / "c.tsv") == [Document("1", '"quoted" stays'), Document("2", "plain")]
    (tmp_path / "dup.jsonl").write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n')
    with pytest.raises(BadInputError, match="'a'"):
        read_corpus_file(tmp_path / "dup.jsonl")
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(BadInputError, match="no documents"):
        read_corpus_file(tmp_path / "empty.txt")
    (tmp_path / "notext.csv").write_text("id,body\n1,x\n")
    with pytest.raises(BadInputError, match="'text' column"):
        read_corpus_file(tmp_path / "notext.csv")
