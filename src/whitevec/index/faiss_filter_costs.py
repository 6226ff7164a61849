"""Which path a filtered FAISS search takes, from what each costs: the passing rows' codes decoded and compared
alone (exact), or faiss's own search within them (a selector's scan, HNSW's walk at a scaled efSearch, IVF's lists
at a scaled nprobe, or for PQ, which takes no selector, an unfiltered search widened); and the top k of what was
compared. :mod:`whitevec.index.faiss_store` searches by it."""

from __future__ import annotations

from typing import Any

import numpy as np

from whitevec.index.encodings import Encoding

# What the paths of a filtered search cost one core, ns, from `bench_filters.py --work` (thread CPU time on one
# faiss and BLAS thread: the work, not the waits; 100,000 x 384 unit vectors, AMD EPYC, load ~12). Decoding a
# code, per dimension (float32 340 ns a code at d=384, a copy; fp16 627, sq8 394, sq4 534; pq48 252, pq16 150;
# opq48,pq48 about 4,200, its rotation undone per vector, timed as --work times on 20,000 rows), and comparing a
# decoded vector with one query (a gemv over floats, ~110-145 ns a code whatever the codec): 5-15x what faiss's
# own scan of a code costs, so the passing rows alone pay only where few of them pass.
DECODE_NS_PER_DIM = {"float32": 0.9, "fp16": 1.6, "sq8": 1.0, "sq4": 1.4, "pq": 0.6, "opq": 11.0}
COMPARE_NS_PER_DIM = 0.3
# faiss's scan of one code in a flat search, per dimension (float32 68 ns a code, fp16 40, sq8 47, sq4 56), PQ's
# per sub-quantizer (pq48 34 ns, pq16 9); with a selector, its check of each row (through the id map, 2-4 ns)
# and the scan of the passing ones. PQ and OPQ take no selector: _widened_search scans every code at least once.
SCAN_NS_PER_DIM = {"float32": 0.18, "fp16": 0.1, "sq8": 0.12, "sq4": 0.15}
PQ_SCAN_NS_PER_SUBQUANTIZER = 0.7
SELECTOR_CHECK_NS = 3.0
# An HNSW search, per efSearch candidate: its 2M neighbours' distances, per dimension (M=32, d=384: 5.9 us).
GRAPH_NS_PER_NEIGHBOUR_DIM = 0.24


def scaled_setting(setting: int, count: int, passing: int) -> int:
    """``setting`` divided by the share of rows passing (``count / passing`` times it), rounded up."""
    return -(-setting * count // max(1, passing))


def graph_ef(params: dict[str, Any], count: int, passing: int) -> int:
    """The efSearch of an HNSW search within ``passing`` of ``count`` rows: efSearch / share, at most ``count``."""
    return min(count, scaled_setting(int(params.get("efSearch") or 16), count, passing))


def decoding_pays(
    kind: str, encoding: Encoding, dim: int, params: dict[str, Any], count: int, passing: int, queries: int
) -> bool:
    """Whether comparing the ``passing`` rows' decoded codes with ``queries`` queries is less work than faiss's
    own search within them: a flat index's scan with a selector (a check per row, a distance per passing one),
    or for PQ and OPQ, which take none, an unfiltered scan at least; HNSW's walk at ``graph_ef``. Decoding is
    paid once per call, comparing per query; IVF keeps no flat array of codes to decode. The costs: the ``*_NS``
    constants above."""
    decode = DECODE_NS_PER_DIM.get(encoding.codec)
    if decode is None or kind == "ivf":
        return False
    decoded = passing * dim * (decode + queries * COMPARE_NS_PER_DIM)
    if kind == "hnsw":
        neighbours = 2 * int(params.get("M") or 32)
        return decoded < queries * graph_ef(params, count, passing) * neighbours * dim * GRAPH_NS_PER_NEIGHBOUR_DIM
    if encoding.codec in ("pq", "opq"):
        return decoded < queries * count * int(encoding.m or 1) * PQ_SCAN_NS_PER_SUBQUANTIZER
    scan = SCAN_NS_PER_DIM[encoding.codec] * dim
    return decoded < queries * (count * SELECTOR_CHECK_NS + passing * scan)


def top_k(ranked: np.ndarray, k: int) -> np.ndarray:
    """Per row, the columns of the ``k`` smallest values, smallest first (ties among them in column order): a
    partition, then a sort of those ``k`` alone, not a sort of every column."""
    if ranked.shape[1] <= k:
        return np.argsort(ranked, axis=1, kind="stable")
    part = np.argpartition(ranked, k - 1, axis=1)[:, :k]
    within = np.lexsort((part, np.take_along_axis(ranked, part, axis=1)), axis=1)
    return np.take_along_axis(part, within, axis=1)
