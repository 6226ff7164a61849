"""Why whitevec is behind a peer on some rows of docs/results/peers.md (issue 52): one index of the peers
benchmark's speed corpus (the same documents, vectors and queries, ``benchmarks/common/peers/inputs.py``), taken
apart.

- **Bytes on disk**: each file kind of a fresh build beside what it holds (the texts' UTF-8 bytes, the float32
  vectors) and what zlib makes of the texts (the whole column; each document alone).
- **Dense single query**: p50 over the speed queries, one a call, k = 10, of the physical floor (the same unit
  vectors in a bare ``faiss.IndexFlatIP``, on one faiss thread as whitevec searches one query), against
  ``Retriever.search``; then where whitevec's time goes (cProfile of the same calls, the functions with the
  most own time).
- **Lexical and hybrid single query**: the same profile.
- **An approximate index**: the same vectors in whitevec's ``hnsw`` kind (faiss HNSW at its defaults), its dense
  p50 and recall@10 against the exact flat answers, and its build time (what Qdrant Edge and Chroma do by
  default).
- **Add 10 documents** (as the benchmark's writes job, median of 5): as shipped, and with ``os.fsync`` a no-op
  (what durability costs), with the files and fsyncs one add makes.

    python benchmarks/investigations/peers_gaps.py [--size 10000] [--cache DIR]

An investigation of 2026-12-07, not part of the maintained suite; run it alone (it times). Its output:
benchmarks/results/peers_gaps.txt.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import re
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.common.machine import machine_facts  # noqa: E402
from benchmarks.common.peers.inputs import DEFAULT_CACHE, Docs, Queries, new_docs, speed_inputs  # noqa: E402
from benchmarks.common.peers.systems.whitevec_system import WhitevecSystem  # noqa: E402

K = 10
WARMUP = 10
ROUNDS = 5


def file_kind(name: str) -> str:
    """``docs.sqlite``, ``index.faiss``, ``lexical*`` ... of a file, its segment prefix (``s000001.``) dropped."""
    parts = name.split(".", 1)
    return parts[1] if parts[0].startswith("s0") and len(parts) > 1 else name


def disk_report(folder: Path, docs: Docs) -> list[str]:
    sizes: Counter[str] = Counter()
    for path in folder.iterdir():
        sizes[file_kind(path.name)] += path.stat().st_size
    texts = [t.encode("utf-8") for t in docs.texts]
    raw = sum(map(len, texts))
    column = len(zlib.compress(b"\n".join(texts), 6))
    each = sum(len(zlib.compress(t, 6)) for t in texts)
    lines = [f"bytes on disk: {sum(sizes.values()) / 1e6:.1f} MB"]
    lines += [f"  {kind}: {size / 1e6:.2f} MB" for kind, size in sizes.most_common()]
    lines += [
        f"  held: texts {raw / 1e6:.2f} MB UTF-8 (zlib -6: {column / 1e6:.2f} MB as one column, "
        f"{each / 1e6:.2f} MB a document at a time); vectors {4 * docs.vectors.size / 1e6:.2f} MB float32"
    ]
    return lines


def p50_ms(call: Callable[[int], Any], n: int) -> float:
    for i in range(min(WARMUP, n)):
        call(i)
    seconds = []
    for i in range(n):
        started = time.perf_counter()
        call(i)
        seconds.append(time.perf_counter() - started)
    return 1e3 * statistics.median(seconds)


def profile_lines(call: Callable[[int], Any], n: int, top: int = 12) -> list[str]:
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(n):
        call(i)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    rows = [line for line in out.getvalue().splitlines() if line.strip() and line.strip()[0].isdigit()]
    return ["    " + short_paths(" ".join(row.split())) for row in rows]


def short_paths(line: str) -> str:
    """A profile line with the repository's and site-packages' folders dropped (no machine's paths)."""
    line = line.replace(f"{REPO}/", "")
    return re.sub(r"\S*/(?:site-packages|lib/python3\.\d+)/", "", line)


def search_report(system: WhitevecSystem, docs: Docs, queries: Queries) -> list[str]:
    import faiss

    from whitevec.index.faiss.library import one_faiss_thread

    n = len(queries.ids)
    flat = faiss.IndexFlatIP(docs.vectors.shape[1])
    flat.add(np.ascontiguousarray(docs.vectors, dtype=np.float32))

    def floor(i: int) -> Any:
        with one_faiss_thread():
            return flat.search(queries.vectors[i : i + 1], K)

    def one(mode: str) -> Callable[[int], Any]:
        return lambda i: system.search(mode, one_query(queries, i), K)

    lines = [f"dense p50: bare IndexFlatIP {p50_ms(floor, n):.3f} ms; whitevec {p50_ms(one('dense'), n):.3f} ms"]
    for mode in system.modes:
        if mode != "dense":
            lines.append(f"{mode} p50: whitevec {p50_ms(one(mode), n):.3f} ms")
    for mode in system.modes:
        lines.append(f"whitevec {mode}, {n} single queries, by own time (cProfile):")
        lines += profile_lines(one(mode), n)
    return lines


def one_query(queries: Queries, i: int) -> Queries:
    return Queries(queries.ids[i : i + 1], queries.texts[i : i + 1], queries.vectors[i : i + 1])


@contextmanager
def counted_fsyncs(enabled: bool) -> Iterator[Counter[str]]:
    """``os.fsync`` counted (and, when not ``enabled``, skipped) while inside."""
    real = os.fsync
    counts: Counter[str] = Counter()

    def fsync(fd: int) -> None:
        counts["fsync"] += 1
        if enabled:
            real(fd)

    os.fsync = fsync
    try:
        yield counts
    finally:
        os.fsync = real


def writes_report(folder: Path, docs: Docs) -> list[str]:
    lines = []
    for enabled in (True, False):
        scratch = Path(tempfile.mkdtemp(dir=folder.parent))
        copy = scratch / "index"
        shutil.copytree(folder, copy)
        system = WhitevecSystem(copy, "default")
        added, files, fsyncs = [], [], []
        for round_ in range(ROUNDS):
            before = set(os.listdir(copy))
            fresh = new_docs(10, round_ * 10, docs)
            with counted_fsyncs(enabled) as counts:
                started = time.perf_counter()
                system.add(fresh)
                added.append(time.perf_counter() - started)
            files.append(len(set(os.listdir(copy)) - before))
            fsyncs.append(counts["fsync"])
        system.close()
        shutil.rmtree(scratch)
        label = "as shipped" if enabled else "os.fsync a no-op"
        lines.append(
            f"add 10 ({label}): median {1e3 * statistics.median(added):.1f} ms; "
            f"{statistics.median(files):.0f} new files and {statistics.median(fsyncs):.0f} fsyncs an add"
        )
    return lines


def hnsw_report(folder: Path, docs: Docs, queries: Queries, exact: list[list[str]]) -> list[str]:
    from whitevec.datasets.retrieval import Document
    from whitevec.index import Retriever

    documents = [Document(i, t) for i, t in zip(docs.ids, docs.texts, strict=True)]
    started = time.perf_counter()
    index = Retriever.build(documents, folder, vectors=docs.vectors, kind="hnsw", show_progress=False)
    built = time.perf_counter() - started

    def one(i: int) -> Any:
        return index.search(None, K, mode="dense", query_vectors=queries.vectors[i : i + 1])

    p50 = p50_ms(one, len(queries.ids))
    found = [[hit.id for hit in one(i)[0]] for i in range(len(queries.ids))]
    recall = statistics.mean(len(set(a) & set(b)) / K for a, b in zip(found, exact, strict=True))
    index.close()
    head = f"hnsw (faiss, whitevec's defaults): build {built:.1f} s"
    return [f"{head}, dense p50 {p50:.3f} ms, recall@10 {recall:.3f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    docs, queries = speed_inputs(args.size, args.cache, args.data_dir)
    facts = machine_facts()
    print(f"peers_gaps --size {args.size}: {facts.get('cpu')}, load {os.getloadavg()[0]:.2f} at the start")
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work) / "index"
        system = WhitevecSystem(folder, "default")
        started = time.perf_counter()
        system.build(docs, lexical=True)
        print(f"build of {len(docs)} documents: {time.perf_counter() - started:.2f} s")
        system.close()
        for line in disk_report(folder, docs):
            print(line)
        system = WhitevecSystem(folder, "default")
        for line in search_report(system, docs, queries):
            print(line)
        exact = [system.search("dense", one_query(queries, i), K)[0] for i in range(len(queries.ids))]
        system.close()
        for line in hnsw_report(Path(work) / "hnsw", docs, queries, exact):
            print(line)
        for line in writes_report(folder, docs):
            print(line)
    print(f"load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
