"""Metadata filters (:mod:`whitevec.index.filters`) in Milvus's terms: a search's ``filter`` argument for the rows
a filter passes (:func:`rows_filter`, what the Milvus store searches within), and a filter as Milvus's boolean
expression over a JSON field (:func:`milvus_expression`; tested against Milvus Lite, not used by a search: see
docs/notes/milvus-lite-writes.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from whitevec.errors import BadInputError
from whitevec.index.filters.language import Compare, Filter, Literal, Member, Node, Not

INT64 = (-(2**63), 2**63 - 1)  # Milvus's integers


def rows_filter(visible: str, allowed: np.ndarray | None) -> dict[str, Any]:
    """A Milvus search's ``filter`` argument: the rows of the handle's version (``visible``, a Milvus expression
    or ""), and of those the ones ``allowed`` lets through, spelled as the shorter of the passing ids or the
    others (Milvus Lite takes no expression templates)."""
    if allowed is None:
        return {"filter": visible}
    mask = np.asarray(allowed, dtype=bool)
    passing = np.flatnonzero(mask)
    if passing.size * 2 <= mask.size:
        rows = f"id in [{','.join(map(str, passing.tolist()))}]"
    else:  # rows past the mask are not the index's: left out by ``id < mask.size``
        rows = f"id < {mask.size} and not (id in [{','.join(map(str, np.flatnonzero(~mask).tolist()))}])"
    return {"filter": f"({visible}) and ({rows})" if visible else rows}


def milvus_expression(expression: Filter, field: Callable[[str], str] | None = None) -> str:
    """``expression`` as a Milvus boolean expression; ``field`` writes a field's reference (default: a key of the
    JSON field ``metadata``, ``metadata["year"]``). An integer keeps every digit; one past int64, which Milvus
    cannot compare exactly, is a one-line BadInputError."""
    path = field or (lambda name: f"metadata[{json.dumps(name)}]")
    return _milvus(expression.root, path)


def _milvus_literal(value: Literal) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
        raise BadInputError(f"filter value {value} is past Milvus's 64-bit integers; it cannot compare it exactly")
    return repr(value)  # an int's every digit: Milvus compares a JSON field's integers as int64


def _milvus(node: Node, path: Callable[[str], str]) -> str:
    if isinstance(node, Compare):
        return f"{path(node.field)} {node.op} {_milvus_literal(node.value)}"
    if isinstance(node, Member):  # Milvus takes ``in`` on a field only, not on a key of a JSON field: equalities
        return " or ".join(f"({path(node.field)} == {_milvus_literal(value)})" for value in node.values)
    if isinstance(node, Not):
        return f"not ({_milvus(node.inner, path)})"
    return f" {node.op} ".join(f"({_milvus(part, path)})" for part in node.parts)
