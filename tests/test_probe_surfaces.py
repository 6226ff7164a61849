"""The cross-surface probe of issue 49: odd filter expressions, odd add files, odd deletes, odd index paths and
odd documents, each tried as a new user and a hostile one would, on the three surfaces: Python (``Retriever``),
the CLI in-process (``whitevec.cli.main``: ``search --filter``, ``index add``, ``index delete``) and HTTP
(FastAPI's TestClient of the served app).

Each case must answer one line (a ``WhitevecError``; exit 2 and one ``whitevec: error:`` line; a 4xx whose
``detail`` is one line) or the right answer: a filter's hits equal to what an evaluator written here (plain
Python over the metadata dicts, the three-valued logic of ``whitevec.index.filters.language``) passes, and a
write's documents found in the index afterwards, exactly; a refused write leaves the index folder's bytes as they
were. The three surfaces must agree: all refuse (a filter: with the same line, where the HTTP schema does not
refuse first), or all answer the same. A case's one test names every surface that went wrong.

The index is built once (a tiny static encoder: no torch), and copied for each write. Documents carry integers
above 2^53 and 2^70 (which float64 cannot tell from their neighbours), floats, -0.0, strings with quotes and
unicode, booleans, null, lists, objects, and missing fields.
"""

from __future__ import annotations

import csv
import functools
import gzip
import io
import json
import math
import operator
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import whitevec.cli as cli
from tests.index_helpers import sentences
from tests.static_helpers import tiny_static_folder
from whitevec.datasets.retrieval import read_corpus_file
from whitevec.errors import WhitevecError
from whitevec.index import Document, Retriever, read_manifest

pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
from fastapi.testclient import TestClient

from whitevec.service.app import create_app
from whitevec.service.schemas import MAX_FILTER_CHARS
from whitevec.service.settings import ServeSettings

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

BIG = 2**53  # the first integer whose successor float64 cannot hold
HUGE = 2**70

# id -> metadata. Ids "1" and "2" are what a plain-text corpus's line numbers collide with.
METADATA: dict[str, dict[str, Any] | None] = {
    "d00": {"n": BIG + 1, "lang": "en", "draft": True, "x": 0.1},
    "d01": {"n": BIG, "lang": "fr", "draft": False, "x": -0.0},
    "d02": {"n": 1, "lang": "", "x": 1e300},
    "d03": {"n": HUGE, "lang": "it's", "x": 1e-300},
    "d04": {"n": HUGE + 1, "lang": "EN", "x": 2.5},
    "d05": {"n": -(BIG + 1), "lang": 'say "hi"', "draft": True},
    "d06": {"n": 2.5, "lang": "日本語"},
    "d07": {"n": None, "note": None},
    "d08": {"n": "12", "lang": "en "},
    "d09": {"n": True, "draft": False},
    "d10": {"tags": ["a", "b"], "lang": "en"},
    "d11": {"obj": {"k": 1}, "n": 10**20},
    "d12": None,
    "d13": {"n": 0, "lang": "fr", "draft": True},
    "1": {"n": 3, "lang": "de"},
    "2": {"n": 2, "lang": "fr", "x": -7.25},
}
TEXTS = dict(zip(METADATA, sentences(len(METADATA), seed=49), strict=True))
COUNT = len(METADATA)
QUERY = sentences(1, seed=50)[0]
NEW_TEXT = "the dog is running in the street"  # words the tiny encoder knows


# --- the independent evaluator: three-valued, over the metadata dicts ---------------------------------------

Truth = bool | None  # None: unknown (a field missing, or holding a value of another kind)
Predicate = Callable[[dict[str, Any] | None], Truth]
# Written again, not imported from whitevec.index.filters.rows: the evaluator must not share the code it checks.
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else "other"


def cmp(name: str, op: str, literal: Any) -> Predicate:
    """``name op literal``, compared exactly (Python's int and float comparisons are exact)."""

    def truth(meta: dict[str, Any] | None) -> Truth:
        if not meta or name not in meta or _kind(meta[name]) != _kind(literal) or _kind(literal) == "other":
            return None
        return bool(_OPS[op](meta[name], literal))

    return truth


def not_(inner: Predicate) -> Predicate:
    return lambda meta: None if (t := inner(meta)) is None else not t


def and_(*parts: Predicate) -> Predicate:
    def truth(meta: dict[str, Any] | None) -> Truth:
        values = [part(meta) for part in parts]
        return False if False in values else None if None in values else True

    return truth


def or_(*parts: Predicate) -> Predicate:
    def truth(meta: dict[str, Any] | None) -> Truth:
        values = [part(meta) for part in parts]
        return True if True in values else None if None in values else False

    return truth


def isin(name: str, *literals: Any) -> Predicate:
    return or_(*(cmp(name, "==", literal) for literal in literals))


def nothing(meta: dict[str, Any] | None) -> Truth:
    return None


def passing(predicate: Predicate, metadata: dict[str, dict[str, Any] | None] = METADATA) -> frozenset[str]:
    return frozenset(doc_id for doc_id, meta in metadata.items() if predicate(meta) is True)


# --- the surfaces' outcomes ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one surface did: refused with one line, answered (hits, or an add that went through), or something
    else (a traceback, an exit status, a 5xx, two lines), described in ``problem``."""

    refused: str | None = None
    hits: frozenset[str] | None = None
    problem: str | None = None

    @property
    def answered(self) -> bool:
        return self.refused is None and self.problem is None


def _python(call: Callable[[], Any]) -> tuple[Outcome, Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = call()
    except WhitevecError as exc:
        message = str(exc)
        if "\n" in message or not message.strip():
            return Outcome(
                problem=f"a {type(exc).__name__} of {len(message.splitlines())} lines: {message!r}"
            ), None
        return Outcome(refused=message), None
    except Exception as exc:  # the probe's finding: named, not raised
        return Outcome(problem=f"raised {type(exc).__name__}: {str(exc)[:300]}"), None
    return Outcome(), value


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str], report: str = "whitevec") -> tuple[Outcome, str]:
    """``whitevec ARGV`` in this process: (outcome, stdout). A refusal is exit 2 and one ``whitevec: error:`` line;
    an answer is exit 0 with nothing on stderr but ``whitevec:`` lines (warnings, notes) and the command's report
    (lines starting with ``report``)."""
    try:
        code = cli.main(argv) or 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # what the real command would print as a traceback
        capsys.readouterr()
        return Outcome(problem=f"traceback (exit 1): {type(exc).__name__}: {str(exc)[:300]}"), ""
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    if "Traceback" in err:
        return Outcome(problem=f"exit {code} with a traceback: {err[-400:]!r}"), out
    if code == 2:
        errors = [line for line in lines if line.startswith("whitevec: error: ")]
        if len(lines) != 1 or len(errors) != 1:
            return Outcome(problem=f"exit 2 with {len(lines)} stderr lines: {err[-400:]!r}"), out
        return Outcome(refused=errors[0].removeprefix("whitevec: error: ")), out
    if code != 0:
        return Outcome(problem=f"exit {code}: {err[-400:]!r}"), out
    stray = [line for line in lines if not line.startswith(("whitevec: ", report))]
    if stray:
        return Outcome(problem=f"exit 0 with stderr lines not marked whitevec: {stray[:3]!r}"), out
    return Outcome(), out


def _post(client: TestClient, path: str, body: dict[str, Any] | bytes) -> Any:
    """POST ``body`` (a dict as ASCII JSON, so lone surrogates travel as escapes; bytes as they are)."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(path, content=content, headers={"content-type": "application/json"})


def _http(answer: Any) -> Outcome:
    status = answer.status_code
    if 400 <= status < 500:
        try:
            detail = answer.json().get("detail")
        except ValueError:
            return Outcome(problem=f"HTTP {status} whose body is not JSON: {answer.text[:300]!r}")
        if not isinstance(detail, str) or "\n" in detail or not detail.strip():
            return Outcome(problem=f"HTTP {status} whose detail is not one line: {detail!r:.300}")
        return Outcome(refused=detail)
    if status != 200:
        return Outcome(problem=f"HTTP {status}: {answer.text[:300]!r}")
    return Outcome()


# --- the index ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _cli_built_once() -> Iterator[None]:
    """typer builds the whole command tree again on every call (0.2 s, most of a probe's CLI run): build it once;
    each run still goes through ``whitevec.cli.main``."""
    import typer.main

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typer.main, "get_command", functools.lru_cache(maxsize=None)(typer.main.get_command))
        yield


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The index (dense and BM25) over METADATA's documents, with a static encoder the CLI loads as a new user's
    would; the folder is never written to (write cases copy it)."""
    from whitevec.encoders.loading import load_encoder

    root = tmp_path_factory.mktemp("probe-surfaces")
    docs = [Document(doc_id, TEXTS[doc_id], meta) for doc_id, meta in METADATA.items()]
    encoder = load_encoder(str(tiny_static_folder(root / "static")))
    Retriever.build(docs, root / "index" / "idx", encoder=encoder, lexical="bm25").close()
    return root / "index" / "idx"  # alone in its parent folder, as each write case's copy is


@pytest.fixture(scope="module")
def served(built: Path) -> Iterator[tuple[Retriever, TestClient]]:
    with (
        Retriever.load(built) as retriever,
        TestClient(create_app(retriever, ServeSettings()), raise_server_exceptions=False) as client,
    ):
        yield retriever, client


def _contents(folder: Path) -> dict[str, tuple[str, Any]]:
    """Every live document of the index at ``folder`` as a new reader finds it: id -> (text, metadata)."""
    with Retriever.load(folder) as retriever, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if retriever.count == 0:
            return {}
        (hits,) = retriever.search([QUERY], k=retriever.count, mode="dense")
        assert len(hits) == retriever.count
        return {hit.id: (hit.text, hit.metadata) for hit in hits}


def _state(folder: Path) -> tuple[dict[str, Any], list[str]]:
    """The manifest and every path under the folder that holds the index (temporaries and locks included)."""
    listing = sorted(str(path.relative_to(folder.parent)) for path in folder.parent.rglob("*"))
    return read_manifest(folder, verify=False), listing


# --- filters ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilterCase:
    """``expression``, and the documents it passes (``answer``, or ``also``; None: it must be refused).
    ``refusal_ok``: a one-line refusal is right too (a literal or depth the filter may bound, a field or kind no
    document has)."""

    name: str
    expression: str
    answer: Predicate | None
    refusal_ok: bool = False
    also: Predicate | None = None  # another answer that is right too


def _deep(depth: int, inner: str) -> str:
    return "(" * depth + inner + ")" * depth


FILTER_CASES = [
    # syntax: refused
    FilterCase("empty", "", None),
    FilterCase("whitespace-only", " \t\n ", None),
    FilterCase("no-value", "n ==", None),
    FilterCase("no-field", "== 1", None),
    FilterCase("single-equals", "n = 1", None),
    FilterCase("unclosed-paren", "(n == 1", None),
    FilterCase("stray-close-paren", "n == 1)", None),
    FilterCase("dangling-and", "n == 1 and", None),
    FilterCase("two-comparisons-no-junction", "n == 1 n == 2", None),
    FilterCase("literal-first", "1 == n", None),
    FilterCase("in-list-unclosed", "n in [1, 2,", None),
    FilterCase("mismatched-quotes", "lang == 'en\"", None),
    FilterCase("escaped-closing-quote", 'lang == "en\\"', None),
    FilterCase("nul-outside-string", "n == 1\x00", None),
    FilterCase("hex-literal", "n == 0x10", None),
    FilterCase("underscore-literal", "n == 1_000", None),
    FilterCase("sql-injection", "n == 1; DROP TABLE documents", None),
    FilterCase("python-injection", "__import__('os').system('true')", None),
    FilterCase("sql-comment", "n == 1 -- and more", None),
    FilterCase("milvus-function", 'json_contains(tags, "a")', None),
    FilterCase("like-operator", 'lang like "e%"', None),
    FilterCase("dotted-field", "obj.k == 1", None),
    FilterCase("keyword-as-field", "and == 1", None),
    FilterCase("boolean-ordering", "draft > false", None),
    # literals that are not finite or not a value
    FilterCase("nan-word", "n == NaN", nothing, refusal_ok=True),
    FilterCase("inf-literal", "n < 1e999", cmp("n", "<", math.inf), refusal_ok=True),
    FilterCase("minus-inf-literal", "x > -1e999", cmp("x", ">", -math.inf), refusal_ok=True),
    # null: a value (n is null) or SQL's unknown (nothing passes); either, or a refusal
    FilterCase(
        "null-literal", "n == null", lambda m: True if m and m.get("n", 0) is None else None, True, nothing
    ),
    FilterCase("plus-sign", "n == +1", cmp("n", "==", 1), refusal_ok=True),
    # integers float64 cannot hold: compared exactly, or refused
    FilterCase("2^53", f"n == {BIG}", cmp("n", "==", BIG), refusal_ok=True),
    FilterCase("2^53+1", f"n == {BIG + 1}", cmp("n", "==", BIG + 1), refusal_ok=True),
    FilterCase("above-2^53", f"n > {BIG}", cmp("n", ">", BIG), refusal_ok=True),
    FilterCase("minus-2^53-1", f"n == {-(BIG + 1)}", cmp("n", "==", -(BIG + 1)), refusal_ok=True),
    FilterCase("2^70-1", f"n == {HUGE - 1}", cmp("n", "==", HUGE - 1), refusal_ok=True),
    FilterCase("2^70", f"n == {HUGE}", cmp("n", "==", HUGE), refusal_ok=True),
    FilterCase("above-2^70", f"n > {HUGE}", cmp("n", ">", HUGE), refusal_ok=True),
    FilterCase("1e20-float-vs-int", "n >= 1e20", cmp("n", ">=", 1e20), refusal_ok=True),
    FilterCase("400-digit-literal", "n < 1" + "0" * 400, cmp("n", "<", 10**400), refusal_ok=True),
    FilterCase("5000-digit-literal", "n == " + "9" * 5000, nothing, refusal_ok=True),
    FilterCase("1e-400-underflow", "x > 1e-400", cmp("x", ">", 0.0), refusal_ok=True),
    # ordinary numbers, -0.0, booleans, kinds mixed in one field
    FilterCase("int-equal", "n == 1", cmp("n", "==", 1)),
    FilterCase("minus-zero-literal", "n == -0", cmp("n", "==", 0)),
    FilterCase("float-zero-vs-minus-zero", "x == 0", cmp("x", "==", 0)),
    FilterCase("float-equal", "x == 0.1", cmp("x", "==", 0.1)),
    FilterCase("tiny-float-range", "x > 0 and x < 1e-200", and_(cmp("x", ">", 0), cmp("x", "<", 1e-200))),
    FilterCase("leading-dot-float", "n == .25e1", cmp("n", "==", 2.5)),
    FilterCase("true-is-not-1", "n == true", cmp("n", "==", True)),
    FilterCase("string-in-number-field", 'n == "12"', cmp("n", "==", "12")),
    FilterCase("string-ordering", 'n > "1"', cmp("n", ">", "1")),
    FilterCase("mixed-kinds-in", 'n in [1, "12", true]', isin("n", 1, "12", True)),
    FilterCase("repeated-in", "n in [1, 1, 1]", cmp("n", "==", 1)),
    FilterCase("not-equal-unknowns", "n != 1", cmp("n", "!=", 1)),
    FilterCase("not-unknowns", "not n == 1", not_(cmp("n", "==", 1))),
    FilterCase("bool-not-equal", "draft != false", cmp("draft", "!=", False)),
    FilterCase("no-spaces", "n==1", cmp("n", "==", 1)),
    FilterCase(
        "uppercase-keywords",
        'lang == "en" AND draft == TRUE Or n IN [3]',
        or_(and_(cmp("lang", "==", "en"), cmp("draft", "==", True)), isin("n", 3)),
    ),
    FilterCase(
        "precedence",
        '(n == 1 or lang == "fr") and not draft == true',
        and_(or_(cmp("n", "==", 1), cmp("lang", "==", "fr")), not_(cmp("draft", "==", True))),
    ),
    # strings: empty, quotes, unicode, NUL, surrogates, long
    FilterCase("empty-string", 'lang == ""', cmp("lang", "==", "")),
    FilterCase("escaped-single-quote", "lang == 'it\\'s'", cmp("lang", "==", "it's")),
    FilterCase("escaped-double-quotes", 'lang == "say \\"hi\\""', cmp("lang", "==", 'say "hi"')),
    FilterCase("unicode-string", 'lang == "日本語"', cmp("lang", "==", "日本語")),
    FilterCase("trailing-space-string", 'lang == "en "', cmp("lang", "==", "en ")),
    FilterCase("case-differs", 'lang in ["en", "EN"]', isin("lang", "en", "EN")),
    FilterCase("nul-in-string", 'lang == "e\x00n"', cmp("lang", "==", "e\x00n"), refusal_ok=True),
    FilterCase("lone-surrogate-in-string", 'lang == "\ud800"', nothing, refusal_ok=True),
    FilterCase("100k-char-string", 'lang == "' + "x" * 100_000 + '"', nothing, refusal_ok=True),
    FilterCase("unicode-whitespace", "\u3000n\u2003==\u00a01\u3000", cmp("n", "==", 1), refusal_ok=True),
    FilterCase("fullwidth-digit", "n == \uff11", cmp("n", "==", 1), refusal_ok=True),
    FilterCase("unicode-field", "ñ == 1", nothing, refusal_ok=True),
    # fields and kinds no document has, or that no literal reaches
    FilterCase("unknown-field", "colour == 'red'", nothing, refusal_ok=True),
    FilterCase("field-case-differs", 'LANG == "en"', nothing, refusal_ok=True),
    FilterCase("wrong-kind", "lang > 3", nothing, refusal_ok=True),
    FilterCase("list-field", 'tags == "a"', nothing, refusal_ok=True),
    FilterCase("object-field", "obj == 1", nothing, refusal_ok=True),
    FilterCase("null-only-field", 'note == "x"', nothing, refusal_ok=True),
    # size and depth
    FilterCase("empty-in-list", "n in []", nothing, refusal_ok=True),
    FilterCase("600-value-in-list", f"n in [{', '.join(map(str, range(600)))}]", isin("n", *range(600))),
    FilterCase("5000-value-in-list", f"n in [{','.join(map(str, range(5000)))}]", isin("n", *range(5000)), True),
    FilterCase("300-or-chain", " or ".join(f"n == {i}" for i in range(300)), isin("n", *range(300))),
    FilterCase("50-parens", _deep(50, "n == 1"), cmp("n", "==", 1)),
    FilterCase("400-parens", _deep(400, "n == 1"), cmp("n", "==", 1), refusal_ok=True),
    FilterCase("3000-parens", _deep(3000, "n == 1"), cmp("n", "==", 1), refusal_ok=True),
    FilterCase("3-nots", "not not not lang == 'en'", not_(cmp("lang", "==", "en"))),
    FilterCase("not-of-or", 'not (n == 1 or lang == "en")', not_(or_(cmp("n", "==", 1), cmp("lang", "==", "en")))),
    FilterCase("trailing-dot-float", "n == 1.", cmp("n", "==", 1.0)),
    FilterCase("newlines-inside", "n == 1\nor\r\nn == 2", isin("n", 1, 2)),
    FilterCase("newline-in-a-bad-filter", "n ==\n\n", None),
    FilterCase("ansi-escape", "n == 1\x1b[31m", None),
    FilterCase("in-without-brackets", "n in 1", None),
    FilterCase("trailing-comma-in-list", "n in [1, 2,]", isin("n", 1, 2), refusal_ok=True),
    FilterCase("3000-char-field", "f" * 3000 + " == 1", nothing, refusal_ok=True),
    FilterCase("1000-nots", "not " * 1000 + "n == 1", cmp("n", "==", 1), refusal_ok=True),
    FilterCase("999-nots", "not " * 999 + "n == 1", not_(cmp("n", "==", 1)), refusal_ok=True),
    FilterCase("400-not-parens", "not (" * 400 + "n == 1" + ")" * 400, cmp("n", "==", 1), refusal_ok=True),
]


def _filter_outcomes(
    expression: str, retriever: Retriever, client: TestClient, folder: Path, capsys: pytest.CaptureFixture[str]
) -> dict[str, Outcome]:
    """``expression`` searched on every surface with k = every document, so the hits are all that pass."""
    k = retriever.count
    found: dict[str, Outcome] = {}
    for mode in (None, "dense"):
        search = functools.partial(retriever.search, [QUERY], k=k, mode=mode, filter=expression)
        outcome, results = _python(search)
        if results is not None:
            outcome = Outcome(hits=frozenset(hit.id for hit in results[0]))
        found[f"Python ({mode or 'default'} mode)"] = outcome
    argv = ["search", str(folder), QUERY, "-k", str(k), "--format", "json", f"--filter={expression}"]
    outcome, out = _cli(argv, capsys)
    if outcome.answered:
        outcome = Outcome(hits=frozenset(hit["id"] for hit in json.loads(out)[0]["hits"]))
    found["CLI"] = outcome
    answer = _post(client, "/search", {"queries": [QUERY], "k": k, "filter": expression})
    outcome = _http(answer)
    if outcome.answered:
        outcome = Outcome(hits=frozenset(answer.json()["results"][0]["ids"]))
    found["HTTP"] = outcome
    return found


@pytest.mark.parametrize("case", FILTER_CASES, ids=[case.name for case in FILTER_CASES])
def test_an_odd_filter_is_one_line_or_the_right_hits_on_every_surface(
    case: FilterCase, served: tuple[Retriever, TestClient], built: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcomes = _filter_outcomes(case.expression, *served, built, capsys)
    # HTTP's schema bounds a filter's length and takes only text: its own refusal, said before the library's
    schema_refuses = not 1 <= len(case.expression) <= MAX_FILTER_CHARS or _has_surrogate(case.expression)
    expected = None if case.answer is None else passing(case.answer)
    wrong: list[str] = []
    for surface, outcome in outcomes.items():
        if outcome.problem is not None:
            wrong.append(f"{surface}: {outcome.problem}")
        elif outcome.refused is not None:
            if not (expected is None or case.refusal_ok or (surface == "HTTP" and schema_refuses)):
                wrong.append(f"{surface}: refused a filter it must answer ({sorted(expected)}): {outcome.refused}")
        elif expected is None:
            wrong.append(f"{surface}: answered {sorted(outcome.hits or ())} where it must refuse")
        elif outcome.hits != expected and (case.also is None or outcome.hits != passing(case.also)):
            wrong.append(
                f"{surface}: wrong hits {sorted(outcome.hits or ())}, the documents passing are {sorted(expected)}"
            )
    if not wrong:
        wrong += _disagreements(outcomes, http_bounded=schema_refuses)
    assert not wrong, f"filter {case.expression[:120]!r}:\n" + "\n".join(wrong)


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


def _disagreements(outcomes: dict[str, Outcome], *, http_bounded: bool) -> list[str]:
    """The surfaces must all refuse (with the same line: HTTP's detail too, unless its schema bounds the input
    first) or all answer the same."""
    compared = {name: o for name, o in outcomes.items() if not (http_bounded and name == "HTTP")}
    kinds = {name: (o.refused is None, o.hits) for name, o in compared.items()}
    if len(set(kinds.values())) > 1:
        return ["the surfaces disagree: " + "; ".join(f"{name}: {_said(o)}" for name, o in outcomes.items())]
    lines = {o.refused for o in compared.values()}
    if len(lines) > 1:
        return [
            "the surfaces refuse in different words: "
            + "; ".join(f"{name}: {o.refused}" for name, o in compared.items())
        ]
    return []


def _said(outcome: Outcome) -> str:
    return f"refused ({outcome.refused})" if outcome.refused is not None else f"hits {sorted(outcome.hits or ())}"


# --- filters on a living index: fields and kinds only added documents hold, the build segment merged away ----

ADDED_METADATA: dict[str, dict[str, Any] | None] = {
    "a1": {"tag": "new", "x": True, "n": 7},
    "a2": {"tag": "old", "n": BIG + 3, "lang": "fr"},
    **{f"s{i}": {"n": -i} for i in range(5)},  # added one by one: the 7th makes 9 segments, past the 8 kept
}
BATCH_METADATA: dict[str, dict[str, Any] | None] = {f"b{i:02}": {"n": 100 + i, "tag": "batch"} for i in range(20)}
LIVING_FILTERS = [
    ('tag == "new"', cmp("tag", "==", "new")),
    ("x == true", cmp("x", "==", True)),
    ("n > 0", cmp("n", ">", 0)),
    ('lang == "fr" and n >= 2', and_(cmp("lang", "==", "fr"), cmp("n", ">=", 2))),
    (f"n == {BIG + 3}", cmp("n", "==", BIG + 3)),
]


def _add_each(retriever: Retriever, metadata: dict[str, dict[str, Any] | None], *, one_by_one: bool) -> None:
    docs = [Document(doc_id, f"{NEW_TEXT} {doc_id}", meta) for doc_id, meta in metadata.items()]
    for batch in [[doc] for doc in docs] if one_by_one else [docs]:
        retriever.add(batch)


@pytest.mark.parametrize("merged", [False, True], ids=["after-an-add", "after-a-merge"])
def test_filters_on_a_living_index_answer_alike_on_every_surface(
    merged: bool, built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fields and kinds only added documents hold (issue 49's item 3), and the build segment merged away: the
    20 added at once are the largest segment, so the merge past 8 segments takes the build's with the rest."""
    folder = tmp_path / "living" / "idx"
    shutil.copytree(built, folder)
    live = {**METADATA, **ADDED_METADATA}
    wrong: list[str] = []
    with Retriever.load(folder) as writer:
        writer.search([QUERY], k=1, filter="n > 0")  # its metadata read before the writes
        if merged:
            _add_each(writer, BATCH_METADATA, one_by_one=False)
            live.update(BATCH_METADATA)
        _add_each(writer, ADDED_METADATA, one_by_one=merged)
        assert len(writer.manifest.get("segments") or [None]) == 2
        for expression, predicate in LIVING_FILTERS:  # the writer's own searches follow its writes
            search = functools.partial(writer.search, [QUERY], k=writer.count, filter=expression)
            outcome, results = _python(search)
            hits = None if results is None else frozenset(hit.id for hit in results[0])
            if hits != passing(predicate, live):
                wrong.append(
                    f"{expression!r} on Python (the writer): {outcome.problem or outcome.refused or hits}"
                )
    with (
        Retriever.load(folder) as retriever,
        TestClient(create_app(retriever, ServeSettings()), raise_server_exceptions=False) as client,
    ):
        for expression, predicate in LIVING_FILTERS:
            expected = passing(predicate, live)
            for surface, outcome in _filter_outcomes(expression, retriever, client, folder, capsys).items():
                if outcome.hits != expected:
                    wrong.append(
                        f"{expression!r} on {surface}: {outcome.problem or _said(outcome)}, the documents "
                        f"passing are {sorted(expected)}"
                    )
    assert not wrong, "\n".join(wrong)


def test_a_server_filters_on_what_it_just_added(built: Path, tmp_path: Path) -> None:
    """A writable server's filtered searches before and after its own add: the field, the kind and the integer
    above 2^53 the added document brings are searched at once, exactly."""
    folder = tmp_path / "served" / "idx"
    shutil.copytree(built, folder)
    with (
        Retriever.load(folder) as retriever,
        TestClient(create_app(retriever, ServeSettings(writable=True)), raise_server_exceptions=False) as client,
    ):

        def hits(expression: str) -> Any:
            answer = _post(client, "/search", {"queries": [QUERY], "k": retriever.count, "filter": expression})
            return sorted(answer.json()["results"][0]["ids"]) if answer.status_code == 200 else answer.text

        assert hits("n == 1") == ["d02"]
        metadata = {"fresh": "yes", "n": BIG - 1, "draft": "no"}
        answer = _post(client, "/documents", _body({**ROW, "metadata": metadata}))
        assert answer.status_code == 200, answer.text
        assert hits('fresh == "yes"') == ["n1"]
        assert hits('draft == "no"') == ["n1"]  # a string where the build held only booleans
        assert hits(f"n == {BIG - 1}") == ["n1"]
        assert hits(f"n >= {BIG - 1} and n < {BIG}") == ["n1"]  # BIG - 1 and BIG: both exact in float64


# --- adds ------------------------------------------------------------------------------------------------------

Added = dict[str, tuple[str, Any]]  # id -> (text, metadata) a right add leaves in the index


@dataclass(frozen=True, repr=False)
class AddCase:
    """One odd add, on each surface it can be said on: ``file`` (name, bytes; bytes None: a folder of that name,
    ``MISSING``: no such file) for ``whitevec index add --corpus`` and ``read_corpus_file`` + ``Retriever.add``;
    ``python``, documents given to ``Retriever.add`` directly (where a file cannot say it; the Python surface then
    takes these); ``http``, the body of POST /documents (a dict sent as JSON, bytes as they are). ``added``: what
    a right add leaves (None: it must be refused, nothing written); ``refusal_ok``: a one-line refusal is right
    too."""

    name: str
    file: tuple[str, bytes | None] | None = None
    python: list[Any] | None = None
    http: dict[str, Any] | bytes | None = None
    added: Added | None = None
    refusal_ok: bool = False

    def __repr__(self) -> str:  # the fields may be 10 MB, or 5,000 levels deep
        return f"AddCase({self.name!r})"


MISSING = b"\0missing"  # the file's bytes that stand for "no such file"
BOM = "\ufeff".encode()


def _doc(doc_id: Any, text: Any = NEW_TEXT, metadata: Any = None) -> Any:
    """A Document with whatever fields it is given (the dataclass checks nothing: Retriever.add must)."""
    return Document(doc_id, text, metadata)


def _line(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=True)


def _jsonl(*rows: dict[str, Any], name: str = "more.jsonl") -> tuple[str, bytes]:
    return name, "".join(_line(row) + "\n" for row in rows).encode()


def _body(*docs: dict[str, Any]) -> dict[str, Any]:
    return {"documents": list(docs)}


def _nested(depth: int) -> str:
    """``{"a": {"a": ... 1}}`` as JSON text, ``depth`` objects deep."""
    return '{"a": ' * depth + "1" + "}" * depth


def _nested_dict(depth: int) -> dict[str, Any]:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return dict(value)


def _raw_row(metadata_json: str, doc_id: str = "n1") -> str:
    """A JSONL row (and a body's document) whose metadata is written as given: JSON a dict cannot carry."""
    return f'"id": "{doc_id}", "text": "{NEW_TEXT}", "metadata": {metadata_json}'


def _raw_file(metadata_json: str) -> tuple[str, bytes]:
    return "more.jsonl", ('{"id": "n1", "text": "' + NEW_TEXT + '", "v": ' + metadata_json + "}\n").encode()


def _raw_body(metadata_json: str) -> bytes:
    return ('{"documents": [{' + _raw_row('{"v": ' + metadata_json + "}") + "}]}").encode()


ROW = {"id": "n1", "text": NEW_TEXT}
ROW2 = {"id": "n2", "text": "a cat is eating food"}
ADDED = {"n1": (NEW_TEXT, None)}
ADDED2 = {**ADDED, "n2": ("a cat is eating food", None)}
TEN_MB = "x" * 10_000_000
ONE_MB = " ".join(["the dog is running"] * 55_000)
WIDE = {f"k{i}": i for i in range(20_000)}
ODD_KEYS = {"": 1, "a b": 2, "ñ": 3}


def _everywhere(
    name: str, doc_id: Any = "n1", text: Any = NEW_TEXT, metadata: dict[str, Any] | None = None, **expected: Any
) -> AddCase:
    """One document on every surface: a JSONL row (metadata as its other keys), a Document, a POST body."""
    body = {"id": doc_id, "text": text, **({"metadata": metadata} if metadata is not None else {})}
    row = {"id": doc_id, "text": text, **(metadata or {})}
    return AddCase(name, _jsonl(row), [_doc(doc_id, text, metadata)], _body(body), **expected)


ADD_CASES = [
    # not JSON lines, or not UTF-8
    AddCase("bad-json", ("more.jsonl", b'{"id": "n1", "text": "the dog"\n'), http=b'{"documents": [{"id": "n1"'),
    AddCase("json-array-line", _jsonl(name="x.jsonl"), http=json.dumps([ROW]).encode()),
    AddCase(
        "pretty-json-array-file",
        ("more.json", json.dumps([ROW, ROW2], indent=2).encode()),
        http={"documents": ROW},
    ),
    AddCase("json-string-line", ("more.jsonl", b'"the dog is running"\n'), http=b'"the dog is running"'),
    AddCase(
        "trailing-garbage",
        ("more.jsonl", (_line(ROW) + " x\n").encode()),
        http=(json.dumps(_body(ROW)) + " x").encode(),
    ),
    AddCase(
        "invalid-utf8",
        ("more.jsonl", b'{"id": "n1", "text": "the dog \xff"}\n'),
        http=b'{"documents": [{"id": "n1", "text": "the dog \xff"}]}',
    ),
    AddCase("latin1-text-file", ("more.txt", ("\n" * 8 + "café dog\n").encode("latin-1"))),
    AddCase("utf16-file", ("more.jsonl", (_line(ROW) + "\n").encode("utf-16")), added=ADDED, refusal_ok=True),
    AddCase(
        "bom",
        ("more.jsonl", BOM + (_line(ROW) + "\n").encode()),
        http=BOM + json.dumps(_body(ROW)).encode(),
        added=ADDED,
        refusal_ok=True,
    ),
    AddCase(
        "crlf",
        ("more.jsonl", (_line(ROW) + "\r\n" + _line(ROW2) + "\r\n").encode()),
        http=json.dumps(_body(ROW, ROW2), indent=1).replace("\n", "\r\n").encode(),
        added=ADDED2,
    ),
    AddCase(
        "cr-only", ("more.jsonl", (_line(ROW) + "\r" + _line(ROW2) + "\r").encode()), added=ADDED2, refusal_ok=True
    ),
    AddCase(
        "raw-nul-in-json-string",
        ("more.jsonl", b'{"id": "n1", "text": "the dog\x00running"}\n'),
        http=b'{"documents": [{"id": "n1", "text": "the dog\x00running"}]}',
    ),
    AddCase(
        "escaped-nul-in-text",
        _jsonl({"id": "n1", "text": "the dog\x00running"}),
        http=_body({"id": "n1", "text": "the dog\x00running"}),
        added={"n1": ("the dog\x00running", None)},
        refusal_ok=True,
    ),
    AddCase(
        "raw-nul-in-text-file",
        ("more.txt", b"\n" * 8 + b"the dog\x00running\n"),
        added={"9": ("the dog\x00running", None)},
        refusal_ok=True,
    ),
    _everywhere("lone-surrogate-text", text="the dog \ud800"),
    _everywhere("lone-surrogate-id", "n\udfff"),
    _everywhere("lone-surrogate-metadata", metadata={"v": "\udfff"}),
    # empty, blank
    AddCase("empty-file", ("more.jsonl", b""), [], _body()),
    AddCase("only-blank-lines", ("more.jsonl", b"\n  \n\t\n")),
    AddCase(
        "blank-lines-between",
        ("more.jsonl", ("\n" + _line(ROW) + "\n\n  \n" + _line(ROW2) + "\n").encode()),
        added=ADDED2,
    ),
    AddCase("blank-text", _jsonl({"id": "n1", "text": " "}), [_doc("n1", "  ")], added={}, refusal_ok=True),
    AddCase("blank-text-over-http", http=_body({"id": "n1", "text": " \t"})),
    # no word the model knows: the library skips it (with a warning) by default, a server refuses it
    AddCase(
        "unknown-words-only",
        _jsonl({"id": "n1", "text": "zzz qqq"}),
        [_doc("n1", "zzz qqq")],
        added={},
        refusal_ok=True,
    ),
    AddCase("unknown-words-over-http", http=_body({"id": "n1", "text": "zzz qqq"}), added={}, refusal_ok=True),
    AddCase("text-missing", _jsonl({"id": "n1"}), http=_body({"id": "n1"})),
    _everywhere("text-a-number", text=5),
    _everywhere("text-null", text=None),
    # a 10 MB line (its metadata: a 10 MB text takes BM25 5 s an add here) and a 1 MB text
    AddCase("ten-mb-line", _jsonl({**ROW, "v": TEN_MB}), added={"n1": (NEW_TEXT, {"v": TEN_MB})}),
    AddCase(
        "one-mb-text", _jsonl({"id": "n1", "text": ONE_MB}), [_doc("n1", ONE_MB)], added={"n1": (ONE_MB, None)}
    ),
    AddCase("text-over-the-server-limit", http=_body({"id": "n1", "text": "dog " * 1000})),
    # ids
    AddCase(
        "duplicate-ids",
        _jsonl(ROW, {**ROW2, "id": "n1"}),
        [_doc("n1"), _doc("n1", "a cat")],
        _body(ROW, {**ROW2, "id": "n1"}),
    ),
    _everywhere("id-the-index-holds", "d00"),
    _everywhere("held-id-in-spaces", " d00 ", added={" d00 ": (NEW_TEXT, None)}, refusal_ok=True),
    _everywhere("empty-id", ""),
    _everywhere("whitespace-id", " \t "),
    _everywhere("newline-in-id", "n\n1", added={"n\n1": (NEW_TEXT, None)}, refusal_ok=True),
    _everywhere("zero-width-space-id", "\u200b", added={"\u200b": (NEW_TEXT, None)}, refusal_ok=True),
    _everywhere("id-like-a-held-number", "01", added={"01": (NEW_TEXT, None)}),
    AddCase("integer-id-in-a-file", _jsonl({**ROW, "id": 7}), added={"7": (NEW_TEXT, None)}),
    AddCase("integer-id", python=[_doc(7)], http=_body({**ROW, "id": 7})),
    _everywhere("float-id", 1.5),
    _everywhere("null-id", None),
    _everywhere("boolean-id", True),
    AddCase(
        "10k-char-id", _jsonl({**ROW, "id": "i" * 10_000}), added={"i" * 10_000: (NEW_TEXT, None)}, refusal_ok=True
    ),
    AddCase(
        "key-repeated-in-a-row",
        ("more.jsonl", ('{"id": "n1", "id": "n2", "text": "' + NEW_TEXT + '"}\n').encode()),
    ),
    # metadata
    AddCase("metadata-a-list", python=[_doc("n1", NEW_TEXT, [1, 2])], http=_body({**ROW, "metadata": [1, 2]})),
    AddCase("metadata-a-string", python=[_doc("n1", NEW_TEXT, "abc")], http=_body({**ROW, "metadata": "abc"})),
    AddCase("metadata-a-number", python=[_doc("n1", NEW_TEXT, 5)], http=_body({**ROW, "metadata": 5})),
    AddCase(
        "metadata-key-holding-a-list",
        _jsonl({**ROW, "metadata": [1, 2]}),
        [_doc("n1", NEW_TEXT, {"metadata": [1, 2]})],
        _body({**ROW, "metadata": {"metadata": [1, 2]}}),
        added={"n1": (NEW_TEXT, {"metadata": [1, 2]})},
    ),
    AddCase("metadata-nan", _raw_file("NaN"), [_doc("n1", NEW_TEXT, {"v": math.nan})], _raw_body("NaN")),
    AddCase(
        "metadata-infinity",
        _raw_file("-Infinity"),
        [_doc("n1", NEW_TEXT, {"v": -math.inf})],
        _raw_body("-Infinity"),
    ),
    AddCase("metadata-1e400", _raw_file("1e400"), http=_raw_body("1e400")),
    _everywhere("metadata-2^70", metadata={"v": HUGE}, added={"n1": (NEW_TEXT, {"v": HUGE})}),
    _everywhere("metadata-odd-keys", metadata=ODD_KEYS, added={"n1": (NEW_TEXT, ODD_KEYS)}),
    _everywhere("metadata-20k-keys", metadata=WIDE, added={"n1": (NEW_TEXT, WIDE)}, refusal_ok=True),
    AddCase(
        "metadata-100-deep",
        _raw_file(_nested(100)),
        [_doc("n1", NEW_TEXT, {"v": _nested_dict(100)})],
        _raw_body(_nested(100)),
        added={"n1": (NEW_TEXT, {"v": _nested_dict(100)})},
    ),
    AddCase(
        "metadata-5000-deep",
        _raw_file(_nested(5000)),
        [_doc("n1", NEW_TEXT, {"v": _nested_dict(5000)})],
        _raw_body(_nested(5000)),
    ),
    AddCase("title-not-a-string", _jsonl({**ROW, "title": 5})),
    AddCase(
        "title-prepended",
        _jsonl({"id": "n1", "title": "the cat", "text": "is running"}),
        added={"n1": ("the cat is running", None)},
    ),
    AddCase("id-and-_id", _jsonl({**ROW, "_id": "x"}), added={"n1": (NEW_TEXT, {"_id": "x"})}),
    # CSV, TSV, plain text
    AddCase("tsv-wrong-columns", ("more.tsv", b"id\ttext\nn1\tthe dog\textra\n")),
    AddCase("tsv-no-header", ("more.tsv", b"n1\tthe dog is running\n")),
    AddCase(
        "tsv-quotes-are-text",
        ("more.tsv", b'id\ttext\nn1\t"the dog" running\n'),
        added={"n1": ('"the dog" running', None)},
    ),
    AddCase("csv-quote-left-open", ("more.csv", b'id,text\nn1,"the dog running\n')),
    AddCase(
        "csv-quoted-line-break",
        ("more.csv", b'id,text\nn1,"the dog\nrunning"\n'),
        added={"n1": ("the dog\nrunning", None)},
    ),
    AddCase("csv-header-twice", ("more.csv", b"text,TEXT\nthe dog,the cat\n")),
    AddCase(
        "csv-metadata-column",
        ("more.csv", b"id,text,year\nn1,the dog,2001\n"),
        added={"n1": ("the dog", {"year": "2001"})},
    ),
    AddCase("plain-text-ids-collide", ("more.txt", b"the dog is running\nthe cat\n")),
    AddCase(
        "plain-text-line-number-id",
        ("more.txt", ("\n" * 8 + NEW_TEXT + "\n").encode()),
        added={"9": (NEW_TEXT, None)},
    ),
    AddCase("corpus-a-folder", ("more.jsonl", None)),
    AddCase("corpus-missing", ("more.jsonl", MISSING)),
    # line breaks that are not \n, BOMs and CRLF in CSV and TSV, what Python's csv module stumbles on
    AddCase(
        "raw-u2028-in-json-text",
        ("more.jsonl", ('{"id": "n1", "text": "the dog\u2028running"}\n').encode()),
        http='{"documents": [{"id": "n1", "text": "the dog\u2028running"}]}'.encode(),
        added={"n1": ("the dog\u2028running", None)},
    ),
    AddCase(
        "nel-in-a-text-line",
        ("more.txt", ("\n" * 8 + "the dog\x85running\n").encode()),
        added={"9": ("the dog\x85running", None)},
    ),
    AddCase("csv-bom", ("more.csv", BOM + b"id,text\nn1,the dog\n"), added={"n1": ("the dog", None)}),
    AddCase(
        "tsv-crlf-metadata",
        ("more.tsv", b"id\ttext\tyear\r\nn1\tthe dog\t2001\r\n"),
        added={"n1": ("the dog", {"year": "2001"})},
    ),
    AddCase(
        "csv-crlf-quoted-comma",
        ("more.csv", b'id,text\r\nn1,"the dog, running"\r\n'),
        added={"n1": ("the dog, running", None)},
    ),
    AddCase(
        "csv-nul",
        ("more.csv", b"id,text\nn1,the dog\x00running\n"),
        added={"n1": ("the dog\x00running", None)},
        refusal_ok=True,
    ),
    AddCase(
        "csv-200k-field",
        ("more.csv", b"id,text\nn1," + b"dog " * 50_000 + b"\n"),
        added={"n1": (("dog " * 50_000).strip(), None)},
    ),
    AddCase(
        "gzip-file",
        ("more.jsonl.gz", gzip.compress((_line(ROW) + "\n").encode(), mtime=0)),
        added=ADDED,
        refusal_ok=True,
    ),
    AddCase(
        "5000-digit-id", ("more.jsonl", ('{"id": ' + "7" * 5000 + ', "text": "' + NEW_TEXT + '"}\n').encode())
    ),
    AddCase("title-null", _jsonl({**ROW, "title": None}), added=ADDED),
]


@pytest.fixture(scope="module")
def base(built: Path) -> dict[str, tuple[str, Any]]:
    return _contents(built)


def _fingerprint(folder: Path) -> list[tuple[str, str]]:
    """Every path beside and under the index folder with its bytes' digest: a refused write changes none."""
    return _tree(folder.parent)


def _tree(root: Path) -> list[tuple[str, str]]:
    """Every path under ``root``: a file's digest, a link's target, "" for a folder."""
    import hashlib

    def what(path: Path) -> str:
        if path.is_symlink():
            return f"-> {os.readlink(path)}"
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""

    return sorted((str(path.relative_to(root)), what(path)) for path in root.rglob("*"))


def _corpus(case: AddCase, folder: Path) -> Path | None:
    if case.file is None:
        return None
    name, data = case.file
    path = folder / name
    if data is None:
        path.mkdir(parents=True)
    elif data != MISSING:
        path.write_bytes(data)
    return path


def _add_python(case: AddCase, corpus: Path | None, folder: Path) -> Outcome:
    def add() -> None:
        docs = case.python if case.python is not None else read_corpus_file(str(corpus))
        with Retriever.load(folder) as retriever:
            retriever.add(docs)

    return _python(add)[0]


def _write_over_http(folder: Path, path: str, body: dict[str, Any] | bytes) -> Outcome:
    """POST ``body`` to ``path`` of a writable server of the index at ``folder``."""
    with (
        Retriever.load(folder) as retriever,
        TestClient(create_app(retriever, ServeSettings(writable=True)), raise_server_exceptions=False) as client,
    ):
        return _http(_post(client, path, body))


def _refusal_faults(surface: str, outcome: Outcome, written: bool, *, must_answer: bool) -> list[str] | None:
    """What is wrong with a write a surface failed or refused (nothing may be written); None: it answered, for
    the caller to judge."""
    if outcome.problem is not None:
        return [f"{surface}: {outcome.problem}" + (" (and the index changed)" if written else "")]
    if outcome.refused is None:
        return None
    faults = [f"{surface}: refused ({outcome.refused}) but the index folder changed"] if written else []
    if must_answer:
        faults.append(f"{surface}: refused a write it must make: {outcome.refused}")
    return faults


def _add_outcomes(
    case: AddCase, built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> dict[str, tuple[Outcome, Path]]:
    """Each surface's outcome, and the index folder (a copy of the built one) it wrote to."""
    corpus = _corpus(case, tmp_path)
    found: dict[str, tuple[Outcome, Path]] = {}
    for surface in ("CLI", "Python", "HTTP"):
        if {"CLI": corpus, "Python": corpus or case.python, "HTTP": case.http}[surface] is None:
            continue
        folder = tmp_path / surface / "idx"
        shutil.copytree(built, folder)
        if surface == "CLI":
            outcome = _cli(["index", "add", str(folder), "--corpus", str(corpus)], capsys, report="added ")[0]
        elif surface == "Python":
            outcome = _add_python(case, corpus, folder)
        else:
            assert case.http is not None
            outcome = _write_over_http(folder, "/documents", case.http)
        found[surface] = (outcome, folder)
    assert found, case.name
    return found


@pytest.mark.parametrize("case", ADD_CASES, ids=[case.name for case in ADD_CASES])
def test_an_odd_add_is_one_line_and_writes_nothing_or_adds_right_on_every_surface(
    case: AddCase,
    built: Path,
    base: dict[str, tuple[str, Any]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pristine = _fingerprint(built)
    expected = None if case.added is None else {**base, **case.added}
    wrong: list[str] = []
    outcomes = _add_outcomes(case, built, tmp_path, capsys)
    for surface, (outcome, folder) in outcomes.items():
        must_answer = expected is not None and not case.refusal_ok
        faults = _refusal_faults(surface, outcome, _fingerprint(folder) != pristine, must_answer=must_answer)
        if faults is not None:
            wrong += faults
        elif expected is None:
            wrong.append(f"{surface}: took an add it must refuse ({_difference(_contents(folder), base)})")
        else:
            found = _contents(folder)
            if found != expected:
                wrong.append(f"{surface}: the index holds the wrong documents ({_difference(found, expected)})")
    if not wrong and len({o.refused is None for o, _ in outcomes.values()}) > 1:
        wrong.append(
            "the surfaces disagree: "
            + "; ".join(f"{name}: {_said(o) if o.refused else 'added'}" for name, (o, _) in outcomes.items())
        )
    assert not wrong, f"add case {case.name}:\n" + "\n".join(wrong)


def _difference(found: dict[str, tuple[str, Any]], expected: dict[str, tuple[str, Any]]) -> str:
    extra = sorted(set(found) - set(expected))
    lacking = sorted(set(expected) - set(found))
    changed = sorted(i for i in set(found) & set(expected) if found[i] != expected[i])
    return f"ids not expected {extra!r:.200}, ids lacking {lacking!r:.200}, ids held otherwise {changed!r:.200}"


# --- deletes ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class DeleteCase:
    """One odd delete: ``ids`` for ``Retriever.delete`` and POST /documents/delete (and ``whitevec index delete
    IDS...`` when all are strings); ``ids_file``: the bytes of ``--ids FILE`` for the CLI instead (Python and
    HTTP then take ``ids``). ``deleted``: each set of ids a right delete may remove (the surfaces must agree on
    one); empty: it must be refused, nothing written; ``refusal_ok``: a one-line refusal is right too."""

    name: str
    ids: Any
    deleted: tuple[frozenset[str], ...] = ()
    ids_file: bytes | None = None
    refusal_ok: bool = False
    http: bool = True

    def __repr__(self) -> str:
        return f"DeleteCase({self.name!r})"


def _gone(*ids: str) -> tuple[frozenset[str], ...]:
    return (frozenset(ids),)


DELETE_CASES = [
    DeleteCase("one-id", ["d00"], _gone("d00")),
    DeleteCase("an-id-the-index-lacks", ["ghost"], _gone()),
    DeleteCase("held-and-lacking", ["d01", "ghost"], _gone("d01")),
    DeleteCase("an-id-twice", ["d02", "d02"], _gone("d02")),
    DeleteCase("held-id-in-spaces", [" d03 "], (frozenset({"d03"}), frozenset())),
    DeleteCase("empty-id", [""]),
    DeleteCase("whitespace-id", [" \t "], _gone(), refusal_ok=True),
    DeleteCase("no-ids", []),
    DeleteCase("none-id", [None]),
    DeleteCase("integer-id", [1]),
    DeleteCase("a-string-not-a-list", "d00"),
    DeleteCase("lone-surrogate-id", ["d\udc80"], _gone(), refusal_ok=True),
    DeleteCase("nul-in-id", ["d00\x00"], _gone(), refusal_ok=True),
    DeleteCase("every-document", list(METADATA), _gone(*METADATA)),
    DeleteCase("10k-ids-the-index-lacks", [f"g{i}" for i in range(10_000)], _gone(), http=False),
    DeleteCase("ids-file-crlf", ["d04", "d05"], _gone("d04", "d05"), ids_file=b"d04\r\nd05\r\n"),
    DeleteCase("ids-file-bom-and-blank-lines", ["d06"], _gone("d06"), ids_file=BOM + b"\n\nd06\n\n"),
    DeleteCase("ids-file-held-id-in-spaces", [" d03 "], (frozenset({"d03"}), frozenset()), ids_file=b" d03 \n"),
    DeleteCase("ids-file-not-utf8", None, ids_file=b"d07\xff\n"),  # the CLI's alone
]


def _delete_cli(case: DeleteCase, folder: Path, capsys: pytest.CaptureFixture[str]) -> Outcome | None:
    """``whitevec index delete``: exit 0, or 1 with the ids it lacked named, is an answer."""
    if case.ids_file is not None:
        ids_file = folder.parent.parent / "ids.txt"  # beside, not in, the folder a refused delete leaves alone
        ids_file.write_bytes(case.ids_file)
        args = ["--ids", str(ids_file)]
    elif isinstance(case.ids, list) and all(isinstance(i, str) and not i.startswith("-") for i in case.ids):
        args = list(case.ids)
    else:
        return None
    outcome, _ = _cli(["index", "delete", str(folder), *args], capsys, report="deleted ")
    if (
        outcome.problem is not None
        and outcome.problem.startswith("exit 1: ")
        and "were not in the index" in (outcome.problem)
    ):
        return Outcome()
    return outcome


def _delete_outcomes(
    case: DeleteCase, built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> dict[str, tuple[Outcome, Path]]:
    found: dict[str, tuple[Outcome, Path]] = {}
    for surface in ("CLI", "Python", "HTTP"):
        if (surface == "HTTP" and not case.http) or (surface != "CLI" and case.ids is None):
            continue
        folder = tmp_path / surface / "idx"
        shutil.copytree(built, folder)
        if surface == "CLI":
            outcome = _delete_cli(case, folder, capsys)
            if outcome is None:
                continue
        elif surface == "Python":

            def delete(folder: Path = folder) -> None:
                with Retriever.load(folder) as retriever:
                    retriever.delete(case.ids)

            outcome = _python(delete)[0]
        else:
            outcome = _write_over_http(folder, "/documents/delete", {"ids": case.ids})
        found[surface] = (outcome, folder)
    return found


@pytest.mark.parametrize("case", DELETE_CASES, ids=[case.name for case in DELETE_CASES])
def test_an_odd_delete_is_one_line_and_writes_nothing_or_deletes_right_on_every_surface(
    case: DeleteCase,
    built: Path,
    base: dict[str, tuple[str, Any]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pristine = _fingerprint(built)
    wrong: list[str] = []
    gone: dict[str, frozenset[str] | None] = {}
    for surface, (outcome, folder) in _delete_outcomes(case, built, tmp_path, capsys).items():
        must_answer = bool(case.deleted) and not case.refusal_ok
        faults = _refusal_faults(surface, outcome, _fingerprint(folder) != pristine, must_answer=must_answer)
        if faults is not None:
            wrong += faults
            gone[surface] = None
        else:
            gone[surface] = frozenset(base) - frozenset(_contents(folder))
            if not case.deleted:
                wrong.append(f"{surface}: took a delete it must refuse (deleted {sorted(gone[surface] or ())})")
            elif gone[surface] not in case.deleted:
                wrong.append(
                    f"{surface}: deleted {sorted(gone[surface] or ())!r:.300}, expected one of "
                    f"{[sorted(ids) for ids in case.deleted]!r:.300}"
                )
    if not wrong and len(set(gone.values())) > 1:
        wrong.append(f"the surfaces disagree: {gone}")
    assert not wrong, f"delete case {case.name}:\n" + "\n".join(wrong)


# --- odd index paths -------------------------------------------------------------------------------------------

PATH_KINDS = [
    "symlink",  # issue 49's item 2: the write must reach the folder the link names, or be refused
    "trailing-slash",
    "spaces-and-unicode",
    "foreign-files",  # item 7: files the manifest does not name are the user's: kept, or the write refused
    "a-file-of-the-index",
    "an-empty-folder",
    "missing",
]
PATHS_TO_WRITE = {"trailing-slash", "spaces-and-unicode"}  # the others but symlink and foreign-files: refused
FOREIGN = {"notes.txt": b"mine", "sub/kept.txt": b"also mine", "s000099.index.faiss": b"not faiss"}


def _odd_path(kind: str, root: Path, built: Path) -> tuple[Path, Path]:
    """(the path given to the write, the index folder it names) for ``kind``, laid out under ``root``."""
    real = root / "real" / "idx"
    shutil.copytree(built, real)
    if kind == "symlink":
        (root / "link").symlink_to(real.parent / "idx", target_is_directory=True)
        return root / "link", real
    if kind == "trailing-slash":
        return Path(f"{real}/"), real
    if kind == "spaces-and-unicode":
        moved = real.parent / "my índex 日本 dir"
        real.rename(moved)
        return moved, moved
    if kind == "foreign-files":
        for name, data in FOREIGN.items():
            (real / name).parent.mkdir(exist_ok=True)
            (real / name).write_bytes(data)
        return real, real
    if kind == "a-file-of-the-index":
        return real / "manifest.json", real
    if kind == "an-empty-folder":
        (root / "empty").mkdir()
        return root / "empty", real
    return root / "nowhere", real


def _add_at(surface: str, given: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> Outcome:
    if surface == "CLI":
        return _cli(["index", "add", str(given), "--corpus", str(corpus)], capsys, report="added ")[0]
    if surface == "Python":

        def add() -> None:
            with Retriever.load(given) as retriever:
                retriever.add([Document("n1", NEW_TEXT)])

        return _python(add)[0]
    outcome, retriever = _python(lambda: Retriever.load(given))  # `whitevec serve` says this line and stops
    if retriever is None:
        return outcome
    with (
        retriever,
        TestClient(create_app(retriever, ServeSettings(writable=True)), raise_server_exceptions=False) as c,
    ):
        return _http(_post(c, "/documents", _body(ROW)))


@pytest.mark.parametrize("kind", PATH_KINDS)
def test_an_add_through_an_odd_index_path_writes_the_index_it_names_or_nothing(
    kind: str, built: Path, base: dict[str, tuple[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "more.jsonl"
    corpus.write_bytes(_jsonl(ROW)[1])
    wrong: list[str] = []
    answered: dict[str, bool] = {}
    for surface in ("CLI", "Python", "HTTP"):
        root = tmp_path / surface
        given, real = _odd_path(kind, root, built)
        before = _tree(root)
        outcome = _add_at(surface, given, corpus, capsys)
        after = _tree(root)
        faults = _refusal_faults(surface, outcome, after != before, must_answer=kind in PATHS_TO_WRITE)
        answered[surface] = faults is None
        if faults is not None:
            wrong += faults
            continue
        if kind not in {*PATHS_TO_WRITE, "symlink", "foreign-files"}:
            wrong.append(f"{surface}: took a write it must refuse")
        if _contents(real) != {**base, **ADDED}:
            wrong.append(
                f"{surface}: the index {real.name} holds {_difference(_contents(real), {**base, **ADDED})}"
            )
        if kind == "symlink" and not (root / "link").is_symlink():
            wrong.append(f"{surface}: the link became {'a folder' if (root / 'link').is_dir() else 'nothing'}")
        lost = [
            name for name, data in FOREIGN.items() if kind == "foreign-files" and not _holds(real / name, data)
        ]
        if lost:
            wrong.append(f"{surface}: the write removed or changed the user's {lost}")
        stray = sorted({name.split("/")[0] for name, _ in after} - {"real", "link", "empty"})
        if stray:
            wrong.append(f"{surface}: left {stray} beside the index")
    if not wrong and len(set(answered.values())) > 1:
        wrong.append(f"the surfaces disagree (answered): {answered}")
    assert not wrong, f"index path {kind}:\n" + "\n".join(wrong)


def _holds(path: Path, data: bytes) -> bool:
    return path.is_file() and path.read_bytes() == data


# --- odd documents coming back ----------------------------------------------------------------------------------

ODD_DOCUMENTS: dict[str, tuple[str, dict[str, Any] | None]] = {
    "t-nul": ("the dog\x00running", {"m": "\x00"}),
    "t-u2028": ("the dog\u2028running", {"big": HUGE, "neg": -(2**63) - 1}),
    "t-ansi": ("the dog \x1b[31mred\x1b[0m", {"z": -0.0}),
    "t-lines": ("the dog\nis\r\nrunning", {"pipe": "a|b", "tab": "a\tb"}),
    "t-bidi": ("the dog \u202eenil\u202c running", None),
    'a,"b"': ('the cat, "quoted" | piped', {"s": 'x,"y"'}),
    "n\n1": ("the girl is eating food", None),
    "t-long": (" ".join(["the dog is running"] * 12_000), None),
}


@pytest.fixture(scope="module")
def odd_built(tmp_path_factory: pytest.TempPathFactory, built: Path) -> Path:
    folder = tmp_path_factory.mktemp("odd-docs") / "idx"
    shutil.copytree(built, folder)
    with Retriever.load(folder) as retriever:
        retriever.add([Document(doc_id, text, meta) for doc_id, (text, meta) in ODD_DOCUMENTS.items()])
    return folder


@pytest.mark.parametrize("table_format", ["json", "csv", "table", "markdown"])
def test_odd_documents_come_back_whole_on_every_surface(
    table_format: str, odd_built: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Texts and metadata with NUL, U+2028, ANSI escapes, line breaks, bidi overrides, commas, quotes and pipes,
    and ids with a comma or a line break: whole in Python, over HTTP and in the CLI's JSON and CSV; a drawn or
    Markdown table prints without failing."""
    k = COUNT + len(ODD_DOCUMENTS)
    wanted = {doc_id: (text, meta) for doc_id, (text, meta) in ODD_DOCUMENTS.items()}
    wrong: list[str] = []
    outcome, out = _cli(["search", str(odd_built), QUERY, "-k", str(k), "--format", table_format], capsys)
    if not outcome.answered:
        wrong.append(f"CLI --format {table_format}: {outcome.problem or outcome.refused}")
    elif table_format == "json":
        found = {hit["id"]: (hit["text"], hit["metadata"]) for hit in json.loads(out)[0]["hits"]}
        wrong += [
            f"CLI json: {doc_id!r} came back as {found.get(doc_id)!r:.200}"
            for doc_id in wanted
            if found.get(doc_id) != wanted[doc_id]
        ]
    elif table_format == "csv":
        limit = csv.field_size_limit(1 << 30)  # t-long's text is past the 128 kB csv reads by default
        try:
            rows = list(csv.DictReader(io.StringIO(out)))
        finally:
            csv.field_size_limit(limit)
        texts = {row["id"]: row["text"] for row in rows}
        wrong += [
            f"CLI csv: {doc_id!r} came back as {texts.get(doc_id)!r:.200}"
            for doc_id in wanted
            if texts.get(doc_id) != wanted[doc_id][0]
        ]
    if table_format == "json":  # the other surfaces once
        with Retriever.load(odd_built) as retriever:
            hits = retriever.search([QUERY], k=k)[0]
            found = {hit.id: (hit.text, hit.metadata) for hit in hits}
            wrong += [
                f"Python: {i!r} came back as {found.get(i)!r:.200}" for i in wanted if found.get(i) != wanted[i]
            ]
            with TestClient(create_app(retriever, ServeSettings()), raise_server_exceptions=False) as client:
                result = _post(client, "/search", {"queries": [QUERY], "k": k}).json()["results"][0]
                found = dict(
                    zip(result["ids"], zip(result["texts"], result["metadata"], strict=True), strict=True)
                )
                wrong += [
                    f"HTTP: {i!r} came back as {found.get(i)!r:.200}" for i in wanted if found.get(i) != wanted[i]
                ]
    assert not wrong, "\n".join(wrong)
