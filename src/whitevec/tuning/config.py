"""A tuned configuration: the JSON file ``whitevec tune`` writes and ``index build --config``,
``eval --config`` and :func:`apply_config` apply.

It names the model, the pooling, the transform spec, the index encoding and how the index searches (``mode``,
``fusion``, and the lexical part's ``analyzer``; a configuration without them is dense), and records how they
were chosen (metric, scores, the gain over ``none`` with its interval). The transform is a spec, not fitted
weights: it is fitted where it is applied, on that place's own unlabelled text (an index's corpus, a task's
sentences), as tune fitted it on the fit text it was given; the same text gives the same vectors.

Format (``"format": "whitevec-tuned-config"``, ``"version": 1``); :meth:`TunedConfig.load` refuses any other
format or version, a missing or mistyped field, an unknown transform spec, pooling or encoding.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from whitevec._version import __version__
from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError, WhitevecError
from whitevec.index.encodings.spec import parse_encoding
from whitevec.index.lexical.analyzers import DEFAULT_ANALYZER, check_analyzer_name
from whitevec.index.search.fusion import DEFAULT_FUSION, parse_fusion
from whitevec.index.search.modes import parse_mode
from whitevec.transforms import make_transform
from whitevec.tuning.space import canonical_transform
from whitevec.utils.io import write_json

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder
    from whitevec.transforms import Transform

CONFIG_FORMAT = "whitevec-tuned-config"
CONFIG_VERSION = 1


class ConfigMismatchError(BadInputError):
    """A tuned configuration is applied where the model or pooling is another one."""


_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "format": str,
    "version": int,
    "model": str,
    "pooling": str,
    "transform": str,
    "encoding": str,
    "dim": int,
    "bytes_per_vector": int,
    "metric": str,
    "selection": dict,
}


@dataclass
class TunedConfig:
    """What tune chose. ``model`` is the name it was given (alias, folder or hub id); ``model_fingerprint`` the
    sha256 of its config and weight file sizes (:attr:`whitevec.encoders.transformer.Encoder.model_fingerprint`),
    checked
    when an encoder is matched against it."""

    model: str
    pooling: str
    transform: str
    encoding: str = "float32"
    dim: int = 0
    bytes_per_vector: int = 0  # in memory (the code)
    metric: str = "spearman"
    max_length: int | None = 512  # None: a static encoder folder with no token limit
    model_fingerprint: str | None = None
    fit_on: str = ""
    selection: dict[str, Any] = field(default_factory=dict)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    whitevec: str = __version__
    disk_bytes_per_vector: int = 0  # on disk: a +rescore encoding's rescoring vector (absent before: 0)
    # How an index built from it searches (whitevec.index.search.fusion; absent before: dense): the mode, the
    # fusion of a hybrid search (its spec), and the analyzer of the lexical part a lexical or hybrid mode needs.
    mode: str = "dense"
    fusion: str = DEFAULT_FUSION.spec
    analyzer: str = DEFAULT_ANALYZER

    @property
    def search(self) -> dict[str, str]:
        """The index manifest's ``search`` field (:func:`whitevec.index.search.modes.search_defaults`)."""
        return {"mode": self.mode, "fusion": self.fusion}

    @property
    def needs_lexical(self) -> bool:
        """Whether an index built from it needs a lexical part (a lexical or hybrid mode)."""
        return self.mode != "dense"

    def to_dict(self) -> dict[str, Any]:
        return {"format": CONFIG_FORMAT, "version": CONFIG_VERSION, **asdict(self)}

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the configuration as JSON, atomically (an interrupted write leaves no partial file)."""
        return write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TunedConfig:
        """Read and check a configuration file.

        Raises:
            DataNotFoundError: no such file.
            CorruptFileError: not a tuned configuration of this format version, or a field is missing, mistyped
                or names an unknown transform, pooling or encoding.
        """
        file = Path(path).expanduser()
        if not file.is_file():
            raise DataNotFoundError(f"tuned configuration {file} does not exist (write one with `whitevec tune`)")
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptFileError(f"{file} is not a JSON tuned configuration ({exc})") from None
        return cls.from_dict(data, source=str(file))

    @classmethod
    def from_dict(cls, data: Any, source: str = "configuration") -> TunedConfig:
        """A checked configuration from :meth:`to_dict`'s form (see :meth:`load` for what is refused)."""
        if not isinstance(data, dict) or data.get("format") != CONFIG_FORMAT:
            raise CorruptFileError(f"{source} is not a whitevec tuned configuration (no format {CONFIG_FORMAT!r})")
        if data.get("version") != CONFIG_VERSION:
            raise CorruptFileError(
                f"{source} has tuned-configuration version {data.get('version')!r}; this whitevec "
                f"({__version__}) reads version {CONFIG_VERSION}"
            )
        for key, kind in _REQUIRED.items():
            value = data.get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise CorruptFileError(
                    f"{source}: field {key!r} is missing or not a {getattr(kind, '__name__', kind)}"
                )
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        try:
            from whitevec.encoders.static_format import STATIC_POOLING

            if values["pooling"] != STATIC_POOLING:  # a static folder's one pooling
                from whitevec.encoders.pooling import get_pooling

                get_pooling(values["pooling"])
            values["transform"] = canonical_transform(values["transform"])
            values["encoding"] = parse_encoding(values["encoding"]).spec
            values.update(_search_fields(values))
        except BadInputError as exc:
            raise CorruptFileError(f"{source}: {exc}") from None
        return cls(**values)

    # --- applying ---------------------------------------------------------------------------------------
    def make_transform(self) -> Transform | None:
        """The configured transform, unfitted (None for ``none``)."""
        return make_transform(self.transform)

    def encoder(self, **options: Any) -> AnyEncoder:
        """The encoder (:func:`whitevec.encoders.loading.load_encoder`) of the configured model and pooling
        (``options``:
        max_length, batch_size, device, cache, backend); checked against the recorded fingerprint."""
        from whitevec.encoders.loading import load_encoder

        options.setdefault("max_length", self.max_length)
        encoder = load_encoder(self.model, self.pooling, **options)
        try:
            self.check_encoder(encoder)
        except BaseException:
            encoder.close()
            raise
        return encoder

    def check_encoder(self, encoder: Any) -> None:
        """Raise ConfigMismatchError when ``encoder`` is another model or pooling than the configured one."""
        info = encoder.describe()
        self._check_same(info["model"], info.get("model_fingerprint"), info["pooling"], "the encoder")

    def check_index(self, manifest: dict[str, Any], where: str = "the index") -> None:
        """Raise ConfigMismatchError when an index (its manifest) was built with another model or pooling, or
        another transform, than this configuration names."""
        self._check_same(manifest["model"], manifest.get("model_fingerprint"), manifest["pooling"], where)
        info = manifest.get("transform") or {}
        built = "none" if not info else str(info.get("spec", ""))
        with contextlib.suppress(BadInputError):  # a saved .safetensors transform keeps its path, so it differs
            built = canonical_transform(built)
        if built != self.transform:
            raise ConfigMismatchError(
                f"{where} was built with transform {built!r}; the tuned configuration names {self.transform!r}. "
                "Rebuild it with `whitevec index build --config`"
            )

    def _check_same(self, model: str, fingerprint: str | None, pooling: str, where: str) -> None:
        same_model = (
            fingerprint == self.model_fingerprint
            if fingerprint and self.model_fingerprint
            else model.strip().lower() == self.model.strip().lower()
        )
        if not same_model or not self.same_pooling(pooling):
            raise ConfigMismatchError(
                f"the tuned configuration was chosen for model {self.model!r} with pooling {self.pooling!r}, but "
                f"{where} uses model {model!r} with pooling {pooling!r}; its transform is not valid there"
            )

    def same_pooling(self, pooling: str) -> bool:
        """Whether ``pooling`` computes on the configured model what the configured pooling does (``model`` is
        the folder's own modules: on all-MiniLM-L6-v2, last-avg then Normalize). A final Normalize changes only
        each vector's length, so the cosines are the same unless a transform is fitted in between."""
        if pooling.strip().lower() == self.pooling.strip().lower():
            return True
        from whitevec.encoders.loading import pooling_computation

        try:
            (mine, my_steps), (theirs, their_steps) = (
                pooling_computation(self.model, name) for name in (self.pooling, pooling)
            )
        except WhitevecError:  # a pooling or model that cannot be read: the names decide, and they differ
            return False

        def unnormalized(steps: tuple[str, ...]) -> tuple[str, ...]:
            return steps[:-1] if steps[-1:] == ("normalize",) else steps

        if canonical_transform(self.transform) == "none":
            my_steps, their_steps = unnormalized(my_steps), unnormalized(their_steps)
        return (mine, my_steps) == (theirs, their_steps)


def config_max_length(info: Mapping[str, Any]) -> int | None:
    """An encoder's token limit (``info``: its ``describe()``) as a configuration records it: None only for a
    static folder without one."""
    value = info.get("max_length", 512)
    return None if value is None else int(value)


def _search_fields(values: dict[str, Any]) -> dict[str, str]:
    """The mode, fusion and analyzer of a configuration's fields, canonical; those it lacks (written before
    tune chose the search) are dense's. A BadInputError names a bad one."""
    fields = {"mode": "dense", "fusion": DEFAULT_FUSION.spec, "analyzer": DEFAULT_ANALYZER, **values}
    for name in ("mode", "fusion", "analyzer"):
        if not isinstance(fields[name], str):
            raise BadInputError(f"field {name!r} is not a string")
    return {
        "mode": parse_mode(fields["mode"]),
        "fusion": parse_fusion(fields["fusion"]).spec,
        "analyzer": check_analyzer_name(fields["analyzer"]),
    }


def apply_config(
    config: TunedConfig,
    texts: list[str],
    fit_texts: list[str],
    encoder: AnyEncoder | None = None,
    show_progress: bool | None = None,
) -> np.ndarray:
    """The vectors ``config`` gives ``texts``: encoded with its model and pooling, then its transform fitted on
    ``fit_texts`` (unlabelled) and applied. Returns float32 (len(texts), config.dim): the float vectors, before
    any index encoding (``config.encoding`` is applied by the index, ``whitevec index build --config``)."""
    own = encoder is None
    enc = config.encoder() if encoder is None else encoder
    try:
        if not own:
            config.check_encoder(enc)
        every = list(dict.fromkeys([*texts, *fit_texts]))
        vectors = enc.encode(every, show_progress=show_progress)
    finally:
        if own:
            enc.close()
    row = {t: i for i, t in enumerate(every)}
    transform = config.make_transform()
    chosen = vectors[[row[t] for t in texts]]
    if transform is None:
        return chosen
    transform.fit(vectors[[row[t] for t in fit_texts]])
    return np.asarray(transform.transform(chosen), dtype=np.float32)
