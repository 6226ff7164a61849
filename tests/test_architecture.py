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
