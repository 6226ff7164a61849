"""What an index folder holds: its file names and its segments (the entries of one version, with the store's own:
:func:`whitevec.index.stores.vector.version_entries`).

DIR/manifest.json           what built it, counts, versions, sha256 of every file below and of itself
DIR/transform.safetensors   the fitted transform (absent for transform "none")
DIR/docs.sqlite             row -> id, text, metadata (JSON), unless the documents live elsewhere (the manifest's
                            ``docs``: :mod:`whitevec.index.stores.documents`)
DIR/lexical.safetensors     the BM25 index of the documents' text (its sparse score matrix), and
DIR/lexical_terms.json      its terms, when the manifest has "lexical" (:mod:`whitevec.index.lexical.bm25`)
                            and it is not kept in Milvus (:mod:`whitevec.index.milvus.bm25`)
DIR/raw_vectors.npy         the encoder's vectors before the transform (float32, a row per document), when the
                            manifest has "raw_vectors" (:mod:`whitevec.index.folder.raw_vectors`)
DIR/...                     what the vector store keeps there (its ``files_for`` and ``folder_entries``: FAISS
                            index.faiss, binary.safetensors for sign codes, rescore.npy for +rescore; Milvus
                            Lite's milvus.db/)

An index written to since its build (:mod:`whitevec.index.segments.view`) holds segments: the files above (store,
documents, lexical, raw vectors) once per segment, each name led by the segment's prefix
(``s000003.index.faiss``; the build's own segment has none) and, with a lexical part, its term counts
(``lexical_counts.safetensors``), the store's trained, empty copy under ``template.``, and ``deleted.npy``, the
rows deleted.
"""

from __future__ import annotations

from typing import Any

TRANSFORM_FILE = "transform.safetensors"
DOCS_FILE = "docs.sqlite"
# The lexical index (whitevec.index.lexical.bm25): both files, exactly when the manifest has a "lexical" record
# whose library is not "milvus".
LEXICAL_MATRIX = "lexical.safetensors"
LEXICAL_TERMS = "lexical_terms.json"
LEXICAL_FILES = (LEXICAL_MATRIX, LEXICAL_TERMS)
# Each segment's term counts and document lengths, beside its lexical index, in an index written to since its
# build (whitevec.index.lexical.counts: BM25 weighted by every segment's live documents).
LEXICAL_COUNTS = "lexical_counts.safetensors"
# The encoder's vectors before the transform, per segment, when the manifest has "raw_vectors".
RAW_VECTORS_FILE = "raw_vectors.npy"
TEMPLATE_PREFIX = "template."  # the store trained at build, empty: what a new segment is made from
DELETED_FILE = "deleted.npy"  # the rows deleted, ascending int64 (a tombstone list)
# The transforms a FAISS pre-transform can express (export-faiss), recorded as "linear" in the manifest.
# Named, not imported: the classes are scikit-learn estimators, and reading a folder's layout loads none.
LINEAR_TRANSFORMS = ("Whitening", "Center")
LINEAR_NAMES = ", ".join(LINEAR_TRANSFORMS)


def segment_entries(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The segments of an index (prefix, base row, rows; see the module docstring): one, unprefixed, holding
    every row, for an index never written to since its build."""
    return list(manifest.get("segments") or [{"prefix": "", "base": 0, "rows": int(manifest["count"])}])


def total_rows(manifest: dict[str, Any]) -> int:
    """Rows numbered in the index, deleted ones included (the live documents are ``count``)."""
    return int(manifest["count"]) + int(manifest.get("deleted", 0))


def index_state(manifest: dict[str, Any]) -> dict[str, int]:
    """What ``index info`` and HTTP /info show of an index's writes: documents live and deleted (kept until a
    merge), segments, and the version (0: as built; each write adds one)."""
    return {
        "live": int(manifest["count"]),
        "deleted": int(manifest.get("deleted", 0)),
        "segments": len(segment_entries(manifest)),
        "version": int(manifest.get("generation", 0)),
    }
