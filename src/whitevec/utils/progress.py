"""The progress encoders show: rich's bar on a terminal for long inputs; where stderr is no terminal (a log, a
pipe, a batch job), a plain line now and then for long runs; nothing when asked for none."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

# Where stderr is no terminal: seconds between progress lines; a run shorter than this prints none.
LOG_EVERY_S = 15.0
_now = time.monotonic  # the clock of the log lines (tests replace it)


class _NoProgress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class _LogProgress:
    """The calls encoders make to rich's ``Progress`` (``add_task``, ``advance``), as plain lines on stderr: at
    most one every ``LOG_EVERY_S`` seconds, the first after that long (a short run prints nothing), and the
    final count at the end when any came before: ``whitevec: LABEL: 12,000/30,522 tokens (39%), 1m02s``."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.unit = ""
        self.total = 0
        self.done = 0
        self.started = self.last_line = _now()
        self.printed = False
        self.logged = 0  # the count the last line showed

    def __enter__(self) -> _LogProgress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self.printed and exc_type is None and self.done != self.logged:
            self._line(_now())

    def add_task(self, description: str, total: int) -> int:
        """One task per bar, as the encoders use it: ``description`` names what is counted (texts, tokens)."""
        self.unit, self.total = description, total
        return 0

    def advance(self, task: int, advance: float = 1) -> None:
        self.done += int(advance)
        now = _now()
        if now - self.last_line >= LOG_EVERY_S:
            self._line(now)

    def _line(self, now: float) -> None:
        self.last_line, self.printed, self.logged = now, True, self.done
        share = f" ({self.done / self.total:.0%})" if self.total else ""
        counted = f"{self.done:,}/{self.total:,} {self.unit}".rstrip()
        with contextlib.suppress(OSError):  # stderr gone: progress is not worth failing the work over
            print(f"whitevec: {self.label}: {counted}{share}, {_duration(now - self.started)}", file=sys.stderr)


def _duration(seconds: float) -> str:
    """``45s``, ``1m02s``, ``2h05m09s``."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_bar(total: int, show: bool | None, label: str) -> Any:
    """A progress display (a context manager yielding the bar, or None when none is shown). ``show`` True: rich's
    bar; False: nothing; None (the default): rich's bar for 512 texts or more when stderr is a terminal, else
    plain lines for a run that lasts (:class:`_LogProgress`). ``label`` says what runs."""
    if show is None:
        if not sys.stderr.isatty():
            return _LogProgress(label)
        show = total >= 512
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
