"""Load benchmark of `whitevec serve`, with the in-process ceiling beside every row.

A served Cranfield index (all-MiniLM-L6-v2, first-last-avg, whitening-256, FAISS flat, cosine) answers POST
/search (one Cranfield query per request, k=10) from 1, 8 and 32 concurrent clients on 127.0.0.1. The clients
are benchmarks/common/loadgen.py: one separate process, one asyncio event loop (aiohttp), so the generator costs
little CPU and none of it runs inside the server's process; its CPU seconds are reported per row, since on a
2-core machine it still shares the cores with the server.

Beside each row:
- the in-process ceiling, measured in a fresh process with the same threads: the same queries encoded and
  searched by ``Retriever.search`` in batches of ``batch_max_texts`` (queries/s; the median of
  ``--ceiling-passes`` passes, each in a fresh random order as a server's mixes come), and one by one (p50 ms);
- the 1-minute load average just before that row (and the conditions of the whole run:
  benchmarks/common/machine.py's ``RunConditions``).

Each server configuration (``--configs``: ``label`` or ``label:setting=value,...`` with ServeSettings fields) runs
in its own `whitevec serve` process, its log in a file. ``--peer infinity`` also runs infinity-emb (from its own
venv, ``--peer-python``) on the same model folder and compares its POST /embeddings with whitevec's /embed. That
venv, offline from the package index (infinity-emb 0.0.78 brings sentence-transformers 3.4.1):

    python3 -m venv /tmp/infinity-venv
    /tmp/infinity-venv/bin/pip install torch==2.13.0 && \
      /tmp/infinity-venv/bin/pip install 'infinity-emb[server,torch]==0.0.78' torch==2.13.0

    python benchmarks/maintained/bench_serve.py --out docs/results/serve.md --label "what this run measures"

``--lock FILE`` makes the script hold an exclusive lock on FILE while it measures (give every job that must not
share the cores the same file); the page says so only then. Every page reports the conditions the run observed:
the CPU, the load average at the start and the end, and the CPU seconds of the run's own processes against those
of all others on the machine.

Every run is appended to benchmarks/results/serve_history.jsonl (every row, every ceiling), and the page ends with
that history, one line per run. ``--render-only`` measures nothing: it writes the page of a run already in the
history (``--run N``, 0 the oldest, -1 the latest), so the page of any earlier run can be read again:

    python benchmarks/maintained/bench_serve.py --render-only --run -1 --out docs/results/serve.md

Needs the serve extra, aiohttp (dev extra) and the shared data ($WHITEVEC_DATA or ../shared/data).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the repository root: benchmarks.common

from benchmarks.common.machine import (  # noqa: E402
    RunConditions,
    command_line,
    conditions_sentence,
    exclusive_lock,
    machine_facts,
    shell_word,
)
from benchmarks.common.pages import NOTES_MARK, kept_notes  # noqa: E402
from benchmarks.common.runs import RESULTS, emit, run_worker, thread_env  # noqa: E402
from benchmarks.common.serving import (  # noqa: E402
    Server,
    add_index_options,
    build_index,
    cranfield_queries,
    load_row,
    whitevec_server,
)

DEFAULT_HISTORY = RESULTS / "serve_history.jsonl"


# ---- the in-process ceiling (a fresh process: --worker) ----------------------------------------------------
def ceiling_worker(index_dir: Path, queries_file: Path, batch: int, compute: str, k: int, passes: int) -> None:
    """Encode+search the queries in one process: in batches of ``batch`` (the median of ``passes`` passes over
    all queries, each in a fresh random order, and their range; and, for reference, 3 passes in the file's
    order) and one by one; also /embed's work.

    Why a fresh order: a server's batches are new mixes of queries; repeating the same batches every pass lets
    oneDNN reuse the kernels it built for their exact shapes, which made the bf16 ceiling higher than any mix
    reaches, by up to a quarter (benchmarks/results/bf16_shapes.md); float32 shows no such gap."""
    from whitevec.service.run import freeze_loaded_heap, load_retriever

    # The servers' own loader; "index" (the index's arithmetic) is also what code without the setting does.
    retriever: Any = load_retriever(index_dir) if compute == "index" else load_retriever(index_dir, compute)
    freeze_loaded_heap()  # as the server does: no full garbage collection over the model inside a timed pass
    queries: list[str] = json.loads(queries_file.read_text())
    for q in queries[:10]:
        retriever.search([q], k=k)

    spread: dict[str, list[float]] = {}
    shuffler = random.Random(0)

    def batched(call: Any, name: str, shuffle: bool = True, n_passes: int = passes) -> float:
        rates = []
        for _ in range(n_passes):
            texts = list(queries)
            if shuffle:
                shuffler.shuffle(texts)
            started = time.perf_counter()
            for i in range(0, len(texts), batch):
                call(texts[i : i + batch])
            rates.append(len(texts) / (time.perf_counter() - started))
        spread[name] = [min(rates), max(rates)]
        return float(statistics.median(rates))

    def single(call: Any) -> float:
        times = []
        for q in queries[:100]:
            started = time.perf_counter()
            call([q])
            times.append(time.perf_counter() - started)
        return float(statistics.median(times) * 1000)

    emit(
        {
            "search_batched_qps": batched(lambda b: retriever.search(b, k=k), "search"),
            "search_single_p50_ms": single(lambda b: retriever.search(b, k=k)),
            "embed_batched_qps": batched(retriever.embed, "embed"),
            "embed_single_p50_ms": single(retriever.embed),
            "search_batched_fixed_order_qps": batched(lambda b: retriever.search(b, k=k), "fixed", False, 3),
            "batched_passes": passes,
            "search_batched_range": spread["search"],
            "embed_batched_range": spread["embed"],
        }
    )


# ---- servers ------------------------------------------------------------------------------------------------
def parse_config(spec: str) -> tuple[str, dict[str, str]]:
    """``label`` or ``label:name=value,name=value`` -> label and the server's environment. A name is a
    ServeSettings field (``concurrency=lock``), or ``env.NAME`` for any other variable of the server process
    (``env.OMP_WAIT_POLICY=PASSIVE``)."""
    label, _, rest = spec.partition(":")
    env: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--configs: {item!r} is not name=value")
        name = name.strip()
        env[name[4:] if name.startswith("env.") else "WHITEVEC_SERVE_" + name.upper()] = value.strip()
    return label, env


def infinity_server(peer_python: Path, model_dir: Path, threads: int, batch: int, dtype: str) -> Server:
    env = {**thread_env(threads), "INFINITY_ANONYMOUS_USAGE_STATS": "0", "DO_NOT_TRACK": "1"}
    env["HF_HUB_OFFLINE"] = "1"
    options = "--host 127.0.0.1 --port {port} --engine torch --device cpu --no-model-warmup --log-level warning"
    command = [str(peer_python), "-m", "infinity_emb.cli", "v2", "--model-id", str(model_dir), *options.split()]
    command += ["--batch-size", str(batch), "--dtype", dtype]
    return Server(command, env, "infinity-emb", "/health", 600)


def wait_for_quiet(below: float, wait_s: float) -> float:
    """The 1-minute load average once it is below ``below``; exits when it stays above for ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        load = os.getloadavg()[0]
        if load < below:
            return load
        if time.monotonic() > deadline:
            raise SystemExit(f"the load average stayed at {load:.2f} (above {below}) for {wait_s:.0f} s; stopped")
        print(f"load average {load:.2f} >= {below}: waiting for a quiet machine", file=sys.stderr)
        time.sleep(10)


# ---- the report ---------------------------------------------------------------------------------------------
def git_commit() -> str:
    git = ["git", "-C", str(REPO)]
    proc = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run([*git, "status", "--porcelain", "src"], capture_output=True, text=True, check=False)
    return proc.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def _ceiling_of(run: dict[str, Any], row: dict[str, Any]) -> tuple[float, float]:
    """(batched queries/s, single p50 ms) in-process, for the row's endpoint and compute, from the ceiling
    measured in the row's own round (runs with --rounds) or the run's one ceiling."""
    ceilings = run["round_ceilings"][row["round"]] if "round" in row else run["ceilings"]
    c = ceilings[row.get("compute", "index")]
    what = "search" if row["endpoint"] == "/search" else "embed"
    return float(c[f"{what}_batched_qps"]), float(c[f"{what}_single_p50_ms"])


def _mean_batch(row: dict[str, Any]) -> str:
    return f"{row['mean_batch']:.1f}" if "mean_batch" in row else "-"


def _ceiling_range(ceiling: dict[str, Any]) -> str:
    """' (median of N passes, range a-b)' where the run recorded them."""
    if "search_batched_range" not in ceiling:
        return ""
    low, high = ceiling["search_batched_range"]
    fixed = ceiling.get("search_batched_fixed_order_qps")
    also = f"; the same batches every pass: {fixed:.0f}" if fixed is not None else ""
    return f" (median of {ceiling['batched_passes']} passes in fresh random orders, {low:.0f}-{high:.0f}{also})"


def _encoder_share(row: dict[str, Any], batched: float) -> str:
    """'busy | rate': the share of the row's wall time the encoder was in a call, and its texts/s while in
    one against the batched ceiling (QPS = busy * rate, so the two say where a shortfall goes)."""
    if "encoder_busy" not in row:
        return "- | -"
    return f"{row['encoder_busy']:.2f} | {row['encoder_rate'] / batched:.2f}"


def round_summary(run: dict[str, Any], rounds: int) -> list[str]:
    """Per server, endpoint and clients: the median over the rounds of QPS and of QPS against that round's own
    ceiling (so a ceiling that drifts between rounds moves both), with the smallest and largest."""
    computes = list(dict.fromkeys(k for c in run["round_ceilings"] for k in c))

    def by_round(key: str) -> str:
        return "; ".join(
            f"`{compute}` " + ", ".join(f"{c[compute][key]:.1f}" for c in run["round_ceilings"])
            for compute in computes
        )

    lines = [
        f"## Medians over {rounds} rounds",
        "",
        "Each round measured the in-process ceiling afresh, then ran every server's rows; a row's `x ceiling` "
        "is against its own round's ceiling (of the row's compute). Ceilings (search, batched, queries/s) by "
        f"round: {by_round('search_batched_qps')}; single-query p50 ms: {by_round('search_single_p50_ms')}.",
        "",
        "| server | endpoint | clients | median QPS | median x ceiling | x ceiling, min-max "
        "| median p50 - single ms |",
        "|---|---|---:|---:|---:|---|---:|",
    ]
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in run["rows"]:
        groups.setdefault((r["server"], r["endpoint"], r["clients"]), []).append(r)
    for (server, endpoint, clients), rows in groups.items():
        ratios = [r["qps"] / _ceiling_of(run, r)[0] for r in rows]
        over = [r["p50_ms"] - _ceiling_of(run, r)[1] for r in rows]
        lines.append(
            f"| {server} | {endpoint} | {clients} | {statistics.median(r['qps'] for r in rows):.1f} | "
            f"{statistics.median(ratios):.2f} | {min(ratios):.2f}-{max(ratios):.2f} | "
            f"{statistics.median(over):+.1f} |"
        )
    return [*lines, ""]


def _short_cpu(cpu: str) -> str:
    return cpu.replace("(R)", "").replace(" Processor", "").strip()


def _median_at(run: dict[str, Any], server: str, endpoint: str, clients: int) -> tuple[float, float] | None:
    """Median QPS and median QPS against the round's own ceiling for one server, endpoint and client count."""
    rows = [r for r in run["rows"] if (r["server"], r["endpoint"], r["clients"]) == (server, endpoint, clients)]
    if not rows:
        return None
    ratios = [r["qps"] / _ceiling_of(run, r)[0] for r in rows]
    return float(statistics.median(r["qps"] for r in rows)), float(statistics.median(ratios))


def history_table(history: list[dict[str, Any]], clients: int = 32) -> list[str]:
    """One line per run: when, where, which code, what it compared, its ceiling, and the first server's (the
    ``default`` where it ran) medians at ``clients`` clients. Every row of every run is in the JSON lines file;
    ``--render-only --run N`` writes any run's whole page."""
    lines = [
        "| run | date | machine | code | label | rounds | load before | ceiling q/s | servers "
        f"| {clients} clients /search: QPS (x ceiling) | /embed: QPS (x ceiling) |",
        "|---:|---|---|---|---|---:|---:|---:|---|---|---|",
    ]
    for number, h in enumerate(history):
        servers = list(dict.fromkeys(r["server"] for r in h["rows"]))
        first = "default" if "default" in servers else servers[0]
        rounds = h.get("round_ceilings") or [h["ceilings"]]
        ceiling = statistics.median(c["index"]["search_batched_qps"] for c in rounds if "index" in c)
        cells = []
        for endpoint in ("/search", "/embed"):
            found = _median_at(h, first, endpoint, clients)
            label = "" if first == "default" else f"{first}: "
            cells.append("-" if found is None else f"{label}{found[0]:.1f} ({found[1]:.2f})")
        lines.append(
            f"| {number} | {h['facts']['date']} | {_short_cpu(h['facts']['cpu'])} | {h['commit']} | "
            f"{h.get('label') or '-'} | {len(rounds)} | {h['load_before']:.2f} | {ceiling:.1f} | "
            f"{', '.join(servers)} | {cells[0]} | {cells[1]} |"
        )
    return lines


def markdown(run: dict[str, Any], history: list[dict[str, Any]], notes: str, rendered_by: str = "") -> str:
    """The page of one run: its rows (and medians over rounds), the history one line per run, then ``notes``
    (the hand-written part below NOTES_MARK, kept when the page is written again). ``rendered_by``: the
    --render-only command when the page is written from the history, not by the run itself."""
    facts = run["facts"]
    # Runs recorded before "command" and "conditions" kept the arguments and the load before only.
    command = run.get("command") or command_line(["benchmarks/maintained/bench_serve.py", *run["argv"]])
    conditions = run.get("conditions") or {
        "cpu": facts["cpu"],
        "cores": facts["cores"],
        "load_before": run["load_before"],
    }
    rendered = (
        [f"- Written from the history by `{rendered_by}` (no measurement); the command above is the run's own"]
        if rendered_by
        else []
    )
    lines = [
        "# Serving benchmark: `whitevec serve` under load",
        "",
        f"Command: `{command}`; machine: {facts['cpu']}, {facts['cores']} cores; date: {facts['date']}",
        "",
        *rendered,
        f"- Code {run['commit']}; torch {facts['versions']['torch']}; server threads {run['threads']}",
        f"- Conditions the run recorded: {conditions_sentence(conditions)} Per row below, the 1-minute load "
        "average just before that row (raised by the rows before it: the server and generator themselves)",
        f"- Index: Cranfield {run['documents']} documents, {run['model']}, {run['pooling']}, {run['transform']}, "
        "FAISS flat, cosine",
        f"- Load: {run['requests']} POST requests per row (one Cranfield query each, k={run['k']}, the "
        f"{run['n_queries']} queries in turn), closed loop: each client sends its next request when its answer "
        "arrives. Clients: benchmarks/common/loadgen.py, one separate process with one asyncio event loop "
        "(aiohttp) on "
        "the same 2 cores as the server; `gen CPU` is its CPU time per request, `server cores` the server "
        "process's CPU seconds per wall second. From the server's /health just around the timed requests: "
        "`mean batch` (texts per encoder call), `encoder busy` (the share of the wall time the encoder thread "
        "was in a call) and `call rate x ceiling` (its texts/s while in a call, against the batched ceiling); "
        "`x ceiling` is about their product, so the two say whether a shortfall is time the encoder waited "
        "or calls that ran slower",
        *(
            f"- In-process ceiling, compute `{compute}` (a fresh process, 2 threads, `Retriever.search` on the "
            f"same queries): **{c['search_batched_qps']:.1f} queries/s** in batches of {run['batch']}"
            f"{_ceiling_range(c)}, "
            f"**{c['search_single_p50_ms']:.1f} ms** p50 one by one; `Retriever.embed`: "
            f"{c['embed_batched_qps']:.1f} texts/s batched, {c['embed_single_p50_ms']:.1f} ms p50 alone"
            for compute, c in run["ceilings"].items()
        ),
        "",
        "| server | compute | endpoint | clients | QPS | x ceiling | p50 ms | p50 - single ms | p99 ms | "
        "server cores | mean batch | encoder busy | call rate x ceiling | gen CPU ms/req | load before | errors |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rounds = len(run.get("round_ceilings", [])) or 1
    if rounds > 1:
        lines[-2] = "| round " + lines[-2]
        lines[-1] = "|---:" + lines[-1]
    for r in run["rows"]:
        batched, single = _ceiling_of(run, r)
        lines.append(
            (f"| {r['round'] + 1} " if rounds > 1 else "")
            + f"| {r['server']} | {r['compute']} | {r['endpoint']} | {r['clients']} | {r['qps']:.1f} | "
            f"{r['qps'] / batched:.2f} | "
            f"{r['p50_ms']:.1f} | {r['p50_ms'] - single:+.1f} | {r['p99_ms']:.1f} | "
            f"{r['server_cpu_s'] / r['seconds']:.2f} | {_mean_batch(r)} | {_encoder_share(r, batched)} | "
            f"{1000 * r['generator_cpu_s'] / r['requests']:.2f} | "
            f"{r['load_before']:.2f} | {r['errors']} |"
        )
    lines += ["", f"Errors in all rows: {sum(r['errors'] for r in run['rows'])}.", ""]
    if rounds > 1:
        lines += round_summary(run, rounds)
    if history:
        lines += [
            "## Every run of this benchmark (benchmarks/results/serve_history.jsonl)",
            "",
            "Each change to the server was measured before and after with this script; the runs, oldest first, "
            "one line each. `ceiling q/s`: the in-process batched ceiling (compute `index`, the median over the "
            "run's rounds); the last two columns: the `default` server (else the first server, named) at 32 "
            "clients, medians over the rounds, `x ceiling` against each round's own ceiling. Every row of a run: "
            "`python benchmarks/maintained/bench_serve.py --render-only --run N --out FILE`.",
            "",
            *history_table(history),
            "",
        ]
    lines += [NOTES_MARK, "", notes.strip(), ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", choices=["ceiling"], default=None, help=argparse.SUPPRESS)
    parser.add_argument("--queries-file", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--compute", default="index", help=argparse.SUPPRESS)
    add_index_options(parser)
    parser.add_argument("--requests", type=int, default=600, help="requests per row")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--configs", nargs="+", default=["default"], help="label or label:setting=value,...")
    parser.add_argument("--endpoints", default="/search", help="/search and/or /embed, comma-separated")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64, help="batch of the in-process ceiling (batch_max_texts)")
    parser.add_argument(
        "--ceiling-passes",
        type=int,
        default=9,
        help="passes over the queries for the batched ceiling (its median; 3 until 2026-12-04, which moved by up "
        "to a quarter between rounds)",
    )
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the server and the ceiling")
    parser.add_argument("--peer", choices=["infinity"], default=None)
    parser.add_argument("--peer-dtype", default="float32", help="infinity-emb --dtype")
    parser.add_argument("--peer-python", type=Path, default=Path("/tmp/infinity-venv/bin/python"))
    parser.add_argument("--out", type=Path, default=None, help="Markdown file to write")
    parser.add_argument(
        "--history",
        default=str(DEFAULT_HISTORY),
        help="JSON lines file each run is appended to ('' for none)",
    )
    parser.add_argument("--quiet-below", type=float, default=0.6, help="wait for a 1-minute load average below")
    parser.add_argument("--quiet-wait", type=float, default=240, help="seconds to wait for it, then refuse")
    parser.add_argument("--code", default="", help="which code the servers ran (default: this tree's commit)")
    parser.add_argument(
        "--label",
        default="",
        help="required when measuring: what this run measures, the change or setting it compares (the history's "
        "label column)",
    )
    parser.add_argument(
        "--lock",
        type=Path,
        default=None,
        help="hold an exclusive lock on this file while measuring (every job that must not share the cores takes "
        "the same one); the page then says so",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="repeat (ceiling, then every server's rows) this many times; medians per row over the rounds",
    )
    parser.add_argument(
        "--render-only",
        action="store_true",
        help="measure nothing: write the page (--out, or stdout) of run --run of the --history file",
    )
    parser.add_argument(
        "--run", type=int, default=-1, help="with --render-only: the run's number (-1: the latest)"
    )
    args = parser.parse_args()

    if args.worker == "ceiling":
        ceiling_worker(args.index, args.queries_file, args.batch, args.compute, args.k, args.ceiling_passes)
        return
    if args.render_only:
        render_only(Path(args.history), args.run, args.out)
        return

    if not args.label.strip():
        parser.error("--label is required: say what this run measures (the change or setting it compares)")
    with exclusive_lock(args.lock) as lock:
        run = measure(args, lock)
    history: list[dict[str, Any]] = []
    if args.history:
        history_file = Path(args.history)
        history_file.parent.mkdir(parents=True, exist_ok=True)
        with history_file.open("a") as handle:
            handle.write(json.dumps(run) + "\n")
        history = [json.loads(line) for line in history_file.read_text().splitlines() if line.strip()]
    write_page(markdown(run, history, kept_notes(args.out)), args.out)
    if sum(r["errors"] for r in run["rows"]):
        raise SystemExit(1)


def measure(args: argparse.Namespace, lock: str | None) -> dict[str, Any]:
    """One run: every round's ceilings and rows (and the peer's), with the conditions it observed."""
    load_before = wait_for_quiet(args.quiet_below, args.quiet_wait)
    observed = RunConditions(lock)  # from here: what the page's conditions sentence reports
    if not (args.index / "manifest.json").is_file():
        build_index(args.index, args.data_dir, args.model, args.pooling, args.transform)
    queries = cranfield_queries(args.data_dir)
    queries_file = Path(tempfile.gettempdir()) / "whitevec-bench-serve-queries.json"
    queries_file.write_text(json.dumps(queries))
    clients = [int(c) for c in args.clients.split(",")]
    endpoints = [e.strip() for e in args.endpoints.split(",") if e.strip()]

    configs = [parse_config(spec) for spec in args.configs]

    def measure_ceilings() -> dict[str, dict[str, Any]]:
        ceilings: dict[str, dict[str, Any]] = {}
        for compute in dict.fromkeys(env.get("WHITEVEC_SERVE_COMPUTE", "index") for _, env in configs):
            worker_args = ["ceiling", "--index", str(args.index), "--queries-file", str(queries_file)]
            worker_args += ["--batch", str(args.batch), "--k", str(args.k), "--compute", compute]
            worker_args += ["--ceiling-passes", str(args.ceiling_passes)]
            ceiling = run_worker(Path(__file__), worker_args, timeout=900)  # the machine's 2 threads
            if "error" in ceiling:
                raise SystemExit(f"ceiling measurement failed: {ceiling['error']}")
            print(f"ceiling ({compute}): {ceiling}", file=sys.stderr)
            ceilings[compute] = ceiling
        return ceilings

    rows: list[dict[str, Any]] = []
    round_ceilings: list[dict[str, dict[str, Any]]] = []

    def record(server_label: str, endpoint: str, compute: str, result: dict[str, Any]) -> None:
        if args.rounds > 1:
            result = {"round": len(round_ceilings) - 1, **result}
        rows.append({"server": server_label, "endpoint": endpoint, "compute": compute, **result})
        print(
            f"{server_label:16s} {endpoint:12s} clients={result['clients']:2d} qps={result['qps']:.1f} "
            f"p50={result['p50_ms']:.1f}ms p99={result['p99_ms']:.1f}ms "
            f"server_cores={result['server_cpu_s'] / result['seconds']:.2f} "
            f"batch={result.get('mean_batch', 0):.1f} busy={result.get('encoder_busy', 0):.2f} "
            f"rate={result.get('encoder_rate', 0):.0f}/s errors={result['errors']} "
            f"{result['first_error'] or ''}",
            file=sys.stderr,
        )

    for _ in range(max(1, args.rounds)):
        round_ceilings.append(measure_ceilings())
        for label, env in configs:
            server = whitevec_server(args.index, env, args.threads, label)
            try:
                for endpoint in endpoints:
                    kind = endpoint.strip("/")
                    for c in clients:
                        result = load_row(server, endpoint, kind, queries_file, c, args.requests, args.k)
                        record(label, endpoint, env.get("WHITEVEC_SERVE_COMPUTE", "index"), result)
            finally:
                server.stop()
    ceilings = round_ceilings[0]
    if args.peer == "infinity":
        from whitevec.encoders.models.resolution import resolve_model

        model_dir = Path(resolve_model(args.model))
        peer = infinity_server(args.peer_python, model_dir, args.threads, args.batch, args.peer_dtype)
        try:
            for c in clients:
                result = load_row(
                    peer,
                    "/embeddings",
                    "openai-embeddings",
                    queries_file,
                    c,
                    args.requests,
                    args.k,
                    model=str(model_dir),
                )
                record(f"infinity-emb ({args.peer_dtype})", "/embeddings", "index", result)
        finally:
            peer.stop()

    manifest = json.loads((args.index / "manifest.json").read_text())
    return {
        "label": args.label,
        "commit": args.code or git_commit(),
        "facts": machine_facts("fastapi", "uvicorn", "aiohttp"),
        "argv": sys.argv[1:],
        "command": command_line(),
        "load_before": load_before,
        "conditions": observed.record(),  # every child process has been waited for
        "threads": args.threads,
        "batch": args.batch,
        "k": args.k,
        "requests": args.requests,
        "n_queries": len(queries),
        "documents": manifest["count"],
        "model": args.model,
        "pooling": manifest["pooling"],
        "transform": args.transform,
        "ceilings": ceilings,
        **({"round_ceilings": round_ceilings} if args.rounds > 1 else {}),
        "rows": rows,
    }


def write_page(text: str, out: Path | None) -> None:
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(out)


def render_only(history_file: Path, number: int, out: Path | None) -> None:
    """Write the page of run ``number`` of the history without measuring anything."""
    history = [json.loads(line) for line in history_file.read_text().splitlines() if line.strip()]
    if not -len(history) <= number < len(history):
        raise SystemExit(f"--run {number}: {history_file} holds runs 0 to {len(history) - 1}")
    number %= len(history)
    command = f"python benchmarks/maintained/bench_serve.py --render-only --run {number}"
    if history_file.resolve() != DEFAULT_HISTORY:
        command += f" --history {shell_word(str(history_file))}"
    write_page(markdown(history[number], history, kept_notes(out), rendered_by=command), out)


if __name__ == "__main__":
    main()
