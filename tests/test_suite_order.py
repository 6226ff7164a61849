"""The order `make test`'s two workers take the files in (tests/conftest.py): the longest files first."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests import conftest


def test_the_longest_files_are_files_of_the_suite() -> None:
    here = Path(__file__).parent
    assert [name for name in conftest.LONGEST_FILES if not (here / name).is_file()] == []
    assert len(set(conftest.LONGEST_FILES)) == len(conftest.LONGEST_FILES)


def test_the_longest_files_go_first_and_the_rest_keep_their_order() -> None:
    first, second = conftest.LONGEST_FILES[:2]
    files = ["test_a.py", second, "test_b.py", first]
    assert conftest.longest_first(files) == [first, second, "test_a.py", "test_b.py"]


def test_whole_files_are_handed_out_in_collection_order() -> None:
    """pytest-xdist's default, files by their number of tests, would undo the order above."""
    for dist, reorder in (("loadfile", False), ("load", True), ("no", True)):
        config: Any = SimpleNamespace(option=SimpleNamespace(dist=dist, loadscopereorder=True))
        conftest.pytest_configure(config)
        assert config.option.loadscopereorder is reorder, dist


def test_a_worker_collects_the_longest_files_first() -> None:
    first = conftest.LONGEST_FILES[0]
    names = ["test_a.py", first, "test_a.py", first]
    items: Any = [SimpleNamespace(path=Path("tests") / name, name=str(i)) for i, name in enumerate(names)]
    conftest.pytest_collection_modifyitems(SimpleNamespace(), items)  # one process: as collected
    assert [item.name for item in items] == ["0", "1", "2", "3"]
    conftest.pytest_collection_modifyitems(SimpleNamespace(workerinput={}), items)
    assert [item.name for item in items] == ["1", "3", "0", "2"]
