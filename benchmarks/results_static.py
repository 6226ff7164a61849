"""Regenerate docs/results/static.md (and static.json): static encoders against Model2Vec and the models.

For all-MiniLM-L6-v2, all-mpnet-base-v2 (English: STS-B, STS12-15, Cranfield) and m3e-small (the five Chinese
tasks): the contextual model itself (whitevec's Encoder, the model's mean pooling), Model2Vec's own distill of it
(the peer) and ``whitevec distill`` by both methods (``tokens``, ``corpus``), each under token weights none /
sif-rank / sif / usif and the transforms none / whitening / whitening-128 / sif-pc (/ usif-pc for usif, Zipfian
whitening for the unweighted table), every transform fitted on the evaluation's own unlabelled text (STS: the
task's target sentences) as a folded transform would be.

Parts (each runnable alone; each replaces its own section of static.json, then the page is rendered again):

    make peer-m2v                                           # the peer's venv, .venv-m2v
    python benchmarks/results_static.py --part peer        # Model2Vec's distill (in .venv-m2v) -> ~/.cache
    python benchmarks/results_static.py --part distill     # whitevec distill, both methods -> ~/.cache
    python benchmarks/results_static.py --part quality     # STS, Chinese, Cranfield, sizes (deterministic)
    python benchmarks/results_static.py --part timing      # encode sentences/s, a static index's /search p50
    python benchmarks/results_static.py --part render      # the page from static.json only

The timing part is for a quiet machine (nothing else running); a small check of it:
    python benchmarks/results_static.py --part timing --texts 200 --reps 1 --requests 20 --out /tmp/static-check
Needs WHITEVEC_DATA (the shared data), all-mpnet-base-v2 and m3e-small fetched.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_serve import NOTES_MARK, kept_notes
from machine import facts_markdown, machine_facts, results_header
from results_sts import table as sts_table
from results_token_weights import Prefitted
from results_tune import _sample
from whitevec._io import atomic_path
from whitevec.datasets import StsTask, load_sts_task
from whitevec.datasets.retrieval import RetrievalDataset, load_retrieval_dataset
from whitevec.evaluation.retrieval import score_rankings
from whitevec.evaluation.sts import StsScore, evaluate_sts
from whitevec.linalg import unit_rows
from whitevec.paths import whitevec_cache_folder
from whitevec.transforms import Transform, make_transform

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "results"
STEM = "static"
ENGLISH = ["all-MiniLM-L6-v2", "all-mpnet-base-v2"]
CHINESE = ["m3e-small"]
MODELS = [*ENGLISH, *CHINESE]
STS_TASKS = ["stsb", "sts12", "sts13", "sts14", "sts15"]
ZH_TASKS = ["atec", "bq", "lcqmc", "pawsx", "stsb-zh"]
ZH_PAIRS = 2000  # valid/test pairs per Chinese task: results_tune.py's seeded samples (sts-zh.md)
# How each table was made: whitevec distill's method, and which corpus its counts (and `corpus` passes) read.
# "eval": the unlabelled text of the evaluations; "heldout": STS-B's train split, text no evaluation scores.
METHODS = ["tokens", "corpus", "corpus-heldout"]
CORPUS_OF = {"tokens": "eval", "corpus": "eval", "corpus-heldout": "heldout"}
WEIGHTS = ["none", "sif-rank", "sif", "usif"]
TRANSFORMS = ["none", "whitening", "whitening-128", "sif-pc"]
EXTRA_TRANSFORMS = {"usif": ["usif-pc"], "none": ["zipfian"]}  # the papers' own pairings
DIMS = 256  # Model2Vec's default pca_dims, for both
PEER_VENV = REPO / ".venv-m2v"
PEER_SCRIPT = REPO / "benchmarks" / "peers" / "model2vec" / "distill.py"
CONTEXTUAL = "contextual"
MODEL2VEC = "model2vec"


def cache_folder(kind: str) -> Path:
    """~/.cache/whitevec/peers (Model2Vec's folders) or ~/.cache/whitevec/static (whitevec's), not the repo."""
    return whitevec_cache_folder(kind, f"WHITEVEC_{kind.upper()}")


def peer_folder(model: str) -> Path:
    return cache_folder("peers") / f"m2v-{model}"


def static_folder(model: str, method: str, weights: str) -> Path:
    return cache_folder("static") / f"{model}-{method}-{weights}"


def system_label(method: str, weights: str) -> str:
    return f"{method}/{weights}"


# --- data ---------------------------------------------------------------------------------------------------
def chinese_task(name: str, evaluated: str = "test") -> StsTask:
    """A Chinese task as sts-zh.md scores it: seeded samples of ZH_PAIRS valid and test pairs, transforms fitted
    on the sentences of both ("target" here); ``evaluated``: the test sample, or the valid one (for choosing)."""
    task = load_sts_task(name)
    splits = {"valid": _sample(task.splits["valid"], ZH_PAIRS), "test": _sample(task.splits["test"], ZH_PAIRS)}
    suffix = "" if evaluated == "test" else f"-{evaluated}"
    return StsTask(f"{name}{suffix}", {evaluated: splits[evaluated]}, splits, source=task.source)


def choice_tasks(model: str) -> list[StsTask]:
    """What a configuration is chosen on, so that no test label chooses it: STS-B's dev split (English), the valid
    samples (Chinese); transforms fitted on the task's target sentences, as for the test scores."""
    if model in CHINESE:
        return [chinese_task(name, "valid") for name in ZH_TASKS]
    task = load_sts_task("stsb")
    return [StsTask("stsb-dev", {"dev": task.splits["dev"]}, task.splits, source=task.source)]


def corpus_texts(model: str, which: str = "eval") -> list[str]:
    """A distill corpus, "eval": every unlabelled text the model is evaluated on (English: the target sentences
    of the five STS tasks and the Cranfield documents; Chinese: the sentences of the sampled pairs), once each;
    "heldout": the sentences of STS-B's train split (English or Chinese), which no score here reads."""
    if which == "heldout":
        texts = load_sts_task("stsb-zh" if model in CHINESE else "stsb").sentences("train")
    elif model in CHINESE:
        tasks = [chinese_task(name) for name in ZH_TASKS]
        texts = [s for task in tasks for s in task.sentences("target")]
    else:
        texts = [s for name in STS_TASKS for s in load_sts_task(name).sentences("target")]
        texts += [" ".join(d.text.split()) for d in load_retrieval_dataset("cranfield").corpus]
    return [t for t in dict.fromkeys(texts) if t.strip()]


def corpus_file(model: str, which: str = "eval") -> Path:
    name = f"corpus{'' if which == 'eval' else '-' + which}-{'zh' if model in CHINESE else 'en'}.txt"
    path = cache_folder("static") / name
    text = "\n".join(corpus_texts(model, which)) + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
    return path


# --- encoders -----------------------------------------------------------------------------------------------
class Labelled:
    """An encoder under a results label: evaluate_sts reads ``model_name`` and ``pooling.name``; here the
    pooling's place holds the system (``contextual``, ``model2vec``, ``tokens/sif``...)."""

    def __init__(self, encoder: Any, model: str, system: str) -> None:
        self.encoder = encoder
        self.model_name = model
        self.pooling = SimpleNamespace(name=system)

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> Any:
        return self.encoder.encode(list(texts), show_progress=False)

    def describe(self) -> dict[str, Any]:
        return {**self.encoder.describe(), "model": self.model_name, "system": self.pooling.name}


def contextual_encoder(model: str) -> Any:
    """The model itself: whitevec's Encoder with the model's own pooling, the mean of the last layer (what
    sentence-transformers computes for these models; its Normalize changes no cosine). Vectors cached on disk."""
    from whitevec.encoder import Encoder

    return Encoder(model, pooling="last-avg")


def static_encoder(folder: Path) -> Any:
    from whitevec.static_encoder import StaticEncoder

    return StaticEncoder(folder)


def systems(model: str) -> list[tuple[str, Callable[[], Any], list[str]]]:
    """(label, encoder factory, transforms) for every configuration of ``model`` whose folders exist."""
    out: list[tuple[str, Callable[[], Any], list[str]]] = [
        (CONTEXTUAL, lambda: contextual_encoder(model), ["none"])
    ]
    if peer_folder(model).is_dir():
        out.append((MODEL2VEC, lambda: static_encoder(peer_folder(model)), TRANSFORMS))
    for method in METHODS:
        for weights in WEIGHTS:
            folder = static_folder(model, method, weights)
            if folder.is_dir():
                specs = TRANSFORMS + EXTRA_TRANSFORMS.get(weights, [])
                out.append((system_label(method, weights), lambda f=folder: static_encoder(f), specs))
    return out


# --- transforms ---------------------------------------------------------------------------------------------
def zipfian_static(encoder: Any, texts: Sequence[str]) -> Transform:
    """Zipfian whitening (Yokoi et al. 2024) of a static table: the rows of the token types in ``texts``,
    weighted by p(w) (counted on ``texts`` with the folder's own tokenizer, add-one smoothed as whitevec's
    TokenFrequencies), give the mean and covariance. A static type has one vector, so each type enters once with
    weight p(w): the paper's sums. Applied to the uniform token mean (whiten-then-pool = pool-then-whiten)."""
    from whitevec.token_weights import zipfian_whitening_fit

    ids, _ = encoder.token_ids(list(texts))
    counts = np.bincount(ids, minlength=encoder.table.embeddings.shape[0])
    present = np.flatnonzero(counts)
    probabilities = (counts + 1.0) / float(counts.sum() + counts.size)
    rows = np.asarray(encoder.table.embeddings[present], dtype=np.float32)
    return zipfian_whitening_fit([(rows, present)], probabilities, (counts > 0).astype(np.int64))


def transform_maker(encoder: Any, fit_texts: Sequence[str]) -> Callable[[str], Transform | None]:
    """make_transform, with ``zipfian`` fitted here on ``fit_texts`` (it needs the table, not sentence vectors)."""

    def make(spec: str) -> Transform | None:
        if spec == "zipfian":
            return Prefitted(zipfian_static(encoder, fit_texts))  # type: ignore[return-value]
        return make_transform(spec)

    return make


# --- quality ------------------------------------------------------------------------------------------------
def sts_scores(labelled: Labelled, tasks: Sequence[StsTask], specs: list[str]) -> list[StsScore]:
    """Each task with each transform fitted on its target sentences (one task at a time: Zipfian's fit needs
    the task's text)."""
    scores: list[StsScore] = []
    for task in tasks:
        make = transform_maker(labelled.encoder, task.sentences("target"))
        live = [s for s in specs if s != "zipfian" or hasattr(labelled.encoder, "token_ids")]
        scores += evaluate_sts(labelled, [task], live, "target", show_progress=False, make=make).scores
    return scores


def cranfield_scores(labelled: Labelled, dataset: RetrievalDataset, specs: list[str]) -> list[dict[str, Any]]:
    """nDCG@10 (and R@10, MRR@10, MAP) of an exact cosine search over the Cranfield documents, each transform
    fitted on the documents' vectors (as retrieval.md fits on the corpus); rows kept zero for empty documents."""
    docs = [d.text for d in dataset.corpus]
    queries = dataset.judged_queries()
    D = np.asarray(labelled.encode(docs), dtype=np.float32)
    Q = np.asarray(labelled.encode(list(queries.values())), dtype=np.float32)
    make = transform_maker(labelled.encoder, docs)
    rows = []
    for spec in specs:
        if spec == "zipfian" and not hasattr(labelled.encoder, "token_ids"):
            continue
        transform = make(spec)
        d, q = D, Q
        if transform is not None:
            transform.fit(D)
            d, q = np.asarray(transform.transform(D)), np.asarray(transform.transform(Q))
        similarity = unit_rows(q) @ unit_rows(d).T
        order = np.argsort(-similarity, axis=1, kind="stable")
        ids = [doc.id for doc in dataset.corpus]
        rankings = {qid: [ids[i] for i in row] for qid, row in zip(queries, order, strict=True)}
        quality = score_rankings(rankings, dataset.qrels, ks=(10, 100))
        rows.append(
            {
                "model": labelled.model_name,
                "system": labelled.pooling.name,
                "transform": spec,
                "ndcg_10": 100 * quality.ndcg_10,
                "recall_10": 100 * quality.recall_at[10],
                "mrr_10": 100 * quality.mrr_10,
                "map": 100 * quality.map,
                "n_queries": quality.n_queries,
            }
        )
    return rows


def folder_bytes(folder: Path) -> dict[str, int]:
    files = [f for f in folder.iterdir() if f.is_file()]
    return {
        "table_bytes": (folder / "model.safetensors").stat().st_size,
        "folder_bytes": sum(f.stat().st_size for f in files if f.name != "peer-distill.json"),
    }


def run_quality(models: list[str], log: Callable[[str], None]) -> dict[str, Any]:
    """Every system of every model on its tasks; sizes of the folders; the choice on STS-B dev."""
    started = time.perf_counter()
    sts: list[StsScore] = []
    choice: list[StsScore] = []
    cranfield: list[dict[str, Any]] = []
    sizes: dict[str, dict[str, Any]] = {}
    english = [load_sts_task(name) for name in STS_TASKS] if set(models) & set(ENGLISH) else []
    dataset = load_retrieval_dataset("cranfield") if english else None
    for model in models:
        tasks = [chinese_task(n) for n in ZH_TASKS] if model in CHINESE else english
        for system, factory, specs in systems(model):
            t0 = time.perf_counter()
            encoder = factory()
            labelled = Labelled(encoder, model, system)
            sts += sts_scores(labelled, tasks, specs)
            if system != CONTEXTUAL:
                choice += sts_scores(labelled, choice_tasks(model), specs)
            if model in ENGLISH:
                assert dataset is not None
                cranfield += cranfield_scores(labelled, dataset, specs)
            if system != CONTEXTUAL:
                sizes[f"{model} {system}"] = folder_bytes(Path(encoder.model_path))
            log(f"{model} {system}: {time.perf_counter() - t0:.0f} s")
    return {
        "sts": [asdict(s) for s in sts],
        "choice": [asdict(s) for s in choice],
        "cranfield": cranfield,
        "sizes": sizes,
        "equality": model2vec_equality(models),
        "seconds": round(time.perf_counter() - started, 1),
    }


def model2vec_equality(models: list[str]) -> dict[str, float]:
    """Largest |difference| between whitevec's StaticEncoder and Model2Vec's StaticModel.encode on each peer
    folder, over the STS-B target sentences (the same vectors, or the comparison above means nothing)."""
    from model2vec import StaticModel

    texts = load_sts_task("stsb").sentences("target")
    out = {}
    for model in models:
        folder = peer_folder(model)
        if folder.is_dir():
            theirs = StaticModel.from_pretrained(str(folder)).encode(texts)
            ours = static_encoder(folder).encode(texts, show_progress=False)
            out[model] = float(np.abs(np.asarray(theirs, dtype=np.float32) - ours).max())
    return out


# --- distilling -----------------------------------------------------------------------------------------------
def run_peer(models: list[str], redo: bool, log: Callable[[str], None]) -> dict[str, Any]:
    """Model2Vec's distill of each model in the peer venv (benchmarks/peers/model2vec/distill.py); a folder
    already there is kept (with the record of its own run) unless ``redo``."""
    from whitevec.models import resolve_model

    python = PEER_VENV / "bin" / "python"
    if not python.is_file():
        raise SystemExit(f"no peer venv at {PEER_VENV}: run `make peer-m2v` first")
    records = {}
    for model in models:
        out = peer_folder(model)
        record = out / "peer-distill.json"
        if redo or not record.is_file():
            out.parent.mkdir(parents=True, exist_ok=True)
            command = [str(python), str(PEER_SCRIPT), model, str(resolve_model(model)), str(out)]
            env = {**os.environ, "TQDM_DISABLE": "1"}
            subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
        records[model] = json.loads(record.read_text())
        log(f"{model}: Model2Vec distill {records[model]['distill_seconds']} s")
    return records


@contextlib.contextmanager
def model_passes_once() -> Iterator[SimpleNamespace]:
    """Inside, whitevec.distill computes the raw token table (the model passes: every token alone, or the
    corpus) once per ``passes.key`` (set by the caller: model and method) and hands a copy to the later distills
    under the same key; every other step (PCA, weights, counts, fold, the folder) runs in full each time.
    ``passes.seconds[key]``: the model passes' seconds."""
    import whitevec.distill as module
    from whitevec.token_table import TokenTable

    passes = SimpleNamespace(key=None, seconds={})
    saved = {name: getattr(module, name) for name in ("single_token_table", "corpus_table")}
    done: dict[Any, TokenTable] = {}

    def reusing(name: str) -> Callable[..., TokenTable]:
        def reuse(*args: Any) -> TokenTable:
            key = passes.key
            if key not in done:
                started = time.perf_counter()
                table = saved[name](*args)
                done.clear()  # one table at a time
                done[key] = TokenTable(np.array(table.vectors), np.array(table.kept), table.n_seen)
                passes.seconds[key] = round(time.perf_counter() - started, 1)
            raw = done[key]
            return TokenTable(raw.vectors.copy(), raw.kept.copy(), raw.n_seen)

        return reuse

    module.single_token_table = reusing("single_token_table")  # type: ignore[assignment]
    module.corpus_table = reusing("corpus_table")  # type: ignore[assignment]
    try:
        yield passes
    finally:
        for name, function in saved.items():
            setattr(module, name, function)


def check_fold(model: str, corpus: Path) -> dict[str, Any]:
    """The deployable folder (``tokens``, sif-rank, whitening folded, fitted on every corpus line, normalised;
    also the timing part's whitevec folder) against what the quality part does instead: whitening fitted on the
    unnormalised tokens/sif-rank folder's vectors of the corpus and applied, then normalised (STS-B sentences)."""
    from whitevec.datasets import read_texts_file
    from whitevec.distill import distill

    started = time.perf_counter()
    distill(model, deploy_folder(model), method="tokens", corpus=corpus, sample=None, dims=DIMS,
            token_weights="sif-rank", transform="whitening", overwrite=True, show_progress=False)  # fmt: skip
    seconds = time.perf_counter() - started
    plain = static_encoder(static_folder(model, "tokens", "sif-rank"))
    whitening = make_transform("whitening")
    assert whitening is not None
    whitening.fit(plain.encode(read_texts_file(corpus), show_progress=False))
    texts = load_sts_task("stsb").sentences("target")
    expected = unit_rows(np.asarray(whitening.transform(plain.encode(texts, show_progress=False))))
    folded = static_encoder(deploy_folder(model)).encode(texts, show_progress=False)
    return {
        "folder": deploy_folder(model).name,
        "folded_vs_applied_max_abs_diff": float(np.abs(folded - expected).max()),
        "distill_seconds_without_model_passes": round(seconds, 1),
    }


def deploy_folder(model: str) -> Path:
    return cache_folder("static") / f"{model}-deploy"


def run_distill(models: list[str], methods: list[str], log: Callable[[str], None]) -> dict[str, Any]:
    """whitevec distill of each model by each method under each token weighting, unnormalised (so that a
    transform fitted on its sentence vectors is the one a fold would fit); the model passes run once per model
    and method (``model_passes_once``)."""
    from whitevec.distill import distill

    records: dict[str, Any] = {}
    with model_passes_once() as passes:
        for model in models:
            for method, weights in [(m, w) for m in methods for w in WEIGHTS]:
                corpus = corpus_file(model, CORPUS_OF[method])
                passes.key = (model, method)
                load_before = os.getloadavg()
                result = distill(model, static_folder(model, method, weights), method=method.split("-")[0],
                                 corpus=corpus, dims=DIMS, token_weights=weights, normalize=False,
                                 overwrite=True, show_progress=False)  # fmt: skip
                records[f"{model} {method}/{weights}"] = {
                    "seconds": round(result.seconds, 1),
                    "load_average_before": [round(x, 2) for x in load_before],
                    "vocab": result.vocab_size,
                    "dim": result.dim,
                    "n_texts": result.n_texts,
                    "n_seen": result.n_seen,
                    "corpus": CORPUS_OF[method],
                    "provenance": result.provenance,
                }
                log(f"{model} {method}/{weights}: {result.seconds:.0f} s")
            for method in methods:
                records[f"{model} {method}/none"]["model_pass_seconds"] = passes.seconds[(model, method)]
            if model == ENGLISH[0] and "tokens" in methods:
                records[f"{model} fold check"] = check_fold(model, corpus_file(model))
    return records


# --- timing (a quiet machine) ---------------------------------------------------------------------------------
TIMED_MODEL = ENGLISH[0]
STATIC_SYSTEMS = {
    "whitevec StaticEncoder, Model2Vec's folder": ("whitevec", "peer"),
    "Model2Vec StaticModel.encode, its folder": ("model2vec", "peer"),
    "whitevec StaticEncoder, whitevec's folder": ("whitevec", "deploy"),
}


def worker_static(system: str, folder: Path, limit: int, reps: int) -> dict[str, Any]:
    """Encode the first ``limit`` STS-B sentences ``reps`` times with one static encoder; sentences/s of the
    median pass (one warm-up pass first: the tokenizer's first calls allocate)."""
    from bench_encode import texts_for

    texts = texts_for(limit)
    if system == "model2vec":
        from model2vec import StaticModel

        model = StaticModel.from_pretrained(str(folder))

        def run() -> Any:
            return model.encode(texts, show_progress_bar=False)
    else:
        encoder = static_encoder(folder)

        def run() -> Any:
            return encoder.encode(texts, show_progress=False)

    run()
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - started)
    return {"system": system, "folder": folder.name, "n_texts": len(texts), "seconds": seconds,
            "sentences_per_s": len(texts) / float(np.median(seconds))}  # fmt: skip


def time_encoding(limit: int, reps: int, static_reps: int, log: Callable[[str], None]) -> dict[str, Any]:
    """The contextual MiniLM (bench_encode.py's whitevec float32 worker: batch 64, 256 tokens, cache off) and the
    static encoders on the same sentences, each in a fresh process with 2 threads, one after another."""
    from bench_common import run_worker

    contextual = run_worker(
        REPO / "benchmarks" / "bench_encode.py",
        ["encode", "--system", "whitevec", "--model", TIMED_MODEL, "--limit", str(limit), "--reps", str(reps)],
    )
    log(f"contextual: {contextual}")
    runs: dict[str, Any] = {"whitevec Encoder, MiniLM float32 (contextual)": contextual}
    folders = {"peer": peer_folder(TIMED_MODEL), "deploy": deploy_folder(TIMED_MODEL)}
    for label, (system, which) in STATIC_SYSTEMS.items():
        worker_args = ["--system", system, "--folder", str(folders[which]), "--texts", str(limit)]
        runs[label] = run_worker(Path(__file__), ["encode", *worker_args, "--reps", str(static_reps)])
        log(f"{label}: {runs[label]}")
    return runs


def time_search(folder: Path, requests: int, work: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """A static Cranfield index (flat, cosine) served by `whitevec serve`: /search p50 for one closed-loop client
    (benchmarks/loadgen.py, its own process), and bench_serve.py's in-process ceiling beside it."""
    from bench_common import run_worker
    from bench_serve import cranfield_queries, load_row, whitevec_server
    from whitevec.index import Retriever

    index = work / "cranfield-static"
    if not (index / "manifest.json").is_file():
        corpus = load_retrieval_dataset("cranfield").corpus
        Retriever.build(corpus, index, encoder=static_encoder(folder), show_progress=False)
    queries_file = work / "queries.json"
    queries_file.write_text(json.dumps(cranfield_queries(None)))
    ceiling_args = ["ceiling", "--index", str(index), "--queries-file", str(queries_file)]
    ceiling = run_worker(REPO / "benchmarks" / "bench_serve.py", [*ceiling_args, "--batch", "64", "--k", "10"])
    log(f"ceiling: {ceiling}")
    server = whitevec_server(index, {}, 2, "static")
    try:
        row = load_row(server, "/search", "search", queries_file, 1, requests, 10)
    finally:
        server.stop()
    log(f"/search, 1 client: p50 {row['p50_ms']:.2f} ms")
    return {"folder": folder.name, "requests": requests, "one_client": row, "ceiling": ceiling}


def run_timing(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    load_before = os.getloadavg()
    started = time.perf_counter()
    encode = time_encoding(args.texts, args.reps, args.static_reps, log)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    search = time_search(deploy_folder(TIMED_MODEL), args.requests, work, log)
    return {
        "machine": machine_facts("model2vec", "tokenizers", "scipy"),
        "command": "python benchmarks/results_static.py " + " ".join(sys.argv[1:]),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "seconds": round(time.perf_counter() - started, 1),
        "n_texts": args.texts,
        "reps": args.reps,
        "static_reps": args.static_reps,
        "encode": encode,
        "search": search,
    }


# --- the page ---------------------------------------------------------------------------------------------------
def averages(
    rows: list[dict[str, Any]], tasks: list[str], key: str = "wmean"
) -> dict[tuple[str, str, str], float]:
    """(model, system, transform) -> the plain mean over ``tasks`` of each task's ``key`` (complete rows only)."""
    per: dict[tuple[str, str, str], dict[str, float]] = {}
    for row in rows:
        per.setdefault((row["model"], row["pooling"], row["transform"]), {})[row["task"]] = row[key]
    return {k: sum(v[t] for t in tasks) / len(tasks) for k, v in per.items() if all(t in v for t in tasks)}


def task_scores(rows: list[dict[str, Any]], model: str, system: str, transform: str) -> dict[str, float]:
    return {
        r["task"]: r["wmean"]
        for r in rows
        if (r["model"], r["pooling"], r["transform"]) == (model, system, transform)
    }


def is_whitevec(system: str) -> bool:
    return system.split("/")[0] in METHODS


def reads_eval_text(system: str) -> bool:
    """Whether a whitevec table read the evaluations' own text: the ``corpus`` passes over it, or token counts
    made on it (``sif``, ``usif``). Transforms read it in every row (fitted on the target sentences)."""
    method, weights = system.split("/")
    return CORPUS_OF[method] == "eval" and (method != "tokens" or weights in ("sif", "usif"))


POOLS = {"all": "every whitevec row", "blind": "the tables that read no evaluation text"}


def chosen(quality: dict[str, Any], model: str, pool: str = "all") -> tuple[str, str] | None:
    """The whitevec configuration with the best mean score on the choice tasks (STS-B dev; Chinese valid), among
    every whitevec row (``pool="all"``) or those whose table read no evaluation text (``"blind"``)."""
    names = sorted({r["task"] for r in quality["choice"] if r["model"] == model})
    means = averages([r for r in quality["choice"] if r["model"] == model], names)
    mine = {k: v for k, v in means.items() if is_whitevec(k[1]) and (pool == "all" or not reads_eval_text(k[1]))}
    if not mine:
        return None
    best = max(mine, key=lambda k: mine[k])
    return best[1], best[2]


def cranfield_of(quality: dict[str, Any], model: str, system: str, transform: str) -> float | None:
    for row in quality["cranfield"]:
        if (row["model"], row["system"], row["transform"]) == (model, system, transform):
            return float(row["ndcg_10"])
    return None


def fmt(value: float | None, sign: bool = False) -> str:
    return "—" if value is None else (f"{value:+.2f}" if sign else f"{value:.2f}")


def summary_rows(quality: dict[str, Any], model: str) -> list[tuple[str, str, str]]:
    """(label, system, transform): the model, the peer raw, the peer's best transform, whitevec's two choices and
    whitevec's best in hindsight (by the test average: not a fair choice, shown for the gap)."""
    tasks = ZH_TASKS if model in CHINESE else STS_TASKS
    means = averages([r for r in quality["sts"] if r["model"] == model], tasks)
    rows = [("the model itself (contextual)", CONTEXTUAL, "none"), ("Model2Vec's distill", MODEL2VEC, "none")]
    peer = {k: v for k, v in means.items() if k[1] == MODEL2VEC and k[2] != "none"}
    if peer:
        best = max(peer, key=lambda k: peer[k])
        rows.append((f"Model2Vec's distill + {best[2]} (best in hindsight)", MODEL2VEC, best[2]))
    on = "valid" if model in CHINESE else "STS-B dev"
    for pool, what in (("all", "all rows"), ("blind", "no evaluation text in the table")):
        pick = chosen(quality, model, pool)
        if pick is not None and all(pick != row[1:] for row in rows):
            rows.append((f"whitevec {pick[0]} + {pick[1]} (chosen on {on}, {what})", *pick))
    mine = {k: v for k, v in means.items() if is_whitevec(k[1])}
    if mine:
        best = max(mine, key=lambda k: mine[k])
        rows.append((f"whitevec {best[1]} + {best[2]} (best in hindsight)", best[1], best[2]))
    return rows


def summary_table(quality: dict[str, Any], model: str) -> list[str]:
    tasks = ZH_TASKS if model in CHINESE else STS_TASKS
    rows = [r for r in quality["sts"] if r["model"] == model]
    wmean, every = averages(rows, tasks), averages(rows, tasks, "all")
    head = ["configuration", *tasks, "avg wmean", "avg all"] + (["Cranfield nDCG@10"] if model in ENGLISH else [])
    head.append("table bytes")
    lines = ["| " + " | ".join(head) + " |", "|---" + "|---:" * (len(head) - 1) + "|"]
    for label, system, transform in summary_rows(quality, model):
        scores = task_scores(rows, model, system, transform)
        cells = [label, *(fmt(scores.get(t)) for t in tasks)]
        cells += [fmt(wmean.get((model, system, transform))), fmt(every.get((model, system, transform)))]
        if model in ENGLISH:
            cells.append(fmt(cranfield_of(quality, model, system, transform)))
        size = quality["sizes"].get(f"{model} {system}")
        cells.append("—" if size is None else f"{size['table_bytes']:,}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def target_checks(quality: dict[str, Any], model: str, pick: tuple[str, str]) -> list[tuple[str, bool]]:
    """(measured, met) of the three quality targets for one configuration of ``model``."""
    rows = [r for r in quality["sts"] if r["model"] == model]
    means = averages(rows, STS_TASKS)
    peer, mine = means[(model, MODEL2VEC, "none")], means[(model, *pick)]
    theirs, ours = task_scores(rows, model, MODEL2VEC, "none"), task_scores(rows, model, *pick)
    gaps = {t: ours[t] - theirs[t] for t in STS_TASKS}
    worst = min(gaps, key=lambda t: gaps[t])
    crank, cpeer = cranfield_of(quality, model, *pick), cranfield_of(quality, model, MODEL2VEC, "none")
    return [
        (f"{mine:.2f} against {peer:.2f} ({mine - peer:+.2f})", mine >= peer + 2.0),
        (f"worst: {worst} {gaps[worst]:+.2f}", gaps[worst] >= -0.5),
        (f"{fmt(crank)} against {fmt(cpeer)}", crank is not None and cpeer is not None and crank >= cpeer),
    ]


def target_lines(quality: dict[str, Any], timing: dict[str, Any] | None, model: str = ENGLISH[0]) -> list[str]:
    """The issue's targets for MiniLM: the quality ones for whitevec's configuration chosen among every row and
    among the tables that read no evaluation text; then the speed ones."""
    picks = {pool: chosen(quality, model, pool) for pool in POOLS}
    if picks["all"] is None or (model, MODEL2VEC, "none") not in averages(quality["sts"], STS_TASKS):
        return ["(the quality part has not run for both whitevec's distills and Model2Vec's)"]
    names = [
        "5-task wmean average >= Model2Vec's + 2.0",
        "no task more than 0.5 below Model2Vec's",
        "Cranfield nDCG@10 >= Model2Vec's (25.68 in the issue)",
    ]
    checks = {pool: target_checks(quality, model, pick) for pool, pick in picks.items() if pick is not None}
    head = ["target", *(f"{POOLS[pool]}: {' + '.join(picks[pool] or ())}" for pool in checks)]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for number, name in enumerate(names):
        cells = [
            f"{checks[pool][number][0]} ({'met' if checks[pool][number][1] else 'not met'})" for pool in checks
        ]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    return [*lines, "", "| target | measured | met |", "|---|---|---|", *timing_target_lines(timing)]


def timing_target_lines(timing: dict[str, Any] | None) -> list[str]:
    if timing is None:
        return [
            "| encode >= 40x MiniLM float32 | pending the lead's quiet run | — |",
            "| encode >= 1.0x Model2Vec's StaticModel.encode | pending the lead's quiet run | — |",
            "| static index /search p50 < 5 ms, one client | pending the lead's quiet run | — |",
        ]
    rate = {label: run.get("sentences_per_s") for label, run in timing["encode"].items()}
    base = rate["whitevec Encoder, MiniLM float32 (contextual)"]
    peer = rate["Model2Vec StaticModel.encode, its folder"]
    mine = rate["whitevec StaticEncoder, whitevec's folder"]
    same = rate["whitevec StaticEncoder, Model2Vec's folder"]
    p50 = timing["search"]["one_client"]["p50_ms"]
    lines = []
    if None not in (base, peer, mine, same):
        lines += [
            f"| encode >= 40x MiniLM float32 | {mine / base:.1f}x ({mine:,.0f} against {base:,.0f} sentences/s) | "
            f"{'yes' if mine >= 40 * base else 'no'} |",
            f"| encode >= 1.0x Model2Vec's StaticModel.encode | {same / peer:.2f}x on its own folder, "
            f"{mine / peer:.2f}x on whitevec's | {'yes' if min(same, mine) >= peer else 'no'} |",
        ]
    lines.append(f"| static index /search p50 < 5 ms, one client | {p50:.2f} ms | {'yes' if p50 < 5 else 'no'} |")
    return lines


def method_lines(quality: dict[str, Any]) -> list[str]:
    """``corpus`` (and ``corpus-heldout``) against ``tokens`` on the same weights and transform: the difference
    of the task average (and of Cranfield nDCG@10), summarised per model."""
    lines = ["| model | method | pairs | minus tokens, mean | min | max | wins | Cranfield, mean difference |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for model, method in [(m, v) for m in MODELS for v in METHODS[1:]]:
        tasks = ZH_TASKS if model in CHINESE else STS_TASKS
        means = averages([r for r in quality["sts"] if r["model"] == model], tasks)
        gaps, cran = [], []
        for (_, system, transform), value in means.items():
            if system.split("/")[0] != method or (model, "tokens/" + system.split("/")[1], transform) not in means:
                continue
            base = "tokens/" + system.split("/")[1]
            gaps.append(value - means[(model, base, transform)])
            a, b = cranfield_of(quality, model, system, transform), cranfield_of(quality, model, base, transform)
            if a is not None and b is not None:
                cran.append(a - b)
        if gaps:
            lines.append(
                f"| {model} | {method} | {len(gaps)} | {np.mean(gaps):+.2f} | {min(gaps):+.2f} | "
                f"{max(gaps):+.2f} | {sum(g > 0 for g in gaps)} of {len(gaps)} | "
                f"{fmt(float(np.mean(cran)) if cran else None, True)} |"
            )
    return lines


def cranfield_table(quality: dict[str, Any]) -> list[str]:
    lines = ["| model | system | transform | nDCG@10 | R@10 | MRR@10 | MAP |", "|---|---|---|---:|---:|---:|---:|"]
    for r in quality["cranfield"]:
        cells = [r["model"], r["system"], r["transform"], *(f"{r[k]:.2f}" for k in ("ndcg_10", "recall_10",
                 "mrr_10", "map"))]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def distill_lines(data: dict[str, Any]) -> list[str]:
    """Distill seconds (rough: a busy shared machine, load averages given) and table sizes."""
    lines = ["| model | distiller | seconds | load average before | vocab x dim | table bytes |",
             "|---|---|---:|---|---|---:|"]  # fmt: skip
    sizes = data.get("quality", {}).get("sizes", {})
    for model, record in data.get("peer", {}).items():
        size = sizes.get(f"{model} {MODEL2VEC}", {}).get("table_bytes")
        load = " / ".join(f"{x:.1f}" for x in record["load_average_before"])
        lines.append(f"| {model} | Model2Vec `{record['call']}` | {record['distill_seconds']:.0f} | {load} | "
                     f"{record['vocab']} x {record['dim']} {record['dtype']} | {fmt_int(size)} |")  # fmt: skip
    rest: list[float] = []
    for key, record in data.get("distill", {}).items():
        if "model_pass_seconds" not in record:
            rest += [record["seconds"]] if "seconds" in record else []
            continue
        model, system = key.split(" ")
        size = sizes.get(f"{model} {system}", {}).get("table_bytes")
        load = " / ".join(f"{x:.1f}" for x in record["load_average_before"])
        lines.append(f"| {model} | `whitevec distill --method {system.split('/')[0]} --token-weights none` | "
                     f"{record['seconds']:.0f} (model passes {record['model_pass_seconds']:.0f}) | {load} | "
                     f"{record['vocab']} x {record['dim']} float32 | {fmt_int(size)} |")  # fmt: skip
    if rest:
        lines += ["", f"The other token weightings of each model and method reuse that method's model passes "
                      f"(benchmarks/results_static.py's `model_passes_once`): {min(rest):.0f} to "
                      f"{max(rest):.0f} s each for the rest of distill (PCA, counts, weights, the "
                      "folder)."]  # fmt: skip
    return lines


def fmt_int(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def timing_lines(timing: dict[str, Any] | None) -> list[str]:
    if timing is None:
        return [
            "**Pending the lead's quiet run** (`python benchmarks/results_static.py --part timing`); this machine",
            "is shared, so no speed is quoted here.",
        ]
    lines = [
        f"{facts_markdown(timing['machine'])} Load average before "
        f"{' / '.join(f'{x:.2f}' for x in timing['load_average_before'])}. `{timing['command']}`.",
        "",
        f"Encoding the first {timing['n_texts']:,} STS-B sentences (all splits, first seen first), each system in "
        f"a fresh process with 2 threads; the median of {timing['reps']} passes (contextual) or "
        f"{timing['static_reps']} (static), after a warm-up.",
        "",
        "| system | sentences/s | median s per pass |",
        "|---|---:|---:|",
    ]
    for label, run in timing["encode"].items():
        if "error" in run:
            lines.append(f"| {label} | failed: {run['error']} | |")
        else:
            lines.append(f"| {label} | {run['sentences_per_s']:,.0f} | {float(np.median(run['seconds'])):.4f} |")
    search = timing["search"]
    row, ceiling = search["one_client"], search["ceiling"]
    lines += [
        "",
        f"A static index of the Cranfield documents (folder `{search['folder']}`, flat, cosine) under `whitevec "
        f"serve`, one closed-loop client (benchmarks/loadgen.py, its own process), {row['requests']} requests: "
        f"/search p50 **{row['p50_ms']:.2f} ms**, p99 {row['p99_ms']:.2f} ms, {row['qps']:.0f} queries/s. "
        f"In-process ceiling (bench_serve.py's worker): one query at a time p50 "
        f"{ceiling.get('search_single_p50_ms', 0):.3f} ms; batches of 64 "
        f"{ceiling.get('search_batched_qps', 0):,.0f} queries/s.",
    ]
    return lines


def check_lines(data: dict[str, Any]) -> list[str]:
    quality = data.get("quality", {})
    lines = []
    for model, gap in quality.get("equality", {}).items():
        lines.append(f"- whitevec's StaticEncoder against Model2Vec's StaticModel.encode on the peer folder of "
                     f"{model}, STS-B sentences: largest difference {gap:.1e} (Model2Vec returns its "
                     "table's float16, whitevec float32; float16 rounds a unit vector's entries at about "
                     "5e-4).")  # fmt: skip
    for key, record in data.get("distill", {}).items():
        if key.endswith(" fold check"):
            lines.append(
                f"- {key.split(' ')[0]}: `distill --token-weights sif-rank --transform whitening` (whitening "
                "folded into the table, fitted on every corpus line, normalised) against whitening fitted on the "
                "unnormalised tokens/sif-rank folder's corpus vectors and applied, then normalised, on the STS-B "
                f"sentences: largest difference {record['folded_vs_applied_max_abs_diff']:.1e}. So a row's "
                "transform, fitted and applied here, is the folder that folds it."
            )
    return lines


def corpus_lines(data: dict[str, Any], name: str) -> str:
    """How many lines the corpus file ``name`` had, from a distill record's provenance ("?" if none used it)."""
    for record in data.get("distill", {}).values():
        corpus = (record.get("provenance") or {}).get("corpus") or {}
        if corpus.get("file") == name:
            return f"{corpus['lines']:,}"
    return "?"


def markdown(data: dict[str, Any], notes: str) -> str:
    quality, timing = data.get("quality"), data.get("timing")
    machines = [part["machine"] for part in (data.get("distill_run"), quality, timing) if part]
    command = "`python benchmarks/results_static.py --part peer|distill|quality|timing` (the parts below)"
    lines = [
        "# Static encoders: `whitevec distill` against Model2Vec's distill and the models themselves",
        "",
        results_header(command, *machines) if machines else f"Command: {command}",
        "",
        "A static encoder keeps one vector per vocabulary token; a sentence is the mean of its tokens' rows, so",
        "encoding is a tokenizer call and one sparse product. Compared, for all-MiniLM-L6-v2, all-mpnet-base-v2",
        "(STS-B test, STS12-15, Cranfield) and m3e-small (ATEC, BQ, LCQMC, PAWS-X, Chinese STS-B):",
        "",
        "- `contextual`: the model itself, whitevec's `Encoder` with the model's own pooling (the mean of the",
        "  last layer), raw vectors.",
        "- `model2vec`: Model2Vec 0.10's own `distill` of the model with its defaults (`pca_dims=256`, SIF",
        "  weights from the token rank with a = 1e-4, float16), run in its own venv (`make peer-m2v`), read with",
        "  whitevec's `StaticEncoder` (the same vectors as `StaticModel.encode`: see Checks).",
        "- `tokens/W`, `corpus/W`: `whitevec distill --method tokens|corpus --dims 256 --token-weights W`:",
        "  each token alone through the model (Model2Vec's method), or each token's mean contextual vector over",
        "  a corpus (10,000 lines sampled with seed 0; tokens never seen fall back to the single-token vector).",
        "  W: `none`, `sif-rank` (Model2Vec's rank weights), `sif` (a = 1e-3) or `usif` from token counts of the",
        "  corpus. The corpus is the unlabelled text the model is evaluated on: English, the target sentences of",
        f"  the five STS tasks and the Cranfield documents ({corpus_lines(data, 'corpus-en.txt')} lines);",
        f"  Chinese, the sentences of the sampled pairs ({corpus_lines(data, 'corpus-zh.txt')} lines). No label",
        "  is read, but the table has seen the evaluated sentences.",
        "- `corpus-heldout/W`: the same with a corpus no score reads, the sentences of STS-B's train split",
        f"  (English {corpus_lines(data, 'corpus-heldout-en.txt')} lines; Chinese STS-B's, "
        f"{corpus_lines(data, 'corpus-heldout-zh.txt')} lines), for counts and corpus passes alike.",
        "- Transforms (the second column of each row): `none`, `whitening`, `whitening-128`, `sif-pc` (the first",
        "  uncentred principal component removed), `usif-pc` (uSIF's soft removal of 5, with usif weights), and",
        "  `zipfian` (Zipfian whitening of the table's rows, p(w)-weighted moments, with the unweighted table).",
        "  Each is fitted on the evaluation's own unlabelled text: for STS the task's target sentences (every",
        "  sentence of the task, all splits: the protocol of [sts.md](sts.md) and of the issue's table), for",
        "  Cranfield the documents, for the Chinese tasks the sentences of the sampled valid and test pairs.",
        "  Every one is affine, so it folds into the table exactly: `distill --transform` does so for all but",
        "  `zipfian` (whose p(w)-weighted token moments distill does not fit; computed here), and the Checks",
        "  show a folded folder giving the vectors of the transform applied as here.",
        "",
        "Spearman x 100 of the cosine against the gold scores; `wmean` weights each subset's correlation by its",
        "pairs, `all` pools the subsets into one correlation (the issue's table quoted `all` for STS12-15); the",
        "averages are plain means over the tasks. The Chinese tasks are the seeded samples of 2,000 valid and",
        "2,000 test pairs of [sts-zh.md](sts-zh.md), scored on test. Cranfield: exact cosine search over the",
        "1,400 documents, nDCG@10 with graded gains as in [retrieval.md](retrieval.md).",
        "",
    ]
    if quality is None:
        lines += ["The quality part has not run yet.", ""]
    else:
        lines += quality_section(data, quality)
    lines += ["## Speed", "", *timing_lines(timing), "", "## Checks", "", *check_lines(data), ""]
    lines += [NOTES_MARK, "", notes.strip(), ""]
    return "\n".join(lines)


def quality_section(data: dict[str, Any], quality: dict[str, Any]) -> list[str]:
    rows = [SimpleNamespace(**r) for r in quality["sts"]]
    english = [r for r in rows if r.model in ENGLISH]
    chinese = [r for r in rows if r.model in CHINESE]
    lines = [
        f"Quality part: {facts_markdown(quality['machine'])} `{quality['command']}`, {quality['seconds']:.0f} s.",
        "",
        "## The issue's targets (all-MiniLM-L6-v2)",
        "",
        "whitevec's configuration is the one with the best STS-B **dev** score (transform fitted on the target",
        "sentences, as for the test scores), so no test label chooses it; the same configuration is then scored",
        "on Cranfield. Chosen twice: among every whitevec row, and among the tables that read none of the",
        "evaluations' text (`tokens` with no weights or sif-rank, and `corpus-heldout`: a corpus of STS-B's train",
        "sentences, which no score reads), the closer view of text whitevec has not seen. Model2Vec's row is",
        "its distill as it comes (raw).",
        "",
        *target_lines(quality, data.get("timing")),
        "",
        "## Each model: itself, Model2Vec's distill, whitevec's",
        "",
    ]
    for model in MODELS:
        if any(r.model == model for r in rows):
            lines += [f"### {model}", "", *summary_table(quality, model), ""]
    lines += [
        "## `corpus` against `tokens`",
        "",
        "Each pair: the same token weights and transform, the task average of `corpus` minus that of `tokens`.",
        "",
        *method_lines(quality),
        "",
        "## Every configuration",
        "",
        "STS (English models):",
        "",
        *sts_table(english, STS_TASKS),  # type: ignore[arg-type]
        "",
    ]
    if chinese:
        lines += ["Chinese tasks (m3e-small):", "", *sts_table(chinese, ZH_TASKS), ""]  # type: ignore[arg-type]
    lines += ["Cranfield:", "", *cranfield_table(quality), "", "## Distilling: time and size", ""]
    lines += [
        "Seconds are rough: a shared 2-core machine with other jobs running (the load averages say how busy).",
        "",
        *distill_lines(data),
        "",
    ]
    return lines


# --- the command ------------------------------------------------------------------------------------------------
def merge_quality(old: dict[str, Any] | None, new: dict[str, Any], models: list[str]) -> dict[str, Any]:
    """The new quality figures, with the rows of models this run did not measure kept from ``old``."""
    if old is None:
        return new
    out = dict(new)
    for key in ("sts", "choice", "cranfield"):
        out[key] = [r for r in old.get(key, []) if r["model"] not in models] + new[key]
    for key in ("sizes", "equality"):
        kept = {k: v for k, v in old.get(key, {}).items() if k.split(" ")[0] not in models}
        out[key] = {**kept, **new[key]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["peer", "distill", "quality", "timing", "render"], default="render")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--methods", default=",".join(METHODS), help="distill: the tables to make")
    parser.add_argument("--redo", action="store_true", help="peer: distil again over folders already there")
    parser.add_argument("--texts", type=int, default=4000, help="timing: STS-B sentences encoded")
    parser.add_argument("--reps", type=int, default=5, help="timing: passes of the contextual model")
    parser.add_argument("--static-reps", type=int, default=30, help="timing: passes of each static encoder")
    parser.add_argument("--requests", type=int, default=600, help="timing: /search requests of the one client")
    parser.add_argument("--work", default="/tmp/whitevec-bench/static", help="timing: the static index's folder")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--worker", choices=["encode"], help=argparse.SUPPRESS)
    parser.add_argument("--system", help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "encode":
        from bench_common import emit

        emit(worker_static(args.system, args.folder, args.texts, args.reps))
        return
    models = [m for m in args.models.split(",") if m]

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    json_path = args.out / f"{STEM}.json"

    def saved() -> dict[str, Any]:
        # Read again just before writing: another part may have run meanwhile; each part writes only its own.
        return json.loads(json_path.read_text()) if json_path.is_file() else {}

    started = time.perf_counter()
    run = {"command": "python benchmarks/results_static.py " + " ".join(sys.argv[1:])}
    if args.part == "peer":
        records = run_peer(models, args.redo, log)
        data = saved()
        data["peer"] = {**data.get("peer", {}), **records}
    elif args.part == "distill":
        records = run_distill(models, [m for m in args.methods.split(",") if m], log)
        data = saved()
        data["distill"] = {**data.get("distill", {}), **records}
        data["distill_run"] = {**run, "machine": machine_facts(), "seconds": round(time.perf_counter() - started)}
    elif args.part == "quality":
        new = {**run_quality(models, log), **run, "machine": machine_facts("model2vec", "tokenizers", "scipy")}
        data = saved()
        data["quality"] = merge_quality(data.get("quality"), new, models)
    elif args.part == "timing":
        timing = run_timing(args, log)
        data = saved()
        data["timing"] = timing
    else:
        data = saved()
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_path(json_path) as tmp:
        tmp.write_text(json.dumps(data, indent=1) + "\n")
    page = args.out / f"{STEM}.md"
    with atomic_path(page) as tmp:
        tmp.write_text(markdown(data, kept_notes(page)), encoding="utf-8")
    log(f"wrote {page}")


if __name__ == "__main__":
    main()
