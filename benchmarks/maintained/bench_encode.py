"""Encoding speed: whitevec Encoder (cache off) vs sentence-transformers' SentenceTransformer.encode.

Same model folder, same texts (STS-B sentences, all splits), same batch size, max length and torch threads (2).
Each (system, model) runs in a fresh subprocess: load, one warm-up batch, then ``--reps`` timed passes over all
texts; sentences/s is the median pass. Peak memory is that subprocess's ru_maxrss. The fast paths (bf16, int8)
are also scored on STS-B (Spearman x 100, last-avg and first-last-avg, none and whitening) against the float path.

Run: `python benchmarks/maintained/bench_encode.py [--models ...] [--mpnet-texts 2000] [--reps 3]`
(WHITEVEC_DATA set).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.runs import THREADS, emit, median, ratio, run_worker, save_result
from benchmarks.common.sts import stsb_sentences

MODELS = ["all-MiniLM-L6-v2", "all-mpnet-base-v2"]
# whitevec systems and their Encoder backends; the peer is sentence-transformers.
BACKEND_OF = {"whitevec": "torch", "whitevec-bf16": "bf16", "whitevec-int8": "int8"}
SYSTEMS = ["sentence-transformers", *BACKEND_OF]
BATCH = 64
# sentence-transformers' own max_seq_length for both models is at most 384; STS-B sentences are far shorter.
MAX_LENGTH = 256


def worker_encode(system: str, model: str, limit: int | None, reps: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(THREADS)
    from whitevec.encoders.models.resolution import resolve_model

    texts = stsb_sentences(limit)
    if system == "sentence-transformers":
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(resolve_model(model)), device="cpu")
        st.max_seq_length = MAX_LENGTH

        def run() -> Any:
            return st.encode(texts, batch_size=BATCH, convert_to_numpy=True)

        def warm() -> Any:
            return st.encode(texts[:BATCH], batch_size=BATCH)
    else:
        from whitevec.encoders.transformer import Encoder

        backend = BACKEND_OF[system]
        # last-avg is the computation sentence-transformers runs for these models (mean of the last layer).
        enc = Encoder(model, pooling="last-avg", max_length=MAX_LENGTH, batch_size=BATCH, device="cpu",
                      cache=False, backend=backend)  # fmt: skip

        def run() -> Any:
            return enc.encode(texts, show_progress=False)

        def warm() -> Any:
            return enc.encode(texts[:BATCH], show_progress=False)

    warm()
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - started)
    return {"system": system, "model": model, "n_texts": len(texts), "seconds": seconds,
            "sentences_per_s": len(texts) / median(seconds)}  # fmt: skip


def worker_sts(model: str, backend: str) -> dict[str, Any]:
    import torch

    torch.set_num_threads(THREADS)
    from whitevec.datasets import load_sts_task
    from whitevec.encoders.transformer import Encoder
    from whitevec.evaluation.sts import evaluate_sts_poolings

    # The float path reads the shared vector cache when results_sts.py filled it; fast paths have their own.
    enc = Encoder(model, max_length=512, device="cpu", backend=backend)
    report = evaluate_sts_poolings(
        enc, ["last-avg", "first-last-avg"], [load_sts_task("stsb")], ("none", "whitening"), show_progress=False
    )
    scores = {f"{s.pooling}/{s.transform}": round(s.wmean, 2) for s in report.scores}
    return {"model": model, "backend": backend, "stsb_spearman": scores}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", choices=["encode", "sts"])
    parser.add_argument("--system", default="whitevec")
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--model", default=MODELS[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--limit", type=int, default=0, help="worker: encode only the first LIMIT texts")
    parser.add_argument("--minilm-texts", type=int, default=0, help="0 = all STS-B sentences")
    parser.add_argument("--mpnet-texts", type=int, default=1000, help="0 = all (about 10x slower than MiniLM)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sts-models", default=",".join(MODELS), help="models whose fast paths' STS-B is scored")
    args = parser.parse_args()

    if args.worker == "encode":
        emit(worker_encode(args.system, args.model, args.limit or None, args.reps))
        return
    if args.worker == "sts":
        emit(worker_sts(args.model, args.backend))
        return

    script = Path(__file__).resolve()
    rows = []
    for model in [m for m in args.models.split(",") if m]:
        limit = args.mpnet_texts if "mpnet" in model else args.minilm_texts
        runs = {}
        for system in SYSTEMS:
            runs[system] = run_worker(
                script,
                ["encode", "--system", system, "--model", model, "--limit", str(limit), "--reps", str(args.reps)],
            )
            print(model, system, runs[system], flush=True)
        peer = runs["sentence-transformers"].get("sentences_per_s", float("nan"))
        rows.append(
            {
                "model": model,
                "n_texts": runs["whitevec"].get("n_texts"),
                "batch_size": BATCH,
                "max_length": MAX_LENGTH,
                "threads": THREADS,
                "runs": runs,
                "ratios": {
                    system: ratio(runs[system].get("sentences_per_s", float("nan")), peer) for system in BACKEND_OF
                },
            }
        )
    sts = []
    for model in [m for m in args.sts_models.split(",") if m]:
        for backend in BACKEND_OF.values():
            result = run_worker(script, ["sts", "--model", model, "--backend", backend])
            print("sts", model, backend, result, flush=True)
            sts.append(result)
    path = save_result("encode", {"reps": args.reps, "rows": rows, "sts": sts})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
