"""A command loads what its work needs (issue 50, item 6): help and usage errors load none of the heavy libraries,
and a search of a static-table index loads neither torch nor scikit-learn nor pymilvus (numpy does the work);
neither `import whitevec` nor any command loads a framework of whitevec.integrations (issue 51).

Each case runs in a fresh interpreter, since a module imported once stays in ``sys.modules``: one child runs
every help and usage error in turn, one the index commands, and after each command writes which heavy modules
are loaded so far (the first command after which one appears is the one that imported it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
SAVED = Path(__file__).parent / "fixtures" / "saved"
# The libraries a command that does not need them must not load (seconds of imports each), and the frameworks
# whitevec plugs into (issue 51: extras; ``whitevec.integrations`` imports each where asked, and only `whitevec mcp
# INDEX` loads mcp, not its --help).
FRAMEWORKS = ("langchain", "langchain_core", "llama_index", "mcp")
HEAVY = ("torch", "transformers", "sklearn", "faiss", "pymilvus", *FRAMEWORKS)
# Runs ``whitevec ARGS`` for each ARGS of the JSON list in argv[1], in this one process, with stdout and stderr
# thrown away, and writes [args, exit status, the heavy modules loaded by then] per command to argv[2]. With no
# list ("help"), the commands are every group's and command's --help and an unknown option of each, and
# ``whitevec search`` with no argument.
RUNNER = f"""
import contextlib, io, json, sys
from whitevec.cli import app, main
import typer

HEAVY = {HEAVY!r}

def walk(command, path):
    yield path
    for name, sub in sorted(getattr(command, "commands", {{}}).items()):
        yield from walk(sub, (*path, name))

if sys.argv[1] == "help":
    paths = list(walk(typer.main.get_command(app), ()))
    commands = [[*path, "--help"] for path in paths] + [[*path, "--no-such-option"] for path in paths]
    commands.append(["search"])
else:
    commands = json.loads(sys.argv[1])
report = []
for args in commands:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code
    report.append([args, code, [name for name in HEAVY if name in sys.modules]])
with open(sys.argv[2], "w") as out:
    json.dump(report, out)
"""


def run_commands(commands: str | list[list[str]], tmp: Path) -> list[tuple[str, Any, list[str]]]:
    """``RUNNER`` in a fresh interpreter with this checkout's library: (command, exit status, heavy modules)."""
    report = tmp / "report.json"
    spec = commands if isinstance(commands, str) else json.dumps(commands)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, spec, str(report)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [(" ".join(args), code, loaded) for args, code, loaded in json.loads(report.read_text())]


def first_loading(report: list[tuple[str, Any, list[str]]], names: tuple[str, ...]) -> str | None:
    """The first command after which one of ``names`` was loaded, and what it loaded; None if none was."""
    for command, _, loaded in report:
        if set(loaded) & set(names):
            return f"`whitevec {command}` loaded {sorted(set(loaded) & set(names))}"
    return None


def test_help_and_usage_errors_load_no_heavy_library(tmp_path: Path) -> None:
    report = run_commands("help", tmp_path)
    # Not vacuous: every command's help ran and succeeded, every usage error was one (exit 2).
    assert len(report) > 30 and any(command == "index build --help" for command, _, _ in report)
    assert all(code == 0 for command, code, _ in report if command.endswith("--help")), report
    assert all(code == 2 for command, code, _ in report if not command.endswith("--help")), report
    assert first_loading(report, HEAVY) is None, first_loading(report, HEAVY)


@pytest.fixture(scope="module")
def static_index_commands(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Any, list[str]]]:
    """`index info` and a one-query search of two saved static-table indexes (FAISS; whitening-4, and no
    transform with 1-bit codes and rescoring), in one child."""
    folder = tmp_path_factory.mktemp("static-imports")
    commands = []
    for name in ("flat-whitening", "binary-rescore"):
        index = str(shutil.copytree(SAVED / f"index-{name}", folder / name))
        search = ["search", index, "a dog is running", "-k", "2", "--model", str(SAVED / "static")]
        commands += [["index", "info", index], search]
    report = run_commands(commands, folder)
    assert all(code == 0 for _, code, _ in report), report  # each did its work: its imports are the work's
    return report


def test_a_static_table_search_loads_no_torch(static_index_commands: list[tuple[str, Any, list[str]]]) -> None:
    assert first_loading(static_index_commands, ("torch", "transformers")) is None


def test_a_static_table_search_loads_no_sklearn_or_pymilvus(
    static_index_commands: list[tuple[str, Any, list[str]]],
) -> None:
    assert first_loading(static_index_commands, ("sklearn", "pymilvus")) is None


def test_import_whitevec_loads_no_framework() -> None:
    """``import whitevec``, its index and its CLI leave the frameworks of whitevec.integrations (extras) out."""
    code = (
        "import sys, whitevec, whitevec.index, whitevec.cli; "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({FRAMEWORKS!r})))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
