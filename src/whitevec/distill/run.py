"""``whitevec distill``: a static encoder from any model whitevec loads, written as a Model2Vec folder.

A static encoder keeps one vector per vocabulary token; a sentence is the plain mean of its tokens' rows. The
table is made in four steps:

1. Raw token vectors, by ``method`` (:mod:`whitevec.distill.token_table`): ``tokens``, each vocabulary token alone
   between the model's special tokens, pooled (Model2Vec 0.10's distill), or ``corpus``, the mean of each
   token's contextual vectors over a sample of the user's text (``tokens`` for tokens the sample never shows).
2. PCA to ``dims``, fitted on the table's rows (centred, as Model2Vec does); ``dims=None`` keeps the raw rows.
3. Token weights multiply the rows: ``sif-rank`` (Model2Vec's default: SIF with ``a = 1e-4`` on ``p(w)`` from
   Zipf's law over the token's rank in the vocabulary), ``sif``, ``usif`` or ``zipf`` over token counts
   (:mod:`whitevec.encoders.token_weights`; counted with the model's tokenizer on every line of the corpus, or
   read from
   a frequency file), or ``none``.
4. ``transform`` (any affine spec: ``whitening-256``, ``pca-128``, ``abtt``...), fitted on the static sentence
   vectors of the sample and folded into the rows: for ``t(x) = x A + b`` and a sentence ``s = mean_i r_i``,
   ``t(s) = mean_i (r_i A + b)``, so the table becomes ``r A + b``. Exact for every text of at least one token;
   a text with none gets zeros (not ``b``).

The sample (``sample`` lines drawn with ``seed``; every line when there are fewer) is what goes through the
model for ``corpus`` and what the transform is fitted on. Every input is checked before any model loads: the
corpus, the frequency file, the transform spec, the output folder, a fast tokenizer, and the memory the table
needs at ``dims``.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from whitevec.datasets import read_texts_file
from whitevec.distill.token_table import corpus_table, reduce_table, single_token_table, static_tokenizer
from whitevec.encoders.models.resolution import resolve_model
from whitevec.encoders.pooling import check_weighted_pooling, get_pooling
from whitevec.encoders.static import DEFAULT_BATCH_SIZE, StaticTokens, static_mean
from whitevec.encoders.static_format import StaticTable, is_static_folder, write_static_folder
from whitevec.encoders.token_weights import (
    RANK_SIF_A,
    TokenFrequencies,
    TokenWeighting,
    rank_sif_weights,
    read_frequencies,
)
from whitevec.encoders.tokenization import count_model_frequencies, folder_fingerprint, load_model_tokenizer
from whitevec.encoders.transformer import Encoder
from whitevec.errors import BadInputError, DataNotFoundError
from whitevec.preflight import available_memory, check_free_space, check_output, format_size, model_hidden_size
from whitevec.transforms import AFFINE_SPEC_FORMS, Transform, is_affine, make_transform
from whitevec.utils.io import scratch_dir, sha256_file

METHODS = ("tokens", "corpus")
TOKEN_WEIGHTS = ("sif-rank", "sif", "usif", "zipf", "none")
DEFAULT_DIMS = 256  # Model2Vec's pca_dims
DEFAULT_SAMPLE = 10_000
DEFAULT_MAX_LENGTH = 512  # Model2Vec's StaticModel default
DEFAULT_POOLING = "last-avg"  # Model2Vec's: the mean of the last layer over every position
# Copies of the final table alive at once at the peak: the table, its folded copy, its bytes being written.
_TABLE_COPIES = 3


@dataclass(frozen=True)
class DistillResult:
    """What :func:`distill` wrote: the folder, the table's shape, how many sample texts and seen tokens."""

    path: Path
    vocab_size: int
    dim: int
    n_texts: int  # sample texts through the model (corpus) or the transform fit; 0 without a corpus
    n_seen: int  # corpus method: tokens given their contextual mean; 0 for tokens
    seconds: float
    provenance: dict[str, Any]


@dataclass(frozen=True)
class _Plan:
    """The checked arguments, and what was read before any model loads."""

    method: str
    weights: str
    frequencies: TokenFrequencies | Path | None
    transform: Transform | None
    sample_texts: list[str]
    corpus_texts: list[str]
    corpus_info: dict[str, Any] | None


def distill(
    model: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    method: str = "tokens",
    corpus: str | os.PathLike[str] | None = None,
    sample: int | None = DEFAULT_SAMPLE,
    seed: int = 0,
    dims: int | None = DEFAULT_DIMS,
    token_weights: str | None = "sif-rank",
    frequencies: str | os.PathLike[str] | TokenFrequencies | None = None,
    transform: str | None = None,
    normalize: bool = True,
    max_length: int | None = DEFAULT_MAX_LENGTH,
    pooling: str = DEFAULT_POOLING,
    batch_size: int = 64,
    device: str | None = None,
    overwrite: bool = False,
    show_progress: bool | None = None,
) -> DistillResult:
    """Distil ``model`` into a static encoder folder at ``out`` (see the module docstring for each step).

    ``corpus``: a text file, one text a line (needed by ``method="corpus"``, by a ``transform``, and by count
    weights unless ``frequencies`` gives them). ``sample`` lines of it (None: all), drawn with ``seed``, go
    through the model and into the transform's fit. ``dims``: PCA dimensions (None: no PCA; more than the
    model's: all of them, rotated). ``pooling``: how a token's hidden states become its vector (a mean pooling:
    ``last-avg``, ``first-last-avg``, a list of layers). ``max_length`` truncates texts, in the folder's encoder
    and in the corpus passes (there capped at the model's limit). ``normalize``: the folder's encoder
    L2-normalises its sentence vectors (Model2Vec's default). ``batch_size``: texts per forward pass of the
    corpus; single tokens go at least 256 at a time (Model2Vec's batch). ``out`` is refused when it exists,
    unless ``overwrite``; it is written whole or not at all.
    """
    started = time.perf_counter()
    _refuse_static(model)
    plan = _plan(method, corpus, sample, seed, dims, token_weights, frequencies, transform, max_length, pooling)
    target = _new_folder(out, overwrite)
    path, tokenizer = load_model_tokenizer(model)
    tokens = static_tokenizer(tokenizer, str(model))
    check_room(str(model), path, tokens.get_vocab_size(with_added_tokens=True), dims, target)
    counts = _counts(plan, model, tokenizer, max_length)
    encoder = Encoder(model, pooling, max_length, batch_size, device, cache=False)
    table, settings, n_seen = _token_rows(plan, encoder, tokens, counts, dims, target, show_progress)
    if plan.transform is not None:
        table = _fold(table, plan.transform, tokens, plan.sample_texts, max_length)
    provenance = _provenance(model, path, plan, settings, transform, sample, seed, int(table.shape[1]))
    written = write_static_folder(
        target, StaticTable(table, tokens, normalize, max_length, provenance), overwrite=overwrite
    )
    return DistillResult(
        path=written,
        vocab_size=int(table.shape[0]),
        dim=int(table.shape[1]),
        n_texts=len(plan.sample_texts),
        n_seen=n_seen,
        seconds=time.perf_counter() - started,
        provenance=provenance,
    )


def _new_folder(out: str | os.PathLike[str], overwrite: bool) -> Path:
    """``out`` as a path, refused when it exists (unless ``overwrite``) or cannot be written."""
    target = Path(out).expanduser()
    if target.exists() and not overwrite:
        raise BadInputError(f"{target} exists; pass overwrite=True (--overwrite) to replace it")
    check_output(target, "--out folder", folder=True)
    return target


def _token_rows(
    plan: _Plan,
    encoder: Encoder,
    tokens: Tokenizer,
    counts: TokenFrequencies | None,
    dims: int | None,
    target: Path,
    show_progress: bool | None,
) -> tuple[np.ndarray, dict[str, Any], int]:
    """Steps 1 to 3: the raw token vectors by the plan's method (spilled to a scratch folder beside ``target``),
    PCA to ``dims``, the row weights. Returns the table, the settings the provenance records, and how many
    tokens were given a contextual mean."""
    with scratch_dir(target) as scratch:
        if plan.method == "corpus":
            raw = corpus_table(encoder, tokens, plan.sample_texts, scratch, show_progress)
        else:
            raw = single_token_table(encoder, tokens, scratch, show_progress)
        table = reduce_table(raw, dims)
        kept, n_seen = np.array(raw.kept), raw.n_seen
    weighting = _row_weights(plan.weights, counts, kept)
    if weighting is not None:
        table *= weighting[0].astype(np.float32)[:, None]
    settings = {
        "method": plan.method,
        "pooling": encoder.pooling.name,
        "model_max_length": encoder.max_length,
        "tokens_kept": int(kept.sum()),
        "tokens_seen": n_seen if plan.method == "corpus" else None,
        "dims": None if dims is None else int(table.shape[1]),
        "token_weights": {"scheme": "none"} if weighting is None else weighting[1],
    }
    return table, settings, n_seen


def _plan(
    method: str,
    corpus: str | os.PathLike[str] | None,
    sample: int | None,
    seed: int,
    dims: int | None,
    token_weights: str | None,
    frequencies: str | os.PathLike[str] | TokenFrequencies | None,
    transform: str | None,
    max_length: int | None,
    pooling: str,
) -> _Plan:
    """Every argument checked, the corpus read and sampled, the frequency file read, the transform made: all
    before any model loads."""
    if method not in METHODS:
        raise BadInputError(f"unknown distill method {method!r}; valid: {', '.join(METHODS)}")
    if sample is not None and (isinstance(sample, bool) or sample < 1):
        raise BadInputError(f"sample must be a positive number of texts (or None for all), got {sample!r}")
    if dims is not None and (isinstance(dims, bool) or dims < 1):
        raise BadInputError(f"dims must be a positive number of dimensions (or None for no PCA), got {dims!r}")
    if max_length is not None and max_length < 2:
        raise BadInputError(f"max_length must be at least 2, got {max_length}")
    check_weighted_pooling(get_pooling(pooling))
    weights = _check_weights(token_weights)
    made = _foldable(transform)
    needs = [
        *(["method 'corpus'"] if method == "corpus" else []),
        *([f"transform {transform!r} (fitted on its sentences)"] if made is not None else []),
        *(
            [f"token weights {weights!r} (counted on it)"]
            if weights in ("sif", "usif", "zipf") and not frequencies
            else []
        ),
    ]
    if corpus is None:
        if needs:
            raise BadInputError(f"{' and '.join(needs)} need(s) a corpus: a text file, one text a line (--corpus)")
        if frequencies is not None and weights in ("sif-rank", "none"):
            raise BadInputError(f"token frequencies were given, but token weights {weights!r} do not use them")
        return _Plan(method, weights, _frequencies(frequencies), made, [], [], None)
    corpus_path = Path(corpus).expanduser()
    if not corpus_path.is_file():
        raise DataNotFoundError(f"no corpus file at {corpus_path}")
    texts = read_texts_file(corpus_path)  # a file with no text fails here, before any model loads
    chosen = texts if sample is None or sample >= len(texts) else _sample(texts, sample, seed)
    info = {"file": corpus_path.name, "sha256": sha256_file(corpus_path), "lines": len(texts)}
    return _Plan(method, weights, _frequencies(frequencies), made, chosen, texts, info)


def _sample(texts: Sequence[str], size: int, seed: int) -> list[str]:
    """``size`` of ``texts`` drawn without replacement with ``seed``, in file order."""
    return [texts[i] for i in sorted(random.Random(seed).sample(range(len(texts)), size))]


def _check_weights(token_weights: str | None) -> str:
    key = "none" if token_weights is None else str(token_weights).strip().lower()
    if key not in TOKEN_WEIGHTS:
        raise BadInputError(f"unknown token weights {token_weights!r}; valid: {', '.join(TOKEN_WEIGHTS)}")
    return key


def _frequencies(source: str | os.PathLike[str] | TokenFrequencies | None) -> TokenFrequencies | Path | None:
    return None if source is None else read_frequencies(source)


def _refuse_static(model: str | os.PathLike[str]) -> None:
    """BadInputError for a static folder (its tokens have no model to go through), before anything loads."""
    if is_static_folder(resolve_model(model)):
        raise BadInputError(f"{model} is a static folder; distil from a transformers model")


def _foldable(spec: str | None) -> Transform | None:
    """The unfitted transform of ``spec``, refused unless affine (only an affine map folds into the table)."""
    if spec is None:
        return None
    made = make_transform(spec)
    if made is not None and not is_affine(made):
        raise BadInputError(
            f"cannot fold transform {spec!r} into a static table: only linear (affine, x A + b) transforms fold; "
            f"linear transforms are: {', '.join(AFFINE_SPEC_FORMS)}"
        )
    return made


def table_memory(vocab_size: int, dims: int, model_bytes: int) -> int:
    """Bytes a distillation holds at its peak, estimated: the model's weights and a few copies of the float32
    table (the raw table at the model's width is spilled to disk, so ``dims`` sets the size)."""
    return model_bytes + _TABLE_COPIES * vocab_size * dims * 4


def check_room(model: str, path: Path, vocab_size: int, dims: int | None, out: Path) -> None:
    """Disk beside ``out`` for the scratch table at the model's width and the folder (OSError ENOSPC), and
    memory for the table at ``dims`` (:func:`check_memory`)."""
    hidden = model_hidden_size(path) or 0
    width = hidden if dims is None else min(dims, hidden or dims)
    # Scratch: the raw float32 table and, for corpus, its float64 sums; then the folder's float32 table.
    check_free_space(out.parent, vocab_size * (hidden * 12 + width * 4))
    if width:
        check_memory(model, path, vocab_size, width)


def check_memory(model: str, path: Path, vocab_size: int, width: int) -> None:
    """BadInputError, naming the estimated size and a ``dims`` that fits, when the table at ``width``
    dimensions needs more memory than this machine has available (no check where that is unknown)."""
    available = available_memory()
    if available is None:
        return
    weights = sum(f.stat().st_size for pattern in ("*.safetensors", "*.bin") for f in path.glob(pattern))
    need = table_memory(vocab_size, width, weights)
    if need <= available:
        return
    # The largest power of two below the width whose table fits.
    room = (available - weights) // (_TABLE_COPIES * vocab_size * 4)
    fits = 1 << (int(min(room, width - 1)).bit_length() - 1) if min(room, width - 1) >= 8 else 0
    advice = (
        f"pass a smaller --dims, e.g. --dims {fits} (about {format_size(table_memory(vocab_size, fits, weights))})"
        if fits
        else "even --dims 8 does not fit; free memory or use a machine with more"
    )
    raise BadInputError(
        f"distilling {model} needs about {format_size(need)} of memory ({vocab_size:,} tokens x {width} "
        f"dimensions, {_TABLE_COPIES} float32 copies, plus {format_size(weights)} of model weights), but "
        f"{format_size(available)} is available: {advice}"
    )


def _counts(
    plan: _Plan, model: str | os.PathLike[str], tokenizer: Any, max_length: int | None
) -> TokenFrequencies | None:
    """The token counts count weights need: a frequency file checked against this tokenizer, or a text file or the
    corpus counted with it (as the Encoder tokenises). Before the model loads: foreign counts fail at once."""
    if plan.weights not in ("sif", "usif", "zipf"):
        return None
    source = plan.frequencies
    if isinstance(source, TokenFrequencies):
        source.check_tokenizer(tokenizer, str(model))
        return source
    texts = read_texts_file(source) if isinstance(source, Path) else plan.corpus_texts
    name = source.name if isinstance(source, Path) else str((plan.corpus_info or {}).get("file", ""))
    return replace(count_model_frequencies(model, texts, max_length), source=name)


def _row_weights(
    scheme: str, counts: TokenFrequencies | None, kept: np.ndarray
) -> tuple[np.ndarray, dict[str, Any]] | None:
    """The weight of each row and its description, or None for ``none``."""
    if scheme == "none":
        return None
    if counts is None:  # sif-rank: Model2Vec ranks the tokens it keeps, in id order
        out = np.zeros(kept.size, dtype=np.float64)
        out[kept] = rank_sif_weights(int(kept.sum()))
        return out, {"scheme": "sif-rank", "a": RANK_SIF_A}
    weighting = TokenWeighting(scheme, counts)
    description = weighting.describe()
    # uSIF's a is infinite when its weights are uniform; JSON has no infinity.
    if isinstance(description["a"], float) and not math.isfinite(description["a"]):
        description["a"] = None
    return weighting.weights(), description


def _fold(
    table: np.ndarray, transform: Transform, tokenizer: Tokenizer, texts: list[str], max_length: int | None
) -> np.ndarray:
    """``transform`` fitted on the static sentence vectors of ``texts``, folded into the rows."""
    transform.fit(_sentence_vectors(table, StaticTokens.of(tokenizer, max_length), texts))
    A, b = transform.affine()
    out = np.empty((table.shape[0], A.shape[1]), dtype=np.float32)
    for start in range(0, table.shape[0], 8192):
        out[start : start + 8192] = table[start : start + 8192] @ A + b
    return out


def _sentence_vectors(table: np.ndarray, tokens: StaticTokens, texts: list[str]) -> np.ndarray:
    """:func:`static_mean` of ``texts`` (the vectors the written folder serves before it normalises), a batch
    at a time: the tokenizer holds one batch's encodings, not the whole sample's."""
    out = np.empty((len(texts), table.shape[1]), dtype=np.float32)
    for start in range(0, len(texts), DEFAULT_BATCH_SIZE):
        batch = texts[start : start + DEFAULT_BATCH_SIZE]
        out[start : start + len(batch)] = static_mean(table, tokens, batch)
    return out


def _provenance(
    model: str | os.PathLike[str],
    path: Path,
    plan: _Plan,
    settings: dict[str, Any],
    transform: str | None,
    sample: int | None,
    seed: int,
    dim: int,
) -> dict[str, Any]:
    """What config.json["whitevec"] records: the model, every choice, and the corpus by digest."""
    return {
        "base_model": str(model),
        "base_model_fingerprint": folder_fingerprint(path),
        **settings,
        "transform": transform if plan.transform is not None else None,
        "corpus": plan.corpus_info,
        "sample": len(plan.sample_texts) if plan.corpus_info is not None else None,
        "sample_asked": sample,
        "seed": seed,
        "dim": dim,
        # Model2Vec's config key for its rank weights (static_format writes it as sif_coefficient).
        "sif_coefficient": RANK_SIF_A if settings["token_weights"]["scheme"] == "sif-rank" else None,
    }
