"""Which path a filtered FAISS search takes, from what each costs: the passing rows' codes decoded and compared
alone (exact), or faiss's own search within them (a selector's scan, HNSW's walk at a scaled efSearch, IVF's lists
at a scaled nprobe, or for PQ, which takes no selector, an unfiltered search widened); and the top k of what was
compared, the passing rows' codes decoded. :mod:`whitevec.index.faiss.store` searches by it."""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from whitevec.index.encodings.spec import Encoding

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
# An HNSW search, per efSearch candidate: its 2M neighbours' distances, per dimension (M=32, d=384: 4.9 us;
# 0.16-0.19 ns at efSearch 640-6400 with a selector, after another filtered search, thread time, load ~4).
GRAPH_NS_PER_NEIGHBOUR_DIM = 0.2
# A selector's scan of HNSW's storage, per passing row and dimension: the rows' distances one at a time, each row
# read cold (0.88-0.92 ns at 5-10% of 100k x 384 passing, thread time, load ~4; 0.37 at 1%, where the check of
# every row dominates). It is the least work from about 3% to 8% passing (2.0 ms at 5% against the walk's 5.0
# and decoding's 2.9), and close to decoding at 1% (0.43 ms against 0.34).
STORAGE_SCAN_NS_PER_DIM = 0.9
# How a filtered search's efSearch (HNSW) or nprobe (IVF) grows as fewer rows pass: times (1 / share) ** power,
# at most every row or list. The least that keeps recall@10 within 0.01 of the unfiltered search's
# (benchmarks/investigations/filter_scaling.py, 100k x 384, rows passing at random; docs/results/filters.md):
# HNSW efSearch 64 at 10% passing: 1/sqrt(share) (202) 0.949-0.962, 1/share (640) 0.992-0.997 (512: 0.990);
# IVF nprobe 8 of 512 lists: at 50% 1/share (16) 0.946-0.951 against 0.963 unfiltered, 32 0.983-0.986; at 10%
# 1/share (80) 0.87-0.89, 128 0.934-0.941, 256 0.987-0.992. The true top k of a tenth of the rows lie about ten
# times deeper in the whole ranking, and IVF needs more than ten times the lists to reach that deep.
SETTING_POWER = {"hnsw": 1.0, "ivf": 1.5}


def scaled_setting(setting: int, count: int, passing: int, power: float = 1.0) -> int:
    """``setting`` times (``count / passing``) ** ``power``, rounded up (exact integers where ``power`` is 1)."""
    if power == 1.0:
        return -(-setting * count // max(1, passing))
    return math.ceil(setting * (count / max(1, passing)) ** power)


def filtered_setting(kind: str, params: dict[str, Any], count: int, passing: int) -> int:
    """The efSearch (HNSW) or nprobe (IVF) of a search within ``passing`` of ``count`` rows: the unfiltered one
    scaled by ``SETTING_POWER``, at most every row (HNSW) or every list (IVF: then the search is exact). The one
    rule the search sets and the cost model prices."""
    if kind == "hnsw":
        return min(count, scaled_setting(int(params.get("efSearch") or 16), count, passing, SETTING_POWER[kind]))
    nlist = max(1, int(params.get("nlist") or 1))
    return min(nlist, scaled_setting(int(params.get("nprobe") or 1), count, passing, SETTING_POWER[kind]))


def work_per_query(kind: str, params: dict[str, Any], count: int, dim: int, setting: int | None = None) -> int:
    """About how many multiply-adds one query's search takes (distances only) at efSearch or nprobe ``setting``
    (the index's own when None): HNSW's ``setting`` candidates, each comparing its 2M neighbours on the base
    layer; IVF's coarse quantizer and ``setting`` lists; a flat index's every row."""
    if kind == "hnsw":
        ef = setting or int(params.get("efSearch") or 16)
        return ef * 2 * int(params.get("M") or 32) * dim
    if kind == "ivf":
        nlist = max(1, int(params.get("nlist") or 1))
        probed = min(nlist, setting or int(params.get("nprobe") or 1))
        return (nlist + probed * count // nlist) * dim
    return count * dim


# The paths of a filtered search (``filtered_path``): the passing rows' codes decoded and compared alone (exact);
# a selector's scan of HNSW's flat storage, the graph left aside (exact); faiss's own search of the index within
# them (a flat index's selector scan, exact; HNSW's walk or IVF's lists at a scaled setting; PQ widened).
DECODED, STORAGE_SCAN, FAISS_SEARCH = "passing rows decoded", "storage scan", "faiss search"
# IVF's check of each probed row with a selector: through the id map's translation, list by list (9-10 ns: 100k x
# 384 IVF512 float32, 1% passing, every list probed, 1.06 ms a query on one thread; load 3.7, wall time).
IVF_SELECTOR_CHECK_NS = 9.0


def filtered_path(
    kind: str, encoding: Encoding, dim: int, params: dict[str, Any], count: int, passing: int, queries: int
) -> str:
    """Which path a search of ``queries`` queries within ``passing`` of ``count`` rows takes: the one of least
    work (the ``*_NS`` constants above; see each path's cost). Only plain codes (the encoding's ``decoded``
    scoring) are decoded or scanned apart from faiss's search; OPQ's IVF is never decoded (its codes lie behind
    the rotation, no direct map reaches them)."""
    if encoding.scoring != "decoded":  # +refine, +rescore, sign codes, RaBitQ: faiss's search alone scores them
        return FAISS_SEARCH
    costs = {FAISS_SEARCH: search_cost(kind, encoding, dim, params, count, passing, queries)}
    decode = DECODE_NS_PER_DIM.get(encoding.codec)
    if decode is not None and not (kind == "ivf" and encoding.codec == "opq"):
        costs[DECODED] = passing * dim * (decode + queries * COMPARE_NS_PER_DIM)
    if kind == "hnsw" and encoding.codec in SCAN_NS_PER_DIM:  # storage a selector can scan
        costs[STORAGE_SCAN] = queries * (count * SELECTOR_CHECK_NS + passing * dim * STORAGE_SCAN_NS_PER_DIM)
    return min(costs, key=costs.__getitem__)


def search_cost(
    kind: str, encoding: Encoding, dim: int, params: dict[str, Any], count: int, passing: int, queries: int
) -> float:
    """ns of faiss's own search within the passing rows: HNSW's walk at the efSearch the search will use
    (``filtered_setting``); IVF's coarse quantizer and probed lists at its nprobe, each probed row checked; a flat
    index's selector scan, or for PQ and OPQ, which take none, an unfiltered scan at least. The costs: thread CPU
    time, 100k x 384 HNSW float32, load ~4: the walk 0.16-0.23 ns a neighbour dimension at efSearch 320-6400;
    decoding and comparing 1.2 ns a dimension at 1,000 passing, 2.0 at 10,000, whose gather leaves the cache."""
    if kind == "hnsw":
        walk = work_per_query(kind, params, count, dim, filtered_setting(kind, params, count, passing))
        return queries * walk * GRAPH_NS_PER_NEIGHBOUR_DIM
    if kind == "ivf":
        nlist = max(1, int(params.get("nlist") or 1))
        probed = filtered_setting(kind, params, count, passing) / nlist
        scan = SCAN_NS_PER_DIM.get(encoding.codec, SCAN_NS_PER_DIM["float32"]) * dim
        return queries * (nlist * scan + probed * (count * IVF_SELECTOR_CHECK_NS + passing * scan))
    if encoding.codec in ("pq", "opq"):
        return queries * count * int(encoding.m or 1) * PQ_SCAN_NS_PER_SUBQUANTIZER
    return queries * (count * SELECTOR_CHECK_NS + passing * SCAN_NS_PER_DIM[encoding.codec] * dim)


def top_k(ranked: np.ndarray, k: int) -> np.ndarray:
    """Per row, the columns of the ``k`` smallest values, smallest first (ties among them in column order): a
    partition, then a sort of those ``k`` alone, not a sort of every column."""
    if ranked.shape[1] <= k:
        return np.argsort(ranked, axis=1, kind="stable")
    part = np.argpartition(ranked, k - 1, axis=1)[:, :k]
    within = np.lexsort((part, np.take_along_axis(ranked, part, axis=1)), axis=1)
    return np.take_along_axis(part, within, axis=1)


def decoded_vectors(index: Any, positions: np.ndarray) -> np.ndarray:
    """The vectors of the codes at ``positions`` of the index inside ``index`` (an id map), as faiss decodes
    them. Where the codes lie in one flat array (a flat index, OPQ's, HNSW's storage): those rows gathered and
    decoded in one ``sa_decode`` call (float32 rows are the vectors); else ``reconstruct_batch``, a call per
    code (4x the time for sq8 and pq48: 0.88 and 1.03 us a code against 0.23 and 0.26; IVF's through the
    direct map :func:`readable_codes` made: float32 0.2 us a code at 1,000 of 100,000)."""
    import faiss

    inner = faiss.downcast_index(index.index)
    decoder = faiss.downcast_index(inner.storage) if isinstance(inner, faiss.IndexHNSW) else inner
    holder = faiss.downcast_index(decoder.index) if isinstance(decoder, faiss.IndexPreTransform) else decoder
    if not isinstance(holder, faiss.IndexFlatCodes):
        return np.asarray(inner.reconstruct_batch(positions), dtype=np.float32)
    codes = faiss.rev_swig_ptr(holder.codes.data(), holder.codes.size()).reshape(-1, holder.code_size)
    if isinstance(holder, faiss.IndexFlat):
        return codes[positions].view(np.float32)
    return np.asarray(decoder.sa_decode(codes[positions]), dtype=np.float32)


# Held while a direct map is made: a search's filter (the service's encoder thread) and a merge's read (its writer
# thread) may ask for the same segment's at once, and faiss marks the map made before it is filled.
DIRECT_MAPS = threading.Lock()


def readable_codes(index: Any) -> bool:
    """Whether :func:`decoded_vectors` can read the codes of the index inside ``index`` (an id map) by position:
    always but for IVF, whose codes lie list by list, read through a direct map (a position's list and offset,
    8 bytes a row), made here on the first need; False where faiss cannot make one. :func:`forget_direct_map`
    drops it before a save (the file stays as before) or a delete (which faiss refuses with one)."""
    import faiss

    inner: Any = faiss.downcast_index(index.index)
    if not isinstance(inner, faiss.IndexIVF):
        return True
    with DIRECT_MAPS:
        if inner.direct_map.type == inner.direct_map.NoMap:
            try:
                inner.make_direct_map(True)
            except RuntimeError:  # ids inside not 0 .. n-1 (faiss's IVF renumbers none after a delete)
                inner.make_direct_map(False)  # faiss leaves the half-made map in place
                return False
    return True


def forget_direct_map(index: Any) -> None:
    """The direct map :func:`readable_codes` made, dropped (no-op where there is none)."""
    import faiss

    if index is None or isinstance(index, faiss.IndexBinary):  # none yet, or sign codes: no IVF of floats
        return
    inner: Any = faiss.downcast_index(index.index)
    if isinstance(inner, faiss.IndexIVF) and inner.direct_map.type != inner.direct_map.NoMap:
        inner.make_direct_map(False)


def decoded_search(
    index: Any, x: np.ndarray, k: int, within: np.ndarray, l2: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The codes at the positions ``within`` passes (a bool per position of the index inside the id map
    ``index``) decoded and compared with the float queries as faiss's asymmetric search compares them (squared
    L2 where ``l2``, else inner products): per query, the best ``k`` (or as many as pass) as (scores,
    positions)."""
    positions = np.flatnonzero(within).astype(np.int64)
    vectors = decoded_vectors(index, positions)
    products = x @ vectors.T
    if l2:
        squares = np.einsum("ij,ij->i", vectors, vectors)
        products = (np.einsum("ij,ij->i", x, x)[:, None] - 2 * products) + squares[None, :]  # distances
    order = top_k(products if l2 else -products, k)
    return np.take_along_axis(products, order, axis=1), positions[order]


def storage_scan(index: Any, x: np.ndarray, k: int, within: np.ndarray, l2: bool) -> tuple[np.ndarray, np.ndarray]:
    """faiss's flat search of an HNSW index's storage (the graph left aside: exact) with a selector of the
    positions ``within`` passes: per query, the best ``k`` as (faiss's scores, positions; -1 past the passing).
    ``l2`` as :func:`decoded_search`'s, unused: the storage searches by the index's own metric."""
    import faiss

    inner: Any = faiss.downcast_index(index.index)
    storage = faiss.downcast_index(inner.storage)
    bitmap = np.packbits(within, bitorder="little")
    params = faiss.SearchParameters()
    params.sel = faiss.IDSelectorBitmap(len(bitmap), faiss.swig_ptr(bitmap))  # reads bitmap, alive till return
    scores, positions = storage.search(x, k, params=params)
    return scores, positions
