"""1-bit codes at 1M vectors: recall, speed and memory of sign codes and RaBitQ against flat float32, and what
rescoring from disk costs with a cold and a warm page cache.

Corpus: the seeded synthetic 768-d unit vectors of the compression page's timing part (``synthetic.py``: 4096
clusters in a 64-d latent space, projected, plus noise); queries are perturbed corpus vectors. Every index is a
real whitevec index folder (``build_index``, flat kind, cosine; codes trained on a seeded 100,000-vector sample),
loaded with ``Retriever.load``; the searches are its vector store's (``retriever.store.search``: the codes, then
the rescoring reads), top 10.

Parts (the figures of the first are deterministic; the other two are timings: run them alone, one at a time):

- ``recall``: builds the indexes in ``--workdir`` (kept for the timing parts; queries saved beside them) and
  measures recall@10 against exact search (faiss ``knn`` on the float32 vectors) for every index, each ``+rescore``
  one at the multipliers K in :data:`MULTIPLIERS` (the top K x 10 candidates re-ranked from the float16 vectors
  on disk), with RAM and disk bytes a vector from the manifest (``index_size``).
- ``timing``: one fresh process per index (so the resident memory measured is that index's): RSS growth of the
  load (anonymous memory: the codes; file-backed: mapped pages), batched QPS (one search call, after a warm-up)
  and single-query p50 / p99.
- ``rescore``: one fresh process per ``+rescore`` index; for each multiplier, single-query latency p50 / p99
  with the rescoring file's pages in the page cache (warm: the same queries run once before) and evicted before
  every query (cold: ``posix_fadvise(POSIX_FADV_DONTNEED)`` on the file, which whitevec reads with ``pread``;
  runs before that reader memory-mapped the file and also dropped the mapping's pages with ``madvise``).

Run (the recall part about 15-25 min on 2 cores, 10 GB of memory, 10 GB of disk in the workdir):
    python benchmarks/bench_binary.py --part recall --workdir /tmp/whitevec-bench-binary
    python benchmarks/bench_binary.py --part timing --workdir /tmp/whitevec-bench-binary      # quiet machine
    python benchmarks/bench_binary.py --part rescore --workdir /tmp/whitevec-bench-binary     # quiet machine
Results: benchmarks/results/binary_scale.json; ``python benchmarks/bench_scale.py --render-only`` renders
docs/results/scale.md with its section (each part re-renders it too).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import RESULTS, emit, run_worker
from machine import (
    RunConditions,
    command_line,
    conditions_sentence,
    exclusive_lock,
    facts_markdown,
    machine_facts,
)
from synthetic import clustered_unit_vectors

K = 10
DIM = 768
TRAIN_SAMPLE = 100_000
MULTIPLIERS = (1, 2, 4, 10)
# name -> encoding (flat kind); a "+rescore" index is searched at every multiplier (recall and rescore parts).
# Left out at 1M: ITQ (its training, PCA then 50 rotations of the sample, is the slow part of a build; it ranks
# no better than binary-rr on Cranfield) and RaBitQ with float queries (faiss scans its codes with a float query
# without SIMD: over 25 minutes for 1,000 queries on 2 shared cores; on Cranfield it ranks as 4-bit queries do).
INDEXES = {
    "float32": "float32",
    "binary": "binary",
    "binary-rr": "binary-rr",
    "rabitq": "rabitq",
    "binary-rr+rescore": "binary-rr+rescore=4",
    "rabitq+rescore": "rabitq+rescore=4",
}
TIMED = ("float32", "binary-rr", "rabitq", "binary-rr+rescore", "rabitq+rescore")
RESULT = "binary_scale"
QUERIES_FILE = "queries.npy"


class RowEncoder:
    """An ``EncoderLike`` over precomputed rows: the text ``str(i)`` is row ``i`` (no model; the benchmark is
    about the index). The whole corpus in order comes back without a copy."""

    def __init__(self, rows: np.ndarray | None, dim: int = DIM) -> None:
        self.rows = rows
        self.dim = dim

    def describe(self) -> dict[str, Any]:
        return {"model": "synthetic-rows", "pooling": "none", "max_length": 1, "dim": self.dim}

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> np.ndarray:
        assert self.rows is not None, "a loaded index only searches vectors"
        if len(texts) == len(self.rows) and texts[0] == "0" and texts[-1] == str(len(self.rows) - 1):
            return self.rows
        return self.rows[[int(t) for t in texts]]


def _recall(found: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / K for a, b in zip(found, exact, strict=True)]))


def set_multiplier(store: Any, multiplier: int) -> None:
    """Search a ``+rescore`` store at another multiplier (the benchmark's own knob: the encoding in the store's
    parameters is what its search reads)."""
    from whitevec.index.encodings import parse_encoding

    encoding = parse_encoding(store.params()["encoding"])
    store._params["encoding"] = replace(encoding, rescore=multiplier).spec


def build(workdir: Path, x: np.ndarray, name: str) -> Path:
    """The index ``name`` in ``workdir`` (built once; a finished folder is reused)."""
    from whitevec.index import Document, build_index

    out = workdir / name
    if (out / "manifest.json").exists():
        return out
    docs = [Document(str(i), str(i)) for i in range(len(x))]
    params = {"encoding": INDEXES[name], "train_sample": TRAIN_SAMPLE}
    build_index(docs, out, encoder=RowEncoder(x), transform="none", metric="cosine", index_params=params)
    return out


def part_recall(workdir: Path, n: int, n_queries: int, recall_queries: int, save: Any) -> dict[str, Any]:
    """Build every index, and measure its recall@10 on the first ``recall_queries`` of the ``n_queries`` (all of
    them are saved for the timing parts); ``save(result)`` after each index."""
    import faiss

    from whitevec.index import Retriever
    from whitevec.index.store import index_size

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
    from whitevec.index.rescore import RESCORE_FILE

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
            from bench_scale import render

            render()

    if args.part == "recall":
        part_recall(workdir, args.n, args.queries, args.recall_queries, save)
    else:
        with exclusive_lock(args.lock) as lock:
            measured = run_timing(workdir, args.part, args.queries, args.flat_queries, args.single, lock)
        save(measured)


# --- the section of docs/results/scale.md -------------------------------------------------------------------
PENDING = "pending"


def _mb(value: float | None) -> str:
    return PENDING if value is None else f"{value / 1e6:,.0f}"


def _part_conditions(part: dict[str, Any]) -> str:
    """The conditions a timing part recorded (parts run before the record kept the three load averages)."""
    if "conditions" in part:
        return conditions_sentence(part["conditions"])
    return f"load average before {part['load_average_before']};"


def report_lines(result: dict[str, Any]) -> list[str]:
    """scale.md's section on 1-bit codes at 1M vectors, from ``binary_scale.json`` (timing cells say pending
    until the timing parts have run)."""
    recall = result.get("recall")
    if not recall:
        return []
    timing = (result.get("timing") or {}).get("indexes", {})
    rescore = (result.get("rescore") or {}).get("indexes", {})
    lines = [
        f"## 1-bit codes at {recall['n']:,} vectors: recall, speed, memory",
        "",
        f"Recall part: `{recall['command']}`; {facts_markdown(recall['machine'])}",
    ]
    for name, part in (("Timing part", result.get("timing")), ("Rescoring part", result.get("rescore"))):
        if part:
            lines.append(
                f"{name}: `{part['command']}`; {_part_conditions(part)} {facts_markdown(part['machine'])}"
            )
    lines += [
        "",
        f"{recall['n']:,} synthetic {recall['dim']}-d unit vectors (benchmarks/synthetic.py, seeded), "
        f"recall on {recall['queries']:,} queries (perturbed corpus vectors); whitevec index folders (flat, "
        f"cosine; codes trained on at most a seeded {TRAIN_SAMPLE:,}-vector sample), searched through the loaded "
        "store, top 10. "
        "Recall@10 against exact search; `+rescore`: the top K x 10 re-ranked from float16 vectors on disk. "
        "RAM / disk bytes a vector from the manifest; RSS: growth of a fresh process's resident memory when it "
        "loads the index (anonymous: what it read into memory; the rescoring file is mapped, its pages counted "
        "after the searches). QPS: one batched search call after a warm-up.",
        "",
        "| index | RAM B/vec | disk B/vec | recall@10 | x1 | x2 | x4 | x10 | load RSS (MB) | mapped after "
        "searches (MB) | batched QPS | p50 / p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, row in recall["indexes"].items():
        by_k = row.get("recall_at_10_by_multiplier", {})
        cells = [name, str(row["ram_bytes_per_vector"]), str(row["disk_bytes_per_vector"])]
        cells.append(f"{row['recall_at_10']:.3f}" if "recall_at_10" in row else "-")
        cells += [f"{by_k[str(m)]:.3f}" if str(m) in by_k else "-" for m in MULTIPLIERS]
        t = timing.get(name)
        if name not in TIMED:
            cells += ["-"] * 4
        elif t is None or "error" in t:
            cells += [PENDING] * 4
        else:
            cells += [
                _mb(t["load_rss_growth_bytes"]),
                _mb(t["file_rss_after_searches_bytes"]),
                f"{t['batched_qps']:,.1f}",
                f"{t['p50_ms']} / {t['p99_ms']}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *_speed_verdict(timing), *_rescore_lines(rescore), ""]
    return lines


def _speed_verdict(timing: dict[str, Any]) -> list[str]:
    flat = timing.get("float32")
    if not flat or "error" in flat:
        return [f"Target (>= 10x the QPS of flat float32 at <= 1/24 of its RSS): {PENDING}."]
    out = []
    for name in ("binary-rr", "rabitq", "binary-rr+rescore", "rabitq+rescore"):
        t = timing.get(name)
        if not t or "error" in t:
            continue
        speed = t["batched_qps"] / flat["batched_qps"]
        single = flat["p50_ms"] / t["p50_ms"]  # one query at a time: the rate is 1 / latency
        memory = t["load_rss_growth_bytes"] / flat["load_rss_growth_bytes"]
        met = speed >= 10 and memory <= 1 / 24
        out.append(
            f"- {name}: {speed:.1f}x the batched QPS of flat float32 at {memory:.3f} of its load RSS "
            f"(1/24 = 0.042): **{'met' if met else 'not met'}**; one query at a time {single:.1f}x "
            f"(p50 {t['p50_ms']:.2f} ms against {flat['p50_ms']:.1f} ms)."
        )
    return out


def _rescore_lines(rescore: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "Rescoring from disk, single queries (p50 / p99 ms), the rescoring file's pages in the page cache (warm) "
        "or evicted before every query (cold):",
        "",
        "| index | " + " | ".join(f"x{m} warm | x{m} cold" for m in MULTIPLIERS) + " |",
        "|---|" + "---|---|" * len(MULTIPLIERS),
    ]
    for name in (n for n in TIMED if "+rescore" in n):
        row = rescore.get(name)
        cells = [name]
        for m in MULTIPLIERS:
            got = None if not row or "error" in row else row["by_multiplier"].get(str(m))
            if got is None:
                cells += [PENDING, PENDING]
            else:
                cells += [f"{got[c]['p50_ms']} / {got[c]['p99_ms']}" for c in ("warm", "cold")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    main()
