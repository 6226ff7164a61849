"""The layering ARCHITECTURE.md describes, checked on the source: no module imports one that imports it back
(lazy imports inside functions count too), and the lower floors never import the higher ones."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "whitevec"

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
    "encoders.model_identity": 2,
    "encoders.st_config": 2,
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
    "workflows": 6,
    "cli": 7,
}


def _modules() -> dict[str, Path]:
    found = {}
    for file in PACKAGE.rglob("*.py"):
        parts = file.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = file
    return found


def _imports(name: str, file: Path, modules: dict[str, Path]) -> set[str]:
    """Every whitevec module ``name`` imports, at module level or inside a function."""
    is_package = file.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets.add(module)
            targets |= {f"{module}.{alias.name}" for alias in node.names}
    resolved = set()
    for target in targets:
        while target not in modules and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in modules and target != name:
            resolved.add(target)
    return resolved


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, file, modules) for name, file in modules.items()}


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = _graph()
    two_way = sorted({tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph[b]})
    assert two_way == []


def test_lower_floors_never_import_higher_ones() -> None:
    def floor(module: str) -> int:
        parts = module.split(".")[1:]
        for end in range(len(parts), 0, -1):
            if ".".join(parts[:end]) in FLOORS:
                return FLOORS[".".join(parts[:end])]
        raise AssertionError(f"{module}: give its part a floor in FLOORS (and a line in ARCHITECTURE.md)")

    upward = sorted(
        f"{a} -> {b}" for a, targets in _graph().items() if a != "whitevec" for b in targets if floor(b) > floor(a)
    )
    assert upward == []


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


def test_the_common_helper_imports_one_way() -> None:
    """benchmarks.common's modules import no script and never one another both ways."""
    graph = {
        f"{COMMON}.{path.stem}": {name for name in _benchmark_imports(path)[0] if name.startswith(f"{COMMON}.")}
        for path in (BENCHMARKS / "common").glob("*.py")
        if path.stem != "__init__"
    }
    two_way = {tuple(sorted((a, b))) for a, targets in graph.items() for b in targets if a in graph.get(b, ())}
    assert sorted(two_way) == []
