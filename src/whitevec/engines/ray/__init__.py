"""Encode, fit and index on a Ray cluster (``--engine ray``): the same index as :func:`whitevec.index.build_index`,
with the encoding spread over an actor pool and the documents kept in Milvus beside the vectors.

Needs the optional extra ``whitevec[ray]``. The steps, each resumable:

1. **Plan.** The corpus (one file or a glob of JSONL, CSV/TSV, text or Parquet shards) is cut into units
   (:mod:`whitevec.datasets.shards`): pieces of about ``unit_bytes``, each parsed by a worker with whitevec's
   strict readers, so a bad row is named by file and line and the documents equal the single-process build's.
2. **Encode.** A Ray Data pipeline maps the units through an actor pool (``workers`` actors, each one encoder
   from :func:`~whitevec.encoders.loading.load_encoder`, ``cpus_per_worker`` CPUs and ``gpus_per_worker`` GPUs).
   Each actor writes one Parquet shard per unit (ids, texts, metadata, raw vectors), the unit's whitening moments
   (``Whitening.partial_fit``, exact float64) and the ids' 64-bit hashes, each file written under a temporary
   name and renamed. Ray replaces a dead actor and retries its unit; a retried unit rewrites the same files.
   The driver appends each finished unit to ``encoded.log``.
3. **Fit.** The moments are merged in unit order with ``Whitening.merge``: the fit equals one ``fit`` over all
   vectors up to rounding. Duplicate ids are found from the hashes (and confirmed on the ids themselves).
4. **Write.** Shard by shard, in unit order, the vectors are transformed and upserted into one Milvus collection
   with their row number (the same as a single-process build's), document id, text and metadata; the driver
   appends each shard to ``inserted.log`` after Milvus has flushed it. Upserts make a shard written twice (a
   driver killed between the write and the log) count once.
5. **Publish.** The index folder (manifest last, ``docs: "milvus"``) is swapped in whole as by a local build.

The work lives in ``.<out>.ray-build/`` beside the index folder: ``state.json`` (what the build is: a rerun with
other files or settings starts over), the logs, the shards and, for Milvus Lite, the collection. A build killed
at any point (driver SIGKILL included) continues from there when run again; the older index stays in place
until the new one is whole. A bad input (a row that does not parse, a duplicate id, an empty corpus) removes the
work folder and any collection it made.

The modules, one job each: :mod:`~whitevec.engines.ray.session` (Ray, the address, the cluster's workers),
:mod:`~whitevec.engines.ray.shards` (the files of each unit, unit sizes, duplicate ids),
:mod:`~whitevec.engines.ray.actors` (the encoding actor), :mod:`~whitevec.engines.ray.pipeline` (the actor
pool), :mod:`~whitevec.engines.ray.workdir` (the work folder, its lock, state and logs),
:mod:`~whitevec.engines.ray.moments` (the transform and its fit), :mod:`~whitevec.engines.ray.collection`
(the collection and its writes), :mod:`~whitevec.engines.ray.build` (``ray_build``) and
:mod:`~whitevec.engines.ray.encode` (``ray_encode``).
"""

from whitevec.engines.ray.actors import EncodeUnits, actor_encoder
from whitevec.engines.ray.build import check_backend, ray_build
from whitevec.engines.ray.collection import open_collection
from whitevec.engines.ray.encode import ENCODE_MANIFEST, ray_encode
from whitevec.engines.ray.moments import check_fit_sample, fit_on_sample, transform_plan
from whitevec.engines.ray.session import RayConnectionError, check_address, require_ray
from whitevec.engines.ray.shards import auto_unit_bytes, shard_name, units_per_call, write_shard
from whitevec.engines.ray.workdir import ENCODED_LOG, INSERTED_LOG, build_lock, work_folder

__all__ = [
    "ENCODED_LOG",
    "ENCODE_MANIFEST",
    "INSERTED_LOG",
    "EncodeUnits",
    "RayConnectionError",
    "actor_encoder",
    "auto_unit_bytes",
    "build_lock",
    "check_address",
    "check_backend",
    "check_fit_sample",
    "fit_on_sample",
    "open_collection",
    "ray_build",
    "ray_encode",
    "require_ray",
    "shard_name",
    "transform_plan",
    "units_per_call",
    "work_folder",
    "write_shard",
]
