"""Options declared once, and the checks and encoder every encoding command shares.

An option several commands share is an ``Annotated`` alias below (``ModelOpt``, ``DataDirOpt``, ...); the options
every encoding command ends with (``--max-length`` to ``--quiet``) are the fields of :class:`RunOptions`, which
:func:`with_run_options` adds to a command and hands it as one ``run``. :func:`_encoder` is the one place a
command makes its encoder (:func:`whitevec.encoders.loading.load_encoder`: a transformers model, or a static
folder).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from whitevec.encoders.models.resolution import one_resolution_per_model
from whitevec.errors import BadInputError
from whitevec.preflight import parse_device

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder


def _no_command(ctx: typer.Context) -> None:
    """A group named without a command (``whitevec``, ``whitevec index``): its help on stderr and exit status 2,
    a usage error, so that a script whose command went missing fails. click >= 8.2 decides the same for
    no_args_is_help; this callback makes it so with any click, and keeps the help off stdout."""
    if ctx.invoked_subcommand is None:
        with contextlib.redirect_stdout(sys.stderr):  # typer's rich help prints itself, on stdout
            text = ctx.get_help()
        if text:  # without rich, click returns the help instead
            typer.echo(text, err=True)
        raise typer.Exit(2)


class _HelpAsWritten:
    """``--help`` shows the help texts as written, and a flag as taking no value. typer renders help with rich
    markup, which eats a bracketed word (``pip install 'whitevec[ray]'`` showed as ``'whitevec'``), and gives a
    boolean flag a ``<bool>`` value it does not take. For the rendering only, the texts are escaped and a
    flag's value column left empty; the command's parameters are unchanged (the CLI reference reads them)."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from rich.markup import escape

        params = self.get_params(ctx)  # type: ignore[attr-defined]
        kept = [(param, param.help, param.metavar) for param in params if hasattr(param, "help")]
        commands = getattr(self, "commands", {}).values()
        kept_docs = [(command, command.help, command.short_help) for command in [self, *commands]]
        try:
            for param, text, metavar in kept:
                param.help = escape(text) if text else text
                if getattr(param, "is_flag", False) and metavar is None:
                    param.metavar = ""
            for command, text, short in kept_docs:
                command.help = escape(text) if text else text
                command.short_help = escape(short) if short else short
            super().format_help(ctx, formatter)  # type: ignore[misc]
        finally:
            for param, text, metavar in kept:
                param.help, param.metavar = text, metavar
            for command, text, short in kept_docs:
                command.help, command.short_help = text, short


class _Command(_HelpAsWritten, typer.core.TyperCommand):
    """A whitevec command (:class:`_HelpAsWritten`)."""


class _Group(_HelpAsWritten, typer.core.TyperGroup):
    """A whitevec command group (:class:`_HelpAsWritten`)."""


class _Typer(typer.Typer):
    """A typer app whose groups and commands render their help as written (:class:`_HelpAsWritten`)."""

    def command(self, *args: Any, **kwargs: Any) -> Any:
        return super().command(*args, **{"cls": _Command, **kwargs})


def _group(callback: Callable[..., None] = _no_command, **kwargs: Any) -> typer.Typer:
    """A command group; without a command it is a usage error (``callback`` ends with :func:`_no_command`)."""
    return _Typer(cls=_Group, callback=callback, invoke_without_command=True, add_completion=False, **kwargs)


def _print_version(asked: bool) -> None:
    """``--version``: ``whitevec X.Y.Z`` on stdout, and exit, before anything else is parsed."""
    if asked:
        from whitevec._version import __version__

        typer.echo(f"whitevec {__version__}")
        raise typer.Exit()


VersionOpt = Annotated[
    bool,
    typer.Option("--version", help="Print whitevec's version and exit.", callback=_print_version, is_eager=True),
]


def split_list(value: str) -> list[str]:
    """'a, b,c' -> ['a', 'b', 'c'] for the comma-separated options."""
    return [item.strip() for item in value.split(",") if item.strip()]


# ---- shared options --------------------------------------------------------------------------------------
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model alias, local folder or hub id.")]
IndexModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="Where the index's model is now (a folder, alias or hub id), when it moved; refused unless its "
        "contents match what the index recorded (default: the folder or name the build recorded).",
    ),
]
PoolingOpt = Annotated[
    str | None,
    typer.Option(
        "--pooling",
        "-p",
        help="Pooling name or comma list of layer indices (default: model, the folder's own "
        "sentence-transformers modules, when it has them; else first-last-avg).",
    ),
]
PoolingListOpt = Annotated[
    str | None,
    typer.Option(
        "--pooling", "-p", help="One pooling or a comma list (default: model for a sentence-transformers folder)."
    ),
]
TransformListOpt = Annotated[
    str, typer.Option("--transform", "-t", help="Comma list: none, whitening, whitening-K, flow, ...")
]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="Data folder (default $WHITEVEC_DATA).")]
MetricOpt = Annotated[str, typer.Option("--metric", help="cosine, ip or l2.")]
StoreOpt = Annotated[str, typer.Option("--backend", help="faiss or milvus.")]
MaxLengthOpt = Annotated[
    int | None,
    typer.Option(
        "--max-length",
        help="Tokens kept per text, longer ones truncated (default: the model's max_seq_length, else 512).",
    ),
]
BatchOpt = Annotated[
    int | None,
    typer.Option(
        "--batch-size",
        min=1,
        help="Texts per forward pass (default: the encoder's own, 64 for a model, 1024 for a static encoder).",
    ),
]
DeviceOpt = Annotated[
    str | None,
    # The form is checked as the option is parsed (no torch import); whether this machine has the device, by the
    # Encoder before the model loads (with --engine ray, the workers' machines).
    typer.Option(
        "--device", help="torch device: cpu, cuda, cuda:N, mps (default: cuda if present).", callback=parse_device
    ),
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the vector cache.")]
ComputeOpt = Annotated[
    str,
    typer.Option(
        "--compute",
        help="Encoder arithmetic: torch (float32), bf16 (bfloat16, ~2x on CPUs with AVX512-BF16/AMX) or int8.",
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar, and no progress lines in a log.")]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="local (this process) or ray (an actor pool on a Ray cluster; pip install 'whitevec[ray]').",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address", help="With --engine ray: the cluster (host:port, ray://host:port); default local."
    ),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option("--workers", help="With --engine ray: encoder actors (default: the cluster's CPUs, one each)."),
]
GpusOpt = Annotated[
    float, typer.Option("--gpus-per-worker", help="With --engine ray: GPUs per encoder actor (default 0).")
]
TokenWeightsOpt = Annotated[
    str | None,
    typer.Option(
        "--token-weights",
        help="Weigh tokens in the token mean by frequency: sif, usif or zipf (mean poolings only; needs "
        "--token-frequencies).",
    ),
]
TokenFrequenciesOpt = Annotated[
    Path | None,
    typer.Option(
        "--token-frequencies",
        help="Token counts for --token-weights: a file saved by `whitevec frequencies count` (.json), or a text "
        "corpus (one text a line) counted with the model's tokenizer.",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", help="A tuned configuration (whitevec tune): its model, pooling, transform and encoding."
    ),
]


def _option(default: Any, option: Any) -> Any:
    """A RunOptions field: its default, and its command-line option (one of the aliases above)."""
    return field(default=default, metadata={"option": option})


@dataclass(frozen=True)
class RunOptions:
    """How an encoding command runs its model: the options each of them ends with, in this order."""

    max_length: int | None = _option(None, MaxLengthOpt)
    # None: each encoder's own default (a static encoder tokenises 1024 texts at a time, a model runs 64).
    batch_size: int | None = _option(None, BatchOpt)
    device: str | None = _option(None, DeviceOpt)
    no_cache: bool = _option(False, NoCacheOpt)
    compute: str = _option("torch", ComputeOpt)
    quiet: bool = _option(False, QuietOpt)

    @property
    def cache(self) -> bool:
        """Whether the vector cache is read and written."""
        return not self.no_cache

    @property
    def show_progress(self) -> bool | None:
        """False with --quiet; else None: the library shows a bar for long work on a terminal."""
        return False if self.quiet else None

    def encoder_options(self) -> dict[str, Any]:
        """The Encoder keyword arguments these options set."""
        return {
            "max_length": self.max_length,
            "batch_size": self.batch_size,
            "device": self.device,
            "cache": self.cache,
            "backend": self.compute,
        }

    def encoder(
        self, model: str, pooling: str | None, token_weights: str | None = None, token_frequencies: Any = None
    ) -> dict[str, Any]:
        """The Encoder keyword arguments of a command's --model, --pooling, these options and its token weights
        (as :func:`_token_weights` gives them)."""
        return {
            "model": model,
            "pooling": pooling,
            **self.encoder_options(),
            "token_weights": token_weights,
            "token_frequencies": token_frequencies,
        }


_RUN_PARAMETERS = [
    inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.metadata["option"])
    for f in fields(RunOptions)
]


def with_run_options(command: Callable[..., None]) -> Callable[..., None]:
    """Add the RunOptions options after ``command``'s own (typer reads the signature this sets) and call it with
    them as one keyword argument, ``run``."""
    own = inspect.signature(command, eval_str=True)
    parameters = [p for name, p in own.parameters.items() if name != "run"]

    @functools.wraps(command)
    def with_options(**kwargs: Any) -> None:
        run = RunOptions(**{p.name: kwargs.pop(p.name) for p in _RUN_PARAMETERS})
        with one_resolution_per_model():  # the run's checks and its encoder look the model up once
            command(**kwargs, run=run)

    with_options.__signature__ = own.replace(parameters=[*parameters, *_RUN_PARAMETERS])  # type: ignore[attr-defined]
    return with_options


def _encoder(**options: Any) -> AnyEncoder:
    """The one place a command makes its encoder, from :meth:`RunOptions.encoder`'s arguments
    (:func:`whitevec.encoders.loading.load_encoder`: an Encoder, or a StaticEncoder for a static folder). Commands
    call it
    (or hand it to the library) as ``_options._encoder``, a module attribute, so that tests can replace it here
    to show that a command stops before any model loads."""
    from whitevec.encoders.loading import load_encoder

    return load_encoder(**options)


def _token_weights(
    token_weights: str | None, token_frequencies: Path | None, model: str, poolings: Sequence[str | None]
) -> tuple[str | None, Any]:
    """--token-weights and --token-frequencies checked before the model loads: the scheme, the poolings (mean
    kinds only; None: the model's default, looked up only when weights are asked for) and the frequency source
    (a .json file loaded and checked, or an existing corpus)."""
    from whitevec.encoders.token_weights import check_scheme, read_frequencies

    scheme = check_scheme(token_weights)
    if scheme is None:
        if token_frequencies is not None:
            raise BadInputError("--token-frequencies needs --token-weights (sif, usif or zipf)")
        return None, None
    from whitevec.encoders.loading import is_static_model

    if is_static_model(model):
        raise BadInputError(
            f"{model} is a static encoder folder: --token-weights does not apply, its token weights are already "
            "in its table"
        )
    if token_frequencies is None:
        raise BadInputError(f"--token-weights {scheme} needs --token-frequencies FILE (.json counts or a corpus)")
    from whitevec.encoders.pooling import check_weighted_pooling, get_pooling

    for pooling in poolings:
        check_weighted_pooling(get_pooling(pooling or _default_pooling(model, "first-last-avg")))
    return scheme, read_frequencies(token_frequencies)


def _default_pooling(model: str, fallback: str) -> str:
    """The pooling a command uses when --pooling is not given: ``static`` for a static encoder folder, ``model``
    for a sentence-transformers folder, else ``fallback``."""
    from whitevec.encoders.loading import default_pooling_of

    return default_pooling_of(model, fallback)


def _check_specs(model: str, poolings: list[str], transforms: list[str]) -> None:
    """Reject a pooling ``model`` cannot compute (a static folder: any but ``static``) or an unknown transform
    spec before the model loads."""
    from whitevec.encoders.loading import check_poolings
    from whitevec.transforms import make_transform

    check_poolings(model, poolings)
    for spec in transforms:
        make_transform(spec)


def _from_config(
    config: Path, command: Callable[..., None], run: RunOptions, **given: str | None
) -> tuple[str, str, str, str, RunOptions]:
    """(model, pooling, transform, encoding) of a tuned configuration. An option set to something other than its
    default must say what the configuration says (another --model or --pooling would make its transform invalid;
    another --encoding is not the configuration that was scored)."""
    from whitevec.index.encodings.spec import parse_encoding
    from whitevec.tuning.config import ConfigMismatchError, TunedConfig

    tuned = TunedConfig.load(config)
    wanted = {
        "model": tuned.model,
        "pooling": tuned.pooling,
        "transform": tuned.transform,
        "encoding": tuned.encoding,
    }
    defaults = inspect.signature(command).parameters
    for name, value in given.items():
        if value is None or value == defaults[name].default:
            continue
        if name == "encoding":
            same = parse_encoding(value).spec == tuned.encoding
        elif name == "pooling":  # by what it computes: on MiniLM `model` is last-avg then Normalize
            same = tuned.same_pooling(value)
        else:
            same = value.strip().lower() == wanted[name].lower()
        if not same:
            raise ConfigMismatchError(
                f"--{name} {value} contradicts the tuned configuration {config}, which names {name} "
                f"{wanted[name]!r}; leave --{name} out, or tune again"
            )
    # The token limit is part of the vectors the configuration was tuned on: apply it too.
    if run.max_length is not None and run.max_length != tuned.max_length:
        raise ConfigMismatchError(
            f"--max-length {run.max_length} contradicts the tuned configuration {config}, which was tuned with "
            f"max_length {tuned.max_length}; leave --max-length out, or tune again"
        )
    return tuned.model, tuned.pooling, tuned.transform, tuned.encoding, replace(run, max_length=tuned.max_length)
