"""A closed-loop HTTP load generator: ``clients`` concurrent connections, each sending its next request as soon as
the previous answer arrives, until ``requests`` answers are in. One process, one asyncio event loop, aiohttp:
on a 2-core machine the generator shares the CPU with the server, so it must cost as little as possible (its CPU
time is reported beside the figures so the reader can see what it took).

Run by benchmarks/maintained/bench_serve.py in its own process; prints one line ``RESULT {json}``:

    python benchmarks/common/loadgen.py --url http://127.0.0.1:8000/search --kind search --queries q.json \
        --clients 8 --requests 600
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

# What each server expects: whitevec /search and /embed, and an OpenAI-style /embeddings (the peer).
KINDS = ("search", "embed", "openai-embeddings")


def request_body(kind: str, text: str, k: int, model: str, extra: dict[str, Any] | None = None) -> bytes:
    """One request's JSON body; ``extra``: more fields of a /search body (``{"mode": "hybrid"}``)."""
    if kind == "search":
        body: dict[str, Any] = {"queries": [text], "k": k, **(extra or {})}
    elif kind == "embed":
        body = {"texts": [text]}
    else:
        body = {"model": model, "input": [text]}
    return json.dumps(body).encode("utf-8")


def answer_ok(kind: str, payload: Any, k: int) -> bool:
    """The answer holds what was asked: k hits, or one vector."""
    if kind == "search":
        return len(payload["results"][0]["ids"]) == k
    if kind == "embed":
        return len(payload["vectors"]) == 1 and len(payload["vectors"][0]) > 0
    return len(payload["data"]) == 1 and len(payload["data"][0]["embedding"]) > 0


async def run(
    url: str,
    kind: str,
    bodies: list[bytes],
    clients: int,
    requests: int,
    warmup: int,
    k: int,
    health_url: str | None = None,
) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=clients, force_close=False)
    timeout = aiohttp.ClientTimeout(total=300)
    latencies: list[float] = []
    errors: list[str] = []
    next_index = 0

    headers = {"Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers) as session:

        async def one(body: bytes) -> str | None:
            async with session.post(url, data=body) as response:
                payload = await response.json(content_type=None)
                if response.status != 200:
                    return f"HTTP {response.status}: {str(payload)[:200]}"
                return None if answer_ok(kind, payload, k) else "answer lacks the hits or vector asked for"

        # Warm up on every connection: first calls pay for lazy initialisation and connection set-up.
        await asyncio.gather(*(one(bodies[i % len(bodies)]) for i in range(max(warmup, clients))))

        async def client() -> None:
            nonlocal next_index
            while next_index < requests:
                i = next_index
                next_index += 1
                started = time.perf_counter()
                try:
                    problem = await one(bodies[i % len(bodies)])
                except (aiohttp.ClientError, TimeoutError) as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                latencies.append(time.perf_counter() - started)
                if problem is not None:
                    errors.append(problem)

        async def health() -> Any:
            if health_url is None:
                return None
            async with session.get(health_url) as response:
                return await response.json(content_type=None)

        # The server's own counters just around the timed window (whitevec's /health: encoder calls, texts and
        # busy seconds), so what the encoder did is known for exactly the requests timed.
        health_before = await health()
        cpu_before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        wall = time.perf_counter() - started
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
        health_after = await health()
    ms = np.array(latencies) * 1000
    cpu_s = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return {
        "clients": clients,
        "requests": len(latencies),
        "seconds": wall,
        "qps": len(latencies) / wall,
        "p50_ms": float(np.percentile(ms, 50)),
        "p90_ms": float(np.percentile(ms, 90)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "generator_cpu_s": cpu_s,
        "health_before": health_before,
        "health_after": health_after,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--kind", choices=KINDS, default="search")
    parser.add_argument("--queries", type=Path, required=True, help="JSON list of texts, sent in turn")
    parser.add_argument("--clients", type=int, required=True)
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--model", default="", help="the model name an OpenAI-style server expects")
    parser.add_argument("--health-url", help="a JSON URL read just before and after the timed requests")
    parser.add_argument(
        "--body", default="{}", help='more fields of each /search body, a JSON object: {"mode": "hybrid"}'
    )
    args = parser.parse_args()
    texts = json.loads(args.queries.read_text())
    extra = json.loads(args.body)
    if not isinstance(extra, dict):
        parser.error("--body must be a JSON object")
    bodies = [request_body(args.kind, t, args.k, args.model, extra) for t in texts]
    result = asyncio.run(
        run(args.url, args.kind, bodies, args.clients, args.requests, args.warmup, args.k, args.health_url)
    )
    print("RESULT " + json.dumps(result), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
