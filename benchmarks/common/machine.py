"""Facts about the machine and library versions, recorded beside every committed result, and the conditions a run
observed while it measured (``RunConditions``), rendered by ``conditions_sentence``, the one place a page says how
its figures were taken."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import shlex
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def versions(*packages: str) -> dict[str, str]:
    found = {}
    for name in packages:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def machine_facts(*packages: str) -> dict[str, Any]:
    """Date, CPU model, usable cores, Python and the named packages' versions."""
    return {
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "versions": versions("whitevec", "torch", "transformers", "numpy", *packages),
    }


def facts_markdown(facts: dict[str, Any]) -> str:
    libs = ", ".join(f"{k} {v}" for k, v in facts["versions"].items())
    return (
        f"Measured {facts['date']} on {facts['cpu']} ({facts['cores']} cores), Python {facts['python']}; {libs}."
    )


def results_header(command: str, *facts: dict[str, Any]) -> str:
    """The line a results page starts with: the command that regenerates it (Markdown, code in backticks), the
    machine(s) and the day(s) its figures were measured on, from the ``machine_facts`` of its runs."""
    machines = list(dict.fromkeys(f"{f['cpu']}, {f['cores']} cores" for f in facts))
    days = sorted({f["date"][:10] for f in facts})
    date = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
    return f"Command: {command}; machine: {' and '.join(machines)}; date: {date}"


# ---- the conditions of a run, as observed, and the one sentence that reports them --------------------------
def command_line(argv: list[str] | None = None) -> str:
    """The command that ran, as a user types it again: ``python``, its ``-W`` options and the script's own
    ``sys.argv`` (or ``argv``, the script and its arguments, alone)."""
    if argv is not None:
        return " ".join(["python", *map(shell_word, argv)])
    warn_options = [word for option in sys.warnoptions for word in ("-W", shell_word(option))]
    return " ".join(["python", *warn_options, *map(shell_word, sys.argv)])


def shell_word(arg: str) -> str:
    """An argument as a shell reads it back: bare when safe, else in double quotes where that suffices."""
    if shlex.quote(arg) == arg:
        return arg
    return f'"{arg}"' if not set(arg) & set('"$`\\!') else shlex.quote(arg)


@contextlib.contextmanager
def exclusive_lock(path: Path | None) -> Iterator[str | None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing; the user chooses it, and every job that must
    not share the cores takes the same one) for the block; yields the path to record, or None without one."""
    if path is None:
        yield None
        return
    import fcntl

    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for the lock on {path}", file=sys.stderr)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield str(path)  # closing the file releases the lock


def _machine_busy_seconds() -> float | None:
    """CPU seconds every process on the machine has used since boot (/proc/stat, all states but idle and
    iowait), or None where the kernel does not say."""
    try:
        with open("/proc/stat") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    """CPU seconds of this process and of the children it has waited for (their own waited-for children too)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


class RunConditions:
    """What a run observed about the machine while it measured: the CPU, the 1-minute load average before and
    after, its own CPU seconds against the wall time and against all the machine's, and the lock it held (only
    one it took itself). ``record()`` is what a results file keeps; ``conditions_sentence`` renders it.

    "Own" CPU seconds are this process's and those of the children it waited for; a process it started but did
    not wait for (a daemon such as Ray's) counts among the others, so use it where the run waits for its own."""

    def __init__(self, lock: str | None = None) -> None:
        self.lock = lock
        self.load_before = os.getloadavg()[0]
        self.wall_start = time.monotonic()
        self.own_start = _own_cpu_seconds()
        self.machine_start = _machine_busy_seconds()

    def record(self) -> dict[str, Any]:
        """The conditions from the start until now (call it once every child process has been waited for)."""
        wall = time.monotonic() - self.wall_start
        own = _own_cpu_seconds() - self.own_start
        machine_now = _machine_busy_seconds()
        record: dict[str, Any] = {
            "cpu": cpu_model(),
            "cores": len(os.sched_getaffinity(0)),
            "load_before": round(self.load_before, 2),
            "load_after": round(os.getloadavg()[0], 2),
            "wall_s": round(wall, 2),
            "own_cpu_s": round(own, 2),
        }
        if self.machine_start is not None and machine_now is not None:
            # What the machine's processes used beyond this run's own: another job sharing the cores.
            record["others_cpu_s"] = round(max(0.0, machine_now - self.machine_start - own), 2)
        if self.lock is not None:
            record["lock"] = self.lock
        return record


def conditions_sentence(conditions: dict[str, Any]) -> str:
    """How a run was measured, from its record and nothing else: a condition the record lacks is not claimed.
    Takes the record of ``RunConditions`` or any part of it (older results kept only the load before)."""
    parts = []
    if "cpu" in conditions:
        parts.append(f"CPU {conditions['cpu']}, {conditions['cores']} cores")
    if "load_before" in conditions:
        load = f"1-minute load average {conditions['load_before']:.2f} at the start"
        parts.append(load + (f", {conditions['load_after']:.2f} at the end" if "load_after" in conditions else ""))
    if "wall_s" in conditions:
        wall = max(conditions["wall_s"], 1e-9)
        share = f"the run's own processes used {conditions['own_cpu_s']:.0f} CPU s in {conditions['wall_s']:.0f} s"
        share += f" ({conditions['own_cpu_s'] / wall:.2f} cores)"
        if "others_cpu_s" in conditions:
            others = conditions["others_cpu_s"]
            share += f", all other processes on the machine {others:.0f} CPU s ({others / wall:.2f} cores)"
        parts.append(share)
    if "lock" in conditions:
        # The record keeps the path; a page names only the fact (a lock file is one machine's detail).
        parts.append("the script held an exclusive lock (its `--lock` file) throughout")
    return "; ".join(parts) + "." if parts else ""
