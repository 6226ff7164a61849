"""Where the benchmark data lives, and reading its text files line by line.

The data folder is never part of the repository: it is named by ``--data-dir DIR`` or the ``WHITEVEC_DATA``
environment variable (``make demo`` points it at ``../shared/data``).
"""

from __future__ import annotations

import os
from pathlib import Path

from whitevec.errors import DataNotFoundError, WhitevecError

ENV_VAR = "WHITEVEC_DATA"

_HOW_TO_SET = f"pass --data-dir DIR or set {ENV_VAR}=DIR (e.g. {ENV_VAR}=../shared/data)"


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the benchmark data folder: ``data_dir`` if given, else ``$WHITEVEC_DATA``.

    Raises:
        DataNotFoundError: neither is set, or the folder does not exist or is not a folder; the message says
            where it looked and how to point whitevec at the data.
    """
    if data_dir is not None and str(data_dir) != "":
        source = "--data-dir"
        raw = str(data_dir)
    else:
        env = os.environ.get(ENV_VAR, "")
        if not env:
            raise DataNotFoundError(f"no benchmark data folder given: {_HOW_TO_SET}")
        source = f"${ENV_VAR}"
        raw = env
    path = Path(raw).expanduser()
    if not path.exists():
        raise DataNotFoundError(f"data folder {path} (from {source}) does not exist: {_HOW_TO_SET}")
    if not path.is_dir():
        raise DataNotFoundError(f"data folder {path} (from {source}) is not a folder: {_HOW_TO_SET}")
    return path


def read_lines(path: Path, error: type[WhitevecError]) -> list[str]:
    """Read a UTF-8 text file as a list of lines, without line ends.

    Splits on ``\\n`` only (``str.splitlines`` would also split inside a sentence on characters such as
    U+2028 or U+0085) and drops one ``\\r`` before it, so CRLF files read the same. A final line end does not
    make an extra empty line; blank lines elsewhere are kept so that line numbers stay aligned with the file.
    A UTF-8 byte-order mark is ignored.

    Raises:
        DataNotFoundError: the file does not exist.
        error: the file is not valid UTF-8 (the message names the file and line).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataNotFoundError(f"file {path} does not exist") from None
    except IsADirectoryError:
        raise DataNotFoundError(f"{path} is a folder, expected a text file") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_no = raw[: exc.start].count(b"\n") + 1
        raise error(f"{path}, line {line_no}: not valid UTF-8 ({exc.reason}); save the file as UTF-8") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def existing_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` with ``~`` expanded, or DataNotFoundError naming it as ``what`` when it is not a file."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataNotFoundError(f"{what} {file} does not exist (or is not a file)")
    return file
