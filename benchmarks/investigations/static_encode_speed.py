"""whitevec's StaticEncoder against Model2Vec's ``StaticModel.encode`` on the same static folder and texts
(issue 31's encode target: >= 1.0x Model2Vec). The first N unique STS-B sentences (all splits), both encoders on
the same folder, passes alternating, sentences/s the median pass; the vectors are checked equal (1e-5) first.

The folder: ``--static DIR`` (any static encoder folder, e.g. one ``whitevec distill`` wrote), or by default a
table of the real shape (all-MiniLM-L6-v2's tokenizer, 30,522 tokens x 256, seeded random values: encode cost
does not depend on the values) written to a temporary folder.

    python benchmarks/investigations/static_encode_speed.py [--static DIR] [--texts 4000] [--passes 7]

An investigation of 2026-12-05, not part of the maintained suite (`make bench`); run it alone on a quiet machine.
No page in docs/ quotes it: docs/results/static.md's speed section measures the same encoders
(maintained/results_static.py --part timing).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common
from benchmarks.common.data import real_shape_static_folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--static", type=Path, default=None, help="a static folder (default: random)")
    parser.add_argument("--texts", type=int, default=4000)
    parser.add_argument("--passes", type=int, default=7)
    args = parser.parse_args()

    from model2vec import StaticModel

    from whitevec.datasets.sts import load_sts_task
    from whitevec.encoders.static import StaticEncoder

    texts = load_sts_task("stsb").sentences("target")[: args.texts]
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.static or real_shape_static_folder(Path(tmp) / "static")
        ours, theirs = StaticEncoder(folder), StaticModel.from_pretrained(folder, force_download=False)
        runs = {
            "whitevec StaticEncoder": lambda: ours.encode(texts),
            "model2vec StaticModel": lambda: theirs.encode(texts, use_multiprocessing=False),
        }
        gap = float(np.abs(runs["whitevec StaticEncoder"]() - runs["model2vec StaticModel"]()).max())
        assert gap < 1e-5, f"the two encoders disagree by {gap}"
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.passes):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                seconds[name].append(time.perf_counter() - start)
    rates = {name: len(texts) / statistics.median(s) for name, s in seconds.items()}
    ratio = rates["whitevec StaticEncoder"] / rates["model2vec StaticModel"]
    print(json.dumps({"texts": len(texts), "max_abs_difference": gap, "sentences_per_s": rates, "ratio": ratio}))


if __name__ == "__main__":
    main()
