"""Vectors as a store with an encoding gives them back: what ``whitevec tune`` and ``eval --config`` score an
encoding on, without building an index. A flat FAISS store with the encoding trains its codes on the stored side
exactly as an index would (:func:`coded_store`); its codes come back decoded (:func:`decoded_codes`,
:func:`encoded_vectors`), its scores are reproduced on those vectors (:func:`cosine_scores`), or, for encodings
only a search can score (RaBitQ, ``+refine``, ``+rescore``), its own search ranks (:func:`searched_rankings`)."""

from __future__ import annotations

import warnings

import numpy as np

from whitevec.errors import BadInputError, WhitevecWarning
from whitevec.index.encodings.spec import Encoding, parse_encoding
from whitevec.index.faiss.store import FaissStore
from whitevec.index.stores.vector import ENCODING
from whitevec.utils.linalg import best_first, unit_rows

TRAIN_SAMPLE = 100_000
"""At most this many stored vectors (drawn with the index's own seed) train a candidate's codes; fewer: all."""


def coded_store(
    vectors: np.ndarray, encoding: str | Encoding, metric: str = "cosine", train_sample: int | None = None
) -> tuple[FaissStore, list[str]]:
    """A flat :class:`FaissStore` with ``encoding`` holding ``vectors`` as rows 0..n-1 (its codes trained on them,
    or on ``train_sample`` of them drawn as the store draws them), and the store's notes (bits lowered for too
    few training vectors: :func:`whitevec.index.encodings.spec.fit_to_training`)."""
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    store = FaissStore(
        x.shape[1], metric, "flat", {ENCODING: parse_encoding(encoding).spec, "train_sample": train_sample}
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", WhitevecWarning)
        store.add(np.arange(x.shape[0], dtype=np.int64), x)
    return store, [str(w.message) for w in caught if issubclass(w.category, WhitevecWarning)]


def decoded_codes(
    vectors: np.ndarray, encoding: str | Encoding, metric: str = "cosine", train_sample: int | None = None
) -> tuple[np.ndarray, Encoding, list[str]]:
    """``vectors`` as a flat :class:`FaissStore` with ``encoding`` stores them, decoded (:func:`coded_store`):
    each stored code decoded back to a float32 vector. Returns (decoded vectors, the encoding used, the store's
    notes): the encoding is the one asked for unless too few training vectors lowered its bits, which the notes
    then say. Only codes a search compares as vectors decode (``Encoding.scoring == "decoded"``).

    ``vectors`` are given as the index would store them (:func:`whitevec.index.stores.vector.stored_form`: unit
    rows for ``cosine``). An index scores a float query against these decoded vectors (asymmetric search): for
    ``cosine`` on lossy codes ``1 - |q - decoded|^2 / 2`` (see :attr:`FaissStore._l2_for_cosine`); see
    :func:`cosine_scores`.
    """
    wanted = parse_encoding(encoding)
    if wanted.scoring != "decoded":
        raise BadInputError(
            f"encoding {wanted.spec}: only plain codes decode to vectors a search compares (no faiss: string, "
            "+refine, +rescore, sign codes or RaBitQ)"
        )
    import faiss

    store, notes = coded_store(vectors, wanted, metric, train_sample)
    inner = faiss.downcast_index(store.index.index)  # inside the id map; ids 0..n-1 are rows 0..n-1
    decoded = np.ascontiguousarray(inner.reconstruct_n(0, store.count), dtype=np.float32)
    return decoded, store.encoding, notes


def encoded_vectors(vectors: np.ndarray, encoding: str, stored: np.ndarray) -> np.ndarray:
    """``vectors`` as an index with ``encoding`` compares them: ``float32`` keeps them as they are; otherwise the
    rows ``stored`` (the stored side: the documents, or every sentence of the pairs) are unit-normalised as a
    cosine index stores them and a flat FAISS store with that encoding trains its codes on them (all of them, or
    a seeded sample of :data:`TRAIN_SAMPLE`), with the index's own factory string, training and codes.

    Decoded codes (:func:`decoded_codes`): the stored rows come back decoded, the other rows (queries) stay
    float, as in faiss's asymmetric search. Sign codes: every row, queries too, becomes its code as a unit +-1
    vector (the index codes its queries; the inner product of two is the index's score ``1 - 2 h / d``, so the
    ranking is the Hamming ranking exactly). RaBitQ, ``+refine`` and ``+rescore`` score through the index's own
    search (:func:`searched_rankings`), not through vectors: BadInputError here."""
    if encoding == "float32":
        return vectors
    parsed = parse_encoding(encoding)
    if parsed.scoring == "search":
        raise BadInputError(
            f"encoding {encoding} is scored through the index's own search (RaBitQ's estimator, refinement and "
            "rescoring have no vectors to compare), which needs queries and documents: retrieval data"
        )
    rows = vectors[stored]
    sample = TRAIN_SAMPLE if rows.shape[0] > TRAIN_SAMPLE else None
    unit = unit_rows(rows, dtype=np.float32, zero_rows="keep")
    if parsed.scoring == "signs":
        store, _ = coded_store(unit, parsed, "cosine", sample)
        assert store.signs is not None
        return store.signs.unit_signs(unit_rows(vectors, dtype=np.float32, zero_rows="keep"))
    decoded, used, _ = decoded_codes(unit, encoding, "cosine", sample)
    if used.spec != parsed.spec:
        raise BadInputError(f"encoding {encoding} became {used.spec} when trained; give {used.spec}")
    out = np.array(vectors, dtype=np.float32, copy=True)
    out[stored] = decoded
    return out


def searched_rankings(docs: np.ndarray, queries: np.ndarray, encoding: str, depth: int) -> np.ndarray:
    """Each query's top ``depth`` document rows as a flat cosine FAISS store with ``encoding`` returns them (its
    codes trained on the unit-normalised ``docs``, or a seeded sample of :data:`TRAIN_SAMPLE`): the scoring of
    encodings that only a search can reproduce (RaBitQ, ``+refine``, ``+rescore``). Rows -1 where fewer."""
    unit = unit_rows(docs, dtype=np.float32, zero_rows="keep")
    sample = TRAIN_SAMPLE if unit.shape[0] > TRAIN_SAMPLE else None
    store, _ = coded_store(unit, encoding, "cosine", sample)
    if store.encoding.spec != parse_encoding(encoding).spec:
        raise BadInputError(f"encoding {encoding} became {store.encoding.spec} when trained; give it")
    _, rows = store.search(unit_rows(queries, dtype=np.float32, zero_rows="keep"), depth)
    return rows


def exact_rankings(docs: np.ndarray, queries: np.ndarray, encoding: str, depth: int) -> np.ndarray:
    """Each query's top ``depth`` document rows by the scores a flat cosine store with ``encoding`` gives
    (:func:`cosine_scores`; ties to the earlier row): exact search over ``docs`` as :func:`encoded_vectors` gives
    them (float32 rows are unit-normalised here). (n_queries, depth) int64; ``depth`` at most the number of
    documents."""
    if encoding == "float32":
        stored = unit_rows(docs, dtype=np.float32, zero_rows="keep")
    else:
        stored = np.ascontiguousarray(docs, dtype=np.float32)
    unit = unit_rows(queries, dtype=np.float32, zero_rows="keep")
    out = np.empty((unit.shape[0], depth), dtype=np.int64)
    for start in range(0, unit.shape[0], 256):
        out[start : start + 256], _ = best_first(cosine_scores(unit[start : start + 256], stored, encoding), depth)
    return out


def cosine_scores(queries: np.ndarray, stored: np.ndarray, encoding: str | Encoding) -> np.ndarray:
    """The scores a ``cosine`` FAISS store with ``encoding`` gives unit ``queries`` against ``stored`` vectors
    (unit rows for float32; :func:`decoded_codes` for a lossy encoding; unit sign vectors for sign codes, which
    are their own scores): inner products for float32 and sign codes, and ``1 - |q - x|^2 / 2`` for lossy codes,
    which the store searches by L2 (the same ranking on exact unit vectors). (n_queries, n_stored) float32."""
    sims = np.asarray(queries, dtype=np.float32) @ np.asarray(stored, dtype=np.float32).T
    parsed = parse_encoding(encoding)
    if parsed.codec == "float32" or parsed.sign:
        return sims
    half_norms = 0.5 * np.einsum("ij,ij->i", stored, stored, dtype=np.float64).astype(np.float32)
    return np.float32(0.5) + sims - half_norms[None, :]
