"""An in-memory stand-in for a Milvus *server* client, as far as ``MilvusStore`` uses one.

Milvus Lite 3.2 has no BINARY_VECTOR field and no IVF_RABITQ, so the paths whitevec takes on a server only are
tested against this: the schema and index it is asked for are pymilvus's own objects (recorded for the test to
read), and its search is exhaustive: inner product or squared L2 on float rows, HAMMING on packed binary rows
(Milvus's definitions), best first, filtered by ``id < N``.

Where a server's behaviour is known (tests/test_milvus_server.py shows it on a real one), the fake keeps to it: an
insert does not deduplicate primary keys (a row inserted twice is held, counted and found twice), an upsert
replaces every row of its key, and a compaction job runs a while (``Executing`` once) before it is
``Completed``.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np
from pymilvus.milvus_client.base import BaseMilvusClient


class FakeMilvusClient(BaseMilvusClient):
    """One shared in-memory server (``collections`` is a class attribute: reset it between tests)."""

    collections: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, uri: str = "", token: str = "", **_: Any) -> None:
        self.uri = uri
        self.polls = 0  # get_compaction_state calls since the last compact

    def has_collection(self, name: str) -> bool:
        return name in self.collections

    def create_collection(self, name: str, schema: Any, index_params: Any, **options: Any) -> None:
        index = dict(index_params[0].to_dict())
        self.collections[name] = {"schema": schema, "index": index, "rows": [], "options": options, "compacted": 0}

    def compact(self, name: str) -> int:
        self.collections[name]["compacted"] += 1
        self.polls = 0
        return 7  # a job id

    def get_compaction_state(self, job: int) -> str:
        assert job == 7
        self.polls += 1
        return "Completed" if self.polls > 1 else "Executing"

    def load_collection(self, name: str) -> None:
        assert name in self.collections

    def insert(self, name: str, rows: list[dict[str, Any]]) -> None:
        self.collections[name]["rows"].extend(rows)

    def upsert(self, name: str, rows: list[dict[str, Any]]) -> None:
        self.delete(name, [row["id"] for row in rows])
        self.insert(name, rows)

    def flush(self, name: str) -> None:
        return None

    def delete(self, name: str, ids: list[int]) -> None:
        gone = {int(i) for i in ids}
        self.collections[name]["rows"][:] = [r for r in self.collections[name]["rows"] if int(r["id"]) not in gone]

    def drop_collection(self, name: str) -> None:
        self.collections.pop(name, None)

    def close(self) -> None:
        return None

    def query(self, name: str, filter: str = "", output_fields: list[str] | None = None) -> list[dict[str, Any]]:
        assert output_fields == ["count(*)"], "the fake answers count(*) only"
        return [{"count(*)": len(self.collections[name]["rows"])}]

    def search(
        self,
        name: str,
        data: list[Any],
        limit: int,
        output_fields: list[str],
        search_params: dict[str, Any],
        filter: str = "",
    ) -> list[list[dict[str, Any]]]:
        collection = self.collections[name]
        metric = search_params["metric_type"]
        assert metric == collection["index"]["metric_type"], "search metric differs from the index's"
        bound = re.fullmatch(r"id < (\d+)", filter)
        rows = [r for r in collection["rows"] if bound is None or int(r["id"]) < int(bound.group(1))]
        rows.sort(key=lambda r: int(r["id"]))
        ids = np.array([r["id"] for r in rows], dtype=np.int64)
        if metric == "HAMMING":
            stored = np.array([np.frombuffer(r["vector"], np.uint8) for r in rows])
            queries = np.array([np.frombuffer(q, np.uint8) for q in data])
            dist = np.unpackbits(queries[:, None, :] ^ stored[None, :, :], axis=2).sum(axis=2).astype(np.float32)
            order, values = np.argsort(dist, axis=1, kind="stable"), dist
        else:
            stored = np.array([r["vector"] for r in rows], dtype=np.float32)
            q = np.array(data, dtype=np.float32)
            if metric == "IP":
                values = q @ stored.T
                order = np.argsort(-values, axis=1, kind="stable")
            else:
                values = ((q[:, None, :] - stored[None, :, :]) ** 2).sum(axis=2)
                order = np.argsort(values, axis=1, kind="stable")
        return [
            [{"id": int(ids[j]), "distance": float(values[row, j])} for j in order[row, :limit]]
            for row in range(len(data))
        ]
