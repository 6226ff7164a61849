"""Starting a server: check that the address can be bound and load the index (both failing before any socket
opens), then run uvicorn with one or more worker processes."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import errno
import gc
import logging
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from fastapi import FastAPI

from whitevec.errors import BadInputError, DataNotFoundError, WhitevecError
from whitevec.service.app import create_app
from whitevec.service.connections import ServerConfig, server_options
from whitevec.service.middleware import is_loopback
from whitevec.service.settings import API_KEY_ENV, ENV_PREFIX, INDEX_ENV, MODEL_ENV, ServeSettings
from whitevec.service.worker import RetrieverLike

logger = logging.getLogger(__name__)

T = TypeVar("T")


def in_passing_thread(load: Callable[[], T]) -> T:
    """``load()`` run in a thread that ends when it returns; its exception, if any, raised here.

    Why: torch's OpenMP runtime (libgomp) keeps a pool of threads per thread that starts a parallel region. If
    loading the model starts one in the main thread (``model.to(torch.bfloat16)`` does), the encoder thread
    later gets a second pool, libgomp sees more threads than cores and throttles both: measured on 2 cores,
    a bf16 query took 14.7 ms on one core in the encoder thread against 7.3 ms on two when the model was
    loaded in a passing thread, whose pool goes with it (docs/notes/openmp-pools.md)."""
    # Leaving the block joins the pool's one thread, so it has ended (and its OpenMP pool with it) on return.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="whitevec-load") as pool:
        return pool.submit(load).result()


def serial_tokenizer() -> None:
    """Tokenize on the encoder thread alone (``TOKENIZERS_PARALLELISM=false``) unless the variable is set.

    Why: a server's encoder calls carry at most a few dozen short texts, too few for the tokenizer's own thread
    pool to pay; its threads only compete with torch's for the cores. At 32 clients on 2 cores, /search gave
    242.5 and 257.8 QPS with it on (the library's default) against 258.8 and 262.3 off (two rounds,
    docs/notes/tokenizer-threads.md). Set before the model loads; worker processes inherit it."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def freeze_loaded_heap() -> None:
    """Collect cyclic garbage once, then take every object alive now (the model, tokenizer, index, imported
    modules: about 490,000 with all-MiniLM-L6-v2) out of the cyclic garbage collector's sight.

    Why: a full collection walks every tracked object while holding the GIL, and Python starts one whenever
    the objects promoted since the last reach a quarter of the old ones. With the model loaded that took 184-195
    ms (benchmarks/results/gc_pause.md), during which no request moved: a server started fresh paused once
    in its first few hundred requests (p99 228-265 ms at 8 clients against a p50 of about 42 on /search).
    Frozen objects are never freed, and they live as long as the server anyway; what requests create is still
    collected as before."""
    gc.collect()
    gc.freeze()


def load_retriever(
    index_dir: str | os.PathLike[str], compute: str = "index", model: str | os.PathLike[str] | None = None
) -> RetrieverLike:
    """``Retriever.load`` with a clear error for a folder that is not there; queries are encoded with the
    index's own arithmetic, or with ``compute`` (torch, bf16, int8) when it names another, by the index's model
    (found at ``model`` when it moved; see :func:`whitevec.encoders.models.identity.index_model_folder`)."""
    folder = Path(index_dir)
    if not folder.is_dir():
        raise DataNotFoundError(f"index folder {folder} does not exist; build one with `whitevec index build`")
    from whitevec.index import Retriever

    def load() -> RetrieverLike:
        # No vector cache: a server would otherwise write every query anyone sends into a cache on disk.
        if compute == "index":
            retriever: RetrieverLike = Retriever.load(folder, cache=False, model=model)
            return retriever
        from whitevec.encoders.loading import load_encoder
        from whitevec.encoders.models.identity import index_model_folder
        from whitevec.index import read_manifest

        manifest = read_manifest(folder.expanduser(), verify=False)
        encoder = load_encoder(
            index_model_folder(manifest, model),
            manifest["pooling"],
            max_length=manifest["max_length"],
            backend=compute,
            cache=False,
        )
        return Retriever.load(folder, encoder=encoder)

    return in_passing_thread(load)


def served_app(
    index_dir: str | os.PathLike[str], settings: ServeSettings, model: str | os.PathLike[str] | None = None
) -> FastAPI:
    """The app one server process serves: the tokenizer on the encoder thread, the index loaded (its model found
    at ``model`` when it moved), and the heap frozen once it is all built (both ``serve`` with one process and
    each worker of ``app_from_env``)."""
    serial_tokenizer()
    app = create_app(load_retriever(index_dir, settings.compute, model), settings)
    freeze_loaded_heap()
    return app


def app_from_env() -> FastAPI:
    """App factory for ``uvicorn --factory`` (several workers): serves the index in $WHITEVEC_SERVE_INDEX, its
    model found where $WHITEVEC_SERVE_MODEL says when that is set."""
    index_dir = os.environ.get(INDEX_ENV)
    if not index_dir:
        raise BadInputError(f"set {INDEX_ENV} to the index folder to serve")
    return served_app(index_dir, ServeSettings.from_env(), os.environ.get(MODEL_ENV) or None)


def check_workers(manifest: dict[str, Any], workers: int) -> None:
    """Refuse several worker processes on an index whose vectors live in Milvus Lite (the manifest names no
    Milvus server): Milvus Lite opens its data in one process only, so a second worker would fail to start
    and be restarted forever."""
    from whitevec.index.milvus.store import is_local_uri

    uri = manifest.get("backend_uri")
    if workers > 1 and manifest.get("backend") == "milvus" and (not uri or is_local_uri(str(uri))):
        raise BadInputError(
            f"--workers {workers} cannot serve this index: its vectors are in Milvus Lite, which opens its data "
            "folder in one process only; use --workers 1, or build the index on a Milvus server (--uri http://...)"
        )


def check_address(host: str, port: int) -> None:
    """Prove that ``host:port`` can be bound, as uvicorn will bind it (every address the host resolves to,
    SO_REUSEADDR on, IPv6 sockets IPv6 only), and let it go again: run before the index loads, so a port in use
    costs milliseconds rather than the load, and is told in one line.

    Raises:
        BadInputError: the host does not resolve, or an address cannot be bound: in use (naming the process
            that listens there, where /proc tells), a port below 1024 without the privilege, an address this
            machine lacks.
    """
    try:
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BadInputError(f"cannot serve on {host}:{port}: --host does not resolve ({exc.strerror})") from None
    unavailable: OSError | None = None
    bound = 0
    for family, kind, protocol, _, address in dict.fromkeys(found):
        try:
            probe = socket.socket(family, kind, protocol)
        except OSError:  # a family this system lacks: skipped, as asyncio's create_server skips it
            continue
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                # One address of several missing (`localhost` -> ::1 with IPv6 off, common in containers) is
                # no fault while another binds: uvicorn serves on what it can bind.
                if exc.errno != errno.EADDRNOTAVAIL:
                    raise BadInputError(f"cannot serve on {host}:{port}: {_bind_fault(exc, port)}") from None
                unavailable = exc
                continue
            bound += 1
    if not bound and unavailable is not None:
        raise BadInputError(f"cannot serve on {host}:{port}: {_bind_fault(unavailable, port)}")


def _bind_fault(exc: OSError, port: int) -> str:
    """Why a bind failed, with what to do about it."""
    if exc.errno == errno.EADDRINUSE:
        holders = listening_processes(port)
        held = f" by {', '.join(f'pid {pid} ({name})' for pid, name in holders)}" if holders else ""
        return f"the address is already in use{held}; stop that server or choose another --port"
    if exc.errno in (errno.EACCES, errno.EPERM):
        if port < 1024:
            return (
                "permission denied: ports below 1024 need root (or CAP_NET_BIND_SERVICE); use --port 1024 or above"
            )
        return "permission denied"
    if exc.errno == errno.EADDRNOTAVAIL:
        return "--host is not an address of this machine"
    return exc.strerror or str(exc)


def listening_processes(port: int) -> list[tuple[int, str]]:
    """``(pid, name)`` of the processes with a TCP socket listening on ``port`` that this user may see (Linux:
    /proc/net/tcp and tcp6, then each process's open files); empty where /proc cannot tell."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()  # sl, local address:port (hex), remote, state (0A: LISTEN), ..., inode
                if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return []
    holders: list[tuple[int, str]] = []
    for pid in _pids():
        if any(link in inodes for link in _open_files(pid)):
            with contextlib.suppress(OSError):
                holders.append((pid, Path(f"/proc/{pid}/comm").read_text().strip()))
    return holders


def _pids() -> list[int]:
    with contextlib.suppress(OSError):
        return sorted(int(name) for name in os.listdir("/proc") if name.isdigit())
    return []


def _open_files(pid: int) -> Iterator[str]:
    """What the file descriptors of ``pid`` point at; nothing for a process gone or not ours to read."""
    folder = f"/proc/{pid}/fd"
    with contextlib.suppress(OSError):
        for fd in os.listdir(folder):
            with contextlib.suppress(OSError):
                yield os.readlink(f"{folder}/{fd}")


@contextlib.contextmanager
def _startup_failure(host: str, port: int) -> Iterator[None]:
    """uvicorn exits (status 3) when it cannot start, e.g. when another process took the address after
    ``check_address``: one line instead, naming that process when that is why."""
    try:
        yield
    except SystemExit as exc:
        if exc.code in (0, None):
            raise
        check_address(host, port)
        raise WhitevecError(f"the server did not start on {host}:{port}; see the log above") from None


def run_app(
    app: FastAPI, settings: ServeSettings, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info"
) -> None:
    """Serve ``app`` in this process, with the connection limits of ``settings``, until SIGINT or SIGTERM."""
    import uvicorn

    server = uvicorn.Server(ServerConfig(app, settings, host=host, port=port, log_level=log_level))
    # uvicorn raises the SIGINT it handled again after shutting down: a normal end here.
    with _startup_failure(host, port), contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        raise WhitevecError(f"the server did not start on {host}:{port}; see the log above")


def serve(
    index_dir: str | os.PathLike[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    settings: ServeSettings | None = None,
    log_level: str = "info",
    model: str | os.PathLike[str] | None = None,
    writable: bool = False,
) -> None:
    """Check the address (``check_address``), load the index (failing before any socket opens when it is missing
    or corrupt, or its model is missing or another) and serve it; ``model`` is where the index's model is now,
    when it moved. ``writable``: accept writes (as ``settings.writable``, which the environment may set too)."""
    import uvicorn

    if workers < 1:
        raise BadInputError(f"--workers must be at least 1, got {workers}")
    settings = settings if settings is not None else ServeSettings.from_env()
    if writable:
        settings = dataclasses.replace(settings, writable=True)
    if settings.writable and workers > 1:
        # Each worker process holds its own copy of the index: one would not see another's writes, and its own
        # next write would be refused as made over a version it never loaded.
        raise BadInputError(
            f"--writable needs --workers 1 (got {workers}): each worker process holds its own copy of the index "
            "and would not see the others' writes"
        )
    if not 0 <= port <= 65535:
        raise BadInputError(f"--port must be in 0..65535, got {port}")
    check_address(host, port)
    if workers == 1:
        app: FastAPI | None = served_app(index_dir, settings, model)
    else:
        serial_tokenizer()  # the worker processes inherit it
        # Every worker loads the index itself; here only check what fails fast and cheaply (the folder, its
        # checksums, the backend, the model's presence), so a bad index stops the command before any process
        # starts.
        from whitevec.encoders.models.identity import index_model_folder
        from whitevec.index import read_manifest

        manifest = read_manifest(Path(index_dir).expanduser(), verify=True)
        check_workers(manifest, workers)
        # Found and verified here (its checksum then cached); the workers load that very folder.
        os.environ[MODEL_ENV] = str(index_model_folder(manifest, model))
        app = None
    if not is_loopback(host) and settings.api_key is None:
        logger.warning(
            "serving on %s without an API key: anyone who reaches this port can query the index; "
            "set %s before binding beyond 127.0.0.1 (until then only Host headers naming this server's IP "
            "address or a name in %sALLOWED_HOSTS are answered)",
            host,
            API_KEY_ENV,
            ENV_PREFIX,
        )
    if app is not None:
        run_app(app, settings, host=host, port=port, log_level=log_level)
        return
    # Each worker process loads its own copy of the index from the folder named in the environment, and reads
    # its settings from there too.
    os.environ[INDEX_ENV] = str(Path(index_dir).resolve())
    with _startup_failure(host, port):
        uvicorn.run(
            "whitevec.service.run:app_from_env",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            **server_options(settings, log_level),
        )
