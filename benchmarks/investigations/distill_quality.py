"""`whitevec distill` on a real model: STS Spearman of the static folders it writes, by method, token weights
and folded transform, read back with Model2Vec's own ``StaticModel`` (an independent reader of the folder).

The corpus is what a user would have: unlabelled text from the target domain, here the unique sentences of
STS-B's train split (10,536; none of the test pairs). ``--sample`` of them (default: distill's 10,000, seed 0)
go through the model for ``corpus`` and are what a folded transform is fitted on; the token counts of the
count-based weights use them all. Scores: STS-B test, and the ``all`` score of STS12-15 (the same folders; no
refit per task). Distill seconds are recorded as measured, on whatever machine ran it: not a benchmark.

Every configuration runs the whole of ``whitevec.distill.run.distill``, except that the raw token vectors (the
model
passes, which depend only on the method) are computed once per method and handed to the later configurations
of that method (``_reuse_raw_tables``); the seconds of the first configuration of each method are the ones that
include the model passes.

    python benchmarks/investigations/distill_quality.py [--model all-MiniLM-L6-v2] \\
        [--configs tokens:sif-rank:none,tokens:sif-rank:whitening,...] [--json FILE]

An investigation of 2026-12-05, not part of the maintained suite (`make bench`). Backs the distill figures reported
for issue 31 (item 1: the ``corpus`` method against ``tokens``, raw and with whitening folded; ``sif-rank`` against
count ``sif`` as the default weights); its output is benchmarks/results/distill_quality.json. No page in docs/
quotes it: docs/results/static.md measures the distill methods again (maintained/results_static.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.common.machine import machine_facts  # noqa: E402

from whitevec.datasets import load_sts_task  # noqa: E402
from whitevec.datasets.paths import resolve_data_dir  # noqa: E402
from whitevec.distill.run import distill  # noqa: E402
from whitevec.evaluation.sts import score_pairs  # noqa: E402

TASKS = ("stsb", "sts12", "sts13", "sts14", "sts15")
DEFAULT_CONFIGS = (
    "tokens:sif-rank:none,tokens:sif-rank:whitening,corpus:sif-rank:none,corpus:sif-rank:whitening,"
    "tokens:sif:none,tokens:sif:whitening,corpus:sif:none,corpus:sif:whitening"
)


def write_corpus(folder: Path) -> Path:
    """STS-B train's unique sentences, one a line: the unlabelled in-domain text."""
    path = folder / "stsb-train-sentences.txt"
    sentences = load_sts_task("stsb", resolve_data_dir(None)).sentences("train")
    path.write_text("\n".join(s.replace("\n", " ") for s in sentences) + "\n", encoding="utf-8")
    return path


def scores(folder: Path) -> dict[str, float]:
    """Spearman x 100 (``all``) of each task, the folder read by Model2Vec's StaticModel."""
    from model2vec import StaticModel

    model = StaticModel.from_pretrained(str(folder), force_download=False)
    out = {}
    for name in TASKS:
        task = load_sts_task(name, resolve_data_dir(None))
        _, score = score_pairs(task, lambda texts: np.asarray(model.encode(texts), dtype=np.float32))
        out[name] = round(score, 2)
    return out


def _reuse_raw_tables() -> None:
    """The raw tables of each method computed once: later distills of the same method reuse them."""
    import whitevec.distill.run as distill_module
    from whitevec.distill.token_table import TokenTable

    for name in ("single_token_table", "corpus_table"):
        compute = getattr(distill_module, name)
        done: dict[str, TokenTable] = {}

        def reuse(*args: Any, compute: Any = compute, done: dict[str, TokenTable] = done) -> TokenTable:
            if "raw" not in done:
                table = compute(*args)
                done["raw"] = TokenTable(np.array(table.vectors), np.array(table.kept), table.n_seen)
            return done["raw"]

        setattr(distill_module, name, reuse)


def run(model: str, configs: list[str], sample: int, work: Path, corpus: Path) -> list[dict[str, Any]]:
    _reuse_raw_tables()
    rows = []
    for config in configs:
        method, weights, transform = config.split(":")
        started = time.perf_counter()
        result = distill(
            model,
            work / config.replace(":", "-"),
            method=method,
            corpus=corpus,
            sample=sample,
            token_weights=weights,
            transform=None if transform == "none" else transform,
            show_progress=False,
        )
        seconds = time.perf_counter() - started
        row = {"method": method, "token_weights": weights, "transform": transform, "dim": result.dim}
        row |= {"tokens_seen": result.n_seen, "distill_seconds": round(seconds, 1)}
        row["spearman"] = scores(result.path)
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help="method:weights:transform, comma-separated")
    parser.add_argument("--sample", type=int, default=10_000)
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = write_corpus(Path(tmp))
        rows = run(args.model, args.configs.split(","), args.sample, Path(tmp), corpus)
    if args.json is not None:
        record = {
            "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
            "date": date.today().isoformat(),
            "model": args.model,
            "corpus": "STS-B train split, unique sentences (10,536)",
            "sample": args.sample,
            "note": "distill_seconds measured on a shared, busy 2-core machine: rough, not a benchmark",
            "machine": machine_facts("torch", "transformers", "model2vec"),
            "rows": rows,
        }
        args.json.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
