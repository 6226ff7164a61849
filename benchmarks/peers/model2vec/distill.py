"""Model2Vec's own distill of one model, as the peer for docs/results/static.md.

Runs in the peer venv (model2vec[distill] pins transformers<5.4, which whitevec's venv cannot hold):
    make peer-m2v
    .venv-m2v/bin/python benchmarks/peers/model2vec/distill.py NAME MODEL_FOLDER OUT_FOLDER [--pca-dims 256]
benchmarks/maintained/results_static.py --distill-peer resolves the model names and calls this for each model.

The call is Model2Vec's defaults with ``pca_dims=256`` (the default, named as issue 31 did): SIF coefficient
1e-4 on the Zipf rank, float16 table, mean pooling of each token passed alone through the model. The folder is
written to a temporary sibling and renamed; ``peer-distill.json`` inside it records the call and its wall time.
Prints one line ``RESULT {json}`` (the same record).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from importlib.metadata import version
from pathlib import Path

RECORD = "peer-distill.json"


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", help="the model's name in the results (e.g. all-MiniLM-L6-v2)")
    parser.add_argument("folder", type=Path, help="the model's local folder")
    parser.add_argument("out", type=Path, help="the Model2Vec folder to write (replaced if present)")
    parser.add_argument("--pca-dims", type=int, default=256)
    args = parser.parse_args()
    from model2vec.distill import distill

    load_before = os.getloadavg()
    started = time.perf_counter()
    model = distill(model_name=str(args.folder), pca_dims=args.pca_dims)
    seconds = time.perf_counter() - started
    record = {
        "model": args.name,
        "folder": str(args.folder),
        "call": f"model2vec.distill.distill(model_name=FOLDER, pca_dims={args.pca_dims})",
        "distill_seconds": round(seconds, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "vocab": int(model.embedding.shape[0]),
        "dim": int(model.embedding.shape[1]),
        "dtype": str(model.embedding.dtype),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "versions": {p: version(p) for p in ("model2vec", "torch", "transformers", "skeletoken", "numpy")},
    }
    tmp = args.out.with_name(f".{args.out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    (tmp / RECORD).write_text(json.dumps(record, indent=1) + "\n")
    if args.out.exists():
        shutil.rmtree(args.out)
    tmp.rename(args.out)
    print("RESULT " + json.dumps(record), flush=True)


if __name__ == "__main__":
    sys.exit(main())
