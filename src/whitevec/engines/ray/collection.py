"""The build's Milvus collection: opened again on a resumed run (or made new, named in the state first), and
written shard by shard in unit order, each shard logged in ``inserted.log`` once Milvus has flushed it."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.datasets.shards import CorpusUnit
from whitevec.engines.ray.shards import read_shard, shard_name
from whitevec.engines.ray.workdir import INSERTED_LOG, STATE, append_log, read_log
from whitevec.errors import WhitevecError
from whitevec.index.milvus.store import MILVUS_LOCAL, MilvusStore, new_collection_name
from whitevec.index.stores.vector import stored_form
from whitevec.transforms import Transform
from whitevec.utils.io import write_json

logger = logging.getLogger(__name__)

_WRITE_ROWS = 1000


def open_collection(
    folder: Path,
    state: dict[str, Any],
    dim: int,
    metric: str,
    kind: str,
    params: dict[str, Any] | None,
    uri: str | None,
    *,
    bm25: dict[str, Any] | None = None,
) -> MilvusStore:
    """The build's collection: the one an earlier run of it started, or a new one (named in the state first);
    with ``bm25``, Milvus's BM25 on its text field (:mod:`whitevec.index.milvus.bm25`)."""
    real_uri = str(folder / MILVUS_LOCAL) if uri is None else uri
    name = state.get("collection")
    if name is None:
        name = state["collection"] = new_collection_name()
        write_json(folder / STATE, state)
    try:
        return MilvusStore(real_uri, name, dim, metric, kind, params, stored_uri=uri, docs=True, bm25=bm25)
    except WhitevecError as exc:
        if "has no collection" not in str(exc) and "does not exist" not in str(exc):
            raise
    except Exception as exc:  # pymilvus's own errors: the collection exists but cannot be loaded
        if uri is not None:
            raise
        # Milvus Lite writes a segment's files in place, so a driver killed while it wrote one leaves data it
        # cannot load ("file seems not fully written"). The shards are the build's record, kept in the work
        # folder: start the build's own Lite data again and write every shard.
        logger.warning("the build's Milvus Lite data cannot be loaded (%s); writing every shard again", exc)
        shutil.rmtree(real_uri, ignore_errors=True)
    # A new collection holds none of the shards an earlier run may have logged as written.
    (folder / INSERTED_LOG).unlink(missing_ok=True)
    return MilvusStore(
        real_uri, name, dim, metric, kind, params, create=True, stored_uri=uri, docs=True, bm25=bm25
    )


def write_vectors(
    store: MilvusStore,
    folder: Path,
    units: list[CorpusUnit],
    counts: dict[int, int],
    fitted: Transform | None,
    metric: str,
) -> None:
    """Transform each shard and upsert it with its documents, in unit order (rows numbered as a local build
    numbers them), skipping the shards ``inserted.log`` lists."""
    log = folder / INSERTED_LOG
    done = read_log(log)
    row = 0
    for unit in units:
        count = counts[unit.index]
        if count and unit.index not in done:
            ids, texts, metas, vectors = read_shard(folder / shard_name(unit.index))
            stored = stored_form(fitted, vectors, metric)
            rows = np.arange(row, row + count, dtype=np.int64)
            for start in range(0, count, _WRITE_ROWS):
                stop = start + _WRITE_ROWS
                store.upsert_documents(
                    rows[start:stop], stored[start:stop], ids[start:stop], texts[start:stop], metas[start:stop]
                )
            store.flush()
            append_log(log, unit.index, count)
        row += count
