"""Checks made before any model loads: outputs writable, enough free space, the vector cache usable, the device.

A job that encodes a corpus for minutes must not learn at the end that its output folder is read-only or its
disk full. These checks cost milliseconds and import nothing heavy (no torch, numpy or scipy), so the command
line can run them first and report a bad path at once.

They raise :class:`OSError` (with its ``errno``) for faults of the environment: a folder that cannot be created
or written, too little free space. ``describe_fault`` turns such an error, or a SQLite error of the same kind,
into one line for the user.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from whitevec.datasets.paths import existing_file
from whitevec.encoders.models.resolution import resolve_model
from whitevec.errors import BadInputError, DataNotFoundError
from whitevec.utils.io import SQLITE_STORAGE, check_writable_parent
from whitevec.utils.paths import whitevec_cache_folder

CACHE_ENV = "WHITEVEC_CACHE"


def check_output(target: str | os.PathLike[str], what: str, need_bytes: int = 0, *, folder: bool = False) -> Path:
    """Prove that ``target`` (a file, or with ``folder`` a folder written whole and swapped in, as an index is)
    can be made, before the work that makes it.

    Refuses a folder standing where a file is to be written (no file can replace it: without this check the
    work would run to its end and fail on the final rename). Creates ``target``'s parent folder if needed,
    makes and removes a probe file there, and checks the free space when ``need_bytes`` (an estimate of what
    will be written) is given. ``what`` names the target in messages (``"--out file"``). Returns ``target``
    with ``~`` expanded.

    Raises:
        BadInputError: a file is to be written and ``target`` is a folder.
        OSError: the folder cannot be created or written (the message names it and the reason), or it has
            less than ``need_bytes`` free.
    """
    path = Path(target).expanduser()
    if not folder and path.is_dir():
        raise BadInputError(f"cannot write {what} {path}: it is a folder; name a file to write")
    _check_folder(path.parent, f"{what} {path}", need_bytes, probe_for=path)
    return path


def check_output_folder(folder: str | os.PathLike[str], what: str, need_bytes: int = 0) -> Path:
    """Like ``check_output``, for a folder that files will be written into: it is created and probed itself."""
    path = Path(folder).expanduser()
    _check_folder(path, f"{what} {path}", need_bytes, probe_for=path / "probe")
    return path


def _check_folder(folder: Path, label: str, need_bytes: int, probe_for: Path) -> None:
    blocker = _file_in_the_way(folder)
    if blocker is not None:
        raise NotADirectoryError(errno.ENOTDIR, f"cannot write {label}: {blocker} is a file, not a folder")
    try:
        check_writable_parent(probe_for)
    except OSError as exc:
        # The probe's own name is noise: say which output could not be written, where, and why.
        raise OSError(exc.errno, f"cannot write {label}: {exc.strerror or exc} (in {folder})") from exc
    check_free_space(folder, need_bytes)


def check_free_space(folder: str | os.PathLike[str], need_bytes: int) -> None:
    """Raise OSError(ENOSPC) when ``folder`` has less than ``need_bytes`` free (no check where unknown)."""
    if need_bytes <= 0:
        return
    try:
        free = shutil.disk_usage(folder).free
    except OSError:  # some file systems cannot say; the write itself will tell
        return
    if free < need_bytes:
        raise OSError(
            errno.ENOSPC,
            f"not enough free space in {folder}: need about {format_size(need_bytes)}, {format_size(free)} free",
        )


def available_memory() -> int | None:
    """Bytes of memory this system can give a process without swapping (``MemAvailable`` in /proc/meminfo);
    None where that is not known."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the file counts kiB
    except (OSError, ValueError, IndexError):
        return None
    return None


def input_file(value: str | os.PathLike[str], what: str, keywords: Iterable[str] = ()) -> Path | None:
    """An option naming a file or one of ``keywords`` (``--fit-on corpus``): None for a keyword, else the file.

    Raises:
        DataNotFoundError: ``value`` is no keyword and no existing file.
    """
    if str(value) in keywords:
        return None
    return existing_file(value, what)


def check_texts(texts: Sequence[str], what: str = "queries") -> list[str]:
    """``texts`` as a list, checked as the HTTP API checks a request's: a list (not one string) of at least one
    string, none of them blank. A blank query (empty or only white space, as ``str.isspace`` counts it)
    encodes to the special tokens alone and would get arbitrary hits; HTTP answers it with 422, the library
    and the command line with this BadInputError (the command line before the index loads: this module imports
    nothing heavy).

    Raises:
        BadInputError: naming the first offending item as ``what[i]``.
    """
    if isinstance(texts, str):
        raise BadInputError(f"{what} must be a list of strings, not one string; wrap it in a list")
    items = list(texts)
    if not items:
        raise BadInputError(empty_texts_message(what))
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise BadInputError(f"{what}[{i}] is a {type(text).__name__}, not a str")
        if not text.strip():
            raise BadInputError(blank_text_message(f"{what}[{i}]"))
    return items


# The words for these two faults, the same in HTTP's 422 (whitevec.service.error_answers) as here.
def empty_texts_message(what: str) -> str:
    """The line for an empty list of texts (``what``: its name, such as ``queries``)."""
    return f"{what} is empty; give at least one text"


def blank_text_message(where: str) -> str:
    """The line for a text that is empty or only white space (``where``: such as ``queries[3]``)."""
    return f"{where} is empty or only whitespace"


def not_one_string(texts: Sequence[str]) -> Sequence[str]:
    """``texts``, refused when it is one string (a sequence of characters, which would pass as one text each)."""
    if isinstance(texts, str):
        raise BadInputError("texts must be a sequence of strings, not a single string")
    return texts


def nonblank_texts(texts: Sequence[str], when_none: str) -> list[str]:
    """The texts of ``texts`` that are not blank; one string, or no text left, refused (``when_none``: the
    error's words for the second)."""
    kept = [text for text in not_one_string(texts) if text.strip()]
    if not kept:
        raise BadInputError(when_none)
    return kept


def existing_folder(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` with ``~`` expanded, or DataNotFoundError naming it as ``what`` when it is not a folder."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise DataNotFoundError(f"{what} {folder} does not exist (or is not a folder)")
    return folder


def check_encoder(model: str | os.PathLike[str], cache: bool | str | os.PathLike[str] = True) -> int:
    """What an Encoder needs, checked without loading it: the model can be found and the vector cache folder
    works (see ``vector_cache_folder``). Returns the model's vector size for space estimates (0 if unknown).

    Raises:
        ModelNotFoundError: no such model.
        BadInputError: the vector cache folder cannot be used.
    """
    size = model_hidden_size(model)
    vector_cache_folder(cache)
    return size or 0


def model_hidden_size(model: str | os.PathLike[str]) -> int | None:
    """The vector size of ``model`` read from its ``config.json``, without loading it; None when not stated.

    Raises:
        ModelNotFoundError: the model cannot be found (so a wrong ``--model`` is reported before anything loads).
    """
    try:
        config = json.loads((resolve_model(model) / "config.json").read_text(encoding="utf-8"))
        # hidden_dim: a static encoder folder's table width (Model2Vec's config).
        size = config.get("hidden_size", config.get("d_model", config.get("hidden_dim")))
    except (OSError, ValueError, AttributeError):  # an unreadable config: the model loader will say why
        return None
    return int(size) if isinstance(size, int) and size > 0 else None


def vector_cache_home() -> Path:
    """The default vector cache folder: ``$WHITEVEC_CACHE``, else ``$XDG_CACHE_HOME/whitevec/vectors``."""
    return whitevec_cache_folder("vectors", CACHE_ENV)


def vector_cache_folder(cache: bool | str | os.PathLike[str]) -> Path | None:
    """The folder an Encoder's vector cache lives in, checked: None for ``cache=False``.

    ``cache=True`` means ``vector_cache_home()``; a path means that folder. The folder is created if missing and
    a probe file is made in it, so a cache that could never be written fails now, in milliseconds, rather than
    after the model has loaded.

    Raises:
        BadInputError: the folder is a file, or cannot be created or written; the message names where the
            folder came from (``$WHITEVEC_CACHE``) and how to do without it.
    """
    if not cache:
        return None
    if cache is True:
        folder = vector_cache_home()
        source = f"from ${CACHE_ENV}" if os.environ.get(CACHE_ENV) else f"the default; set ${CACHE_ENV} to move it"
    else:
        folder = Path(cache).expanduser()
        source = "given as the cache argument"
    try:
        check_output_folder(folder, "vector cache folder")
    except OSError as exc:
        raise BadInputError(
            f"{exc.strerror or exc} ({source}); use a writable folder, or pass --no-cache (cache=False)"
        ) from None
    return folder


_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu")
_DEVICE_FORM = re.compile(r"(?P<kind>[a-z]+)(?::(?P<number>[0-9]+))?")


def parse_device(device: str | None) -> str | None:
    """``device`` in torch's form (``cpu``, ``cuda``, ``cuda:N``, ``mps``, ``xpu``), lower-cased; None stays None
    (the default: cuda when present, else cpu). Checks the form only, without importing torch: a typo is
    reported at once, and a device that only a remote worker has (``--engine ray``) is not refused here.

    Raises:
        BadInputError: not a device whitevec can run on (``bogus``, ``cuda:x``).
    """
    if device is None:
        return None
    name = device.strip().lower()
    form = _DEVICE_FORM.fullmatch(name)
    if form is None or form["kind"] not in _DEVICE_TYPES:
        raise BadInputError(f"unknown device {device!r}; valid: cpu, cuda, cuda:N, mps, xpu")
    return name


def check_device(device: str | None) -> str | None:
    """``device`` (see ``parse_device``) checked against this machine and this torch build, before a model is put
    on it; returns it lower-cased. torch is imported only for a device other than the CPU, by callers about to
    load a model onto it anyway.

    Raises:
        BadInputError: an unknown form, or a device this machine lacks; the message lists those it has.
    """
    name = parse_device(device)
    if name is None or name.split(":")[0] == "cpu":
        return name
    devices = available_devices()
    if name not in devices:
        raise BadInputError(
            f"device {name!r} is not available here ({_device_note(name)}); available: {', '.join(devices)}"
        )
    return name


def available_devices() -> list[str]:
    """The devices this torch build can use on this machine: ``cpu``, then ``cuda`` and ``cuda:0`` ... (and the
    same for ``xpu``, ``mps``) where present."""
    import torch

    found = ["cpu"]
    for kind in ("cuda", "xpu"):
        backend = getattr(torch, kind, None)
        if backend is not None and backend.is_available():
            found += [kind, *(f"{kind}:{n}" for n in range(backend.device_count()))]
    if torch.backends.mps.is_available():
        found += ["mps", "mps:0"]
    return found


def _device_note(name: str) -> str:
    """Why ``name`` is missing, in a few words."""
    import torch

    kind = name.split(":")[0]
    if kind == "cuda" and torch.version.cuda is None and torch.version.hip is None:
        return f"torch {torch.__version__} was built without CUDA"
    if kind == "mps" and not torch.backends.mps.is_built():
        return f"torch {torch.__version__} was built without MPS"
    backend = getattr(torch, kind, None)
    count = backend.device_count() if backend is not None and hasattr(backend, "device_count") else 0
    return f"{count} {kind} device{'' if count == 1 else 's'} found"


# SQLite result codes (the low byte of an extended code) that mean the disk or the system failed, not the code:
# the storage faults _io maps to an errno (PERM, READONLY, IOERR, FULL) and BUSY, LOCKED, NOMEM, CANTOPEN; and
# CORRUPT, NOTADB for a damaged file.
_SQLITE_ENVIRONMENT = {*SQLITE_STORAGE, 5, 6, 7, 14}
_SQLITE_CORRUPT = {11, 26}
# The same faults by message, for errors that carry no code (raised by hand, or by older Pythons).
_ENVIRONMENT_MESSAGES = (
    "disk is full",
    "readonly database",
    "disk i/o error",
    "unable to open database",
    "database is locked",
    "out of memory",
    "access permission denied",
)
_CORRUPT_MESSAGES = ("file is not a database", "malformed", "file is encrypted")


def sqlite_fault(exc: BaseException) -> str | None:
    """``"corrupt"`` for a SQLite error that says the file is damaged, ``"environment"`` for one that says the
    disk or system failed (full, read-only, I/O, locked), None for anything else (a bug: keep its traceback)."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        if code & 0xFF in _SQLITE_CORRUPT:
            return "corrupt"
        if code & 0xFF in _SQLITE_ENVIRONMENT:
            return "environment"
    message = str(exc).lower()
    if any(text in message for text in _CORRUPT_MESSAGES):
        return "corrupt"
    if any(text in message for text in _ENVIRONMENT_MESSAGES):
        return "environment"
    return None


def describe_fault(exc: BaseException) -> str | None:
    """One line naming the file and the reason for an environment fault (OSError, or a SQLite disk error);
    None for other exceptions."""
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
        names = [os.fsdecode(n) for n in (exc.filename, exc.filename2) if n is not None]
        return f"{' -> '.join(names)}: {reason}" if names else reason
    if sqlite_fault(exc) is not None:
        return f"database error: {exc}"
    return None


def _file_in_the_way(folder: Path) -> Path | None:
    """The nearest existing ancestor of ``folder`` (itself included) when it is not a folder, else None."""
    for candidate in (folder, *folder.parents):
        if candidate.exists() or candidate.is_symlink():
            return None if candidate.is_dir() else candidate
    return None


_SIZE_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def format_size(n_bytes: int) -> str:
    """``n_bytes`` in the largest binary unit it has at least one of (``512 B``, ``97.7 KiB``, ``1.2 MiB``,
    ``350 GiB``): one decimal below a hundred of the unit, none above, so a size that is not 0 never reads 0."""
    if n_bytes < 1024:
        return f"{n_bytes:,} B"
    value = float(n_bytes)
    for unit in _SIZE_UNITS:
        value /= 1024
        if value < 1024 or unit == _SIZE_UNITS[-1]:
            break
    return f"{value:.1f} {unit}" if value < 100 else f"{value:,.0f} {unit}"
