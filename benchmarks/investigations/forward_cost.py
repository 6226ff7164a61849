"""What one forward pass costs beyond its tokens: fits time = overhead + per_token * n * L over batches of n
random texts padded to L tokens (all-MiniLM-L6-v2 by default, 2 threads), and prints the overhead in tokens:
the per-backend FORWARD_OVERHEAD_TOKENS in whitevec/encoders/compute.py, which decide where a batch is split
by length
(``--backend bf16`` / ``int8`` for the others).

    python benchmarks/investigations/forward_cost.py

An investigation of 2026-12-03, not part of the maintained suite (`make bench`). Backs docs/notes/bf16-shapes.md
(each backend's forward overhead: float32 64 tokens, int8 32, bf16 224).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import torch

from whitevec.encoders.transformer import Encoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    torch.set_num_threads(2)
    encoder = Encoder(args.model, "first-last-avg", backend=args.backend, cache=False)
    vocab = encoder.tokenizer.vocab_size
    rng = np.random.default_rng(0)
    shapes = [(n, length) for n in (1, 4, 16, 32) for length in (8, 16, 32, 64)]
    rows = []
    with torch.inference_mode():
        for n, length in shapes:
            ids = torch.from_numpy(rng.integers(1000, vocab, size=(n, length)))
            mask = torch.ones_like(ids)
            encoder.model(input_ids=ids, attention_mask=mask, output_hidden_states=True)  # warm
            times = []
            for _ in range(args.repeats):
                started = time.perf_counter()
                encoder.model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
                times.append(time.perf_counter() - started)
            rows.append((n * length, statistics.median(times)))
    tokens = np.array([r[0] for r in rows], dtype=float)
    seconds = np.array([r[1] for r in rows])
    per_token, overhead = np.polyfit(tokens, seconds, 1)
    print(
        json.dumps(
            {
                "load_before": load,
                "backend": args.backend,
                "overhead_ms": overhead * 1000,
                "per_token_ms": per_token * 1000,
                "overhead_tokens": overhead / per_token,
                "points": [{"tokens": int(t), "ms": s * 1000} for t, s in rows],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
