"""bf16 query batches against the shapes they make: ``Retriever.search`` on Cranfield queries in batches of 32
and 64, each pass over the queries in a fresh random order (as a server's mixes of queries come) and, for
comparison, in one fixed order (the same batches every pass), with the encoder's bf16 settings as they are
(lengths rounded up to BF16_LENGTH_MULTIPLE, FORWARD_OVERHEAD_TOKENS["bf16"]) and as they were before
(no rounding, the float32 overhead of 64 tokens). Each setting in a fresh process, the settings alternating.

Why: oneDNN builds a kernel for every new matrix shape, so batches that repeat exactly (a fixed order) run
faster than batches whose lengths keep changing.

    python benchmarks/investigations/bf16_shapes.py [INDEX] [--passes 9] [--repeats 2]

An investigation of 2026-12-04, not part of the maintained suite (`make bench`). Backs docs/notes/bf16-shapes.md
(bf16 lengths rounded to a multiple of 8, 133ac35; the serve benchmark's shuffled ceiling, 0526e70); its output is
benchmarks/results/bf16_shapes.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.common.machine import machine_facts  # noqa: E402

SETTINGS = {"now": (None, None), "before": (1, 64)}  # (length multiple, overhead tokens); None: the code's own


def measure(index: Path, queries_file: Path, setting: str, passes: int) -> dict[str, Any]:
    import whitevec.encoders.compute as compute_module
    from whitevec.service.run import load_retriever

    multiple, overhead = SETTINGS[setting]
    if multiple is not None:
        compute_module.BF16_LENGTH_MULTIPLE = multiple
    if overhead is not None:
        compute_module.FORWARD_OVERHEAD_TOKENS = {**compute_module.FORWARD_OVERHEAD_TOKENS, "bf16": overhead}
    retriever: Any = load_retriever(index, "bf16")
    queries: list[str] = json.loads(queries_file.read_text())
    for q in queries[:10]:
        retriever.search([q], k=10)
    rng = random.Random(0)
    out: dict[str, Any] = {}
    for batch in (32, 64):
        for order in ("shuffled", "fixed"):
            rates = []
            for _ in range(passes):
                texts = list(queries)
                if order == "shuffled":
                    rng.shuffle(texts)
                started = time.perf_counter()
                for i in range(0, len(texts), batch):
                    retriever.search(texts[i : i + batch], k=10)
                rates.append(len(texts) / (time.perf_counter() - started))
            out[f"{order} {batch}"] = statistics.median(rates)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", nargs="?", type=Path, default=Path("/tmp/whitevec-bench/cranfield-minilm-w256"))
    parser.add_argument("--queries", type=Path, default=Path("/tmp/whitevec-bench-serve-queries.json"))
    parser.add_argument("--passes", type=int, default=9)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--setting", choices=list(SETTINGS), default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.setting is not None:
        print("RESULT " + json.dumps(measure(args.index, args.queries, args.setting, args.passes)), flush=True)
        return
    facts = machine_facts()
    print(f"{facts['date']}, {facts['cpu']}, {facts['cores']} cores; load before {os.getloadavg()[0]:.2f}")
    print(f"median queries/s of {args.passes} passes over the queries; bf16; each row a fresh process")
    print("| setting | shuffled 32 | shuffled 64 | fixed 32 | fixed 64 |")
    print("|---|---:|---:|---:|---:|")
    for _ in range(args.repeats):
        for setting in SETTINGS:
            command = [sys.executable, __file__, str(args.index), "--queries", str(args.queries)]
            command += ["--passes", str(args.passes), "--setting", setting]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
            r = json.loads(line.removeprefix("RESULT "))
            cells = [r["shuffled 32"], r["shuffled 64"], r["fixed 32"], r["fixed 64"]]
            print(f"| {setting} | " + " | ".join(f"{c:.0f}" for c in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
