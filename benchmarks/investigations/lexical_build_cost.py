"""What the lexical part costs a build (issue 39, item 1: is ``--lexical bm25`` on by default?): ``whitevec index
build`` through the library (``whitevec.workflows.build_index_file``, all-MiniLM-L6-v2, default settings, the
vector cache off so both builds encode) with ``--lexical none`` and with ``--lexical bm25``, in turns, on
Cranfield, MED and CACM. Per collection: the median wall time of each build, the lexical part's own seconds (its
manifest record: analysis and bm25s), bm25s alone on the same texts (``bm25s.tokenize`` with the same stemmer and
stop words, then ``BM25.index``), and the bytes of the dense index (vectors, documents, manifest) and of the
lexical files.

    python benchmarks/investigations/lexical_build_cost.py [--repeats 2] [--data-dir DIR]

An investigation of 2026-12-06, not part of the maintained suite (`make bench`); run it alone on a quiet machine.
Quoted in docs/how-to/index-and-compress.md (a lexical index beside the vectors).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common
from benchmarks.common.machine import cpu_model

COLLECTIONS = ("cranfield", "med", "cacm")
LEXICAL_FILES = ("lexical.safetensors", "lexical_terms.json")


def corpus_file(name: str, data_dir: str | None, folder: Path) -> tuple[Path, list[str]]:
    """The collection's documents as a JSONL corpus file (id, text), and their texts."""
    from whitevec.datasets.paths import resolve_data_dir
    from whitevec.datasets.retrieval import load_retrieval_dataset

    source = name if name == "cranfield" else resolve_data_dir(data_dir) / "retrieval" / name
    dataset = load_retrieval_dataset(source, data_dir)
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in dataset.corpus))
    return path, [d.text for d in dataset.corpus]


def timed_build(corpus: Path, out: Path, lexical: str) -> float:
    from whitevec.encoders.models.resolution import DEFAULT_MODEL
    from whitevec.workflows import build_index_file

    started = time.perf_counter()
    build_index_file(
        corpus,
        out,
        encoder={"model": DEFAULT_MODEL, "pooling": None, "cache": False},
        lexical=lexical,
        show_progress=False,
    )
    return time.perf_counter() - started


def bm25s_alone(texts: list[str]) -> float:
    import bm25s
    import Stemmer

    started = time.perf_counter()
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False)
    bm25s.BM25().index(tokens, show_progress=False)
    return time.perf_counter() - started


def measure(name: str, data_dir: str | None, repeats: int, folder: Path) -> dict[str, Any]:
    corpus, texts = corpus_file(name, data_dir, folder)
    seconds: dict[str, list[float]] = {"none": [], "bm25": []}
    for _ in range(repeats):
        for lexical in ("none", "bm25"):  # in turns: a drift of the machine's load falls on both
            seconds[lexical].append(timed_build(corpus, folder / f"{name}-{lexical}", lexical))
    dense = json.loads((folder / f"{name}-none" / "manifest.json").read_text())
    hybrid = json.loads((folder / f"{name}-bm25" / "manifest.json").read_text())
    dense_bytes = (
        sum(f["bytes"] for f in dense["files"].values())
        + (folder / f"{name}-none" / "manifest.json").stat().st_size
    )
    lexical_bytes = sum(hybrid["files"][n]["bytes"] for n in LEXICAL_FILES)
    record = hybrid["lexical"]
    return {
        "collection": name,
        "documents": record["documents"],
        "documents_without_terms": record["documents_without_terms"],
        "terms": record["terms"],
        "dense_build_s": round(statistics.median(seconds["none"]), 2),
        "bm25_build_s": round(statistics.median(seconds["bm25"]), 2),
        "lexical_part_s": record["build_seconds"],
        "bm25s_alone_s": round(min(bm25s_alone(texts) for _ in range(3)), 3),
        "dense_bytes": dense_bytes,
        "lexical_bytes": lexical_bytes,
        "lexical_bytes_per_document": round(lexical_bytes / record["documents"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    print(json.dumps({"cpu": cpu_model(), "cores": os.cpu_count(), "load_before": os.getloadavg()}))
    with tempfile.TemporaryDirectory() as tmp:
        for name in COLLECTIONS:
            print(json.dumps(measure(name, args.data_dir, args.repeats, Path(tmp))), flush=True)
    print(json.dumps({"load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
