"""whitevec.workflows: each command's work as one library call, every check before the model loads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from whitevec.datasets.sts import Pair
from whitevec.errors import BadInputError, DataNotFoundError, ModelNotFoundError
from whitevec.workflows import build_index_file, encode_file, evaluate_retrieval_dataset, load_tuning_data


def _must_not_load(**options: Any) -> Any:
    raise AssertionError(f"an encoder was made before the inputs were checked: {options}")


def test_importing_the_workflows_loads_nothing_heavy() -> None:
    code = (
        "import sys, json, whitevec.workflows\n"
        "print(json.dumps([m for m in ('torch', 'transformers', 'scipy', 'faiss') if m in sys.modules]))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(shown) == []


def test_workflows_check_their_inputs_before_making_an_encoder(tmp_path: Path, tiny_bert_dir: Path) -> None:
    texts = tmp_path / "t.txt"
    texts.write_text("a dog runs\na cat sleeps\n")
    encoder = {"model": str(tiny_bert_dir), "pooling": None, "cache": False}
    with pytest.raises(DataNotFoundError, match=r"gone\.txt"):
        build_index_file(tmp_path / "gone.txt", tmp_path / "idx", encoder=encoder, make_encoder=_must_not_load)
    with pytest.raises(BadInputError, match="--fit-sample is for --engine ray"):
        build_index_file(texts, tmp_path / "idx", encoder=encoder, fit_sample=10, make_encoder=_must_not_load)
    with pytest.raises(BadInputError, match="unknown --engine 'spark'"):
        encode_file(texts, tmp_path / "v.npy", encoder=encoder, engine="spark", make_encoder=_must_not_load)
    with pytest.raises(DataNotFoundError, match=r"gone\.safetensors"):
        encode_file(
            texts, tmp_path / "v.npy", encoder=encoder, transform="gone.safetensors", make_encoder=_must_not_load
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]


def test_retrieval_evaluation_checks_every_spec_before_the_model_loads(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "text": "a dog"}) + "\n")
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "dog"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    encoder = {"model": str(tiny_bert_dir), "cache": False}
    run = {"encoder": encoder, "poolings": ["last-avg"], "make_encoder": _must_not_load}
    with pytest.raises(BadInputError, match="give at least one pooling"):
        evaluate_retrieval_dataset(beir, ["none"], **{**run, "poolings": []})
    with pytest.raises(BadInputError, match="pq5"):  # PQ's M must divide the 32-d vectors: no pair fits
        evaluate_retrieval_dataset(beir, ["none"], **run, encodings="pq5")


def test_tuning_data_is_read_by_name(tmp_path: Path) -> None:
    dev = tmp_path / "dev.tsv"
    dev.write_text("a dog runs\ta dog is running\t5\nthe sky\ta car\t0\n")
    fit = tmp_path / "fit.txt"
    fit.write_text("one text\nanother text\n")
    data = load_tuning_data(pairs=dev, fit_on=fit)
    assert data.kind == "sts" and data.test is None and data.fit_texts == ["one text", "another text"]
    with pytest.raises(BadInputError, match="exactly one of --task NAME, --pairs FILE or --dataset"):
        load_tuning_data(pairs=dev, dataset="cranfield")
    with pytest.raises(BadInputError, match="--test-pairs goes with --pairs"):
        load_tuning_data(task="stsb", test_pairs=dev)


def test_tune_finds_every_model_before_it_loads_one(tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from whitevec.tuning import run as tuning_run

    monkeypatch.setattr(tuning_run, "_make_encoder", lambda *args: _must_not_load(args=args))
    pairs = [Pair(f"a{i}", f"b{i}", float(i % 5)) for i in range(20)]
    with pytest.raises(ModelNotFoundError, match="no-such-model"):
        tuning_run.tune(pairs, models=[str(tiny_bert_dir), "./no-such-model"], encoder_options={"cache": False})
