"""One way from a model name to an encoder: a transformers model gives an
:class:`~whitevec.encoders.transformer.Encoder`, a
static encoder folder (``static_format``) a :class:`~whitevec.encoders.static.StaticEncoder`.

Every command, the index, the server, the Ray workers and ``tune`` make their encoders here, so a static folder
goes wherever a model does. What only a transformers model has is refused for a static folder in one line: another
pooling than ``static``, a ``backend`` other than float32 (``--compute``), token weights (a static table carries
its own). The device and the vector cache do not apply to a static folder (numpy on the CPU; encoding again costs
less than reading a cache) and are ignored. Importing this module imports neither torch nor scipy; loading a
transformers model imports torch, a static folder scipy's sparse matrices.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from whitevec.encoders.models.resolution import DEFAULT_MODEL, resolve_model
from whitevec.encoders.static_format import FOLDER_FILES, STATIC_POOLING, check_static_pooling, is_static_folder
from whitevec.errors import BadInputError, ModelNotFoundError

if TYPE_CHECKING:
    from whitevec.encoders.static import StaticEncoder
    from whitevec.encoders.transformer import Encoder

AnyEncoder: TypeAlias = "Encoder | StaticEncoder"


def _config(path: Path) -> dict[str, Any]:
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def _neither(path: Path) -> ModelNotFoundError:
    return ModelNotFoundError(
        f"{path} is neither a transformers model folder (a config.json naming its model_type) nor a static "
        f"encoder folder ({', '.join(FOLDER_FILES)}, as Model2Vec writes them)"
    )


def is_static_model(model: str | os.PathLike[str]) -> bool:
    """Whether ``model`` (a folder, alias or hub id, resolved as models are) is a static encoder folder; a
    folder whose config says ``model2vec`` counts even with a file missing, so that loading it names the file."""
    path = resolve_model(model)
    return is_static_folder(path) or _config(path).get("model_type") == "model2vec"


def check_static_options(
    model: str | os.PathLike[str],
    *,
    backend: str = "torch",
    token_weights: Any = None,
    token_frequencies: Any = None,
) -> None:
    """Refuse the options only a transformers model takes, for a static folder."""
    if backend not in ("torch", "static"):
        raise BadInputError(
            f"{model} is a static encoder folder: it computes in float32 numpy, so --compute {backend} does not "
            "apply (use --compute torch)"
        )
    if token_weights is not None or token_frequencies is not None:
        raise BadInputError(
            f"{model} is a static encoder folder: its token weights are already in its table, so --token-weights "
            "and --token-frequencies do not apply (give them to `whitevec distill` instead)"
        )


def load_encoder(
    model: str | os.PathLike[str] = DEFAULT_MODEL,
    pooling: Any = None,
    *,
    max_length: int | None = None,
    batch_size: int | None = None,
    device: str | None = None,
    cache: bool | str | os.PathLike[str] = True,
    backend: str = "torch",
    token_weights: Any = None,
    token_frequencies: Any = None,
) -> AnyEncoder:
    """The encoder ``model`` names: a StaticEncoder for a static folder, else an Encoder (the arguments are the
    Encoder's; ``batch_size=None`` is each encoder's own default).

    Raises:
        ModelNotFoundError: no such model, or a folder that is neither kind.
        BadInputError: an option a static folder cannot take (see the module docstring), or a bad one for the
            Encoder.
    """
    path = resolve_model(model)
    if is_static_model(path):
        check_static_options(
            model, backend=backend, token_weights=token_weights, token_frequencies=token_frequencies
        )
        from whitevec.encoders.static import StaticEncoder

        if batch_size is None:
            return StaticEncoder(model, pooling, max_length=max_length)
        return StaticEncoder(model, pooling, max_length=max_length, batch_size=batch_size)
    if "model_type" not in _config(path) and "hidden_size" not in _config(path):
        raise _neither(path)
    from whitevec.encoders.transformer import Encoder

    return Encoder(
        model,
        pooling,
        max_length=max_length,
        **({} if batch_size is None else {"batch_size": batch_size}),
        device=device,
        cache=cache,
        backend=backend,
        token_weights=token_weights,
        token_frequencies=token_frequencies,
    )


def default_pooling_of(model: str | os.PathLike[str], fallback: str) -> str:
    """The pooling used when none is named: ``static`` for a static folder, ``model`` for a
    sentence-transformers folder, else ``fallback``."""
    if is_static_model(model):
        return STATIC_POOLING
    from whitevec.encoders.models.st_config import default_pooling

    return default_pooling(resolve_model(model), fallback)


def pooling_computation(model: str | os.PathLike[str], pooling: str) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """What ``pooling`` computes on ``model``'s folder, for comparing two poolings by what they compute rather
    than by name: the token vectors read (``("mean", layers)``, ``("cls", layers)``, ``("pooler",)`` or
    sentence-transformers modes, hidden_states indices made absolute), then the kinds of the steps after
    (``dense``, ``normalize``). ``model`` is the folder's sentence-transformers modules, read as the Encoder reads
    them: on all-MiniLM-L6-v2, mean pooling of the last layer (``last-avg``) then Normalize. A static folder's
    pooling, or a configuration that cannot be read, is its name alone."""
    if is_static_model(model):
        return (pooling,), ()
    from whitevec.encoders.models.st_config import UnsupportedModuleError, read_sentence_transformers_config
    from whitevec.encoders.pooling import get_pooling

    path = resolve_model(model)
    layers = _config(path).get("num_hidden_layers")
    n_hidden_states = layers + 1 if isinstance(layers, int) and layers > 0 else None

    def absolute(indices: Sequence[int]) -> tuple[int, ...]:
        return tuple(i + n_hidden_states if n_hidden_states and i < 0 else i for i in indices)

    named = get_pooling(pooling)
    if named.kind != "model":
        return ((named.kind, absolute(named.layers)) if named.kind != "pooler" else ("pooler",)), ()
    try:
        st = read_sentence_transformers_config(path)
    except UnsupportedModuleError:
        st = None
    if st is None:
        return (pooling,), ()
    if st.layers is not None:
        reads: tuple[Any, ...] = ("mean", absolute(st.layers))
    elif st.pooling_modes == ("pooler",):
        reads = ("pooler",)
    elif st.pooling_modes in (("mean",), ("cls",)):
        reads = (st.pooling_modes[0], absolute((-1,)))
    else:
        reads = ("modes", st.pooling_modes, absolute((-1,)))
    return reads, tuple(kind for kind, _ in st.steps)


def check_poolings(model: str | os.PathLike[str], poolings: Sequence[str]) -> None:
    """Refuse a pooling ``model`` cannot compute, before it loads: for a static folder anything but ``static``;
    for a transformers model an unknown name (``get_pooling``)."""
    if is_static_model(model):
        for pooling in poolings:
            check_static_pooling(pooling, model)
        return
    from whitevec.encoders.pooling import get_pooling

    for pooling in poolings:
        get_pooling(pooling)
