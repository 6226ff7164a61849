"""Facts about the machine and library versions, recorded beside every committed result."""

from __future__ import annotations

import datetime as _dt
import os
import platform
from importlib import metadata
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
