"""Every code block of the user docs runs, or says why it does not (issue 29; docs layout and conventions).

README.md and docs/**/*.md, except the generated reference pages (the CLI and HTTP ones by ``make reference``,
the Python API when the site is built), are read for fenced code blocks, one test per file (its id is the file's
path):

- every fence has an info string: a bare ``` fails (write ```text for shown output);
- ``python``, ``bash``, ``sh``, ``shell`` and ``console`` blocks run; other languages (``text``, ``json``,
  ``yaml``, ``csv``, ``markdown``, ``http``) are shown output or formats and do not;
- a code block is left out only when the line right above its opening fence is ``<!-- not-run: REASON -->``
  (a non-empty reason) or ``<!-- tested-by: tests/FILE.py::TEST -->`` (the named test must exist);
- the runnable blocks of one file run in order in one fresh temporary folder, with ``WHITEVEC_DATA`` set to the
  shared data, ``WHITEVEC_CACHE`` to a cache shared by the whole session, ``HF_HUB_OFFLINE=1`` (a shell block that
  would download fails at once; a block that downloads needs a not-run marker anyway) and this interpreter's bin
  folder first on ``PATH`` (so ``whitevec`` and ``python`` are this environment's), and before it a warm
  ``whitevec`` (tests/warm_cli.py: one server per session has imported the CLI and its libraries; each command
  runs in a child forked from it, on the block's folder, environment and standard streams, with the exit status
  of the console script; about 40 commands once paid seconds of imports each). Python blocks of a file share
  one namespace and run in this process; ``bash``/``sh``/``shell`` blocks run as ``bash -euo pipefail -c BLOCK``;
  ``console`` blocks run their ``$ `` lines (prompt stripped; a line ending in ``\\`` continues on the next) the
  same way. A failure names FILE:LINE of the failing line. A file with runnable blocks is skipped when the shared
  data is missing.

Checking another checkout's pages (a git worktree where docs are being written) with that checkout's package::

    cd OTHER_CHECKOUT && WHITEVEC_DOCS_ROOT=$PWD PYTHONPATH=$PWD/src WHITEVEC_DATA=../shared/data \\
        MAIN/.venv/bin/python -m pytest -q MAIN/tests/test_docs.py -k "docs/how-to"

``WHITEVEC_DOCS_ROOT`` (default: this checkout) is the folder holding README.md and docs/; ``tested-by``
markers are looked up under it too. When it is set, the test refuses to run blocks against a whitevec imported
from anywhere but its ``src/``.

The rest checks the site (mkdocs.yml): the CLI and HTTP reference pages docs/hooks writes list every command,
option, route and schema and are committed as the code makes them now, and ``mkdocs build --strict`` passes
with no page loading anything from another host (skipped when the docs tools are not installed, or when the
checked checkout has no mkdocs.yml).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests import warm_cli

REPO = Path(__file__).resolve().parents[1]
ROOT = Path(os.environ.get("WHITEVEC_DOCS_ROOT") or REPO).resolve()

# Generated (docs/hooks by `make reference`; mkdocstrings when the site is built): they hold no user code blocks.
GENERATED_PAGES = ("docs/reference/python.md", "docs/reference/cli.md", "docs/reference/http.md")
GENERATED_FOLDERS = ("docs/reference/api/",)

PYTHON = "python"
SHELLS = frozenset({"bash", "sh", "shell"})
CONSOLE = "console"
RUNNABLE = frozenset({PYTHON, CONSOLE, *SHELLS})
# Spellings of code that would silently not run: refused, naming the language that runs.
MISSPELT = {"py": "python", "py3": "python", "python3": "python", "pycon": "python", "zsh": "bash"}

BLOCK_TIMEOUT_S = 300

_FENCE = re.compile(r"(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)")
_MARKER = re.compile(r"<!--\s*(?P<kind>not-run|tested-by)\s*(?::(?P<reason>.*?))?\s*-->")
# Near misses of a marker (another spelling, a missing colon) are refused rather than ignored.
_MARKER_LIKE = re.compile(r"<!--\s*(not[\s_-]*run|tested[\s_-]*by)", re.IGNORECASE)
_TEST_REFERENCE = re.compile(r"(?P<file>tests/[\w./-]+\.py)::(?P<names>\w+(?:::\w+)?)(?:\[[^\]]*\])?")


@dataclass(frozen=True)
class Marker:
    kind: str  # "not-run" or "tested-by"
    reason: str  # why it does not run, or the test (tests/FILE.py::TEST) that runs it


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    lang: str
    code: str  # the lines between the fences, the fence's indentation removed
    marker: Marker | None

    @property
    def runs(self) -> bool:
        return self.lang in RUNNABLE and self.marker is None


# ---- reading a page -----------------------------------------------------------------------------------------
def _opening_fence(line: str) -> re.Match[str] | None:
    match = _FENCE.fullmatch(line)
    # A backtick fence's info string holds no backtick (CommonMark): ```x``` on one line is inline code.
    if match is None or (match["fence"][0] == "`" and "`" in match["info"]):
        return None
    return match


def _language(info: str) -> str:
    """The language of an info string: ``python title="x.py"`` and ``{.python .lineno}`` give ``python``."""
    match = re.match(r"\{?\s*\.?([\w+-]+)", info.strip())
    return match.group(1).lower() if match else ""


def parse_marker(line: str) -> tuple[Marker | None, str | None]:
    """The marker a line is (or None), and what is wrong with it (or None)."""
    text = line.strip()
    if not _MARKER_LIKE.match(text):
        return None, None
    match = _MARKER.fullmatch(text)
    if match is None:
        return None, f"malformed marker {text!r}: write <!-- not-run: REASON --> or <!-- tested-by: TEST -->"
    reason = (match["reason"] or "").strip()
    if not reason:
        return None, f"{match['kind']} marker without a reason: write <!-- {match['kind']}: ... -->"
    return Marker(match["kind"], reason), None


def _dedent(line: str, indent: str) -> str:
    return line[len(indent) :] if line.startswith(indent) else line.lstrip(" \t")


def parse_markdown(text: str, where: str) -> tuple[list[Block], list[str]]:
    """The fenced code blocks of a Markdown text, and its faults as ``WHERE:LINE: message``."""
    lines = text.splitlines()
    blocks: list[Block] = []
    errors: list[str] = []
    i = 0
    while i < len(lines):
        opening = _opening_fence(lines[i])
        if opening is None:
            marker, problem = parse_marker(lines[i])
            if problem is not None:
                errors.append(f"{where}:{i + 1}: {problem}")
            elif marker is not None and (i + 1 == len(lines) or _opening_fence(lines[i + 1]) is None):
                errors.append(f"{where}:{i + 1}: a marker must be the line right above a code fence")
            i += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        closing = re.compile(rf"[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*")
        end = next((j for j in range(i + 1, len(lines)) if closing.fullmatch(lines[j])), None)
        if end is None:
            errors.append(f"{where}:{i + 1}: code fence {fence} is never closed")
            break
        lang = _language(opening["info"])
        marker = parse_marker(lines[i - 1])[0] if i > 0 else None
        code = "\n".join(_dedent(line, indent) for line in lines[i + 1 : end])
        if not lang:
            errors.append(f"{where}:{i + 1}: code fence without an info string (write ```text for shown output)")
        elif lang in MISSPELT:
            errors.append(f"{where}:{i + 1}: ```{lang} does not run: write ```{MISSPELT[lang]} (or ```text)")
        elif lang == CONSOLE and marker is None and not console_commands(code).strip():
            errors.append(f"{where}:{i + 1}: console block without a '$ ' command line (write ```text for output)")
        blocks.append(Block(i + 1, lang, code, marker))
        i = end + 1
    return blocks, errors


def console_commands(code: str) -> str:
    """The commands of a console block: its ``$ `` lines without the prompt, and the lines continuing them
    (after a trailing backslash, ``> `` removed); every other line (shown output) blank, so lines keep their
    numbers."""
    commands: list[str] = []
    continuing = False
    for line in code.splitlines():
        if continuing or line.startswith("$ "):
            command = line[2:] if line.startswith(("$ ", "> ")) else line
            commands.append(command)
            continuing = command.endswith("\\")
        else:
            commands.append("")
    return "\n".join(commands)


def check_tested_by(reference: str, root: Path) -> str | None:
    """What is wrong with a ``tested-by`` reference (``tests/FILE.py::TEST`` or ``::Class::test``), or None."""
    match = _TEST_REFERENCE.fullmatch(reference)
    if match is None:
        return f"tested-by wants tests/FILE.py::TEST, got {reference!r}"
    path = root / match["file"]
    if not path.is_file():
        return f"tested-by names {match['file']}, which does not exist"
    *owner, name = match["names"].split("::")
    scope: list[ast.stmt] = ast.parse(path.read_text(encoding="utf-8")).body
    if owner:
        classes = [n for n in scope if isinstance(n, ast.ClassDef) and n.name == owner[0]]
        scope = classes[0].body if classes else []
    functions = {n.name for n in scope if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    if name not in functions or not name.startswith("test"):
        return f"tested-by names {reference}, which is not a test function in {match['file']}"
    return None


# A repository path a page names as code (`benchmarks/maintained/results_sts.py`): mkdocs checks links, not these.
REPO_PATH = re.compile(r"\b(?:benchmarks|tests|src)/[\w./-]*\w\.(?:py|sh|md|json|jsonl|png)\b")


def check_page(path: Path, root: Path) -> tuple[list[Block], list[str]]:
    """A page's blocks and faults (its fences, markers, the tests its tested-by markers name, and the scripts and
    files of the repository it names, which must exist)."""
    where = path.relative_to(root).as_posix()
    text = path.read_text(encoding="utf-8")
    blocks, errors = parse_markdown(text, where)
    for block in blocks:
        if block.marker is not None and block.marker.kind == "tested-by":
            problem = check_tested_by(block.marker.reason, root)
            if problem is not None:
                errors.append(f"{where}:{block.line - 1}: {problem}")
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("<!--"):  # a marker: its test was checked above
            continue
        errors += [
            f"{where}:{number}: {name} does not exist"
            for name in REPO_PATH.findall(line)
            if not (root / name).exists() and not Path(name).stem.isupper()  # a placeholder: tests/FILE.py
        ]
    return blocks, errors


def doc_pages(root: Path) -> list[Path]:
    """README.md and docs/**/*.md under ``root``, without the generated reference pages."""
    pages = [root / "README.md"] if (root / "README.md").is_file() else []
    pages += sorted((root / "docs").rglob("*.md")) if (root / "docs").is_dir() else []

    def generated(page: Path) -> bool:
        name = page.relative_to(root).as_posix()
        return name in GENERATED_PAGES or name.startswith(GENERATED_FOLDERS)

    return [page for page in pages if not generated(page)]


# ---- running a page -----------------------------------------------------------------------------------------
def block_environment(data_dir: Path, cache_dir: Path, warm: WarmCli | None = None) -> dict[str, str]:
    """The variables set while a page's blocks run; with ``warm``, its ``whitevec`` first on the PATH."""
    # sys.executable, not resolved: a virtual environment's bin folder holds its `whitevec` and `python`.
    path = [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    env = {"WHITEVEC_DATA": str(data_dir), "WHITEVEC_CACHE": str(cache_dir), "HF_HUB_OFFLINE": "1"}
    if warm is not None:
        path.insert(0, str(warm.bin_dir))
        env[warm_cli.SOCKET_ENV] = str(warm.socket)
    return {**env, "PATH": os.pathsep.join(path)}


@dataclass(frozen=True)
class WarmCli:
    bin_dir: Path  # holds the `whitevec` client
    socket: Path  # where the server listens


@contextlib.contextmanager
def warm_whitevec(env: dict[str, str]) -> Iterator[WarmCli]:
    """A warm `whitevec` (tests/warm_cli.py) started with ``env`` set, stopped after."""
    with tempfile.TemporaryDirectory(prefix="whitevec-warm-") as folder:  # short: a socket path has 107 bytes
        warm = WarmCli(Path(folder), Path(folder) / "cli.sock")
        client = warm.bin_dir / "whitevec"
        client.write_text(
            f"#!{sys.executable} -IS\nimport sys\nsys.path.insert(0, {str(REPO / 'tests')!r})\n"
            "import warm_cli\nwarm_cli.client()\n"
        )
        client.chmod(0o755)
        server = subprocess.Popen(
            [sys.executable, str(REPO / "tests" / "warm_cli.py"), str(warm.socket)],
            env={**os.environ, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdin is not None and server.stdout is not None
        try:
            started = server.stdout.readline()
            assert started == "ready\n", f"the warm whitevec did not start (exit {server.poll()})"
            yield warm
        finally:
            server.stdin.close()  # the server ends when its input closes
            server.wait(60)


@contextlib.contextmanager
def _inside(folder: Path, env: dict[str, str]) -> Iterator[None]:
    """Work in ``folder`` with ``env`` set; the process's folder and environment come back afterwards."""
    saved_env = dict(os.environ)
    saved_folder = Path.cwd()
    os.environ.update(env)
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(saved_folder)
        os.environ.clear()
        os.environ.update(saved_env)


def _tail(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def _run_python(block: Block, path: Path, where: str, namespace: dict[str, object]) -> None:
    # Blank lines in front keep the Markdown file's line numbers in the traceback.
    code = compile("\n" * block.line + block.code, str(path), "exec")
    try:
        exec(code, namespace)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit from a CLI call is a failure too
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
        line = frames[-1].lineno if frames else block.line
        below = exc.__traceback__.tb_next if exc.__traceback__ is not None else None  # from the block down
        shown = "".join(traceback.format_exception(type(exc), exc, below))
        pytest.fail(f"{where}:{line}: python block (line {block.line}) failed:\n{_tail(shown)}", pytrace=False)


def _run_shell(block: Block, where: str) -> None:
    commands = console_commands(block.code) if block.lang == CONSOLE else block.code
    # The trap names the failing line; blank lines keep the Markdown file's numbering in $LINENO.
    prelude = f"__where={where!r}; trap 'echo \"$__where:$LINENO: exit $?\" >&2' ERR"
    script = prelude + "\n" * block.line + commands + "\n"
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where}:{block.line}: {block.lang} block ran past {BLOCK_TIMEOUT_S} s", pytrace=False)
    if done.returncode != 0:
        located = re.findall(rf"^{re.escape(where)}:(\d+): exit", done.stderr, re.MULTILINE)
        line = located[-1] if located else block.line
        pytest.fail(
            f"{where}:{line}: {block.lang} block (line {block.line}) exited {done.returncode}\n"
            f"--- stdout\n{_tail(done.stdout)}\n--- stderr\n{_tail(done.stderr)}",
            pytrace=False,
        )


def run_blocks(blocks: list[Block], path: Path, where: str, folder: Path, env: dict[str, str]) -> int:
    """Run a page's runnable blocks in order in ``folder``; the number run. Fails the test at the first
    failing block, naming WHERE:LINE."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    ran = 0
    with _inside(folder, env):
        for block in blocks:
            if not block.runs:
                continue
            if block.lang == PYTHON:
                _run_python(block, path, where, namespace)
            else:
                _run_shell(block, where)
            ran += 1
    return ran


def _foreign_package() -> str | None:
    """When another checkout's docs are checked, why its blocks would not test its own package (or None)."""
    source = ROOT / "src" / "whitevec"
    if "WHITEVEC_DOCS_ROOT" not in os.environ or not source.is_dir():
        return None
    import whitevec

    loaded = Path(whitevec.__file__).resolve().parent
    if loaded == source.resolve():
        return None
    return f"whitevec is imported from {loaded}, not {source}: set PYTHONPATH={ROOT / 'src'}"


def _page_params() -> list[object]:
    params: list[object] = []
    for page in doc_pages(ROOT):
        runnable = any(block.runs for block in check_page(page, ROOT)[0])
        marks = [pytest.mark.data, pytest.mark.model] if runnable else []
        params.append(pytest.param(page, id=page.relative_to(ROOT).as_posix(), marks=marks))
    return params


@pytest.fixture(scope="session")
def docs_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("docs-cache")


@pytest.fixture(scope="session")
def warm_cli_server(data_dir: Path, docs_cache: Path) -> Iterator[WarmCli]:
    """One warm `whitevec` for every page, started in the environment the blocks run in."""
    with warm_whitevec(block_environment(data_dir, docs_cache)) as warm:
        yield warm


@pytest.mark.parametrize("page", _page_params())
def test_doc_page(page: Path, request: pytest.FixtureRequest, tmp_path: Path, docs_cache: Path) -> None:
    blocks, errors = check_page(page, ROOT)
    if errors:
        pytest.fail("\n".join(errors), pytrace=False)
    if not any(block.runs for block in blocks):
        return
    data_dir: Path = request.getfixturevalue("data_dir")  # skips when the shared data is missing
    foreign = _foreign_package()
    if foreign is not None:
        pytest.fail(foreign, pytrace=False)
    warm: WarmCli = request.getfixturevalue("warm_cli_server")
    folder = tmp_path / "work"
    folder.mkdir()
    env = block_environment(data_dir, docs_cache, warm)
    run_blocks(blocks, page, page.relative_to(ROOT).as_posix(), folder, env)


# ---- the reader and the runner on small pages ------------------------------------------------------------
def test_a_bare_fence_is_refused() -> None:
    blocks, errors = parse_markdown("text\n```\nx = 1\n```\n", "p.md")
    assert errors == ["p.md:2: code fence without an info string (write ```text for shown output)"]
    assert [block.line for block in blocks] == [2]


def test_languages_and_what_runs() -> None:
    page = (
        '```python title="x.py"\na = 1\n```\n'
        "```{.bash .copy}\necho hi\n```\n"
        "```text\nshown\n```\n"
        "```json\n{}\n```\n"
        "```Console\n$ whitevec --help\n```\n"
    )
    blocks, errors = parse_markdown(page, "p.md")
    assert errors == []
    assert [(block.lang, block.runs) for block in blocks] == [
        ("python", True),
        ("bash", True),
        ("text", False),
        ("json", False),
        ("console", True),
    ]
    assert blocks[0].code == "a = 1"


def test_a_misspelt_language_is_refused() -> None:
    _, errors = parse_markdown("```py\nx = 1\n```\n", "p.md")
    assert errors == ["p.md:1: ```py does not run: write ```python (or ```text)"]


def test_markers_leave_the_block_below_out() -> None:
    page = (
        "<!-- not-run: downloads a model from the hub -->\n```bash\nwhitevec models fetch x\n```\n\n"
        "  <!-- tested-by: tests/test_x.py::test_y -->\n  ```python\n  run()\n  ```\n"
        "```python\nran = True\n```\n"
    )
    blocks, _ = parse_markdown(page, "p.md")
    assert [block.marker for block in blocks] == [
        Marker("not-run", "downloads a model from the hub"),
        Marker("tested-by", "tests/test_x.py::test_y"),
        None,
    ]
    assert [block.runs for block in blocks] == [False, False, True]
    assert blocks[1].code == "run()"


@pytest.mark.parametrize("marker", ["<!-- not-run: -->", "<!-- not-run -->", "<!--tested-by:   -->"])
def test_a_marker_without_a_reason_is_refused(marker: str) -> None:
    blocks, errors = parse_markdown(f"{marker}\n```bash\nfalse\n```\n", "p.md")
    assert len(errors) == 1 and errors[0].startswith("p.md:1: ") and "without a reason" in errors[0]
    assert blocks[0].runs  # an invalid marker leaves nothing out


@pytest.mark.parametrize("marker", ["<!-- not run: a GPU -->", "<!-- NOT-RUN: x -->", "<!-- tested_by x -->"])
def test_a_misspelt_marker_is_refused(marker: str) -> None:
    _, errors = parse_markdown(f"{marker}\n```bash\nfalse\n```\n", "p.md")
    assert len(errors) == 1 and "malformed marker" in errors[0]


def test_a_marker_must_touch_its_fence() -> None:
    _, errors = parse_markdown("<!-- not-run: needs a GPU -->\n\n```bash\nnvidia-smi\n```\n", "p.md")
    assert errors == ["p.md:1: a marker must be the line right above a code fence"]


def test_markers_in_prose_or_inside_blocks_are_text() -> None:
    page = (
        "Mark a block with `<!-- not-run: REASON -->` above it.\n"
        "````markdown\n<!-- not-run: an example -->\n```python\nnot run\n```\n````\n"
    )
    blocks, errors = parse_markdown(page, "p.md")
    assert errors == []
    assert [(block.lang, block.line) for block in blocks] == [("markdown", 2)]


def test_fences_close_with_their_own_kind_and_length() -> None:
    page = "~~~bash\necho a\n```\necho b\n~~~\n````text\n```\n````\n"
    blocks, errors = parse_markdown(page, "p.md")
    assert errors == []
    assert [(block.lang, block.code) for block in blocks] == [("bash", "echo a\n```\necho b"), ("text", "```")]


def test_an_unclosed_fence_is_refused() -> None:
    _, errors = parse_markdown("intro\n```bash\necho a\n", "p.md")
    assert errors == ["p.md:2: code fence ``` is never closed"]


def test_inline_triple_backticks_are_not_a_fence() -> None:
    blocks, errors = parse_markdown("write ```python``` to run\n", "p.md")
    assert (blocks, errors) == ([], [])


def test_console_runs_its_prompt_lines_only() -> None:
    code = "$ whitevec encode a \\\n>   --out b\nwrote 3 vectors\n$ ls\nb\n"
    assert console_commands(code) == "whitevec encode a \\\n  --out b\n\nls\n"
    _, errors = parse_markdown("```console\nonly output\n```\n", "p.md")
    assert errors == ["p.md:1: console block without a '$ ' command line (write ```text for output)"]


def test_tested_by_must_name_an_existing_test(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "def test_ok():\n    pass\n\ndef helper():\n    pass\n\nclass TestGroup:\n    def test_inner(self):\n"
        "        pass\n"
    )
    assert check_tested_by("tests/test_x.py::test_ok", tmp_path) is None
    assert check_tested_by("tests/test_x.py::test_ok[case-1]", tmp_path) is None
    assert check_tested_by("tests/test_x.py::TestGroup::test_inner", tmp_path) is None
    assert "not a test function" in str(check_tested_by("tests/test_x.py::test_gone", tmp_path))
    assert "not a test function" in str(check_tested_by("tests/test_x.py::helper", tmp_path))
    assert "not a test function" in str(check_tested_by("tests/test_x.py::TestGroup::test_ok", tmp_path))
    assert "does not exist" in str(check_tested_by("tests/test_y.py::test_ok", tmp_path))
    assert "wants tests/FILE.py::TEST" in str(check_tested_by("test_x.py", tmp_path))


def test_a_page_checks_its_tested_by_markers(tmp_path: Path) -> None:
    page = tmp_path / "docs" / "p.md"
    page.parent.mkdir()
    page.write_text("<!-- tested-by: tests/test_none.py::test_a -->\n```python\nx\n```\n")
    _, errors = check_page(page, tmp_path)
    assert errors == ["docs/p.md:1: tested-by names tests/test_none.py, which does not exist"]


def test_the_generated_reference_pages_are_left_out(tmp_path: Path) -> None:
    for name in ("README.md", "docs/index.md", "docs/reference/cli.md", "docs/reference/api/x.md", "docs/a/b.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("# page\n")
    found = [page.relative_to(tmp_path).as_posix() for page in doc_pages(tmp_path)]
    assert found == ["README.md", "docs/a/b.md", "docs/index.md"]


def _run_page(text: str, tmp_path: Path) -> tuple[Path, str]:
    """Run the blocks of ``text`` as a page docs/p.md under ``tmp_path``; the work folder and the failure."""
    page = tmp_path / "docs" / "p.md"
    page.parent.mkdir(parents=True)
    page.write_text(text)
    folder = tmp_path / "work"
    folder.mkdir()
    env = block_environment(tmp_path / "data", tmp_path / "cache")
    blocks, errors = parse_markdown(text, "docs/p.md")
    assert errors == []
    try:
        run_blocks(blocks, page, "docs/p.md", folder, env)
    except pytest.fail.Exception as failure:
        return folder, str(failure)
    return folder, ""


def test_blocks_run_in_order_in_one_folder_with_one_namespace(tmp_path: Path) -> None:
    page = (
        "```python\nimport os\nwords = ['a', 'b']\nprint(os.getcwd())\n```\n"
        '```bash\necho "$WHITEVEC_DATA" > data.txt\ncommand -v python > python.txt\n```\n'
        "```console\n$ echo from-console > console.txt\nfrom-console\n```\n"
        "<!-- not-run: would fail -->\n```bash\nfalse\n```\n"
        "```text\nnot code\n```\n"
        "```python\nfrom pathlib import Path\nPath('words.txt').write_text(' '.join(words))\n```\n"
    )
    before = Path.cwd()
    folder, failure = _run_page(page, tmp_path)
    assert failure == ""
    assert Path.cwd() == before and os.environ.get("WHITEVEC_DATA") != str(tmp_path / "data")
    assert (folder / "data.txt").read_text().strip() == str(tmp_path / "data")
    assert (folder / "python.txt").read_text().strip() == str(Path(sys.executable).parent / "python")
    assert (folder / "console.txt").read_text() == "from-console\n"
    assert (folder / "words.txt").read_text() == "a b"


def test_a_failing_python_block_names_its_line(tmp_path: Path) -> None:
    page = "# Page\n\n```python\nx = 1\n\ny = 1 / 0\n```\n"
    _, failure = _run_page(page, tmp_path)
    assert failure.startswith("docs/p.md:6: python block (line 3) failed:")
    assert "ZeroDivisionError" in failure


def test_a_failing_shell_block_names_its_line(tmp_path: Path) -> None:
    page = "```python\nx = 1\n```\n\n```bash\necho ok\nls no-such-file\necho never\n```\n"
    _, failure = _run_page(page, tmp_path)
    assert failure.startswith("docs/p.md:7: bash block (line 5) exited 2")
    assert "no-such-file" in failure and "never" not in failure.split("--- stdout")[1].split("--- stderr")[0]


def test_a_failing_pipeline_fails_the_block(tmp_path: Path) -> None:
    _, failure = _run_page("```console\n$ echo a\na\n$ false | cat\n```\n", tmp_path)
    assert failure.startswith("docs/p.md:4: console block (line 1) exited 1")


def test_an_unset_variable_fails_the_block(tmp_path: Path) -> None:
    _, failure = _run_page('```sh\necho "$NO_SUCH_VARIABLE_FOR_DOCS"\n```\n', tmp_path)
    assert failure.startswith("docs/p.md:") and "unbound variable" in failure


# ---- the generated reference pages ---------------------------------------------------------------------------
HOOKS = REPO / "docs" / "hooks"


def _hook(name: str) -> ModuleType:
    """A module of docs/hooks (they are loaded by path, as mkdocs loads them)."""
    spec = importlib.util.spec_from_file_location(f"docs_hooks_{name}", HOOKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _registered_commands(command: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every command path of a click group and its command, read from the groups' ``commands`` tables."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            yield from _registered_commands(sub, f"{path} {name}")


def _names(code: str) -> tuple[set[str], set[str], set[str]]:
    """A Python block's names: imported from whitevec, bound in it (imports, assignments, definitions,
    arguments), and read."""
    tree = ast.parse(code)
    from_whitevec: set[str] = set()
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = {(alias.asname or alias.name).split(".")[0] for alias in node.names}
            bound |= names
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "whitevec":
                from_whitevec |= names
        elif isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return from_whitevec, bound, read


def test_a_snippet_with_imports_imports_the_whitevec_names_it_uses() -> None:
    """A block that starts with imports is copied on its own: the whitevec names it uses (those some page imports
    from whitevec) are imported in it. The export-faiss snippet used Encoder, which only an earlier block
    imported; the page ran, a reader's copy did not."""
    blocks = [
        (f"{page.relative_to(ROOT)}:{block.line}", *_names(block.code))
        for page in doc_pages(ROOT)
        for block in check_page(page, ROOT)[0]
        if block.lang == PYTHON and block.code.lstrip().startswith(("import ", "from "))
    ]
    whitevec_names = set().union(*(imported for _, imported, _, _ in blocks))
    unimported = [
        f"{where}: {sorted(missing)}"
        for where, _, bound, read in blocks
        if (missing := (read - bound) & whitevec_names)
    ]
    assert not unimported, unimported


def test_the_cli_reference_lists_every_command_and_option() -> None:
    import typer

    from whitevec.cli import app

    page = _hook("cli_reference").cli_markdown()
    sections = re.split(r"^#{2,4} ", page, flags=re.MULTILINE)
    by_path = {section.split("`")[1]: section for section in sections if section.startswith("`")}
    registered = dict(_registered_commands(typer.main.get_command(app), "whitevec"))
    assert {"whitevec index build", "whitevec frequencies count", "whitevec serve"} <= set(registered)
    assert sorted(by_path) == sorted(registered)
    for path, command in registered.items():
        assert f"Usage: {path} " in by_path[path], path
        for parameter in command.params:
            if not parameter.hidden:
                names = parameter.opts if parameter.param_type_name == "option" else [parameter.name]
                assert all(name in by_path[path] for name in names), (path, names)


def test_the_http_reference_lists_every_route_and_schema() -> None:
    pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
    hook = _hook("http_reference")
    document = hook.openapi_document()
    page = hook.http_markdown(document)
    routes = [(method, path) for path, item in document["paths"].items() for method in item]
    assert {("get", "/health"), ("post", "/search"), ("post", "/embed"), ("get", "/info")} <= set(routes)
    for method, path in routes:
        assert f"### `{method.upper()} {path}`" in page
    for name, schema in document["components"]["schemas"].items():
        assert f"### {name} {{#{hook.schema_anchor(name)}}}" in page
        for field in schema.get("properties", {}):
            assert f"| `{field}` |" in page, (name, field)
    assert "| 401 | [ErrorResponse](#schema-errorresponse) |" in page  # documented with a key
    assert "(1 to 64 items)" in page  # the default max_queries / max_texts


def test_the_committed_cli_reference_is_current() -> None:
    assert not _hook("cli_reference").is_stale(), "docs/reference/cli.md is stale: run `make reference`"


def test_the_committed_http_reference_is_current() -> None:
    pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
    stale = _hook("http_reference").stale_files()
    assert stale == [], f"{stale} under docs/ are stale: run `make reference`"


def test_docstrings_become_markdown() -> None:
    pytest.importorskip("griffe", reason="griffe (mkdocstrings' python handler) is not installed")
    convert = _hook("griffe_docstrings").markdown_docstring
    assert convert("See :class:`~whitevec.index.Retriever` and :func:`make_transform`.") == (
        "See `Retriever` and `make_transform`."
    )
    assert (
        convert("Run:\n\n>>> f(1)  # doctest: +SKIP\n2\n\nDone.") == "Run:\n\n```pycon\n>>> f(1)\n2\n```\n\nDone."
    )
    assert convert("The map is::\n\n    y = W x\n") == "The map is:\n\n    y = W x"
    assert convert("Intro.\n\nParameters\n----------\nseed:\n    Fixes it.") == (
        "Intro.\n\nParameters:\n    seed:\n        Fixes it."
    )
    assert convert("```python\n>>> kept\n```") == "```python\n>>> kept\n```"


# ---- the site --------------------------------------------------------------------------------------------------
# An element that loads a file into the page: its URL must be local for the site to work offline.
_ASSET = re.compile(r"<(?:link|script|img|iframe|source|video|audio|embed)\b[^>]*>", re.IGNORECASE)
_REMOTE = re.compile(r"""\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.IGNORECASE)


@pytest.mark.slow
def test_the_site_builds_strictly_and_offline(tmp_path: Path) -> None:
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        pytest.importorskip(
            module, reason="the docs tools (mkdocs, mkdocs-material, mkdocstrings) are not installed"
        )
    config = ROOT / "mkdocs.yml"
    if not config.is_file():
        pytest.skip(f"{ROOT} has no mkdocs.yml: the site is built from a checkout that has one")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"mkdocs build --strict failed:\n{_tail(done.stdout + done.stderr)}", pytrace=False)
    remote = []
    for page in site.rglob("*.html"):
        for element in _ASSET.findall(page.read_text(encoding="utf-8")):
            if _REMOTE.search(element):
                remote.append(f"{page.relative_to(site)}: {element}")
    assert remote == [], "\n".join(remote)
    assert (site / "search" / "search_index.json").is_file()
    assert (site / "search" / "search_index.js").is_file()  # the offline plugin's copy, for file:// pages
    assert (site / "reference" / "openapi.json").is_file()
    cli_page = (site / "reference" / "cli.html").read_text(encoding="utf-8")
    assert "whitevec index build" in cli_page and "whitevec-index-build" in cli_page


def test_a_page_naming_a_missing_script_is_refused(tmp_path: Path) -> None:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "here.py").write_text("")
    page = tmp_path / "page.md"
    page.write_text("Run `python benchmarks/here.py`, then `benchmarks/gone.py --all`.\n")
    _, errors = check_page(page, tmp_path)
    assert errors == ["page.md:1: benchmarks/gone.py does not exist"]


def test_the_warm_whitevec_answers_as_a_new_process(
    warm_cli_server: WarmCli, data_dir: Path, docs_cache: Path, tmp_path: Path
) -> None:
    """The `whitevec` the blocks run (tests/warm_cli.py) prints, fails and exits as the console script does, in
    the block's folder and environment, reading the block's input."""
    script = (
        'command -v whitevec; echo "$WHITEVEC_NOTE"; whitevec index info no-such-index; echo "exit $?"\n'
        'whitevec search --k 3 || echo "exit $?"\nwhitevec --version </dev/null; pwd\n'
    )
    answers = []
    for warm in (None, warm_cli_server):
        env = {**os.environ, **block_environment(data_dir, docs_cache, warm), "WHITEVEC_NOTE": "noted"}
        done = subprocess.run(
            ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
        )
        answers.append(done)
    cold, warm_done = answers
    where = warm_done.stdout.splitlines()[0]
    assert where == str(warm_cli_server.bin_dir / "whitevec") != cold.stdout.splitlines()[0]
    assert warm_done.stdout.splitlines()[1:] == cold.stdout.splitlines()[1:]
    assert "exit 2" in warm_done.stdout and "noted" in warm_done.stdout and str(tmp_path) in warm_done.stdout
    assert warm_done.stderr == cold.stderr and "no-such-index" in warm_done.stderr
