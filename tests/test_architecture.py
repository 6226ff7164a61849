"""The layering ARCHITECTURE.md describes, checked on the source: no import circle anywhere in the repository
(lazy imports inside functions count too), between packages neither, the lower floors never import the higher
ones, no generic part of the index imports a backend, a small top level and small folders, no file or function too
long to read in one sitting, import paths once documented still importable, and benchmarks that share code only
through their helper."""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "whitevec"

MAX_TOP_LEVEL_MODULES = 8  # besides __init__ and the packages: a newcomer finds where a change goes in one look
MAX_FOLDER_MODULES = 12  # a folder's modules besides __init__: past a dozen, a folder wants rooms by job
# The index's backends: each a sub-package behind the stores/ protocols, which the generic parts never import.
BACKENDS = ("whitevec.index.faiss", "whitevec.index.milvus")
# Import paths the docs gave before issue 50's move, kept working for code written against them.
DOCUMENTED_PATHS = (
    "whitevec.index.fusion:fuse",
    "whitevec.index.fusion:parse_fusion",
    "whitevec.index.fusion:plan_search",
    "whitevec.index.fusion:LexicalRanker",
    "whitevec.index.filters:parse_filter",
    "whitevec.index.lexical:LexicalIndex",
    "whitevec.index:FaissStore",
    "whitevec.index:Retriever",
    "whitevec.encoders.models:resolve_model",
    "whitevec.encoders.models:DEFAULT_MODEL",
    "whitevec.encoders.protocol:known_token_mask",
    "whitevec.encoders.loading:load_encoder",
    "whitevec.encoders.static:StaticEncoder",
    "whitevec.encoders.static_format:StaticTable",
    "whitevec.encoders.tokenization:count_model_frequencies",
    "whitevec.encoders.token_weights:TokenWeighting",
    "whitevec.encoders:DEFAULT_MODEL",
    "whitevec.st_modules:LayerMeanPooling",
)
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80

# Floor of each part (a package, or one module of a package when its modules stand on different floors; the
# longest name that matches decides): a module may import only its own floor or lower ones.
FLOORS = {
    "errors": 0,
    "_version": 0,
    "utils": 1,
    "encoders.protocol": 1,
    "encoders.token_pooling": 1,
    "encoders.static_format": 1,
    "encoders.models": 2,
    "datasets": 2,
    "preflight": 3,
    "encoders": 3,
    "transforms": 3,
    "export.st_modules": 3,
    "st_modules": 3,
    "index": 4,
    "export": 4,
    "distill": 4,
    "evaluation": 5,
    "diagnostics": 5,
    "tuning": 5,
    "engines": 5,
    "service": 6,
    "integrations": 6,
    "workflows": 6,
    "cli": 7,
}


def _python_files() -> Iterator[Path]:
    for folder in ("src", "tests", "benchmarks", "tools", "docs/hooks"):
        for file in (ROOT / folder).rglob("*.py"):
            if "fixtures" not in file.relative_to(ROOT).parts:
                yield file


def _module_name(file: Path) -> str:
    base = ROOT / "src" if file.is_relative_to(ROOT / "src") else ROOT
    parts = file.relative_to(base).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts).replace("/", ".")


def _imported_names(file: Path, name: str) -> Iterator[str]:
    """Every dotted name ``file`` imports (module level or inside functions), relative imports resolved."""
    is_package = file.name == "__init__.py"
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                module = ".".join([*base[: len(base) - node.level + 1], *([module] if module else [])])
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def _resolve(target: str, importer: Path, modules: dict[str, Path]) -> str | None:
    """The repository module ``target`` names: itself, the longest module it starts with, or a script's sibling
    imported by bare name (benchmark scripts put their own folder on sys.path)."""
    candidates = [target]
    sibling = importer.parent / f"{target.split('.')[0]}.py"
    # Only scripts (outside src/, whose modules import absolutely) reach a sibling by bare name.
    if not importer.is_relative_to(SRC) and sibling.exists() and target.split(".")[0] not in modules:
        candidates.append(_module_name(sibling) + target[len(target.split(".")[0]) :])
    for candidate in candidates:
        while candidate:
            if candidate in modules:
                return candidate
            candidate = candidate.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(file): file for file in _python_files()}
    graph: dict[str, set[str]] = {}
    for name, file in files.items():
        targets = {_resolve(target, file, files) for target in _imported_names(file, name)}
        graph[name] = {target for target in targets if target and target != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def repository_graph() -> dict[str, set[str]]:
    """The import graph, parsed once for the tests that read it (about a second of parsing each time)."""
    return import_graph()


def test_the_repository_has_no_import_circle(repository_graph: dict[str, set[str]]) -> None:
    """Library, tests, benchmarks and tools: no module reaches itself through its imports."""
    assert circles(repository_graph) == []


def test_the_circle_finder_finds_a_circle_through_three_modules() -> None:
    # Guards the guard: a finder that never reports would make the test above pass on anything.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_lower_floors_never_import_higher_ones(repository_graph: dict[str, set[str]]) -> None:
    def floor(module: str) -> int:
        parts = module.split(".")[1:]
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in FLOORS:
                return FLOORS[".".join(parts[:end])]
        raise AssertionError(f"{module}: give its part a floor in FLOORS (and a line in ARCHITECTURE.md)")

    library = {name: targets for name, targets in repository_graph.items() if name.startswith("whitevec.")}
    upward = sorted(
        f"{a} -> {b}" for a, targets in library.items() for b in targets if b != "whitevec" and floor(b) > floor(a)
    )
    assert upward == []


def _unit(module: str) -> str:
    """What the package test compares: a module's package (``whitevec.index.faiss``); a top-level module
    (``whitevec.errors``) and a package's ``__init__`` stand for themselves."""
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    return module if module.count(".") == 1 or not path.exists() else module.rpartition(".")[0]


def package_graph(graph: dict[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    """The library's packages and which import which, each edge with the module imports behind it."""
    packages: dict[str, dict[str, list[str]]] = {}
    for a, targets in graph.items():
        if not a.startswith("whitevec"):
            continue
        for b in targets:
            if b.startswith("whitevec") and _unit(a) != _unit(b):
                packages.setdefault(_unit(a), {}).setdefault(_unit(b), []).append(f"{a} -> {b}")
    return packages


def test_packages_import_each_other_one_way_only(repository_graph: dict[str, set[str]]) -> None:
    """Module circles aside, no two packages reach each other (``index/`` and a sub-package of it count as two)."""
    packages = package_graph(repository_graph)
    found = circles({name: set(targets) for name, targets in packages.items()})
    behind = [edge for circle in found for a in circle for b in circle for edge in packages.get(a, {}).get(b, [])]
    assert found == [], behind


def test_the_package_test_finds_a_circle_between_packages() -> None:
    graph = {"whitevec.index.retriever": {"whitevec.index.faiss.store"}, "whitevec.index.faiss.store": set()}
    graph["whitevec.index.faiss.files"] = {"whitevec.index.build"}
    found = circles({a: set(b) for a, b in package_graph(graph).items()})
    assert found == [["whitevec.index", "whitevec.index.faiss"]]


def test_no_generic_part_of_the_index_imports_a_backend(repository_graph: dict[str, set[str]]) -> None:
    """The retriever, its writes, the build and every sub-package but the backends' own reach a backend only
    through the registries of ``index/stores/`` (by name, on first use)."""
    generic = [
        name for name in repository_graph if name.startswith("whitevec.index") and not name.startswith(BACKENDS)
    ]
    reaching = sorted(f"{a} -> {b}" for a in generic for b in repository_graph[a] if b.startswith(BACKENDS))
    assert reaching == []


def test_import_paths_documented_before_the_move_still_import() -> None:
    import importlib

    missing = []
    for path in DOCUMENTED_PATHS:
        module, name = path.split(":")
        if not hasattr(importlib.import_module(module), name):
            missing.append(path)
    assert missing == []


def test_no_folder_holds_more_than_a_dozen_modules() -> None:
    crowded = {
        str(folder.relative_to(ROOT)): count
        for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__")]
        if folder != PACKAGE
        and (count := len([f for f in folder.glob("*.py") if f.name != "__init__.py"])) > MAX_FOLDER_MODULES
    }
    assert crowded == {}


def test_the_top_level_stays_small() -> None:
    modules = sorted(file.stem for file in PACKAGE.glob("*.py") if file.name != "__init__.py")
    assert len(modules) <= MAX_TOP_LEVEL_MODULES, modules


def test_no_source_file_is_too_long() -> None:
    long = {
        str(file.relative_to(ROOT)): lines
        for file in PACKAGE.rglob("*.py")
        if (lines := file.read_text(encoding="utf-8").count("\n")) > MAX_FILE_LINES
    }
    assert long == {}


def test_no_function_is_too_long() -> None:
    long = {}
    for file in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{file.relative_to(ROOT)}:{node.name}"] = length
    assert long == {}


def test_no_tracked_file_keeps_merge_conflict_markers() -> None:
    # ARCHITECTURE.md once kept a merge's <<<<<<< / >>>>>>> lines for a session, unseen by every other check.
    root = SRC.parent
    listed = subprocess.run(
        ["git", "ls-files", "-z", "*.md", "*.py", "*.toml", "*.yml", "*.yaml", "*.cfg", "*.txt", "Makefile"],
        cwd=root,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    marker = re.compile(r"^(<{7}|>{7})( |$)", re.MULTILINE)
    kept = [
        name
        for name in listed.stdout.decode().split("\0")
        if name and (root / name).is_file() and marker.search((root / name).read_text(errors="replace"))
    ]
    assert kept == []


# ---- benchmarks/: scripts share code only through benchmarks.common --------------------------------------------
BENCHMARKS = SRC.parent / "benchmarks"
COMMON = "benchmarks.common"


def _benchmark_files() -> list[Path]:
    return sorted(path for path in BENCHMARKS.rglob("*.py") if "peers" not in path.relative_to(BENCHMARKS).parts)


def _whitevec_module(name: str) -> bool:
    """Whether ``name`` (``whitevec.x.y``) is a module or package of src/whitevec."""
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _benchmark_imports(file: Path) -> tuple[set[str], set[str]]:
    """What a benchmark file imports, at module level or in a function: the module names as written (a script
    reaches another as ``bench_x`` after a sys.path insert of its folder, or as ``benchmarks.x`` after one of the
    repository root; ``from benchmarks.y import x`` counts as ``benchmarks.y.x`` too), and the private whitevec
    names it uses (``from whitevec.x import _y``, ``whitevec.x._y``, or ``_y`` of a whitevec module it
    imported)."""
    tree = ast.parse(file.read_text(encoding="utf-8"))
    modules: set[str] = set()
    private: set[str] = set()
    bound: dict[str, str] = {}  # a local name -> the whitevec module it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                modules.add(alias.name)
                if alias.name.startswith("whitevec"):  # import whitevec.x binds whitevec; ... as y binds y
                    bound[alias.asname or "whitevec"] = alias.name if alias.asname else "whitevec"
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules.add(node.module)
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if node.module.split(".")[0] == "benchmarks":
                    modules.add(full)
                if node.module.startswith("whitevec"):
                    if alias.name.startswith("_"):
                        private.add(full)
                    elif _whitevec_module(full):
                        bound[alias.asname or alias.name] = full
    private |= {name for name in modules if name.startswith("whitevec") and "._" in name}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            value = node.value
            dotted = []
            while isinstance(value, ast.Attribute):
                dotted.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                private.add(".".join([bound[value.id], *dotted, node.attr]))
    return modules, private


def test_benchmark_scripts_share_code_only_through_the_common_helper() -> None:
    """Issue 38: maintained benchmarks, page generators and investigations import no other script of benchmarks/
    (what they share is in benchmarks.common, imported by that name; a script another one must run is run by
    path), nothing from tests/, and no private name of the library."""
    stems = {path.stem for path in _benchmark_files()}
    found = []
    for file in _benchmark_files():
        where = file.relative_to(BENCHMARKS.parent).as_posix()
        modules, private = _benchmark_imports(file)
        for name in sorted(modules):
            top = name.split(".")[0]
            if top in stems or (top == "benchmarks" and name != "benchmarks" and not name.startswith(COMMON)):
                found.append(f"{where} imports the script {name}")
            elif top == "tests":
                found.append(f"{where} imports {name} from the tests")
        found += [f"{where} uses the private {name}" for name in sorted(private)]
    assert found == []
