"""``whitevec serve``: an index over HTTP; ``whitevec mcp``: an index as a Model Context Protocol server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from whitevec.cli._options import DeviceOpt, IndexModelOpt
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


def mcp_command(
    index_dir: Annotated[Path, typer.Argument(help="Index folder written by `whitevec index build`.")],
    writable: Annotated[
        bool,
        typer.Option(
            "--writable",
            help="Offer the add and delete tools too (one write at a time, as `serve --writable`).",
        ),
    ] = False,
    model: IndexModelOpt = None,
    device: DeviceOpt = None,
) -> None:
    """Serve an index to an AI agent over the Model Context Protocol (stdio): tools search and info; with
    --writable, add and delete too. An MCP client launches it (see docs: how-to/mcp).

    The index and its model load before the first message: a missing or damaged index stops it at once, with one
    line and exit 2. Limits come from the WHITEVEC_SERVE_* variables, as for `serve`.
    """
    existing_folder(index_dir, "index folder")
    try:
        from whitevec.integrations.mcp import serve_stdio
    except ImportError as exc:
        raise BadInputError(f"the MCP server needs the mcp extra: pip install 'whitevec[mcp]' ({exc})") from None
    serve_stdio(index_dir, writable=writable, model=model, device=device)
