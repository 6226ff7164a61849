"""Milvus Lite through pymilvus directly: ``MilvusClient("FOLDER/milvus.db")``, one collection with a VARCHAR
primary key, the vector (FLOAT_VECTOR, COSINE), the text with Milvus's analyzer on (its default, the
``standard`` tokenizer: Milvus Lite has no stemmer), a ``BM25`` function filling a sparse field (Milvus's
full-text search), and the ``bucket`` field (INT64). Hybrid: ``hybrid_search`` with ``RRFRanker()`` (k 60) over
a dense and a BM25 request of ``k`` each, as Milvus's full-text search guide writes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common.peers.inputs import DIM, Docs, Queries

PACKAGES = ("pymilvus", "milvus-lite")
SETTINGS = {
    "default": "vector index AUTOINDEX, COSINE; BM25 at Milvus's defaults on the standard tokenizer (Lite has no "
    "stemmer); hybrid RRFRanker() over k + k",
    "rrf/100": "hybrid RRFRanker() over each request's top 100 (whitevec's depth), cut to k",
    "english": "the text field's analyzer: standard tokenizer, lower case, English stop words (bm25s's list, "
    "written out): the most Milvus Lite's analyzer does (it has no stemmer); hybrid as default",
}
COLLECTION = "docs"
_INSERT_BATCH = 1000
_TEXT_BYTES = 65535


class MilvusLiteSystem:
    modes = ("dense", "lexical", "hybrid")

    def __init__(self, folder: Path, setting: str) -> None:
        from pymilvus import MilvusClient

        self.setting = setting
        folder.mkdir(parents=True, exist_ok=True)
        self.client: Any = MilvusClient(str(folder / "milvus.db"))
        if self.client.has_collection(COLLECTION):
            self.client.load_collection(COLLECTION)

    def build(self, docs: Docs, lexical: bool) -> None:
        from pymilvus import DataType, Function, FunctionType

        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=DIM)
        schema.add_field("bucket", DataType.INT64)
        index_params = self.client.prepare_index_params()
        index_params.add_index("vector", index_type="AUTOINDEX", metric_type="COSINE")
        analyzer: dict[str, Any] = {"enable_analyzer": True} if lexical else {}
        if lexical and self.setting == "english":
            analyzer["analyzer_params"] = {"tokenizer": "standard", "filter": ["lowercase", _english_stop()]}
        schema.add_field("text", DataType.VARCHAR, max_length=_TEXT_BYTES, **analyzer)
        if lexical:
            schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            bm25 = Function(
                name="bm25",
                function_type=FunctionType.BM25,
                input_field_names=["text"],
                output_field_names=["sparse"],
            )
            schema.add_function(bm25)
            index_params.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        self.client.create_collection(COLLECTION, schema=schema, index_params=index_params)
        self.add(docs)

    def search(self, mode: str, queries: Queries, k: int, below: int | None = None) -> list[list[str]]:
        where = "" if below is None else f"bucket < {below}"
        if mode == "hybrid":
            return self._hybrid(queries, k, where)
        field, data = (
            ("vector", [v.tolist() for v in queries.vectors]) if mode == "dense" else ("sparse", queries.texts)
        )
        metric = "COSINE" if mode == "dense" else "BM25"
        found = self.client.search(
            COLLECTION, data=data, anns_field=field, limit=k, filter=where, search_params={"metric_type": metric}
        )
        return [[str(hit["id"]) for hit in hits] for hits in found]

    def _hybrid(self, queries: Queries, k: int, where: str) -> list[list[str]]:
        from pymilvus import AnnSearchRequest, RRFRanker

        depth = 100 if self.setting == "rrf/100" else k
        requests = [
            AnnSearchRequest(
                data=[v.tolist() for v in queries.vectors],
                anns_field="vector",
                param={"metric_type": "COSINE"},
                limit=depth,
                expr=where,
            ),
            AnnSearchRequest(
                data=list(queries.texts),
                anns_field="sparse",
                param={"metric_type": "BM25"},
                limit=depth,
                expr=where,
            ),
        ]
        found = self.client.hybrid_search(COLLECTION, requests, RRFRanker(), limit=k)
        return [[str(hit["id"]) for hit in hits] for hits in found]

    def add(self, docs: Docs) -> None:
        for first in range(0, len(docs), _INSERT_BATCH):  # a batch at a time: 1M rows as Python lists is 10+ GB
            part = docs.part(slice(first, first + _INSERT_BATCH))
            rows = zip(part.ids, part.vectors.tolist(), part.texts, part.buckets.tolist(), strict=True)
            batch = [{"id": i, "vector": v, "text": _fit(t), "bucket": b} for i, v, t, b in rows]
            self.client.insert(COLLECTION, batch)
        self.client.flush(COLLECTION)

    def delete(self, ids: list[str]) -> None:
        self.client.delete(COLLECTION, ids=ids)
        self.client.flush(COLLECTION)

    def close(self) -> None:
        self.client.close()


def _fit(text: str) -> str:
    """The text cut to the VARCHAR field's byte limit (a joined document can pass it)."""
    raw = text.encode()
    return text if len(raw) <= _TEXT_BYTES else raw[:_TEXT_BYTES].decode(errors="ignore")


def _english_stop() -> dict[str, Any]:
    """Milvus's ``stop`` filter with an English list written out (Milvus Lite 3.2's filter takes the words only,
    not the server's ``_english_`` name): bm25s's, the list whitevec's ``english`` analyzer drops."""
    from whitevec.index.lexical.analyzers import stop_words

    return {"type": "stop", "stop_words": sorted(stop_words("english"))}


def open_system(folder: Path, setting: str) -> MilvusLiteSystem:
    return MilvusLiteSystem(folder, setting)
