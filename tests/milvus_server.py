"""A real Milvus server for the tests of whitevec's Milvus server paths: the embedded Milvus 2.3 standalone server
of the PyPI package ``milvus`` (the extra ``whitevec[milvus-server]``), in a network namespace of its own.

Milvus 2.3's gRPC servers listen on every interface (its ``*.ip`` settings name only the address each one
advertises), so the server runs in a private network namespace that holds nothing but loopback: nothing outside
this machine can reach it, and its default ports collide with no other server on the machine. The test process,
outside the namespace, reaches it through a Unix socket (pymilvus's ``unix:`` URI) that a forwarder inside the
namespace passes on to the server's port. The namespace has its own process ids too, with this script as its
first process, so Milvus cannot outlive it: the kernel ends every process of the namespace when it ends.

Run as a script (``python tests/milvus_server.py DATA_DIR SOCKET``) inside ``unshare``; it serves until its
standard input closes (the test process ended, however it ended), then stops Milvus and removes DATA_DIR.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib.util
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

SOCKET_NAME = "milvus.sock"
START_TIMEOUT_S = 180.0  # the milvus package waits as long for its own health check
_COMPONENTS = ("rootCoord", "proxy", "queryCoord", "queryNode", "indexNode", "dataCoord", "dataNode")


class ServerUnavailableError(Exception):
    """The server cannot run on this machine; the message says why (the tests skip with it)."""


def unshare_command() -> list[str]:
    """``unshare`` with a network and a process-id namespace (as root; else inside a user namespace)."""
    command = ["unshare", "--net", "--pid", "--fork", "--kill-child"]
    return command if os.geteuid() == 0 else [*command, "--map-root-user"]


def check_available() -> None:
    """Raise :class:`ServerUnavailableError` naming why the server cannot run here."""
    if importlib.util.find_spec("milvus") is None:
        raise ServerUnavailableError(
            "the Milvus server tests need pip install 'whitevec[milvus-server]' (embedded Milvus 2.3)"
        )
    if sys.platform != "linux" or shutil.which("unshare") is None:
        raise ServerUnavailableError(
            "the Milvus server tests need Linux network namespaces (util-linux's unshare)"
        )
    probe = subprocess.run([*unshare_command(), "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        raise ServerUnavailableError(f"cannot make a network namespace here: {probe.stderr.strip()}")


@contextlib.contextmanager
def milvus_server() -> Iterator[str]:
    """A Milvus server started in a new temporary folder, stopped and removed after; yields its URI."""
    check_available()
    with tempfile.TemporaryDirectory(prefix="whitevec-milvus-") as folder:
        sock = Path(folder) / SOCKET_NAME
        log_path = Path(folder) / "server.log"
        with open(log_path, "wb") as log:
            server = subprocess.Popen(
                [*unshare_command(), sys.executable, __file__, str(Path(folder) / "milvus"), str(sock)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            _wait_for(sock, server, log_path)
            yield f"unix://{sock}"
        finally:
            assert server.stdin is not None
            server.stdin.close()  # the server's signal to stop Milvus and end
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()  # its namespace's processes end with it
                server.wait()


def _wait_for(sock: Path, server: subprocess.Popen[bytes], log_path: Path) -> None:
    """Until the forwarder's socket is there (made once Milvus answers its health check)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not sock.exists():
        if server.poll() is not None or time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the Milvus server did not start (exit {server.poll()}):\n{tail}")
        time.sleep(0.1)


# --- inside the namespace ---------------------------------------------------------------------------------------
def _loopback_up() -> None:
    """Bring up ``lo``, down in a new network namespace (SIOCGIFFLAGS / SIOCSIFFLAGS, IFF_UP)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, request))[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 0x1))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def _forward(sock: str, port: int) -> None:
    """Pass each connection to ``sock`` on to 127.0.0.1:``port`` until standard input closes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, server_writer), _pipe(server_reader, writer), return_exceptions=True)

    async with await asyncio.start_unix_server(handle, sock):
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


def main(data_dir: str, sock: str) -> None:
    from milvus import MilvusServer, MilvusServerConfig

    _loopback_up()
    config = MilvusServerConfig(data_dir=data_dir)
    for component in _COMPONENTS:
        config.set(f"{component}.ip", "127.0.0.1")
    server = MilvusServer(config)
    server.start()  # returns once its health check answers
    try:
        asyncio.run(_forward(sock, server.listen_port))
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)  # 250 MB, even when the test process was killed


if __name__ == "__main__":
    main(*sys.argv[1:])
