"""Regenerate docs/results/static.md (and static.json): static encoders against Model2Vec and the models.

For all-MiniLM-L6-v2, all-mpnet-base-v2 (English: STS-B, STS12-15, Cranfield) and m3e-small (the five Chinese
tasks): the contextual model itself (whitevec's Encoder, the model's mean pooling), Model2Vec's own distill of it
(the peer) and ``whitevec distill`` by both methods (``tokens``, ``corpus``), each under token weights none /
sif-rank / sif / usif and the transforms none / whitening / whitening-128 / sif-pc (/ usif-pc for usif, Zipfian
whitening for the unweighted table), every transform fitted on the evaluation's own unlabelled text (STS: the
task's target sentences) as a folded transform would be.

Parts (each runnable alone; each replaces its own section of static.json, then the page is rendered again):

    make peer-m2v                                          # the peer's venv, .venv-m2v
    python benchmarks/maintained/results_static.py --part peer      # Model2Vec's distill (.venv-m2v) -> ~/.cache
    python benchmarks/maintained/results_static.py --part distill   # whitevec distill, both methods -> ~/.cache
                                                           # (kept where a folder already holds the same table;
                                                           # --redo distils again, for the distill seconds)
    python benchmarks/maintained/results_static.py --part quality   # STS, Chinese, Cranfield, sizes (no timing)
    python benchmarks/maintained/results_static.py --part timing    # encode sentences/s, a static index's /search
    python benchmarks/maintained/results_static.py --part render    # the page from static.json (pages/static.py)

The committed page distilled all-mpnet-base-v2 by ``tokens`` only (``--part distill --models all-mpnet-base-v2
--methods tokens``): its corpus passes were cut for time on the shared 2-core machine; the page says so.

The timing part is for a quiet machine (nothing else running); a small check of it:
    python benchmarks/maintained/results_static.py --part timing --texts 200 --reps 1 --requests 20 \\
        --out /tmp/static-check
Needs WHITEVEC_DATA (the shared data), all-mpnet-base-v2 and m3e-small fetched.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.machine import machine_facts
from benchmarks.common.pages import CHINESE, CONTEXTUAL, CORPUS_OF, ENGLISH, METHODS, MODEL2VEC, MODELS
from benchmarks.common.runs import emit, run_page, run_worker
from benchmarks.common.sts import STS_TASKS, ZH_TASKS, Prefitted, seeded_sample, stsb_sentences

from whitevec.datasets import StsTask, load_sts_task
from whitevec.datasets.retrieval import RetrievalDataset, load_retrieval_dataset
from whitevec.evaluation.retrieval import score_rankings
from whitevec.evaluation.sts import StsScore, evaluate_sts
from whitevec.transforms import Transform, make_transform
from whitevec.utils.io import atomic_path
from whitevec.utils.linalg import unit_rows
from whitevec.utils.paths import whitevec_cache_folder

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "results"
STEM = "static"
ZH_PAIRS = 2000  # valid/test pairs per Chinese task: results_tune.py's seeded samples (sts-zh.md)
WEIGHTS = ["none", "sif-rank", "sif", "usif"]
TRANSFORMS = ["none", "whitening", "whitening-128", "sif-pc"]
EXTRA_TRANSFORMS = {"usif": ["usif-pc"], "none": ["zipfian"]}  # the papers' own pairings
DIMS = 256  # Model2Vec's default pca_dims, for both
PEER_VENV = REPO / ".venv-m2v"
PEER_SCRIPT = REPO / "benchmarks" / "peers" / "model2vec" / "distill.py"


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
    splits = {
        "valid": seeded_sample(task.splits["valid"], ZH_PAIRS),
        "test": seeded_sample(task.splits["test"], ZH_PAIRS),
    }
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
    from whitevec.encoders.transformer import Encoder

    return Encoder(model, pooling="last-avg")


def static_encoder(folder: Path) -> Any:
    from whitevec.encoders.static import StaticEncoder

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
                out.append((system_label(method, weights), functools.partial(static_encoder, folder), specs))
    return out


# --- transforms ---------------------------------------------------------------------------------------------
def zipfian_static(encoder: Any, texts: Sequence[str]) -> Transform:
    """Zipfian whitening (Yokoi et al. 2024) of a static table: the rows of the token types in ``texts``,
    weighted by p(w) (counted on ``texts`` with the folder's own tokenizer, add-one smoothed as whitevec's
    TokenFrequencies), give the mean and covariance. A static type has one vector, so each type enters once with
    weight p(w): the paper's sums. Applied to the uniform token mean (whiten-then-pool = pool-then-whiten)."""
    from whitevec.encoders.token_weights import zipfian_whitening_fit

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
    from whitevec.encoders.models.resolution import resolve_model

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
    """Inside, whitevec.distill.run computes the raw token table (the model passes: every token alone, or the
    corpus) once per ``passes.key`` (set by the caller: model and method) and hands a copy to the later distills
    under the same key; every other step (PCA, weights, counts, fold, the folder) runs in full each time.
    ``passes.seconds[key]``: the model passes' seconds."""
    import whitevec.distill.run as module
    from whitevec.distill.token_table import TokenTable

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


def distilled_already(folder: Path, model: str, settings: dict[str, Any]) -> dict[str, Any] | None:
    """The provenance of ``folder`` when it holds the table these ``settings`` ask for (the same model weights,
    method, dims, token weights, transform, corpus by digest, sample and seed, normalisation), else None."""
    from whitevec.distill.run import DEFAULT_SAMPLE
    from whitevec.encoders.models.resolution import resolve_model
    from whitevec.encoders.tokenization import folder_fingerprint
    from whitevec.utils.io import sha256_file

    config = folder / "config.json"
    if not (config.is_file() and (folder / "model.safetensors").is_file()):
        return None
    saved = json.loads(config.read_text())
    provenance = saved.get("whitevec") or {}
    found = {
        "fingerprint": provenance.get("base_model_fingerprint"),
        "method": provenance.get("method"),
        "dims": provenance.get("dims"),
        "token_weights": (provenance.get("token_weights") or {}).get("scheme"),
        "transform": provenance.get("transform"),
        "corpus": (provenance.get("corpus") or {}).get("sha256"),
        "sample": provenance.get("sample_asked"),
        "seed": provenance.get("seed"),
        "normalize": saved.get("normalize"),
    }
    asked = {
        "fingerprint": folder_fingerprint(resolve_model(model)),
        "method": settings["method"],
        "dims": settings["dims"],
        "token_weights": settings["token_weights"],
        "transform": settings.get("transform"),
        "corpus": sha256_file(settings["corpus"]),
        "sample": settings.get("sample", DEFAULT_SAMPLE),
        "seed": settings.get("seed", 0),
        "normalize": settings.get("normalize", True),
    }
    return provenance if found == asked else None


def distill_once(model: str, folder: Path, settings: dict[str, Any], redo: bool = False) -> dict[str, Any]:
    """``whitevec.distill.run`` of ``model`` into ``folder`` with ``settings``, unless the folder already holds
    that
    table (then it is kept: ``reused``; ``redo`` distils it again). The record: seconds and load (a run here),
    shape, provenance."""
    from safetensors import safe_open

    from whitevec.distill.run import distill

    provenance = None if redo else distilled_already(folder, model, settings)
    if provenance is not None:
        with safe_open(str(folder / "model.safetensors"), "np") as handle:
            vocab, dim = handle.get_slice(handle.keys()[0]).get_shape()
        n_seen = provenance.get("tokens_seen") or 0
        return {"reused": True, "vocab": vocab, "dim": dim, "n_seen": n_seen, "provenance": provenance}
    load_before = os.getloadavg()
    result = distill(model, folder, **settings, overwrite=True, show_progress=False)
    return {
        "seconds": round(result.seconds, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "vocab": result.vocab_size,
        "dim": result.dim,
        "n_texts": result.n_texts,
        "n_seen": result.n_seen,
        "provenance": result.provenance,
    }


def check_fold(model: str, corpus: Path, redo: bool = False) -> dict[str, Any]:
    """The deployable folder (``tokens``, sif-rank, whitening folded, fitted on every corpus line, normalised;
    also the timing part's whitevec folder) against what the quality part does instead: whitening fitted on the
    unnormalised tokens/sif-rank folder's vectors of the corpus and applied, then normalised (STS-B sentences).
    Called while the model passes of ``tokens`` are at hand (``model_passes_once``)."""
    from whitevec.datasets import read_texts_file

    settings = {"method": "tokens", "corpus": corpus, "sample": None, "dims": DIMS, "token_weights": "sif-rank",
                "transform": "whitening"}  # fmt: skip
    record = distill_once(model, deploy_folder(model), settings, redo)
    plain = static_encoder(static_folder(model, "tokens", "sif-rank"))
    whitening = make_transform("whitening")
    assert whitening is not None
    whitening.fit(plain.encode(read_texts_file(corpus), show_progress=False))
    texts = load_sts_task("stsb").sentences("target")
    expected = unit_rows(np.asarray(whitening.transform(plain.encode(texts, show_progress=False))))
    folded = static_encoder(deploy_folder(model)).encode(texts, show_progress=False)
    out = {
        "folder": deploy_folder(model).name,
        "folded_vs_applied_max_abs_diff": float(np.abs(folded - expected).max()),
    }
    if "seconds" in record:
        out["distill_seconds_without_model_passes"] = record["seconds"]
    return out


def deploy_folder(model: str) -> Path:
    return cache_folder("static") / f"{model}-deploy"


def run_distill(
    models: list[str], methods: list[str], log: Callable[[str], None], redo: bool = False
) -> dict[str, Any]:
    """whitevec distill of each model by each method under each token weighting, unnormalised (so that a
    transform fitted on its sentence vectors is the one a fold would fit); a folder already holding its table is
    kept; the model passes run at most once per model and method (``model_passes_once``)."""
    records: dict[str, Any] = {}
    with model_passes_once() as passes:
        for model, method in [(m, v) for m in models for v in methods]:
            corpus = corpus_file(model, CORPUS_OF[method])
            passes.key = (model, method)
            for weights in WEIGHTS:
                settings = {"method": method.split("-")[0], "corpus": corpus, "dims": DIMS,
                            "token_weights": weights, "normalize": False}  # fmt: skip
                record = distill_once(model, static_folder(model, method, weights), settings, redo)
                records[f"{model} {method}/{weights}"] = {**record, "corpus": CORPUS_OF[method]}
                done = "kept (already distilled)" if "reused" in record else f"{record['seconds']:.0f} s"
                log(f"{model} {method}/{weights}: {done}")
            if passes.key in passes.seconds:
                records[f"{model} {method}/none"]["model_pass_seconds"] = passes.seconds[passes.key]
            if model == ENGLISH[0] and method == "tokens":
                records[f"{model} fold check"] = check_fold(model, corpus_file(model), redo)
                log(f"{model} fold check: {records[f'{model} fold check']}")
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
    texts = stsb_sentences(limit)
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
    contextual = run_worker(
        REPO / "benchmarks" / "maintained" / "bench_encode.py",
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
    (benchmarks/common/loadgen.py, its own process), and bench_serve.py's in-process ceiling beside it."""
    from benchmarks.common.serving import cranfield_queries, load_row, whitevec_server

    from whitevec.index import Retriever

    index = work / "cranfield-static"
    if not (index / "manifest.json").is_file():
        corpus = load_retrieval_dataset("cranfield").corpus
        Retriever.build(corpus, index, encoder=static_encoder(folder), show_progress=False)
    queries_file = work / "queries.json"
    queries_file.write_text(json.dumps(cranfield_queries(None)))
    ceiling_args = ["ceiling", "--index", str(index), "--queries-file", str(queries_file)]
    ceiling = run_worker(
        REPO / "benchmarks" / "maintained" / "bench_serve.py", [*ceiling_args, "--batch", "64", "--k", "10"]
    )
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
        "command": "python benchmarks/maintained/results_static.py " + " ".join(sys.argv[1:]),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "seconds": round(time.perf_counter() - started, 1),
        "n_texts": args.texts,
        "reps": args.reps,
        "static_reps": args.static_reps,
        "encode": encode,
        "search": search,
    }


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


def merge_distill(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The new distill records over the old, except that a folder this run kept keeps the record of its run."""
    return {**old, **{key: record for key, record in new.items() if not (record.get("reused") and key in old)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["peer", "distill", "quality", "timing", "render"], default="render")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--methods", default=",".join(METHODS), help="distill: the tables to make")
    parser.add_argument("--redo", action="store_true", help="peer, distill: distil again over folders there")
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
    run = {"command": "python benchmarks/maintained/results_static.py " + " ".join(sys.argv[1:])}
    if args.part == "peer":
        records = run_peer(models, args.redo, log)
        data = saved()
        data["peer"] = {**data.get("peer", {}), **records}
    elif args.part == "distill":
        records = run_distill(models, [m for m in args.methods.split(",") if m], log, args.redo)
        data = saved()
        data["distill"] = merge_distill(data.get("distill", {}), records)
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
    run_page("static", "--out", str(args.out))


if __name__ == "__main__":
    main()
