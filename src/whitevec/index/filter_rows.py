"""The rows a metadata filter lets through: the index's metadata read once into columns
(:class:`MetadataColumns`), a parsed filter (:mod:`whitevec.index.filters`) evaluated over them into a mask
(:class:`RowFilter`), which the stores search within (FAISS: an id selector, or a wider search; Milvus: the
passing ids as its filter)."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from whitevec.index.filters import Filter, Junction, Literal, Member, Node, Not, kind_of

_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class MetadataColumns:
    """Each top-level metadata field over rows ``0 .. rows - 1``: its values by kind (numbers as float64,
    strings, booleans), where each kind is present, and the kinds the field holds."""

    def __init__(self, metadata: Mapping[int, Mapping[str, Any] | None], rows: int) -> None:
        self.rows = int(rows)
        self.kinds: dict[str, set[str]] = {}
        values: dict[str, dict[str, dict[int, Any]]] = {}
        for row, fields in metadata.items():
            for name, value in (fields or {}).items():
                kind = kind_of(value)
                self.kinds.setdefault(name, set()).add(kind)
                values.setdefault(name, {}).setdefault(kind, {})[int(row)] = value
        self._columns: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
        for name, by_kind in values.items():
            for kind, cells in by_kind.items():
                present = np.zeros(self.rows, dtype=bool)
                present[list(cells)] = True
                column = np.zeros(self.rows, dtype=np.float64) if kind == "number" else np.empty(self.rows, object)
                column[list(cells)] = list(cells.values())
                self._columns[(name, kind)] = (present, column)

    def column(self, name: str, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """``(present, values)`` of field ``name``'s values of ``kind``; ``present`` is all False when none."""
        found = self._columns.get((name, kind))
        if found is None:
            return np.zeros(self.rows, dtype=bool), np.empty(self.rows, object)
        return found

    def matching(self, node: Node) -> np.ndarray:
        """A bool per row: whether the row's metadata satisfies ``node``."""
        if isinstance(node, Not):
            return ~self.matching(node.inner)
        if isinstance(node, Junction):
            parts = [self.matching(part) for part in node.parts]
            return np.logical_and.reduce(parts) if node.op == "and" else np.logical_or.reduce(parts)
        if isinstance(node, Member):
            out = np.zeros(self.rows, dtype=bool)
            for value in node.values:
                out |= self._compare(node.field, "==", value)
            return out
        return self._compare(node.field, node.op, node.value)

    def _compare(self, name: str, op: str, value: Literal) -> np.ndarray:
        present, column = self.column(name, kind_of(value))
        out = np.zeros(self.rows, dtype=bool)
        if present.any():
            out[present] = np.asarray(_COMPARE[op](column[present], value), dtype=bool)
        return out


@dataclass(frozen=True)
class RowFilter:
    """A filter evaluated over an index's rows: ``mask`` (bool per row) and what it came from."""

    filter: Filter
    mask: np.ndarray

    @property
    def passing(self) -> int:
        """How many documents pass."""
        return int(self.mask.sum())

    @property
    def rows(self) -> np.ndarray:
        """The passing rows, ascending (int64)."""
        return np.flatnonzero(self.mask).astype(np.int64)

    def note(self, total: int) -> str:
        """The note on a search that the filter left nothing to find."""
        return f"the filter {self.filter.text!r} passed 0 of the {total} documents; no hits"


def row_filter(expression: Filter, columns: MetadataColumns) -> RowFilter:
    """``expression`` checked against the index's metadata (one-line BadInputError) and evaluated per row."""
    expression.check(columns.kinds)
    return RowFilter(expression, columns.matching(expression.root))


def rows_filter(visible: str, allowed: np.ndarray | None) -> dict[str, Any]:
    """A Milvus search's ``filter`` (and ``filter_params``) arguments: the rows of the handle's version
    (``visible``, a Milvus expression or ""), and of those the ones ``allowed`` lets through (a template
    parameter: the ids are not spelled into the expression's text)."""
    if allowed is None:
        return {"filter": visible}
    rows = np.flatnonzero(allowed).tolist()
    where = f"({visible}) and id in {{rows}}" if visible else "id in {rows}"
    return {"filter": where, "filter_params": {"rows": rows}}
