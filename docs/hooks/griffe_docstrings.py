"""Griffe extension for the Python reference: whitevec's docstrings, written for ``help()`` (plain prose,
``literals``, Sphinx roles such as :class:`Encoder`, doctest lines, RST ``::`` blocks), as clean Markdown.

- a role (``:class:`~whitevec.index.Retriever```) becomes code (`` `Retriever` ``; ``~`` keeps the last name);
- a run of doctest lines (``>>>``, ``...`` and the output under them) becomes a fenced ``pycon`` block, its
  ``# doctest:`` flags removed;
- a paragraph ending in ``::`` before an indented block ends in ``:`` (the indented block is Markdown code);
- a NumPy-style section (``Parameters`` underlined with dashes, entries at its own indentation) becomes a
  Google-style one (``Parameters:``, entries indented under it), the style of the other docstrings.

The source stays as it is; only the text mkdocstrings renders changes.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`(?P<target>[^`]+)`")
_DOCTEST_FLAG = re.compile(r"\s*#\s*doctest:.*$")
_FENCE = re.compile(r"\s*(`{3,}|~{3,})")


def _role_as_code(match: re.Match[str]) -> str:
    target = match["target"].strip()
    titled = re.fullmatch(r"(?P<title>.+?)\s*<(?P<path>[^>]+)>", target)
    if titled is not None:
        target = titled["title"]
    elif target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target.lstrip('!')}`"


def _doctests_fenced(lines: list[str]) -> list[str]:
    """``lines`` with each run of doctest lines (and their output, up to a blank line) in a pycon fence."""
    out: list[str] = []
    in_fence = False
    in_doctest = False
    for line in lines:
        if not in_doctest and _FENCE.match(line):
            in_fence = not in_fence
        if in_fence:
            out.append(line)
            continue
        starts = line.lstrip().startswith(">>>")
        if starts and not in_doctest:
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}```pycon")
            in_doctest = True
        elif in_doctest and not line.strip():
            out.append(f"{indent}```")
            in_doctest = False
        out.append(_DOCTEST_FLAG.sub("", line) if in_doctest else line)
    if in_doctest:
        out.append(f"{indent}```")
    return out


def _literal_blocks(lines: list[str]) -> list[str]:
    """RST's ``text::`` before an indented block as ``text:`` (Markdown shows the indented block as code)."""
    out = list(lines)
    for i, line in enumerate(lines[:-2]):
        following = lines[i + 2]
        if line.rstrip().endswith("::") and not lines[i + 1].strip() and following.startswith((" ", "\t")):
            out[i] = line.rstrip()[:-1]
    return out


def _underlined(lines: list[str], i: int) -> bool:
    """Whether ``lines[i]`` is a NumPy section title (the next line: dashes as long as the title)."""
    return (
        i + 1 < len(lines)
        and bool(lines[i].strip())
        and re.fullmatch(r"\s*-{3,}\s*", lines[i + 1]) is not None
        and len(lines[i + 1].strip()) == len(lines[i].strip())
    )


def _google_sections(lines: list[str]) -> list[str]:
    """NumPy sections as Google ones: the title with a colon, the entries (to the next title) indented."""
    out: list[str] = []
    in_section = False
    i = 0
    while i < len(lines):
        if _underlined(lines, i):
            out.append(lines[i].rstrip() + ":")
            in_section = True
            i += 2
            continue
        out.append("    " + lines[i] if in_section and lines[i].strip() else lines[i])
        i += 1
    return out


def markdown_docstring(text: str) -> str:
    """A whitevec docstring's text as Markdown."""
    lines = _literal_blocks(_google_sections(_doctests_fenced(text.splitlines())))
    return _ROLE.sub(_role_as_code, "\n".join(lines))


class WhitevecDocstrings(griffe.Extension):
    """Rewrites each object's docstring once it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
