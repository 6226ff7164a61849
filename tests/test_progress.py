"""Progress where stderr is no terminal (a log, a pipe, a batch job): a plain line now and then for a long run,
nothing for a short one, nothing with ``-q``. The clock is a fake one the test moves; pytest's stderr is no
terminal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import whitevec.utils.progress as progress
from whitevec.utils.progress import LOG_EVERY_S, progress_bar

from .test_cli import run_cli


class FakeClock:
    """A monotonic clock that moves only when told to, or by ``step`` seconds on each reading."""

    def __init__(self, step: float = 0.0) -> None:
        self.now = 1000.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(progress, "_now", fake)
    return fake


def _run(clock: FakeClock, steps: list[tuple[float, int]], show: bool | None = None, total: int = 30_522) -> None:
    """Advance a bar by each ``(seconds later, count)`` of ``steps``."""
    with progress_bar(total, show, "single tokens through m") as bar:
        task = bar.add_task("tokens", total=total) if bar is not None else None
        for seconds, count in steps:
            clock.now += seconds
            if bar is not None and task is not None:
                bar.advance(task, count)


def test_a_long_run_logs_a_line_now_and_then_and_one_at_the_end(
    clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    # 62 s: a line; 8 s later: none (too soon); 81 s later, at the end: the last line.
    _run(clock, [(62, 12_000), (8, 6_000), (81, 12_522)])
    assert capsys.readouterr().err == (
        "whitevec: single tokens through m: 12,000/30,522 tokens (39%), 1m02s\n"
        "whitevec: single tokens through m: 30,522/30,522 tokens (100%), 2m31s\n"
    )


def test_lines_are_at_least_the_interval_apart(clock: FakeClock, capsys: pytest.CaptureFixture[str]) -> None:
    half = LOG_EVERY_S / 2
    _run(clock, [(half, 1)] * 8, total=8)  # 4 intervals: a line every second step, the last one at the end
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4 and lines[-1].startswith("whitevec: single tokens through m: 8/8 tokens (100%), ")


def test_a_short_run_prints_nothing(clock: FakeClock, capsys: pytest.CaptureFixture[str]) -> None:
    _run(clock, [(LOG_EVERY_S / 4, 10_000)] * 3)
    assert capsys.readouterr().err == ""


def test_asked_for_none_prints_nothing(clock: FakeClock, capsys: pytest.CaptureFixture[str]) -> None:
    _run(clock, [(600, 10_000)] * 3, show=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("quiet", [False, True])
def test_the_command_logs_progress_unless_quiet(
    quiet: bool,
    tiny_bert_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"text number {i}\n" for i in range(6)))
    tick: Callable[[], float] = FakeClock(step=LOG_EVERY_S)  # every reading an interval later: a line per batch
    monkeypatch.setattr(progress, "_now", tick)
    args = ["encode", str(texts), "--out", str(tmp_path / "v.npy"), "--model", str(tiny_bert_dir)]
    code, _, err = run_cli([*args, "--batch-size", "2", "--no-cache", *(["-q"] if quiet else [])], capsys)
    assert code == 0, err
    logged = [
        line for line in err.splitlines() if line.startswith(f"whitevec: encoding with {tiny_bert_dir.name}")
    ]
    if quiet:
        assert logged == []
    else:
        assert [line.split(": ")[2].split(" (")[0] for line in logged] == [
            "2/6 texts",
            "4/6 texts",
            "6/6 texts",
        ]
