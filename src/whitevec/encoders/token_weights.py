"""Token-frequency weights inside the token mean: SIF, uSIF and Zipfian (uniform) weighting, and Zipfian whitening.

Frequencies are token counts made with the model's own tokenizer (special tokens excluded, texts truncated at
``max_length`` as the encoder truncates them; :func:`count_token_ids`), kept in a
:class:`TokenFrequencies`, saved as JSON (never pickle) with the tokenizer's fingerprint, the model's, the total
count and the number of texts counted.

Probabilities use additive smoothing: ``p(w) = (c(w) + s) / (N + s * V)``, with ``c(w)`` the count, ``N`` the
total count, ``V`` the number of non-special token ids of the tokenizer and ``s = smoothing`` (1 by default,
Laplace). A token the frequency file lacks gets ``s / (N + s V)``: rarer than any counted token, so SIF and uSIF
give it a weight near their largest. Special tokens ([CLS], [SEP], padding...) have ``p = 0`` and weight 0.

With weights ``w(t)`` the sentence vector of a mean pooling is the papers' ``(1 / |s|) sum_{t in s} w(t) v_t``
over the ``|s|`` real, non-special tokens of the sentence (per layer, then averaged over the pooling's layers).
It is not divided by ``sum w``: SIF's and uSIF's common-component removal then sees the same vectors as in the
papers. A text with no non-special token gets the zero vector.

=====  =====================================================================================================
sif    ``a / (a + p(w))``, ``a = 1e-3`` by default (Arora et al., 2017)
usif   ``a / (a / 2 + p(w))`` with ``a`` in closed form (Ethayarajh, 2018): ``n`` the average number of tokens
       per counted text, ``V'`` the number of token types counted, ``alpha`` the share of those types with
       ``p(w) > 1 - (1 - 1/V')^n``, ``Z = V'/2`` and ``a = (1 - alpha) / (alpha Z)`` (``alpha = 0``: uniform)
zipf   1 for every non-special token: the uniform token mean of Zipfian whitening (Yokoi et al., 2024), whose
       p(w) weighting is in the moments (:func:`fit_zipfian_whitening`), not in the mean
=====  =====================================================================================================

uSIF's ``_to_vec`` in the authors' code also divides each embedding dimension by its norm over the sentence's
tokens before weighting; that step is not in the paper and is not done here.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError, DataNotFoundError
from whitevec.preflight import nonblank_texts
from whitevec.utils.io import atomic_path

if TYPE_CHECKING:
    from whitevec.transforms.whitening import Whitening

SCHEMES = ("sif", "usif", "zipf")
DEFAULT_SIF_A = 1e-3
DEFAULT_SMOOTHING = 1.0
# Model2Vec's SIF parameter for weights from the token rank (rank_sif_weights).
RANK_SIF_A = 1e-4
FILE_FORMAT = "whitevec-token-frequencies"
FILE_VERSION = 1


class FrequencyFileError(BadInputError, CorruptFileError):
    """A token-frequency file that cannot be read: not JSON, not whitevec's format, or inconsistent."""


def count_token_ids(tokenizer: Any, texts: Sequence[str], max_length: int | None = None) -> np.ndarray:
    """Occurrences of each token id (int64, ``len(tokenizer)`` entries) in ``texts`` tokenised by ``tokenizer``
    as the encoder tokenises them (special tokens added, then left out of the counts; truncated at
    ``max_length`` tokens when given)."""
    counts = np.zeros(len(tokenizer), dtype=np.int64)
    for start in range(0, len(texts), 1024):
        encoded = tokenizer(
            list(texts[start : start + 1024]),
            add_special_tokens=True,
            truncation=max_length is not None,
            max_length=max_length,
            return_special_tokens_mask=True,
            verbose=False,
        )
        ids = [
            token
            for row, special in zip(encoded["input_ids"], encoded["special_tokens_mask"], strict=True)
            for token, flag in zip(row, special, strict=True)
            if not flag
        ]
        if ids:
            counts += np.bincount(np.asarray(ids, dtype=np.int64), minlength=len(tokenizer))[: len(tokenizer)]
    return counts


def check_scheme(scheme: str | None) -> str | None:
    """``scheme`` lower-cased if it is one of :data:`SCHEMES` (``None``/``"none"`` give None); else
    :class:`BadInputError`."""
    if scheme is None:
        return None
    key = str(scheme).strip().lower()
    if key in ("", "none"):
        return None
    if key not in SCHEMES:
        raise BadInputError(f"unknown token weights {scheme!r}; valid: {', '.join(SCHEMES)} or none")
    return key


def tokenizer_fingerprint(tokenizer: Any) -> str:
    """sha256 of what decides the token ids: a fast tokenizer's serialisation (vocabulary, normalizer,
    pre-tokenizer, added tokens; not its truncation and padding settings), else its sorted vocabulary."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        # Truncation and padding are call settings the serialisation also holds: left out, they change no id.
        state = {k: v for k, v in json.loads(backend.to_str()).items() if k not in ("truncation", "padding")}
        text = json.dumps(state, sort_keys=True)
    else:
        text = json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(text.encode()).hexdigest()


def special_ids(tokenizer: Any) -> list[int]:
    """The ids of the tokenizer's special tokens ([CLS], [SEP], [PAD], ...)."""
    return sorted({int(i) for i in tokenizer.all_special_ids})


@dataclass(frozen=True, eq=False)
class TokenFrequencies:
    """Token counts by id, counted with one tokenizer on ``n_texts`` texts."""

    counts: np.ndarray  # int64, one per token id of the tokenizer (len(tokenizer))
    n_texts: int
    tokenizer_fingerprint: str
    special_ids: tuple[int, ...]
    model: str = ""
    model_fingerprint: str = ""
    source: str = ""
    smoothing: float = DEFAULT_SMOOTHING

    def __post_init__(self) -> None:
        if not (math.isfinite(self.smoothing) and self.smoothing > 0):
            raise BadInputError(f"smoothing must be a positive number, got {self.smoothing!r}")

    @property
    def n_tokens(self) -> int:
        """Total count of (non-special) tokens."""
        return int(self.counts.sum())

    @property
    def vocab_size(self) -> int:
        return int(self.counts.shape[0])

    @property
    def n_types(self) -> int:
        """Token types counted at least once."""
        return int(np.count_nonzero(self.counts))

    @property
    def average_length(self) -> float:
        """Non-special tokens per counted text."""
        return self.n_tokens / self.n_texts if self.n_texts else 0.0

    def probabilities(self) -> np.ndarray:
        """Smoothed ``p(w)`` per id (float64, summing to 1; 0 for special tokens); see the module docstring."""
        counts = self.counts.astype(np.float64) + self.smoothing
        counts[list(self.special_ids)] = 0.0
        return counts / counts.sum()

    def digest(self) -> str:
        """sha256 of the counts, tokenizer and smoothing: equal digests, equal probabilities."""
        digest = hashlib.sha256(np.ascontiguousarray(self.counts, dtype=np.int64).tobytes())
        digest.update(f"{self.tokenizer_fingerprint}:{self.n_texts}:{self.smoothing!r}".encode())
        return digest.hexdigest()

    def to_dict(self) -> dict[str, Any]:
        seen = np.flatnonzero(self.counts)
        return {
            "format": FILE_FORMAT,
            "format_version": FILE_VERSION,
            "model": self.model,
            "model_fingerprint": self.model_fingerprint,
            "tokenizer_fingerprint": self.tokenizer_fingerprint,
            "vocab_size": self.vocab_size,
            "special_ids": list(self.special_ids),
            "n_texts": self.n_texts,
            "n_tokens": self.n_tokens,
            "source": self.source,
            "counts": [[int(i), int(self.counts[i])] for i in seen],
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the counts as JSON (atomically)."""
        target = Path(path)
        with atomic_path(target) as tmp:
            tmp.write_text(json.dumps(self.to_dict()) + "\n", encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str], smoothing: float = DEFAULT_SMOOTHING) -> TokenFrequencies:
        """Read a file :meth:`save` wrote; a missing file raises DataNotFoundError, a damaged one
        :class:`FrequencyFileError` naming the problem."""
        source = Path(path)
        if not source.is_file():
            raise DataNotFoundError(f"no token-frequency file at {source}")
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FrequencyFileError(f"{source} is not a readable token-frequency JSON file ({exc})") from None
        return cls.from_dict(data, str(source), smoothing)

    @classmethod
    def from_dict(
        cls, data: Any, source: str = "<dict>", smoothing: float = DEFAULT_SMOOTHING
    ) -> TokenFrequencies:
        if not isinstance(data, dict) or data.get("format") != FILE_FORMAT:
            raise FrequencyFileError(f"{source} is not a whitevec token-frequency file (format {FILE_FORMAT!r})")
        if data.get("format_version") != FILE_VERSION:
            raise FrequencyFileError(
                f"{source} has format version {data.get('format_version')!r}; this whitevec reads {FILE_VERSION}"
            )
        try:
            vocab = int(data["vocab_size"])
            n_texts = int(data["n_texts"])
            total = int(data["n_tokens"])
            specials = tuple(int(i) for i in data["special_ids"])
            pairs = np.asarray(data["counts"], dtype=np.int64).reshape(-1, 2)
            fingerprint = str(data["tokenizer_fingerprint"])
        except (KeyError, TypeError, ValueError) as exc:
            raise FrequencyFileError(f"{source} has a malformed token-frequency record ({exc})") from None
        ids, values = pairs[:, 0], pairs[:, 1]
        if vocab < 1 or ((ids < 0) | (ids >= vocab)).any() or (values < 0).any() or n_texts < 0:
            raise FrequencyFileError(f"{source} has token ids outside 0..{vocab - 1} or negative counts")
        if any(not 0 <= i < vocab for i in specials):
            raise FrequencyFileError(f"{source} has special token ids outside 0..{vocab - 1}")
        counts = np.zeros(vocab, dtype=np.int64)
        np.add.at(counts, ids, values)
        if int(counts.sum()) != total:
            raise FrequencyFileError(
                f"{source}: the counts sum to {int(counts.sum())}, but the file says n_tokens = {total} "
                "(edited or damaged)"
            )
        return cls(
            counts=counts,
            n_texts=n_texts,
            tokenizer_fingerprint=fingerprint,
            special_ids=specials,
            model=str(data.get("model", "")),
            model_fingerprint=str(data.get("model_fingerprint", "")),
            source=str(data.get("source") or source),
            smoothing=smoothing,
        )

    def check_tokenizer(self, tokenizer: Any, model: str = "") -> None:
        """BadInputError unless these counts were made with a tokenizer giving the same ids."""
        if tokenizer_fingerprint(tokenizer) != self.tokenizer_fingerprint or len(tokenizer) != self.vocab_size:
            raise BadInputError(
                f"the token frequencies ({self.source or 'given'}) were counted with another tokenizer "
                f"(model {self.model or '?'}) than {model or 'this model'}'s, so their ids mean other tokens; "
                "count them again with this model (whitevec frequencies count --model ...)"
            )


def count_frequencies(
    tokenizer: Any,
    texts: Sequence[str],
    max_length: int | None = None,
    *,
    model: str = "",
    model_fingerprint: str = "",
    source: str = "",
    smoothing: float = DEFAULT_SMOOTHING,
) -> TokenFrequencies:
    """Count the non-special tokens of ``texts`` with ``tokenizer`` (truncated at ``max_length`` tokens)."""
    texts = nonblank_texts(texts, "token frequencies need at least one non-empty text to count")
    return TokenFrequencies(
        counts=count_token_ids(tokenizer, texts, max_length),
        n_texts=len(texts),
        tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
        special_ids=tuple(special_ids(tokenizer)),
        model=model,
        model_fingerprint=model_fingerprint,
        source=source,
        smoothing=smoothing,
    )


def usif_a(frequencies: TokenFrequencies) -> float:
    """uSIF's closed-form ``a`` (Ethayarajh 2018; see the module docstring); ``inf`` when ``alpha = 0``."""
    p = frequencies.probabilities()
    counted = p[frequencies.counts > 0]
    v = counted.size
    n = frequencies.average_length
    if v == 0 or n <= 0:
        raise BadInputError("uSIF needs token frequencies with at least one counted token")
    threshold = 1.0 - (1.0 - 1.0 / v) ** n
    alpha = float(np.count_nonzero(counted > threshold)) / v
    if alpha == 0.0:
        return math.inf
    return (1.0 - alpha) / (alpha * 0.5 * v)


@dataclass(frozen=True, eq=False)
class TokenWeighting:
    """A weight per token id for the token mean: ``scheme`` over ``frequencies``; ``a`` is SIF's parameter
    (default 1e-3; uSIF computes its own)."""

    scheme: str
    frequencies: TokenFrequencies
    a: float | None = None

    def __post_init__(self) -> None:
        scheme = check_scheme(self.scheme)
        if scheme is None:
            raise BadInputError("a TokenWeighting needs a scheme: " + ", ".join(SCHEMES))
        object.__setattr__(self, "scheme", scheme)
        if self.a is not None and not (math.isfinite(self.a) and self.a > 0):
            raise BadInputError(f"the weighting parameter a must be a positive number, got {self.a!r}")
        if self.a is not None and scheme != "sif":
            raise BadInputError(f"only sif takes a; {scheme} computes its own weights")

    @property
    def parameter(self) -> float | None:
        """The ``a`` in use (SIF: given or 1e-3; uSIF: closed form; zipf: None)."""
        if self.scheme == "sif":
            return DEFAULT_SIF_A if self.a is None else self.a
        if self.scheme == "usif":
            return usif_a(self.frequencies)
        return None

    def weights(self) -> np.ndarray:
        """float64 weight per token id; 0 for special tokens."""
        p = self.frequencies.probabilities()
        a = self.parameter
        if self.scheme == "sif":
            assert a is not None
            out = a / (a + p)
        elif self.scheme == "usif":
            assert a is not None
            out = np.full_like(p, 2.0) if math.isinf(a) else a / (0.5 * a + p)
        else:
            out = np.ones_like(p)
        out[list(self.frequencies.special_ids)] = 0.0
        return out

    def fingerprint(self) -> str:
        """What a vector cache namespace records: scheme, parameter and the counts' digest."""
        return hashlib.sha256(f"{self.scheme}:{self.parameter!r}:{self.frequencies.digest()}".encode()).hexdigest()

    def describe(self) -> dict[str, Any]:
        f = self.frequencies
        return {
            "scheme": self.scheme,
            "a": self.parameter,
            "frequencies": {
                "source": f.source,
                "n_texts": f.n_texts,
                "n_tokens": f.n_tokens,
                "n_types": f.n_types,
                "smoothing": f.smoothing,
                "digest": f.digest()[:16],
            },
        }


def rank_sif_weights(n_tokens: int, a: float = RANK_SIF_A) -> np.ndarray:
    """Model2Vec's token weights when no counts are known (``model2vec.distill``'s ``sif_coefficient``): SIF's
    ``a / (a + p)`` with ``p`` estimated by Zipf's law from each token's rank ``r`` in the vocabulary's order
    (0 first), ``p(r) = (1 / (r + 2)) / sum_r' 1 / (r' + 2)``; float64, one weight per rank."""
    inverse_rank = 1.0 / np.arange(2, n_tokens + 2, dtype=np.float64)
    return a / (a + inverse_rank / inverse_rank.sum())


def read_frequencies(
    source: str | os.PathLike[str] | TokenFrequencies,
) -> TokenFrequencies | Path:
    """A frequency source as given: loaded counts for a ``.json`` file (or a TokenFrequencies), or the path of
    a text corpus (checked to exist) still to be counted with the model's tokenizer."""
    if isinstance(source, TokenFrequencies):
        return source
    path = Path(source)
    if not path.is_file():
        raise DataNotFoundError(f"no token-frequency file or corpus at {path}")
    if path.suffix.lower() == ".json":
        return TokenFrequencies.load(path)
    return path


# --- Zipfian whitening --------------------------------------------------------------------------------------
def occurrence_weights(probabilities: np.ndarray, occurrences: np.ndarray) -> np.ndarray:
    """Per token id, the weight of each of its occurrences so that every type ``w`` present weighs
    ``p(w)`` in all (renormalised over the present types) and the weights sum to the number of occurrences:
    ``N p(w) / (c(w) P)`` with ``c`` the occurrence counts, ``N = sum c`` and ``P`` the probability of the
    present types. Types absent get 0."""
    present = occurrences > 0
    total = float(occurrences.sum())
    mass = float(probabilities[present].sum())
    if total == 0 or mass <= 0:
        raise BadInputError("Zipfian whitening needs token vectors of at least one non-special token")
    out = np.zeros(probabilities.shape, dtype=np.float64)
    out[present] = total * probabilities[present] / (occurrences[present] * mass)
    return out


def zipfian_whitening_fit(
    token_batches: Iterable[tuple[np.ndarray, np.ndarray]],
    probabilities: np.ndarray,
    occurrences: np.ndarray,
    whitening: Whitening | None = None,
) -> Whitening:
    """Zipfian whitening's moments (Yokoi et al. 2024, Algorithm 1) with :class:`Whitening`'s weighted fit:
    ``mu = sum_w p(w) v_w`` and ``sum_w p(w) (v_w - mu)(v_w - mu)^T`` over batches ``(vectors, token ids)``.

    ``occurrences`` counts each id over all batches; each occurrence weighs :func:`occurrence_weights`, so a
    type of ``c`` identical (static) vectors weighs ``p(w)``, exactly the paper's sums; contextual vectors of one
    type share its weight ``p(w)`` equally. Whitening's covariance divides by (total weight - 1) with total
    weight N, the paper's by 1, so the whitened vectors are the paper's times ``sqrt((N - 1) / N)``: a scale,
    which no cosine sees. Whitening is affine, so whitening each token and then taking the uniform token mean
    equals whitening the mean: the fitted transform applies to sentence vectors.
    """
    from whitevec.transforms.whitening import Whitening

    weights = occurrence_weights(probabilities, occurrences)
    out = Whitening() if whitening is None else whitening
    out._reset()
    for vectors, ids in token_batches:
        if len(ids):
            out.partial_fit(vectors, sample_weight=weights[ids])
    if not getattr(out, "n_samples_seen_", 0) > 1:
        raise BadInputError("Zipfian whitening needs more than one token occurrence to fit")
    out._decompose()
    return out


class TokenVectorEncoder(Protocol):
    """What Zipfian whitening needs of an encoder (:class:`whitevec.encoders.transformer.Encoder` has it; this
    module sits
    below the encoder, which imports it)."""

    tokenizer: Any
    model_name: str
    max_length: int

    @property
    def token_weighting(self) -> TokenWeighting | None: ...

    def token_vectors(self, texts: Sequence[str], batch_size: int | None = None) -> Any: ...


def fit_zipfian_whitening(
    encoder: TokenVectorEncoder,
    texts: Sequence[str],
    frequencies: TokenFrequencies | None = None,
    whitening: Whitening | None = None,
    batch_size: int | None = None,
) -> Whitening:
    """Zipfian whitening for ``encoder``'s mean pooling, fitted on the token vectors of ``texts`` with ``p(w)``
    from ``frequencies`` (default: the encoder's token weighting's). Apply it to the vectors of an encoder with
    ``token_weights="zipf"`` (uniform mean over non-special tokens): that is the paper's whiten-then-pool."""
    if frequencies is None:
        if encoder.token_weighting is None:
            raise BadInputError("Zipfian whitening needs token frequencies (or an encoder with token weights)")
        frequencies = encoder.token_weighting.frequencies
    frequencies.check_tokenizer(encoder.tokenizer, encoder.model_name)
    texts = list(dict.fromkeys(texts))
    occurrences = count_token_ids(encoder.tokenizer, texts, encoder.max_length)
    return zipfian_whitening_fit(
        encoder.token_vectors(texts, batch_size), frequencies.probabilities(), occurrences, whitening
    )


def sentence_weights(
    tokenizer: Any, texts: Sequence[str], frequencies: TokenFrequencies, max_length: int | None = None
) -> np.ndarray:
    """Sentence-level Zipfian weights (whitevec's definition, not the paper's): each text weighs the mean
    ``p(w)`` of its non-special tokens, scaled so the weights average 1 (a text without such tokens weighs 0).
    For ``Whitening().fit(X, sample_weight=...)`` on poolings the token weighting cannot reach (cls, pooler):
    texts of frequent tokens count more in the moments, as frequent types do in Zipfian whitening."""
    frequencies.check_tokenizer(tokenizer)
    p = frequencies.probabilities()
    specials = set(frequencies.special_ids)
    encoded = tokenizer(
        list(texts), add_special_tokens=False, truncation=max_length is not None, max_length=max_length
    )["input_ids"]
    out = np.zeros(len(texts), dtype=np.float64)
    for i, ids in enumerate(encoded):
        real = [t for t in ids if t not in specials]
        if real:
            out[i] = float(p[real].mean())
    if not out.sum() > 0:
        raise BadInputError("no text has a non-special token to weigh")
    return out * (len(out) / out.sum())
