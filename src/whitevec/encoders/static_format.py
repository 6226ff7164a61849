"""Static encoder folders: one vector per vocabulary token, in Model2Vec 0.10's folder format.

The folder is what ``model2vec.persistence.save_pretrained`` writes, so ``model2vec.StaticModel.from_pretrained``
and ``sentence_transformers.SentenceTransformer`` (``StaticEmbedding``, then ``Normalize`` when the config says
normalize) load it: ``model.safetensors`` ({"embeddings": float32 [vocab, dim]}, token weights and any folded
linear transform already in the rows), ``tokenizer.json`` (a fast tokenizer, saved with truncation at
``max_length`` and no padding, as Model2Vec saves it), ``config.json`` (Model2Vec's keys plus whitevec's
provenance under ``"whitevec"``) and ``modules.json``.

Reading also takes Model2Vec's own folders, including vocabulary-quantized ones: their ``mapping`` and
``weights`` tensors are folded into one row per token id (``embeddings[mapping] * weights``), which is what
Model2Vec averages over; float16 and int8 tables are read as float32.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file
from tokenizers import Tokenizer

from whitevec._version import __version__
from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError
from whitevec.utils.io import atomic_dir, write_json

# Model2Vec's default when a config names no max_length (model2vec.model.DEFAULT_MAX_LENGTH).
DEFAULT_MAX_LENGTH = 512
# What a folder must hold (Model2Vec's own layout).
FOLDER_FILES = ("config.json", "model.safetensors", "tokenizer.json")
STATIC_POOLING = "static"
_ST_STATIC = "sentence_transformers.models.StaticEmbedding"
_ST_NORMALIZE = "sentence_transformers.models.Normalize"


def check_static_pooling(pooling: Any, folder: str | os.PathLike[str]) -> None:
    """A static folder has one pooling, its own; anything else named (a name, or an object with a ``name``) is
    refused in one line."""
    name = getattr(pooling, "name", pooling)
    if name is not None and str(name) != STATIC_POOLING:
        raise BadInputError(
            f"{folder} is a static encoder folder: its only pooling is {STATIC_POOLING!r} (a token mean), "
            f"not {str(name)!r}"
        )


@dataclass(frozen=True)
class StaticTable:
    """A static encoder: a token table and the tokenizer whose ids index it.

    ``embeddings`` is float32 ``[vocab, dim]`` with token weights and any folded transform already applied;
    a sentence vector is the plain mean of its tokens' rows (unknown tokens removed, at most ``max_length``
    tokens, ``None``: no limit), L2-normalised when ``normalize``. ``provenance`` is written under
    ``config.json["whitevec"]``.
    """

    embeddings: np.ndarray
    tokenizer: Tokenizer
    normalize: bool
    max_length: int | None
    provenance: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        table = self.embeddings
        if not isinstance(table, np.ndarray) or table.ndim != 2 or table.dtype != np.float32:
            raise BadInputError("a static table's embeddings must be a 2-D float32 numpy array [vocab, dim]")
        if table.shape[0] == 0 or table.shape[1] == 0:
            raise BadInputError(f"a static table's embeddings are empty (shape {table.shape})")
        if not np.isfinite(table).all():
            raise BadInputError("a static table's embeddings hold NaN or infinite values")
        if not isinstance(self.tokenizer, Tokenizer):
            raise BadInputError("a static table needs a fast tokenizer (a tokenizers.Tokenizer)")
        vocab = self.tokenizer.get_vocab()
        if len(vocab) != table.shape[0] or max(vocab.values()) >= table.shape[0]:
            raise BadInputError(
                f"the static table has {table.shape[0]} rows but its tokenizer has {len(vocab)} tokens "
                f"(ids up to {max(vocab.values())}); Model2Vec needs one row per token id"
            )
        if not isinstance(self.normalize, bool):
            raise BadInputError(f"normalize must be True or False, not {self.normalize!r}")
        if self.max_length is not None and (
            isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 1
        ):
            raise BadInputError(f"max_length must be a positive integer or None, not {self.max_length!r}")

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])


def saved_tokenizer(table: StaticTable, max_length: int | None = None) -> Tokenizer:
    """A copy of the tokenizer as Model2Vec saves it: truncation at ``max_length`` (default the table's; so
    sentence-transformers, which has no limit of its own, truncates too), no padding."""
    limit = table.max_length if max_length is None else max_length
    tokenizer = Tokenizer.from_str(table.tokenizer.to_str())
    tokenizer.no_padding()
    if limit is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(limit)
    return tokenizer


def _config(table: StaticTable) -> dict[str, Any]:
    provenance = {**table.provenance, "whitevec_version": __version__}
    return {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": str(provenance.get("base_model", "")),
        "apply_pca": provenance.get("dims"),
        "sif_coefficient": provenance.get("sif_coefficient"),
        "hidden_dim": table.dim,
        # Model2Vec's distill writes this "no sequence limit" marker; max_length is what limits encoding.
        "seq_length": 1000000,
        "normalize": table.normalize,
        "max_length": table.max_length,
        "embedding_dtype": "float32",
        "whitevec": provenance,
    }


def _modules(normalize: bool) -> list[dict[str, Any]]:
    modules: list[dict[str, Any]] = [{"idx": 0, "name": "0", "path": ".", "type": _ST_STATIC}]
    if normalize:
        modules.append({"idx": 1, "name": "1", "path": "1_Normalize", "type": _ST_NORMALIZE})
    return modules


def check_new_folder(path: str | os.PathLike[str], overwrite: bool) -> Path:
    """The folder a writer is about to make, refused when it exists and ``overwrite`` is False, or is a file."""
    target = Path(path).expanduser()
    if target.exists() and not overwrite:
        raise BadInputError(f"{target} exists; pass overwrite=True (CLI: --overwrite) to replace it")
    if target.exists() and not target.is_dir():
        raise BadInputError(f"{target} exists and is not a folder")
    return target


def write_static_folder(
    path: str | os.PathLike[str],
    table: StaticTable,
    *,
    overwrite: bool = False,
    extra_json: dict[str, Any] | None = None,
) -> Path:
    """Write ``table`` as a Model2Vec folder at ``path`` (atomically); an existing ``path`` is refused unless
    ``overwrite``. ``extra_json`` maps file names to JSON documents written into the folder too (a record of
    how it was made). Returns the folder."""
    target = check_new_folder(path, overwrite)
    with atomic_dir(target) as tmp:
        save_file({"embeddings": np.ascontiguousarray(table.embeddings)}, str(tmp / "model.safetensors"))
        saved_tokenizer(table).save(str(tmp / "tokenizer.json"), pretty=False)
        write_json(tmp / "config.json", _config(table))
        write_json(tmp / "modules.json", _modules(table.normalize))
        for name, document in (extra_json or {}).items():
            write_json(tmp / name, document)
        if table.normalize:
            # sentence-transformers' Normalize has no files; the folder makes the layout whole for other readers.
            (tmp / "1_Normalize").mkdir()
    return target


def _read_json(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptFileError(f"{file}: not readable JSON ({exc})") from exc


def is_static_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a static encoder folder: Model2Vec's three files, and a config that says
    ``model_type: model2vec`` or a ``modules.json`` that starts with ``StaticEmbedding`` at the folder itself.
    Reads only the two small JSON files; never raises."""
    folder = Path(path)
    try:
        if not all((folder / name).is_file() for name in FOLDER_FILES):
            return False
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if isinstance(config, dict) and config.get("model_type") == "model2vec":
            return True
        modules_file = folder / "modules.json"
        if not modules_file.is_file():
            return False
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
        first = modules[0] if isinstance(modules, list) and modules else {}
        return isinstance(first, dict) and first.get("type") == _ST_STATIC and first.get("path") in (".", "")
    except (OSError, UnicodeDecodeError, ValueError):
        return False


def _read_table(file: Path) -> np.ndarray:
    """The embeddings, with a Model2Vec token ``mapping`` and per-token ``weights`` folded in, as float32."""
    try:
        with safe_open(str(file), framework="numpy") as tensors:
            names = set(tensors.keys())
            if "embeddings" not in names:
                raise CorruptFileError(f"{file}: no 'embeddings' tensor (holds {sorted(names)})")
            embeddings = tensors.get_tensor("embeddings").astype(np.float32)
            if "mapping" in names:
                embeddings = embeddings[tensors.get_tensor("mapping").astype(np.int64)]
            if "weights" in names:
                embeddings = embeddings * tensors.get_tensor("weights").astype(np.float32)[:, None]
    except CorruptFileError:
        raise
    except Exception as exc:  # safetensors raises its own SafetensorError and several builtins
        raise CorruptFileError(f"{file}: not a readable safetensors file ({exc})") from exc
    if embeddings.ndim != 2:
        raise CorruptFileError(f"{file}: 'embeddings' is not a 2-D table (shape {embeddings.shape})")
    return np.ascontiguousarray(embeddings, dtype=np.float32)


def _read_tokenizer(file: Path) -> Tokenizer:
    try:
        return Tokenizer.from_file(str(file))
    except Exception as exc:  # tokenizers raises a plain Exception for unreadable files
        raise CorruptFileError(f"{file}: not a readable fast tokenizer ({exc})") from exc


def read_static_folder(path: str | os.PathLike[str]) -> StaticTable:
    """Read a static encoder folder (whitevec's or Model2Vec's). Settings follow Model2Vec's loader:
    ``normalize`` from the config (default False), ``max_length`` from the config (default 512, null: none)."""
    folder = Path(path)
    if not folder.is_dir():
        raise DataNotFoundError(f"no static encoder folder at {folder}")
    for name in FOLDER_FILES:
        if not (folder / name).is_file():
            raise CorruptFileError(
                f"{folder / name} is missing: a static encoder folder holds {', '.join(FOLDER_FILES)}"
            )
    config = _read_json(folder / "config.json")
    if not isinstance(config, dict):
        raise CorruptFileError(f"{folder / 'config.json'}: not a JSON object")
    embeddings = _read_table(folder / "model.safetensors")
    tokenizer = _read_tokenizer(folder / "tokenizer.json")
    provenance = config.get("whitevec", {})
    try:
        return StaticTable(
            embeddings=embeddings,
            tokenizer=tokenizer,
            normalize=config.get("normalize", False),
            max_length=config.get("max_length", DEFAULT_MAX_LENGTH),
            provenance=provenance if isinstance(provenance, dict) else {},
        )
    except BadInputError as exc:
        raise CorruptFileError(f"{folder}: {exc}") from exc
