"""The index commands end to end: index build / info / export-faiss, search, eval-retrieval."""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import numpy as np
import pytest

from tests.index_helpers import sentences, tiny_bert
from tests.test_cli import run_cli as _run
from whitevec.encoders.transformer import Encoder

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def test_index_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bert = tiny_bert(tmp_path / "bert")
    texts = sentences(50, seed=21)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(json.dumps({"id": f"c{i}", "text": t, "src": "test"}) + "\n" for i, t in enumerate(texts))
    )
    out = tmp_path / "idx"
    code, _, err = _run(
        [
            "index",
            "build",
            "--corpus",
            str(corpus),
            "--out",
            str(out),
            "--model",
            str(bert),
            "--transform",
            "whitening-16",
            "--kind",
            "hnsw",
            "--ef-search",
            "50",
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    code, stdout, _ = _run(["search", str(out), texts[7], "-k", "3", "--json"], capsys)
    payload = json.loads(stdout)
    assert code == 0 and payload[0]["query"] == texts[7] and payload[0]["hits"][0]["id"] == "c7"
    assert payload[0]["hits"][0]["metadata"] == {"src": "test"} and len(payload[0]["hits"]) == 3
    code, stdout, _ = _run(["search", str(out), texts[3]], capsys)
    assert code == 0 and "c3" in stdout
    code, stdout, _ = _run(["index", "info", str(out)], capsys)
    info = json.loads(stdout)
    assert info["index_kind"] == "hnsw" and info["index_params"]["efSearch"] == 50 and info["dim"] == 16
    exported = tmp_path / "plain.faiss"
    code, _, err = _run(["index", "export-faiss", str(out), str(exported)], capsys)
    assert code == 0, err
    raw = Encoder(bert, "last-avg").encode([texts[11]])
    _, rows = faiss.read_index(str(exported)).search(raw, 1)
    assert rows[0, 0] == 11
    # errors: one line, exit status 2, nothing written
    code, _, err = _run(["search", str(out), "x", "-k", "0"], capsys)
    assert code == 2 and "k must be at least 1" in err
    code, _, err = _run(["search", str(tmp_path / "missing"), "x"], capsys)
    assert code == 2 and "index folder" in err and "does not exist" in err
    code, _, err = _run(
        [
            "index",
            "build",
            "--corpus",
            str(tmp_path / "none.txt"),
            "--out",
            str(tmp_path / "i2"),
            "--model",
            str(bert),
        ],
        capsys,
    )
    assert code == 2 and "does not exist" in err and not (tmp_path / "i2").exists()


def test_index_build_keeps_raw_vectors_by_default(
    tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(sentences(20, seed=5)) + "\n")
    out = tmp_path / "idx"
    argv = ["index", "build", "--corpus", str(corpus), "--out", str(out), "--model", str(tiny_bert_dir), "-q"]
    code, _, err = _run([*argv, "--no-cache"], capsys)
    assert code == 0, err
    code, stdout, _ = _run(["index", "info", str(out)], capsys)
    assert code == 0 and json.loads(stdout)["transform"] is None
    code, stdout, _ = _run(["index", "build", "--help"], capsys)
    assert "[default: none]" in " ".join(stdout.split())


def test_eval_retrieval_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bert = tiny_bert(tmp_path / "bert")
    docs = sentences(30, seed=31)
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(docs))
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": docs[i][:20]}) + "\n" for i in range(5))
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t2\n" for i in range(5))
    )
    report_file = tmp_path / "report.json"
    code, stdout, err = _run(
        [
            "eval-retrieval",
            "--model",
            str(bert),
            "--transform",
            "none,whitening-8",
            "--dataset",
            str(folder),
            "--latency-queries",
            "2",
            "--json",
            str(report_file),
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    assert "beir retrieval" in stdout  # the table itself is squeezed to the 80-column test terminal
    report = json.loads(report_file.read_text())
    assert [s["transform"] for s in report["scores"]] == ["none", "whitening-8"]
    assert all(0 <= s["ndcg_10"] <= 1 and s["n_queries"] == 5 for s in report["scores"])
    assert np.isfinite(report["scores"][0]["p50_query_ms"])
