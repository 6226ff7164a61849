"""Text to sentence vectors: the :class:`Encoder`, a transformers model plus a named, exactly defined pooling
(the poolings: :mod:`whitevec.encoders.pooling`), with its vectors kept in a vector cache."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import logging
import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from whitevec.encoders import compute, tokenization
from whitevec.encoders.cache import VectorCache
from whitevec.encoders.compute import default_device, dense_modules, length_batches, quantize_int8, to_bfloat16
from whitevec.encoders.models.resolution import DEFAULT_MODEL, resolve_model
from whitevec.encoders.models.st_config import (
    SentenceTransformersConfig,
    UnsupportedModuleError,
    default_pooling,
    read_max_seq_length,
    read_sentence_transformers_config,
)
from whitevec.encoders.pooling import (
    CLS_KIND,
    FALLBACK_POOLING,
    MEAN_KIND,
    MODEL_KIND,
    POOLER_KIND,
    POOLINGS,
    Pooling,
    check_weighted_pooling,
    get_pooling,
)
from whitevec.encoders.protocol import COMPUTE_BACKENDS
from whitevec.encoders.static_format import is_static_folder
from whitevec.encoders.token_pooling import layer_mean, sentence_transformers_pool
from whitevec.encoders.token_weights import (
    TokenFrequencies,
    TokenWeighting,
    check_scheme,
    count_frequencies,
    read_frequencies,
)
from whitevec.encoders.tokenization import FALLBACK_MAX_LENGTH, folder_fingerprint, load_tokenizer, token_limit
from whitevec.errors import BadInputError
from whitevec.preflight import check_device, not_one_string, vector_cache_folder
from whitevec.utils.progress import progress_bar

logger = logging.getLogger(__name__)


def _weighting_source(
    token_weights: str | TokenWeighting | None,
    token_frequencies: str | os.PathLike[str] | TokenFrequencies | None,
) -> tuple[str | TokenWeighting, TokenFrequencies | Path | None] | None:
    """(scheme or weighting, frequency source) checked without loading anything, or None for no weights."""
    if isinstance(token_weights, TokenWeighting):
        if token_frequencies is not None:
            raise BadInputError("give token_frequencies with a scheme name, not with a TokenWeighting")
        return token_weights, None
    scheme = check_scheme(token_weights)
    if scheme is None:
        if token_frequencies is not None:
            raise BadInputError("token frequencies were given without token weights (sif, usif or zipf)")
        return None
    if token_frequencies is None:
        raise BadInputError(
            f"token weights {scheme!r} need token frequencies: a saved frequency file (.json) or a text corpus"
        )
    return scheme, read_frequencies(token_frequencies)


def _check_settings(max_length: int | None, batch_size: int, backend: str) -> None:
    """BadInputError for an Encoder's settings that can never work, before anything loads."""
    if max_length is not None and max_length < 2:
        raise BadInputError(f"max_length must be at least 2 (room for the special tokens), got {max_length}")
    if batch_size < 1:
        raise BadInputError(f"batch_size must be at least 1, got {batch_size}")
    if backend not in COMPUTE_BACKENDS:
        raise BadInputError(
            f"unknown encoder backend {backend!r} (CLI: --compute); valid: {', '.join(COMPUTE_BACKENDS)}"
        )


class Encoder(tokenization.TokenStrings):
    """A transformers model and a pooling: ``encode(texts)`` gives float32 sentence vectors, one row per text.

    Texts are tokenised once, sorted by length and batched with dynamic padding, so the order of the input is kept
    in the output while padding stays small. With ``cache`` on (default), vectors are kept on disk keyed by model,
    pooling, max_length and text, so a second encode of the same texts is free.

    Faster paths, each with slightly different vectors (its own cache namespace; ``describe()["backend"]``):
    ``backend="bf16"`` runs the model in bfloat16 (pooling in float32): faster on CPUs with bfloat16
    instructions (AVX512-BF16, AMX) and on GPUs, with STS-B Spearman within 0.02 points of float32.
    ``token_weights`` (``"sif"``, ``"usif"``, ``"zipf"``; see :mod:`whitevec.encoders.token_weights`) weighs each
    token in
    the token mean of a mean pooling by its frequency in ``token_frequencies``: a saved frequency file
    (``.json``), a text corpus (one text a line, counted here with this model's tokenizer) or a
    :class:`TokenFrequencies`; or give a :class:`TokenWeighting`. Special tokens are then left out of the mean.
    ``cls`` and ``pooler`` read one vector, so weights do not apply to them (BadInputError).

    ``backend="int8"`` (CPU only) quantises the linear layers (all but the feed-forward output projections) to
    int8 with PyTorch dynamic quantisation: for CPUs without bfloat16; less exact (0.4 to 1.2 STS-B points
    lower). Speeds and scores: docs/results/bench.md.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        pooling: str | Sequence[int] | Pooling | None = None,
        max_length: int | None = None,
        batch_size: int = 64,
        device: str | None = None,
        cache: bool | str | os.PathLike[str] = True,
        backend: str = "torch",
        token_weights: str | TokenWeighting | None = None,
        token_frequencies: str | os.PathLike[str] | TokenFrequencies | None = None,
    ) -> None:
        # First, before any heavy import or model load: a cache folder that cannot work fails in milliseconds, a
        # device this machine lacks is named with those it has (torch's own errors are tracebacks).
        self._cache_folder = vector_cache_folder(cache)
        device = check_device(device)
        self._caches: dict[str, VectorCache] = {}
        from transformers import AutoConfig
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # whitevec shows its own progress; the loader's bar is noise
        _check_settings(max_length, batch_size, backend)
        self._read_folder(model)
        self.pooling = get_pooling(
            default_pooling(self.model_path, FALLBACK_POOLING) if pooling is None else pooling
        )
        # Token weights: the scheme, the pooling and the frequency source are checked before anything loads.
        weighting_source = _weighting_source(token_weights, token_frequencies)
        self.token_weighting: TokenWeighting | None = None
        if weighting_source is not None:
            check_weighted_pooling(self.pooling)
        if self.pooling.kind == MODEL_KIND:
            self._model_config()  # an unsupported module or no configuration fails before the model loads
        if max_length is None:
            max_length = read_max_seq_length(self.model_path) or FALLBACK_MAX_LENGTH
        self.batch_size = batch_size
        self.device = torch.device(device or default_device())
        self.tokenizer = load_tokenizer(self.model_path, self.st_config)
        self.max_length = token_limit(max_length, self.tokenizer, AutoConfig.from_pretrained(str(self.model_path)))
        if weighting_source is not None:
            # Counting a corpus needs only the tokenizer: a bad or foreign frequency file fails before the model.
            self.token_weighting = self._weighting(*weighting_source)
        self.backend = backend
        self.model = self._load_model()
        config = self.model.config
        self.n_hidden_states = int(config.num_hidden_layers) + 1
        if self.max_length < max_length:
            logger.info("max_length %d capped to the model's limit %d", max_length, self.max_length)
        self.hidden_size = int(config.hidden_size)
        self._dense_modules: dict[int, tuple[torch.nn.Module, torch.nn.Module]] = {}
        self._weight_tables: tuple[torch.Tensor, torch.Tensor] | None = None
        self._usable(self.pooling)  # fails early on out-of-range indices or a missing pooler
        self.dim = self.dim_of(self.pooling)

    def _read_folder(self, model: str | os.PathLike[str]) -> None:
        """The model's folder and its sentence-transformers modules (pooling "model"): a module whitevec cannot
        reproduce is kept as the error to raise when that pooling is asked for, so named poolings still work."""
        self.model_name = str(model)
        self.model_path = resolve_model(model)
        if is_static_folder(self.model_path):
            # Its modules.json names a StaticEmbedding, which no pooling of a transformers model reproduces.
            raise BadInputError(
                f"{model} is a static encoder folder, which Encoder does not load; use "
                f"whitevec.encoders.load_encoder({str(model)!r}), which loads either kind (or StaticEncoder)"
            )
        self.st_config: SentenceTransformersConfig | None = None
        self._st_error: UnsupportedModuleError | None = None
        try:
            self.st_config = read_sentence_transformers_config(self.model_path)
        except UnsupportedModuleError as exc:
            self._st_error = exc

    def _load_model(self) -> Any:
        """The model's weights on this encoder's device, in evaluation mode, converted for its backend."""
        from transformers import AutoModel

        model = AutoModel.from_pretrained(str(self.model_path)).to(self.device).eval()
        if self.backend == "int8":
            return quantize_int8(model, self.device)
        if self.backend == "bf16":
            return to_bfloat16(model, self.device)
        return model

    def _model_config(self) -> SentenceTransformersConfig:
        """The folder's sentence-transformers configuration, or the error saying why pooling 'model' cannot
        run here."""
        if self._st_error is not None:
            raise self._st_error
        if self.st_config is None:
            raise BadInputError(
                f"pooling 'model' needs a sentence-transformers folder (with modules.json); {self.model_path} has "
                f"none. Use a named pooling: {', '.join(n for n in POOLINGS if n != MODEL_KIND)}"
            )
        return self.st_config

    def _usable(self, spec: str | Sequence[int] | Pooling) -> Pooling:
        """``spec`` as a pooling this model can compute: its hidden_states indices exist and, for ``pooler``,
        the model has a pooler layer; for ``model``, the folder's modules can be reproduced."""
        pooling = get_pooling(spec)
        pooling.resolved_layers(self.n_hidden_states)
        if self.token_weighting is not None:
            check_weighted_pooling(pooling)
        needs_pooler = pooling.kind == POOLER_KIND
        if pooling.kind == MODEL_KIND:
            st = self._model_config()
            if st.layers is not None:
                Pooling("model", MEAN_KIND, st.layers).resolved_layers(self.n_hidden_states)
            needs_pooler = st.pooling_modes == ("pooler",)
            st.output_dim(self.hidden_size)  # a Dense layer of the wrong width fails here
        if needs_pooler and getattr(self.model, "pooler", None) is None:
            raise BadInputError(
                f"pooling {pooling.name!r} needs a model with a pooler layer; {self.model_name} has none"
            )
        return pooling

    def dim_of(self, pooling: str | Sequence[int] | Pooling) -> int:
        """The size of the vectors ``pooling`` gives: the hidden size, or for ``model`` what its Pooling and
        Dense layers make of it."""
        if get_pooling(pooling).kind == MODEL_KIND:
            return self._model_config().output_dim(self.hidden_size)
        return self.hidden_size

    def describe_pooling(self, pooling: str | Sequence[int] | Pooling | None = None) -> str:
        """One line on what ``pooling`` (default: this encoder's) computes, e.g. for ``model`` on
        all-MiniLM-L6-v2: ``model (sentence-transformers modules: mean pooling, Normalize)``."""
        chosen = self.pooling if pooling is None else get_pooling(pooling)
        if chosen.kind == MODEL_KIND:
            return f"model (sentence-transformers modules: {self._model_config().describe()})"
        return chosen.name

    def with_pooling(self, pooling: str | Sequence[int] | Pooling) -> Encoder:
        """The same loaded model with another pooling (no reload; the vector caches are shared)."""
        usable = self._usable(pooling)
        other = copy.copy(self)
        other.pooling = usable
        other.dim = self.dim_of(usable)
        return other

    def without_cache(self) -> Encoder:
        """The same loaded model and pooling, reading and writing no vector cache (e.g. to time real encoding)."""
        other = copy.copy(self)
        other._cache_folder = None
        other._caches = {}
        return other

    @property
    def caches_vectors(self) -> bool:
        """Whether encoded vectors are kept on disk and reused."""
        return self._cache_folder is not None

    def close(self) -> None:
        """Close the vector cache files (SQLite connections) this encoder holds.

        Encoders made by ``with_pooling`` share their vector caches with the one they came from, so closing any
        of them closes the caches of all. None becomes unusable: the next ``encode`` of any reopens the cache it
        needs. ``without_cache`` encoders hold no cache, and closing one leaves its parent's open.
        """
        caches = list(self._caches.values())
        self._caches.clear()  # the dict is shared too: every encoder of the family reopens on its next encode
        for cache in caches:
            cache.close()

    def __enter__(self) -> Encoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- identity ---------------------------------------------------------------------------------------
    @property
    def model_fingerprint(self) -> str:
        """sha256 over config.json and the names and sizes of the weight files: same model, same print."""
        return folder_fingerprint(self.model_path)

    def describe(self) -> dict[str, Any]:
        """What an index manifest or a result records about how vectors were made."""
        return {
            "model": self.model_name,
            "model_fingerprint": self.model_fingerprint,
            "pooling": self.pooling.name,
            "layers": list(self.pooling.resolved_layers(self.n_hidden_states)),
            "pooling_detail": self.describe_pooling(),
            "max_length": self.max_length,
            "dim": self.dim,
            "backend": self.backend,
            **({"token_weights": self.token_weighting.describe()} if self.token_weighting is not None else {}),
        }

    def known_token_mask(self, texts: Sequence[str]) -> np.ndarray:
        """A bool per text: True where the tokenizer finds, within ``max_length``, a token other than the
        special ones ([CLS], [SEP], padding, the unknown token). No model pass; see
        :func:`whitevec.encoders.protocol.known_token_mask` for what is done with it."""
        texts = list(not_one_string(texts))
        if not texts:
            return np.zeros(0, dtype=bool)
        id_lists = self.tokenizer(
            texts, add_special_tokens=False, truncation=True, max_length=self.max_length, verbose=False
        )["input_ids"]
        counts = np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists))
        ids = np.fromiter(itertools.chain.from_iterable(id_lists), dtype=np.int64, count=int(counts.sum()))
        known = ~np.isin(ids, np.array(sorted(set(self.tokenizer.all_special_ids)), dtype=np.int64))
        text_of = np.repeat(np.arange(len(texts)), counts)
        return np.bincount(text_of[known], minlength=len(texts)) > 0

    def _cache_for(self, pooling: Pooling) -> VectorCache | None:
        if self._cache_folder is None:
            return None
        weighting = self.token_weighting
        slot = pooling.name if weighting is None else f"{pooling.name}|{weighting.fingerprint()}"
        if slot not in self._caches:
            weights = sorted(self.model_path.glob("*.safetensors")) + sorted(self.model_path.glob("*.bin"))
            stamp = [f"{w.resolve()}:{w.stat().st_size}:{w.stat().st_mtime_ns}" for w in weights]
            ident = json.dumps(
                [
                    self.model_fingerprint,
                    stamp,
                    pooling.kind,
                    pooling.resolved_layers(self.n_hidden_states),
                    self.max_length,
                    # Only non-default backends join the key, so existing float caches keep their names.
                    *([self.backend] if self.backend != "torch" else []),
                    # Likewise the model's own pooling (its modes, Dense weights, Normalize) and lower-casing.
                    *([self._model_config().fingerprint()] if pooling.kind == MODEL_KIND else []),
                    *(["lower"] if self.st_config is not None and self.st_config.do_lower_case else []),
                    # Token weights: scheme, parameter and the counts' digest (other weights, other vectors).
                    *([self.token_weighting.fingerprint()] if self.token_weighting is not None else []),
                ],
            )
            weighted = "" if self.token_weighting is None else f"-{self.token_weighting.scheme}"
            namespace = (
                f"{self.model_path.name}-{pooling.name.replace(':', '_').replace(',', '_')}{weighted}-"
                + hashlib.sha256(ident.encode()).hexdigest()[:16]
            )
            self._caches[slot] = VectorCache(self._cache_folder, namespace, self.dim_of(pooling))
        return self._caches[slot]

    # --- encoding ---------------------------------------------------------------------------------------
    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> np.ndarray:
        """Sentence vectors for ``texts``: float32, shape (len(texts), dim), in input order."""
        return self.encode_poolings(texts, [self.pooling], batch_size, show_progress)[self.pooling.name]

    def encode_poolings(
        self,
        texts: Sequence[str],
        poolings: Sequence[str | Sequence[int] | Pooling],
        batch_size: int | None = None,
        show_progress: bool | None = None,
    ) -> dict[str, np.ndarray]:
        """Vectors for several poolings from one forward pass per batch: ``{pooling name: array}``."""
        if isinstance(texts, str):
            raise TypeError("texts must be a sequence of strings, not a single string; wrap it in a list")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is a {type(text).__name__}, not a str")
        wanted = [self._usable(p) for p in poolings]
        out = {p.name: np.zeros((len(texts), self.dim_of(p)), dtype=np.float32) for p in wanted}
        if not texts:
            return out
        keys = [VectorCache.key(t) for t in texts]
        missing: set[int] = set()
        for pooling in wanted:
            cache = self._cache_for(pooling)
            found = cache.get(keys) if cache else {}
            for i, key in enumerate(keys):
                if key in found:
                    out[pooling.name][i] = found[key]
                else:
                    missing.add(i)
        if missing:
            todo = sorted(missing)
            unique_texts = list(dict.fromkeys(texts[i] for i in todo))
            fresh = self._forward(unique_texts, wanted, batch_size or self.batch_size, show_progress)
            position = {t: j for j, t in enumerate(unique_texts)}
            for pooling in wanted:
                rows = fresh[pooling.name]
                for i in todo:
                    out[pooling.name][i] = rows[position[texts[i]]]
                cache = self._cache_for(pooling)
                if cache is not None:
                    cache.put([VectorCache.key(t) for t in unique_texts], rows)
        return out

    def _forward(
        self, texts: list[str], poolings: list[Pooling], batch_size: int, show_progress: bool | None
    ) -> dict[str, np.ndarray]:
        encoded = self.tokenizer(texts, add_special_tokens=True, truncation=False, verbose=False)
        ids: list[list[int]] = encoded["input_ids"]
        too_long = sum(len(seq) > self.max_length for seq in ids)
        if too_long:
            warnings.warn(
                f"{too_long} of {len(texts)} texts are longer than max_length={self.max_length} tokens and were "
                "truncated",
                stacklevel=3,
            )
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
        result = {p.name: np.empty((len(texts), self.dim_of(p)), dtype=np.float32) for p in poolings}
        need_hidden = any(p.kind != POOLER_KIND for p in poolings)
        progress = progress_bar(len(texts), show_progress, f"encoding with {self.model_path.name}")
        with torch.inference_mode(), progress as bar:
            task = bar.add_task("texts", total=len(texts)) if bar is not None else None
            multiple = compute.BF16_LENGTH_MULTIPLE if self.backend == "bf16" else 1
            # Rounded up, but never past max_length (the model's positions end there).
            lengths = [min(-(-len(ids[i]) // multiple) * multiple, self.max_length) for i in order]
            overhead = compute.FORWARD_OVERHEAD_TOKENS.get(self.backend, compute.FORWARD_OVERHEAD_TOKENS["torch"])
            for start, stop in length_batches(lengths, batch_size, overhead):
                batch_idx = order[start:stop]
                round_to = multiple if multiple > 1 and lengths[start] % multiple == 0 else None
                batch = self.tokenizer(
                    [texts[i] for i in batch_idx],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    pad_to_multiple_of=round_to,
                    return_tensors="pt",
                ).to(self.device)
                outputs = self.model(**batch, output_hidden_states=need_hidden, return_dict=True)
                hidden = outputs.hidden_states if need_hidden else None
                weights = self._token_weights(batch["input_ids"], batch["attention_mask"])
                for pooling in poolings:
                    vectors = self._pool(pooling, outputs, hidden, batch["attention_mask"], weights)
                    result[pooling.name][batch_idx] = vectors.float().cpu().numpy()
                if bar is not None and task is not None:
                    bar.advance(task, len(batch_idx))
        return result

    def _pool(
        self,
        pooling: Pooling,
        outputs: Any,
        hidden: Any,
        attention_mask: torch.Tensor,
        weights: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        if pooling.kind == MODEL_KIND:
            return self._model_pool(outputs, hidden, attention_mask)
        if pooling.kind == POOLER_KIND:
            return outputs.pooler_output
        layers = pooling.resolved_layers(len(hidden))
        if pooling.kind == CLS_KIND:
            return hidden[layers[0]][:, 0]
        if weights is not None:
            return layer_mean(hidden, layers, weights[0], weights[1])
        return layer_mean(hidden, layers, attention_mask)

    def _token_weights(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(mask of real non-special tokens, weight of each token) for a batch, or None without weights."""
        if self.token_weighting is None:
            return None
        if self._weight_tables is None:
            table = torch.from_numpy(self.token_weighting.weights()).to(torch.float32)
            real = torch.ones(table.shape[0], dtype=torch.float32)
            real[list(self.token_weighting.frequencies.special_ids)] = 0.0
            self._weight_tables = (real.to(self.device), table.to(self.device))
        real, table = self._weight_tables
        mask = real[input_ids] * attention_mask.to(torch.float32)
        return mask, table[input_ids] * mask

    # --- token weights ----------------------------------------------------------------------------------
    def _weighting(self, scheme: str | TokenWeighting, source: TokenFrequencies | Path | None) -> TokenWeighting:
        """The TokenWeighting of a checked source: loaded counts checked against this tokenizer, or a corpus
        counted with it."""
        if isinstance(scheme, TokenWeighting):
            scheme.frequencies.check_tokenizer(self.tokenizer, self.model_name)
            return scheme
        if isinstance(source, Path):
            from whitevec.datasets import read_texts_file

            frequencies = count_frequencies(
                self.tokenizer,
                read_texts_file(source),
                self.max_length,
                model=self.model_name,
                model_fingerprint=self.model_fingerprint,
                source=source.name,
            )
        else:
            assert source is not None
            frequencies = source
            frequencies.check_tokenizer(self.tokenizer, self.model_name)
        return TokenWeighting(scheme, frequencies)

    def with_token_weights(self, weighting: TokenWeighting | None) -> Encoder:
        """The same loaded model with other token weights (None: none); vector caches shared, each weighting in
        its own namespace."""
        if weighting is not None:
            weighting.frequencies.check_tokenizer(self.tokenizer, self.model_name)
            check_weighted_pooling(self.pooling)
        other = copy.copy(self)
        other.token_weighting = weighting
        other._weight_tables = None
        return other

    def token_vectors(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Per batch of ``texts`` (batched longest first, not in input order): ``(vectors, ids)`` of every real
        non-special token, each vector the mean over this encoder's (mean) pooling layers of that token's hidden
        state: the vectors the token mean averages."""
        check_weighted_pooling(self.pooling)
        layers = self.pooling.resolved_layers(self.n_hidden_states)
        specials = torch.tensor(sorted({int(i) for i in self.tokenizer.all_special_ids}), dtype=torch.long)
        size = batch_size or self.batch_size
        # Longest first, so each batch pads little (the order of the tokens does not matter to moments).
        ordered = sorted(texts, key=len, reverse=True)
        progress = progress_bar(len(ordered), show_progress, f"token vectors of {self.model_path.name}")
        with torch.inference_mode(), progress as bar:
            task = bar.add_task("texts", total=len(ordered)) if bar is not None else None
            for start in range(0, len(ordered), size):
                batch = self.tokenizer(
                    ordered[start : start + size],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                outputs = self.model(**batch, output_hidden_states=True, return_dict=True)
                keep = batch["attention_mask"].bool() & ~torch.isin(batch["input_ids"], specials.to(self.device))
                vectors = sum(outputs.hidden_states[i].float() for i in layers) / len(layers)
                yield vectors[keep].cpu().numpy(), batch["input_ids"][keep].cpu().numpy()
                if bar is not None and task is not None:
                    bar.advance(task, len(ordered[start : start + size]))

    def encode_ids(self, sequences: Sequence[Sequence[int]], batch_size: int | None = None) -> np.ndarray:
        """Vectors of inputs already turned into token ids (special tokens included, as the model is to see
        them), pooled by this encoder's pooling over all their positions: float32, one row per input, in input
        order. For inputs no text tokenises to, such as one vocabulary token between [CLS] and [SEP]."""
        bad = next((i for i, ids in enumerate(sequences) if not 0 < len(ids) <= self.max_length), None)
        if bad is not None:
            raise BadInputError(
                f"input {bad} has {len(sequences[bad])} token ids; each input needs 1 to {self.max_length}"
            )
        pad = int(self.tokenizer.pad_token_id or 0)
        order = sorted(range(len(sequences)), key=lambda i: -len(sequences[i]))
        size = batch_size or self.batch_size
        out = np.empty((len(sequences), self.dim), dtype=np.float32)
        need_hidden = self.pooling.kind != POOLER_KIND
        with torch.inference_mode():
            for start in range(0, len(order), size):
                rows = order[start : start + size]
                ids = torch.full((len(rows), len(sequences[rows[0]])), pad, dtype=torch.long)
                mask = torch.zeros_like(ids)
                for row, i in enumerate(rows):
                    ids[row, : len(sequences[i])] = torch.as_tensor(list(sequences[i]), dtype=torch.long)
                    mask[row, : len(sequences[i])] = 1
                ids, mask = ids.to(self.device), mask.to(self.device)
                outputs = self.model(
                    input_ids=ids, attention_mask=mask, output_hidden_states=need_hidden, return_dict=True
                )
                hidden = outputs.hidden_states if need_hidden else None
                vectors = self._pool(self.pooling, outputs, hidden, mask, self._token_weights(ids, mask))
                out[rows] = vectors.float().cpu().numpy()
        return out

    def _model_pool(self, outputs: Any, hidden: Any, attention_mask: torch.Tensor) -> torch.Tensor:
        """What sentence-transformers' modules after the Transformer compute, step by step, in float32."""
        st = self._model_config()
        if st.layers is not None:
            vectors = layer_mean(
                hidden, Pooling("model", MEAN_KIND, st.layers).resolved_layers(len(hidden)), attention_mask
            )
        elif st.pooling_modes == ("pooler",):
            vectors = outputs.pooler_output.float()
        else:
            vectors = sentence_transformers_pool(hidden[-1].float(), attention_mask, st.pooling_modes)
        for index, (kind, _) in enumerate(st.steps):
            if kind == "normalize":
                vectors = torch.nn.functional.normalize(vectors, p=2, dim=-1)
            else:
                linear, activation = self._dense(index)
                vectors = activation(linear(vectors))
        return vectors

    def _dense(self, index: int) -> tuple[torch.nn.Module, torch.nn.Module]:
        """The torch layers of the folder's Dense step ``index``, built once."""
        if index not in self._dense_modules:
            layer = self._model_config().steps[index][1]
            assert layer is not None
            self._dense_modules[index] = dense_modules(layer, self.device)
        return self._dense_modules[index]
