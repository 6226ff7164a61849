"""Mutation testing of one module with the tests of its change: ``make mutate MODULE=... TESTS=...``.

mutmut (pinned in the Makefile, installed in a venv of its own) changes the module one small edit at a time and
runs the tests given on each mutant; a mutant the tests still pass "survives": an answer the tests do not pin
down. The run happens in a scratch copy, ``out/mutation/<module>/`` (src, tests and pyproject with a
``[tool.mutmut]`` section made here), so the worktree and its pyproject stay as they are and two modules can be
run one after the other without their results mixing. It ends with the surviving mutants' diffs in
``survivors.txt`` there; each is to be killed by a test or named in the commit as equivalent (no answer a user
sees changes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "whitevec"


def _mutmut_section(module: Path, tests: list[str]) -> str:
    """The [tool.mutmut] table: mutate ``module`` only; run ``tests`` on each mutant, stopping at the first
    failure (a killed mutant needs one)."""
    quoted = ", ".join(f'"{t}"' for t in tests)
    return (
        "\n[tool.mutmut]\n"
        'source_paths = ["src/whitevec"]\n'
        # Tests read the guides (a snippet run, a page checked against the code) and import benchmarks' helpers
        # (a server started and waited for): mutmut's copy needs them too.
        'also_copy = ["docs", "README.md", "benchmarks"]\n'
        f'only_mutate = ["src/whitevec/{module.as_posix()}"]\n'
        f"pytest_add_cli_args_test_selection = [{quoted}]\n"
        'pytest_add_cli_args = ["-x", "-q", "-p", "no:cacheprovider"]\n'
        "use_git_change_detection = false\n"
        # A mutant forked from a process that has run torch and faiss can deadlock on their thread pools; a fork
        # server that only imports first does not.
        'process_isolation = "forkserver"\n'
    )


def _scratch(module: Path, tests: list[str]) -> Path:
    """A fresh copy of src, tests, docs, benchmarks, README.md and pyproject under out/mutation/<module>."""
    scratch = ROOT / "out" / "mutation" / module.with_suffix("").as_posix().replace("/", ".")
    shutil.rmtree(scratch, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "src", scratch / "src", ignore=ignore)
    shutil.copytree(ROOT / "tests", scratch / "tests", ignore=ignore)
    shutil.copytree(ROOT / "docs", scratch / "docs", ignore=ignore)
    shutil.copytree(ROOT / "benchmarks", scratch / "benchmarks", ignore=ignore)
    shutil.copy2(ROOT / "README.md", scratch / "README.md")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (scratch / "pyproject.toml").write_text(pyproject + _mutmut_section(module, tests), encoding="utf-8")
    return scratch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="a module under src/whitevec, e.g. index/sign_codes.py")
    parser.add_argument("tests", nargs="+", help="pytest selections run on each mutant (tests/test_one_bit.py)")
    parser.add_argument("--workers", type=int, default=1, help="mutants run at once (default 1: a shared machine)")
    parser.add_argument(
        "--functions",
        default="",
        help="mutate only these functions or methods of the module, comma-separated (main,_show_usage_error): "
        "a large module's run cut to the part a change touched",
    )
    args = parser.parse_args()
    module = Path(args.module)
    if not (PACKAGE / module).is_file():
        print(f"mutate: error: no module src/whitevec/{module}", file=sys.stderr)
        return 2
    missing = [t for t in args.tests if not (ROOT / t.split("::")[0]).exists()]
    if missing:
        print(f"mutate: error: no test file {', '.join(missing)}", file=sys.stderr)
        return 2
    scratch = _scratch(module, args.tests)
    # The mutants must be what the tests import: no PYTHONPATH pointing at the worktree's own sources.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    mutmut = [sys.executable, "-m", "mutmut"]
    # mutmut names a mutant of function f 'package.module.x_f__mutmut_N', of method m 'module.xǁClassǁm__mutmut_N'.
    names = [n.strip() for n in args.functions.split(",") if n.strip()]
    only = [pattern for n in names for pattern in (f"*.x_{n}__mutmut_*", f"*ǁ{n}__mutmut_*")]
    run = [*mutmut, "run", "--max-children", str(args.workers), *only]
    subprocess.run(run, cwd=scratch, env=env, check=False)
    results = subprocess.run(
        [*mutmut, "results"], cwd=scratch, env=env, capture_output=True, text=True, check=False
    ).stdout
    survivors = [line.split(":")[0].strip() for line in results.splitlines() if line.strip().endswith("survived")]
    report = [
        subprocess.run([*mutmut, "show", name], cwd=scratch, env=env, capture_output=True, text=True).stdout
        for name in survivors
    ]
    (scratch / "survivors.txt").write_text("\n".join(report), encoding="utf-8")
    print(f"{len(survivors)} surviving mutants of {module}; their diffs: {scratch / 'survivors.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
