"""``ray_encode`` (``whitevec encode --engine ray``): a corpus encoded to a folder of Parquet shards, listed in
``encode.json`` once every shard is written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from whitevec.datasets.shards import corpus_files, plan_units
from whitevec.engines.ray.pipeline import encode_units
from whitevec.engines.ray.session import ray_session, require_ray
from whitevec.engines.ray.shards import auto_unit_bytes, hashes_name, shard_name
from whitevec.engines.ray.workdir import ENCODED_LOG, STATE, build_lock, file_fingerprint
from whitevec.errors import BadInputError
from whitevec.utils.io import write_json

ENCODE_MANIFEST = "encode.json"


def ray_encode(
    corpus: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    encoder: dict[str, Any],
    transform_file: str | os.PathLike[str] | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    cpus_per_worker: float = 1.0,
    gpus_per_worker: float = 0.0,
    unit_bytes: int | None = None,
    quiet: bool = True,
) -> dict[str, Any]:
    """Encode a corpus to Parquet shards in the folder ``out`` (``shard-NNNNNN.parquet``: id, text, metadata,
    vector), through a saved transform if given; ``encode.json`` (written last) lists the shards, counts and
    the encoder. Resumable like :func:`~whitevec.engines.ray.build.ray_build`: the shards already written are
    kept; a second encode into the same ``out`` while one runs is refused. Returns that listing."""
    require_ray()
    folder = Path(out).expanduser()
    if folder.exists() and not folder.is_dir():
        raise BadInputError(f"{folder} exists and is not a folder; --engine ray writes a folder of Parquet shards")
    files = corpus_files(corpus)
    unit_bytes = unit_bytes or auto_unit_bytes(files)
    units = plan_units(files, unit_bytes)
    transform_path = None if transform_file is None else str(Path(transform_file).expanduser().resolve())
    config = {
        "files": file_fingerprint(files),
        "unit_bytes": unit_bytes,
        "encoder": encoder,
        "transform": transform_path,
    }
    with build_lock(folder):
        _check_resumable(folder, config)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ENCODE_MANIFEST).unlink(missing_ok=True)
        write_json(folder / STATE, {"config": config})
        with ray_session(ray_address, quiet=quiet) as ray:
            counts = encode_units(
                ray,
                units,
                folder,
                folder / ENCODED_LOG,
                encoder,
                workers=workers,
                cpus_per_worker=cpus_per_worker,
                gpus_per_worker=gpus_per_worker,
                moments=False,
                transform_file=transform_path,
            )
        for unit in units:
            (folder / hashes_name(unit.index)).unlink(missing_ok=True)
        listing = {
            "shards": [{"file": shard_name(u.index), "rows": counts[u.index], "source": u.file} for u in units],
            "count": sum(counts.values()),
            "encoder": encoder,
            "transform": transform_path,
        }
        write_json(folder / ENCODE_MANIFEST, listing)
        return listing


def _check_resumable(folder: Path, config: dict[str, Any]) -> None:
    """Refuse a non-empty ``folder`` unless it holds an unfinished encode of the same corpus and settings."""
    if not (folder.exists() and any(folder.iterdir())):
        return
    try:
        same = json.loads((folder / STATE).read_text(encoding="utf-8")).get("config") == config
    except (OSError, ValueError):
        same = False
    if not same:
        raise BadInputError(
            f"{folder} is not empty and holds no unfinished encode of this corpus with these settings; "
            "choose another --out"
        )
