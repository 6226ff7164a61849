"""The ``whitevec`` command: argument parsing, one library call, printing. No logic the library lacks.

One module per command group: ``evaluate`` (eval, eval-retrieval, diagnose), ``encode`` (encode, fit,
frequencies), ``index`` (index build / info / export-faiss, search), ``tune``, ``export`` (export-st),
``distill``, ``serve`` (and ``mcp``).
Options are declared once in ``_options`` (the ``Annotated`` aliases, :class:`RunOptions`); printing and the one
table model are in ``_output``. This module makes the ``app``, registers the commands in the order ``--help``
lists them, and runs it: bad usage (a missing, unknown or bad option or argument, a group without a command) is
reported by :func:`main` like bad input: one line, exit status 2, no traceback.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sqlite3
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn, TextIO

import typer

from whitevec.cli._options import RunOptions, VersionOpt, _group, _no_command, with_run_options
from whitevec.cli._output import TableFormat, _print_table, _StdoutClosedError, _Table, _writing_stdout
from whitevec.cli.distill import distill_command
from whitevec.cli.encode import encode_command, fit_command, frequencies_app
from whitevec.cli.evaluate import diagnose_command, eval_command, eval_retrieval_command
from whitevec.cli.export import export_st_command
from whitevec.cli.index import index_app, search_command
from whitevec.cli.index_writes import index_add_command  # noqa: F401  (registers add, delete, compact)
from whitevec.cli.serve import mcp_command, serve_command
from whitevec.cli.tune import tune_command
from whitevec.errors import IndexDamagedError, WhitevecError, WhitevecWarning
from whitevec.preflight import describe_fault

__all__ = [
    "RunOptions",
    "TableFormat",
    "_Table",
    "_print_table",
    "app",
    "exit_without_teardown",
    "main",
    "run",
    "with_run_options",
]

# Exit statuses main() gives; the --help epilog and docs/reference/cli.md list them.
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_CODES = (
    "Exit status: 0 done; 1 a bug (a traceback: please report it); 2 bad usage or input; 3 a fault of the "
    "environment (a read-only or full disk, no permission, an index file damaged under the run); 130 "
    "interrupted; 141 stdout closed by its reader."
)


def _whitevec(ctx: typer.Context, version: VersionOpt = False) -> None:
    """The ``whitevec`` group: ``--version`` (handled as it is parsed), else a command must follow."""
    _no_command(ctx)


app = _group(
    _whitevec,
    name="whitevec",
    help="Sentence vectors from pretrained encoders, made isotropic, measured, and searchable.",
    epilog=EXIT_CODES,
    pretty_exceptions_enable=False,
)
# The order --help lists them in (typer lists the commands first, then the groups).
app.command("eval")(eval_command)
app.command("encode")(encode_command)
app.command("fit")(fit_command)
app.command("diagnose")(diagnose_command)
app.command("search")(search_command)
app.command("eval-retrieval")(eval_retrieval_command)
app.command("tune")(tune_command)
app.command("export-st")(export_st_command)
app.command("distill")(distill_command)
app.command("serve")(serve_command)
app.command("mcp")(mcp_command)
app.add_typer(frequencies_app, name="frequencies")
app.add_typer(index_app, name="index")


def _click_exception() -> type[Exception]:
    """The ClickException of the click typer runs on: recent typer raises the classes of its own copy of click
    (typer._click), which ``click.ClickException`` does not catch; older typer raises click's. typer.BadParameter,
    public in every typer, is one of those classes, so its ClickException base is the one to catch."""
    base = next((cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "ClickException"), None)
    return base or typer.BadParameter


def _context_of(argv: Sequence[str]) -> Any:
    """A context for the command ``argv`` names (``index build``), for the usage of an error click raises without
    one (an option missing its value)."""
    command: Any = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="whitevec")
    for token in argv:
        command = getattr(command, "commands", {}).get(token)
        if command is None:
            break
        ctx = typer.Context(command, info_name=token, parent=ctx)
    return ctx


def _show_usage_error(exc: Any, argv: Sequence[str]) -> None:
    """A click error (bad usage) as whitevec reports bad input: the command's usage, the problem on one line, and
    where the command's help is."""
    ctx = getattr(exc, "ctx", None) or _context_of(argv)
    typer.echo(ctx.get_usage(), err=True)
    typer.echo(f"whitevec: error: {' '.join(exc.format_message().split())}", err=True)
    if ctx.help_option_names:
        typer.echo(f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help.", err=True)


def _stdout_is_devnull() -> bool:
    """Whether file descriptor 1 is /dev/null (where rich's broken-pipe handler points it)."""
    try:
        here, null = os.fstat(sys.stdout.fileno()), os.stat(os.devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (captured in tests, closed)
        return False
    return (here.st_dev, here.st_ino) == (null.st_dev, null.st_ino)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A warning as one line, ``whitevec: warning: ...``, for people at the command line: Python's own format
    shows an internal path and a source line. Warnings of other libraries keep their category's name."""
    text = str(message)
    if not issubclass(category, WhitevecWarning):
        text = f"{category.__name__}: {text}"
    _say_line("warning", text, file)


def _say_line(kind: str, text: str, file: TextIO | None = None) -> None:
    with contextlib.suppress(OSError):  # stderr gone: a warning is not worth failing over
        print(f"whitevec: {kind}: {' '.join(text.split())}", file=file or sys.stderr)


class _OneLineLogs(logging.Handler):
    """whitevec's log records of level warning and above as one line each, as warnings are shown (Python's
    last-resort handler would print the bare message); a record a handler nearer its logger prints (the server's
    log, under ``serve``) is left to that one."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None and logger.name != "whitevec":
            if logger.handlers:
                return
            logger = logger.parent
        _say_line("warning" if record.levelno < logging.ERROR else "error", record.getMessage())


@contextlib.contextmanager
def _one_line_warnings() -> Iterator[None]:
    """Warnings shown by :func:`_show_warning`, and whitevec's logged warnings by :class:`_OneLineLogs`, for the
    command's run; Python API users keep Python's format."""
    handler = _OneLineLogs()
    logging.getLogger("whitevec").addHandler(handler)
    try:
        with warnings.catch_warnings():  # restores showwarning (and the filters) on the way out
            warnings.showwarning = _show_warning
            yield
    finally:
        logging.getLogger("whitevec").removeHandler(handler)


def main(argv: list[str] | None = None) -> int:
    """Entry point: known errors become one line on stderr; bugs keep their traceback.

    Exit status (``EXIT_CODES``): 0 done, 2 bad input (``WhitevecError``, bad usage, a group without a command),
    3 a fault of the environment (disk full, read-only, no permission, an index file damaged under the run), 130
    interrupted (Ctrl-C), 141 stdout closed by its reader; a bug's traceback exits 1, as Python does.
    """
    stdout_was_devnull = _stdout_is_devnull()
    try:
        with _one_line_warnings():
            code = app(args=argv, prog_name="whitevec", standalone_mode=False)
        with _writing_stdout():
            sys.stdout.flush()  # output still buffered meets a reader that left here, not at interpreter exit
    except SystemExit as exc:
        # typer prints help through its own rich console, whose broken-pipe handler points stdout at /dev/null
        # and exits 1 (`whitevec --help | head -1`): the same reader leaving as below, so the same 141.
        if exc.code == 1 and not stdout_was_devnull and _stdout_is_devnull():
            raise SystemExit(141) from None
        raise
    except _StdoutClosedError:
        # `whitevec search ... | head`: the reader had enough, which is no error of the user or the system, so
        # no message. The status is the one a shell shows for cat, grep or any tool stopped by SIGPIPE (128 +
        # 13), so `set -o pipefail` scripts see whitevec as they see those; 0 would claim all output was read.
        # stdout then writes to /dev/null: whatever is still buffered or written later (an atexit handler) cannot
        # fail at interpreter exit with "Exception ignored ... BrokenPipeError".
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        raise SystemExit(141) from None
    except WhitevecError as exc:
        print(f"whitevec: error: {exc}", file=sys.stderr)
        # An index file failing under the run is a fault of the storage, as an OSError is.
        raise SystemExit(EXIT_ENVIRONMENT if isinstance(exc, IndexDamagedError) else EXIT_BAD_INPUT) from None
    except typer.Exit as exc:
        code = exc.exit_code
    except _click_exception() as exc:  # bad usage: a missing, unknown or bad option or argument
        _show_usage_error(exc, sys.argv[1:] if argv is None else argv)
        raise SystemExit(getattr(exc, "exit_code", 2)) from None
    except (KeyboardInterrupt, typer.Abort):
        code = 130
    except (OSError, sqlite3.Error) as exc:
        # Disk full, read-only folder, no permission: faults of the environment, not bugs, so one line and no
        # traceback, and a status of their own (1 is a traceback's). Other SQLite errors are bugs and propagate.
        line = describe_fault(exc)
        if line is None:
            raise
        print(f"whitevec: error: {line}", file=sys.stderr)
        raise SystemExit(EXIT_ENVIRONMENT) from None
    # Without standalone mode typer turns Ctrl-C into Exit(130) and returns the code, as it does for any Exit:
    # an int is an exit status, whatever the path it came by.
    if code == 130:
        print("whitevec: interrupted", file=sys.stderr)
    if isinstance(code, int) and code != 0:
        raise SystemExit(code)
    return 0


def run() -> NoReturn:
    """The ``whitevec`` console script (and ``python -m whitevec.cli``): :func:`main`, then
    :func:`exit_without_teardown`. A bug's traceback still ends the process the interpreter's way."""
    try:
        code: object = main()
    except SystemExit as exc:
        code = exc.code
    exit_without_teardown(code)


def exit_without_teardown(code: object) -> NoReturn:
    """End the process as ``sys.exit(code)`` does, seen from outside, without the interpreter's teardown.

    What the interpreter does first is kept, in its order: other threads are waited for (and thread pools told to
    stop), the exit handlers run (Milvus Lite servers stopped, Ray shut down, temporary folders removed), then
    standard output and error are flushed; the status is the same. What is skipped is freeing every module and
    object one by one, which after torch, transformers and faiss were imported took 0.7 s of a one-query MiniLM
    search, longer than its own work (docs/notes/process-exit.md). A stream that cannot be flushed leaves the end
    to the interpreter, which reports it as it always does.
    """
    shutdown = getattr(threading, "_shutdown", None)  # the interpreter's own first step (CPython)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    except (OSError, ValueError):
        sys.exit(code)  # type: ignore[arg-type]
    if code is None or isinstance(code, int):
        os._exit(int(code or 0) & 0xFF)
    print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
    sys.stderr.flush()
    os._exit(1)
