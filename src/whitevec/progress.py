"""The progress bar encoders show: rich's, on a terminal, for long inputs; nothing otherwise."""

from __future__ import annotations

import sys
from typing import Any


class _NoProgress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def progress_bar(total: int, show: bool | None, label: str) -> Any:
    """A rich progress bar (a context manager yielding the bar, or None when none is shown): shown when ``show``
    is True, or when it is None for 512 texts or more on a terminal."""
    if show is None:
        show = total >= 512 and sys.stderr.isatty()
    if not show:
        return _NoProgress()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        transient=True,
        console=None,
    )
