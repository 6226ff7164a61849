"""The service's error answers: each exception a route can meet mapped to its HTTP status and one line (JSON
``{"detail": ...}``), a broken request schema worded as one line naming the limit, and what OpenAPI says of each
status. Bugs are not answered here: :class:`~whitevec.service.middleware.BugMiddleware` logs them and answers 500.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from whitevec.datasets.retrieval import ID_RULE
from whitevec.errors import BadInputError, DimensionMismatchError, IndexDamagedError, WhitevecError
from whitevec.index.search.fusion import FUSION_FORMS
from whitevec.index.search.modes import ADD_LEXICAL
from whitevec.preflight import blank_text_message, describe_fault, empty_texts_message
from whitevec.service.schemas import MAX_ID_CHARS, ErrorResponse, ValidationErrorResponse
from whitevec.service.settings import API_KEY_ENV, API_KEY_HEADER, ServeSettings
from whitevec.service.worker import WorkerStoppedError
from whitevec.utils.io import storage_errno, write_target

logger = logging.getLogger(__name__)

# What each error status means, in the OpenAPI document of every route that can answer it.
_ERRORS = {
    400: "The Host header names another server (a defence against DNS rebinding), or the body is not UTF-8.",
    401: f"Missing or wrong {API_KEY_HEADER} header (servers started with {API_KEY_ENV} only).",
    405: "A write to a server started without --writable (refused before the body is read).",
    408: "The body did not arrive within body_timeout_s.",
    409: "A document id the index already holds, under on_existing 'error' (named; nothing written), or an "
    "index another process wrote to since the server loaded it.",
    413: "The body is larger than max_body_bytes.",
    422: "The body is not JSON or breaks the schema (whose limits are this server's max_queries, max_texts, "
    "max_text_chars, max_k and max_ids), or a write the index cannot take (an id with white space at either end, "
    "a document with no token the model knows).",
    500: "A fault on the server (logged there; the answer does not describe it).",
    503: "The worker thread that owns the retriever has stopped, the server has max_connections open, the "
    "index is damaged (a file unreadable since the server loaded it; /health then says so), or another fault of "
    "the server's environment (a read-only folder, no permission: the one line the CLI prints, its paths from "
    "the index's name on).",
    507: "No space left on the server's disk or in its quota for a write (the one line the CLI prints, its paths "
    "from the index's name on).",
}
# What a search that met a damaged index answers (the file's path stays in the server's log).
DAMAGED_DETAIL = "the index is damaged: a file became unreadable since the server loaded it (logged on the server)"


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error answers a route can give."""
    return {
        code: {"model": ValidationErrorResponse if code == 422 else ErrorResponse, "description": _ERRORS[code]}
        for code in codes
    }


class WriteConflictError(Exception):
    """A write the index's state refuses (409): an id it holds under on_existing error, or a version another
    writer swapped in since the server loaded the index."""


def no_space(exc: BaseException) -> bool:
    """Whether ``exc`` (an environment fault: an OSError or a SQLite error) says the disk or the quota is full."""
    code = exc.errno if isinstance(exc, OSError) else storage_errno(exc)
    return code in (errno.ENOSPC, errno.EDQUOT)


def public_text(message: str, index_path: Path) -> str:
    """``message`` with the folder holding the index at ``index_path`` left out of its paths: a client reads
    ``ix/docs.sqlite`` or a write's ``.ix.*.tmp/manifest.json``, and learns nothing more of the server's files."""
    # A write goes to the folder a symbolic link names (write_target), so its faults name that folder's path.
    for path in dict.fromkeys((index_path, write_target(index_path))):
        folder = str(path.parent)
        if folder in (".", os.sep):  # paths already relative to it, or the root: name the index alone
            message = message.replace(str(path), path.name)
        else:
            message = message.replace(folder + os.sep, "")
    return message


# ---- a broken request schema as one line ----------------------------------------------------------------
# The limit (a ServeSettings field) behind each list of a request body; the lists of texts among them.
_COUNT_LIMITS = {"queries": "max_queries", "texts": "max_texts", "documents": "max_texts", "ids": "max_ids"}
_TEXT_LISTS = ("queries", "texts")
_MODES_OF_INDEX = "those the schema lists (dense; lexical and hybrid need an index with a lexical part)"


def _limit_message(error: dict[str, Any], loc: list[str], settings: ServeSettings) -> str | None:
    """Our wording, naming the setting, for a broken schema constraint; None for the others."""
    kind = str(error.get("type", ""))
    fields = [p for p in loc if p != "body"]
    value = error.get("input")
    if fields == ["k"] and kind in ("greater_than_equal", "less_than_equal"):
        return f"k must be between 1 and the limit max_k ({settings.max_k}), got {value}"
    return _list_limit_message(kind, fields, value, settings) or _search_choice_message(kind, fields, value)


def _list_limit_message(kind: str, fields: list[str], value: Any, settings: ServeSettings) -> str | None:
    """Our wording for a broken constraint of a list of the body (queries, texts, documents, ids) or of an item
    in it (``fields``: where, without "body"); None for the other fields."""
    if not fields or fields[0] not in _COUNT_LIMITS:
        return None
    name = fields[0]
    if len(fields) == 1:
        limit = _COUNT_LIMITS[name]
        if kind == "too_long":
            given = len(value) if isinstance(value, list) else "more"
            return f"too many {name}: {given} given, the limit {limit} is {getattr(settings, limit)}"
        if kind == "too_short":
            return empty_texts_message(name) if name in _TEXT_LISTS else f"{name} is empty; give at least one"
        return None
    where = name + "".join(f"[{part}]" if part.isdigit() else f".{part}" for part in fields[1:])
    if kind == "string_too_long" and isinstance(value, str):
        text = name in _TEXT_LISTS or fields[-1] == "text"
        limit = f"max_text_chars is {settings.max_text_chars}" if text else f"for an id is {MAX_ID_CHARS}"
        return f"{where} has {len(value)} characters, the limit {limit}"
    if kind == "string_pattern_mismatch" and fields[-1] == "id" and isinstance(value, str) and value.strip():
        return f"{where} is {value!r}; {ID_RULE}"
    if kind in ("string_too_short", "string_pattern_mismatch"):
        return blank_text_message(where)
    if kind == "string_unicode":  # a text pattern is matched on valid Unicode only
        return f"{where} holds an unpaired surrogate escape (\\ud800-\\udfff); send valid text"
    return None


def _search_choice_message(kind: str, fields: list[str], value: Any) -> str | None:
    """Our wording for a bad mode, fusion or candidates (whose valid values depend on the index); None for the
    other fields."""
    if fields == ["mode"] and kind == "literal_error":
        return f"unknown search mode {value!r} for this index; valid: {_MODES_OF_INDEX}"
    if fields == ["fusion"] and kind in ("string_pattern_mismatch", "string_type"):
        return f"unknown fusion {value!r}; valid: {FUSION_FORMS}"
    if fields == ["candidates"] and kind in ("greater_than_equal", "int_type"):
        return f"candidates must be an integer >= 1 (each ranker's top candidates x k), got {value!r}"
    if len(fields) == 1 and fields[0] in ("fusion", "candidates") and kind == "extra_forbidden":
        return f"{fields[0]} applies to hybrid search, and this index has no lexical part; {ADD_LEXICAL}"
    return None


def _error_message(
    errors: Sequence[Any], settings: ServeSettings | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """A one-line message and a JSON-safe list from pydantic/FastAPI validation errors (whose ``input`` may be
    raw bytes that JSON cannot hold)."""
    clean: list[dict[str, Any]] = []
    parts: list[str] = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ())]
        msg = str(error.get("msg", "invalid"))
        kind = str(error.get("type", ""))
        where = ".".join(p for p in loc if p != "body") or "body"
        limit = _limit_message(error, loc, settings) if settings is not None else None
        if kind == "json_invalid":
            msg = f"body is not valid JSON ({error.get('ctx', {}).get('error', msg)})"
            where = "body"
        elif limit is not None:
            msg, where = limit, ""
        elif kind == "extra_forbidden":
            msg = "unknown field; a request may only hold the documented fields"
        clean.append({"loc": loc, "msg": msg, "type": kind})
        parts.append(f"{where}: {msg}" if where else msg)
    return "invalid request: " + "; ".join(parts), clean


def _unprocessable(message: str, errors: list[dict[str, Any]]) -> JSONResponse:
    return JSONResponse({"detail": message, "errors": errors}, status_code=422)


# ---- the handlers ---------------------------------------------------------------------------------------
def add_error_handlers(app: FastAPI, settings: ServeSettings) -> None:
    """Bad requests as 422 with one line naming the limit, a stopped worker as 503, a write's conflict as 409,
    faults of the environment as 507 (no space) or 503 with the CLI's line; bugs are :class:`BugMiddleware`'s
    logged 500."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _unprocessable(*_error_message(exc.errors(), settings))

    @app.exception_handler(WorkerStoppedError)
    async def _stopped(_: Request, exc: WorkerStoppedError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.exception_handler(WriteConflictError)
    async def _conflict(_: Request, exc: WriteConflictError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @app.exception_handler(IndexDamagedError)
    async def _damaged(_: Request, exc: IndexDamagedError) -> JSONResponse:
        logger.error("index damaged: %s", exc)  # one line naming the file
        return JSONResponse({"detail": DAMAGED_DETAIL}, status_code=503)

    @app.exception_handler(WhitevecError)
    async def _whitevec_error(_: Request, exc: WhitevecError) -> JSONResponse:
        if isinstance(exc, BadInputError | DimensionMismatchError):
            return _unprocessable(str(exc), [{"loc": ["body"], "msg": str(exc), "type": "value_error"}])
        logger.error("request failed: %s", exc)  # the message may name server files: keep it in the log
        return JSONResponse({"detail": "server error (logged on the server)"}, status_code=500)

    @app.exception_handler(OSError)
    @app.exception_handler(sqlite3.Error)
    async def _environment(_: Request, exc: Exception) -> JSONResponse:
        line = describe_fault(exc)
        if line is None:  # a SQLite error that no disk explains: a bug, for BugMiddleware
            raise exc
        status = 507 if no_space(exc) else 503
        logger.error("environment fault, answered %d: %s", status, line)  # the CLI's line (exit 3), no traceback
        path = getattr(app.state.retriever, "path", None)
        return JSONResponse({"detail": line if path is None else public_text(line, Path(path))}, status)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if isinstance(exc.__cause__, RecursionError):  # json.loads gave up on a body nested too deep
            message = f"invalid request: body: JSON nested too deeply to parse ({exc.__cause__})"
            return _unprocessable(message, [{"loc": ["body"], "msg": message, "type": "json_invalid"}])
        return await http_exception_handler(request, exc)
