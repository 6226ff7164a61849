"""manifest.json of an index folder: what built it, a sha256 of every file, and a sha256 of itself.

The manifest is the one place an index says how its queries must be made (model, pooling, transform, metric),
so it is checked as strictly as the data files: every field by name and type (:data:`FIELDS`), file names only
inside the folder, and its own checksum (``manifest_sha256`` over the other fields), so a hand edit of
``pooling`` or ``metric``, which would silently change results, is refused with a clear message.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from whitevec._version import __version__
from whitevec.errors import BadInputError, CorruptFileError
from whitevec.index.encodings.spec import parse_encoding
from whitevec.index.search.modes import search_field_problem
from whitevec.utils.io import atomic_path, sha256_file

MANIFEST = "manifest.json"
# 2: the manifest carries its own checksum and every field is checked.
FORMAT_VERSION = 2
MAX_MANIFEST_BYTES = 1 << 20  # a real one is a few KiB; refuse to parse a planted giant
SELF_CHECKSUM = "manifest_sha256"


CHOICE_FIELD = "fusion_choice"


def _integer(minimum: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _sha256(v: Any) -> bool:
    return isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v)


def _optional(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _int_list(v: Any) -> bool:
    return isinstance(v, list) and all(_integer(-(1 << 30))(i) for i in v)


def _mapping(v: Any) -> bool:
    return isinstance(v, dict)


def _fusion_choice(v: Any) -> bool:
    """The form of a ``fusion_choice`` record (:mod:`whitevec.index.build_fusion`)."""
    form = {"fusion": _text, "rule": _text, "scores": _mapping, "pseudo_queries": _mapping, "seconds": _number}
    return (
        isinstance(v, dict)
        and set(v) == set(form)
        and all(check(v[k]) for k, check in form.items())
        and search_field_problem({"mode": "hybrid", "fusion": v["fusion"]}) is None
        and all(isinstance(k, str) and _number(x) for k, x in v["scores"].items())
    )


def _index_params(v: Any) -> bool:
    """An object whose ``encoding``, when present (indexes built before encodings lack it: float32), is a
    canonical encoding spec (whitevec.index.encodings.spec)."""
    if not isinstance(v, dict):
        return False
    if "encoding" not in v:
        return True
    try:
        return isinstance(v["encoding"], str) and parse_encoding(v["encoding"]).spec == v["encoding"]
    except BadInputError:
        return False


def _transform_info(v: Any) -> bool:
    return (
        isinstance(v, dict)
        and _text(v.get("spec"))
        and _text(v.get("class"))
        and _mapping(v.get("params"))
        and _text(v.get("fit_on"))
        and _integer(0)(v.get("fit_rows"))
        and isinstance(v.get("linear"), bool)
        and _text(v.get("file"))
    )


def _raw_vectors_record(v: Any) -> bool:
    """The ``raw_vectors`` record (whitevec.index.folder.raw_vectors): the dtype the encoder's vectors are kept
    in."""
    return isinstance(v, dict) and set(v) == {"dtype"} and v["dtype"] == "float32"


def _unfilled_record(v: Any) -> bool:
    """The ``unfilled`` record of an index created empty (whitevec.index.empty)."""
    return isinstance(v, dict) and set(v) == {"transform"} and _optional(_text)(v["transform"])


def _count(v: Any) -> bool:
    return _integer(0)(v)


# The "lexical" record (whitevec.index.lexical.bm25.LexicalIndex.record): each field and its check.
LEXICAL_RECORD: dict[str, Callable[[Any], bool]] = {
    "ranker": lambda v: v == "bm25",
    "library": _text,
    "method": _text,
    "k1": _number,
    "b": _number,
    "delta": _number,
    "analyzer": _mapping,
    "documents": _count,
    "documents_without_terms": _count,
    "terms": _count,
    "postings": _count,
    "build_seconds": _number,
}


# The ``lexical`` record of an index whose BM25 Milvus keeps (library "milvus"; whitevec.index.milvus.bm25): the
# analyzer whitevec's, milvus_analyzer the analyzer_params of the collection's text field.
MILVUS_LEXICAL_RECORD: dict[str, Callable[[Any], bool]] = {
    "ranker": lambda v: v == "bm25",
    "library": lambda v: v == "milvus",
    "analyzer": _mapping,
    "milvus_analyzer": _mapping,
    "k1": _number,
    "b": _number,
    "documents": _count,
}


def _segment_list(v: Any) -> bool:
    """The ``segments`` record (:mod:`whitevec.index.segments.view`): entries with a plain, distinct ``prefix``, a
    ``base`` row that follows the rows before it, a ``rows`` count and, optionally, the segment's own
    ``lexical`` record."""
    if not isinstance(v, list) or not v:
        return False
    base, prefixes = 0, set()
    for entry in v:
        if not (
            isinstance(entry, dict)
            and set(entry) <= {"prefix", "base", "rows", "lexical"}
            and _text(entry.get("prefix"))
            and (entry["prefix"] == "" or (entry["prefix"].endswith(".") and is_plain_name(entry["prefix"])))
            and entry["prefix"] not in prefixes
            and entry.get("base") == base
            and _integer(0)(entry.get("rows"))
            and ("lexical" not in entry or is_lexical_record(entry["lexical"]))
        ):
            return False
        prefixes.add(entry["prefix"])
        base += entry["rows"]
    return True


def is_lexical_record(v: Any) -> bool:
    """Whether ``v`` has the form of a ``lexical`` record: every field of :data:`LEXICAL_RECORD` (or, for a
    lexical part kept in Milvus, of :data:`MILVUS_LEXICAL_RECORD`), of its type, and no other."""
    if not isinstance(v, dict):
        return False
    form = MILVUS_LEXICAL_RECORD if v.get("library") == "milvus" else LEXICAL_RECORD
    return set(v) == set(form) and all(check(v[k]) for k, check in form.items())


# Every field an index manifest holds, with its check; (description, check, required).
FIELDS: dict[str, tuple[str, Callable[[Any], bool], bool]] = {
    "format_version": ("an integer", _integer(1), True),
    "whitevec": ("a version string", _text, True),
    SELF_CHECKSUM: ("a sha256 hex string", _text, True),
    "files": ("an object of file name -> {sha256, bytes}", _mapping, True),
    # "external": the vectors were given by the caller (whitevec.encoders.protocol.ExternalEncoder; ``model`` the
    # name given): no model loads. Absent: the index's own model made them.
    "encoder": ('"external"', lambda v: v == "external", False),
    "model": ("a string", _text, True),
    "model_fingerprint": ("a string or null", _optional(_text), True),
    # Where the model was and what it held (whitevec.encoders.models.identity); absent in indexes built before they
    # were
    # recorded, null for an encoder without a model folder.
    "model_path": ("a string or null", _optional(_text), False),
    "model_id": ("a string or null", _optional(_text), False),
    "model_sha256": ("a sha256 hex string or null", _optional(_sha256), False),
    "pooling": ("a string", _text, True),
    "layers": ("a list of integers or null", _optional(_int_list), True),
    # null: a static encoder folder with no token limit.
    "max_length": ("a positive integer or null", _optional(_integer(1)), True),
    "encoder_dim": ("a positive integer", _integer(1), True),
    "encoder_backend": ("a string", _text, True),
    "dim": ("a positive integer", _integer(1), True),
    "transform": (
        "null or an object with spec, class, params, fit_on, fit_rows, linear, file",
        _optional(_transform_info),
        True,
    ),
    "metric": ("a string", _text, True),
    "index_kind": ("a string", _text, True),
    "index_params": ("an object whose encoding, if any, is a valid encoding spec", _index_params, True),
    # The index's own search mode and fusion (whitevec.index.search.modes.search_defaults), when set at build or
    # by tune.
    "search": ("an object with a search mode and a fusion spec", lambda v: search_field_problem(v) is None, False),
    # How a build chose its fusion on pseudo-queries from its corpus (issue 53); absent: given, tuned, or built
    # before builds chose.
    CHOICE_FIELD: ("an object with fusion, rule, scores, pseudo_queries, seconds", _fusion_choice, False),
    "count": ("a non-negative integer", _integer(0), True),
    # Documents left out because they hold no token the model knows (whitevec.index.build.meaningful_documents).
    "skipped_documents": ("a non-negative integer", _integer(0), False),
    "backend": ("a string", _text, True),
    "backend_uri": ("a string or null", _optional(_text), True),
    "milvus_collection": ("a string or null", _optional(_text), True),
    # The version of the library that keeps the vectors, under the store's ``library`` name: "faiss" on FAISS
    # (Milvus indexes built before stores reported their own recorded faiss's too), "pymilvus" on Milvus.
    "faiss": ("a version string", _text, False),
    "pymilvus": ("a version string", _text, False),
    "created": ("a time stamp", _text, True),
    "build_seconds": ("a number", _number, True),
    "updated": ("a time stamp", _text, False),
    # Where the documents are: a registered document store (whitevec.index.stores.documents, checked by layout),
    # absent for "sqlite" (docs.sqlite in the folder); "milvus" (scalar fields of the collection) from --engine
    # ray.
    "docs": ("a string", _text, False),
    # An index written to since its build (whitevec.index.segments.view): its segments, the rows deleted (listed in
    # deleted.npy) and how many versions were written; absent: one segment of ``count`` rows, none deleted.
    "segments": ("a list of segments (prefix, base, rows[, lexical])", _segment_list, False),
    "deleted": ("a non-negative integer", _integer(0), False),
    # An index created empty (whitevec.index.empty): no vectors or lexical files until its first write builds
    # them, fitting ``transform`` (a spec, or null: none, or the one given fitted) on that write's vectors.
    "unfilled": ("an object with transform (a spec or null)", _unfilled_record, False),
    "generation": ("a non-negative integer", _integer(0), False),
    # The encoder's vectors before the transform, one file per segment (whitevec.index.folder.raw_vectors), kept
    # when the build was asked to (--keep-raw-vectors): a refit fits on them without encoding again.
    "raw_vectors": ("an object with dtype float32", _raw_vectors_record, False),
    # A Milvus index written to (whitevec.index.milvus.writes): the next row id it gives (ids are never reused);
    # absent: ``count``.
    "next_row": ("a non-negative integer", _integer(0), False),
    # The BM25 index beside the vectors (whitevec.index.lexical.bm25; its files checked by layout); absent: none,
    # as in every index built before it.
    "lexical": (
        "an object with "
        + ", ".join(LEXICAL_RECORD)
        + " (kept in Milvus: "
        + ", ".join(MILVUS_LEXICAL_RECORD)
        + ")",
        is_lexical_record,
        False,
    ),
}


def manifest_digest(data: dict[str, Any]) -> str:
    """sha256 of the manifest's fields other than its own checksum, in one canonical JSON form."""
    body = {k: v for k, v in data.items() if k != SELF_CHECKSUM}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def write_manifest(
    folder: Path, manifest: dict[str, Any], files: list[str], known: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Add format/version fields, the checksums of ``files`` (names inside ``folder``) and the manifest's own
    checksum; write atomically. Returns what was written. ``known``: the entries (sha256, bytes) of files
    linked unchanged from an earlier version, taken as they are rather than read again (an add to a large index
    hashes only what it wrote)."""
    data = {k: v for k, v in manifest.items() if k not in ("files", "format_version", "whitevec", SELF_CHECKSUM)}
    data["format_version"] = FORMAT_VERSION
    data["whitevec"] = __version__
    known = known or {}
    data["files"] = {
        name: dict(known[name])
        if name in known
        else {"sha256": sha256_file(folder / name), "bytes": (folder / name).stat().st_size}
        for name in sorted(files)
    }
    data[SELF_CHECKSUM] = manifest_digest(data)
    check_manifest(data, folder / MANIFEST)  # never write what reading would refuse
    with atomic_path(folder / MANIFEST) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return data


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_manifest(raw: bytes, path: Path) -> dict[str, Any]:
    """Decode and check manifest bytes read from ``path`` (named in every message).

    Raises:
        CorruptFileError: not UTF-8 JSON, too large, an unknown format version, a field missing, unknown or of
            the wrong type, a file name outside the folder, or a checksum that does not match (edited).
    """
    if len(raw) > MAX_MANIFEST_BYTES:
        raise CorruptFileError(f"{path} is {len(raw)} bytes, not an index manifest; rebuild the index")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise CorruptFileError(f"{path} is not readable JSON ({reason}); rebuild the index") from None
    if not isinstance(data, dict) or data.get("format_version") != FORMAT_VERSION:
        found = data.get("format_version") if isinstance(data, dict) else None
        raise CorruptFileError(
            f"{path} has index format {found!r}; this whitevec ({__version__}) reads format {FORMAT_VERSION}. "
            "Rebuild the index with this version."
        )
    check_manifest(data, path)
    return data


def check_manifest(data: dict[str, Any], path: Path) -> None:
    """Every field present, known and of its type; file names plain; the self-checksum right."""
    for name, (description, check, required) in FIELDS.items():
        if name not in data:
            if required:
                raise CorruptFileError(f"{path} lacks the field {name!r}; rebuild the index")
            continue
        if not check(data[name]):
            raise CorruptFileError(
                f"{path}: field {name!r} must be {description}, got {data[name]!r}; rebuild the index"
            )
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise CorruptFileError(f"{path} has unknown field(s) {', '.join(map(repr, unknown))}; rebuild the index")
    for name, info in data["files"].items():
        if not is_plain_name(name):
            raise CorruptFileError(
                f"{path} lists the file {name!r}, which is not a plain name inside the index folder; refusing it"
            )
        if not (isinstance(info, dict) and _text(info.get("sha256")) and _integer(0)(info.get("bytes"))):
            raise CorruptFileError(f"{path}: the entry of file {name!r} must hold sha256 and bytes")
    if data[SELF_CHECKSUM] != manifest_digest(data):
        raise CorruptFileError(
            f"{path} was edited after the build (its own checksum does not match its fields); an edited manifest "
            "could change how queries are made, so it is refused. Rebuild the index."
        )


def is_plain_name(name: str) -> bool:
    """A file name that stays inside its folder: no separators, no '.' or '..', no hidden or empty name."""
    return (
        bool(name)
        and name not in (".", "..")
        and not name.startswith(".")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
        and os.path.basename(name) == name
    )
