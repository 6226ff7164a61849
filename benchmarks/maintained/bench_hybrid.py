"""The speed of hybrid recall (issue 39's speed targets): BM25 beside the vectors against bm25s used directly,
and what a lexical or hybrid search costs against a dense one, in-process, over HTTP, at 100,000 documents and on
Milvus Lite. Writes docs/results/hybrid-speed.json (one section per part; a part run alone replaces only its
own) and prints the page's section (``benchmarks.common.hybrid_speed.speed_markdown``, which the hybrid results
page renders too). Parts:

- ``build``: the lexical part of an index build (``LexicalIndex.build`` with the ``english`` analyzer, what
  ``index build --lexical bm25`` runs, then its files written, timed apart) against bm25s as a new user runs it
  (``bm25s.tokenize`` with PyStemmer's English stemmer and English stop words, then ``BM25().index``), in turns,
  on the Cranfield, MED and CACM documents and the scale corpus; the ratio (target <= 1.2x) and bytes per document.
- ``query``: ``Retriever.search``, one query per call, dense vs lexical vs hybrid (the index's default fusion) on
  a Cranfield index (all-MiniLM-L6-v2, raw vectors, FAISS flat, ``--lexical bm25``; the 225 queries in turn),
  with the encoding and with the model's forward pass replaced by a lookup of vectors made beforehand; the
  lexical ranker at depth 100 beside bm25s's own ``tokenize`` + ``retrieve(k=100)``.
- ``http``: ``POST /search`` p50, one client, dense and hybrid rows in turns (``whitevec serve`` and the load
  generator of benchmarks/common/serving.py, as bench_serve.py runs them), the in-process p50 beside (a fresh
  process); target: hybrid <= dense + 2 ms.
- ``scale``: 100,000 documents (the distinct texts of the STS sets and the retrieval collections, repeated), a
  static encoder (``whitevec distill all-MiniLM-L6-v2`` with its defaults, kept in ~/.cache/whitevec/static),
  the whole build and its lexical part, bytes, and the query p50 of each mode.
- ``milvus``: Cranfield on ``--backend milvus`` (Milvus Lite, its own BM25) beside FAISS + bm25s: builds with and
  without ``--lexical bm25`` (the encoding excluded), and each search's p50.

    python benchmarks/maintained/bench_hybrid.py                      # every part (alone on a quiet machine)
    python benchmarks/maintained/bench_hybrid.py --part http --part milvus
    python benchmarks/maintained/bench_hybrid.py --quick --out /tmp/hybrid-speed.json   # checks the script

Every part records its command, the machine, the date and the conditions it observed (the load average before
and after, CPU seconds of its own processes and of all others). ``--lock FILE`` holds an exclusive lock on FILE
while measuring. Needs the serve extra, aiohttp (dev extra), pymilvus with Milvus Lite, and the shared data
($WHITEVEC_DATA or ../shared/data).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the repository root: benchmarks.common

from benchmarks.common.data import collection, default_static_table  # noqa: E402
from benchmarks.common.hybrid_speed import (  # noqa: E402
    PARTS,
    RESULT,
    build_ratio,
    latency_summary,
    speed_markdown,
    spread,
    write_part,
)
from benchmarks.common.machine import RunConditions, command_line, exclusive_lock, machine_facts  # noqa: E402
from benchmarks.common.runs import emit, folder_bytes, run_worker  # noqa: E402
from benchmarks.common.scale import write_corpus  # noqa: E402
from benchmarks.common.serving import cranfield_queries, load_row, whitevec_server  # noqa: E402

MODEL = "all-MiniLM-L6-v2"
ANALYZER = "english"
COLLECTIONS = ("cranfield", "med", "cacm")
SCALE_SOURCES = ("cranfield", "med", "cacm", "adi")
K = 10
LEXICAL_DEPTH = 100
# Sizes of a measuring run, and of --quick (which checks the script end to end and measures little).
FULL = {"repeats": 5, "scale_docs": 100_000, "queries": 1000, "requests": 600, "rounds": 3}
FULL |= {"milvus_queries": 450, "milvus_repeats": 3}
QUICK = {"repeats": 2, "scale_docs": 3000, "queries": 30, "requests": 40, "rounds": 1}
QUICK |= {"milvus_queries": 20, "milvus_repeats": 1}
PACKAGES = ("bm25s", "PyStemmer", "faiss-cpu", "pymilvus", "milvus-lite", "fastapi", "uvicorn", "aiohttp")


# ---- corpora ---------------------------------------------------------------------------------------------------
def scale_corpus(size: int, data_dir: str | None) -> tuple[list[Any], int]:
    """``size`` documents: the distinct texts of the retrieval collections (``SCALE_SOURCES``) and of the STS sets
    (benchmarks/common/scale.py's corpus, one copy), repeated in order until there are ``size``; and how many
    distinct texts there are among them."""
    from whitevec.datasets.retrieval import Document

    distinct: dict[str, None] = {}
    for name in SCALE_SOURCES:
        for doc in collection(name, data_dir).corpus:
            distinct.setdefault(" ".join(doc.text.split()), None)
    with tempfile.TemporaryDirectory() as tmp:
        sts = Path(tmp) / "sts.jsonl"
        write_corpus(sts, max_docs=10**9)
        for line in sts.read_text(encoding="utf-8").splitlines():
            distinct.setdefault(json.loads(line)["text"], None)
    texts = [text for text in distinct if text]
    docs = [Document(f"d{i}", text) for i, text in zip(range(size), itertools.cycle(texts))]
    return docs, min(size, len(texts))


class VectorTable:
    """An encoder whose vectors were made beforehand by ``describe``'s model: ``encode`` looks each text up, so
    a build or a search runs without the model's forward pass (what "encode excluded" measures)."""

    def __init__(self, description: dict[str, Any], texts: Sequence[str], vectors: np.ndarray) -> None:
        self._description = dict(description)
        self._rows = {text: row for row, text in enumerate(texts)}
        self._vectors = np.asarray(vectors, dtype=np.float32)

    def describe(self) -> dict[str, Any]:
        return dict(self._description)

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> np.ndarray:
        return self._vectors[[self._rows[text] for text in texts]]


def table_of(encoder: Any, texts: Sequence[str]) -> VectorTable:
    distinct = list(dict.fromkeys(texts))
    return VectorTable(encoder.describe(), distinct, encoder.encode(distinct, show_progress=False))


# ---- timing ----------------------------------------------------------------------------------------------------
def interleaved(calls: Mapping[str, Callable[[str], Any]], queries: Sequence[str], n: int) -> dict[str, Any]:
    """Each call on one query at a time, the calls in turn on each query (a drift of the machine falls on all of
    them), ``n`` queries cycling through ``queries`` after 10 unmeasured ones; a latency summary per call."""
    for query in queries[:10]:
        for call in calls.values():
            call(query)
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for query in itertools.islice(itertools.cycle(queries), n):
        for name, call in calls.items():
            started = time.perf_counter()
            call(query)
            seconds[name].append(time.perf_counter() - started)
    return {name: latency_summary(values) for name, values in seconds.items()}


def searches(retriever: Any, modes: Sequence[str], label: str = "") -> dict[str, Callable[[str], Any]]:
    """One ``Retriever.search`` call per mode (``mode`` or ``mode fusion``), named ``mode`` + ``label``."""

    def one(mode: str) -> Callable[[str], Any]:
        name, _, fusion = mode.partition(" ")
        return lambda query: retriever.search([query], K, mode=name, fusion=fusion or None)

    return {mode + label: one(mode) for mode in modes}


# ---- part: build -----------------------------------------------------------------------------------------------
def whitevec_lexical(texts: Sequence[str], folder: Path) -> tuple[float, float, int]:
    """(build seconds, write seconds, bytes): the lexical part an index build makes, then its two files."""
    from whitevec.index.lexical.bm25 import LexicalIndex, make_analyzer

    started = time.perf_counter()
    index = LexicalIndex.build(texts, make_analyzer(ANALYZER))
    built = time.perf_counter() - started
    folder.mkdir(parents=True)
    names = index.save(folder)
    written = time.perf_counter() - started - built
    return built, written, sum((folder / name).stat().st_size for name in names)


def bm25s_alone(texts: Sequence[str]) -> tuple[float, Any]:
    """(seconds, the index): bm25s as its README shows, English stemmer and stop words."""
    import bm25s
    import Stemmer

    started = time.perf_counter()
    tokens = bm25s.tokenize(list(texts), stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    return time.perf_counter() - started, retriever


def build_row(name: str, texts: Sequence[str], repeats: int, work: Path) -> dict[str, Any]:
    whitevec_lexical(texts, work / f"{name}-warm")  # unmeasured: imports, first calls
    bm25s_alone(texts)
    built: list[float] = []
    written: list[float] = []
    alone: list[float] = []
    for turn in range(repeats):  # in turns: a drift of the machine's load falls on both
        seconds, write_s, size = whitevec_lexical(texts, work / f"{name}-{turn}")
        built.append(seconds)
        written.append(write_s)
        seconds, bm25s_index = bm25s_alone(texts)
        alone.append(seconds)
    bm25s_index.save(str(work / f"{name}-bm25s"))
    return {
        "corpus": name,
        "documents": len(texts),
        "whitevec_s": spread(built),
        "whitevec_save_s": spread(written),
        "bm25s_s": spread(alone),
        "ratio": build_ratio(built, alone),
        "lexical_bytes": size,
        "lexical_bytes_per_document": round(size / len(texts), 1),
        "bm25s_bytes": folder_bytes(work / f"{name}-bm25s"),
        "bm25s_bytes_per_document": round(folder_bytes(work / f"{name}-bm25s") / len(texts), 1),
    }


def measure_build(settings: dict[str, Any]) -> dict[str, Any]:
    corpora = {name: [d.text for d in collection(name, settings["data_dir"]).corpus] for name in COLLECTIONS}
    docs, _ = scale_corpus(settings["scale_docs"], settings["data_dir"])
    corpora[f"scale corpus ({len(docs):,})"] = [d.text for d in docs]
    with tempfile.TemporaryDirectory(dir=settings["work"]) as tmp:
        rows = [build_row(name, texts, settings["repeats"], Path(tmp) / str(i)) for i, (name, texts) in
                enumerate(corpora.items())]  # fmt: skip
    return {"analyzer": ANALYZER, "repeats": settings["repeats"], "rows": rows}


# ---- part: query (and the http part's in-process ceiling) ------------------------------------------------------
def cranfield_index(settings: dict[str, Any]) -> Path:
    """The Cranfield index the query and http parts search (built once, kept in the work folder)."""
    from whitevec.encoders import load_encoder
    from whitevec.index import build_index

    index = Path(settings["work"]) / f"cranfield-{MODEL}-bm25"
    if not (index / "manifest.json").is_file():
        corpus = collection("cranfield", settings["data_dir"]).corpus
        with load_encoder(MODEL) as encoder:
            build_index(corpus, index, encoder=encoder, lexical="bm25", analyzer=ANALYZER, show_progress=False)
    return index


def measure_query(settings: dict[str, Any]) -> dict[str, Any]:
    from whitevec.index import Retriever

    index = cranfield_index(settings)
    queries = cranfield_queries(settings["data_dir"])
    texts = [d.text for d in collection("cranfield", settings["data_dir"]).corpus]
    with Retriever.load(index, cache=False) as retriever:
        table = table_of(retriever.encoder, queries)
        with Retriever.load(index, encoder=table) as looked_up:
            calls = searches(retriever, ("dense", "lexical", "hybrid"))
            calls |= searches(looked_up, ("dense", "hybrid"), " excluded")
            calls["encode"] = lambda query: retriever.encoder.encode([query], show_progress=False)
            latency = interleaved(calls, queries, settings["queries"])
        depth = lexical_depth(retriever.lexical, texts, queries, settings["queries"])
        manifest = retriever.manifest
    return {
        "index": {"documents": manifest["count"], "model": MODEL, "pooling": manifest["pooling"]},
        "k": K,
        "distinct_queries": len(queries),
        "latency": {mode: latency[mode] for mode in ("dense", "lexical", "hybrid")},
        "latency_encode_excluded": {mode: latency[f"{mode} excluded"] for mode in ("dense", "hybrid")},
        "encode": latency["encode"],
        "lexical_depth": depth,
    }


def lexical_depth(lexical: Any, texts: Sequence[str], queries: Sequence[str], n: int) -> dict[str, Any]:
    """The index's lexical ranker and bm25s's own retrieve, ``LEXICAL_DEPTH`` deep, one query per call."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    _, alone = bm25s_alone(texts)

    def bm25s_query(query: str) -> Any:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False)
        return alone.retrieve(tokens, k=LEXICAL_DEPTH, show_progress=False)

    calls = {"whitevec": lambda query: lexical.search([query], LEXICAL_DEPTH), "bm25s": bm25s_query}
    return {"depth": LEXICAL_DEPTH, **interleaved(calls, queries, n)}


def measure_ceiling(settings: dict[str, Any]) -> dict[str, Any]:
    """The http part's in-process ceiling: dense and hybrid ``Retriever.search`` one query per call, as the
    server loads the index (vector cache off)."""
    from whitevec.index import Retriever

    queries = cranfield_queries(settings["data_dir"])
    with Retriever.load(cranfield_index(settings), cache=False) as retriever:
        return interleaved(searches(retriever, ("dense", "hybrid")), queries, settings["queries"])


# ---- part: http ------------------------------------------------------------------------------------------------
def measure_http(settings: dict[str, Any]) -> dict[str, Any]:
    ceiling = worker_part("ceiling", settings)  # builds the index when it is missing
    index = cranfield_index(settings)
    queries_file = Path(settings["work"]) / "cranfield-queries.json"
    queries_file.write_text(json.dumps(cranfield_queries(settings["data_dir"])))
    server = whitevec_server(index, {}, 2, "hybrid")
    rows: list[dict[str, Any]] = []
    try:
        for turn in range(settings["rounds"]):
            for mode in ("dense", "hybrid"):
                row = load_row(
                    server, "/search", "search", queries_file, 1, settings["requests"], K, body={"mode": mode}
                )
                rows.append({"mode": mode, "round": turn, **row})
                print(f"http {mode}: p50 {row['p50_ms']:.2f} ms, errors {row['errors']}", file=sys.stderr)
    finally:
        server.stop()
    if any(row["errors"] for row in rows):
        raise SystemExit(f"/search answered errors: {next(r['first_error'] for r in rows if r['errors'])}")

    def median_of(key: str) -> dict[str, float]:
        return {
            m: round(statistics.median(r[key] for r in rows if r["mode"] == m), 3) for m in ("dense", "hybrid")
        }

    return {"k": K, "requests": settings["requests"], "rounds": settings["rounds"], "rows": rows,
            "p50_ms": median_of("p50_ms"), "p99_ms": median_of("p99_ms"), "ceiling": ceiling}  # fmt: skip


# ---- part: scale -----------------------------------------------------------------------------------------------
def measure_scale(settings: dict[str, Any]) -> dict[str, Any]:
    from whitevec.encoders import load_encoder
    from whitevec.index import Retriever, build_index
    from whitevec.index.folder.layout import LEXICAL_FILES

    folder = default_static_table(MODEL)
    docs, distinct = scale_corpus(settings["scale_docs"], settings["data_dir"])
    queries = cranfield_queries(settings["data_dir"])
    with tempfile.TemporaryDirectory(dir=settings["work"]) as tmp, load_encoder(folder) as encoder:
        started = time.perf_counter()
        index = build_index(docs, Path(tmp) / "index", encoder=encoder, lexical="bm25", show_progress=False)
        build_s = time.perf_counter() - started
        with Retriever.load(index, encoder=encoder) as retriever:
            latency = interleaved(
                searches(retriever, ("dense", "lexical", "hybrid")), queries, settings["queries"]
            )
            manifest = retriever.manifest
            vector_bytes = retriever.index_bytes
        index_bytes = folder_bytes(Path(index))
    lexical_bytes = sum(int(manifest["files"][name]["bytes"]) for name in LEXICAL_FILES)
    return {
        "documents": manifest["count"],
        "distinct_texts": distinct,
        "sources": "the documents of " + ", ".join(SCALE_SOURCES) + " and the sentences of STS-B and STS12-15",
        "model": MODEL,
        "encoder": folder.name,
        "k": K,
        "build_s": round(build_s, 2),
        "lexical_build_s": manifest["lexical"]["build_seconds"],
        "lexical_bytes": lexical_bytes,
        "lexical_bytes_per_document": round(lexical_bytes / manifest["count"], 1),
        "index_bytes": index_bytes,
        "vector_bytes": vector_bytes,
        "latency": latency,
    }


# ---- part: milvus ----------------------------------------------------------------------------------------------
MILVUS_SEARCHES = ("dense", "lexical", "hybrid", "hybrid rrf:60")


def measure_milvus(settings: dict[str, Any]) -> dict[str, Any]:
    from whitevec.encoders import load_encoder
    from whitevec.index import Retriever, build_index

    corpus = collection("cranfield", settings["data_dir"]).corpus
    queries = cranfield_queries(settings["data_dir"])
    builds: dict[str, dict[str, list[float]]] = {b: {"dense": [], "bm25": []} for b in ("faiss", "milvus")}
    with load_encoder(MODEL) as cached:  # the corpus's vectors, from the vector cache after the first run
        table = table_of(cached, [d.text for d in corpus])
    with tempfile.TemporaryDirectory(dir=settings["work"]) as tmp, load_encoder(MODEL, cache=False) as encoder:
        # Turn -1 unmeasured: the first build on a backend pays for its imports and first calls.
        for turn, backend, lexical in itertools.product(
            range(-1, settings["milvus_repeats"]), builds, ("dense", "bm25")
        ):
            out = Path(tmp) / f"{backend}-{lexical}-{turn}"
            started = time.perf_counter()
            ranker = None if lexical == "dense" else "bm25"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Milvus Lite does not stem: its build says so
                build_index(corpus, out, encoder=table, backend=backend, lexical=ranker, analyzer=ANALYZER)
            if turn >= 0:
                builds[backend][lexical].append(time.perf_counter() - started)
        last = settings["milvus_repeats"] - 1
        with (
            Retriever.load(Path(tmp) / f"faiss-bm25-{last}", encoder=encoder) as local,
            Retriever.load(Path(tmp) / f"milvus-bm25-{last}", encoder=encoder) as milvus,
        ):
            calls = searches(local, MILVUS_SEARCHES, "|faiss") | searches(milvus, MILVUS_SEARCHES, "|milvus")
            latency = interleaved(calls, queries, settings["milvus_queries"])
    by_backend: dict[str, dict[str, Any]] = {"faiss + bm25s": {}, "milvus lite": {}}
    for name, summary in latency.items():
        search, _, backend = name.partition("|")
        by_backend["faiss + bm25s" if backend == "faiss" else "milvus lite"][search] = summary
    return {
        "model": MODEL,
        "pooling": encoder.describe()["pooling"],
        "repeats": settings["milvus_repeats"],
        "queries": settings["milvus_queries"],
        "builds": {
            ("faiss + bm25s" if b == "faiss" else "milvus lite"): {k: spread(v) for k, v in runs.items()}
            for b, runs in builds.items()
        },
        "latency": by_backend,
    }


# ---- the command -----------------------------------------------------------------------------------------------
WORKERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "build": measure_build,
    "query": measure_query,
    "ceiling": measure_ceiling,
    "scale": measure_scale,
    "milvus": measure_milvus,
}


def worker_part(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """One part in a fresh interpreter with the machine's 2 threads (benchmarks/common/runs.py)."""
    found = run_worker(Path(__file__), [name, "--settings", json.dumps(settings)], timeout=4 * 3600)
    if "error" in found:
        raise SystemExit(f"part {name} failed: {found['error']}")
    found.pop("peak_mib", None)
    return found


def measure_part(part: str, settings: dict[str, Any], lock: str | None) -> dict[str, Any]:
    """One part's section: its figures, then how it was run and what the machine did meanwhile."""
    observed = RunConditions(lock)
    print(f"part {part}: measuring (load average {observed.load_before:.2f})", file=sys.stderr)
    figures = measure_http(settings) if part == "http" else worker_part(part, settings)
    return {
        **figures,
        "quick": settings["quick"],
        "command": command_line(),
        "facts": machine_facts(*PACKAGES),
        "conditions": observed.record(),  # every child process has been waited for
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", choices=sorted(WORKERS), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--settings", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--part", action="append", choices=PARTS, help="a part to measure (repeatable; default all)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats: checks the script")
    parser.add_argument("--out", type=Path, default=RESULT, help="the JSON record each part updates")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--work", type=Path, default=Path("/tmp/whitevec-bench/hybrid"), help="indexes kept here")
    parser.add_argument(
        "--lock", type=Path, default=None, help="hold an exclusive lock on this file while measuring"
    )
    args = parser.parse_args()
    if args.worker is not None:
        emit(WORKERS[args.worker](json.loads(args.settings)))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    settings = {**(QUICK if args.quick else FULL), "quick": args.quick, "data_dir": args.data_dir}
    settings["work"] = str(args.work)
    data: dict[str, Any] = {}
    with exclusive_lock(args.lock) as lock:
        for part in args.part or PARTS:
            data = write_part(part, measure_part(part, settings, lock), args.out)
    print("## Speed\n\n" + speed_markdown(data))


if __name__ == "__main__":
    main()
