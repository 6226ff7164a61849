"""1-bit codes at 1M vectors: recall, speed and memory of sign codes and RaBitQ against flat float32, and what
rescoring from disk costs with a cold and a warm page cache.

Corpus: the seeded synthetic 768-d unit vectors of the compression page's timing part (``common/data.py``: 4096
clusters in a 64-d latent space, projected, plus noise); queries are perturbed corpus vectors. Every index is a
real whitevec index folder (``build_index``, flat kind, cosine; codes trained on a seeded 100,000-vector sample),
loaded with ``Retriever.load``; the searches are its vector store's (``retriever.store.search``: the codes, then
the rescoring reads), top 10.

Parts (the figures of the first are deterministic; the other two are timings: run them alone, one at a time):

- ``recall``: builds the indexes in ``--workdir`` (kept for the timing parts; queries saved beside them) and
  measures recall@10 against exact search (faiss ``knn`` on the float32 vectors) for every index, each ``+rescore``
  one at the multipliers K in ``MULTIPLIERS`` (the top K x 10 candidates re-ranked from the float16 vectors
  on disk), with RAM and disk bytes a vector from the manifest (``index_size``).
- ``timing``: one fresh process per index (so the resident memory measured is that index's): RSS growth of the
  load (anonymous memory: the codes; file-backed: mapped pages), batched QPS (one search call, after a warm-up)
  and single-query p50 / p99.
- ``rescore``: one fresh process per ``+rescore`` index; for each multiplier, single-query latency p50 / p99
  with the rescoring file's pages in the page cache (warm: the same queries run once before) and evicted before
  every query (cold: ``posix_fadvise(POSIX_FADV_DONTNEED)`` on the file, which whitevec reads with ``pread``;
  runs before that reader memory-mapped the file and also dropped the mapping's pages with ``madvise``).

Run (the recall part about 15-25 min on 2 cores, 10 GB of memory, 10 GB of disk in the workdir):
    python benchmarks/maintained/bench_binary.py --part recall --workdir /tmp/whitevec-bench-binary
    python benchmarks/maintained/bench_binary.py --part timing --workdir /tmp/whitevec-bench-binary   # quiet
    python benchmarks/maintained/bench_binary.py --part rescore --workdir /tmp/whitevec-bench-binary  # quiet
Results: benchmarks/results/binary_scale.json; ``python benchmarks/pages/scale.py`` renders docs/results/scale.md
with its section (each part re-renders it too). The settings (indexes, multipliers): benchmarks/common/scale.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import clustered_unit_vectors
from benchmarks.common.machine import RunConditions, command_line, exclusive_lock, machine_facts
from benchmarks.common.runs import RESULTS, emit, run_page, run_worker
from benchmarks.common.scale import DIM, INDEXES, MULTIPLIERS, TIMED, K, RowEncoder, set_multiplier
from benchmarks.common.scale import build_row_index as build

RESULT = "binary_scale"
QUERIES_FILE = "queries.npy"


def _recall(found: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / K for a, b in zip(found, exact, strict=True)]))


def part_recall(workdir: Path, n: int, n_queries: int, recall_queries: int, save: Any) -> dict[str, Any]:
    """Build every index, and measure its recall@10 on the first ``recall_queries`` of the ``n_queries`` (all of
    them are saved for the timing parts); ``save(result)`` after each index."""
    import faiss

    from whitevec.index import Retriever
    from whitevec.index.stores.vector import index_size

    workdir.mkdir(parents=True, exist_ok=True)
    x, queries = clustered_unit_vectors(n, n_queries, DIM)
    np.save(workdir / QUERIES_FILE, queries)
    q = np.ascontiguousarray(queries[:recall_queries])
    _, exact = faiss.knn(q, x, K, metric=faiss.METRIC_INNER_PRODUCT)
    rows: dict[str, Any] = {}
    result = {"machine": machine_facts("faiss-cpu"), "n": n, "dim": DIM, "queries": len(q), "indexes": rows}
    for name in INDEXES:
        started = time.perf_counter()
        folder = build(workdir, x, name)
        with Retriever.load(folder, encoder=RowEncoder(None)) as retriever:  # type: ignore[arg-type]
            store = retriever.store
            size = index_size(retriever.manifest)
            row: dict[str, Any] = {
                "encoding": size["encoding"],
                "ram_bytes_per_vector": size["ram_bytes_per_vector"],
                "disk_bytes_per_vector": size["disk_bytes_per_vector"],
                "code_bytes_per_vector": size["code_bytes_per_vector"],
            }
            if "+rescore" in name:
                recall = {}
                for multiplier in MULTIPLIERS:
                    set_multiplier(store, multiplier)
                    recall[str(multiplier)] = round(_recall(store.search(q, K)[1], exact), 4)
                row["recall_at_10_by_multiplier"] = recall
            else:
                row["recall_at_10"] = round(_recall(store.search(q, K)[1], exact), 4)
        row["build_and_search_s"] = round(time.perf_counter() - started, 1)
        rows[name] = row
        print(name, row, file=sys.stderr)
        save(result)
    return result


# --- timing workers (one process per index) -----------------------------------------------------------------
def _memory() -> dict[str, int]:
    """This process's resident memory, bytes: total, anonymous and file-backed (/proc/self/status)."""
    fields = {"VmRSS:": "rss", "RssAnon:": "anon", "RssFile:": "file"}
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key = line.split(":")[0] + ":"
        if key in fields:
            out[fields[key]] = int(line.split()[1]) * 1024
    return out


def _percentiles(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3), "p99_ms": round(float(np.percentile(ms, 99)), 3)}


def _single(store: Any, q: np.ndarray, before: Any = None) -> list[float]:
    times = []
    for row in q:
        if before is not None:
            before()
        started = time.perf_counter()
        store.search(row[None, :], K)
        times.append((time.perf_counter() - started) * 1000)
    return times


def timing_worker(folder: Path, batched: int, single: int) -> None:
    import faiss  # noqa: F401  (imported before the first reading: its library is not the index's memory)

    from whitevec.index import Retriever

    q = np.load(folder.parent / QUERIES_FILE)
    before = _memory()
    retriever = Retriever.load(folder, encoder=RowEncoder(None))  # type: ignore[arg-type]
    loaded = _memory()
    store = retriever.store
    store.search(q[:10], K)  # warm-up
    batch = q[:batched]
    started = time.perf_counter()
    store.search(batch, K)
    seconds = time.perf_counter() - started
    latency = _single(store, q[:single])
    after = _memory()
    emit(
        {
            "load_rss_growth_bytes": loaded["rss"] - before["rss"],
            "load_anon_growth_bytes": loaded["anon"] - before["anon"],
            "load_file_growth_bytes": loaded["file"] - before["file"],
            "file_rss_after_searches_bytes": after["file"] - before["file"],
            "queries_timed": len(batch),
            "batched_qps": round(len(batch) / seconds, 1),
            **_percentiles(latency),
        }
    )


def rescore_worker(folder: Path, single: int) -> None:
    from whitevec.index import Retriever
    from whitevec.index.encodings.rescore import RESCORE_FILE

    q = np.load(folder.parent / QUERIES_FILE)[:single]
    retriever = Retriever.load(folder, encoder=RowEncoder(None))  # type: ignore[arg-type]
    store = retriever.store
    path = folder / RESCORE_FILE

    def evict() -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # drop the file's pages from the page cache
        finally:
            os.close(fd)

    by_multiplier = {}
    for multiplier in MULTIPLIERS:
        set_multiplier(store, multiplier)
        _single(store, q)  # every query's candidates read once: the warm case
        warm = _percentiles(_single(store, q))
        cold = _percentiles(_single(store, q, before=evict))
        evict()
        by_multiplier[str(multiplier)] = {"warm": warm, "cold": cold}
    emit({"queries": len(q), "by_multiplier": by_multiplier})


def run_timing(
    workdir: Path, part: str, batched: int, flat_batched: int, single: int, lock: str | None
) -> dict[str, Any]:
    script = Path(__file__).resolve()
    observed = RunConditions(lock)
    rows = {}
    names = TIMED if part == "timing" else [n for n in TIMED if "+rescore" in n]
    for name in names:
        folder = workdir / name
        if not (folder / "manifest.json").exists():
            raise SystemExit(f"{folder} is missing: run --part recall with the same --workdir first")
        if part == "timing":
            args = ["timing", str(folder), str(flat_batched if name == "float32" else batched), str(single)]
        else:
            args = ["rescore", str(folder), str(single)]
        rows[name] = run_worker(script, args)
        print(name, rows[name], file=sys.stderr)
    return {"machine": machine_facts("faiss-cpu"), "conditions": observed.record(), "indexes": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("recall", "timing", "rescore"))
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/whitevec-bench-binary"))
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1000, help="queries saved; batched QPS of the codes")
    parser.add_argument("--recall-queries", type=int, default=300, help="queries recall@10 is measured on")
    parser.add_argument("--flat-queries", type=int, default=200, help="batched queries timed on flat float32")
    parser.add_argument("--single", type=int, default=200, help="single queries timed (p50 / p99)")
    parser.add_argument("--out", type=Path, default=RESULTS / f"{RESULT}.json")
    parser.add_argument(
        "--lock", type=Path, default=None, help="timing, rescore: hold an exclusive lock on this file"
    )
    args = parser.parse_args()
    if args.worker:
        mode, folder, *rest = args.worker
        if mode == "timing":
            timing_worker(Path(folder), int(rest[0]), int(rest[1]))
        else:
            rescore_worker(Path(folder), int(rest[0]))
        return
    if args.part is None:
        parser.error("give --part recall, timing or rescore")
    workdir = args.workdir.expanduser().resolve()
    command = command_line()

    def save(measured: dict[str, Any]) -> None:
        earlier = json.loads(args.out.read_text()) if args.out.exists() else {}
        earlier[args.part] = {"command": command, **measured}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(earlier, indent=2) + "\n")
        tmp.replace(args.out)
        print(f"wrote {args.out}", file=sys.stderr)
        if args.out == RESULTS / f"{RESULT}.json":
            run_page("scale")

    if args.part == "recall":
        part_recall(workdir, args.n, args.queries, args.recall_queries, save)
    else:
        with exclusive_lock(args.lock) as lock:
            measured = run_timing(workdir, args.part, args.queries, args.flat_queries, args.single, lock)
        save(measured)


if __name__ == "__main__":
    main()
