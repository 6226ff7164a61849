"""Starting a server: load the index (failing before any socket opens), then run uvicorn with one or more
worker processes."""

from __future__ import annotations

import ipaddress
import logging
import os
from pathlib import Path

from fastapi import FastAPI

from whitevec.errors import BadInputError, DataNotFoundError
from whitevec.service.app import create_app
from whitevec.service.settings import API_KEY_ENV, INDEX_ENV, ServeSettings
from whitevec.service.worker import RetrieverLike

logger = logging.getLogger(__name__)


def load_retriever(index_dir: str | os.PathLike[str]) -> RetrieverLike:
    """``Retriever.load`` with a clear error for a folder that is not there."""
    folder = Path(index_dir)
    if not folder.is_dir():
        raise DataNotFoundError(f"index folder {folder} does not exist; build one with `whitevec index build`")
    from whitevec.index import Retriever

    # No vector cache: a server would otherwise write every query anyone sends into a cache on disk.
    retriever: RetrieverLike = Retriever.load(folder, cache=False)
    return retriever


def app_from_env() -> FastAPI:
    """App factory for ``uvicorn --factory`` (several workers): serves the index in $WHITEVEC_SERVE_INDEX."""
    index_dir = os.environ.get(INDEX_ENV)
    if not index_dir:
        raise BadInputError(f"set {INDEX_ENV} to the index folder to serve")
    return create_app(load_retriever(index_dir), ServeSettings.from_env())


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    index_dir: str | os.PathLike[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    settings: ServeSettings | None = None,
    log_level: str = "info",
) -> None:
    """Load the index (failing before any socket opens when it is missing or corrupt) and serve it."""
    import uvicorn

    if workers < 1:
        raise BadInputError(f"--workers must be at least 1, got {workers}")
    if not 0 <= port <= 65535:
        raise BadInputError(f"--port must be in 0..65535, got {port}")
    settings = settings if settings is not None else ServeSettings.from_env()
    if workers == 1:
        retriever: RetrieverLike | None = load_retriever(index_dir)
    else:
        # Every worker loads the index itself; here only check what fails fast and cheaply (the folder, its
        # checksums, the model's presence), so a bad index stops the command before any process starts.
        from whitevec.index import read_manifest
        from whitevec.models import resolve_model

        read_manifest(Path(index_dir).expanduser(), verify=True)
        resolve_model(read_manifest(Path(index_dir).expanduser(), verify=False)["model"])
        retriever = None
    if not _is_loopback(host) and settings.api_key is None:
        logger.warning(
            "serving on %s without an API key: anyone who reaches this port can query the index; "
            "set %s before binding beyond 127.0.0.1",
            host,
            API_KEY_ENV,
        )
    if retriever is not None:
        uvicorn.run(create_app(retriever, settings), host=host, port=port, log_level=log_level)
        return
    # Each worker process loads its own copy of the index from the folder named in the environment.
    os.environ[INDEX_ENV] = str(Path(index_dir).resolve())
    uvicorn.run(
        "whitevec.service.run:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
    )
