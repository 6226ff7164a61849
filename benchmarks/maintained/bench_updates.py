"""Regenerate docs/results/updates.md (and updates.json): what writes to a built index cost (issue 40's targets:
an add of 10 documents the same within 2x at 10k and 1M vectors and < 50 ms at 1M; a delete of 1% of 1M ids
< 1 s; searches while adds stream in at p99 <= 2x the idle p99, with zero errors and every version whole; SIGKILL
at random points of writes 50+ times with every acknowledged write present).

Parts:

- ``store``: synthetic vectors (the 1-bit benchmark's seeded clustered unit vectors, benchmarks/common/data.py)
  through the Python API with an encoder that returns given rows (no encoding is timed), flat indexes in float32
  and sq8 (a trained encoding: new segments are encoded with the build's training), 10k, 100k and 1M documents.
  After the build: 10 adds of 10 documents (the first writes the trained, empty template of the index once:
  reported apart; the others' median is the steady cost), single-query search latency idle (k = 10, dense) and
  while another process (the load generator: this script's ``--writer``) adds 10 documents 10 times a second
  (100 documents a second) to the same index, a delete of 1% of the ids (one call), a compaction (every segment
  merged, the deleted rows dropped); the folder's disk use after each (``du``: a file hard-linked into several
  versions counts once; only the current version is kept). While streaming, the searching process reloads
  the index twice (checksums verified) and checks the version it got is one the writer wrote, with the
  document count the writer acknowledged for it.
- ``quality``: Cranfield with the distilled static table of all-MiniLM-L6-v2 (benchmarks.common.data's
  ``default_static_table``), BM25 beside the vectors: nDCG@10 of dense, lexical and hybrid search on a fresh
  build of all 1,400 documents, on an index built from the first tenth and then given the other nine tenths in
  nine adds (BM25 weighted by every segment's live documents), and on that index after ``compact()``;
  then, end to end with the encoding, 10 adds of 10 documents to it and a delete of the 100.
- ``faults``: tests/test_update_faults.py with ``WHITEVEC_FAULT_KILLS`` kills (60 by default; writes killed at
  chosen and random points), its summary and whether it passed.

    python -W ignore benchmarks/maintained/bench_updates.py [--part store|quality|faults|all]
        [--sizes 10000,100000,1000000] [--dim 384] [--stream-seconds 20] [--lock FILE]

Each part writes its section of updates.json and renders the page; run the store part alone on a quiet machine
(the page states the load it saw).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import clustered_unit_vectors, default_static_table
from benchmarks.common.machine import (
    RunConditions,
    command_line,
    conditions_sentence,
    exclusive_lock,
    machine_facts,
    results_header,
)
from benchmarks.common.pages import NOTES_MARK, kept_notes
from benchmarks.common.scale import RowEncoder

from whitevec.datasets.retrieval import Document
from whitevec.errors import WhitevecError
from whitevec.index import Retriever
from whitevec.utils.io import atomic_path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "results"
ENCODINGS = ("float32", "sq8")
ADDS = 10  # adds of BATCH documents after the build: the first writes the template
BATCH = 10
STREAM_ROWS = 20_000  # rows kept for the writer process's documents
QUERIES = 300  # single-query searches per latency figure
K = 10


# --- the store part ----------------------------------------------------------------------------------------------
def disk_bytes(folder: Path) -> int:
    """Bytes the folder takes on disk, each file (inode) once however many names it has: ``du``'s rule."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root, _dirs, names in os.walk(folder):
        for name in names:
            info = os.lstat(os.path.join(root, name))
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def timed_ms(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return 1e3 * (time.perf_counter() - started)


def percentiles(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(float(np.percentile(values, 50)), 3),
        "p99_ms": round(float(np.percentile(values, 99)), 3),
        "n": len(values),
    }


def search_latencies(
    retriever: Retriever, queries: list[str], until: Callable[[], bool] | None = None
) -> list[float]:
    """One query a call, in turn; ``until``: keep going (cycling) until it says stop."""
    out: list[float] = []
    i = 0
    while (until is None and i < len(queries)) or (until is not None and not until()):
        query = queries[i % len(queries)]
        out.append(timed_ms(functools.partial(retriever.search, [query], K, mode="dense")))
        i += 1
    return out


def start_writer(folder: Path, rows_file: Path, log: Path, seconds: float, dim: int) -> subprocess.Popen[str]:
    """The load generator: this script as ``--writer`` in its own process."""
    args = ["--writer", str(folder), "--rows", str(rows_file), "--seconds", str(seconds), "--dim", str(dim)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-W", "ignore", __file__, *args, "--log", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def writer_main(folder: Path, rows_file: Path, seconds: float, dim: int, log: Path) -> None:
    """Add BATCH documents ``w0, w1, ...`` (texts: rows of ``rows_file``) 10 times a second for ``seconds``;
    each acknowledged version's generation and count go to ``log`` as they are written, a summary to stdout."""
    retriever = Retriever.load(folder, encoder=RowEncoder(np.load(rows_file, mmap_mode="r"), dim))
    latencies: list[float] = []
    errors: list[str] = []
    started = time.perf_counter()
    next_row = 0
    with log.open("w") as out:
        out.write(json.dumps([retriever.manifest.get("generation", 0), retriever.count]) + "\n")
        while (due := started + len(latencies) / 10) < started + seconds:
            time.sleep(max(0.0, due - time.perf_counter()))  # paced: 10 adds a second; a late one starts at once
            docs = [Document(f"w{next_row + i}", str(next_row + i)) for i in range(BATCH)]
            try:
                latencies.append(timed_ms(functools.partial(retriever.add, docs)))
            except Exception as exc:  # counted and reported: the target is zero
                errors.append(f"{type(exc).__name__}: {exc}")
                latencies.append(float("nan"))
            next_row += BATCH
            out.write(json.dumps([retriever.manifest.get("generation", 0), retriever.count]) + "\n")
            out.flush()
    wall = time.perf_counter() - started
    done = [v for v in latencies if v == v]
    summary = {"adds": len(done), "docs_per_s": round(BATCH * len(done) / wall, 1), "errors": len(errors)}
    print("RESULT " + json.dumps({**summary, "first_error": errors[:1], "add": percentiles(done)}), flush=True)


def check_versions(folder: Path, encoder: RowEncoder, log: Path) -> dict[str, Any]:
    """Load the index (checksums verified) and check its (generation, count) is one the writer acknowledged or is
    about to (the version in flight); the load's time."""
    started = time.perf_counter()
    try:
        with Retriever.load(folder, encoder=encoder) as loaded:
            seen = (int(loaded.manifest.get("generation", 0)), loaded.count)
    except WhitevecError as exc:  # a load that keeps losing to the writer's swaps gives up: reported
        return {"error": str(exc), "consistent": False, "load_s": round(time.perf_counter() - started, 2)}
    load_s = time.perf_counter() - started
    written = {tuple(json.loads(line)) for line in log.read_text().splitlines() if line.strip()}
    latest = max(written)
    # The writer logs a version just after its add returns: the one on disk may be the add in flight (its
    # generation one or two ahead: an add, then the merge it called for).
    ok = seen in written or (seen[0] > latest[0] and seen[1] == latest[1] + BATCH)
    return {"generation": seen[0], "count": seen[1], "consistent": ok, "load_s": round(load_s, 2)}


def stream(retriever: Retriever, folder: Path, rows: np.ndarray, queries: list[str], seconds: float) -> dict:
    """Search latencies while the writer process streams adds into ``folder``; two reloads checked."""
    work = folder.parent
    rows_file, log = work / "writer-rows.npy", work / "writer.log"
    np.save(rows_file, rows[-STREAM_ROWS - QUERIES : -QUERIES])
    writer = start_writer(folder, rows_file, log, seconds, rows.shape[1])
    while not log.exists() or not log.read_text():
        if writer.poll() is not None:
            break
        time.sleep(0.05)  # waiting for the writer to have loaded the index
    started = time.perf_counter()
    half = search_latencies(retriever, queries, until=lambda: time.perf_counter() - started > seconds / 2)
    checks = [check_versions(folder, retriever.encoder, log)]  # type: ignore[arg-type]
    rest = search_latencies(retriever, queries, until=lambda: writer.poll() is not None)
    out, err = writer.communicate()
    checks.append(check_versions(folder, retriever.encoder, log))  # type: ignore[arg-type]
    result = next((json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")), None)
    return {
        "search": percentiles(half + rest),
        "writer": result or {"errors": 1, "first_error": [err.strip().splitlines()[-1:]]},
        "versions": checks,
    }


def store_case(work: Path, n: int, encoding: str, dim: int, stream_s: float) -> dict[str, Any]:
    """One index of ``n`` documents: build, adds, idle and streaming search, delete 1%, compact."""
    rows = np.concatenate(clustered_unit_vectors(n + ADDS * BATCH + STREAM_ROWS, QUERIES, d=dim))
    encoder = RowEncoder(rows, dim)
    folder = work / f"{encoding}-{n}" / "idx"
    docs = [Document(str(i), str(i)) for i in range(n)]
    params = {"encoding": encoding, "train_sample": 20_000}
    result: dict[str, Any] = {}
    started = time.perf_counter()
    retriever = Retriever.build(docs, folder, encoder=encoder, transform="none", index_params=params)
    result["build_s"] = round(time.perf_counter() - started, 2)
    result["disk_built"] = disk_bytes(folder)
    adds = []
    for j in range(ADDS):
        batch = [Document(str(n + BATCH * j + i), str(n + BATCH * j + i)) for i in range(BATCH)]
        adds.append(timed_ms(functools.partial(retriever.add, batch)))
    result["add_first_ms"] = round(adds[0], 2)
    result["add_steady_ms"] = round(statistics.median(adds[1:]), 2)
    result["add_steady_all_ms"] = [round(v, 2) for v in adds[1:]]
    result["segments_after_adds"] = len(retriever.manifest.get("segments", [None]))
    result["disk_after_adds"] = disk_bytes(folder)
    queries = [str(len(rows) - QUERIES + j) for j in range(QUERIES)]
    search_latencies(retriever, queries[:30])  # warm-up
    started = time.perf_counter()  # idle for as long as the stream lasts: p99s of alike samples
    idle = search_latencies(retriever, queries, until=lambda: time.perf_counter() - started > stream_s)
    result["search_idle"] = percentiles(idle)
    result["stream"] = stream(retriever, folder, rows, queries, stream_s)
    retriever.close()
    retriever = Retriever.load(folder, encoder=encoder)  # the writer's versions: a write needs the current one
    doomed = [str(i) for i in np.random.default_rng(1).choice(n, n // 100, replace=False)]
    deleted: list[int] = []
    result["delete_1pct_ms"] = round(timed_ms(lambda: deleted.append(retriever.delete(doomed).deleted)), 2)
    result["deleted"] = deleted[0]
    result["disk_after_delete"] = disk_bytes(folder)
    result["compact_s"] = round(timed_ms(retriever.compact) / 1e3, 2)
    result["disk_after_compact"] = disk_bytes(folder)
    result["count_after"] = retriever.count
    retriever.close()
    return result


def part_store(sizes: list[int], dim: int, stream_s: float) -> dict[str, Any]:
    cases: dict[str, Any] = {}
    for n in sizes:
        for encoding in ENCODINGS:
            with tempfile.TemporaryDirectory(prefix="whitevec-updates-") as work:
                cases[f"{encoding} {n}"] = {
                    "n": n,
                    "encoding": encoding,
                    **store_case(Path(work), n, encoding, dim, stream_s),
                }
            print(f"store: {encoding} {n} done", file=sys.stderr, flush=True)
    return {"dim": dim, "stream_s": stream_s, "cases": cases}


# --- the quality part --------------------------------------------------------------------------------------------
def ndcg_by_mode(retriever: Retriever, judged: dict[str, str], qrels: dict[str, dict[str, int]]) -> dict:
    from whitevec.evaluation.retrieval import ndcg_at_k

    out = {}
    for mode in ("dense", "lexical", "hybrid"):
        found = retriever.search(list(judged.values()), K, mode=mode)
        scores = [ndcg_at_k([h.id for h in hits], qrels[q], K) for q, hits in zip(judged, found, strict=True)]
        out[mode] = round(100 * float(np.mean(scores)), 2)
    return out


def part_quality(work: Path, model: str) -> dict[str, Any]:
    """nDCG@10 on Cranfield: a fresh build, ten batches (one build and nine adds), then compacted."""
    from whitevec.datasets.retrieval import load_retrieval_dataset
    from whitevec.encoders.loading import load_encoder

    dataset = load_retrieval_dataset("cranfield")
    judged = dataset.judged_queries()
    encoder = load_encoder(default_static_table(model))
    build = {"encoder": encoder, "transform": "none", "lexical": "bm25"}
    with Retriever.build(dataset.corpus, work / "fresh", **build) as fresh:  # type: ignore[arg-type]
        rows = {"fresh build": ndcg_by_mode(fresh, judged, dataset.qrels)}
    batches = [list(b) for b in np.array_split(np.array(dataset.corpus, dtype=object), 10)]
    with Retriever.build(batches[0], work / "batched", **build) as batched:  # type: ignore[arg-type]
        for batch in batches[1:]:
            batched.add(batch)
        segments = len(batched.manifest.get("segments", [None]))
        rows[f"10 batches ({segments} segments)"] = ndcg_by_mode(batched, judged, dataset.qrels)
        batched.compact()
        rows["10 batches, compacted"] = ndcg_by_mode(batched, judged, dataset.qrels)
        timings = end_to_end(batched, dataset.corpus)
    return {
        "collection": "cranfield",
        "model": f"static table of {model}",
        "queries": len(judged),
        "rows": rows,
        "end_to_end": timings,
    }


def end_to_end(retriever: Retriever, corpus: list[Document]) -> dict[str, Any]:
    """ADDS adds of BATCH documents (copies of the collection's under new ids) with the encoding included, then one
    delete of all of them."""
    adds, ids = [], []
    for j in range(ADDS):
        docs = [Document(f"{d.id}-copy{j}", d.text, d.metadata) for d in corpus[BATCH * j : BATCH * (j + 1)]]
        ids += [d.id for d in docs]
        adds.append(timed_ms(functools.partial(retriever.add, docs)))
    return {
        "add_first_ms": round(adds[0], 2),
        "add_steady_ms": round(statistics.median(adds[1:]), 2),
        "delete_ms": round(timed_ms(functools.partial(retriever.delete, ids)), 2),
        "deleted": len(ids),
        "documents": retriever.count,
    }


# --- the faults part ---------------------------------------------------------------------------------------------
def part_faults(kills: int, seed: int) -> dict[str, Any]:
    """tests/test_update_faults.py with ``kills`` kills: passed or not, its summary line, its time."""
    env = {**os.environ, "WHITEVEC_FAULT_KILLS": str(kills), "WHITEVEC_FAULT_SEED": str(seed)}
    command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "tests/test_update_faults.py"]
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    summary = re.search(r"^seed \d+: \d+ kills, (\{.*\})$", proc.stdout, re.MULTILINE)
    failure = [line for line in proc.stdout.splitlines() if line.startswith("E ")][:3]
    return {
        "kills": kills,
        "seed": seed,
        "passed": proc.returncode == 0,
        "outcomes": json.loads(summary.group(1).replace("'", '"')) if summary else None,
        "failure": failure,
        "seconds": round(time.perf_counter() - started, 1),
    }


# --- the page ----------------------------------------------------------------------------------------------------
def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f}"


def _version_text(version: dict[str, Any]) -> str:
    if "error" in version:
        return f"load failed after {version['load_s']:.0f} s"
    text = f"{version['generation']}: {version['count']:,} in {version['load_s']:.1f} s"
    return text if version["consistent"] else text + " (NOT A VERSION WRITTEN)"


def store_lines(store: dict[str, Any]) -> list[str]:
    lines = [
        f"{store['dim']}-d vectors; streaming for {store['stream_s']:g} s. Disk in MB (`du`: hard links once).",
        "",
        "| index | build s | add 10: first ms | add 10: steady ms | delete 1% ms | compact s | disk: built "
        "| after adds | after delete | after compact |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in store["cases"].values():
        lines.append(
            f"| {c['encoding']} {c['n']:,} | {c['build_s']:.1f} | {c['add_first_ms']:.1f} "
            f"| {c['add_steady_ms']:.1f} | {c['delete_1pct_ms']:.1f} | {c['compact_s']:.2f} "
            f"| {_mb(c['disk_built'])} | "
            f"{_mb(c['disk_after_adds'])} | {_mb(c['disk_after_delete'])} | {_mb(c['disk_after_compact'])} |"
        )
    lines += [
        "",
        "Search (one query a call, k = 10, dense) idle and while the writer process adds 10 documents 10 times a "
        "second (idle: for as long); the writer's own add latency, its rate, its errors; the two versions the "
        "searching process loaded meanwhile (generation: documents, the load's time), each one the writer wrote.",
        "",
        "| index | idle p50 ms | idle p99 ms | streaming p50 ms | streaming p99 ms | p99 ratio | writer docs/s "
        "| writer add p50 / p99 ms | errors | versions loaded |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in store["cases"].values():
        idle, busy, writer = c["search_idle"], c["stream"]["search"], c["stream"]["writer"]
        add = writer.get("add", {"p50_ms": float("nan"), "p99_ms": float("nan")})
        versions = ", ".join(_version_text(v) for v in c["stream"]["versions"])
        lines.append(
            f"| {c['encoding']} {c['n']:,} | {idle['p50_ms']:.2f} | {idle['p99_ms']:.2f} | {busy['p50_ms']:.2f} "
            f"| {busy['p99_ms']:.2f} | {busy['p99_ms'] / idle['p99_ms']:.2f} | {writer.get('docs_per_s', 0):.0f} "
            f"| {add['p50_ms']:.1f} / {add['p99_ms']:.1f} | {writer.get('errors', '?')} | {versions} |"
        )
    return lines


def target_lines(data: dict[str, Any]) -> list[str]:
    """Issue 40's targets against the figures measured (met, missed, or not measured)."""
    cases = data.get("store", {}).get("cases", {})
    flat = {c["n"]: c for c in cases.values() if c["encoding"] == "float32"}
    lines = ["| target | measured | |", "|---|---|---|"]

    def row(target: str, measured: str, met: bool | None) -> None:
        lines.append(
            f"| {target} | {measured} | {'not measured' if met is None else 'met' if met else 'missed'} |"
        )

    small, large = (flat[min(flat)], flat[max(flat)]) if flat else (None, None)
    if small and large and large is not small:
        ratio = large["add_steady_ms"] / small["add_steady_ms"]
        row(
            f"add of 10 the same within 2x at {small['n']:,} and {large['n']:,} (float32)",
            f"{small['add_steady_ms']:.1f} vs {large['add_steady_ms']:.1f} ms ({ratio:.2f}x)",
            ratio <= 2,
        )
    at_1m = flat.get(1_000_000)
    if at_1m is None:
        row("add of 10 < 50 ms at 1M; delete of 1% of 1M < 1 s", "no 1M float32 run", None)
    else:
        row("add of 10 < 50 ms at 1M", f"{at_1m['add_steady_ms']:.1f} ms", at_1m["add_steady_ms"] < 50)
        row("delete of 1% of 1M < 1 s", f"{at_1m['delete_1pct_ms']:.0f} ms", at_1m["delete_1pct_ms"] < 1000)
    for c in cases.values():
        ratio = c["stream"]["search"]["p99_ms"] / c["search_idle"]["p99_ms"]
        errors = c["stream"]["writer"].get("errors", 1)
        loaded = [v for v in c["stream"]["versions"] if "error" not in v]
        failed = len(c["stream"]["versions"]) - len(loaded)
        whole = all(v["consistent"] for v in loaded)
        versions = f"versions {'whole' if whole else 'NOT whole'}, reloads failed: {failed}"
        row(
            f"{c['encoding']} {c['n']:,}: p99 while adding <= 2x idle, zero errors, whole versions",
            f"{ratio:.2f}x, {errors} errors, {versions}",
            ratio <= 2 and errors == 0 and whole and not failed,
        )
    faults = data.get("faults")
    row(
        "50+ kills: every acknowledged write present, nothing half-applied",
        f"{faults['kills']} kills, {'passed' if faults['passed'] else 'FAILED'}" if faults else "-",
        (faults["kills"] >= 50 and faults["passed"]) if faults else None,
    )
    return lines


def quality_lines(quality: dict[str, Any]) -> list[str]:
    lines = [
        f"{quality['collection'].title()}, {quality['model']}, transform none, BM25 (English analyzer); nDCG@10 "
        f"over its {quality['queries']} judged queries.",
        "",
        "| index | dense | lexical | hybrid |",
        "|---|---:|---:|---:|",
    ]
    for name, row in quality["rows"].items():
        lines.append(f"| {name} | {row['dense']:.2f} | {row['lexical']:.2f} | {row['hybrid']:.2f} |")
    timings = quality.get("end_to_end")
    if timings:
        lines += [
            "",
            f"End to end on the compacted index ({timings['documents']:,} documents; the static encoder's "
            f"encoding included): an add of {BATCH} documents {timings['add_first_ms']:.0f} ms the first time "
            f"(it writes the template), {timings['add_steady_ms']:.0f} ms the median of the next {ADDS - 1}; a "
            f"delete of those {timings['deleted']} documents {timings['delete_ms']:.0f} ms.",
        ]
    return lines


def fault_lines(faults: dict[str, Any]) -> list[str]:
    outcomes = ", ".join(f"{k}: {v}" for k, v in (faults["outcomes"] or {}).items())
    verdict = "passed" if faults["passed"] else "FAILED: " + " ".join(faults["failure"])
    return [
        f"`WHITEVEC_FAULT_KILLS={faults['kills']} WHITEVEC_FAULT_SEED={faults['seed']} pytest "
        f"tests/test_update_faults.py`: {verdict} in {faults['seconds']:.0f} s.",
        "",
        f"Where the kills landed: {outcomes}.",
    ]


def markdown(data: dict[str, Any]) -> str:
    intro = (__doc__ or "").split("\n\n    python")[0].split("\n\n", 1)[1].strip()
    facts = [part["facts"] for part in data.values() if isinstance(part, dict) and "facts" in part]
    lines = ["# Writes to an index: cost, search while writing, faults", ""]
    command = "`python -W ignore benchmarks/maintained/bench_updates.py` (each part: its own command below)"
    lines += [results_header(command, *facts), "", intro, "", "## Targets", "", *target_lines(data)]
    sections: list[tuple[str, str, Callable[[dict[str, Any]], list[str]]]] = [
        ("store", "Cost by index size (synthetic vectors)", store_lines),
        ("quality", "Cranfield: BM25 in segments, and writes end to end", quality_lines),
        ("faults", "Writes killed (SIGKILL)", fault_lines),
    ]
    for key, title, render in sections:
        if key in data:
            ran = f"`{data[key]['command']}`. " + conditions_sentence(data[key]["conditions"])
            lines += ["", f"## {title}", "", ran, "", *render(data[key])]
    return "\n".join(lines) + "\n" + NOTES_MARK + kept_notes(OUT / "updates.md")


def save(part: str, section: dict[str, Any], out: Path) -> dict[str, Any]:
    """Merge ``section`` into updates.json as ``part`` and write the page."""
    path = out / "updates.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[part] = {**section, "command": command_line()}
    data.pop("command", None)  # written by the first runs, before each part kept its own
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (("updates.json", json.dumps(data, indent=1) + "\n"), ("updates.md", markdown(data))):
        with atomic_path(out / name) as tmp:
            tmp.write_text(text)
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("store", "quality", "faults", "all"), default="all")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--stream-seconds", type=float, default=20.0)
    parser.add_argument("--kills", type=int, default=60)
    parser.add_argument("--seed", type=int, default=20261206)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--lock", type=Path, default=None)
    parser.add_argument("--writer", type=Path, help=argparse.SUPPRESS)  # the load generator's process
    parser.add_argument("--rows", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--log", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer is not None:
        writer_main(args.writer, args.rows, args.seconds, args.dim, args.log)
        return
    parts = ("store", "quality", "faults") if args.part == "all" else (args.part,)
    for part in parts:
        with exclusive_lock(args.lock) as held, tempfile.TemporaryDirectory(prefix="whitevec-updates-") as work:
            conditions = RunConditions(held)
            if part == "store":
                sizes = [int(s) for s in args.sizes.split(",")]
                section = part_store(sizes, args.dim, args.stream_seconds)
            elif part == "quality":
                section = part_quality(Path(work), args.model)
            else:
                section = part_faults(args.kills, args.seed)
            section.update(conditions=conditions.record(), facts=machine_facts("faiss-cpu", "bm25s"))
        data = save(part, section, args.out)
    print(markdown(data))


if __name__ == "__main__":
    main()
