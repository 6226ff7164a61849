"""The systems of the peers benchmark, each behind one protocol (``PeerSystem``), one module per system.

A module exposes ``PACKAGES`` (the distributions whose versions the results record), ``SETTINGS`` (setting name
-> what it is, in words, for the page; the first is the system's documented defaults) and ``open_system(folder,
setting)``, which opens the system's index in ``folder`` (empty: ready for ``build``; else the index a build
left there, reopened from disk). Only the worker of that one system imports its module, so no two systems'
imports meet in one process.

Searches take every query at once (a list of queries, one ranking each) so a system's batch path is used where
it has one; a single-query latency is a call with one query. ``below``: only documents whose ``bucket`` field is
below it pass (the filtered rows).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Protocol

from benchmarks.common.peers.inputs import Docs, Queries

SYSTEMS = ("whitevec", "txtai", "lancedb", "chroma", "qdrant_edge", "milvus_lite")
MODES = ("dense", "lexical", "hybrid")


class PeerSystem(Protocol):
    """One system's index in one folder."""

    modes: tuple[str, ...]  # which of MODES it searches (dense with a filter comes with dense)
    # build: ``lexical=False`` leaves the text unindexed (the dense-only rows past LEXICAL_MAX documents)

    def build(self, docs: Docs, lexical: bool) -> None: ...

    def search(self, mode: str, queries: Queries, k: int, below: int | None = None) -> list[list[str]]: ...

    def add(self, docs: Docs) -> None: ...

    def delete(self, ids: list[str]) -> None: ...

    def close(self) -> None: ...


class SystemModule(Protocol):
    PACKAGES: tuple[str, ...]
    SETTINGS: dict[str, str]

    def open_system(self, folder: Path, setting: str) -> PeerSystem: ...


def system_module(name: str) -> SystemModule:
    """The module of system ``name`` (imports that system's library when it opens an index, not before)."""
    if name not in SYSTEMS:
        raise ValueError(f"unknown system {name!r}; valid: {', '.join(SYSTEMS)}")
    module: SystemModule = importlib.import_module(f"benchmarks.common.peers.systems.{name}_system")  # type: ignore[assignment]
    return module
