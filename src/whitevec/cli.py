"""The ``whitevec`` command: argument parsing, one library call, printing. No logic the library lacks."""

from __future__ import annotations

import sys
from typing import Any

import typer

from whitevec.errors import WhitevecError

app = typer.Typer(
    name="whitevec",
    help="Sentence vectors from pretrained encoders, made isotropic, measured, and searchable.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def split_list(value: str) -> list[str]:
    """'a, b,c' -> ['a', 'b', 'c'] for the comma-separated options."""
    return [item.strip() for item in value.split(",") if item.strip()]


# ---- foundation commands (encode, fit, eval) -------------------------------------------------------------
# [section: foundation]

# ---- diagnostics (issue 4) -----------------------------------------------------------------------------
# [section: diagnostics]

# ---- index and search (issue 5) ------------------------------------------------------------------------
# [section: index]

# ---- serve (issue 7) -----------------------------------------------------------------------------------
# [section: serve]


def main(argv: list[str] | None = None) -> Any:
    """Entry point: known errors become one line on stderr and exit status 2; bugs keep their traceback."""
    try:
        return app(args=argv, standalone_mode=False)
    except WhitevecError as exc:
        print(f"whitevec: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except (KeyboardInterrupt,):
        print("whitevec: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
