"""Usage errors of every command: the problem on one line, the command's usage, exit status 2, no traceback.

The commands are found by walking the click command tree typer builds from the app, so a command added later is
covered without touching this file.
"""

from __future__ import annotations

import enum
import errno
import inspect
import io
import os
import re
import sqlite3
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from whitevec.cli import app, main
from whitevec.errors import BadInputError, IndexDamagedError

from .test_cli import run_cli

SRC = Path(__file__).resolve().parents[1] / "src"


def _walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, command) for ``command`` and everything under it; a group has ``commands`` (name -> command)."""
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _walk(sub, (*path, name))


TREE = list(_walk(typer.main.get_command(app), ()))
GROUPS = [path for path, command in TREE if getattr(command, "commands", None)]
COMMANDS = {path: command for path, command in TREE if not getattr(command, "commands", None)}


def _annotation(command: Any, name: str) -> Any:
    """The Python type of parameter ``name`` of ``command`` (its function's signature, as typer read it), with
    Annotated and Optional taken off."""
    annotation = inspect.signature(command.callback, eval_str=True).parameters[name].annotation
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    arms = [arm for arm in typing.get_args(annotation) if arm is not type(None)]
    return arms[0] if len(arms) == 1 else annotation


def _options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option" and not p.hidden]


def _numeric_option(command: Any) -> str | None:
    """The first option of ``command`` that takes an int or a float, if it has one."""
    for param in _options(command):
        if _annotation(command, param.name) in (int, float):
            return str(param.opts[0])
    return None


def _valued_option(command: Any) -> str | None:
    """The last option of ``command`` that takes a value (not a flag)."""
    valued = [p for p in _options(command) if not p.is_flag and p.name != "help"]
    return str(valued[-1].opts[0]) if valued else None


def _choice_option(command: Any) -> str | None:
    """The first option of ``command`` whose values are an Enum's."""
    for param in _options(command):
        kind = _annotation(command, param.name)
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            return str(param.opts[0])
    return None


def _cases() -> list[Any]:
    """(command path, its arguments, what the error line must name) for every command: an unknown option; a
    missing required parameter where it has one; a bad number where it takes one; an option without its value;
    a bad choice where it has one."""
    cases = []
    for path, command in COMMANDS.items():
        name = " ".join(path)
        cases.append(
            pytest.param(
                path, ["--no-such-option"], "No such option: --no-such-option", id=f"{name}: unknown option"
            )
        )
        if any(p.required for p in command.params):
            cases.append(pytest.param(path, [], "Missing", id=f"{name}: missing parameter"))
        numeric = _numeric_option(command)
        if numeric is not None:
            cases.append(pytest.param(path, [numeric, "abc"], numeric, id=f"{name}: bad number"))
        valued = _valued_option(command)
        if valued is not None:
            cases.append(pytest.param(path, [valued], valued, id=f"{name}: option without value"))
        choice = _choice_option(command)
        if choice is not None:
            cases.append(pytest.param(path, [choice, "nonsense"], choice, id=f"{name}: bad choice"))
    return cases


def check_usage_error(code: int, out: str, err: str, path: tuple[str, ...], needle: str) -> None:
    """Status 2 and the whole of stderr: the usage of the command at ``path`` (its first line, then any
    indented continuation), one line `whitevec: error: ...` naming ``needle``, the hint to its --help, and
    nothing else; nothing on stdout (a pipe reads no help text); no traceback anywhere."""
    assert code == 2, (path, code, err)
    assert "Traceback" not in err and "Traceback" not in out
    command = " ".join(("whitevec", *path))
    lines = err.splitlines()
    assert len(lines) >= 3, err
    *usage, error, hint = lines
    assert usage[0].startswith(f"Usage: {command} ") and all(line.startswith(" ") for line in usage[1:]), err
    assert error.startswith("whitevec: error: ") and needle in error, err
    assert hint == f"Try '{command} --help' for help.", err
    assert err.endswith("\n") and not err.endswith("\n\n"), err
    assert out == "", out


def check_bad_input(code: int, out: str, err: str, needle: str) -> None:
    """Bad input the library finds (a ``WhitevecError``), not click: status 2 and the whole of stderr one line
    ``whitevec: error: ...`` naming ``needle``; nothing on stdout."""
    assert code == 2, (code, err)
    assert err.startswith("whitevec: error: ") and err.count("\n") == 1 and err.endswith("\n"), err
    assert needle in err and out == "", (err, out)


def test_every_command_is_walked() -> None:
    """The walk finds the commands (a walk that found none would make the cases below vacuous)."""
    assert {("eval",), ("index", "build"), ("frequencies", "count"), ("search",), ("tune",)} <= set(COMMANDS)
    assert {(), ("index",), ("frequencies",)} <= set(GROUPS)


@pytest.mark.parametrize(("path", "args", "needle"), _cases())
def test_usage_error_is_one_line_and_exit_2(
    path: tuple[str, ...], args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli([*path, *args], capsys)
    check_usage_error(code, out, err, path, needle)


@pytest.mark.parametrize("path", GROUPS, ids=lambda path: " ".join(("whitevec", *path)))
def test_a_group_without_a_command_prints_its_help_and_exits_2(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """`whitevec` or `whitevec index` alone: the group's help on stderr and status 2 (a script whose command went
    missing fails, as click >= 8.2 decides), nothing on stdout."""
    code, out, err = run_cli(list(path), capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"Usage: {' '.join(('whitevec', *path))} [OPTIONS] COMMAND" in err
    group = typer.main.get_command(app)
    for name in path:
        group = group.commands[name]
    assert all(name in err for name in group.commands), err


def test_help_is_no_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["index", "build", "--help"], capsys)
    assert code == 0 and "Usage: whitevec index build" in out and err == ""


@pytest.mark.parametrize("path", [path for path, _ in TREE], ids=lambda path: " ".join(path) or "whitevec")
def test_help_shows_texts_as_written_and_flags_without_a_value(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """rich markup ate bracketed words (``pip install 'whitevec[ray]'`` showed ``'whitevec'``), and typer gave
    boolean flags a ``<bool>`` value they do not take."""
    monkeypatch.setenv("COLUMNS", "250")  # one line an option: a bracketed word is never wrapped apart
    command = dict(TREE)[path]
    code, out, err = run_cli([*path, "--help"], capsys)
    assert code == 0, err
    assert "<bool>" not in out
    written = [command.help or "", *(getattr(p, "help", None) or "" for p in command.params)]
    for word in {word for text in written for word in re.findall(r"\S*\[[^\]\s]+\]\S*", text)}:
        assert word.rstrip(".,;:)") in out, word


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from whitevec import __version__

    assert run_cli(["--version"], capsys) == (0, f"whitevec {__version__}\n", "")


@pytest.mark.parametrize(
    ("path", "args", "needle"),
    [(("index", "build"), [], "Missing option '--corpus'"), (("eval",), ["--batch-size", "abc"], "--batch-size")],
    ids=["missing option", "bad number"],
)
def test_usage_error_in_a_real_process(path: tuple[str, ...], args: list[str], needle: str) -> None:
    """`python -m whitevec.cli` as a user runs it: no traceback, status 2, the usage names the command."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "whitevec.cli", *path, *args], capture_output=True, text=True, env=env, timeout=120
    )
    check_usage_error(done.returncode, done.stdout, done.stderr, path, needle)


@pytest.mark.parametrize("path", [(), ("index",)], ids=["whitevec", "whitevec index"])
def test_help_to_a_reader_that_leaves_early_is_no_error(path: tuple[str, ...]) -> None:
    """`whitevec --help | head -1`: typer's rich console handles the broken pipe by exiting 1; main() reports it
    as every other closed stdout, 141 and quiet."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen(
        [sys.executable, "-m", "whitevec.cli", *path, "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 141 and err == "", err


# ---- exit statuses and warnings ----------------------------------------------------------------------------
def test_help_lists_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["--help"], capsys)
    text = " ".join(out.split())
    assert code == 0 and "Exit status: 0 done; 1 a bug" in text
    assert "2 bad usage or input; 3 a fault of the environment (a read-only or full disk, no permission," in text
    assert "no permission, an index file damaged under the run); 130 interrupted" in text


def test_a_warning_is_one_line_in_a_real_process(tmp_path: Path) -> None:
    """A warning (whitening floors the variance of a rank-deficient sample) as `whitevec: warning: ...`, not
    Python's `PATH:LINE: WhitevecWarning: ...` followed by a source line."""
    import numpy as np

    half = np.random.default_rng(0).standard_normal((50, 3)).astype(np.float32)
    np.save(tmp_path / "v.npy", np.hstack([half, half]))  # 3 of 6 directions have no variance
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    args = ["fit", "--vectors", str(tmp_path / "v.npy"), "--out", str(tmp_path / "w.safetensors")]
    done = subprocess.run(
        [sys.executable, "-m", "whitevec.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    warning, wrote = done.stderr.splitlines()
    assert warning.startswith("whitevec: warning: 3 of 6 kept directions have variance below eps*max = ")
    assert warning.endswith("Fit on more vectors, lower n_components, or raise eps."), warning
    assert wrote.startswith("fitted whitening on 50 vectors; wrote ")


def test_other_warnings_keep_their_category_and_python_users_their_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import warnings

    import numpy as np

    import whitevec.workflows.vectors

    def warn_then_stop(*args: Any, **kwargs: Any) -> None:
        warnings.warn("old\n  behaviour", FutureWarning, stacklevel=1)
        raise typer.Exit(0)

    monkeypatch.setattr(whitevec.workflows.vectors, "fit_transform_file", warn_then_stop)
    np.save(tmp_path / "v.npy", np.ones((4, 2), dtype=np.float32))
    shown = warnings.showwarning
    code, _, err = run_cli(["fit", "--vectors", str(tmp_path / "v.npy"), "--out", str(tmp_path / "w")], capsys)
    assert (code, err) == (0, "whitevec: warning: FutureWarning: old behaviour\n")
    assert warnings.showwarning is shown  # the library's users, after main(), keep Python's own format


# ---- main()'s other outcomes, in this process (so a mutation run sees them; the real-process tests elsewhere
# start a child that imports the package anew) ----------------------------------------------------------------
def _fit_raising(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, raised: BaseException) -> list[str]:
    """`whitevec fit` arguments whose library call raises ``raised``."""
    import numpy as np

    import whitevec.workflows.vectors

    def fail(*args: Any, **kwargs: Any) -> None:
        raise raised

    monkeypatch.setattr(whitevec.workflows.vectors, "fit_transform_file", fail)
    np.save(tmp_path / "v.npy", np.ones((4, 2), dtype=np.float32))
    return ["fit", "--vectors", str(tmp_path / "v.npy"), "--out", str(tmp_path / "w")]


@pytest.mark.parametrize(
    ("raised", "code", "err"),
    [
        (BadInputError("no such  thing"), 2, "whitevec: error: no such  thing\n"),
        (
            IndexDamagedError("ids.npy changed under the run"),
            3,
            "whitevec: error: ids.npy changed under the run\n",
        ),
        (
            OSError(errno.ENOSPC, "No space left on device", "/d/w"),
            3,
            "whitevec: error: /d/w: No space left on device\n",
        ),
        (sqlite3.OperationalError("disk I/O error"), 3, "whitevec: error: database error: disk I/O error\n"),
        (KeyboardInterrupt(), 130, "whitevec: interrupted\n"),
        (typer.Abort(), 130, "whitevec: interrupted\n"),
        (typer.Exit(130), 130, "whitevec: interrupted\n"),
        (typer.Exit(5), 5, ""),
        (typer.Exit(0), 0, ""),
    ],
    ids=[
        "bad input",
        "index damaged",
        "disk full",
        "sqlite disk",
        "ctrl-c",
        "abort",
        "exit 130",
        "exit 5",
        "exit 0",
    ],
)
def test_each_outcome_has_its_status_and_one_line(
    raised: BaseException,
    code: int,
    err: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert run_cli(_fit_raising(monkeypatch, tmp_path, raised), capsys) == (code, "", err)


def test_a_bug_keeps_its_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error that is no fault of the environment (an OSError describe_fault cannot name, a SQLite syntax
    error, any other exception) propagates: Python prints its traceback, status 1."""
    for raised in (sqlite3.OperationalError("near 'x': syntax error"), ValueError("a bug")):
        with pytest.raises(type(raised)):
            main(_fit_raising(monkeypatch, tmp_path, raised))
    assert capsys.readouterr() == ("", "")


def test_a_usage_error_without_argv_reads_the_command_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """main() as the console script calls it: the usage is of the command sys.argv names."""
    monkeypatch.setattr(sys, "argv", ["whitevec", "index", "build", "--corpus"])
    code, out, err = run_cli(None, capsys)  # type: ignore[arg-type]
    check_usage_error(code, out, err, ("index", "build"), "--corpus")


class _ClosedPipe(io.StringIO):
    """stdout whose reader has left: writes are kept, flushing fails; its descriptor is ``fd``."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def flush(self) -> None:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def _written_then_done(stdout: io.StringIO) -> None:
    """A command's output written (not flushed), then its end: click hands main() the status."""
    stdout.write("output\n")
    raise typer.Exit(0)


def test_a_reader_leaving_at_the_last_flush_is_141_and_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The output was written but the reader left before the flush: 141, nothing on stderr, and the descriptor
    then points at /dev/null (a later write, at exit, goes nowhere)."""
    import whitevec.workflows.vectors

    with open(tmp_path / "stdout", "wb") as stdout:
        pipe = _ClosedPipe(stdout.fileno())
        argv = _fit_raising(monkeypatch, tmp_path, typer.Exit(0))
        monkeypatch.setattr(
            whitevec.workflows.vectors, "fit_transform_file", lambda *a, **k: _written_then_done(pipe)
        )
        monkeypatch.setattr(sys, "stdout", pipe)
        code, _, err = run_cli(argv, capsys)
        os.write(stdout.fileno(), b"after")
    assert (code, err) == (141, "")
    assert (tmp_path / "stdout").read_bytes() == b""


@pytest.mark.parametrize(
    ("exit_code", "devnull", "code"),
    [(1, [False, True], 141), (1, [True, True], 1), (1, [False, False], 1), (2, [False, True], 2)],
    ids=["rich's pipe exit", "stdout was devnull", "a plain exit 1", "another status"],
)
def test_rich_exiting_on_a_closed_pipe_is_141(
    exit_code: int,
    devnull: list[bool],
    code: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """typer's rich console meets a closed stdout by pointing it at /dev/null and exiting 1: 141, as any reader
    leaving; an exit 1 with stdout on /dev/null before the run (or not after it) keeps its status."""
    import whitevec.cli

    answers = iter(devnull)
    monkeypatch.setattr(whitevec.cli, "_stdout_is_devnull", lambda: next(answers))
    assert run_cli(_fit_raising(monkeypatch, tmp_path, SystemExit(exit_code)), capsys) == (code, "", "")


def test_stdout_is_devnull_only_on_dev_null(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from whitevec.cli import _stdout_is_devnull

    with open(os.devnull, "w") as null, open(tmp_path / "file", "w") as file:
        for stdout, expected in [(null, True), (file, False), (io.StringIO(), False), (object(), False)]:
            monkeypatch.setattr(sys, "stdout", stdout)
            assert _stdout_is_devnull() is expected, stdout
    monkeypatch.setattr(sys, "stdout", null)  # closed now: no descriptor
    assert _stdout_is_devnull() is False


def test_a_warning_to_a_stderr_that_is_gone_is_dropped() -> None:
    """A warning is not worth failing the command over: stderr closed by its reader loses the line, no more."""
    from whitevec.cli import _show_warning

    class GoneStderr(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    _show_warning("variance floored", UserWarning, "whitening.py", 1, file=GoneStderr())


def test_done_returns_0_rather_than_exiting(capsys: pytest.CaptureFixture[str]) -> None:
    """main() as a library call: a run that ends well returns 0 (a SystemExit is for the statuses that are not)."""
    from whitevec import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr() == (f"whitevec {__version__}\n", "")


EXIT_CHILD = """
import atexit, sys
from concurrent.futures import ThreadPoolExecutor

class Teardown:
    def __del__(self):
        print("torn down", flush=True)

kept = Teardown()  # the interpreter's teardown would free it with __main__'s globals
pool = ThreadPoolExecutor(1)  # left running: its thread must not hold the exit
pool.submit(sys.stdout.write, "pool ran\\n")  # one write: print writes its end apart
atexit.register(print, "exit handler ran")
sys.stdout.write("buffered, not flushed;")
from whitevec.cli import exit_without_teardown
given = sys.argv[1]
exit_without_teardown(None if given == "None" else int(given) if given.lstrip("-").isdigit() else given)
"""


@pytest.mark.parametrize(
    ("given", "status", "err"),
    [("0", 0, ""), ("3", 3, ""), ("None", 0, ""), ("141", 141, ""), ("a message", 1, "a message\n")],
)
def test_the_console_scripts_exit_is_a_process_exit_without_teardown(given: str, status: int, err: str) -> None:
    """`whitevec` ends through exit_without_teardown: threads and pools stopped, exit handlers run, streams
    flushed, sys.exit's status and message; the modules are not freed one by one (an object's __del__ that
    teardown would call is not called)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", EXIT_CHILD, given], capture_output=True, text=True, env=env, timeout=120
    )
    assert (done.returncode, done.stderr) == (status, err)
    # The pool's line may come before, after or inside the rest (its thread prints when it runs).
    assert done.stdout.count("pool ran\n") == 1, done.stdout
    rest = done.stdout.replace("pool ran\n", "")
    assert rest == "buffered, not flushed;exit handler ran\n", done.stdout


def test_the_console_script_is_run() -> None:
    import tomllib

    scripts = tomllib.loads((SRC.parent / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"whitevec": "whitevec.cli:run"}
