"""What the check for texts with no token the model knows adds to a query (issue 37, item 2): every search asks
``whitevec.encoders.protocol.known_token_mask`` before it encodes, one more tokenization of the query. Single
queries
(two Cranfield-like sentences in turn), median of ``--repeats`` calls each: the encoder's ``encode`` against
``known_token_mask``, for all-MiniLM-L6-v2 (its own pooling) and a static table of the real shape (30,522 tokens
x 256, seeded random values: the cost does not depend on them).

    python benchmarks/investigations/known_token_cost.py [--repeats 200]

An investigation of 2026-12-05, not part of the maintained suite (`make bench`); run it alone on a quiet machine.
Quoted in docs/how-to/index-and-compress.md (texts with no token the model knows).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common
from benchmarks.common.data import real_shape_static_folder
from benchmarks.common.machine import cpu_model

QUERIES = [
    "heat transfer at hypersonic speed",
    "what is the effect of the leading edge shock wave on the laminar boundary layer",
]


def median_ms(call: Callable[[Sequence[str]], object], repeats: int) -> float:
    seconds = []
    for i in range(repeats):
        query = [QUERIES[i % len(QUERIES)]]
        start = time.perf_counter()
        call(query)
        seconds.append(time.perf_counter() - start)
    return 1e3 * statistics.median(seconds)


def measure(name: str, model: str, pooling: str | None, repeats: int) -> dict[str, object]:
    from whitevec.encoders.loading import load_encoder
    from whitevec.encoders.protocol import known_token_mask

    with load_encoder(model, pooling, cache=False) as encoder:
        encoder.encode(QUERIES)  # warm: first calls build caches
        known_token_mask(encoder, QUERIES)
        encode_ms = median_ms(encoder.encode, repeats)
        mask_ms = median_ms(lambda texts: known_token_mask(encoder, texts), repeats)
    return {"model": name, "encode_ms": round(encode_ms, 4), "known_token_mask_ms": round(mask_ms, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    print(json.dumps({"cpu": cpu_model(), "load_average_before": os.getloadavg()[0]}))
    print(json.dumps(measure("all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "model", args.repeats)))
    with tempfile.TemporaryDirectory() as tmp:
        static = real_shape_static_folder(Path(tmp) / "static")
        print(json.dumps(measure("static table", str(static), None, args.repeats)))


if __name__ == "__main__":
    main()
