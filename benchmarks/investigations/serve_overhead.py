"""The HTTP layer's own CPU per request: `whitevec serve`'s app with a retriever that does no work (ten fixed
hits of 400 characters per query), driven by benchmarks/common/loadgen.py (its own process) at 32 clients; the
server process's CPU seconds (from /proc) per request. ``--protocol`` picks whitevec's guarded h11 or httptools
protocol (ServeSettings.http), ``--loop`` asyncio's event loop or uvloop (``pip install uvloop``).

    python benchmarks/investigations/serve_overhead.py [--protocol h11|httptools] [--loop asyncio|uvloop]
        [--requests 6000]

An investigation of 2026-12-04, not part of the maintained suite (`make bench`). Backs docs/notes/http-overhead.md
(whitevec's connection guards on httptools, a5186eb); its output is benchmarks/results/serve_overhead.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

LOADGEN = Path(__file__).resolve().parents[1] / "common" / "loadgen.py"  # the benchmarks' load generator


@dataclass
class Hit:
    id: str
    score: float
    text: str
    metadata: dict[str, Any] | None = None


class IdleRetriever:
    """Answers at once: what is left of a request's cost is the HTTP layer's."""

    count = 1400

    def __init__(self) -> None:
        self.manifest = {"model": "none", "pooling": "none", "dim": 256, "metric": "cosine", "count": self.count}

    def search(self, queries: list[str], k: int = 10) -> list[list[Hit]]:
        return [[Hit(str(i), 0.5, "some document text " * 20) for i in range(k)] for _ in queries]

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 256), np.float32)


def serve(port: int, protocol: str, loop: str) -> None:
    import uvicorn

    from whitevec.service.app import create_app
    from whitevec.service.connections import ServerConfig
    from whitevec.service.settings import ServeSettings

    settings = dataclasses.replace(ServeSettings.from_env(), http=protocol)
    app = create_app(IdleRetriever(), settings)  # type: ignore[arg-type]
    config = ServerConfig(app, settings, host="127.0.0.1", port=port, log_level="warning", loop=loop)
    uvicorn.Server(config).run()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", choices=["h11", "httptools"], default="h11")
    parser.add_argument("--loop", choices=["asyncio", "uvloop", "auto"], default="asyncio")
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.port, args.protocol, args.loop)
        return
    load_before = os.getloadavg()[0]
    command = [sys.executable, __file__, "--serve", "--port", str(args.port), "--protocol", args.protocol]
    command += ["--loop", args.loop]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            time.sleep(0.2)
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{args.port}/health", timeout=1).read()
                break
            except OSError:
                continue
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as queries:
            json.dump([f"query number {i}" for i in range(225)], queries)
        before = cpu_seconds(server.pid)
        load = subprocess.run(
            [sys.executable, str(LOADGEN), "--url", f"http://127.0.0.1:{args.port}/search",
             "--kind", "search", "--queries", queries.name, "--clients", str(args.clients),
             "--requests", str(args.requests)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        used = cpu_seconds(server.pid) - before
    finally:
        server.terminate()
        server.wait(10)
        Path(queries.name).unlink(missing_ok=True)
    result = json.loads(load.stdout.strip().splitlines()[-1].removeprefix("RESULT "))
    print(
        f"{args.protocol} ({args.loop} loop): {result['qps']:.0f} QPS at {args.clients} clients, server CPU "
        f"{used / args.requests * 1000:.3f} ms per request, generator CPU "
        f"{result['generator_cpu_s'] / args.requests * 1000:.3f} ms per request; load before {load_before:.2f}"
    )


if __name__ == "__main__":
    main()
