"""whitevec's BM25 against LanceDB's full-text index (issue 52, item 2): nDCG@10 on Cranfield, MED, CACM and ADI of
LanceDB 0.40.0's native FTS at its defaults, of whitevec's ``english`` analyzer as it was (before 2026-12-07) and
as it is, and of one change at a time between the two (tokenizer, stop list, folding, token length, k1, repeated
query terms), all scored by :func:`whitevec.evaluation.retrieval.ndcg_at_k`. With ``--speed``: build and query
seconds of the former and the current ``english`` on CACM and on a 100k-document corpus joined from the four
collections' documents (document i is documents i and 7i + 3, modulo the 5,719, joined by a space).

LanceDB runs in a venv of its own, in a subprocess (this file again, ``--lance-worker``: it imports only lancedb):

    python3 -m venv /work/venv-lance && /work/venv-lance/bin/pip install lancedb==0.40.0 pandas==3.1.1
    python benchmarks/investigations/lexical_vs_lance.py [--lance-python /work/venv-lance/bin/python]
        [--data-dir DIR] [--speed] [--repeats 3] [--json out.json]

Without ``--lance-python`` (or the venv missing) the LanceDB row is skipped. ``--speed --default-only`` times the
``english`` analyzer and k1 of whatever whitevec is imported: run it in turns with ``PYTHONPATH`` on this
checkout's ``src`` and on one from before 2026-12-07 to compare the code as it was.

An investigation of 2026-12-07, not part of the maintained suite; quality figures do not depend on the machine's
load, ``--speed`` ones do (run it alone). Quoted in docs/notes/lexical-analyzer.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

COLLECTIONS = ("cranfield", "med", "cacm", "adi")
K = 10
LANCE_VERSION = "0.40.0"


def lance_worker(request: Path, answer: Path) -> None:
    """In LanceDB's venv: index the documents with ``create_fts_index`` at its defaults, search each query at k=10;
    write ``{"run": {qid: [doc ids]}, "index_bytes": ...}``."""
    import lancedb

    job = json.loads(request.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        table = lancedb.connect(tmp).create_table("docs", data=[{"id": i, "text": t} for i, t in job["docs"]])
        table.create_fts_index("text")
        run = {}
        for qid, text in job["queries"]:
            found = table.search(text, query_type="fts").limit(job["k"]).select(["id"]).to_list()
            run[qid] = [row["id"] for row in found]
        index_bytes = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file() and "_indices" in f.parts)
    answer.write_text(json.dumps({"run": run, "index_bytes": index_bytes, "lancedb": lancedb.__version__}))


def dataset(name: str, data_dir: str | None) -> Any:
    from whitevec.datasets.paths import resolve_data_dir
    from whitevec.datasets.retrieval import load_retrieval_dataset

    return load_retrieval_dataset(resolve_data_dir(data_dir) / "retrieval" / name)


def mean_ndcg(run: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> float:
    from whitevec.evaluation.retrieval import ndcg_at_k

    return round(100 * statistics.fmean(ndcg_at_k(run[q], qrels[q], K) for q in run), 2)


def lance_run(python: str, data: Any) -> dict[str, Any]:
    queries = data.judged_queries()
    job = {"docs": [[d.id, d.text] for d in data.corpus], "queries": list(queries.items()), "k": K}
    with tempfile.TemporaryDirectory() as tmp:
        request, answer = Path(tmp) / "request.json", Path(tmp) / "answer.json"
        request.write_text(json.dumps(job))
        subprocess.run([python, __file__, "--lance-worker", str(request), str(answer)], check=True)
        return dict(json.loads(answer.read_text()))


def variants() -> dict[str, tuple[Any, dict[str, Any]]]:
    """Each row's analyzer and BM25 parameters: the former ``english`` with one change at a time towards the
    current, the current, and the current with one change at a time back."""
    from whitevec.index.lexical.analyzers import (
        ALPHANUMERIC_PATTERN,
        FORMER_DEFINITIONS,
        MAX_TOKEN_LENGTH,
        WORD_PATTERN,
        make_analyzer,
    )

    former, current = FORMER_DEFINITIONS["english"][0], make_analyzer("english")
    old_k1, new_k1 = {"k1": 1.5}, {"k1": 1.2}
    return {
        "former english, k1 1.5 (whitevec before)": (former, old_k1),
        "former + k1 1.2": (former, new_k1),
        "former + one-character words and numbers": (replace(former, token_pattern=ALPHANUMERIC_PATTERN), old_k1),
        "former + NLTK's stop words": (replace(former, stop_words="nltk"), old_k1),
        "former + NLTK's stop words matched against stems": (
            replace(former, stop_words="nltk", stop_stems=True),
            old_k1,
        ),
        "former + ASCII folding": (replace(former, ascii_folding=True), old_k1),
        f"former + terms under {MAX_TOKEN_LENGTH} characters": (replace(former, max_token_length=40), old_k1),
        "current english, k1 1.2 (whitevec after)": (current, new_k1),
        "current, k1 1.5": (current, old_k1),
        "current - one-character words (\\w\\w+)": (replace(current, token_pattern=WORD_PATTERN), new_k1),
        "current - stems stopped (words stopped, as Lucene)": (replace(current, stop_stems=False), new_k1),
        "current - NLTK's stop words (bm25s's)": (replace(current, stop_words="english"), new_k1),
        "current - ASCII folding": (replace(current, ascii_folding=False), new_k1),
        "current - token length limit": (replace(current, max_token_length=None), new_k1),
        "current, query terms once each": (current, {**new_k1, "query_terms_once": True}),
    }


class QueryTermsOnce:
    """An analyzer's terms with each query's repeated terms once (LanceDB dedups a query's tokens; bm25s, as
    Lucene, counts a term the query repeats once per repeat): set on a built index for its searches."""

    def __init__(self, analyzer: Any) -> None:
        self.analyzer = analyzer

    def analyze(self, texts: list[str]) -> list[list[str]]:
        return [list(dict.fromkeys(terms)) for terms in self.analyzer.analyze(texts)]


def whitevec_run(data: Any, analyzer: Any, params: dict[str, Any]) -> dict[str, list[str]]:
    from whitevec.index.lexical.bm25 import LexicalIndex

    once = params.pop("query_terms_once", False)
    index = LexicalIndex.build([d.text for d in data.corpus], analyzer, **params)
    if once:
        index.analyzer = QueryTermsOnce(analyzer)  # type: ignore[assignment]
    queries = data.judged_queries()
    rows, _ = index.search(list(queries.values()), K)
    return {q: [data.corpus[r].id for r in row if r >= 0] for q, row in zip(queries, rows, strict=True)}


def quality(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    lance = args.lance_python if args.lance_python and Path(args.lance_python).exists() else None
    for name in COLLECTIONS:
        data = dataset(name, args.data_dir)
        if lance:
            answer = lance_run(lance, data)
            table.setdefault(f"LanceDB {answer['lancedb']} FTS, its defaults", {})[name] = mean_ndcg(
                answer["run"], data.qrels
            )
        for label, (analyzer, params) in variants().items():
            table.setdefault(label, {})[name] = mean_ndcg(whitevec_run(data, analyzer, dict(params)), data.qrels)
        print(f"{name} done", file=sys.stderr)
    return table


def speed(args: argparse.Namespace) -> dict[str, Any]:
    """Median build and query seconds of the former and the current ``english`` (each at its k1)."""
    from whitevec.index.lexical.bm25 import LexicalIndex

    sets = [dataset(name, args.data_dir) for name in COLLECTIONS]
    docs = [d.text for data in sets for d in data.corpus]
    queries = [q for data in sets for q in data.judged_queries().values()]
    cacm = [d.text for d in sets[COLLECTIONS.index("cacm")].corpus]
    joined = [f"{docs[i % len(docs)]} {docs[(7 * i + 3) % len(docs)]}" for i in range(100_000)]
    if args.default_only:  # this checkout's default, importable from a whitevec before the change
        from whitevec.index.lexical.analyzers import make_analyzer

        chosen: dict[str, tuple[Any, dict[str, Any]]] = {"default english": (make_analyzer("english"), {})}
    else:
        chosen = {k: v for k, v in variants().items() if "whitevec before" in k or "whitevec after" in k}
    out: dict[str, Any] = {"load_before": os.getloadavg(), "queries": len(queries)}
    for corpus_name, texts in (("cacm", cacm), ("joined-100k", joined)):
        builds: dict[str, list[float]] = {label: [] for label in chosen}
        searches: dict[str, list[float]] = {label: [] for label in chosen}
        for _ in range(args.repeats):  # the two in turns, so a change of load falls on both
            for label, (analyzer, params) in chosen.items():
                started = time.perf_counter()
                index = LexicalIndex.build(texts, analyzer, **params)
                builds[label].append(time.perf_counter() - started)
                started = time.perf_counter()
                for query in queries:  # one query a call, as a service answers them
                    index.search([query], K)
                searches[label].append(time.perf_counter() - started)
                out[f"{corpus_name}: {label}"] = {"documents": len(texts), "terms": len(index.terms)}
                out[f"{corpus_name}: {label}"]["postings"] = index.record()["postings"]
        for label in chosen:
            row = out[f"{corpus_name}: {label}"]
            row["build_s"] = [round(x, 3) for x in sorted(builds[label])]
            row["build_s_median"] = round(statistics.median(builds[label]), 3)
            row["query_ms_median"] = round(1000 * statistics.median(searches[label]) / len(queries), 3)
            print(corpus_name, label, row, file=sys.stderr)
    out["load_after"] = os.getloadavg()
    return out


def main() -> None:
    if sys.argv[1:2] == ["--lance-worker"]:
        lance_worker(Path(sys.argv[2]), Path(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lance-python", default="/work/venv-lance/bin/python")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--default-only", action="store_true", help="--speed of the default english alone")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    result: dict[str, Any] = {"ndcg@10": quality(args)} if not args.speed else {"speed": speed(args)}
    for label, row in result.get("ndcg@10", {}).items():
        print(f"| {label} | " + " | ".join(f"{row[c]:.2f}" for c in COLLECTIONS) + " |")
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
