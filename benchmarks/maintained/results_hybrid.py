"""Regenerate docs/results/hybrid.md (and hybrid.json): hybrid recall (BM25 beside the vectors) against dense and
lexical recall alone, per collection, model and transform, and the fusion `whitevec tune` chooses.

For each retrieval collection (Cranfield, MED, CACM, ADI) and each encoder (all-MiniLM-L6-v2, all-mpnet-base-v2,
and a static table: ``whitevec distill all-MiniLM-L6-v2`` with its defaults), three transforms of the vectors:

- ``none``: the raw pooling (the model's own mean pooling; the table's mean);
- ``whitening-128``: BERT-whitening keeping 128 dimensions, fitted on the collection's documents;
- the best token-weight transform on STS (docs/results/sts-token-weights.md, static.md): uSIF weights +
  ``usif-pc`` for MiniLM, SIF weights + ``sif-pc`` for MPNet (token counts from the collection's documents, with
  the model's tokenizer), ``sif-pc`` for the table (its rows already carry SIF-rank weights).

Each is scored with ``whitevec.evaluation.retrieval.evaluate_retrieval`` (one index per configuration, built with
``lexical="bm25"`` and the English analyzer, exact search): dense alone, lexical (BM25) alone, and hybrid with
RRF (k = 60, what the vector stores default to) and with whitevec's default fusion ``convex:0.5``. nDCG@10 over the
judged queries.

The tuned fusion: ``whitevec.tuning.tune`` over the encoder's three transforms x every mode and fusion it
tunes (dense, lexical, RRF 60, convex 0.3..0.8), chosen on half of the judged queries (seeded split) and scored on
the other half, then the halves swapped; the figure is the mean over all queries, each scored by the choice made
without it. Its rule keeps the plain dense configuration unless another is significantly better (paired
bootstrap), so it is never the best oracle.

Quality figures only (the load does not change them); the speed section comes from bench_hybrid.py's JSON.

    python -W ignore benchmarks/maintained/results_hybrid.py [--collections cranfield,med] [--models static]

A part merges into the existing hybrid.json; the page (benchmarks/pages/hybrid.py) is rendered after every run.
Needs WHITEVEC_DATA and all-mpnet-base-v2 fetched (shared/models/fetch-all-mpnet-base-v2).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import default_static_table
from benchmarks.common.machine import command_line, machine_facts
from benchmarks.common.runs import run_page

from whitevec.datasets.paths import resolve_data_dir
from whitevec.datasets.retrieval import RetrievalDataset, load_retrieval_dataset
from whitevec.evaluation.modes import plan_modes
from whitevec.evaluation.retrieval import evaluate_retrieval
from whitevec.tuning import tune
from whitevec.utils.io import atomic_path, writers_lock

COLLECTIONS = ("cranfield", "med", "cacm", "adi")
ANCHORS = ("cranfield", "med", "cacm")  # the development collections: its targets average these
MINILM, MPNET, STATIC = "all-MiniLM-L6-v2", "all-mpnet-base-v2", "static"
MODELS = (MINILM, MPNET, STATIC)
# The token-weight scheme and its component removal, per encoder (the best of each on STS).
TOKEN_WEIGHTS = {MINILM: ("usif", "usif-pc"), MPNET: ("sif", "sif-pc"), STATIC: (None, "sif-pc")}
FUSIONS = ("rrf:60", "convex:0.5")
SEED = 0
OUT = Path(__file__).resolve().parents[2] / "docs" / "results"


@dataclass
class Encoders:
    """One model's encoders: ``plain`` (raw pooling) and ``weighted`` (token weights; the plain one for a table,
    whose rows carry their weights already), and the component-removal transform that goes with the weights."""

    plain: Any
    weighted: Any
    weighted_transform: str

    def close(self) -> None:
        for encoder in {id(self.plain): self.plain, id(self.weighted): self.weighted}.values():
            if hasattr(encoder, "close"):
                encoder.close()


def make_encoders(model: str, corpus_texts: list[str]) -> Encoders:
    from whitevec.encoders import Encoder, load_encoder
    from whitevec.encoders.tokenization import count_model_frequencies

    scheme, removal = TOKEN_WEIGHTS[model]
    if model == STATIC:
        table = load_encoder(str(default_static_table(MINILM)))
        return Encoders(table, table, removal)
    plain = Encoder(model, pooling="last-avg")
    counts = count_model_frequencies(model, corpus_texts)
    weighted = Encoder(model, pooling="last-avg", token_weights=scheme, token_frequencies=counts)
    return Encoders(plain, weighted, removal)


def split_queries(dataset: RetrievalDataset) -> tuple[list[str], list[str]]:
    """The judged query ids in two seeded halves."""
    ids = sorted(dataset.judged_queries())
    order = np.random.default_rng(SEED).permutation(len(ids))
    half = len(ids) // 2
    return [ids[i] for i in order[:half]], [ids[i] for i in order[half:]]


def index_rows(dataset: RetrievalDataset, encoder: Any, transforms: list[str]) -> list[dict[str, Any]]:
    """dense / lexical / rrf:60 / convex:0.5 per transform, each from a built index (evaluate_retrieval's rows)."""
    plan = plan_modes(["dense", "lexical", "hybrid"], list(FUSIONS))
    report = evaluate_retrieval(encoder, dataset, transforms, latency_queries=0, modes=plan, show_progress=False)
    return [
        {
            "transform": score.transform.split(" + bm25")[0],  # a hybrid row's label adds the fusion
            "mode": score.mode,
            "fusion": score.fusion or "",
            "ndcg10": round(100 * score.ndcg_10, 2),
            "scored_by": "index",
        }
        for score in report.scores
    ]


def weighted_rows(dataset: RetrievalDataset, model: str, encoders: Encoders) -> list[dict[str, Any]]:
    """The token-weight transform's rows, scored as tune scores a candidate (an index cannot record token
    weights yet: whitevec.index.build refuses such an encoder): the same exact dense ranking, BM25 and fusion
    a built index would run (tests/test_tune_hybrid.py checks that they agree), over all judged queries."""
    name = f"{model} ({TOKEN_WEIGHTS[model][0]} weights)"
    result = tune(
        dataset,
        models=[name],
        poolings=["last-avg"],
        encoders={name: encoders.weighted},
        transforms=[encoders.weighted_transform],
        include_flow=False,
        n_boot=100,  # only the candidates' dev scores are read
        seed=SEED,
        show_progress=False,
    )
    wanted = {"dense", *FUSIONS}
    return [
        {
            "transform": encoders.weighted_transform,
            "mode": c.mode,
            "fusion": c.fusion,
            "ndcg10": round(float(c.dev or 0.0), 2),
            "scored_by": "tune",
        }
        for c in result.candidates
        if c.transform == encoders.weighted_transform and (c.fusion or c.mode) in wanted and c.dev is not None
    ]


def fixed_rows(dataset: RetrievalDataset, model: str, encoders: Encoders) -> list[dict[str, Any]]:
    """Every transform's dense / rrf:60 / convex:0.5 rows and the one lexical row."""
    if encoders.weighted is encoders.plain:  # a table: its weights are in its rows, so all three index
        return index_rows(dataset, encoders.plain, ["none", "whitening-128", encoders.weighted_transform])
    return index_rows(dataset, encoders.plain, ["none", "whitening-128"]) + weighted_rows(dataset, model, encoders)


def tuned_halves(dataset: RetrievalDataset, model: str, encoders: Encoders) -> dict[str, Any]:
    """tune on one half, scored on the other, both ways; the choice and held-out score of each side. Over the
    plain encoder (what an index can be built from): none, whitening-128 and the component removal without
    the weights, x every mode and fusion tune tries."""
    halves = split_queries(dataset)
    sides: list[dict[str, Any]] = []
    for dev_half, test_half in (halves, halves[::-1]):
        result = tune(
            dataset,
            models=[model],
            poolings=["static"] if model == STATIC else ["last-avg"],
            encoders={model: encoders.plain},
            transforms=["whitening-128", encoders.weighted_transform],
            test_queries=test_half,
            include_flow=False,
            seed=SEED,
            show_progress=False,
        )
        chosen = next(c for c in result.candidates if c.chosen)
        sides.append(
            {
                "n_dev": len(dev_half),
                "n_test": len(test_half),
                "chosen": f"{chosen.transform} / {chosen.mode} {chosen.fusion}".strip(),
                "gain_dev": None if chosen.gain is None else round(chosen.gain, 2),  # tune's are x 100 already
                "test": float(chosen.test or 0.0),
            }
        )
    weighted = sum(side["test"] * side["n_test"] for side in sides) / sum(side["n_test"] for side in sides)
    for side in sides:
        side["test"] = round(side["test"], 2)
    return {"sides": sides, "ndcg10": round(weighted, 2)}


def collection_path(name: str, data_dir: Path) -> str:
    return "cranfield" if name == "cranfield" else str(data_dir / "retrieval" / name)


def run_model(model: str, collections: list[str], data_dir: Path, save: Any) -> None:
    """Each collection's rows and tuned figures for ``model``, saved (merged into hybrid.json) as each ends, so a
    long run keeps what it finished."""
    for name in collections:
        dataset = load_retrieval_dataset(collection_path(name, data_dir), data_dir)
        encoders = make_encoders(model, [doc.text for doc in dataset.corpus])
        try:
            part = {
                "n_queries": len(dataset.judged_queries()),
                "n_docs": len(dataset.corpus),
                "rows": fixed_rows(dataset, model, encoders),
                "tuned": tuned_halves(dataset, model, encoders),
            }
        finally:
            encoders.close()
        save(model, {name: part})
        print(f"{model} {name}: done", file=sys.stderr, flush=True)


def merge(path: Path, model: str, part: dict[str, Any], facts: dict[str, Any], command: str) -> None:
    with writers_lock(path.parent):  # a lock on the folder itself: no lock file to publish
        data = json.loads(path.read_text()) if path.exists() else {"quality": {}, "runs": []}
        data["quality"].setdefault(model, {}).update(part)
        same = [r for r in data["runs"] if r["command"] == command and r["date"] == facts["date"]]
        if same and same[-1]["models"] == [model]:  # the run that saved its other collections
            same[-1]["collections"] += list(part)
        else:
            data["runs"].append({"command": command, "models": [model], "collections": list(part), **facts})
        with atomic_path(path) as tmp:
            Path(tmp).write_text(json.dumps(data, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--collections", default=",".join(COLLECTIONS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    data_dir = resolve_data_dir(args.data_dir)
    collections = [c for c in args.collections.split(",") if c]
    command = command_line()
    facts = machine_facts("bm25s", "faiss-cpu")
    for model in [m for m in args.models.split(",") if m]:
        run_model(
            model, collections, data_dir, lambda m, part: merge(args.out / "hybrid.json", m, part, facts, command)
        )
    run_page("hybrid", "--out", str(args.out))


if __name__ == "__main__":
    main()
