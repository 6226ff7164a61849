"""What a process's end costs after torch, transformers, faiss and scikit-learn are imported: the interpreter's
teardown (``sys.exit``) against ``whitevec.cli.exit_without_teardown`` (exit handlers, flushes, ``os._exit``).

Two cases, each ``--repeats`` times, the two ways in turns:

- a child forked from a process that imported those libraries (what the docs tests' warm ``whitevec`` does per
  command): seconds from the fork to the parent's ``waitpid``, the child doing nothing but end;
- a fresh interpreter that imports them and then ends: seconds from its last line (a timestamp it prints) to the
  parent seeing it exit.

    python benchmarks/investigations/process_exit.py [--repeats 5]

An investigation of 2026-12-07 backing docs/notes/process-exit.md; it prints medians and the load average
before and after. Run it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import statistics
import subprocess
import sys
import time

# The warm docs server's imports (tests/warm_cli.py's WARM_MODULES, whitevec's own left out).
HEAVY = ("torch", "transformers.models.bert.modeling_bert", "faiss", "sklearn.decomposition")
FRESH_CHILD = """
import importlib, sys, time
for module in {heavy!r}:
    importlib.import_module(module)
from whitevec.cli import exit_without_teardown
print(time.time(), flush=True)
if sys.argv[1] == "teardown":
    sys.exit(0)
exit_without_teardown(0)
"""


def forked_end(way: str) -> float:
    """Seconds from fork to the end of a child that only ends, ``way`` being ``teardown`` or ``without``."""
    from whitevec.cli import exit_without_teardown

    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        if way == "teardown":
            sys.exit(0)
        exit_without_teardown(0)
    os.waitpid(pid, 0)
    return time.perf_counter() - started


def fresh_end(way: str) -> float:
    """Seconds from a fresh interpreter's last line to its end (it imported ``HEAVY`` first)."""
    child = subprocess.Popen(
        [sys.executable, "-c", FRESH_CHILD.format(heavy=HEAVY), way], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    last_line = float(child.stdout.readline())
    child.wait()
    return time.time() - last_line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    for module in HEAVY:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    for case, measure in (("forked child", forked_end), ("fresh process", fresh_end)):
        seconds: dict[str, list[float]] = {"teardown": [], "without": []}
        for _ in range(args.repeats):
            for way in seconds:
                seconds[way].append(measure(way))
        shown = ", ".join(
            f"{way} {statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"
            for way, values in seconds.items()
        )
        print(f"{case}: median of {args.repeats}: {shown}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
