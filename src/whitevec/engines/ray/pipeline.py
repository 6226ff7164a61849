"""The Ray Data pipeline: the units not yet encoded, grouped into calls and mapped through a pool of
:class:`~whitevec.engines.ray.actors.EncodeUnits` actors; each finished unit is logged as it comes back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from whitevec.datasets.shards import CorpusUnit
from whitevec.engines.ray.actors import EncodeUnits
from whitevec.engines.ray.session import default_workers
from whitevec.engines.ray.shards import shard_name, units_per_call
from whitevec.engines.ray.workdir import append_log, read_log
from whitevec.errors import BadInputError, WhitevecError


def encode_units(
    ray: Any,
    units: list[CorpusUnit],
    folder: Path,
    log: Path,
    encoder: dict[str, Any],
    *,
    workers: int | None,
    cpus_per_worker: float,
    gpus_per_worker: float,
    moments: bool,
    transform_file: str | None = None,
    max_text_bytes: int | None = None,
    described: dict[str, Any] | None = None,
) -> dict[int, int]:
    """Encode the units not yet in ``log`` on an actor pool of ``workers`` actors (None: as many as the cluster's
    CPUs hold, :func:`default_workers`); returns ``{unit: rows}`` of all units. The actors' description of their
    encoder (:func:`encoder_fields`) is put into ``described`` when given."""
    done = {u: c for u, c in read_log(log).items() if (folder / shard_name(u)).exists()}
    pending = [u for u in units if u.index not in done]
    if pending:
        workers = workers or default_workers(ray, cpus_per_worker)
        actor_kwargs = {
            "encoder": encoder,
            "folder": str(folder),
            "moments": moments,
            "transform_file": transform_file,
            "max_text_bytes": max_text_bytes,
            "threads": max(1, int(cpus_per_worker)),
        }
        dataset = _dataset(ray, units, pending, workers, cpus_per_worker, gpus_per_worker, actor_kwargs)
        _collect(dataset, log, done, described)
    missing = [u.index for u in units if u.index not in done]
    if missing:
        raise WhitevecError(f"the Ray pipeline ended without encoding units {missing[:5]}; run the build again")
    return done


def _dataset(
    ray: Any,
    units: list[CorpusUnit],
    pending: list[CorpusUnit],
    workers: int,
    cpus_per_worker: float,
    gpus_per_worker: float,
    actor_kwargs: dict[str, Any],
) -> Any:
    """The Ray dataset that maps the pending units, a group per call, through the actor pool."""
    import ray.data

    # Groups cut from the whole plan (the units still to encode of each), so that a resumed build groups,
    # batches and so rounds its units as the first run did.
    per_call = units_per_call(len(units), workers)
    todo = {u.index for u in pending}
    groups = [[u for u in units[i : i + per_call] if u.index in todo] for i in range(0, len(units), per_call)]
    items = [{"units": json.dumps([u.to_json() for u in group])} for group in groups if group]
    return ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        EncodeUnits,
        batch_size=1,
        # One call at a time per actor: a call queued behind a busy actor at the end would leave another
        # idle for up to a call's length.
        compute=ray.data.ActorPoolStrategy(size=max(1, min(workers, len(items))), max_tasks_in_flight_per_actor=1),
        num_cpus=cpus_per_worker,
        num_gpus=gpus_per_worker or None,
        fn_constructor_kwargs=actor_kwargs,
    )


def _collect(dataset: Any, log: Path, done: dict[int, int], described: dict[str, Any] | None) -> None:
    """Run the pipeline, logging each unit it returns into ``log`` and ``done``; a bad input an actor handed
    back, or a WhitevecError inside Ray's wrappers, is raised as itself."""
    try:
        for row in dataset.iter_rows():
            unit, count = int(row["unit"]), int(row["count"])
            if row["error"]:
                raise BadInputError(str(row["error"]))
            if described is not None and not described:
                described.update(json.loads(str(row["encoder"])))
            append_log(log, unit, count)
            done[unit] = count
    except WhitevecError:
        raise
    except Exception as exc:
        found = _whitevec_error(exc)
        if found is not None:
            raise type(found)(str(found)) from None
        raise


def _whitevec_error(exc: BaseException) -> WhitevecError | None:
    """The WhitevecError a worker raised, found inside Ray's wrappers (``cause``, ``__cause__``)."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, WhitevecError):
            # Ray's RayTaskError(X) subclasses X too; its message carries a traceback: keep the original's.
            inner = getattr(current, "cause", None)
            return inner if isinstance(inner, WhitevecError) else current
        stack += [getattr(current, "cause", None), current.__cause__, current.__context__]
    return None
