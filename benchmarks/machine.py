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
