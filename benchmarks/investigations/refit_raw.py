"""What a refit costs from the raw vectors an index keeps (``--keep-raw-vectors``) against one that encodes every
document again, and what keeping them costs on disk (issue 40, part 4: "refit on stored raw vectors ... and
rewrite the codes without encoding again").

For each encoder (all-MiniLM-L6-v2 with its own pooling; the static table of ``whitevec distill
all-MiniLM-L6-v2`` with its defaults, benchmarks.common.data's ``default_static_table``), on CACM (3,204
documents): two indexes are built alike (flat, ``whitening-128``, on the first half of the corpus, then the other
half added with ``Retriever.add``: a stale fit), one keeping its raw vectors; each is then refitted as ``whitevec
index refit`` does (``whitevec.workflows.index_writes.refit_index``: the index loaded, the transform fitted on
every live document, the index rewritten), timed from the call to its return, in one process. The vector cache is a
fresh, empty folder and the builds do not fill it, so the re-encoding refit encodes every document (as on a machine
whose cache does not hold them). Both refits must answer CACM's queries with the same top 10 (checked).

    python -W ignore benchmarks/investigations/refit_raw.py [--data-dir DIR] [--out docs/results] [--repeats 3]
        [--encoding-repeats 1] [--no-static]

Dated 2026-12-06. Writes docs/results/refit_raw.json and its block in docs/results/staleness.md (between the
``refit-raw`` marks, below the page's notes mark, which stale_whitening.py keeps when it writes the page again).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import default_static_table
from benchmarks.common.machine import RunConditions, command_line, conditions_sentence, machine_facts

from whitevec.datasets.paths import resolve_data_dir
from whitevec.datasets.retrieval import load_retrieval_dataset
from whitevec.utils.io import atomic_path, write_json

MODEL = "all-MiniLM-L6-v2"
TRANSFORM = "whitening-128"
ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- refit-raw: begin -->", "<!-- refit-raw: end -->"


def measure(
    label: str, model: str, pooling: str | None, data: Path, work: Path, repeats: dict[str, int]
) -> dict[str, Any]:
    """Both refits of one encoder's CACM index: seconds (each run on a fresh copy; ``repeats``: runs of each),
    bytes, same answers."""
    from whitevec.encoders import load_encoder
    from whitevec.index import Retriever, read_manifest
    from whitevec.workflows.index_writes import refit_index

    dataset = load_retrieval_dataset(str(data / "retrieval" / "cacm"), data)
    docs, half = dataset.corpus, len(dataset.corpus) // 2
    encoder = load_encoder(model, pooling, cache=False)
    built: dict[bool, Path] = {}
    for keep in (True, False):
        built[keep] = work / f"{label}-{'raw' if keep else 'plain'}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            retriever = Retriever.build(
                docs[:half], built[keep], encoder=encoder, transform=TRANSFORM, keep_raw_vectors=keep
            )
            retriever.add(docs[half:])
            retriever.close()
    seconds: dict[str, list[float]] = {"raw": [], "encoding": []}
    for keep, name in ((True, "raw"), (False, "encoding")):
        for _ in range(repeats[name]):
            copy = work / f"{built[keep].name}-copy"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(built[keep], copy)
            started = time.perf_counter()
            refit_index(copy)
            seconds[name].append(round(time.perf_counter() - started, 2))
    queries = list(dataset.judged_queries().values())
    answers = []
    for keep in (True, False):
        with Retriever.load(work / f"{built[keep].name}-copy", encoder=encoder) as refit:
            answers.append([[hit.id for hit in hits] for hits in refit.search(queries, 10)])
    manifest = read_manifest(work / f"{built[True].name}-copy")
    files = manifest["files"]
    raw_bytes = sum(int(v["bytes"]) for name, v in files.items() if name.endswith("raw_vectors.npy"))
    folder_bytes = sum(f.stat().st_size for f in (work / f"{built[True].name}-copy").iterdir() if f.is_file())
    getattr(encoder, "close", lambda: None)()  # the torch encoder's vector cache
    return {
        "encoder": label,
        "documents": len(docs),
        "encoder_dim": int(manifest["encoder_dim"]),
        "refit_seconds": seconds,
        "same_top10": answers[0] == answers[1],
        "queries": len(queries),
        "raw_bytes": raw_bytes,
        "raw_bytes_per_document": round(raw_bytes / len(docs), 1),
        "folder_bytes": folder_bytes,
        "raw_share_of_folder": round(raw_bytes / folder_bytes, 4),
    }


def block(record: dict[str, Any]) -> str:
    """The page's block: the command, conditions, one row per encoder."""
    rows = [
        "| encoder | documents | refit from raw vectors (s) | refit encoding again (s) | speed-up | same top 10 "
        "| raw vectors: bytes per document | share of the index folder |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in record["results"]:
        raw, enc = min(r["refit_seconds"]["raw"]), min(r["refit_seconds"]["encoding"])
        rows.append(
            f"| {r['encoder']} | {r['documents']} | {raw:.2f} | {enc:.2f} | {enc / raw:.1f}x | "
            f"{'yes' if r['same_top10'] else 'NO'} ({r['queries']} queries) | {r['raw_bytes_per_document']:.0f} "
            f"({r['encoder_dim']}-d float32) | {100 * r['raw_share_of_folder']:.1f}% |"
        )
    facts = record["machine"]
    return "\n".join(
        [
            BEGIN,
            "## Refit from kept raw vectors",
            "",
            f"Command: `{record['command']}`; {facts['cpu']}, {facts['cores']} cores; date: {facts['date']}.",
            conditions_sentence(record["conditions"]),
            "",
            f"CACM, `{TRANSFORM}`, flat float32: built on the first half of the corpus, the other half added, "
            "then `whitevec index refit` (`refit_index`: load, fit, rewrite; the best of "
            f"{record['repeats']['raw']} runs from raw vectors and {record['repeats']['encoding']} encoding, each "
            "on a fresh copy). The vector cache starts empty, so the refit that encodes encodes every document. "
            "Bytes: the raw vectors' files against every file of the index folder "
            "(after the refit: one segment).",
            "",
            *rows,
            END,
        ]
    )


def write_page(page: Path, text: str) -> None:
    """Replace the block in ``page`` (or append it at the end, below the notes mark)."""
    current = page.read_text(encoding="utf-8") if page.is_file() else ""
    if BEGIN in current and END in current:
        current = current.split(BEGIN, 1)[0] + text + current.split(END, 1)[1]
    else:
        current = current.rstrip("\n") + "\n\n" + text + "\n"
    with atomic_path(page) as tmp:
        tmp.write_text(current, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None, help="whitevec's data folder (WHITEVEC_DATA)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results", help="folder of the JSON and page")
    parser.add_argument("--repeats", type=int, default=3, help="refits from raw vectors timed (the best shown)")
    parser.add_argument("--encoding-repeats", type=int, default=1, help="refits that encode timed (minutes each)")
    parser.add_argument("--no-static", action="store_true", help="all-MiniLM-L6-v2 only")
    args = parser.parse_args()
    data = resolve_data_dir(args.data_dir)
    repeats = {"raw": args.repeats, "encoding": args.encoding_repeats}
    static = None if args.no_static else str(default_static_table(MODEL))
    conditions = RunConditions()
    with tempfile.TemporaryDirectory(prefix="refit-raw-") as scratch:
        os.environ["WHITEVEC_CACHE"] = str(Path(scratch) / "vector-cache")  # empty: the refit that encodes, does
        work = Path(scratch)
        results = [measure(f"{MODEL} (model)", MODEL, "model", data, work, repeats)]
        if static is not None:
            results.append(measure("static table", static, None, data, work, repeats))
    record = {
        "command": command_line(),
        "machine": machine_facts("faiss-cpu"),
        "conditions": conditions.record(),
        "repeats": repeats,
        "results": results,
    }
    write_json(args.out / "refit_raw.json", record)
    text = block(record)
    write_page(args.out / "staleness.md", text)
    print(text)


if __name__ == "__main__":
    main()
