"""Tokenizers as an Encoder uses them (lower-casing, the length limit), token counts with a model's tokenizer,
and a model folder's fingerprint; none of these loads a model's weights."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from whitevec.encoders.models.resolution import resolve_model
from whitevec.encoders.models.st_config import (
    SentenceTransformersConfig,
    UnsupportedModuleError,
    read_max_seq_length,
    read_sentence_transformers_config,
)
from whitevec.encoders.token_weights import TokenFrequencies, count_frequencies
from whitevec.errors import BadInputError

# The max_length when none is given and the folder states no max_seq_length.
FALLBACK_MAX_LENGTH = 512


def load_tokenizer(model_path: Path, st_config: SentenceTransformersConfig | None) -> Any:
    """The model's tokenizer as the Encoder uses it (lower-casing first when the folder says do_lower_case)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    if st_config is not None and st_config.do_lower_case:
        _lower_case(tokenizer)
    return tokenizer


def load_model_tokenizer(model: str | os.PathLike[str]) -> tuple[Path, Any]:
    """``model``'s folder and its tokenizer as an Encoder of it tokenises; loads no weights."""
    path = resolve_model(model)
    try:
        st_config = read_sentence_transformers_config(path)
    except UnsupportedModuleError:
        st_config = None
    return path, load_tokenizer(path, st_config)


def token_limit(max_length: int, tokenizer: Any, config: Any) -> int:
    """``max_length`` capped to what the tokenizer and the model's position embeddings allow."""
    limits = [max_length]
    if 0 < getattr(tokenizer, "model_max_length", 0) < 100_000:
        limits.append(int(tokenizer.model_max_length))
    positions = getattr(config, "max_position_embeddings", None)
    if positions:
        # RoBERTa-style models (MPNet too) reserve padding_idx + 1 position ids.
        offset = int(config.pad_token_id) + 1 if config.model_type in {"roberta", "xlm-roberta", "mpnet"} else 0
        limits.append(int(positions) - offset)
    return min(limits)


def count_model_frequencies(
    model: str | os.PathLike[str], texts: Sequence[str], max_length: int | None = None
) -> TokenFrequencies:
    """Token frequencies of ``texts`` counted with ``model``'s tokenizer as an Encoder of that model tokenises
    (same lower-casing and truncation); loads the tokenizer only, never the weights."""
    from transformers import AutoConfig

    if max_length is not None and max_length < 2:
        raise BadInputError(f"max_length must be at least 2 (room for the special tokens), got {max_length}")
    path, tokenizer = load_model_tokenizer(model)
    limit = token_limit(
        max_length or read_max_seq_length(path) or FALLBACK_MAX_LENGTH,
        tokenizer,
        AutoConfig.from_pretrained(str(path)),
    )
    return count_frequencies(tokenizer, texts, limit, model=str(model), model_fingerprint=folder_fingerprint(path))


def folder_fingerprint(path: Path) -> str:
    """sha256 over a model folder's config.json and the names and sizes of its weight files."""
    digest = hashlib.sha256((path / "config.json").read_bytes())
    for weights in sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin")):
        digest.update(f"{weights.name}:{weights.stat().st_size}".encode())
    return digest.hexdigest()


def _lower_case(tokenizer: Any) -> None:
    """Lower-case text before tokenizing, as sentence-transformers' ``do_lower_case`` does: a Lowercase
    normalizer put in front of a fast tokenizer's own (unless it lower-cases already)."""
    from tokenizers.normalizers import Lowercase
    from tokenizers.normalizers import Sequence as NormalizerSequence

    backend = tokenizer.backend_tokenizer
    current: Any = backend.normalizer
    if isinstance(current, Lowercase) or (
        isinstance(current, NormalizerSequence) and any(isinstance(n, Lowercase) for n in current)  # type: ignore[attr-defined]
    ):
        return
    parts: list[Any] = [Lowercase()]
    if isinstance(current, NormalizerSequence):
        parts += list(current)  # type: ignore[call-overload]
    elif current is not None:
        parts.append(current)
    backend.normalizer = NormalizerSequence(parts)


class TokenStrings:
    """``token_strings`` for an encoder holding a transformers ``tokenizer`` (the Encoder): what makes it a
    :class:`whitevec.encoders.protocol.KnowsTokenStrings`, kept here beside the other uses of its tokenizer."""

    tokenizer: Any

    def token_strings(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's tokens as the tokenizer spells them (WordPiece's ``##`` pieces included), the whole text
        (not cut at ``max_length``), without special tokens and the unknown token: the terms of a lexical index
        with the ``encoder`` analyzer."""
        if isinstance(texts, str):
            raise BadInputError("token_strings takes a sequence of texts, not one string")
        items = list(texts)
        if not items:
            return []
        id_lists = self.tokenizer(items, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
        specials = {int(i) for i in self.tokenizer.all_special_ids}
        return [self.tokenizer.convert_ids_to_tokens([i for i in ids if i not in specials]) for ids in id_lists]
