"""Text to sentence vectors: a transformers model plus a named, exactly defined pooling.

Every pooling averages token vectors over the real tokens of a sentence (padding masked out; [CLS] and [SEP]
included, as in BERT-whitening, BERT-flow and sentence-transformers) from one or more entries of the model's
``hidden_states`` tuple, then averages those layer means. ``hidden_states[0]`` is the embedding layer output,
``hidden_states[i]`` the output of transformer layer i, ``hidden_states[-1]`` the last layer.

=====================  ==========================================================================
name                   vector
=====================  ==========================================================================
cls                    hidden_states[-1][:, 0]: the last layer's first ([CLS]) token
pooler                 the model's pooler output (tanh dense over [CLS]); error if it has no pooler
last-avg               token mean of hidden_states[-1]
first-last-avg         mean of the token means of hidden_states[1] and hidden_states[-1] (first transformer
                       layer and last: the BERT-whitening / BERT-flow definition)
embeddings-last-avg    mean of the token means of hidden_states[0] and hidden_states[-1] (older SimCSE code)
last2avg               mean of the token means of hidden_states[-2] and hidden_states[-1]
embeddings-avg         token mean of hidden_states[0] (static token + position embeddings, layer-normed)
"i,j,..."              mean of the token means of the listed hidden_states indices, e.g. "0,-1" or [2, -1]
model                  what the folder's sentence-transformers modules compute (Pooling mode, Dense layers,
                       Normalize), as SentenceTransformer(folder).encode(texts) does; the default for such folders
=====================  ==========================================================================
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import itertools
import json
import logging
import os
import sqlite3
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from whitevec.encoders.models import DEFAULT_MODEL, resolve_model
from whitevec.encoders.protocol import COMPUTE_BACKENDS
from whitevec.encoders.st_config import (
    SentenceTransformersConfig,
    UnsupportedModuleError,
    default_pooling,
    read_max_seq_length,
    read_sentence_transformers_config,
)
from whitevec.encoders.static_format import is_static_folder
from whitevec.encoders.token_pooling import layer_mean, sentence_transformers_pool
from whitevec.encoders.token_weights import (
    TokenFrequencies,
    TokenWeighting,
    check_scheme,
    count_frequencies,
    read_frequencies,
)
from whitevec.errors import BadInputError, WhitevecWarning
from whitevec.preflight import check_device, not_one_string, sqlite_fault, vector_cache_folder
from whitevec.utils.progress import progress_bar

logger = logging.getLogger(__name__)

_MEAN = "mean"
_CLS = "cls"
_POOLER = "pooler"
_MODEL = "model"
# The pooling an Encoder uses when none is named: the folder's own (sentence-transformers modules) when it has
# them, else this one. And the max_length when none is given and the folder states no max_seq_length.
FALLBACK_POOLING = "first-last-avg"
FALLBACK_MAX_LENGTH = 512


@dataclass(frozen=True)
class Pooling:
    """How token vectors become one sentence vector: ``kind`` and the ``hidden_states`` indices it reads."""

    name: str
    kind: str
    layers: tuple[int, ...]

    def resolved_layers(self, n_hidden_states: int) -> tuple[int, ...]:
        """Layer indices made non-negative for a model with ``n_hidden_states`` entries (layers + 1)."""
        out = []
        for index in self.layers:
            real = index + n_hidden_states if index < 0 else index
            if not 0 <= real < n_hidden_states:
                raise BadInputError(
                    f"pooling {self.name!r} reads hidden_states[{index}] but the model has only "
                    f"{n_hidden_states} (indices {-n_hidden_states}..{n_hidden_states - 1})"
                )
            out.append(real)
        return tuple(out)


POOLINGS: dict[str, Pooling] = {
    "cls": Pooling("cls", _CLS, (-1,)),
    "pooler": Pooling("pooler", _POOLER, ()),
    "last-avg": Pooling("last-avg", _MEAN, (-1,)),
    "first-last-avg": Pooling("first-last-avg", _MEAN, (1, -1)),
    "embeddings-last-avg": Pooling("embeddings-last-avg", _MEAN, (0, -1)),
    "last2avg": Pooling("last2avg", _MEAN, (-2, -1)),
    "embeddings-avg": Pooling("embeddings-avg", _MEAN, (0,)),
    "model": Pooling("model", _MODEL, (-1,)),
}


def get_pooling(spec: str | Sequence[int] | Pooling) -> Pooling:
    """A pooling from its name, a comma-separated string of layer indices, or a list of indices."""
    if isinstance(spec, Pooling):
        return spec
    if isinstance(spec, str):
        key = spec.strip().lower()
        if key in POOLINGS:
            return POOLINGS[key]
        parts = [p.strip() for p in key.removeprefix("layers:").split(",") if p.strip()]
        try:
            indices = [int(p) for p in parts]
        except ValueError:
            indices = []
        if not indices:
            raise BadInputError(
                f"unknown pooling {spec!r}; valid: {', '.join(POOLINGS)}, or a list of hidden_states indices "
                "such as '0,-1'"
            )
    else:
        indices = [int(i) for i in spec]
        if not indices:
            raise BadInputError("a layer-list pooling needs at least one hidden_states index")
    return Pooling("layers:" + ",".join(str(i) for i in indices), _MEAN, tuple(indices))


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in Path(text).name or text)[:48]


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


class VectorCache:
    """Sentence vectors on disk, one SQLite table per (model, pooling, max_length) namespace.

    Keys are sha256 digests of the text, so the same text is never encoded twice with the same settings.

    The cache only saves work, so its faults never stop an encode: a damaged file (overwritten, truncated) is
    moved aside as ``<name>.corrupt-<time>`` with a warning and an empty cache takes its place; a write that
    fails (disk full, read-only, I/O error) warns once and turns this cache off, and the vectors are still
    returned.
    """

    def __init__(self, folder: Path, namespace: str, dim: int) -> None:
        self.path = folder / f"{namespace}.sqlite"
        self.dim = dim
        self._db: sqlite3.Connection | None = None
        try:
            self._open()
        except (sqlite3.Error, OSError) as exc:
            if not self._recover(exc, "open"):
                raise

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        except BaseException:
            db.close()
            raise
        self._db = db

    @property
    def enabled(self) -> bool:
        """False once a fault turned the cache off (then ``get`` finds nothing and ``put`` keeps nothing)."""
        return self._db is not None

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    def get(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        if self._db is None:
            return found
        unique = list(dict.fromkeys(keys))
        try:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk)
                for key, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape[0] == self.dim:
                        found[key] = vector
        except (sqlite3.Error, OSError) as exc:
            if not self._recover(exc, "read"):
                raise
            return {}  # whatever a damaged file gave is not trusted
        return found

    def put(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        if self._db is None:
            return
        rows = [
            (k, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for k, v in zip(keys, vectors, strict=True)
        ]
        try:
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", rows)
        except (sqlite3.Error, OSError) as exc:
            if not self._recover(exc, "write"):
                raise

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _recover(self, exc: BaseException, action: str) -> bool:
        """After a failed open, read or write: a damaged file is moved aside and replaced by an empty cache; a
        failing disk or system turns the cache off, with one warning. False for other errors (bugs: re-raise)."""
        kind = "environment" if isinstance(exc, OSError) else sqlite_fault(exc)
        if kind is None:
            return False
        self.close()
        if kind == "corrupt":
            aside = self._move_aside()
            try:
                self._open()
            except (sqlite3.Error, OSError) as again:
                exc, action = again, "rebuild"
            else:
                warnings.warn(
                    f"the vector cache {self.path} was damaged ({exc}); moved it to {aside.name} and started an "
                    "empty one",
                    WhitevecWarning,
                    stacklevel=4,
                )
                return True
        warnings.warn(
            f"could not {action} the vector cache {self.path} ({exc}); the vectors are still returned, but "
            "not cached for the rest of this run",
            WhitevecWarning,
            stacklevel=4,
        )
        return True

    def _move_aside(self) -> Path:
        """Rename the damaged file (and SQLite's -wal/-shm files beside it) to ``<name>.corrupt-<time>``."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while aside.exists():
            n += 1
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        for suffix in ("", "-wal", "-shm"):
            source = self.path.with_name(self.path.name + suffix)
            with contextlib.suppress(FileNotFoundError):
                os.replace(source, aside.with_name(aside.name + suffix))
        return aside


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


def check_weighted_pooling(pooling: Pooling) -> None:
    """BadInputError unless token weights can apply to ``pooling`` (a mean kind)."""
    if pooling.kind != _MEAN:
        raise BadInputError(
            f"token weights apply inside the token mean of a mean pooling (last-avg, first-last-avg, "
            f"embeddings-avg, a list of layers); pooling {pooling.name!r} "
            + ("reads one token's vector" if pooling.kind in (_CLS, _POOLER) else "is the folder's own modules")
            + ", so weights cannot apply to it"
        )


class Encoder:
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
        from transformers import AutoConfig, AutoModel
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # whitevec shows its own progress; the loader's bar is noise

        if max_length is not None and max_length < 2:
            raise BadInputError(f"max_length must be at least 2 (room for the special tokens), got {max_length}")
        if batch_size < 1:
            raise BadInputError(f"batch_size must be at least 1, got {batch_size}")
        if backend not in COMPUTE_BACKENDS:
            raise BadInputError(
                f"unknown encoder backend {backend!r} (CLI: --compute); valid: {', '.join(COMPUTE_BACKENDS)}"
            )
        self.model_name = str(model)
        self.model_path = resolve_model(model)
        if is_static_folder(self.model_path):
            # Its modules.json names a StaticEmbedding, which no pooling of a transformers model reproduces.
            raise BadInputError(
                f"{model} is a static encoder folder, which Encoder does not load; use "
                f"whitevec.encoders.load_encoder({str(model)!r}), which loads either kind (or StaticEncoder)"
            )
        # The folder's sentence-transformers modules (pooling "model"); a module whitevec cannot reproduce is
        # kept as the error to raise when that pooling is asked for, so the named poolings still work.
        self.st_config: SentenceTransformersConfig | None = None
        self._st_error: UnsupportedModuleError | None = None
        try:
            self.st_config = read_sentence_transformers_config(self.model_path)
        except UnsupportedModuleError as exc:
            self._st_error = exc
        if pooling is None:
            pooling = default_pooling(self.model_path, FALLBACK_POOLING)
        self.pooling = get_pooling(pooling)
        # Token weights: the scheme, the pooling and the frequency source are checked before anything loads.
        weighting_source = _weighting_source(token_weights, token_frequencies)
        self.token_weighting: TokenWeighting | None = None
        if weighting_source is not None:
            check_weighted_pooling(self.pooling)
        if self.pooling.kind == _MODEL:
            self._model_config()  # an unsupported module or no configuration fails before the model loads
        if max_length is None:
            max_length = read_max_seq_length(self.model_path) or FALLBACK_MAX_LENGTH
        self.batch_size = batch_size
        self.device = torch.device(device or _default_device())
        self.tokenizer = load_tokenizer(self.model_path, self.st_config)
        self.max_length = token_limit(max_length, self.tokenizer, AutoConfig.from_pretrained(str(self.model_path)))
        if weighting_source is not None:
            # Counting a corpus needs only the tokenizer: a bad or foreign frequency file fails before the model.
            self.token_weighting = self._weighting(*weighting_source)
        self.model = AutoModel.from_pretrained(str(self.model_path)).to(self.device).eval()
        self.backend = backend
        if backend == "int8":
            self.model = _quantize_int8(self.model, self.device)
        elif backend == "bf16":
            self.model = _to_bfloat16(self.model, self.device)
        config = self.model.config
        self.n_hidden_states = int(config.num_hidden_layers) + 1
        if self.max_length < max_length:
            logger.info("max_length %d capped to the model's limit %d", max_length, self.max_length)
        self.hidden_size = int(config.hidden_size)
        self._dense_modules: dict[int, tuple[torch.nn.Module, torch.nn.Module]] = {}
        self._weight_tables: tuple[torch.Tensor, torch.Tensor] | None = None
        self._usable(self.pooling)  # fails early on out-of-range indices or a missing pooler
        self.dim = self.dim_of(self.pooling)

    def _model_config(self) -> SentenceTransformersConfig:
        """The folder's sentence-transformers configuration, or the error saying why pooling 'model' cannot
        run here."""
        if self._st_error is not None:
            raise self._st_error
        if self.st_config is None:
            raise BadInputError(
                f"pooling 'model' needs a sentence-transformers folder (with modules.json); {self.model_path} has "
                f"none. Use a named pooling: {', '.join(n for n in POOLINGS if n != _MODEL)}"
            )
        return self.st_config

    def _usable(self, spec: str | Sequence[int] | Pooling) -> Pooling:
        """``spec`` as a pooling this model can compute: its hidden_states indices exist and, for ``pooler``,
        the model has a pooler layer; for ``model``, the folder's modules can be reproduced."""
        pooling = get_pooling(spec)
        pooling.resolved_layers(self.n_hidden_states)
        if self.token_weighting is not None:
            check_weighted_pooling(pooling)
        needs_pooler = pooling.kind == _POOLER
        if pooling.kind == _MODEL:
            st = self._model_config()
            if st.layers is not None:
                Pooling("model", _MEAN, st.layers).resolved_layers(self.n_hidden_states)
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
        if get_pooling(pooling).kind == _MODEL:
            return self._model_config().output_dim(self.hidden_size)
        return self.hidden_size

    def describe_pooling(self, pooling: str | Sequence[int] | Pooling | None = None) -> str:
        """One line on what ``pooling`` (default: this encoder's) computes, e.g. for ``model`` on
        all-MiniLM-L6-v2: ``model (sentence-transformers modules: mean pooling, Normalize)``."""
        chosen = self.pooling if pooling is None else get_pooling(pooling)
        if chosen.kind == _MODEL:
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
                    *([self._model_config().fingerprint()] if pooling.kind == _MODEL else []),
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
        need_hidden = any(p.kind != _POOLER for p in poolings)
        progress = progress_bar(len(texts), show_progress, f"encoding with {self.model_path.name}")
        with torch.inference_mode(), progress as bar:
            task = bar.add_task("texts", total=len(texts)) if bar is not None else None
            multiple = BF16_LENGTH_MULTIPLE if self.backend == "bf16" else 1
            # Rounded up, but never past max_length (the model's positions end there).
            lengths = [min(-(-len(ids[i]) // multiple) * multiple, self.max_length) for i in order]
            overhead = FORWARD_OVERHEAD_TOKENS.get(self.backend, FORWARD_OVERHEAD_TOKENS["torch"])
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
        if pooling.kind == _MODEL:
            return self._model_pool(outputs, hidden, attention_mask)
        if pooling.kind == _POOLER:
            return outputs.pooler_output
        layers = pooling.resolved_layers(len(hidden))
        if pooling.kind == _CLS:
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
        need_hidden = self.pooling.kind != _POOLER
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
                hidden, Pooling("model", _MEAN, st.layers).resolved_layers(len(hidden)), attention_mask
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
            linear = torch.nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None)
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(layer.weight))
                if layer.bias is not None:
                    linear.bias.copy_(torch.from_numpy(layer.bias))
            self._dense_modules[index] = (linear.to(self.device).eval(), _activation(layer.activation))
        return self._dense_modules[index]


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


def _activation(class_path: str) -> torch.nn.Module:
    """A ``torch.nn`` activation from its class path (a Dense layer's ``activation_function``)."""
    import importlib

    module_name, _, class_name = class_path.rpartition(".")
    try:
        klass = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UnsupportedModuleError(f"unknown Dense activation {class_path!r}") from exc
    if not (isinstance(klass, type) and issubclass(klass, torch.nn.Module)):
        raise UnsupportedModuleError(f"Dense activation {class_path!r} is not a torch.nn module")
    return klass()


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


# What one more forward pass costs beyond its tokens, counted in tokens, per compute backend: splitting a batch
# pays this once more and saves the padding of the shorter texts. A forward of n texts of L tokens takes about
# (overhead + n * L) times the cost of one token. Measured with benchmarks/investigations/forward_cost.py on
# all-MiniLM-L6-v2 (2 CPU threads): float32 48-64, int8 27, bf16 189-271 (oneDNN bf16 matmuls cost more per call).
FORWARD_OVERHEAD_TOKENS = {"torch": 64, "int8": 32, "bf16": 224}

# bf16 pads each batch to a multiple of this many tokens. Why: oneDNN builds (JITs) a kernel for every new
# matrix shape; with lengths free, the server's mixes of queries keep making new shapes. Batches of 32 shuffled
# Cranfield queries: 391-409 queries/s unrounded, 419-451 rounded to 8 (benchmarks/results/bf16_shapes.md).
BF16_LENGTH_MULTIPLE = 8


def length_batches(
    lengths: Sequence[int], batch_size: int, overhead_tokens: int = FORWARD_OVERHEAD_TOKENS["torch"]
) -> list[tuple[int, int]]:
    """``(start, stop)`` slices of ``lengths`` (token counts, longest first) into batches of at most
    ``batch_size``, each padded only to its own longest text: within every run of ``batch_size``, the cuts
    that make the fewest padded tokens plus ``overhead_tokens`` per batch (exact, by dynamic programming)."""
    slices: list[tuple[int, int]] = []
    for first in range(0, len(lengths), batch_size):
        run = lengths[first : first + batch_size]
        n = len(run)
        # best[j]: the least cost of the first j texts; cut[j]: where the last batch of that best plan starts.
        best = [0.0] + [float("inf")] * n
        cut = [0] * (n + 1)
        for stop in range(1, n + 1):
            for start in range(stop):
                cost = best[start] + overhead_tokens + (stop - start) * run[start]
                if cost < best[stop]:
                    best[stop], cut[stop] = cost, start
        bounds = []
        stop = n
        while stop > 0:
            bounds.append((first + cut[stop], first + stop))
            stop = cut[stop]
        slices.extend(reversed(bounds))
    return slices


def _to_bfloat16(model: Any, device: torch.device) -> Any:
    """The model in bfloat16: float32's range with an 8-bit mantissa, so no overflow; poolings average in
    float32."""
    if device.type == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        warnings.warn(
            "this CPU has no bfloat16 instructions (AVX512-BF16 or AMX): backend 'bf16' is emulated and slower "
            "than float32 here; use backend 'int8' for a faster CPU path",
            WhitevecWarning,
            stacklevel=3,
        )
    return model.to(torch.bfloat16)


def _quantize_int8(model: Any, device: torch.device) -> Any:
    """Dynamic int8 quantisation (per-channel weights, activations quantised per batch) of the linear layers.

    The feed-forward output projections (``*.output.dense`` outside attention) stay float: their GELU inputs
    have outlier activations that per-tensor int8 rounds badly (cosine to float vectors 0.95 with them
    quantised, 0.99 without, on STS-B with all-MiniLM-L6-v2). CPU only.
    """
    if device.type != "cpu":
        raise BadInputError(f"backend 'int8' runs on the CPU only; got device {device.type!r}. Use device='cpu'.")
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    spec = {
        name: per_channel_dynamic_qconfig
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and not (name.endswith("output.dense") and "attention" not in name)
    }
    with warnings.catch_warnings():
        # torch marks torch.ao.quantization deprecated in favour of torchao, which is not a dependency.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        return quantize_dynamic(model, spec, dtype=torch.qint8)
