"""The CLI reference (docs/reference/cli.md), written from the typer app; committed, so it reads on GitHub too.

Every command and sub-command of ``whitevec.cli.app``, as ``--help`` shows it: the usage line, the help text,
and each argument and option with its type, default, and whether it is required. The page holds an
introduction, the marker ``<!-- cli-reference -->``, and below it the generated sections.

``python docs/hooks/cli_reference.py`` (``make reference``) rewrites them; as an mkdocs hook it only checks
them, so a strict build fails on a page the CLI has outgrown (tests/test_docs.py checks it too).
"""

from __future__ import annotations

import html
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PAGE = "reference/cli.md"
MARKER = "<!-- cli-reference -->"
DOCS = Path(__file__).resolve().parents[1]
# Usage lines wrap at this width whatever the terminal that regenerates the page.
WIDTH = 78

log = logging.getLogger("mkdocs.hooks.cli_reference")


def command_tree() -> Iterator[tuple[Any, Any]]:
    """(command, context) for the ``whitevec`` group and every command under it, depth first, in the order
    ``--help`` lists them; hidden commands left out."""
    import typer

    from whitevec.cli import app

    root = typer.main.get_command(app)

    def walk(command: Any, context: Any) -> Iterator[tuple[Any, Any]]:
        yield command, context
        for name in getattr(command, "list_commands", lambda _: [])(context):
            sub = command.get_command(context, name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, sub.context_class(sub, info_name=name, parent=context))

    context = root.context_class(root, info_name="whitevec", terminal_width=WIDTH, max_content_width=WIDTH)
    yield from walk(root, context)


def anchor(command_path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", command_path.lower()).strip("-")


def _cell(text: str) -> str:
    """Plain help text, safe in a Markdown table cell (backticks in it still mark code)."""
    text = html.escape(" ".join(text.split()), quote=False)
    return text.replace("|", "\\|").replace("*", "\\*")


def _paragraphs(text: str) -> str:
    """A command's help text as Markdown paragraphs (click's ``\\b`` no-rewrap marks dropped)."""
    kept = [line for line in text.strip().splitlines() if line.strip() != "\b"]
    return html.escape("\n".join(kept), quote=False).replace("*", "\\*")


def _parameter_rows(command: Any, context: Any) -> list[str]:
    rows = []
    for parameter in command.get_params(context):
        if getattr(parameter, "hidden", False):
            continue
        record = parameter.get_help_record(context)
        if record is None:  # a plain click Argument documents nothing
            record = (parameter.human_readable_name, "")
        names, description = record
        kind = "argument" if parameter.param_type_name == "argument" else "option"
        rows.append(f"| `{names}` | {kind} | {_cell(description)} |")
    return rows


def command_markdown(command: Any, context: Any) -> str:
    """One command's section: heading, usage, help, parameters (and sub-commands, for a group)."""
    path = context.command_path
    level = "#" * min(2 + path.count(" "), 4)
    parts = [f"{level} `{path}` {{#{anchor(path)}}}", ""]
    if getattr(command, "deprecated", False):
        parts += ['!!! warning "Deprecated"', "", "    This command will be removed.", ""]
    usage = command.get_usage(context).strip()
    parts += ["```text", usage, "```", ""]
    if command.help:
        parts += [_paragraphs(command.help), ""]
    subcommands = getattr(command, "list_commands", None)
    if subcommands is not None:
        listed = []
        for name in subcommands(context):
            sub = command.get_command(context, name)
            if sub is not None and not sub.hidden:
                summary = sub.get_short_help_str(limit=120)
                listed.append(f"| [`{name}`](#{anchor(f'{path} {name}')}) | {_cell(summary)} |")
        parts += ["| command | what it does |", "|---|---|", *listed, ""]
    rows = _parameter_rows(command, context)
    if rows:
        parts += ["| name | kind | description |", "|---|---|---|", *rows, ""]
    if getattr(command, "epilog", None):
        parts += [_paragraphs(command.epilog), ""]
    return "\n".join(parts)


def cli_markdown() -> str:
    """The whole generated reference: every command, depth first."""
    return "\n".join(command_markdown(command, context) for command, context in command_tree())


def current_page(text: str) -> str:
    """``text`` (the page) with everything below its marker written afresh."""
    if MARKER not in text:
        raise ValueError(f"{PAGE} has no {MARKER} marker: the CLI reference has nowhere to go")
    return text[: text.index(MARKER) + len(MARKER)] + "\n\n" + cli_markdown()


def is_stale(docs: Path = DOCS) -> bool:
    """Whether the page under ``docs`` differs from what the CLI says now."""
    text = (docs / PAGE).read_text(encoding="utf-8")
    return current_page(text) != text


def on_pre_build(config: Any) -> None:
    if is_stale(Path(config["docs_dir"])):
        log.warning("%s does not match the CLI: run `make reference` and commit it", PAGE)


def main() -> None:
    from whitevec.utils.io import atomic_path

    path = DOCS / PAGE
    text = current_page(path.read_text(encoding="utf-8"))
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    print(path, file=sys.stderr)


if __name__ == "__main__":
    main()
