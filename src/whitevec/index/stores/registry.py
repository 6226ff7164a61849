"""Entries by name whose built-in ones load on first use: the registries of vector stores, document stores and
writers. A built-in entry's module registers it when imported, so naming it imports nothing until an index asks
(a FAISS search imports no pymilvus); a third party's module registers its own when the user imports it."""

from __future__ import annotations

import importlib
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """``built_in``: name -> the module that registers it when imported."""

    def __init__(self, built_in: dict[str, str]) -> None:
        self.built_in = built_in
        self.entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> None:
        self.entries[name] = entry

    def names(self) -> tuple[str, ...]:
        """The registered names and the built-in ones not yet imported, sorted."""
        return tuple(sorted(set(self.entries) | set(self.built_in)))

    def load(self, name: str) -> T:
        """The entry registered as ``name``, its built-in module imported first if need be (KeyError: none)."""
        if name not in self.entries and name in self.built_in:
            importlib.import_module(self.built_in[name])  # registers it
        return self.entries[name]

    def get(self, name: str) -> T | None:
        """:meth:`load`, or None where no entry has ``name``."""
        return self.load(name) if name in self.names() else None


def registered_name(cls: type, what: str) -> str:
    """The class attribute ``name`` a class registers under; TypeError where it has none."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__qualname__} needs a class attribute `name` to register as {what}")
    return name
