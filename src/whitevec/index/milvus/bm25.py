"""The lexical part of an index on the Milvus backend: Milvus's own BM25, not a bm25s index beside the vectors.

The collection gets a VARCHAR ``text`` field with Milvus's analyzer on, a SPARSE_FLOAT_VECTOR ``sparse`` field
that a ``BM25`` function fills from it, and a SPARSE_INVERTED_INDEX with metric BM25 on that (``bm25_k1`` and
``bm25_b`` as whitevec's own: 1.2 and 0.75). Milvus keeps the documents' statistics itself, so it scales out
with the collection (the Ray engine writes the text with the vectors).

The analyzer is whitevec's as closely as Milvus allows (:func:`milvus_analyzer_params`): ``english`` is the
``standard`` tokenizer, ``lowercase``, ``asciifolding``, a ``length`` filter (terms under 40 characters), the
``stemmer`` filter (Snowball English, as PyStemmer) and a ``stop`` filter with NLTK's English stop words (the
list whitevec drops, on the stems), in whitevec's order; ``plain`` is the tokenizer and ``lowercase``. What
differs: Milvus's standard tokenizer splits on Unicode word boundaries rather than whitevec's runs of letters
and digits (``plain``: words of two or more characters; Milvus keeps one-character words); Milvus Lite 3.2
(``milvus_lite.analyzer``) knows only its ``\\w+`` tokenizer, lower case and the stop filter: it does not stem,
fold accents or drop long terms, and says nothing, so a build on Milvus Lite warns once. Milvus's own
``english`` analyzer type is not used: its stop words are Lucene's, not whitevec's, and Milvus Lite refuses it.

Search modes: ``lexical`` is one BM25 search; ``hybrid`` with ``rrf`` is Milvus's ``hybrid_search`` with
``RRFRanker(K)`` over a dense and a BM25 request of the same depth (Milvus fuses; whitevec asks the two
rankings again only to say which ranker found each hit and where); ``hybrid`` with ``convex`` is whitevec's
:func:`~whitevec.index.search.fusion.fuse` over the two lists Milvus returns, because Milvus's ``WeightedRanker``
scales each ranker's scores with its own function (an arctan for BM25 and IP), not min-max over the list, so
it cannot give whitevec's convex fusion.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from whitevec.errors import BadInputError, CorruptFileError, WhitevecWarning
from whitevec.index.lexical.analyzers import Analyzer, make_analyzer, stop_words
from whitevec.index.lexical.bm25 import DEFAULT_B, DEFAULT_K1  # whitevec's, and Milvus's own: 1.2, 0.75
from whitevec.index.milvus.filters import rows_filter
from whitevec.index.milvus.lite_servers import index_params_as_read
from whitevec.index.search.fusion import FusedHit, Fusion, Ranked

TEXT_FIELD = "text"
SPARSE_FIELD = "sparse"  # filled by Milvus's BM25 function from TEXT_FIELD
MILVUS_BM25 = "milvus"  # the lexical record's library when Milvus keeps the lexical part
MILVUS_ANALYZERS = ("english", "plain")
_MILVUS_WORDS = re.compile(r"\w+")  # Milvus Lite's standard tokenizer (milvus_lite.analyzer.standard)


def check_milvus_analyzer(name: str) -> None:
    """A one-line BadInputError for an analyzer Milvus cannot reproduce."""
    if str(name).strip().lower() not in MILVUS_ANALYZERS:
        raise BadInputError(
            f"analyzer {name!r} has no Milvus counterpart; on --backend milvus (and --engine ray) use "
            f"{' or '.join(MILVUS_ANALYZERS)}, or build with --backend faiss"
        )


def milvus_analyzer_params(analyzer: Analyzer) -> dict[str, Any]:
    """Milvus's ``analyzer_params`` for whitevec's ``english`` or ``plain`` analyzer (see the module docstring),
    its filters in whitevec's order."""
    check_milvus_analyzer(analyzer.name)
    filters: list[Any] = ["lowercase"]
    if analyzer.ascii_folding:
        filters.append("asciifolding")
    if analyzer.max_token_length is not None:  # Milvus drops a token longer than max; whitevec one this long
        filters.append({"type": "length", "max": analyzer.max_token_length - 1})
    stop = (
        []
        if analyzer.stop_words is None
        else [{"type": "stop", "stop_words": sorted(stop_words(analyzer.stop_words))}]
    )
    stem = [] if analyzer.stemmer is None else [{"type": "stemmer", "language": analyzer.stemmer}]
    filters += [*stem, *stop] if analyzer.stop_stems else [*stop, *stem]
    return {"tokenizer": "standard", "filter": filters}


def milvus_bm25_settings(analyzer_name: str) -> dict[str, Any]:
    """The collection's BM25 settings for whitevec's analyzer ``analyzer_name``: ``analyzer`` (whitevec's record),
    ``analyzer_params`` (Milvus's), ``k1``, ``b``."""
    analyzer = make_analyzer(analyzer_name)
    return {
        "analyzer": analyzer.record(),
        "analyzer_params": milvus_analyzer_params(analyzer),
        "k1": DEFAULT_K1,
        "b": DEFAULT_B,
    }


def bm25_record(settings: dict[str, Any], count: int) -> dict[str, Any]:
    """The manifest's ``lexical`` record of a lexical part kept in Milvus (``library`` ``"milvus"``)."""
    return {
        "ranker": "bm25",
        "library": MILVUS_BM25,
        "analyzer": settings["analyzer"],
        "milvus_analyzer": settings["analyzer_params"],
        "k1": settings["k1"],
        "b": settings["b"],
        "documents": int(count),
    }


def bm25_of(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The BM25 settings of a collection whose manifest keeps its lexical part in Milvus, else None."""
    record = manifest.get("lexical")
    if not isinstance(record, dict) or record.get("library") != MILVUS_BM25:
        return None
    return {
        "analyzer": record["analyzer"],
        "analyzer_params": record["milvus_analyzer"],
        "k1": record["k1"],
        "b": record["b"],
    }


def warn_lite_analyzer(settings: dict[str, Any]) -> None:
    """One WhitevecWarning when the analyzer stems: Milvus Lite's does not (see the module docstring)."""
    if settings["analyzer"].get("stemmer") is not None:
        warnings.warn(
            "Milvus Lite's analyzer does not stem (it has only the standard tokenizer and stop words): this "
            "index's BM25 matches whole words, not their stems as whitevec's english analyzer does, and keeps "
            "accents and long terms; a Milvus server stems them (--uri http://host:19530)",
            WhitevecWarning,
            stacklevel=3,
        )


def text_field_analyzer(bm25: dict[str, Any]) -> dict[str, Any]:
    """The text field's keyword arguments: Milvus's analyzer on, with these settings' parameters."""
    return {"enable_analyzer": True, "analyzer_params": bm25["analyzer_params"]}


def add_bm25_fields(pymilvus: Any, schema: Any, index_params: Any, bm25: dict[str, Any], uri: str) -> None:
    """The sparse field Milvus's BM25 function fills from the text field, and its inverted index (k1 and b as
    the Milvus at ``uri`` reads them)."""
    schema.add_field(SPARSE_FIELD, pymilvus.DataType.SPARSE_FLOAT_VECTOR)
    schema.add_function(
        pymilvus.Function(
            name="bm25",
            function_type=pymilvus.FunctionType.BM25,
            input_field_names=[TEXT_FIELD],
            output_field_names=[SPARSE_FIELD],
        )
    )
    index_params.add_index(
        SPARSE_FIELD,
        index_type="SPARSE_INVERTED_INDEX",
        metric_type="BM25",
        params=index_params_as_read(uri, {"bm25_k1": bm25["k1"], "bm25_b": bm25["b"]}),
    )


def result_arrays(results: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(distances, ids)`` (n, k) of a Milvus search's answer, 0 and -1 where it found fewer than ``k``."""
    scores = np.zeros((len(results), k), dtype=np.float32)
    ids = np.full((len(results), k), -1, dtype=np.int64)
    for row, hits in enumerate(results):
        for col, hit in enumerate(list(hits)[:k]):
            ids[row, col] = int(hit["id"])
            scores[row, col] = float(hit["distance"])
    return scores, ids


class BM25Collection(Protocol):
    """What :class:`MilvusLexical` asks of :class:`~whitevec.index.milvus.store.MilvusStore`."""

    client: Any
    collection: str
    visible_rows: int | None
    bm25: dict[str, Any] | None

    @property
    def visible_filter(self) -> str: ...

    @property
    def count(self) -> int: ...

    def dense_request(self, x: np.ndarray, k: int) -> tuple[list[Any], dict[str, Any]]: ...


class MilvusLexical:
    """The lexical ranker (:class:`~whitevec.index.stores.lexical.LexicalRanker`) of an index whose BM25 lives in
    its Milvus collection; rows are the collection's ids. Opened on the vector store's own handle."""

    def __init__(self, store: BM25Collection) -> None:
        if store.bm25 is None:
            raise CorruptFileError(f"Milvus collection {store.collection!r} has no BM25 field; rebuild the index")
        self.store = store
        self.analyzer = Analyzer.from_record(store.bm25["analyzer"])
        self.count = int(store.visible_rows if store.visible_rows is not None else store.count)
        self._stop = stop_words(self.analyzer.stop_words) if self.analyzer.stop_words is not None else frozenset()

    def has_terms(self, queries: Sequence[str]) -> np.ndarray:
        """Whether Milvus's analyzer leaves a term of each query (its words, lower-cased, stop words dropped)."""
        return np.fromiter(
            (any(word not in self._stop for word in _MILVUS_WORDS.findall(q.lower())) for q in queries), dtype=bool
        )

    def search(
        self, queries: Sequence[str], depth: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        results = self.store.client.search(
            self.store.collection,
            data=list(queries),
            anns_field=SPARSE_FIELD,
            limit=depth,
            output_fields=["id"],
            search_params={"metric_type": "BM25"},
            **rows_filter(self.store.visible_filter, allowed),
        )
        distances, rows = result_arrays(results, depth)
        # BM25 scores are never negative: Milvus Lite answers their negation as the distance, a server the score.
        scores = np.where(rows >= 0, np.abs(distances), -np.inf).astype(np.float32)
        return rows, scores

    def fused(
        self,
        vectors: np.ndarray,
        queries: Sequence[str],
        lists: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        fusion: Fusion,
        k: int,
    ) -> list[list[FusedHit]] | None:
        """Milvus's own fusion of a dense and a BM25 search of ``lists``' depth (``RRFRanker``), each hit with
        where each ranker put it (``lists``: dense rows and scores, lexical rows and scores, as :func:`fuse`
        takes them); None for a convex fusion, which Milvus cannot express (see the module docstring)."""
        if fusion.method != "rrf":
            return None
        from pymilvus import AnnSearchRequest, RRFRanker

        dense_rows, dense_scores, lexical_rows, lexical_scores = lists
        depth = dense_rows.shape[1]
        data, params = self.store.dense_request(vectors, depth)
        where = self.store.visible_filter
        requests = [
            AnnSearchRequest(data=data, anns_field="vector", param=params, limit=depth, expr=where),
            AnnSearchRequest(
                data=list(queries), anns_field=SPARSE_FIELD, param={"metric_type": "BM25"}, limit=depth, expr=where
            ),
        ]
        answer = self.store.client.hybrid_search(
            self.store.collection, requests, RRFRanker(fusion.k), limit=k, output_fields=["id"]
        )
        fused_scores, fused_rows = result_arrays(answer, k)
        return [
            _with_rankers(*query)
            for query in zip(
                fused_rows, fused_scores, dense_rows, dense_scores, lexical_rows, lexical_scores, strict=True
            )
        ]


def _with_rankers(
    rows: np.ndarray,
    scores: np.ndarray,
    dense_rows: np.ndarray,
    dense_scores: np.ndarray,
    lexical_rows: np.ndarray,
    lexical_scores: np.ndarray,
) -> list[FusedHit]:
    """One query's fused hits, each with its rank and score in the dense and lexical lists (None: not there)."""

    def place(row: int, ranked: np.ndarray, ranked_scores: np.ndarray) -> Ranked | None:
        at = np.flatnonzero(ranked == row)
        return Ranked(int(at[0]) + 1, float(ranked_scores[at[0]])) if at.size else None

    return [
        FusedHit(
            int(row),
            float(score),
            place(int(row), dense_rows, dense_scores),
            place(int(row), lexical_rows, lexical_scores),
        )
        for row, score in zip(rows.tolist(), scores.tolist(), strict=True)
        if row >= 0
    ]
