"""A closed-loop HTTP load generator: ``clients`` concurrent connections, each sending its next request as soon as
the previous answer arrives, until ``requests`` answers are in (or ``--seconds`` have passed). One process, one
asyncio event loop, aiohttp: on a 2-core machine the generator shares the CPU with the server, so it must cost as
little as possible (its CPU time is reported beside the figures so the reader can see what it took).

``--writes-url``: meanwhile, one more connection floods a writable server's POST /documents with adds of
``--write-docs`` documents each (new ids; texts from ``--write-texts``), the next sent as soon as the previous is
answered, from before the timed requests until they end; the result then holds the adds answered in the timed
window, their rate and latencies.

Run by benchmarks/maintained/bench_serve.py and bench_serve_writes.py in its own process; prints one line
``RESULT {json}``:

    python benchmarks/common/loadgen.py --url http://127.0.0.1:8000/search --kind search --queries q.json \
        --clients 8 --requests 600
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
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


@dataclass
class Flood:
    """The writer beside the timed requests: POST /documents at ``url``, ``bodies`` one add after another."""

    url: str
    bodies: Iterator[bytes]
    docs: int  # documents per add


def add_bodies(texts: list[str], docs: int) -> Iterator[bytes]:
    """Bodies of POST /documents, ``docs`` new documents each (ids this process's own), texts in turn."""
    cycle = itertools.cycle(texts)
    for i in itertools.count():
        batch = [{"id": f"flood-{os.getpid()}-{i}-{j}", "text": next(cycle)} for j in range(docs)]
        yield json.dumps({"documents": batch}).encode("utf-8")


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
    seconds: float | None = None,
    flood: Flood | None = None,
) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(limit=clients + (flood is not None), force_close=False)
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

        window: list[float] = []  # the timed window's start, then its end
        writes: list[tuple[float, float]] = []  # each add answered: when (perf_counter), and its seconds
        write_errors: list[str] = []

        async def writer() -> None:
            assert flood is not None
            while len(window) < 2:
                started = time.perf_counter()
                try:
                    async with session.post(flood.url, data=next(flood.bodies)) as response:
                        payload = await response.json(content_type=None)
                    ok = response.status == 200 and payload.get("added") == flood.docs
                    problem = None if ok else f"HTTP {response.status}: {str(payload)[:200]}"
                except (aiohttp.ClientError, TimeoutError) as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                ended = time.perf_counter()
                writes.append((ended, ended - started))
                if problem is not None:
                    write_errors.append(problem)

        flooding = asyncio.ensure_future(writer()) if flood is not None else None
        if flooding is not None:  # the flood under way before the timed requests: one add answered
            while not writes and not flooding.done():
                await asyncio.sleep(0.01)

        def more(i: int) -> bool:
            return i < requests and (seconds is None or time.perf_counter() - window[0] < seconds)

        async def client() -> None:
            nonlocal next_index
            while more(next_index):
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
        window.append(time.perf_counter())
        await asyncio.gather(*(client() for _ in range(clients)))
        window.append(time.perf_counter())
        wall = window[1] - window[0]
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
        health_after = await health()
        if flooding is not None:
            await flooding  # the add in flight answered: nothing left running against the server
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
        **({} if flood is None else flood_result(writes, write_errors, window, flood.docs)),
    }


def flood_result(
    writes: list[tuple[float, float]], errors: list[str], window: list[float], docs: int
) -> dict[str, Any]:
    """The adds answered inside the timed window: how many, per second, their latencies; errors of all."""
    inside = np.array([took for at, took in writes if window[0] <= at <= window[1]]) * 1000
    return {
        "writes": int(inside.size),
        "write_docs": docs,
        "writes_per_s": inside.size / (window[1] - window[0]),
        "write_p50_ms": float(np.percentile(inside, 50)) if inside.size else None,
        "write_p99_ms": float(np.percentile(inside, 99)) if inside.size else None,
        "write_errors": len(errors),
        "first_write_error": errors[0] if errors else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--kind", choices=KINDS, default="search")
    parser.add_argument("--queries", type=Path, required=True, help="JSON list of texts, sent in turn")
    parser.add_argument("--clients", type=int, required=True)
    parser.add_argument("--requests", type=int, required=True, help="at most this many (see --seconds)")
    parser.add_argument("--seconds", type=float, default=None, help="send no request after this many seconds")
    parser.add_argument("--writes-url", default=None, help="flood this POST /documents meanwhile")
    parser.add_argument("--write-docs", type=int, default=4, help="documents per add of the flood")
    parser.add_argument("--write-texts", type=Path, default=None, help="JSON list of the flood's texts")
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
    flood = None
    if args.writes_url:
        flood_texts = json.loads((args.write_texts or args.queries).read_text())
        flood = Flood(args.writes_url, add_bodies(flood_texts, args.write_docs), args.write_docs)
    result = asyncio.run(
        run(
            args.url,
            args.kind,
            bodies,
            args.clients,
            args.requests,
            args.warmup,
            args.k,
            args.health_url,
            args.seconds,
            flood,
        )
    )
    print("RESULT " + json.dumps(result), flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
