"""Regenerate docs/results/command-imports.md (and command-imports.json): what a short `whitevec` command costs
before its first line of work, and which heavy libraries it loads (issue 50, item 6: a command loads what its
work needs).

The commands: `whitevec --help`, `whitevec search --help`, a usage error (`whitevec search` with no argument),
and `whitevec index info IDX` and a one-query `whitevec search IDX "wing flutter" -k 5` on three small indexes of
Cranfield's 1,398 documents (FAISS flat, cosine): a static table (`whitevec distill all-MiniLM-L6-v2` with its
defaults) with no transform, the same table with whitening-128, and all-MiniLM-L6-v2 itself with no transform.
Each command runs ``--repeats`` times, each in a fresh interpreter that calls the console script's entry,
`whitevec.cli.run` (`main` in a checkout from before it), the indexes built beforehand and the model files in the
page cache after the first run; the page gives the median wall time, the seconds of imports (the top-level imports
`python -X importtime` counts, in one more run) and the heavy libraries the run had imported when it exited.

    python benchmarks/maintained/bench_command_imports.py --label "LABEL" [--src DIR] [--repeats 5] [--lock FILE]
    python benchmarks/maintained/bench_command_imports.py --render

``--src`` runs another checkout's library (its ``src`` folder), for the before and after; each ``--label`` is
one column group of the page, kept in command-imports.json beside the others until run again. Run it alone on a
quiet machine: the page states the load each run saw. ``--render`` rewrites the page from the JSON. Needs the
shared data ($WHITEVEC_DATA or ../shared/data) and the bundled all-MiniLM-L6-v2.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.data import default_static_table
from benchmarks.common.machine import (
    RunConditions,
    command_line,
    conditions_sentence,
    exclusive_lock,
    machine_facts,
    results_header,
)
from benchmarks.common.runs import median, thread_env

from whitevec.utils.io import atomic_path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "results"
MODEL = "all-MiniLM-L6-v2"
QUERY = "wing flutter"
# The libraries the page reports, heaviest first: a help or usage error should need none of them, a static-table
# search only numpy, faiss, tokenizers and safetensors.
HEAVY = (
    "torch",
    "transformers",
    "sklearn",
    "scipy",
    "pandas",
    "pymilvus",
    "faiss",
    "bm25s",
    "tokenizers",
    "safetensors",
    "numpy",
)
# The three indexes: name -> (model, transform); the static table's model is filled in at run time.
INDEXES = {
    "static": ("static", "none"),
    "static-whitening": ("static", "whitening-128"),
    "minilm": (MODEL, "none"),
}
# A child that calls whitevec's console-script entry (run, or main before there was run) and, at exit, writes the
# top-level modules it imported (an exit handler: run() calls them too).
RUNNER = """
import atexit, json, os, sys

def record():
    with open(os.environ["WHITEVEC_MODULES_OUT"], "w") as out:
        json.dump(sorted({name.split(".")[0] for name in sys.modules}), out)

atexit.register(record)
try:
    from whitevec.cli import run
except ImportError:  # a checkout from before run(), whose console script was main
    from whitevec.cli import main
    sys.exit(main(sys.argv[1:]))
run()
"""


def commands(work: Path) -> list[tuple[str, list[str]]]:
    """The page's rows: (what the row is, the arguments after ``whitevec``)."""
    rows = [("--help", ["--help"]), ("search --help", ["search", "--help"]), ("usage error", ["search"])]
    for name in INDEXES:
        index = str(work / name)
        rows.append((f"index info ({name})", ["index", "info", index]))
        rows.append((f"search ({name})", ["search", index, QUERY, "-k", "5"]))
    return rows


def child_env(src: Path) -> dict[str, str]:
    """The children's environment: ``src`` first on the path, two BLAS threads, no network."""
    env = thread_env()
    env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def build_indexes(work: Path, env: dict[str, str]) -> None:
    """The three indexes under ``work``, each built once (kept between runs, so before and after search the same
    files)."""
    from whitevec.datasets import resolve_data_dir
    from whitevec.datasets.retrieval import read_cranfield

    corpus = work / "cranfield.jsonl"
    if not corpus.is_file():
        documents = read_cranfield(resolve_data_dir(None) / "retrieval" / "cranfield").corpus
        with atomic_path(corpus) as tmp:
            tmp.write_text("".join(json.dumps({"id": doc.id, "text": doc.text}) + "\n" for doc in documents))
    for name, (model, transform) in INDEXES.items():
        if (work / name / "manifest.json").is_file():
            continue
        model = str(default_static_table(MODEL)) if model == "static" else model
        argv = ["index", "build", "--corpus", str(corpus), "--out", str(work / name), "--model", model]
        command = [sys.executable, "-W", "ignore", "-m", "whitevec.cli", *argv, "-t", transform, "-q"]
        subprocess.run(command, env=env, check=True)


def run_once(argv: list[str], env: dict[str, str], scratch: Path, importtime: bool = False) -> dict[str, Any]:
    """One command in a fresh interpreter: its exit status, wall seconds and the top-level modules it imported
    (with ``importtime``, also the seconds of its top-level imports)."""
    modules = scratch / "modules.json"
    options = ["-X", "importtime"] if importtime else []
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-W", "ignore", *options, "-c", RUNNER, *argv],
        env={**env, "WHITEVEC_MODULES_OUT": str(modules)},
        capture_output=True,
        text=True,
        check=False,
    )
    result: dict[str, Any] = {
        "exit": done.returncode,
        "wall_s": time.perf_counter() - started,
        "modules": json.loads(modules.read_text()),
    }
    if importtime:
        # Top-level entries are the unindented ones: "import time: self | cumulative | name".
        lines = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")]
        top = [int(parts[1]) for parts in lines[1:] if len(parts) == 3 and not parts[2].startswith("  ")]
        result["import_s"] = sum(top) / 1e6
    return result


def measure(argv: list[str], env: dict[str, str], repeats: int, scratch: Path) -> dict[str, Any]:
    """``repeats`` timed runs and one ``-X importtime`` run of a command."""
    runs = [run_once(argv, env, scratch) for _ in range(repeats)]
    timed = run_once(argv, env, scratch, importtime=True)
    return {
        "exit": runs[0]["exit"],
        "wall_s": round(median([r["wall_s"] for r in runs]), 3),
        "walls_s": [round(r["wall_s"], 3) for r in runs],
        "import_s": round(timed["import_s"], 3),
        "heavy": [name for name in HEAVY if name in runs[0]["modules"]],
        "modules": len(runs[0]["modules"]),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = child_env(args.src)
    args.work.mkdir(parents=True, exist_ok=True)
    build_indexes(args.work, env)
    commit = (
        subprocess.run(
            ["git", "-C", str(args.src), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        or "uncommitted"
    )
    with exclusive_lock(args.lock) as held, tempfile.TemporaryDirectory(prefix="whitevec-imports-") as scratch:
        conditions = RunConditions(held)
        rows = {}
        for name, argv in commands(args.work):
            rows[name] = measure(argv, env, args.repeats, Path(scratch))
            print(f"{name}: {json.dumps(rows[name])}", file=sys.stderr)
        return {
            "command": command_line(),
            "commit": commit,
            "facts": machine_facts("scikit-learn", "faiss-cpu", "pymilvus"),
            "conditions": conditions.record(),
            "repeats": args.repeats,
            "rows": rows,
        }


def markdown(data: dict[str, Any]) -> str:
    runs = data["runs"]
    labels = list(runs)
    lines = [
        "# What a command loads: the wall time and imports of short `whitevec` commands",
        "",
        results_header(f"`{runs[labels[-1]]['command']}`", *(run["facts"] for run in runs.values())),
        "",
        (__doc__ or "").split("\n\n    python")[0].split("\n\n", 1)[1].strip(),
        "",
    ]
    for label, run in runs.items():
        lines.append(
            f"- **{label}** (commit {run['commit']}, {run['repeats']} runs per command): "
            + conditions_sentence(run["conditions"])
        )
    if any(run["conditions"]["load_before"] > 1 for run in runs.values()):
        lines += [
            "",
            "A run above started at a 1-minute load average over 1 (other work on the 2 cores): its wall times "
            "vary by seconds from run to run; the libraries each command loaded do not.",
        ]
    columns = [f"{label}: wall s (imports s) | heavy libraries" for label in labels]
    header = "| command | " + " | ".join(columns) + " |"
    lines += ["", header, "|---|" + "---:|---|" * len(labels)]
    for name in runs[labels[0]]["rows"]:
        cells = []
        for label in labels:
            row = runs[label]["rows"].get(name)
            if row is None:
                cells += ["-", "-"]
                continue
            status = "" if row["exit"] == 0 else f", exit {row['exit']}"
            cells += [f"{row['wall_s']:.2f} ({row['import_s']:.2f}{status})", ", ".join(row["heavy"]) or "none"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", default=None, help="the run's name on the page (its column group)")
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the src folder of the library to run")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per command")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "whitevec-command-imports")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--lock", type=Path, default=None, help="hold an exclusive lock on this file meanwhile")
    parser.add_argument("--render", action="store_true", help="rewrite command-imports.md from its JSON, no run")
    args = parser.parse_args()
    results = args.out / "command-imports.json"
    data: dict[str, Any] = json.loads(results.read_text()) if results.is_file() else {"runs": {}}
    if not args.render:
        if not args.label:
            parser.error("a run needs --label (its name on the page)")
        data["runs"][args.label] = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    pages = [("command-imports.md", markdown(data))]
    if not args.render:
        pages.insert(0, ("command-imports.json", json.dumps(data, indent=1) + "\n"))
    for name, text in pages:
        with atomic_path(args.out / name) as tmp:
            tmp.write_text(text)
    print(markdown(data))


if __name__ == "__main__":
    main()
