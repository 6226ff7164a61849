"""Qdrant Edge (``qdrant-edge-py``), Qdrant's in-process engine: one ``EdgeShard`` in the folder, the vectors
as its default dense vector (Cosine, its default HNSW), the text and ``bucket`` as payload, a payload index on
each (``bucket`` Integer for the filters; ``text`` a text index with ``scoring=True``, Qdrant's BM25 over a
payload field, searched by ``TextQuery``), ``optimize()`` after the bulk load (Edge runs its optimizers, which
build the HNSW, only when asked). Point ids are integers (Edge takes integers or UUIDs): the documents' ids are
kept in ``ids.json`` beside the shard. Hybrid: a query fusing two prefetches with ``Fusion.Rrf``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.common.peers.inputs import DIM, Docs, Queries

PACKAGES = ("qdrant-edge-py",)
SETTINGS = {
    "default": "text index TextIndexParams(scoring=True), its other parameters at their defaults (no stemmer or "
    "stop words named), TextQuery's BM25 defaults (k 1.2, b 0.75); hybrid Rrf(k=60) (Qdrant's default k; Edge "
    "asks for one) over two prefetches of 2 x k (Edge asks for each prefetch's limit)",
    "english": "text index with the Snowball English stemmer and English stop words; hybrid Rrf(k=60) over "
    "prefetches of 100 (whitevec's depth)",
}
_IDS = "ids.json"
_BATCH = 1000


class QdrantEdgeSystem:
    modes = ("dense", "lexical", "hybrid")

    def __init__(self, folder: Path, setting: str) -> None:
        import qdrant_edge as qe

        self.qe, self.folder, self.setting = qe, folder, setting
        self.shard: Any = None
        self.ids: list[str] = []
        if (folder / _IDS).exists():
            self.shard = qe.EdgeShard.load(str(folder / "shard"))
            self.ids = json.loads((folder / _IDS).read_text())
        self.rows = {doc_id: row for row, doc_id in enumerate(self.ids)}

    def build(self, docs: Docs, lexical: bool) -> None:
        qe = self.qe
        config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=DIM, distance=qe.Distance.Cosine))
        self.shard = qe.EdgeShard.create(str(self.folder / "shard"), config)
        self.shard.update(qe.UpdateOperation.create_field_index("bucket", qe.PayloadSchemaType.Integer))
        if lexical:
            self.shard.update(qe.UpdateOperation.create_field_index("text", self._text_index()))
        self.add(docs)
        self.shard.optimize()

    def _text_index(self) -> Any:
        qe = self.qe
        if self.setting == "english":
            return qe.TextIndexParams(
                stopwords=qe.Language.English, stemmer=qe.SnowballParams(qe.SnowballLanguage.English), scoring=True
            )
        return qe.TextIndexParams(scoring=True)

    def _filter(self, below: int | None) -> Any:
        qe = self.qe
        return (
            None if below is None else qe.Filter(must=[qe.FieldCondition("bucket", range=qe.RangeFloat(lt=below))])
        )

    def _query(self, mode: str, vector: list[float], text: str, k: int, where: Any) -> Any:
        qe = self.qe
        dense = qe.Query.Nearest(vector)
        lexical = qe.TextQuery("text", text)
        if mode != "hybrid":
            return qe.QueryRequest(limit=k, query=dense if mode == "dense" else lexical, filter=where)
        depth = 100 if self.setting == "english" else 2 * k
        prefetches = [qe.Prefetch(limit=depth, query=q, filter=where) for q in (dense, lexical)]
        return qe.QueryRequest(limit=k, query=qe.Fusion.Rrf(k=60), prefetches=prefetches)

    def search(self, mode: str, queries: Queries, k: int, below: int | None = None) -> list[list[str]]:
        where = self._filter(below)
        requests = [
            self._query(mode, v, t, k, where) for v, t in zip(queries.vectors.tolist(), queries.texts, strict=True)
        ]
        found = (
            [self.shard.query(requests[0])]
            if len(requests) == 1
            else self.shard.query_batch(self.qe.QueryBatchRequest(requests))
        )
        return [[self.ids[int(point.id)] for point in points] for points in found]

    def add(self, docs: Docs) -> None:
        qe = self.qe
        start = len(self.ids)
        self.ids.extend(docs.ids)
        self.rows.update({doc_id: start + j for j, doc_id in enumerate(docs.ids)})
        for first in range(0, len(docs), _BATCH):  # a batch at a time: 1M rows as Python lists is 10+ GB
            part = docs.part(slice(first, first + _BATCH))
            rows = enumerate(zip(part.vectors.tolist(), part.texts, part.buckets.tolist(), strict=True))
            points = [qe.Point(start + first + j, v, {"text": t, "bucket": b}) for j, (v, t, b) in rows]
            self.shard.update(qe.UpdateOperation.upsert_points(points))
        self.shard.flush()
        (self.folder / _IDS).write_text(json.dumps(self.ids))

    def delete(self, ids: list[str]) -> None:
        self.shard.update(self.qe.UpdateOperation.delete_points([self.rows[i] for i in ids]))
        self.shard.flush()

    def close(self) -> None:
        if self.shard is not None:
            self.shard.close()


def open_system(folder: Path, setting: str) -> QdrantEdgeSystem:
    folder.mkdir(parents=True, exist_ok=True)
    return QdrantEdgeSystem(folder, setting)
