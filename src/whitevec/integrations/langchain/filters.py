"""LangChain's dict filters (``{"year": {"$gte": 1960}}``) as whitevec filter expressions
(:mod:`whitevec.index.filters.language`); what whitevec's language cannot say, refused in one line."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from whitevec.errors import BadInputError

COMPARISONS = {"$eq": "==", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
JUNCTIONS = {"$and": "and", "$or": "or"}
# LangChain's operators whitevec's filter language cannot express, and why.
REFUSED = {
    "$exists": "whitevec's filters cannot ask whether a field is present",
    "$like": "whitevec's filters compare whole values (no patterns)",
    "$ilike": "whitevec's filters compare whole values (no patterns)",
    "$contains": "whitevec's filters compare whole values (no substrings or list members)",
    "$text": "whitevec's filters compare whole values (no full-text match: search in lexical or hybrid mode)",
    "$between": "write it as $gte and $lte",
}
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = ("and", "or", "not", "in", "true", "false")


def filter_expression(spec: Mapping[str, Any] | None) -> str | None:
    """LangChain's dict filter as a whitevec filter expression (None for none).

    ``{"field": value}`` is ``==``; ``{"field": {"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte": value}}``,
    ``{"$in" | "$nin": [values]}`` (several operators on a field: all must hold); ``{"$and" | "$or": [filters]}``,
    ``{"$not": filter}``; several keys: all must hold. Values are strings, numbers and booleans. Fields are
    top-level metadata keys of letters, digits and underscores. Anything else (``$exists``, ``$like``, ``None``, a
    dotted field) is one BadInputError line naming it: whitevec's language cannot say it.

    The logic is whitevec's three-valued one: ``$ne`` and ``$nin`` (and ``$not``) pass no document that lacks the
    field, as in SQL.
    """
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise BadInputError(f"a filter is a dict in LangChain's form, not a {type(spec).__name__}")
    return _all_of(spec) if spec else None


def _all_of(spec: Mapping[str, Any]) -> str:
    return _joined("and", [_clause(key, value) for key, value in spec.items()])


def _joined(op: str, parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f" {op} ".join(f"({part})" for part in parts)


def _clause(key: str, value: Any) -> str:
    if key in JUNCTIONS:
        if not isinstance(value, list | tuple) or not value:
            raise BadInputError(f"filter {key} takes a non-empty list of filters, got {_shown(value)}")
        return _joined(JUNCTIONS[key], [_all_of(_mapping(item, key)) for item in value])
    if key == "$not":
        return f"not ({_all_of(_mapping(value, key))})"
    field = _field(key)
    if not isinstance(value, Mapping):
        return f"{field} == {_literal(value, field)}"
    if not value:
        raise BadInputError(f"filter on {field!r}: an empty dict of operators")
    return _joined("and", [_comparison(field, op, operand) for op, operand in value.items()])


def _comparison(field: str, op: str, operand: Any) -> str:
    if op in COMPARISONS:
        return f"{field} {COMPARISONS[op]} {_literal(operand, field)}"
    if op in ("$in", "$nin"):
        if not isinstance(operand, list | tuple) or not operand:
            raise BadInputError(
                f"filter {op} on {field!r} takes a non-empty list of values, got {_shown(operand)}"
            )
        member = f"{field} in [{', '.join(_literal(v, field) for v in operand)}]"
        return member if op == "$in" else f"not {member}"
    if op == "$not":
        return f"not ({_joined('and', [_comparison(field, o, v) for o, v in _mapping(operand, op).items()])})"
    if op in REFUSED:
        raise BadInputError(f"filter {op} on {field!r} cannot be expressed: {REFUSED[op]}")
    raise BadInputError(
        f"unknown filter operator {op!r} on {field!r}; whitevec takes {', '.join([*COMPARISONS, '$in', '$nin'])}"
    )


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not value:
        raise BadInputError(f"filter {where} takes a non-empty dict, got {_shown(value)}")
    return value


def _field(key: Any) -> str:
    if isinstance(key, str) and key.startswith("$"):
        raise BadInputError(f"unknown filter operator {key!r}; whitevec takes $and, $or and $not at this level")
    if not isinstance(key, str) or not _FIELD.fullmatch(key) or key.lower() in _KEYWORDS:
        raise BadInputError(
            f"filter field {key!r} cannot be expressed: whitevec's filters name top-level metadata fields of "
            f"letters, digits and underscores, other than {', '.join(_KEYWORDS)}"
        )
    return key


def _literal(value: Any, field: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    raise BadInputError(
        f"filter on {field!r}: {_shown(value)} cannot be expressed; whitevec's filters compare strings, finite "
        "numbers and booleans"
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:60]}..."
