"""Load benchmark of `whitevec serve`: a fixed number of /search requests from 1, 8 and 32 concurrent clients on
127.0.0.1 against a served Cranfield index (all-MiniLM-L6-v2, first-last-avg, whitening-256, flat cosine).

Each concurrency mode of the server (``batch``: waiting requests merged into one encoder call; ``lock``: one
request at a time) is measured in its own server process started with the real command. Reports QPS, p50 and
p99 latency and the error count, and writes a Markdown table.

    flock /tmp/whitevec-heavy.lock python benchmarks/bench_serve.py --out docs/results/serve.md

Needs the serve extra and the shared data ($WHITEVEC_DATA or ../shared/data).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.service_helpers import wait_until_healthy  # noqa: E402  (the repository root is on the path now)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def build_index(index_dir: Path, data_dir: Path | None, model: str, pooling: str, transform: str) -> None:
    from whitevec.datasets import resolve_data_dir
    from whitevec.datasets.retrieval import read_cranfield
    from whitevec.encoder import Encoder
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


def start_server(index_dir: Path, mode: str, threads: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    # "batch:5" = batch mode waiting up to 5 ms for more requests; plain "batch" uses the default wait.
    name, _, wait = mode.partition(":")
    env = {
        **os.environ,
        "WHITEVEC_SERVE_CONCURRENCY": name,
        **({"WHITEVEC_SERVE_BATCH_WAIT_MS": wait} if wait else {}),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
    }
    env.pop("WHITEVEC_API_KEY", None)
    command = [sys.executable, "-c", "from whitevec.cli import main; main()", "serve", str(index_dir)]
    # The server logs every request: to a file, since a pipe nobody reads would fill and stall it mid-run.
    log = Path(tempfile.gettempdir()) / f"whitevec-bench-serve-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([*command, "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=out)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base, f"whitevec serve ({mode})", 300, proc, log, poll_s=0.5)
    except BaseException:
        proc.kill()
        raise
    return proc, base


def run_load(base: str, queries: list[str], clients: int, n_requests: int, k: int) -> dict[str, float]:
    http = httpx.Client(base_url=base, timeout=120, limits=httpx.Limits(max_connections=clients))
    for q in queries[:10]:  # warm up: first calls pay for lazy initialisation
        http.post("/search", json={"queries": [q], "k": k})
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    counter = iter(range(n_requests))

    def client() -> None:
        nonlocal errors
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            started = time.perf_counter()
            try:
                response = http.post("/search", json={"queries": [queries[i % len(queries)]], "k": k})
                ok = response.status_code == 200 and len(response.json()["results"][0]["ids"]) == k
            except httpx.HTTPError:
                ok = False
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                errors += 0 if ok else 1

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=clients) as pool:
        for future in [pool.submit(client) for _ in range(clients)]:
            future.result()
    wall = time.perf_counter() - started
    http.close()
    ms = np.array(latencies) * 1000
    return {
        "clients": clients,
        "requests": n_requests,
        "seconds": wall,
        "qps": n_requests / wall,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(statistics.fmean(ms)),
        "errors": errors,
    }


def take_screenshot(base: str, path: Path, query: str) -> None:
    import tempfile

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    os.environ.setdefault("SE_OFFLINE", "true")
    with tempfile.TemporaryDirectory() as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1100,1000",
            f"--user-data-dir={profile}",
        ):
            options.add_argument(flag)
        driver = webdriver.Chrome(options=options, service=Service(executable_path="/usr/bin/chromedriver"))
        try:
            driver.get(base + "/")
            box = driver.find_element(By.ID, "query")
            box.send_keys(query)
            k_box = driver.find_element(By.ID, "k")
            k_box.clear()
            k_box.send_keys("5")
            box.send_keys(Keys.ENTER)
            WebDriverWait(driver, 60).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results li")) == 5)
            driver.save_screenshot(str(path))
        finally:
            driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, default=Path("/tmp/whitevec-bench/cranfield-minilm-w256"))
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--pooling", default="first-last-avg")
    parser.add_argument("--transform", default="whitening-256")
    parser.add_argument("--requests", type=int, default=300, help="requests per concurrency level")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--modes", default="batch:0,batch:2,lock", help="batch:WAIT_MS or lock")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2, help="OMP threads of the server")
    parser.add_argument("--out", type=Path, default=None, help="Markdown file to write")
    parser.add_argument("--screenshot", type=Path, default=None, help="also save a screenshot of the page")
    args = parser.parse_args()

    if not (args.index / "manifest.json").is_file():
        build_index(args.index, args.data_dir, args.model, args.pooling, args.transform)
    queries = cranfield_queries(args.data_dir)
    clients = [int(c) for c in args.clients.split(",")]
    rows: list[dict[str, object]] = []
    load_before = os.getloadavg()
    for mode in args.modes.split(","):
        proc, base = start_server(args.index, mode, args.threads)
        try:
            for c in clients:
                result = run_load(base, queries, c, args.requests, args.k)
                row = {"mode": mode, **result}
                rows.append(row)
                print(
                    f"{mode:5s} clients={c:2d} qps={result['qps']:.1f} p50={result['p50_ms']:.1f}ms "
                    f"p99={result['p99_ms']:.1f}ms errors={result['errors']}",
                    file=sys.stderr,
                )
            if args.screenshot is not None and mode == args.modes.split(",")[0]:
                take_screenshot(base, args.screenshot, "what is the effect of slipstream on wing lift")
        finally:
            proc.terminate()
            proc.wait(30)
    load_after = os.getloadavg()
    total_errors = sum(int(r["errors"]) for r in rows)  # type: ignore[call-overload]
    lines = [
        "# Serving benchmark: `whitevec serve` under load",
        "",
        f"- Date: {dt.date.today().isoformat()}",
        f"- CPU: {cpu_name()}, {os.cpu_count()} logical cores visible; server OMP threads {args.threads}; "
        f"load average before/after {load_before[0]:.1f}/{load_after[0]:.1f} (the machine is shared, "
        "so absolute numbers are pessimistic; compare rows with each other)",
        f"- Index: Cranfield 1400 documents, {args.model}, pooling {args.pooling}, {args.transform}, "
        "FAISS flat, cosine",
        f"- Load: {args.requests} POST /search requests per row (one Cranfield query each, k={args.k}), "
        "clients on the same machine over 127.0.0.1, one server process (`whitevec serve`, 1 worker) per mode",
        f"- Command: `flock /tmp/whitevec-heavy.lock python benchmarks/bench_serve.py {' '.join(sys.argv[1:])}`",
        "",
        "| mode | clients | requests | QPS | p50 ms | p99 ms | mean ms | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['clients']} | {r['requests']} | {r['qps']:.1f} | {r['p50_ms']:.1f} | "
            f"{r['p99_ms']:.1f} | {r['mean_ms']:.1f} | {r['errors']} |"
        )
    lines += ["", f"Errors in all rows: {total_errors}.", ""]
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    if total_errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
