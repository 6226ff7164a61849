"""Writes killed at random moments (SIGKILL): after each kill the index loads with its checksums, holds every
acknowledged write, and holds either the state after the last acknowledged write or the state after the write in
flight; no duplicate or resurrected id; dense, lexical and hybrid searches work (issue 40's fault-injection
target).

A worker process runs a seeded loop of adds, deletes, upserts and compactions on a flat float32 index with a BM25
part, printing ``BEGIN {op}`` before each call and ``ACK`` after it returns, until it is killed. In 16 of every 20
rounds the worker kills itself during a write of one kind (each of the four in turn) at one of four points: just
after its folder swap, at the first file-system step once the swap began, at a random step (an fsync, rename,
replace, link, unlink or the swap), just before the swap; in the other 4 the test kills it a random moment
(0-250 ms) into a random write. Workers are forked from one server process that imported whitevec once, so a
round costs a few writes, not an interpreter start. ``WHITEVEC_FAULT_KILLS`` (default 20) and
``WHITEVEC_FAULT_SEED`` set the rounds and the seed (benchmarks/maintained/bench_updates.py runs 60); a failure
names the seed, the round and its kill plan.

What it catches, tried by breaking the code on purpose: a swap that removes the old folder before renaming the
new one in (the index does not load), an upsert written as two versions (duplicate ids), a tombstone file
rewritten through a hard link shared with the live version (checksum). Not a skipped fsync: SIGKILL leaves the
page cache, so only a power cut would show that.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest

import whitevec.utils.io as wio
from tests.index_helpers import WORDS, HashEncoder, sentences
from whitevec.errors import WhitevecError
from whitevec.index import Document, Retriever

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

KILLS = int(os.environ.get("WHITEVEC_FAULT_KILLS", "20"))
SEED = int(os.environ.get("WHITEVEC_FAULT_SEED", "20261206"))
INITIAL_DOCS = 30
LETTERS = "bcdfghjklmnpqrtvwxz"  # no vowel, s or y: no stemmer rule turns one serial's word into another's


def word(serial: int) -> str:
    """A serial's own word, the last of each text: a lexical search for it finds that text alone."""
    out = "zq"
    while True:
        serial, digit = divmod(serial, len(LETTERS))
        out += LETTERS[digit]
        if not serial:
            return out


def text(rng: np.random.Generator, serial: int) -> str:
    return " ".join(rng.choice(WORDS, 6)) + " " + word(serial)


KINDS = ("add", "delete", "upsert", "compact")


def next_op(rng: np.random.Generator, live: dict[str, str], serial: int, prefer: str | None) -> tuple[str, Any]:
    """The worker's next write (half of them of the kind ``prefer``, when given), with serials ``serial ..
    serial + 4`` for its new ids and texts."""
    draw = rng.random()
    kind = next(k for k, share in zip(KINDS, (0.4, 0.65, 0.9, 1.0), strict=True) if draw < share)
    if prefer is not None and rng.random() < 0.5:
        kind = prefer
    if kind == "add" or len(live) < 10:
        ids = [f"d{serial + i}" for i in range(int(rng.integers(1, 6)))]
        return "add", {d: text(rng, serial + i) for i, d in enumerate(ids)}
    held = sorted(live)
    if kind == "delete":
        return "delete", [str(d) for d in rng.choice(held, int(rng.integers(1, 5)), replace=False)]
    if kind == "upsert":
        ids = [str(d) for d in rng.choice(held, int(rng.integers(1, 4)), replace=False)] + [f"d{serial + 3}"]
        return "upsert", {d: text(rng, serial + i) for i, d in enumerate(ids)}
    return "compact", None


class Fatal:
    """Where a worker kills itself (SIGKILL), during a write of kind ``kind``: at its ``n``-th file-system step
    (``point="step"``: an fsync, rename, replace, link or unlink, or the folder swap); just before or just after
    its ``n``-th folder swap (``"swap-before"``, ``"swap-after"``); or at the first step once that swap began
    (``"swap-inside"``: after the first step taken once that swap began: inside a swap that takes steps, else
    the first one after it). Only writes of that kind
    count; ``n`` past one write's steps or swaps carries into the next write of that kind."""

    def __init__(self, kind: str, point: str, n: int) -> None:
        self.kind, self.point, self.n = kind, point, n
        self.armed = False  # a write of ``kind`` is in flight
        self.steps = self.swaps = 0
        self.inside = False  # the swap of a "swap-inside" kill has begun
        for name in ("fsync", "replace", "rename", "link", "unlink"):
            setattr(os, name, self.wrap(getattr(os, name), swap=False))
        wio.swap_in = self.wrap(wio.swap_in, swap=True)  # type: ignore[attr-defined]

    def due(self, swap: bool) -> tuple[bool, bool]:
        """Count this step; whether to die before taking it, and whether after."""
        self.steps += 1
        self.swaps += swap
        nth_swap = swap and self.swaps == self.n
        if self.point == "step":
            return self.steps == self.n, False
        if self.point == "swap-inside":
            self.inside = self.inside or nth_swap
            return False, self.inside and not nth_swap
        return self.point == "swap-before" and nth_swap, self.point == "swap-after" and nth_swap

    def wrap(self, call: Any, *, swap: bool) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            before, after = self.due(swap) if self.armed else (False, False)
            if before:
                os.kill(os.getpid(), signal.SIGKILL)
            out = call(*args, **kwargs)
            if after:
                os.kill(os.getpid(), signal.SIGKILL)
            return out

        return wrapped


def work(request: dict[str, Any]) -> None:
    """The worker: write to the index in a seeded loop until killed, saying each write before and after."""
    fatal = Fatal(**request["fatal"]) if request["fatal"] else None
    say(f"PID {os.getpid()}")
    rng = np.random.default_rng(request["seed"])
    live: dict[str, str] = json.loads(Path(request["live"]).read_text())
    serial = int(request["serial"])
    retriever = Retriever.load(request["index"], encoder=HashEncoder())  # type: ignore[arg-type]
    for _ in range(300):  # a worker the plan never kills ends (and the test fails) rather than hangs
        kind, arg = next_op(rng, live, serial, None if fatal is None else fatal.kind)
        serial += 5
        say(f"BEGIN {json.dumps([kind, arg])}")
        if fatal is not None:
            fatal.armed = kind == fatal.kind
        if kind == "add":
            retriever.add([Document(d, t) for d, t in arg.items()])
            live.update(arg)
        elif kind == "upsert":
            retriever.upsert([Document(d, t) for d, t in arg.items()])
            live.update(arg)
        elif kind == "delete":
            result = retriever.delete(arg)
            assert result.deleted == len(arg) and not result.missing, result
            for doc_id in arg:
                del live[doc_id]
        else:
            retriever.compact()
        say("ACK")


def say(line: str) -> None:
    """One line to the test, in one write (a large op's line is longer than a pipe writes whole: a kill can still
    cut it, and the reader knows a cut line by the server's ``EXIT`` that follows on a line of its own)."""
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), (line + "\n").encode("utf-8"))


# What each round kills: every kind of write at four points (just after its folder swap, inside the swap, a
# random step, just before the swap), then kills from this process a random moment into a random write.
PLANS: list[dict[str, Any] | None] = [
    {"kind": kind, "point": point}
    for point in ("swap-after", "swap-inside", "step", "swap-before")
    for kind in KINDS
] + [None] * 4


def serve() -> None:
    """The fork server: per request line on stdin, fork a worker; once it has died, print ``EXIT <status>``.
    The worker's lines (``PID``, ``BEGIN``, ``ACK``: each one write) and then the server's ``EXIT`` share
    stdout, in that order; ``EXIT`` starts a line of its own, after the end of a line a kill cut short."""
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            try:
                work(json.loads(line))
            except BaseException:
                traceback.print_exc()
                sys.stderr.flush()
            os._exit(3)
        _, status = os.waitpid(pid, 0)
        print(f"\nEXIT {status}", flush=True)  # on a line of its own after a line the kill cut short


# whitevec is imported once, by the server; a worker forked from it starts in milliseconds.
SERVER = "import sys; sys.path.insert(0, sys.argv[1]); from tests.test_update_faults import serve; serve()"


@dataclass
class Round:
    """What one worker said before it died: the ops it began (in order) and how many returned."""

    ops: list[tuple[str, Any]] = field(default_factory=list)
    acked: int = 0
    pid: int | None = None
    status: int | None = None


def applied(live: dict[str, str], ops: list[tuple[str, Any]]) -> dict[str, str]:
    """``live`` after ``ops``."""
    out = dict(live)
    for kind, arg in ops:
        if kind in ("add", "upsert"):
            out.update(arg)
        elif kind == "delete":
            for doc_id in arg:
                del out[doc_id]
    return out


def kill_step(point: str, number: int, rng: np.random.Generator) -> int:
    """Which step or swap of the plan's writes the kill lands at: any of the first 59 steps; the first swap in
    the first pass over the plans (the end of a write's own version), then the first or second (a write's
    merge, or the next write of that kind)."""
    if point == "step":
        return int(rng.integers(1, 60))  # a write takes 20 to 200 steps
    return 1 if number < len(PLANS) else int(rng.integers(1, 3))


def read_round(out: IO[str], kill_after: int | None, delay_s: float) -> Round:
    """Read one worker's lines up to the server's ``EXIT``; with ``kill_after``, SIGKILL the worker ``delay_s``
    after it began its write number ``kill_after`` (counted from 0)."""
    seen = Round()
    for line in out:
        tag, _, rest = line.rstrip("\n").partition(" ")
        if tag == "PID":
            seen.pid = int(rest)
        elif tag == "BEGIN":
            try:
                op = json.loads(rest)
            except json.JSONDecodeError:  # cut by the kill while being said: its write never began
                continue
            seen.ops.append(tuple(op))
            if kill_after is not None and len(seen.ops) == kill_after + 1 and seen.pid is not None:
                time.sleep(delay_s)  # where in the write the kill lands; the checks hold wherever it does
                with contextlib.suppress(ProcessLookupError):  # it died on its own: EXIT says how
                    os.kill(seen.pid, signal.SIGKILL)
        elif tag == "ACK":
            seen.acked += 1
        elif tag == "EXIT":
            seen.status = int(rest)
            return seen
    raise AssertionError("the fork server ended")


def loaded_documents(index: Path, where: str) -> tuple[dict[str, str], Retriever]:
    """The index's documents as a search of every one finds them (every id once), and the loaded index."""
    try:
        retriever = Retriever.load(index, encoder=HashEncoder())  # type: ignore[arg-type]  # checksums verified
    except WhitevecError as exc:
        raise AssertionError(f"{where}: the index does not load: {exc}") from exc
    if retriever.count == 0:
        return {}, retriever
    hits = retriever.search(["any query at all"], k=retriever.count, mode="dense")[0]
    found = {hit.id: hit.text for hit in hits}
    assert len(hits) == retriever.count, f"{where}: a search of all {retriever.count} documents found {len(hits)}"
    assert len(found) == len(hits), f"{where}: duplicate ids in the index: {sorted(h.id for h in hits)}"
    return found, retriever


def check_searches(
    retriever: Retriever, live: dict[str, str], dead_words: list[str], rng: np.random.Generator, where: str
) -> None:
    """Each live document's own word finds it first (lexical, segment-local BM25); a word only deleted or
    replaced texts held finds nothing; a hybrid search answers with live documents."""
    for doc_id in rng.choice(sorted(live), min(5, len(live)), replace=False):
        hits = retriever.search([live[doc_id].split()[-1]], k=3, mode="lexical")[0]
        assert hits and hits[0].id == doc_id, f"{where}: the lexical search for {doc_id}'s word found {hits}"
    for word in rng.choice(dead_words, min(5, len(dead_words)), replace=False) if dead_words else []:
        hits = retriever.search([word], k=3, mode="lexical")[0]
        assert not list(hits), f"{where}: the word {word!r} of a deleted or replaced text found {hits}"
    if live:
        hybrid = retriever.search([next(iter(live.values()))], k=5, mode="hybrid")[0]
        assert hybrid and {hit.id for hit in hybrid} <= set(live), f"{where}: hybrid search found {hybrid}"


OUTCOMES = ("between writes", "in flight, applied", "in flight, not applied", "in flight, no change")


def outcome(seen: Round, found: dict[str, str], before: dict[str, str], after: dict[str, str]) -> str:
    """Where the kill landed, as the index tells: between two writes, or in one that did or did not take."""
    if seen.acked == len(seen.ops):
        return OUTCOMES[0]
    if before == after:  # a compaction, or a write that changed nothing
        return OUTCOMES[3]
    return OUTCOMES[1] if found == after else OUTCOMES[2]


def serial_after(ops: list[tuple[str, Any]], serial: int) -> int:
    """The next unused serial: the worker takes 5 per op, begun or not written."""
    return serial + 5 * (len(ops) + 1)


@pytest.mark.slow
def test_killed_writes_leave_acknowledged_and_whole_states(tmp_path: Path) -> None:
    rng = np.random.default_rng(SEED)
    index = tmp_path / "store" / "idx"
    texts = sentences(INITIAL_DOCS, seed=3)
    live = {f"d{i}": f"{t} {word(i)}" for i, t in enumerate(texts)}
    Retriever.build(
        [Document(d, t) for d, t in live.items()], index, encoder=HashEncoder(), transform="none", lexical="bm25"
    ).close()
    serial, generation = 1000, 0
    dead_words: list[str] = []  # the last words of texts deleted or replaced: no search may find them
    errors = tmp_path / "server.err"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(Path(__file__).parents[1])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors.open("w"),
        text=True,
        env=env,
    )
    assert server.stdin is not None and server.stdout is not None
    outcomes = dict.fromkeys(OUTCOMES, 0)
    try:
        for number in range(KILLS):
            (tmp_path / "live.json").write_text(json.dumps(live))
            plan = PLANS[number % len(PLANS)]
            fatal = None if plan is None else {**plan, "n": kill_step(plan["point"], number, rng)}
            where = f"seed {SEED}, round {number} ({fatal or 'killed from here'})"
            request = {
                "index": str(index),
                "live": str(tmp_path / "live.json"),
                "seed": int(rng.integers(2**31)),
                "serial": serial,
                "fatal": fatal,
            }
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            kill_after = None if fatal else int(rng.integers(0, 4))
            seen = read_round(server.stdout, kill_after, float(rng.uniform(0, 0.25)))
            assert seen.status is not None and os.WIFSIGNALED(seen.status), (
                f"{where}: the worker did not die by SIGKILL:\n{errors.read_text()}"
            )
            assert os.WTERMSIG(seen.status) == signal.SIGKILL, where
            before = applied(live, seen.ops[: seen.acked])
            after = applied(live, seen.ops[: seen.acked + 1])
            found, retriever = loaded_documents(index, where)
            with retriever:
                assert found in (before, after), (
                    f"{where}: {len(found)} documents, neither the {len(before)} after the last acknowledged write"
                    f" nor the {len(after)} after the one in flight ({seen.ops[seen.acked :][:1]}); extra "
                    f"{sorted(set(found.items()) - set(before.items()))[:5]}, missing "
                    f"{sorted(set(before.items()) - set(found.items()))[:5]}"
                )
                assert retriever.count == len(found), where
                assert int(retriever.manifest.get("generation", 0)) >= generation, where
                generation = int(retriever.manifest.get("generation", 0))
                written = {t for _, arg in seen.ops if isinstance(arg, dict) for t in arg.values()}
                gone = (written | set(live.values())) - set(found.values())
                dead_words = sorted({*dead_words, *(t.split()[-1] for t in gone)})
                check_searches(retriever, found, dead_words, rng, where)
            outcomes[outcome(seen, found, before, after)] += 1
            live, serial = found, serial_after(seen.ops, serial)
        server.stdin.close()
        server.wait(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    # The next write removes what the killed writers left beside the index.
    with Retriever.load(index, encoder=HashEncoder()) as retriever:
        retriever.add([Document("last", "a last document zqlast")])
    assert sorted(p.name for p in index.parent.iterdir()) == ["idx"], f"seed {SEED}: leftovers"
    print(f"seed {SEED}: {KILLS} kills, {outcomes}")


def test_a_line_the_kill_cut_short_is_an_op_that_never_began() -> None:
    """What a CI run met once: a worker killed while it said ``BEGIN`` left half a line, and the server's
    ``EXIT`` followed; the reader failed on the half line's JSON instead of seeing a write that never began."""
    out = io.StringIO('PID 7\nBEGIN ["add", {"d1": "a"}]\nACK\nBEGIN ["upsert", {"d2": "b\nEXIT 9\n')
    seen = read_round(out, None, 0.0)
    assert seen.ops == [("add", {"d1": "a"})] and seen.acked == 1 and seen.status == 9
