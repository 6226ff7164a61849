"""What /info may show of an index manifest (nothing that tells where files live on the server), the version it
describes, and what /search can do on that index."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from whitevec.service.schemas import IndexInfo, LexicalInfo, SearchChoices, SearchInfo

_PATH_KEYS = ("path", "dir", "folder", "file", "uri", "root")


def public_manifest(manifest: Any) -> Any:
    """The manifest without anything that tells where files live: path-like keys are dropped, absolute paths
    in values are cut to their last part (a model loaded from /home/x/models/m shows as ``m``)."""
    if isinstance(manifest, dict):
        out: dict[str, Any] = {}
        for key, value in manifest.items():
            name = str(key).lower()
            if any(name == p or name.endswith("_" + p) for p in _PATH_KEYS):
                continue
            out[str(key)] = public_manifest(value)
        return out
    if isinstance(manifest, list | tuple):
        return [public_manifest(v) for v in manifest]
    if isinstance(manifest, str) and _looks_like_path(manifest):
        return Path(manifest).name or manifest
    return manifest


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "~", "\\\\", "file:")) or (len(value) > 2 and value[1:3] in (":\\", ":/"))


def index_info(manifest: Mapping[str, Any], count: int) -> IndexInfo:
    """The version of ``manifest``: live and deleted counts, segments, generation (``count``: the live count of
    a manifest that states none)."""
    segments = manifest.get("segments")
    return IndexInfo(
        count=int(manifest.get("count", count)),
        deleted=int(manifest.get("deleted", 0)),
        segments=len(segments) if segments else 1,
        version=int(manifest.get("generation", 0)),
    )


def search_choices(manifest: dict[str, Any]) -> tuple[SearchChoices, SearchInfo]:
    """What /search can do on the index of ``manifest`` (its modes and defaults: the request schema's
    constraints) and what /info shows of it (the lexical part's ranker, parameters and analyzer)."""
    from whitevec.index.search.fusion import CANDIDATE_FACTOR
    from whitevec.index.search.modes import MODES, search_defaults

    mode, fusion = search_defaults(manifest)
    record = manifest.get("lexical")
    lexical = None
    if record is not None:
        analyzer = record["analyzer"]
        lexical = LexicalInfo(
            ranker=record["ranker"],
            method=record.get("method", "milvus"),  # a Milvus BM25 record names no bm25s method
            k1=record["k1"],
            b=record["b"],
            analyzer=analyzer["name"] if isinstance(analyzer, dict) else str(analyzer),
        )
    modes = MODES if lexical is not None else ("dense",)
    # None: a stand-in retriever's manifest that names no encoder dimension (texts only).
    dim = None if manifest.get("encoder_dim") is None else int(manifest["encoder_dim"])
    external = manifest.get("encoder") == "external"
    choices = SearchChoices(modes, mode, fusion.spec, CANDIDATE_FACTOR, dim, external)
    info = SearchInfo(
        modes=list(modes),
        default_mode=mode,
        default_fusion=fusion.spec,
        default_candidates=CANDIDATE_FACTOR,
        lexical=lexical,
        input_dim=dim,
        external=external,
    )
    return choices, info
