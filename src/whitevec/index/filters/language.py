"""Metadata filters: one small expression language over the documents' metadata fields, parsed once to a tree
(never evaluated as Python), checked against an index's metadata, and turned into a mask over the index's rows
(Milvus's boolean expression of a filter: :mod:`whitevec.index.milvus.filters`).

The language is a subset of Milvus's filter syntax (``docs/how-to/filters.md`` has the table):

    expr       := or
    or         := and ("or" and)*
    and        := unary ("and" unary)*
    unary      := "not" unary | "(" expr ")" | comparison
    comparison := FIELD ("==" | "!=" | "<" | "<=" | ">" | ">=") LITERAL | FIELD "in" "[" LITERAL ("," LITERAL)* "]"
    LITERAL    := "string" | 'string' | integer | float | true | false   (strings take JSON's escapes and \\')

Keywords are case-insensitive (``AND``, ``True``). FIELD is a top-level metadata key made of letters, digits
and underscores. Booleans compare with ``==`` and ``!=`` only. A document passes where the expression is true,
in the three-valued logic of SQL and Milvus: a comparison is true or false where the document's field holds a
value of the literal's kind (numbers, integers and floats alike; strings; booleans), and unknown where the field
is missing or of another kind; ``not`` of unknown is unknown, ``and`` is false if a part is false, ``or`` true if
a part is true. So neither ``year == 2000`` nor ``not year == 2000`` passes a document without a year.

Numbers compare exactly, as the numbers they are: integers past 2**53 (which a float64 would round) against
integers and floats alike. An expression nests at most :data:`MAX_DEPTH` parentheses and ``not`` deep, and a
number is at most :data:`MAX_NUMBER_CHARS` characters long; past either it is refused in one line.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from whitevec.errors import BadInputError

ORDERING = ("<", "<=", ">", ">=")
OPERATORS = ("==", "!=", *ORDERING)
KEYWORDS = ("and", "or", "not", "in", "true", "false")

Literal = str | int | float | bool

MAX_DEPTH = 64  # parentheses and ``not`` nested: far above a written filter, far below Python's recursion limit
MAX_NUMBER_CHARS = 64  # a number literal's characters: int64 is 20, a float's shortest text at most 24
SHOWN_CHARS = 100  # of a long expression, the start a fault's message quotes

_TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<number>-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
      | (?P<op>==|!=|<=|>=|<|>)
      | (?P<punct>[()\[\],])
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*)""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str  # string, number, op, punct, word, end
    text: str
    column: int  # 1-based, in the expression as given


@dataclass(frozen=True)
class Compare:
    """``field op value``; ``column`` is where the field stands in the expression."""

    field: str
    op: str
    value: Literal
    column: int


@dataclass(frozen=True)
class Member:
    """``field in [values]``."""

    field: str
    values: tuple[Literal, ...]
    column: int


@dataclass(frozen=True)
class Not:
    inner: Node


@dataclass(frozen=True)
class Junction:
    """``parts`` joined by ``and`` or ``or`` (``op``)."""

    op: str
    parts: tuple[Node, ...]


Node = Compare | Member | Not | Junction


def kind_of(value: Any) -> str:
    """A value's kind as filters compare it: ``bool``, ``number`` (int or float), ``string``, or ``other``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "other"


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    at = 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise _error(text, at + 1, f"unexpected character {text[at]!r}")
        kind = str(match.lastgroup)
        if kind != "space":
            out.append(_Token(kind, match.group(), at + 1))
        at = match.end()
    out.append(_Token("end", "", len(text) + 1))
    return out


def _error(text: str, column: int, problem: str) -> BadInputError:
    shown = repr(text) if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]!r}... ({len(text)} characters)"
    return BadInputError(f"filter {shown}, column {column}: {problem}")


class _Parser:
    """Recursive descent over the tokens of one expression (the grammar in the module docstring)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0
        self.depth = 0  # the parentheses and ``not`` open around the current token

    @property
    def token(self) -> _Token:
        return self.tokens[self.at]

    def _keyword(self, word: str) -> bool:
        if self.token.kind == "word" and self.token.text.lower() == word:
            self.at += 1
            return True
        return False

    def _expect(self, text: str) -> None:
        if self.token.text != text:
            raise self._unexpected(f"expected {text!r}")
        self.at += 1

    def _unexpected(self, wanted: str) -> BadInputError:
        found = "the end" if self.token.kind == "end" else repr(self.token.text)
        return _error(self.text, self.token.column, f"{wanted}, found {found}")

    def parse(self) -> Node:
        if self.token.kind == "end":
            raise _error(self.text, 1, "the filter is empty")
        node = self._junction("or")
        if self.token.kind != "end":
            raise self._unexpected("expected 'and', 'or' or the end")
        return node

    def _junction(self, op: str) -> Node:
        parts = [self._junction("and") if op == "or" else self._unary()]
        while self._keyword(op):
            parts.append(self._junction("and") if op == "or" else self._unary())
        return parts[0] if len(parts) == 1 else Junction(op, tuple(parts))

    def _unary(self) -> Node:
        if self.token.text == "(" or (self.token.kind == "word" and self.token.text.lower() == "not"):
            return self._nested()
        return self._comparison()

    def _nested(self) -> Node:
        """``not`` unary or ``(`` expr ``)``, at most :data:`MAX_DEPTH` deep (each level is a few frames of
        this descent, and of every walk of the tree after it)."""
        if self.depth == MAX_DEPTH:
            raise _error(
                self.text, self.token.column, f"nested more than {MAX_DEPTH} deep (parentheses and 'not')"
            )
        self.depth += 1
        if self._keyword("not"):
            node: Node = Not(self._unary())
        else:
            self.at += 1
            node = self._junction("or")
            self._expect(")")
        self.depth -= 1
        return node

    def _comparison(self) -> Node:
        field = self.token
        if field.kind != "word" or field.text.lower() in KEYWORDS:
            raise self._unexpected("expected a metadata field name")
        self.at += 1
        if self._keyword("in"):
            self._expect("[")
            values = [self._literal()]
            while self.token.text == ",":
                self.at += 1
                values.append(self._literal())
            self._expect("]")
            return Member(field.text, tuple(values), field.column)
        if self.token.kind != "op":
            raise self._unexpected(f"expected an operator ({', '.join(OPERATORS)} or in) after {field.text!r}")
        op = self.token.text
        self.at += 1
        return Compare(field.text, op, self._literal(), field.column)

    def _literal(self) -> Literal:
        token = self.token
        self.at += 1
        if token.kind == "string":
            return _unescaped(self.text, token)
        if token.kind == "number":
            if len(token.text) > MAX_NUMBER_CHARS:  # int() of 4,300 digits fails; far fewer are no real value
                raise _error(
                    self.text,
                    token.column,
                    f"a number of {len(token.text)} characters (at most {MAX_NUMBER_CHARS})",
                )
            number = float(token.text) if any(c in token.text for c in ".eE") else int(token.text)
            if isinstance(number, float) and not np.isfinite(number):
                raise _error(self.text, token.column, f"{token.text} is not a finite number")
            return number
        if token.kind == "word" and token.text.lower() in ("true", "false"):
            return token.text.lower() == "true"
        self.at -= 1
        raise self._unexpected("expected a value (a quoted string, a number, true or false)")


# A string's escapes: JSON's and ``\'`` (Milvus reads ``\n`` as a line break too).
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"', "'": "'"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)


def _unescaped(text: str, token: _Token) -> str:
    r"""The value of the string ``token`` of the expression ``text``: its escapes read; an unknown one (``\q``)
    is a one-line BadInputError naming its column (it once stood for ``q``, and ``\n`` for ``n``)."""

    def one(escape: re.Match[str]) -> str:
        code = escape.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        if code not in _ESCAPES:
            column = token.column + 1 + escape.start()  # the quote's column, then the escape's offset
            problem = f"unknown escape {escape.group()!r} in a string (write \\\\ for a backslash)"
            raise _error(text, column, problem)
        return _ESCAPES[code]

    return _ESCAPE.sub(one, token.text[1:-1])


@dataclass(frozen=True)
class Filter:
    """A parsed filter: its text and tree. Build one with :func:`parse_filter`."""

    text: str
    root: Node

    def comparisons(self) -> list[Compare | Member]:
        """Every comparison in the tree, in the order written."""
        found: list[Compare | Member] = []

        def walk(node: Node) -> None:
            if isinstance(node, Compare | Member):
                found.append(node)
            elif isinstance(node, Not):
                walk(node.inner)
            else:
                for part in node.parts:
                    walk(part)

        walk(self.root)
        return found

    def check(self, kinds: Mapping[str, set[str]]) -> None:
        """Refuse a field no document has, or a value of a kind the field never holds, in one line naming the
        column (``kinds``: each field's value kinds over the index's documents, :func:`kind_of`)."""
        for comparison in self.comparisons():
            held, name = kinds.get(comparison.field), comparison.field
            if not held:
                raise _error(self.text, comparison.column, f"no document has the metadata field {name!r}")
            values = comparison.values if isinstance(comparison, Member) else (comparison.value,)
            for value in values:
                if kind_of(value) not in held:
                    raise _error(
                        self.text,
                        comparison.column,
                        f"{comparison.field!r} holds {_plural(held)}, not {_plural({kind_of(value)})} such as "
                        f"{json.dumps(value)}",
                    )
            if (
                isinstance(comparison, Compare)
                and comparison.op in ORDERING
                and kind_of(comparison.value) == "bool"
            ):
                raise _error(self.text, comparison.column, "booleans compare with == and != only")


def _plural(kinds: Iterable[str]) -> str:
    names = {"bool": "booleans", "number": "numbers", "string": "strings", "other": "lists or objects"}
    return " and ".join(names[kind] for kind in sorted(kinds))


def parse_filter(text: str) -> Filter:
    """Parse a filter expression (the grammar in the module docstring); a syntax error is a one-line
    BadInputError naming the column. The last :data:`KEPT_PARSES` expressions' trees are kept (a server parses
    the same few filters again and again; a tree is immutable, so one may serve every caller)."""
    if not isinstance(text, str):
        raise BadInputError(f"a filter is a string expression, got {type(text).__name__}")
    return _parsed(text)


KEPT_PARSES = 256


@functools.lru_cache(maxsize=KEPT_PARSES)  # an expression that fails raises again: faults are not kept
def _parsed(text: str) -> Filter:
    return Filter(text, _Parser(text).parse())
