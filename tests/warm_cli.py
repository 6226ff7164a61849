"""A warm ``whitevec`` for the docs tests: the imports a command pays once per session, not once per command.

A page's shell blocks run ``whitevec`` as a reader would, about 40 commands in all, and each new process spent
seconds importing torch, transformers, faiss and scikit-learn before its first line of work. Here one server
process imports the CLI and those libraries once (:func:`serve`); the ``whitevec`` first on a block's ``PATH``
is a small client (:func:`client`, no third-party import) that passes the server its arguments, folder,
environment and its own standard input, output and error (the file descriptors themselves, over a Unix socket).
The server forks a child per command that takes all of those on and runs ``whitevec.cli.main`` as the console
script does; its exit status is the client's, and a signal sent to the client (a block's ``kill $server``) is
passed to the child. What a fresh process would add, the console script and a cold import, is tested elsewhere
(tests/test_cli_usage.py, tests/test_cli.py run the real ``whitevec`` in new processes).

Run as ``python tests/warm_cli.py SOCKET``: it prints ``ready`` once it listens, and serves until its standard
input closes (the test process ended, however it ended).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import traceback

SOCKET_ENV = "WHITEVEC_WARM_SOCKET"
# Loaded before the first fork. pymilvus stays out: gRPC may not be imported in a process that forks.
WARM_MODULES = (
    "whitevec.cli",
    "whitevec.workflows.index",
    "whitevec.encoders.transformer",
    "whitevec.evaluation",
    "whitevec.index",
    "torch",
    "transformers.models.bert.modeling_bert",
    "faiss",
    "sklearn.decomposition",
)
_INT = struct.Struct("!i")
_LENGTH = struct.Struct("!Q")


def _read_exact(conn: socket.socket, size: int) -> bytes:
    """``size`` bytes from ``conn``, fewer only where the other end closed first."""
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def client() -> None:
    """The ``whitevec`` command of a block: hand this process's command to the server and exit as it did."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(os.environ[SOCKET_ENV])
    request = json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    socket.send_fds(conn, [_LENGTH.pack(len(request)) + request], [0, 1, 2])
    pid = _INT.unpack(_read_exact(conn, _INT.size))[0]
    forwarded: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        forwarded.append(signum)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, forward)
    status = _read_exact(conn, _INT.size)
    _read_exact(conn, 1)  # the end of the connection: the child has exited, its exit handlers run
    if len(status) == _INT.size:
        sys.exit(_INT.unpack(status)[0])
    # The child ended without a status: killed by a signal, as a shell reports it.
    sys.exit(128 + forwarded[-1] if forwarded else 1)


def _exit_status(argv: list[str]) -> int:
    """Run ``whitevec ARGV`` here as the console script does (``sys.exit(main())``); its exit status."""
    try:
        from whitevec.cli import main

        code: object = main(argv)
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if code is None or isinstance(code, int):
        return int(code or 0)
    print(code, file=sys.stderr)
    return 1


def run_command(conn: socket.socket) -> int:
    """In a forked child: take on the client's descriptors, folder and environment, run its command; its exit
    status, which the child then exits with as a process does (exit handlers run, the connection closes)."""
    header, fds, _, _ = socket.recv_fds(conn, _LENGTH.size, 3)
    header += _read_exact(conn, _LENGTH.size - len(header))
    request = json.loads(_read_exact(conn, _LENGTH.unpack(header)[0]))
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["whitevec", *request["argv"]]
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    conn.sendall(_INT.pack(os.getpid()))
    code = _exit_status(request["argv"])
    with contextlib.suppress(OSError):
        conn.sendall(_INT.pack(code))
    return code


def serve(path: str) -> socket.socket | None:
    """Import the CLI and its libraries, then fork a child per connection on ``path`` until stdin closes (then
    None). A child returns its connection, to run the command outside the server's loop."""
    for module in WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([listener, sys.stdin.fileno()], [], [])
        if sys.stdin.fileno() in ready and not os.read(sys.stdin.fileno(), 1 << 12):
            return None
        if listener in ready:
            conn, _ = listener.accept()
            sys.stdout.flush()
            if os.fork() == 0:
                listener.close()
                return conn
            conn.close()


if __name__ == "__main__":
    command = serve(sys.argv[1])
    if command is not None:
        from whitevec.cli import exit_without_teardown

        exit_without_teardown(run_command(command))
