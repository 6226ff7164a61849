"""``whitevec serve``: an index over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from whitevec.cli._options import IndexModelOpt
from whitevec.errors import BadInputError
from whitevec.preflight import existing_folder


def serve_command(
    index_dir: Annotated[Path, typer.Argument(help="Index folder written by `whitevec index build`.")],
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; set WHITEVEC_API_KEY before leaving 127.0.0.1.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8000,
    workers: Annotated[int, typer.Option("--workers", help="Processes, each with its own copy of the index.")] = 1,
    model: IndexModelOpt = None,
    writable: Annotated[
        bool,
        typer.Option(
            "--writable",
            help="Accept writes: POST /documents (add, upsert), /documents/delete and /compact (405 without it). "
            "Set WHITEVEC_API_KEY too: without a key, anyone who reaches the server can write. One worker only.",
        ),
    ] = False,
) -> None:
    """Serve an index over HTTP: /search, /embed, /info, /health, a search page at / and API docs at /docs; with
    --writable, the write routes too.

    Limits come from WHITEVEC_SERVE_* variables (see docs); WHITEVEC_API_KEY, when set, is required in the
    X-API-Key header.
    """
    existing_folder(index_dir, "index folder")
    try:
        from whitevec.service.run import serve
    except ImportError as exc:
        raise BadInputError(f"serving needs the serve extra: pip install 'whitevec[serve]' ({exc})") from None
    serve(index_dir, host=host, port=port, workers=workers, model=model, writable=writable)
