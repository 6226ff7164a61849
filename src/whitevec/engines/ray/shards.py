"""The files each encoded unit leaves in the work folder (a Parquet shard of ids, texts, metadata and vectors,
the ids' hashes, the whitening moments), the unit sizes planned for a corpus, and the duplicate-id check over
the shards."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.datasets.retrieval import Document
from whitevec.datasets.shards import DEFAULT_UNIT_BYTES, CorpusUnit
from whitevec.errors import BadInputError
from whitevec.utils.io import atomic_path

MIN_UNIT_BYTES = 16 << 10
UNITS_PER_CORPUS = 64
CALLS_PER_WORKER = 8
MAX_UNITS_PER_CALL = 4


def shard_name(index: int) -> str:
    return f"shard-{index:06d}.parquet"


def moments_name(index: int) -> str:
    return f"moments-{index:06d}.safetensors"


def hashes_name(index: int) -> str:
    return f"ids-{index:06d}.npy"


def id_hashes(ids: list[str]) -> np.ndarray:
    """64-bit hashes of document ids (blake2b), to find duplicates across shards without gathering the ids."""
    return np.array(
        [int.from_bytes(hashlib.blake2b(i.encode("utf-8"), digest_size=8).digest(), "little") for i in ids],
        dtype=np.uint64,
    )


def write_shard(path: Path, docs: list[Document], vectors: np.ndarray) -> None:
    """A Parquet shard: ``id``, ``text``, ``metadata`` (JSON text or null) and ``vector`` (float32 list), in
    a folder that exists (FileNotFoundError otherwise: a removed work folder stays removed)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    x = np.ascontiguousarray(vectors, dtype=np.float32)
    dim = int(x.shape[1]) if x.ndim == 2 else 0
    table = pa.table(
        {
            "id": pa.array([d.id for d in docs], pa.string()),
            "text": pa.array([d.text for d in docs], pa.string()),
            "metadata": pa.array(
                [None if d.metadata is None else json.dumps(d.metadata, ensure_ascii=False) for d in docs],
                pa.string(),
            ),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1), pa.float32()), dim),
        }
    )
    with atomic_path(path, suffix=".parquet", create_parent=False) as tmp:
        pq.write_table(table, tmp)


def read_shard(path: Path) -> tuple[list[str], list[str], list[str | None], np.ndarray]:
    """ids, texts, metadata JSON texts and vectors (float32, n x d) of a shard written by :func:`write_shard`."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return (
        table.column("id").to_pylist(),
        table.column("text").to_pylist(),
        table.column("metadata").to_pylist(),
        _vectors_of(table),
    )


def read_shard_vectors(path: Path) -> np.ndarray:
    """Only the vectors (float32, n x d) of a shard: the other columns are not read."""
    import pyarrow.parquet as pq

    return _vectors_of(pq.read_table(path, columns=["vector"]))


def _vectors_of(table: Any) -> np.ndarray:
    column = table.column("vector").combine_chunks()
    dim = column.type.list_size
    return np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)


def check_ids(folder: Path, units: list[CorpusUnit], counts: dict[int, int]) -> None:
    """BadInputError naming an id that occurs twice in the corpus (hash duplicates confirmed on the ids)."""
    parts = [np.load(folder / hashes_name(u.index), allow_pickle=False) for u in units if counts[u.index]]
    if not parts:
        raise BadInputError("the corpus holds no documents")
    hashes = np.concatenate(parts)
    ordered = np.sort(hashes)
    repeated = set(ordered[1:][ordered[1:] == ordered[:-1]].tolist())
    if not repeated:
        return
    seen: dict[str, str] = {}
    for unit in units:
        if not counts[unit.index]:
            continue
        ids, _, _, _ = read_shard(folder / shard_name(unit.index))
        marks = np.load(folder / hashes_name(unit.index), allow_pickle=False)
        for doc_id, mark in zip(ids, marks.tolist(), strict=True):
            if mark not in repeated:
                continue
            if doc_id in seen:
                raise BadInputError(
                    f"document id {doc_id!r} occurs more than once in the corpus ({seen[doc_id]} and "
                    f"{unit.file}); ids must be unique"
                )
            seen[doc_id] = unit.file


def units_per_call(units: int, workers: int) -> int:
    """Units encoded together in one actor call: several when the plan has many more units than the workers
    need (fewer padded tokens, see :meth:`EncodeUnits.__call__`), but still about CALLS_PER_WORKER calls per
    worker so that the last call leaves little idle time. Depends on the plan's size and the workers only: a
    resumed build with the same workers groups its units as the first run did."""
    return max(1, min(MAX_UNITS_PER_CALL, units // max(1, workers * CALLS_PER_WORKER)))


def auto_unit_bytes(files: list[Path]) -> int:
    """Unit size from the corpus size alone (so a rerun plans the same units): about UNITS_PER_CORPUS units,
    each between MIN_UNIT_BYTES and DEFAULT_UNIT_BYTES, so a small corpus still spreads over the workers."""
    total = sum(f.stat().st_size for f in files)
    return max(MIN_UNIT_BYTES, min(DEFAULT_UNIT_BYTES, total // UNITS_PER_CORPUS))
