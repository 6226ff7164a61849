"""requirements.lock holds: every requirement `make install` installs is pinned there inside pyproject's range (a
dependency added without `make lock` fails, naming it), and a venv that make installed from it holds exactly the
locked set. `python tests/test_lock.py` prints how the running environment differs from the lock (`make
test-latest` uses it to show the drift)."""

from __future__ import annotations

import re
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements.lock"
# make copies the lock to this file in a venv it installed from the lock (Makefile: $(VENV)/.locked).
LOCKED_MARKER = Path(sys.prefix) / ".locked"
# The installer and the project itself: in every venv, pinned by no lock.
UNPINNED = {"pip", "whitevec"}
# What `torch` from PyPI's metadata brings on Linux; the CPU wheel needs none of it.
CUDA_PACKAGE = re.compile(r"^(nvidia-.*|triton|cuda-.*)$")


def read_lock(text: str) -> dict[str, Version]:
    """Canonical name -> pinned version, for the lock's lines whose environment marker holds here."""
    pins = {}
    for raw_line in text.splitlines():
        line = raw_line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):  # comments and pip options (--index-url ...)
            continue
        requirement = Requirement(line)
        specifiers = list(requirement.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==":
            raise ValueError(f"requirements.lock: {line!r} is not an exact pin")
        if requirement.marker is None or requirement.marker.evaluate():
            pins[canonicalize_name(requirement.name)] = Version(specifiers[0].version)
    return pins


def installed_versions() -> dict[str, Version]:
    """Canonical name -> version of every distribution installed in the interpreter's site-packages.

    Only there, not on all of sys.path: importing ray puts its vendored copies (ray/thirdparty_files: psutil,
    colorama) on sys.path, so the whole path would differ between a run before and after the Ray tests."""
    site_packages = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    versions = {}
    for distribution in metadata.distributions(path=site_packages):
        name = distribution.metadata["Name"]
        if name:  # a half-removed distribution has no metadata
            versions[canonicalize_name(name)] = Version(distribution.version)
    return versions


def same_release(locked: Version, installed: Version) -> bool:
    """A local label (`+cpu`) only counts when both versions carry one, as `==2.13.0` accepts `2.13.0+cpu`."""
    if locked.public != installed.public:
        return False
    return locked.local is None or installed.local is None or locked.local == installed.local


def drift(pins: dict[str, Version], installed: dict[str, Version]) -> list[str]:
    """One line per package where the installed set and the lock differ."""
    lines = []
    for name in sorted(pins.keys() | installed.keys()):
        locked, have = pins.get(name), installed.get(name)
        if locked is None:
            if name not in UNPINNED:
                lines.append(f"{name}: {have} installed, not in requirements.lock")
        elif have is None:
            lines.append(f"{name}: requirements.lock pins {locked}, not installed")
        elif not same_release(locked, have):
            lines.append(f"{name}: requirements.lock pins {locked}, {have} installed")
    return lines


def make_variable(name: str) -> str:
    """The value the Makefile gives `name` (`NAME := value` or `NAME ?= value`)."""
    match = re.search(rf"^{name}\s*[:?]?=\s*(\S.*)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert match, f"Makefile sets no {name}"
    return match.group(1).strip()


def make_installs(pyproject: dict[str, Any], extras: list[str]) -> list[tuple[str, str]]:
    """(requirement, where pyproject states it) for all `make install` installs: the package's dependencies, those
    of `extras`, and the build backend (make builds the package without isolation, with the locked one)."""
    project = pyproject["project"]
    wanted = [(requirement, "build-system") for requirement in pyproject["build-system"]["requires"]]
    wanted += [(requirement, "dependencies") for requirement in project["dependencies"]]
    for extra in extras:
        wanted += [(requirement, f"extra {extra!r}") for requirement in project["optional-dependencies"][extra]]
    return wanted


def unlocked_requirements(wanted: list[tuple[str, str]], pins: dict[str, Version]) -> list[str]:
    """One line per requirement the pins miss or hold outside its range."""
    problems = []
    for text, where in wanted:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        if name not in pins:
            problems.append(f"{name} ({where}): not in requirements.lock")
        elif not requirement.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{name} ({where}): pyproject wants {requirement.specifier}, lock pins {pins[name]}")
    return problems


def lock_extras() -> list[str]:
    return make_variable("LOCK_EXTRAS").split(",")


def test_lock_was_compiled_for_the_extras_make_installs() -> None:
    header = re.search(r"--extra=(\S+)", LOCK.read_text())
    assert header, "requirements.lock names no --extra in its header: run `make lock`"
    assert sorted(header.group(1).split(",")) == sorted(lock_extras()), "run `make lock`"


def test_every_requirement_is_locked_inside_its_range() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    problems = unlocked_requirements(make_installs(pyproject, lock_extras()), read_lock(LOCK.read_text()))
    assert not problems, "run `make lock`:\n" + "\n".join(problems)


PEERS_LOCK = REPO / "benchmarks" / "peers" / "requirements.lock"
PEERS = ("txtai", "lancedb", "chromadb", "qdrant-edge-py")


def test_the_peers_lock_holds_the_bench_extra_and_make_install_holds_no_peer() -> None:
    """The peers of docs/results/peers.md live in pyproject's `bench` extra, locked apart (`make lock-peers`) for
    `.venv-peers`; `make install`'s lock and extras never name them."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    problems = unlocked_requirements(make_installs(pyproject, ["bench"]), read_lock(PEERS_LOCK.read_text()))
    assert not problems, "run `make lock-peers`:\n" + "\n".join(problems)
    assert "bench" not in lock_extras()
    assert not set(map(canonicalize_name, PEERS)) & read_lock(LOCK.read_text()).keys()


def test_a_requirement_added_without_relocking_is_named() -> None:
    pyproject = {
        "build-system": {"requires": ["setuptools>=77"]},
        "project": {
            "dependencies": ["numpy>=1.24"],
            "optional-dependencies": {"dev": ["pytest>=8", "Hypo_Thesis>=6"], "bench": ["wordfreq>=3"]},
        },
    }
    pins = {"setuptools": Version("84.2.1"), "numpy": Version("1.23.5"), "pytest": Version("9.2.0")}
    assert unlocked_requirements(make_installs(pyproject, ["dev"]), pins) == [
        "numpy (dependencies): pyproject wants >=1.24, lock pins 1.23.5",
        "hypo-thesis (extra 'dev'): not in requirements.lock",
    ]


def test_lock_pins_the_cpu_torch_without_cuda_packages() -> None:
    pins = read_lock(LOCK.read_text())
    torch_pin = Requirement(make_variable("TORCH_PIN").strip("'\""))
    assert torch_pin.specifier.contains(pins["torch"]), f"lock pins torch {pins['torch']}, make wants {torch_pin}"
    assert pins["torch"].local == "cpu", f"torch {pins['torch']} is not the CPU wheel"
    assert not [name for name in pins if CUDA_PACKAGE.match(name)]


def test_read_lock_keeps_pins_whose_marker_holds_and_refuses_ranges() -> None:
    text = "# header\nTyping_Extensions==4.16.0\n    # via x\nuvloop==0.23.0 ; sys_platform == 'nowhere'\n"
    assert read_lock(text) == {"typing-extensions": Version("4.16.0")}
    with pytest.raises(ValueError, match="not an exact pin"):
        read_lock("torch>=2.2\n")


def test_drift_names_each_package_that_differs() -> None:
    pins = {"torch": Version("2.13.0+cpu"), "numpy": Version("2.4.6"), "rich": Version("15.0.0")}
    installed = {
        "torch": Version("2.13.0"),  # the same release without its local label
        "numpy": Version("2.4.5"),
        "nvidia-cublas": Version("13.1"),
        "pip": Version("26.3"),
        "whitevec": Version("0.1.0"),
    }
    assert drift(pins, installed) == [
        "numpy: requirements.lock pins 2.4.6, 2.4.5 installed",
        "nvidia-cublas: 13.1 installed, not in requirements.lock",
        "rich: requirements.lock pins 15.0.0, not installed",
    ]
    assert drift({"torch": Version("2.13.0+cpu")}, {"torch": Version("2.13.0+cu130")}) == [
        "torch: requirements.lock pins 2.13.0+cpu, 2.13.0+cu130 installed"
    ]


def test_installed_packages_equal_the_lock() -> None:
    if not LOCKED_MARKER.exists():
        pytest.skip(f"not run from a venv `make install` built from requirements.lock (no {LOCKED_MARKER})")
    differences = drift(read_lock(LOCK.read_text()), installed_versions())
    if differences and LOCKED_MARKER.read_text() != LOCK.read_text():
        differences.append("requirements.lock changed since this venv was installed: run `make install`")
    assert not differences, "\n".join(differences)


if __name__ == "__main__":
    differences = drift(read_lock(LOCK.read_text()), installed_versions())
    print(f"{sys.prefix}: {len(differences)} packages differ from requirements.lock")
    print("\n".join(differences))
