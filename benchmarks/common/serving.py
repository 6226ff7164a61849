"""Serving under load, shared by bench_serve.py, bench_serve_writes.py, results_static.py's timing part and the
service tests: the served Cranfield index, a server process on a free port (``whitevec serve`` or any command),
waiting for its /health, one row of the load generator (``loadgen.py``, run in its own process), and the
Cranfield queries the rows send."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from benchmarks.common.runs import thread_env

LOADGEN = Path(__file__).resolve().parent / "loadgen.py"


def add_index_options(parser: argparse.ArgumentParser) -> None:
    """The options of the served benchmarks' index (:func:`build_index`'s arguments), one set for each script."""
    parser.add_argument("--index", type=Path, default=Path("/tmp/whitevec-bench/cranfield-minilm-w256"))
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--pooling", default="first-last-avg")
    parser.add_argument("--transform", default="whitening-256")


def build_index(index_dir: Path, data_dir: Path | None, model: str, pooling: str, transform: str) -> None:
    """The served benchmarks' index: Cranfield's documents in ``index_dir`` (FAISS flat, cosine)."""
    from whitevec.datasets import resolve_data_dir
    from whitevec.datasets.retrieval import read_cranfield
    from whitevec.encoders.transformer import Encoder
    from whitevec.index import Retriever

    root = resolve_data_dir(data_dir) / "retrieval" / "cranfield"
    corpus = read_cranfield(root).corpus
    started = time.perf_counter()
    Retriever.build(corpus, index_dir, encoder=Encoder(model, pooling), transform=transform, show_progress=False)
    print(f"built {index_dir} ({len(corpus)} documents) in {time.perf_counter() - started:.1f} s", file=sys.stderr)


def cranfield_queries(data_dir: Path | None) -> list[str]:
    from whitevec.datasets import resolve_data_dir
    from whitevec.datasets.retrieval import read_cranfield

    return list(read_cranfield(resolve_data_dir(data_dir) / "retrieval" / "cranfield").queries.values())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A server process on a free port, logging to a file (never an unread pipe), killed on exit."""

    def __init__(self, command: list[str], env: dict[str, str], what: str, health: str, timeout_s: float) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = Path(tempfile.gettempdir()) / f"whitevec-bench-serve-{self.port}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [part.replace("{port}", str(self.port)) for part in command],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            wait_until_healthy(self.base, what, timeout_s, self.proc, self.log, poll_s=0.5, path=health)
        except BaseException:
            self.stop()
            raise

    def cpu_seconds(self) -> float:
        """User+system CPU seconds of the server process so far (all its threads)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def reports_encoder(self) -> bool:
        """Whether /health carries whitevec's encoder counters (calls, texts, busy seconds)."""
        with urllib.request.urlopen(self.base + "/health", timeout=10) as answer:
            health = json.loads(answer.read())
        return isinstance(health, dict) and "encoder_busy_s" in health

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def whitevec_server(index_dir: Path, env_extra: dict[str, str], threads: int, label: str) -> Server:
    env = {**thread_env(threads), **env_extra}
    env.pop("WHITEVEC_API_KEY", None)
    command = [sys.executable, "-c", "from whitevec.cli import main; main()", "serve", str(index_dir)]
    return Server([*command, "--port", "{port}"], env, f"whitevec serve ({label})", "/health", 300)


def load_row(
    server: Server,
    path: str,
    kind: str,
    queries_file: Path,
    clients: int,
    requests: int,
    k: int,
    model: str = "",
    body: dict[str, Any] | None = None,
    options: Sequence[str] = (),
) -> dict[str, Any]:
    """One row of the load generator against ``server``; ``body``: more fields of each /search request (the
    search ``mode``, say); ``options``: more of the generator's arguments (``--seconds``, a flood's)."""
    load_before = os.getloadavg()[0]
    cpu_before = server.cpu_seconds()
    command = [
        sys.executable,
        str(LOADGEN),
        "--url",
        server.base + path,
        "--kind",
        kind,
        "--queries",
        str(queries_file),
        "--clients",
        str(clients),
        "--requests",
        str(requests),
        "--k",
        str(k),
        "--model",
        model,
        "--body",
        json.dumps(body or {}),
        *options,
    ]
    if server.reports_encoder():
        command += ["--health-url", server.base + "/health"]
    proc = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
    result: dict[str, Any] | None = None
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
    if result is None:
        raise RuntimeError(f"load generator failed ({proc.returncode}): {proc.stderr[-2000:]}")
    # Server CPU over the whole generator run (its warm-up included): cores the server kept busy.
    result["server_cpu_s"] = server.cpu_seconds() - cpu_before
    before, after = result.pop("health_before", None), result.pop("health_after", None)
    if before is not None and after is not None:  # the encoder over exactly the timed requests
        calls = after["encoder_calls"] - before["encoder_calls"]
        texts = after["encoder_texts"] - before["encoder_texts"]
        busy = after["encoder_busy_s"] - before["encoder_busy_s"]
        result["mean_batch"] = texts / max(calls, 1)
        result["encoder_busy"] = busy / result["seconds"]  # share of the wall time the encoder was in a call
        result["encoder_rate"] = texts / busy if busy > 0 else 0.0  # texts/s while in a call
    result["load_before"] = load_before
    return result


def wait_until_healthy(
    base: str,
    what: str,
    timeout_s: float,
    process: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
    poll_s: float = 0.1,
    path: str = "/health",
) -> None:
    """Poll ``base`` + ``path`` (/health) until it answers 200. RuntimeError naming ``what`` when ``timeout_s``
    passes or ``process`` exits first (with the tail of ``log``, where the server writes: a file, never an
    unread pipe)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process is not None and process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log is not None else ""
            raise RuntimeError(f"{what}: the server exited with {process.returncode}\n{tail}")
        try:
            if httpx.get(f"{base}{path}", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: no answer from {base}{path} within {timeout_s:.0f} s")
        time.sleep(poll_s)
