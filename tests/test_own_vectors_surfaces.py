"""Own vectors on every surface (issue #51, item 1): the CLI (index build --vectors, index create, index add
--vectors, search --query-vectors), HTTP (/search and /documents with vectors, /info) and the round trip of an
index built from an embedding API's vectors (simulated: a seeded random projection of a tiny static table's
sentence vectors, so texts sharing words get near vectors)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.index_helpers import HashEncoder, sentences
from tests.static_helpers import reference_vectors, tiny_table
from whitevec.cli import main
from whitevec.index import Document, Retriever
from whitevec.service.app import create_app
from whitevec.service.settings import ServeSettings

API_DIM = 24
_TABLE = tiny_table(dim=16, seed=3)
_PROJECTION = np.random.default_rng(7).standard_normal((16, API_DIM)).astype(np.float32)


def api_embeddings(texts: list[str]) -> np.ndarray:
    """What an embedding API would answer for ``texts``: fixed vectors, near for texts sharing words."""
    return (reference_vectors(_TABLE, texts) @ _PROJECTION).astype(np.float32)


def _corpus(n: int = 60) -> list[Document]:
    return [Document(f"doc{i}", text, {"group": i % 3}) for i, text in enumerate(sentences(n, seed=1))]


def _cli(argv: list[str]) -> int:
    """``whitevec ARGV``'s exit status (main returns 0, and exits with the status of a refusal)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _ids(hits: Any) -> list[list[str]]:
    return [[hit.id for hit in query] for query in hits]


def _http_ids(answer: dict[str, Any]) -> list[list[str]]:
    return [result["ids"] for result in answer["results"]]


# --- the round trip ------------------------------------------------------------------------------------------
def test_an_index_of_api_vectors_round_trips_through_whitening_writes_filters_hybrid_reload_and_serve(
    tmp_path: Path,
) -> None:
    docs = _corpus()
    index = Retriever.build(
        docs,
        tmp_path / "api",
        vectors=api_embeddings([d.text for d in docs]),
        encoder_name="fake-api-embed",
        transform="whitening-12",
        lexical="bm25",
    )
    assert (index.is_external, index.input_dim, index.dim) == (True, API_DIM, 12)
    assert index.manifest["transform"]["fit_rows"] == 60
    asked = [docs[5].text, docs[17].text]
    found = index.search(query_vectors=api_embeddings(asked), k=5, mode="dense")
    assert [hits[0].id for hits in found] == ["doc5", "doc17"]  # each document finds itself first

    new = [Document("new0", "a quiet lake under the northern sky", {"group": 1})]
    index.add(new, vectors=api_embeddings([new[0].text]))
    assert index.search(query_vectors=api_embeddings([new[0].text]), k=1, mode="dense")[0][0].id == "new0"
    assert index.delete(["doc5"]).deleted == 1
    assert "doc5" not in _ids(index.search(query_vectors=api_embeddings([docs[5].text]), k=10, mode="dense"))[0]

    filtered = index.search(query_vectors=api_embeddings(asked), k=5, mode="dense", filter="group == 1")
    assert all(hit.metadata["group"] == 1 for hits in filtered for hit in hits) and all(filtered)
    hybrid = index.search(asked, query_vectors=api_embeddings(asked), k=5, mode="hybrid")
    assert hybrid[1][0].id == "doc17" and hybrid[1][0].rankers is not None
    before = {
        "dense": _ids(index.search(query_vectors=api_embeddings(asked), k=5, mode="dense")),
        "hybrid": _ids(hybrid),
        "filtered": _ids(filtered),
    }
    index.close()

    reloaded = Retriever.load(tmp_path / "api")
    assert _ids(reloaded.search(query_vectors=api_embeddings(asked), k=5, mode="dense")) == before["dense"]
    assert (
        _ids(reloaded.search(asked, query_vectors=api_embeddings(asked), k=5, mode="hybrid")) == before["hybrid"]
    )

    client = TestClient(create_app(reloaded, ServeSettings(writable=True)))
    search = {"vectors": api_embeddings(asked).tolist(), "k": 5}
    assert _http_ids(client.post("/search", json={**search, "mode": "dense"}).json()) == before["dense"]
    both = client.post("/search", json={**search, "queries": asked, "mode": "hybrid"}).json()
    assert _http_ids(both) == before["hybrid"]
    assert (
        _http_ids(client.post("/search", json={**search, "filter": "group == 1", "mode": "dense"}).json())
        == (before["filtered"])
    )
    info = client.get("/info").json()
    assert info["search"]["external"] is True and info["search"]["input_dim"] == API_DIM
    assert info["manifest"]["encoder"] == "external" and info["manifest"]["model"] == "fake-api-embed"
    added = {
        "documents": [{"id": "new1", "text": "a red kite"}],
        "vectors": api_embeddings(["a red kite"]).tolist(),
    }
    assert client.post("/documents", json=added).json()["added"] == 1
    found_new = client.post("/search", json={"vectors": added["vectors"], "k": 1, "mode": "dense"}).json()
    assert _http_ids(found_new) == [["new1"]]
    reloaded.close()


# --- HTTP --------------------------------------------------------------------------------------------------
@pytest.fixture
def served(tmp_path: Path) -> Any:
    docs = _corpus(12)
    index = Retriever.build(docs, tmp_path / "ix", vectors=api_embeddings([d.text for d in docs]), lexical="bm25")
    yield TestClient(create_app(index, ServeSettings(writable=True))), index
    index.close()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"queries": ["lake"], "mode": "dense"}, "a dense search needs the queries' vectors"),
        ({"queries": ["lake"]}, "a hybrid search needs the queries' vectors beside the query texts"),
        ({"k": 3}, "give queries \\(texts\\), vectors, or both"),
        ({"vectors": [[0.5] * (API_DIM - 1)]}, f"List should have at least {API_DIM} items"),
        ({"queries": ["a", "b"], "vectors": [[0.5] * API_DIM]}, "1 vectors for 2 queries"),
        ({"vectors": [[0.5] * API_DIM], "mode": "lexical"}, "a lexical search needs the query texts"),
        ({"vectors": [[1e39] + [0.5] * (API_DIM - 1)]}, "less than or equal to 3402823"),
    ],
)
def test_http_searches_of_an_external_index_refuse_in_one_line(
    served: Any, body: dict[str, Any], message: str
) -> None:
    client, _ = served
    answer = client.post("/search", json=body)
    assert answer.status_code == 422
    assert "\n" not in answer.json()["detail"]
    assert re.search(message, answer.json()["detail"])


def test_http_vectors_alone_search_densely_on_an_index_whose_own_mode_is_hybrid(served: Any) -> None:
    client, index = served
    vector = api_embeddings([_corpus(12)[2].text]).tolist()
    answer = client.post("/search", json={"vectors": vector, "k": 3}).json()
    assert answer["mode"] == "dense" and answer["results"][0]["rankers"] == [None] * 3
    assert _http_ids(answer) == _ids(index.search(query_vectors=np.asarray(vector), k=3, mode="dense"))


def test_http_nan_in_a_vector_is_one_line_and_a_write_without_vectors_writes_nothing(served: Any) -> None:
    client, index = served
    nan = b'{"vectors": [[NaN' + b", 1.0" * (API_DIM - 1) + b"]]}"
    answer = client.post("/search", content=nan, headers={"content-type": "application/json"})
    assert answer.status_code == 422 and "finite number" in answer.json()["detail"]
    before = (index.path / "manifest.json").read_bytes()
    refused = client.post("/documents", json={"documents": [{"id": "x", "text": "a lake"}]})
    assert refused.status_code == 422 and "give the documents' vectors" in refused.json()["detail"]
    short = client.post("/documents", json={"documents": [{"id": "x", "text": "a lake"}], "vectors": [[1.0]]})
    assert short.status_code == 422
    assert (index.path / "manifest.json").read_bytes() == before


def test_http_an_own_model_index_takes_query_vectors_too(tmp_path: Path) -> None:
    encoder = HashEncoder(8)
    docs = _corpus(10)
    with Retriever.build(docs, tmp_path / "own", encoder=encoder) as index:
        client = TestClient(create_app(index, ServeSettings()))
        by_text = client.post("/search", json={"queries": [docs[3].text], "k": 3}).json()
        by_vector = client.post(
            "/search", json={"vectors": encoder.encode([docs[3].text]).tolist(), "k": 3}
        ).json()
        assert _http_ids(by_text) == _http_ids(by_vector) and by_vector["results"][0]["query"] is None
        assert client.get("/info").json()["search"]["external"] is False


# --- the CLI -------------------------------------------------------------------------------------------------
def _files(folder: Path, docs: list[Document]) -> dict[str, Path]:
    """A corpus file of ``docs`` in ``folder`` (made), their API vectors, and the first one's as a query."""
    folder.mkdir(exist_ok=True)
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.id, "text": d.text, **d.metadata}) + "\n" for d in docs))
    np.save(folder / "vectors.npy", api_embeddings([d.text for d in docs]))
    np.save(folder / "queries.npy", api_embeddings([docs[0].text]))
    return {"corpus": corpus, "vectors": folder / "vectors.npy", "queries": folder / "queries.npy"}


def test_cli_builds_searches_and_adds_to_an_index_of_given_vectors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = _corpus(20)
    files = _files(tmp_path, docs[4:15])
    out = str(tmp_path / "ix")
    build = ["index", "build", "--corpus", str(files["corpus"]), "--out", out, "--vectors", str(files["vectors"])]
    assert _cli([*build, "--encoder-name", "api-x", "--transform", "whitening-8", "--lexical", "bm25"]) == 0
    capsys.readouterr()
    assert _cli(["index", "info", out]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["encoder"], info["model"], info["encoder_dim"], info["dim"]) == ("external", "api-x", API_DIM, 8)
    assert (
        _cli(["search", out, "--query-vectors", str(files["queries"]), "--mode", "dense", "--format", "json"]) == 0
    )
    answer = json.loads(capsys.readouterr().out)
    assert answer[0]["query"] == "vector 1" and answer[0]["hits"][0]["id"] == "doc4"
    hybrid = ["search", out, docs[4].text, "--query-vectors", str(files["queries"]), "--filter", "group == 1"]
    assert _cli([*hybrid, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["hits"][0]["id"] == "doc4"
    assert _cli(["search", out, "lake", "--mode", "dense"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    more = _files(tmp_path / "more", docs[15:])
    assert _cli(["index", "add", out, "--corpus", str(more["corpus"])]) == 2
    assert "give the documents' vectors" in capsys.readouterr().err
    assert _cli(["index", "add", out, "--corpus", str(more["corpus"]), "--vectors", str(more["vectors"])]) == 0
    with Retriever.load(out) as index:
        assert index.count == 16


def test_cli_refuses_bad_vectors_options_in_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _files(tmp_path, _corpus(6))
    (tmp_path / "v.txt").write_text("0.1 0.2\n")
    np.save(tmp_path / "short.npy", api_embeddings(["a"]))
    out = str(tmp_path / "ix")
    build = ["index", "build", "--corpus", str(files["corpus"]), "--out", out]
    for extra, message in [
        (["--vectors", str(tmp_path / "v.txt")], "must be .npy or .safetensors"),
        (["--vectors", str(tmp_path / "short.npy")], "1 vectors for 6 documents"),
        (["--vectors", str(files["vectors"]), "--model", "some-model"], "leave --model out"),
        (["--vectors", str(files["vectors"]), "--engine", "ray"], "leave --engine out"),
        (["--encoder-name", "x"], "give the vectors file too"),
    ]:
        assert _cli([*build, *extra]) == 2
        err = capsys.readouterr().err
        assert message in err and err.strip().count("\n") == 0, err
    assert not Path(out).exists()


def test_cli_creates_an_empty_index_that_fits_its_transform_on_the_first_add(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = _corpus(8)
    out = str(tmp_path / "empty")
    assert (
        _cli(["index", "create", out, "--dim", str(API_DIM), "--transform", "whitening-4", "--lexical", "bm25"])
        == 0
    )
    assert _cli(["search", out, "lake", "--mode", "lexical", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["note"] == "the index holds no documents"
    few = _files(tmp_path / "few", docs[:3])
    assert _cli(["index", "add", out, "--corpus", str(few["corpus"]), "--vectors", str(few["vectors"])]) == 2
    assert "needs at least 5 documents; this one brings 3" in capsys.readouterr().err
    enough = _files(tmp_path / "enough", docs)
    assert _cli(["index", "add", out, "--corpus", str(enough["corpus"]), "--vectors", str(enough["vectors"])]) == 0
    with Retriever.load(out) as index:
        assert (index.count, index.dim, index.manifest["transform"]["fit_rows"]) == (8, 4, 8)
    assert _cli(["index", "create", str(tmp_path / "bad")]) == 2
    assert "--dim D" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_http_an_empty_index_answers_no_hits_and_grows_by_writes_with_vectors(tmp_path: Path) -> None:
    index = Retriever.create(tmp_path / "e", dim=API_DIM, transform="whitening-2", lexical="bm25")
    client = TestClient(create_app(index, ServeSettings(writable=True)))
    empty = client.post("/search", json={"queries": ["lake"], "vectors": [[1.0] * API_DIM]}).json()
    assert empty["results"][0]["ids"] == [] and empty["results"][0]["note"] == "the index holds no documents"
    docs = _corpus(3)
    body = {
        "documents": [{"id": d.id, "text": d.text} for d in docs],
        "vectors": api_embeddings([d.text for d in docs]).tolist(),
    }
    few = client.post("/documents", json={"documents": body["documents"][:2], "vectors": body["vectors"][:2]})
    assert few.status_code == 422 and "needs at least 3 documents; this one brings 2" in few.json()["detail"]
    assert client.post("/documents", json=body).json()["count"] == 3
    found = client.post("/search", json={"vectors": body["vectors"][1:2], "k": 1}).json()
    assert _http_ids(found) == [["doc1"]] and client.get("/info").json()["manifest"]["dim"] == 2
    index.close()
