"""1-bit sign codes: a vector becomes one bit per dimension, searched by Hamming distance (faiss IndexBinary*).

A code is ``sign((x - mean) R)`` packed eight bits a byte, for the encodings

- ``binary``: ``R`` the identity: the sign at the mean of the training vectors (centred);
- ``binary-rr``: ``R`` a random rotation drawn with a fixed seed (Haar-distributed orthogonal matrix): the
  variance of the dimensions is spread evenly over the bits;
- ``itq``: ``R`` from faiss's ``ITQTransform`` (PCA, then the rotation Iterative Quantization learns to lose the
  least to the sign; its own centring is the mean).

A dimension that is not a multiple of 8 is padded with zero bits to the next byte. Every code, the queries' too,
carries the same padding, so it adds nothing to any Hamming distance: the ranking is that of the d real bits.
Queries are coded the same way (a symmetric search); the index's score for a Hamming distance h over d bits is the
cosine of the two sign vectors, ``1 - 2 h / d``.

The mean and R are saved in ``binary.safetensors`` beside the index (never pickled) and checksummed by the
manifest like every file of the folder.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError
from whitevec.index.encodings.spec import SIGN_CODECS
from whitevec.transforms.saved import safetensors_metadata as _safetensors_metadata

SIGN_FILE = "binary.safetensors"
ROTATION_SEED = 0
_FORMAT = "whitevec.sign_codes/1"


def code_bytes(dim: int) -> int:
    """Bytes of one sign code of a ``dim``-dimensional vector (padded to whole bytes)."""
    return (dim + 7) // 8


def random_rotation(dim: int, seed: int = ROTATION_SEED) -> np.ndarray:
    """A Haar-distributed ``dim x dim`` orthogonal matrix (QR of a Gaussian matrix, the signs of R's diagonal
    folded in so that the draw is uniform), float32."""
    q, r = np.linalg.qr(np.random.default_rng(seed).standard_normal((dim, dim)))
    return np.ascontiguousarray(q * np.sign(np.diag(r))[None, :], dtype=np.float32)


def itq_rotation(train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, R)`` of faiss's ITQTransform trained on ``train`` (d to d: PCA then the ITQ rotation).

    faiss's transform also scales each centred vector to unit length before the rotation; a positive scale never
    changes a sign, so ``sign((x - mean) R)`` is its code exactly."""
    import faiss

    n, dim = train.shape
    if n < dim:
        raise BadInputError(
            f"itq learns a {dim} x {dim} rotation from the principal axes and needs at least d={dim} training "
            f"vectors; got {n}. Use binary-rr, or more vectors."
        )
    itq = faiss.ITQTransform(dim, dim, True)
    itq.train(np.ascontiguousarray(train, dtype=np.float32))
    matrix = faiss.vector_to_array(itq.pca_then_itq.A).reshape(dim, dim)  # rows: output dimensions
    return faiss.vector_to_array(itq.mean).astype(np.float32), np.ascontiguousarray(matrix.T, dtype=np.float32)


class SignCodes:
    """The step from float vectors to packed sign bits (see the module docstring); ``fit`` learns ``mean_`` and
    ``rotation_`` (None for ``binary``)."""

    arrays: ClassVar[tuple[str, ...]] = ("mean", "rotation")

    def __init__(self, codec: str) -> None:
        if codec not in SIGN_CODECS:
            raise BadInputError(f"unknown sign code {codec!r}; valid: {', '.join(SIGN_CODECS)}")
        self.codec = codec
        self.mean_: np.ndarray | None = None
        self.rotation_: np.ndarray | None = None

    @property
    def dim(self) -> int:
        assert self.mean_ is not None, "fit first"
        return int(self.mean_.shape[0])

    @property
    def n_bits(self) -> int:
        """Bits of a code as faiss stores it: the dimension rounded up to whole bytes."""
        return 8 * code_bytes(self.dim)

    def fit(self, train: np.ndarray) -> SignCodes:
        x = np.asarray(train, dtype=np.float32)
        if x.ndim != 2 or x.shape[0] < 1:
            raise BadInputError(f"sign codes need at least one training vector, got shape {x.shape}")
        if self.codec == "itq":
            self.mean_, self.rotation_ = itq_rotation(x)
        else:
            self.mean_ = x.mean(axis=0, dtype=np.float64).astype(np.float32)
            self.rotation_ = random_rotation(x.shape[1]) if self.codec == "binary-rr" else None
        return self

    def signs(self, vectors: np.ndarray) -> np.ndarray:
        """``(x - mean) R > 0`` for each row, boolean (n, d)."""
        assert self.mean_ is not None, "fit first"
        centred = np.asarray(vectors, dtype=np.float32) - self.mean_
        projected = centred if self.rotation_ is None else centred @ self.rotation_
        return projected > 0

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """Packed codes, uint8 (n, ceil(d / 8)), zero bits padding the last byte."""
        return np.ascontiguousarray(np.packbits(self.signs(vectors), axis=1))

    def unit_signs(self, vectors: np.ndarray) -> np.ndarray:
        """The codes as unit vectors of +-1 / sqrt(d), float32: their inner product is the index's score
        ``1 - 2 h / d`` for a Hamming distance h (what eval and tune compare, without an index)."""
        bits = self.signs(vectors)
        return np.where(bits, 1.0, -1.0).astype(np.float32) / np.float32(np.sqrt(bits.shape[1]))

    # --- persistence ----------------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """safetensors bytes: the mean, the rotation if any, and the codec in the metadata."""
        from safetensors.numpy import save

        assert self.mean_ is not None, "fit first"
        tensors = {"mean": self.mean_}
        if self.rotation_ is not None:
            tensors["rotation"] = self.rotation_
        return bytes(save(tensors, metadata={"format": _FORMAT, "codec": self.codec}))

    @classmethod
    def from_bytes(cls, data: bytes, source: str, codec: str, dim: int) -> SignCodes:
        """The sign step saved by :meth:`to_bytes` (``source`` names the file in errors), checked against the
        manifest's ``codec`` and dimension."""
        from safetensors import SafetensorError
        from safetensors.numpy import load

        try:
            tensors = load(data)
            meta = _safetensors_metadata(data)
        except (SafetensorError, ValueError) as exc:
            raise CorruptFileError(f"{source} is not a readable sign-code file ({exc}); rebuild it") from None
        if meta.get("format") != _FORMAT or meta.get("codec") != codec:
            raise CorruptFileError(
                f"{source} holds sign codes {meta.get('codec')!r} ({meta.get('format')}); manifest says {codec}"
            )
        codes = cls(codec)
        mean = tensors.get("mean")
        rotation = tensors.get("rotation")
        wants_rotation = codec != "binary"
        if (
            mean is None
            or mean.shape != (dim,)
            or (rotation is None) == wants_rotation
            or (rotation is not None and rotation.shape != (dim, dim))
            or set(tensors) - set(cls.arrays)
        ):
            raise CorruptFileError(f"{source} does not hold the mean (and rotation) of {dim}-d {codec} codes")
        codes.mean_ = np.ascontiguousarray(mean, dtype=np.float32)
        codes.rotation_ = None if rotation is None else np.ascontiguousarray(rotation, dtype=np.float32)
        return codes


def hamming_scores(distances: np.ndarray, dim: int, metric: str) -> np.ndarray:
    """Scores for Hamming distances ``h`` over ``dim`` bits: the cosine of the two sign vectors ``1 - 2 h / d``
    (``cosine``, ``ip``: higher is closer), or their squared distance as unit vectors ``4 h / d`` (``l2``)."""
    h = np.asarray(distances, dtype=np.float32)
    if metric == "l2":
        return 4.0 * h / np.float32(dim)
    return 1.0 - 2.0 * h / np.float32(dim)
