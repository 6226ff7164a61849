"""A model folder's sentence-transformers configuration, read into what whitevec reproduces (pooling ``model``).

A sentence-transformers folder lists its modules in ``modules.json``: a Transformer (settings in
``sentence_bert_config.json``: ``max_seq_length``, ``do_lower_case``), a Pooling (its ``config.json``: the
pooling mode), then any of Dense (a linear layer and a ``torch.nn`` activation, weights in safetensors or a
PyTorch file), Normalize (unit L2 norm) and Dropout (the identity when encoding). whitevec's own
``whitevec.st_modules.LayerMeanPooling`` (what ``whitevec export-st`` writes for poolings sentence-transformers
lacks) is read too. Anything else is refused with :class:`UnsupportedModuleError` naming the module: the named
poolings, which read the transformer alone, still work on such a folder.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError

MODULES_FILE = "modules.json"
TRANSFORMER_CONFIG = "sentence_bert_config.json"
MODEL_CONFIG = "config_sentence_transformers.json"
LAYER_POOLING_CLASS = "whitevec.st_modules.LayerMeanPooling"
FLOW_CLASS = "whitevec.st_modules.FlowModule"
# sentence-transformers' Pooling modes, and its old boolean keys (in the order it converts them to a tuple).
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
_LEGACY_MODE_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# The Transformer settings that leave plain text in, token vectors out, at whatever value they hold.
_NEUTRAL_TRANSFORMER_KEYS = {"max_seq_length", "do_lower_case", "unpad_inputs", "transformer_task"}


class UnsupportedModuleError(BadInputError):
    """A sentence-transformers folder holds a module (or setting) whitevec cannot reproduce."""


@dataclass(frozen=True)
class DenseLayer:
    """sentence-transformers' Dense: ``activation(x W^T + b)``."""

    weight: np.ndarray  # (out, in), float32
    bias: np.ndarray | None  # (out,), float32
    activation: str  # a torch.nn class path, e.g. torch.nn.modules.activation.Tanh

    @property
    def in_features(self) -> int:
        return int(self.weight.shape[1])

    @property
    def out_features(self) -> int:
        return int(self.weight.shape[0])


# A step after pooling: ("dense", DenseLayer) or ("normalize", None).
Step = tuple[str, DenseLayer | None]


@dataclass(frozen=True)
class SentenceTransformersConfig:
    """What ``SentenceTransformer(folder).encode(texts)`` computes after the transformer."""

    folder: Path
    max_seq_length: int | None
    do_lower_case: bool
    pooling_modes: tuple[str, ...]  # sentence-transformers modes; ("pooler",) for the model's pooler output
    layers: tuple[int, ...] | None  # set instead of modes by whitevec's LayerMeanPooling (hidden_states indices)
    steps: tuple[Step, ...]

    @property
    def normalizes(self) -> bool:
        return any(kind == "normalize" for kind, _ in self.steps)

    def output_dim(self, hidden_size: int) -> int:
        """The vector size for a transformer of ``hidden_size``."""
        dim = hidden_size * (
            1 if self.layers is not None or self.pooling_modes == ("pooler",) else len(self.pooling_modes)
        )
        for kind, layer in self.steps:
            if kind == "dense" and layer is not None:
                if layer.in_features != dim:
                    raise UnsupportedModuleError(
                        f"{self.folder}: a Dense layer takes {layer.in_features} inputs but gets {dim}-d vectors"
                    )
                dim = layer.out_features
        return dim

    def describe(self) -> str:
        """One line, e.g. ``mean pooling, Dense 768->256 (Tanh), Normalize``."""
        if self.layers is not None:
            parts = [f"token mean of hidden_states {list(self.layers)}"]
        elif self.pooling_modes == ("pooler",):
            parts = ["the model's pooler output"]
        else:
            parts = ["+".join(self.pooling_modes) + " pooling"]
        for kind, layer in self.steps:
            if kind == "dense" and layer is not None:
                parts.append(
                    f"Dense {layer.in_features}->{layer.out_features} ({layer.activation.rsplit('.', 1)[-1]})"
                )
            else:
                parts.append("Normalize")
        return ", ".join(parts)

    def fingerprint(self) -> str:
        """sha256 over everything that shapes the vectors: the settings, the steps and the Dense weights."""
        digest = hashlib.sha256(
            json.dumps([self.max_seq_length, self.do_lower_case, self.pooling_modes, self.layers]).encode()
        )
        for kind, layer in self.steps:
            digest.update(kind.encode())
            if layer is not None:
                digest.update(layer.activation.encode())
                digest.update(np.ascontiguousarray(layer.weight).tobytes())
                if layer.bias is not None:
                    digest.update(np.ascontiguousarray(layer.bias).tobytes())
        return digest.hexdigest()


def has_sentence_transformers_config(folder: Path) -> bool:
    return (folder / MODULES_FILE).is_file()


def default_pooling(folder: Path, fallback: str) -> str:
    """The pooling to use when none is named: ``model`` (the folder's own modules) for a sentence-transformers
    folder, else ``fallback``."""
    return "model" if has_sentence_transformers_config(folder) else fallback


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptFileError(f"cannot read {path}: {exc}") from exc


def _kind(class_ref: str) -> str:
    """The module kind of a modules.json ``type``: Transformer, Pooling, Dense, Normalize, Dropout,
    LayerMeanPooling, or the class path itself when unknown."""
    if class_ref == LAYER_POOLING_CLASS:
        return "LayerMeanPooling"
    name = class_ref.rsplit(".", 1)[-1]
    if class_ref.startswith("sentence_transformers.") and name in {
        "Transformer",
        "Pooling",
        "Dense",
        "Normalize",
        "Dropout",
    }:
        return name
    return class_ref


def read_max_seq_length(folder: Path) -> int | None:
    """The Transformer's ``max_seq_length`` from ``sentence_bert_config.json`` (None when not stated)."""
    path = folder / TRANSFORMER_CONFIG
    if not path.is_file():
        return None
    value = _json(path).get("max_seq_length")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def read_sentence_transformers_config(folder: Path) -> SentenceTransformersConfig | None:
    """The folder's configuration, or None when it has no ``modules.json``.

    Raises:
        UnsupportedModuleError: a module or setting whitevec cannot reproduce (named in the message).
        CorruptFileError: a configuration file that cannot be read.
    """
    if not has_sentence_transformers_config(folder):
        return None
    modules = _json(folder / MODULES_FILE)
    if not isinstance(modules, list) or not all(isinstance(m, dict) and "type" in m for m in modules):
        raise CorruptFileError(f"{folder / MODULES_FILE} is not a list of modules")
    where = f"{folder / MODULES_FILE}"

    def refuse(what: str) -> UnsupportedModuleError:
        return UnsupportedModuleError(
            f"{where}: {what}, which whitevec cannot reproduce (it reproduces Transformer, Pooling, Dense, "
            "Normalize and Dropout). Encode with a named pooling instead (e.g. pooling='last-avg'), which reads "
            "the transformer alone, or with sentence-transformers itself"
        )

    kinds = [_kind(str(m["type"])) for m in modules]
    for kind, module in zip(kinds, modules, strict=True):
        if kind == module["type"] and kind not in {"LayerMeanPooling"}:
            raise refuse(f"module {module.get('name', '?')!r} is of type {kind!r}")
    if not kinds or kinds[0] != "Transformer" or str(modules[0].get("path", "")) != "":
        raise refuse("the first module is not a Transformer stored in the folder itself")
    settings = _json(folder / TRANSFORMER_CONFIG) if (folder / TRANSFORMER_CONFIG).is_file() else {}
    _check_transformer_settings(folder, settings, refuse)
    pooler_output = settings.get("module_output_name") == "sentence_embedding"
    modes, layers, steps = _read_modules(
        folder, kinds[1:], modules[1:], ("pooler",) if pooler_output else (), refuse
    )
    if not modes and layers is None:
        raise refuse("no Pooling module (token vectors, not sentence vectors, come out)")
    if settings.get("do_lower_case") not in (None, False, True):
        raise refuse(f"do_lower_case={settings['do_lower_case']!r}")
    return SentenceTransformersConfig(
        folder=folder,
        max_seq_length=read_max_seq_length(folder),
        do_lower_case=bool(settings.get("do_lower_case", False)),
        pooling_modes=modes,
        layers=layers,
        steps=tuple(steps),
    )


def _check_transformer_settings(folder: Path, settings: dict[str, Any], refuse: Any) -> None:
    """Refuse a Transformer setting (``sentence_bert_config.json``), task or default prompt that changes what
    the transformer computes."""
    for key, value in settings.items():
        if key in _NEUTRAL_TRANSFORMER_KEYS or value in (None, {}, []):
            continue
        if key == "transformer_task" and value == "feature-extraction":
            continue
        if key == "modality_config" and value == {
            "text": {"method": "forward", "method_output_name": "last_hidden_state"}
        }:
            continue
        if key == "module_output_name" and value == "token_embeddings":
            continue
        if key == "modality_config" and value == {
            "text": {"method": "forward", "method_output_name": "pooler_output"}
        }:
            continue  # the pooler output as the sentence vector (with module_output_name sentence_embedding)
        if key == "module_output_name" and value == "sentence_embedding":
            continue
        raise refuse(f"the Transformer setting {key}={value!r} in {TRANSFORMER_CONFIG}")
    task = settings.get("transformer_task")
    if task not in (None, "feature-extraction"):
        raise refuse(f"the Transformer task {task!r}")
    model_config = _json(folder / MODEL_CONFIG) if (folder / MODEL_CONFIG).is_file() else {}
    if model_config.get("default_prompt_name"):
        raise refuse(f"a default prompt ({model_config['default_prompt_name']!r} in {MODEL_CONFIG})")


def _read_modules(
    folder: Path, kinds: list[str], modules: list[dict[str, Any]], modes: tuple[str, ...], refuse: Any
) -> tuple[tuple[str, ...], tuple[int, ...] | None, list[Step]]:
    """The pooling modes (or the averaged layers) and the steps after pooling of the modules after the
    Transformer; ``modes``: those the Transformer's own output already gives (its pooler)."""
    layers: tuple[int, ...] | None = None
    steps: list[Step] = []
    for kind, module in zip(kinds, modules, strict=True):
        sub = folder / str(module.get("path", ""))
        if kind in ("Pooling", "LayerMeanPooling"):
            if modes or layers is not None or steps:
                raise refuse(f"module {module.get('name')!r} pools vectors that are already pooled")
            config = _json(sub / "config.json")
            if kind == "LayerMeanPooling":
                layers = tuple(int(i) for i in config["layers"])
            else:
                modes = _pooling_modes(config, refuse)
        elif kind == "Dense":
            if not modes and layers is None:
                raise refuse(f"module {module.get('name')!r} (Dense) comes before any pooling")
            steps.append(("dense", _dense(sub, refuse)))
        elif kind == "Normalize":
            config = (
                _json(sub / "config.json") if (sub / "config.json").is_file() and str(module.get("path")) else {}
            )
            if config.get("module_input_name", "sentence_embedding") != "sentence_embedding":
                raise refuse(f"a Normalize of {config['module_input_name']!r}")
            steps.append(("normalize", None))
        # Dropout: the identity when encoding.
    return modes, layers, steps


def _pooling_modes(config: dict[str, Any], refuse: Any) -> tuple[str, ...]:
    if config.get("include_prompt", True) is False:
        pass  # prompts are never added by whitevec, so there is no prompt to exclude
    mode = config.get("pooling_mode")
    if mode is None:
        active = [m for key, m in _LEGACY_MODE_KEYS.items() if config.get(key)]
        found = active or ["mean"]
    else:
        found = [mode] if isinstance(mode, str) else list(mode)
    for name in found:
        if name not in POOLING_MODES:
            raise refuse(f"the pooling mode {name!r}")
    return tuple(found)  # concatenated in the order the config lists them, as sentence-transformers does


def _dense(folder: Path, refuse: Any) -> DenseLayer:
    config = _json(folder / "config.json")
    if config.get("use_residual"):
        raise refuse("a Dense layer with a residual connection")
    for key in ("module_input_name", "module_output_name"):
        if config.get(key, "sentence_embedding") not in (None, "sentence_embedding"):
            raise refuse(f"a Dense layer with {key}={config[key]!r}")
    activation = str(config.get("activation_function", "torch.nn.modules.activation.Tanh"))
    if not activation.startswith("torch.nn."):
        raise refuse(f"a Dense activation {activation!r} (only torch.nn modules are reproduced)")
    if (folder / "model.safetensors").is_file():
        from safetensors.numpy import load_file

        state = load_file(str(folder / "model.safetensors"))
    elif (folder / "pytorch_model.bin").is_file():
        import torch

        state = {k: v.numpy() for k, v in torch.load(folder / "pytorch_model.bin", weights_only=True).items()}
    else:
        raise CorruptFileError(f"{folder} holds no Dense weights (model.safetensors or pytorch_model.bin)")
    weight = np.asarray(state["linear.weight"], dtype=np.float32)
    bias = state.get("linear.bias")
    if weight.shape != (int(config["out_features"]), int(config["in_features"])):
        raise CorruptFileError(f"{folder}: Dense weight has shape {weight.shape}, config says otherwise")
    return DenseLayer(weight, None if bias is None else np.asarray(bias, dtype=np.float32), activation)
