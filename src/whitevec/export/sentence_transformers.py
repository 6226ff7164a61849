"""A sentence-transformers folder from a model, a pooling and a fitted transform (or from an index folder).

``SentenceTransformer(out, trust_remote_code=True).encode(texts)`` then gives whitevec's transformed vectors:

- the Transformer: the model's own files, with ``max_seq_length`` (and ``do_lower_case``) in
  ``sentence_bert_config.json``; for a layer pooling the model's ``config.json`` asks for every hidden state;
- the pooling: sentence-transformers' Pooling for ``cls`` (``cls``) and ``last-avg`` (``mean``), the
  Transformer's pooler output for ``pooler``, :class:`whitevec.export.st_modules.LayerMeanPooling` for the other
  layer
  poolings, and the folder's own modules (Pooling, Dense, Normalize) for ``model``;
- the transform: a Dense layer for a linear one (Whitening, Center, AllButTheTop: weight ``W^T``, bias
  ``-(beta mu) W``, identity activation), a Normalize, or :class:`whitevec.export.st_modules.FlowModule` for a
  Flow;
- an optional Normalize last (an index with the cosine metric stores unit vectors, so its export normalizes).

From a static encoder (:class:`whitevec.encoders.static.StaticEncoder`) a linear transform is folded into the token
table instead, and the folder is a static folder again (:func:`export_static`); see there for the one case written
as modules (StaticEmbedding, Normalize, Dense).

``trust_remote_code=True`` is needed only when a whitevec module is in the folder (sentence-transformers 6
imports classes outside its own package only when asked to); ``whitevec_export.json`` records what was
exported. The folder is written atomically and an existing one is replaced only with ``overwrite=True``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from whitevec._version import __version__
from whitevec.encoders.loading import AnyEncoder, load_encoder
from whitevec.encoders.models.st_config import (
    FLOW_CLASS,
    LAYER_POOLING_CLASS,
    MODEL_CONFIG,
    MODULES_FILE,
    TRANSFORMER_CONFIG,
)
from whitevec.encoders.static import StaticEncoder
from whitevec.encoders.static_format import StaticTable, check_new_folder, saved_tokenizer, write_static_folder
from whitevec.encoders.transformer import Encoder
from whitevec.errors import BadInputError, DimensionMismatchError
from whitevec.export.faiss_index import linear_parts
from whitevec.index.folder.layout import TRANSFORM_FILE
from whitevec.index.folder.snapshot import IndexSnapshot, read_consistent
from whitevec.transforms import AllButTheTop, Center, Normalize, Transform, Whitening, is_affine
from whitevec.utils.io import atomic_dir, write_json, writing_to

EXPORT_RECORD = "whitevec_export.json"
_ST = "sentence_transformers.models."
# Files of the source folder that export-st writes itself, or that describe only the source.
_NOT_COPIED = {MODULES_FILE, TRANSFORMER_CONFIG, MODEL_CONFIG, "README.md", ".gitattributes", EXPORT_RECORD}
_IDENTITY = "torch.nn.modules.linear.Identity"


@dataclass(frozen=True)
class ExportedModule:
    """One entry of modules.json and the files of its folder (config as JSON, weights as float32 arrays)."""

    kind: str  # the class path
    folder: str  # "" for the Transformer (the root)
    config: dict[str, Any] | None = None
    weights: dict[str, np.ndarray] | None = None


def check_export_target(out: str | os.PathLike[str], overwrite: bool) -> Path:
    """The output folder, refused when it exists and ``overwrite`` is False (checked before a model loads)."""
    return check_new_folder(out, overwrite)


def export_sentence_transformer(
    out: str | os.PathLike[str],
    encoder: AnyEncoder,
    transform: Transform | None = None,
    *,
    normalize: bool = False,
    overwrite: bool = False,
    source: dict[str, Any] | None = None,
) -> Path:
    """Write the sentence-transformers folder for ``encoder`` (its model, pooling and max_length), then
    ``transform`` (fitted), then a Normalize when ``normalize``; returns the folder. ``source`` is recorded
    in ``whitevec_export.json`` (e.g. the index it came from). A static encoder is exported as
    :func:`export_static` says."""
    target = check_export_target(out, overwrite)
    if isinstance(encoder, StaticEncoder):
        foldable = _foldable(encoder, transform)  # a transform that cannot follow a static table: refused first
        if transform is not None:
            _check_transform(transform, encoder)
        if foldable:
            return export_static(
                target, encoder, transform, normalize=normalize, overwrite=overwrite, source=source
            )
        modules = [ExportedModule(_ST + "StaticEmbedding", "")]
        modules += [ExportedModule(_ST + "Normalize", "Normalize")] if encoder.normalize else []

        def write_input(folder: Path) -> None:
            _write_static_input(encoder, folder)

    else:
        _check_exportable(encoder)
        modules, hidden_states = _pooling_modules(encoder)
        if transform is not None:
            _check_transform(transform, encoder)

        def write_input(folder: Path) -> None:
            _copy_transformer(encoder, folder, hidden_states)

    dim = encoder.dim
    if transform is not None:
        module, dim = _transform_module(transform, dim)
        modules.append(module)
    if normalize:
        modules.append(ExportedModule(_ST + "Normalize", "Normalize"))
    needs_trust = any(not m.kind.startswith("sentence_transformers.") for m in modules)
    record = _record(encoder, transform, normalize, dim, source, trust_remote_code=needs_trust)
    with atomic_dir(target) as tmp:
        write_input(tmp)
        entries = []
        for index, module in enumerate(modules):
            folder = "" if module.folder == "" else f"{index}_{module.folder}"
            entries.append({"idx": index, "name": str(index), "path": folder, "type": module.kind})
            if folder:
                (tmp / folder).mkdir()
                if module.config is not None:
                    write_json(tmp / folder / "config.json", module.config)
                if module.weights is not None:
                    weights = tmp / folder / "model.safetensors"
                    with writing_to(weights):
                        save_file(
                            {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in module.weights.items()},
                            str(weights),
                        )
        write_json(tmp / MODULES_FILE, entries)
        write_json(tmp / MODEL_CONFIG, _model_config())
        write_json(tmp / EXPORT_RECORD, record)
        with writing_to(tmp / "README.md"):
            (tmp / "README.md").write_text(_card(record), encoding="utf-8")
    return target


def _check_exportable(encoder: Encoder) -> None:
    if encoder.backend != "torch":
        raise BadInputError(
            f"the encoder runs with backend {encoder.backend!r}; sentence-transformers computes in float32, so "
            "export an Encoder with backend='torch'"
        )
    if getattr(encoder, "token_weighting", None) is not None:
        raise BadInputError(
            "the encoder weighs tokens by frequency (token_weights), which sentence-transformers' Pooling cannot "
            "do; export an Encoder without token weights"
        )


def _check_transform(transform: Transform, encoder: AnyEncoder) -> None:
    transform._check_fitted()
    if int(transform.n_features_in_) != encoder.dim:
        raise DimensionMismatchError(
            f"the transform was fitted on {transform.n_features_in_}-d vectors but {encoder.model_path.name} "
            f"with pooling {encoder.pooling.name!r} gives {encoder.dim}-d vectors"
        )


def _record(
    encoder: AnyEncoder,
    transform: Transform | None,
    normalize: bool,
    dim: int,
    source: dict[str, Any] | None,
    *,
    trust_remote_code: bool,
    **more: Any,
) -> dict[str, Any]:
    """What ``whitevec_export.json`` records of an export."""
    return {
        "format_version": 1,
        "whitevec": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "model": encoder.model_name,
        "model_fingerprint": encoder.model_fingerprint,
        "pooling": encoder.pooling.name,
        "pooling_detail": encoder.describe_pooling(),
        "max_length": encoder.max_length,
        "transform": None
        if transform is None
        else {"class": type(transform).__name__, "params": _plain_params(transform)},
        "normalize": normalize,
        "dim": dim,
        "trust_remote_code": trust_remote_code,
        "source": source,
        **more,
    }


# --- static encoders --------------------------------------------------------------------------------------
def _foldable(encoder: StaticEncoder, transform: Transform | None) -> bool:
    """Whether ``transform`` after ``encoder`` folds into its table: none, Normalize, or an affine transform
    (:meth:`Transform.affine`) of vectors the encoder does not normalise first (a shift after normalising would
    depend on each vector's length). Anything not affine is refused here, by name."""
    if transform is None or isinstance(transform, Normalize):
        return True
    if is_affine(transform):
        return not encoder.normalize
    raise BadInputError(
        f"a {type(transform).__name__} transform is not linear, so it cannot be folded into a static encoder's "
        "table: export-st folds the affine ones (whitening, PCA, centring, all-but-the-top, ...) and Normalize"
    )


def export_static(
    out: str | os.PathLike[str],
    encoder: StaticEncoder,
    transform: Transform | None = None,
    *,
    normalize: bool = False,
    overwrite: bool = False,
    source: dict[str, Any] | None = None,
) -> Path:
    """A static folder with ``transform`` folded into its table: for ``t(x) = A x + b`` every row ``r`` becomes
    ``A r + b``, so the mean of the new rows is ``t`` of the mean (exact for every text with a token; a text with
    none gives zeros, where encoding then transforming gives ``b``). The folder is Model2Vec's, loaded alike by
    ``StaticModel`` and ``SentenceTransformer``; it normalises when the encoder did and no transform shifts after
    that, when ``transform`` is Normalize, or when ``normalize``. :func:`export_sentence_transformer` calls this
    for every transform that folds (see ``_foldable``); for a linear transform after a normalising encoder it
    writes sentence-transformers modules instead (StaticEmbedding, Normalize, Dense), which Model2Vec cannot
    load."""
    table = encoder.table
    rows, dim, folded = table.embeddings, encoder.dim, None
    if transform is not None and not isinstance(transform, Normalize):
        _check_transform(transform, encoder)
        if not _foldable(encoder, transform):
            raise BadInputError("a linear transform after a normalising static encoder cannot be folded")
        A, b = transform.affine()  # transform(X) = X A + b
        rows = (rows.astype(np.float64) @ A + b).astype(np.float32)
        dim = int(A.shape[1])
        folded = {"class": type(transform).__name__, "params": _plain_params(transform)}
    normalizes = normalize or isinstance(transform, Normalize) or (table.normalize and folded is None)
    record = _record(encoder, transform, normalizes, dim, source, trust_remote_code=False, folded=True)
    provenance = dict(table.provenance)
    if folded is not None:
        provenance["folded_transforms"] = [*provenance.get("folded_transforms", []), folded]
    exported = StaticTable(rows, table.tokenizer, normalizes, encoder.max_length, provenance)
    return write_static_folder(out, exported, overwrite=overwrite, extra_json={EXPORT_RECORD: record})


def _write_static_input(encoder: StaticEncoder, folder: Path) -> None:
    """The StaticEmbedding module's files at the folder's root: the table and the tokenizer (truncating at the
    encoder's max_length, as a static folder saves it)."""
    table = encoder.table
    save_file({"embeddings": np.ascontiguousarray(table.embeddings)}, str(folder / "model.safetensors"))
    saved_tokenizer(table, encoder.max_length).save(str(folder / "tokenizer.json"), pretty=False)


def _plain_params(transform: Transform) -> dict[str, Any]:
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in transform.get_params(deep=False).items()}


def _transformer_settings(encoder: Encoder) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "max_seq_length": encoder.max_length,
        "do_lower_case": bool(encoder.st_config is not None and encoder.st_config.do_lower_case),
    }
    pooler = encoder.pooling.name == "pooler" or (
        encoder.pooling.kind == "model"
        and encoder.st_config is not None
        and encoder.st_config.pooling_modes == ("pooler",)
    )
    if pooler:  # the pooler output is the sentence vector: no Pooling module
        settings["modality_config"] = {"text": {"method": "forward", "method_output_name": "pooler_output"}}
        settings["module_output_name"] = "sentence_embedding"
    return settings


def _copy_transformer(encoder: Encoder, folder: Path, hidden_states: bool) -> None:
    """The model's files (weights, tokenizer) into ``folder``, its Transformer settings, and for a layer
    pooling a config.json that returns every hidden state."""
    source = encoder.model_path
    for path in sorted(source.iterdir()):
        if path.is_file() and path.name not in _NOT_COPIED:
            with writing_to(folder / path.name):
                shutil.copyfile(path, folder / path.name)  # follows the hub cache's symlinks
    if hidden_states:
        config = json.loads((source / "config.json").read_text(encoding="utf-8"))
        config["output_hidden_states"] = True
        write_json(folder / "config.json", config)
    write_json(folder / TRANSFORMER_CONFIG, _transformer_settings(encoder))


def _legacy_pooling_config(dim: int, modes: tuple[str, ...]) -> dict[str, Any]:
    """A Pooling config in the boolean form every sentence-transformers version reads."""
    keys = {
        "cls": "pooling_mode_cls_token",
        "max": "pooling_mode_max_tokens",
        "mean": "pooling_mode_mean_tokens",
        "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
        "weightedmean": "pooling_mode_weightedmean_tokens",
        "lasttoken": "pooling_mode_lasttoken",
    }
    return {"word_embedding_dimension": dim, **{key: mode in modes for mode, key in keys.items()}}


def _pooling_modules(encoder: Encoder) -> tuple[list[ExportedModule], bool]:
    """The Transformer and pooling modules for the encoder's pooling, and whether they need every hidden
    state."""
    modules = [ExportedModule(_ST + "Transformer", "")]
    pooling, hidden = encoder.pooling, encoder.hidden_size
    if pooling.kind == "model":
        st = encoder._model_config()
        hidden_states = st.layers is not None
        if st.layers is not None:
            modules.append(
                ExportedModule(
                    LAYER_POOLING_CLASS,
                    "LayerMeanPooling",
                    {"embedding_dimension": hidden, "layers": list(st.layers)},
                )
            )
        elif st.pooling_modes != ("pooler",):
            modules.append(
                ExportedModule(_ST + "Pooling", "Pooling", _legacy_pooling_config(hidden, st.pooling_modes))
            )
        for kind, layer in st.steps:
            if kind == "normalize":
                modules.append(ExportedModule(_ST + "Normalize", "Normalize"))
            elif layer is not None:
                weights = {
                    "linear.weight": layer.weight,
                    **({"linear.bias": layer.bias} if layer.bias is not None else {}),
                }
                config = {
                    "in_features": layer.in_features,
                    "out_features": layer.out_features,
                    "bias": layer.bias is not None,
                    "activation_function": layer.activation,
                }
                modules.append(ExportedModule(_ST + "Dense", "Dense", config, weights))
        return modules, hidden_states
    if pooling.kind == "pooler":
        return modules, False
    if pooling.name in ("cls", "last-avg"):
        mode = "cls" if pooling.name == "cls" else "mean"
        modules.append(ExportedModule(_ST + "Pooling", "Pooling", _legacy_pooling_config(hidden, (mode,))))
        return modules, False
    layers = list(pooling.resolved_layers(encoder.n_hidden_states))
    modules.append(
        ExportedModule(LAYER_POOLING_CLASS, "LayerMeanPooling", {"embedding_dimension": hidden, "layers": layers})
    )
    return modules, True


def _transform_module(transform: Transform, dim: int) -> tuple[ExportedModule, int]:
    """The module that applies ``transform`` to ``dim``-d vectors, and the size of what comes out."""
    if isinstance(transform, Normalize):
        return ExportedModule(_ST + "Normalize", "Normalize"), dim
    if isinstance(transform, Whitening | Center | AllButTheTop):
        A, b = affine_parts(transform, dim)  # transform(x) = A x + b
        config = {
            "in_features": dim,
            "out_features": int(A.shape[0]),
            "bias": True,
            "activation_function": _IDENTITY,
        }
        return ExportedModule(_ST + "Dense", "Dense", config, {"linear.weight": A, "linear.bias": b}), int(
            A.shape[0]
        )
    from whitevec.transforms.flow import Flow

    if isinstance(transform, Flow):
        glow_args = {
            "dim": dim,
            "levels": transform.levels,
            "depth": transform.depth,
            "width": transform.width,
            "hidden_layers": transform.hidden_layers,
            "affine": transform.coupling == "affine",
            "mixing": transform.mixing,
        }
        config = {"glow_args": glow_args, "dtype": transform.dtype}
        weights = {"glow." + k.removeprefix("module."): v for k, v in transform._get_module_state().items()}
        return ExportedModule(FLOW_CLASS, "FlowModule", config, weights), dim
    raise BadInputError(
        f"a {type(transform).__name__} transform has no sentence-transformers module; export-st takes Whitening, "
        "Center, AllButTheTop, Normalize and Flow"
    )


def affine_parts(transform: Whitening | Center | AllButTheTop, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """``(A, b)`` with ``transform(x) = A x + b`` in float64."""
    if isinstance(transform, AllButTheTop):
        # (x - mu) (I - V^T V): the projection is symmetric, so A = I - V^T V and b = -A mu.
        V = np.asarray(transform.directions_, dtype=np.float64)
        A = np.eye(dim) - V.T @ V
        return A, -(A @ np.asarray(transform.mean_, dtype=np.float64))
    parts = linear_parts(transform, dim)
    assert parts is not None
    return parts


def _model_config() -> dict[str, Any]:
    versions: dict[str, str] = {}
    for package in ("sentence_transformers", "transformers", "torch"):
        try:
            module = __import__(package)
        except ImportError:
            continue
        versions[package if package != "torch" else "pytorch"] = str(module.__version__)
    return {
        "__version__": versions,
        "model_type": "SentenceTransformer",
        "prompts": {},
        "default_prompt_name": None,
        "similarity_fn_name": "cosine",
    }


def _card(record: dict[str, Any]) -> str:
    trust = ", trust_remote_code=True" if record["trust_remote_code"] else ""
    transform = record["transform"]["class"] if record["transform"] else "none"
    return (
        f"# {record['model']} + {transform} (exported by whitevec {record['whitevec']})\n\n"
        f"Pooling: {record['pooling_detail']}; max_seq_length {record['max_length']}; transform: {transform}; "
        f"normalize: {record['normalize']}; {record['dim']}-d vectors.\n\n"
        "```python\nfrom sentence_transformers import SentenceTransformer\n"
        f'model = SentenceTransformer("path/to/this/folder"{trust})\n'
        'vectors = model.encode(["A man is playing a guitar."])\n```\n\n'
        + (
            "The whitevec modules named in modules.json (whitevec.st_modules) need `pip install whitevec`.\n"
            if record["trust_remote_code"]
            else ""
        )
    )


def export_index(
    index_dir: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    normalize: bool | None = None,
    device: str | None = None,
) -> Path:
    """The sentence-transformers folder of an index: its model, pooling, max_length and transform, and a
    Normalize when the index uses the cosine metric (``normalize`` overrides that)."""
    folder = Path(index_dir).expanduser()
    check_export_target(out, overwrite)

    def read(snapshot: IndexSnapshot) -> tuple[dict[str, Any], Transform | None]:
        manifest = snapshot.manifest
        info = manifest["transform"]
        transform = (
            Transform.from_bytes(snapshot.read_bytes(TRANSFORM_FILE), str(folder / TRANSFORM_FILE))
            if info
            else None
        )
        return manifest, transform

    manifest, transform = read_consistent(folder, read)
    with load_encoder(
        manifest["model"],
        manifest["pooling"],
        max_length=manifest["max_length"],
        device=device,
        cache=False,
    ) as encoder:
        if manifest.get("model_fingerprint") not in (None, encoder.model_fingerprint):
            raise BadInputError(
                f"the model {manifest['model']!r} found here is not the one {folder} was built with (its "
                "config.json or weight files differ); the exported folder would not reproduce the index"
            )
        return export_sentence_transformer(
            out,
            encoder,
            transform,
            normalize=manifest["metric"] == "cosine" if normalize is None else normalize,
            overwrite=overwrite,
            source={
                "index": str(folder.resolve()),
                "metric": manifest["metric"],
                "backend": manifest["encoder_backend"],
            },
        )
