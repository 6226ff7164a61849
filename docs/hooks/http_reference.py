"""The HTTP reference (docs/reference/http.md) and docs/reference/openapi.json, from the service's OpenAPI
document; both committed, so they read on GitHub too.

The document is the one ``whitevec serve`` answers at /openapi.json, for a server with the default limits and
an API key (so the key header and the 401 answers are documented), whose index has a lexical part (so /search's
mode, fusion and candidates are documented; a server whose index has none offers mode dense only). It is made
without an index: the app is built around a retriever stand-in that only states a manifest and a count, and no
request is ever served. The
source page holds an introduction and the marker ``<!-- http-reference -->``, which this hook replaces with
every route (method, path, description, request body, answers) and every schema (fields, types, limits)
below it.

``python docs/hooks/http_reference.py`` (``make reference``) rewrites both; as an mkdocs hook it only checks
them, so a strict build fails on files the service has outgrown (tests/test_docs.py checks them too).
"""

from __future__ import annotations

import html
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

PAGE = "reference/http.md"
DOCUMENT = "reference/openapi.json"
MARKER = "<!-- http-reference -->"
METHODS = ("get", "post", "put", "patch", "delete")
DOCS = Path(__file__).resolve().parents[1]

log = logging.getLogger("mkdocs.hooks.http_reference")


class _NoIndex:
    """What create_app reads from a retriever when it builds the app; searching is never asked of it."""

    # An index with a lexical part, as `index build --lexical bm25` records it (what /info and /search read), of
    # the default model's 384-d vectors (the length of the vectors /search and /documents take).
    manifest: dict[str, Any] = {  # noqa: RUF012 - read only
        "lexical": {"ranker": "bm25", "method": "lucene", "k1": 1.2, "b": 0.75, "analyzer": {"name": "english"}},
        "encoder_dim": 384,
    }
    count = 0

    def search(self, queries: list[str], k: int = 10) -> Any:
        raise AssertionError("the docs build serves no request")

    def embed(self, texts: list[str]) -> Any:
        raise AssertionError("the docs build serves no request")


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of a server with the default limits and an API key."""
    from whitevec.service.app import create_app
    from whitevec.service.settings import ServeSettings

    app = create_app(_NoIndex(), ServeSettings(api_key="documented"))
    try:
        return app.openapi()
    finally:
        app.state.worker.close(1.0)  # the thread create_app started for the retriever


# ---- Markdown -----------------------------------------------------------------------------------------------
def _text(value: str) -> str:
    """Prose from the document, safe in Markdown and in a table cell."""
    return html.escape(" ".join(value.split()), quote=False).replace("|", "\\|").replace("*", "\\*")


def schema_anchor(name: str) -> str:
    return "schema-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def route_anchor(method: str, path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{method} {path}".lower()).strip("-")


def _number(value: float) -> str:
    return f"{value:g}"


def _limits(schema: dict[str, Any]) -> list[str]:
    """The constraints of one schema, in words."""
    out = []
    for low, high, unit in (("minItems", "maxItems", "items"), ("minLength", "maxLength", "characters")):
        if low in schema or high in schema:
            out.append(f"{schema.get(low, 0)} to {schema.get(high, 'any number of')} {unit}")
    if "minimum" in schema or "maximum" in schema:
        low_text = _number(schema["minimum"]) if "minimum" in schema else "-inf"
        high_text = _number(schema["maximum"]) if "maximum" in schema else "inf"
        out.append(f"{low_text} to {high_text}")
    if "enum" in schema:
        out.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"]))
    return out


def type_text(schema: dict[str, Any]) -> str:
    """A schema's type in words, schemas linked: ``array of string``, ``SearchResponse``, ``object or null``."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{schema_anchor(name)})"
    if "anyOf" in schema or "oneOf" in schema:
        return " or ".join(type_text(option) for option in schema.get("anyOf", schema.get("oneOf", [])))
    kind = schema.get("type", "any")
    if kind == "array":
        items = schema.get("items", {})
        limits = _limits(items)
        inner = type_text(items)
        if "anyOf" in items or "oneOf" in items:
            inner = f"({inner})"
        if limits:
            inner += f" ({'; '.join(limits)})"
        return f"array of {inner}"
    if kind == "object" and schema.get("additionalProperties") is True:
        return "object (any keys)"
    return str(kind)


def _field_rows(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    rows = []
    for name, field in schema.get("properties", {}).items():
        notes = _limits(field)
        if "default" in field:
            notes.append(f"default `{json.dumps(field['default'])}`")
        description = _text(field.get("description", ""))
        if notes:
            description = f"{description} ({'; '.join(notes)})" if description else "; ".join(notes)
        rows.append(f"| `{name}` | {type_text(field)} | {'yes' if name in required else 'no'} | {description} |")
    return rows


def _body_schema(content: dict[str, Any]) -> tuple[str, str]:
    """(media type, type text) of a request or response body."""
    for media, body in content.items():
        return media, type_text(body.get("schema", {}))
    return "", ""


def route_markdown(method: str, path: str, operation: dict[str, Any], security: dict[str, Any]) -> str:
    parts = [f"### `{method.upper()} {path}` {{#{route_anchor(method, path)}}}", ""]
    if operation.get("description") or operation.get("summary"):
        parts += [_text(operation.get("description") or operation["summary"]), ""]
    for requirement in operation.get("security", []):
        for scheme_name in requirement:
            scheme = security.get(scheme_name, {})
            where = f"the `{scheme.get('name', scheme_name)}` {scheme.get('in', '')}".rstrip()
            parts += [f"Key: {where}. {_text(scheme.get('description', ''))}", ""]
    body = operation.get("requestBody")
    if body is not None:
        media, kind = _body_schema(body.get("content", {}))
        need = "required" if body.get("required") else "optional"
        parts += [f"Request body ({media}, {need}): {kind}", ""]
    parts += ["| status | body | when |", "|---|---|---|"]
    for status, answer in operation.get("responses", {}).items():
        _, kind = _body_schema(answer.get("content", {}))
        parts.append(f"| {status} | {kind} | {_text(answer.get('description', ''))} |")
    return "\n".join([*parts, ""])


def schema_markdown(name: str, schema: dict[str, Any]) -> str:
    parts = [f"### {name} {{#{schema_anchor(name)}}}", ""]
    if schema.get("description"):
        parts += [_text(schema["description"]), ""]
    if schema.get("additionalProperties") is False:
        parts += ["No other fields are accepted.", ""]
    rows = _field_rows(schema)
    if rows:
        parts += ["| field | type | required | description |", "|---|---|---|---|", *rows, ""]
    return "\n".join(parts)


def http_markdown(document: dict[str, Any]) -> str:
    """The routes, then the schemas, of an OpenAPI document as Markdown."""
    components = document.get("components", {})
    security = components.get("securitySchemes", {})
    parts = ["## Routes", ""]
    for path, item in document.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                parts.append(route_markdown(method, path, item[method], security))
    parts += ["## Schemas", ""]
    for name, schema in components.get("schemas", {}).items():
        parts.append(schema_markdown(name, schema))
    return "\n".join(parts)


# ---- the files ----------------------------------------------------------------------------------------------
def current_files(page_text: str) -> dict[str, str]:
    """The page (``page_text`` with everything below its marker written afresh) and the document, by their path
    under docs/."""
    if MARKER not in page_text:
        raise ValueError(f"{PAGE} has no {MARKER} marker: the HTTP reference has nowhere to go")
    document = openapi_document()
    page = page_text[: page_text.index(MARKER) + len(MARKER)] + "\n\n" + http_markdown(document)
    return {PAGE: page, DOCUMENT: json.dumps(document, indent=2) + "\n"}


def stale_files(docs: Path = DOCS) -> list[str]:
    """The files under ``docs`` that differ from what the service answers now."""
    page_text = (docs / PAGE).read_text(encoding="utf-8")
    written = {name: docs / name for name in (PAGE, DOCUMENT)}
    return [
        name
        for name, text in current_files(page_text).items()
        if not written[name].is_file() or written[name].read_text(encoding="utf-8") != text
    ]


# ---- mkdocs events ----------------------------------------------------------------------------------------
def on_pre_build(config: Any) -> None:
    from mkdocs.exceptions import PluginError

    try:
        stale = stale_files(Path(config["docs_dir"]))
    except ModuleNotFoundError as exc:
        needs = "the HTTP reference needs the serve extra (pip install 'whitevec[serve]')"
        raise PluginError(f"{needs}: {exc}") from exc
    if stale:
        log.warning("%s do not match the service: run `make reference` and commit them", ", ".join(stale))


def main() -> None:
    from whitevec.utils.io import atomic_path

    for name, text in current_files((DOCS / PAGE).read_text(encoding="utf-8")).items():
        with atomic_path(DOCS / name) as tmp:
            tmp.write_text(text, encoding="utf-8")
        print(DOCS / name, file=sys.stderr)


if __name__ == "__main__":
    main()
