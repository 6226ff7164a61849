"""A build killed mid-way (SIGKILL, SIGINT) leaves the older index at the same path whole and loadable."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.index_helpers import HashEncoder, sentences
from whitevec.errors import DataNotFoundError
from whitevec.index import Document, Retriever
from whitevec.utils import io as _io

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# The child builds a different index over OUT; once the new documents are written inside the temporary folder
# (so the build is truly half done) it says READY and waits to be killed.
CHILD = textwrap.dedent(
    """
    import signal, sys, time
    # A shell without job control starts background commands with SIGINT ignored, and Python then never raises
    # KeyboardInterrupt: a `make test &` would leave this child asleep. Take SIGINT as an interactive run does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, sys.argv[1])
    import whitevec.index.build as build
    from tests.index_helpers import HashEncoder
    from whitevec.index import Document, Retriever

    out = sys.argv[2]
    original = build.write_docs

    def slow_write_docs(path, docs, start_row=0):
        n = original(path, docs, start_row)
        print("READY", path.parent, flush=True)
        time.sleep(120)
        return n

    build.write_docs = slow_write_docs
    docs = [Document(f"new-{i}", f"a dog running {i}") for i in range(30)]
    Retriever.build(docs, out, encoder=HashEncoder(), transform="none", metric="l2")
    print("FINISHED", flush=True)
    """
)


@pytest.mark.slow
def test_killed_build_leaves_old_index(tmp_path: Path) -> None:
    encoder: Any = HashEncoder()  # torch-free, so the child processes start fast
    docs = [Document(f"old-{i}", t) for i, t in enumerate(sentences(40, seed=5))]
    queries = sentences(5, seed=6, length=4)
    first = tmp_path / "sigkill" / "idx"
    Retriever.build(docs, first, encoder=encoder, transform="whitening-16")
    expected = Retriever.load(first, encoder=encoder).search(queries, k=5)
    second = tmp_path / "sigint" / "idx"
    shutil.copytree(first, second)

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # stderr goes to a file: a pipe nobody reads could fill and block the child.
    errors = {sig: (tmp_path / f"child-{sig.name}.err") for sig in (signal.SIGKILL, signal.SIGINT)}
    children = {
        sig: subprocess.Popen(
            [sys.executable, str(script), str(Path(__file__).parents[1]), str(out)],
            stdout=subprocess.PIPE,
            stderr=errors[sig].open("w"),
            text=True,
            env=env,
        )
        for sig, out in ((signal.SIGKILL, first), (signal.SIGINT, second))
    }
    for sig, child in children.items():
        assert child.stdout is not None
        line = child.stdout.readline()  # blocks until the build is inside its temporary folder
        assert line.startswith("READY"), errors[sig].read_text()
        temp = Path(line.split(maxsplit=1)[1].strip())
        assert temp.name.startswith(".idx.") and temp.name.endswith(".tmp") and temp.is_dir()
        assert (temp / "docs.sqlite").is_file() and not (temp / "manifest.json").exists()
        child.send_signal(sig)
        child.wait(timeout=60)
        assert child.returncode != 0
        out = first if sig == signal.SIGKILL else second
        # the old index is intact: loads (checksums verified) and answers exactly as before
        loaded = Retriever.load(out, encoder=encoder)
        assert loaded.count == 40 and loaded.manifest["transform"]["spec"] == "whitening-16"
        assert loaded.search(queries, k=5) == expected
        leftovers = [p for p in out.parent.iterdir() if p.name != "idx"]
        if sig == signal.SIGINT:
            assert leftovers == []  # KeyboardInterrupt ran the cleanup
        else:
            # SIGKILL cannot be cleaned up after; the half-written folder is never taken for an index
            assert leftovers == [temp]
            with pytest.raises(DataNotFoundError, match="not a whitevec index"):
                Retriever.load(temp, encoder=encoder)
            # The next write at that path sees the dead writer's pid in the name and removes its leftover.
            Retriever.build(docs, out, encoder=encoder, transform="whitening-16")
            assert [p.name for p in out.parent.iterdir()] == ["idx"]


def test_stale_temporaries_are_removed_only_for_dead_local_writers(tmp_path: Path) -> None:
    target = tmp_path / "idx"
    target.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    prefix = _io._prefix(target)  # .idx.HOST-PID.
    host_part = prefix[len(".idx.") :].rsplit("-", 1)[0]
    stale = tmp_path / f".idx.{host_part}-{dead_pid}.abc.tmp"
    live = tmp_path / f".idx.{host_part}-{os.getpid()}.def.tmp"
    other_host = tmp_path / f".idx.elsewhere-{dead_pid}.ghi.tmp"
    unknown = tmp_path / ".idx.jkl.tmp"  # written by an older whitevec: owner unknown
    for folder in (stale, live, other_host, unknown):
        folder.mkdir()
    removed = _io.remove_stale_temporaries(target)
    assert removed == [stale] and not stale.exists()
    assert live.exists() and other_host.exists() and unknown.exists()
    # A replace killed between its two renames: the target is gone and the old folder sits in a .old folder.
    shutil.rmtree(target)
    moved = tmp_path / f".idx.{host_part}-{dead_pid}.mno.old"
    (moved / "previous").mkdir(parents=True)
    (moved / "previous" / "manifest.json").write_text("{}")
    _io.remove_stale_temporaries(target)
    assert (target / "manifest.json").read_text() == "{}" and not moved.exists()
