"""What checking an index's model costs at load (docs/notes/model-checksum.md): the sha256 of a model folder's
weight files and tokenizer.json (``whitevec.encoders.models.identity.model_checksum``) beside the time the model
itself
takes to load, for all-mpnet-base-v2 (~420 MB of weights) and a static table of the real shape (all-MiniLM-L6-v2's
tokenizer, 30,522 tokens x 256 float32, seeded random values: hashing cost depends only on the bytes).

Per model, each the median of ``--repeats`` runs (the first run of each also printed: the files may not yet be in
the page cache then):
- ``hash_s``: the checksum with no cache (every file read and hashed);
- ``cached_s``: the checksum when the per-file cache (a JSON file) already holds it, as in a second
  ``whitevec search``: one stat per file and the cache read;
- ``load_s``: ``load_encoder`` on the folder (weights read, model built), what a load costs without any check.

    python benchmarks/investigations/model_checksum_cost.py [--mpnet DIR] [--static DIR] [--repeats 5]

``--mpnet`` defaults to the folder ``shared/models/fetch-all-mpnet-base-v2`` writes (skipped when absent).
An investigation of 2026-12-05, not part of the maintained suite (`make bench`); run it alone on a quiet machine.
Backs docs/notes/model-checksum.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common
from benchmarks.common.data import real_shape_static_folder


def timed(run: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(first run, median of all runs) in seconds."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return seconds[0], statistics.median(seconds)


def measure(name: str, folder: Path, pooling: str | None, repeats: int) -> dict[str, object]:
    from whitevec.encoders.loading import load_encoder
    from whitevec.encoders.models import identity as model_identity
    from whitevec.utils.io import sha256_file

    files = model_identity.hashed_files(folder)

    def uncached() -> None:
        for path in files:
            sha256_file(path)

    def from_cache() -> None:
        model_identity.checksum_memo.clear()  # a new process: only the JSON cache on disk
        model_identity.model_checksum(folder)

    def load() -> None:
        load_encoder(folder, pooling, cache=False).close()

    hash_first, hash_median = timed(uncached, repeats)
    model_identity.model_checksum(folder)  # fills the cache
    cached_first, cached_median = timed(from_cache, repeats)
    load_first, load_median = timed(load, repeats)
    return {
        "model": name,
        "hashed_bytes": sum(path.stat().st_size for path in files),
        "hash_s": round(hash_median, 4),
        "hash_first_s": round(hash_first, 4),
        "cached_s": round(cached_median, 5),
        "cached_first_s": round(cached_first, 5),
        "load_s": round(load_median, 4),
        "load_first_s": round(load_first, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mpnet", type=Path, default=None, help="all-mpnet-base-v2's folder (default: fetched)")
    parser.add_argument("--static", type=Path, default=None, help="a static folder (default: random, real shape)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from whitevec.encoders.models.resolution import models_home

    mpnet = args.mpnet or models_home() / "all-mpnet-base-v2"
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["WHITEVEC_CHECKSUMS"] = str(Path(tmp) / "checksums")  # never the user's cache
        static = args.static or real_shape_static_folder(Path(tmp) / "static")
        print(json.dumps(measure("static table", static, None, args.repeats)))
        if (mpnet / "config.json").is_file():
            print(json.dumps(measure("all-mpnet-base-v2", mpnet, "model", args.repeats)))
        else:
            print(json.dumps({"model": "all-mpnet-base-v2", "skipped": f"no model folder at {mpnet}"}))


if __name__ == "__main__":
    main()
