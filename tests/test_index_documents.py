"""``Retriever.documents(ids)``: the live documents an index holds by id (LangChain's ``get_by_ids`` reads it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from whitevec.index import Document, Retriever


def test_documents_by_id_are_the_live_ones_in_the_order_given(tmp_path: Path) -> None:
    docs = [Document(str(i), f"text {i}", {"n": i} if i % 2 else None) for i in range(4)]
    vectors = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    with Retriever.build(docs, tmp_path / "idx", vectors=vectors) as retriever:
        retriever.delete(["1"])
        retriever.add([Document("4", "text 4")], vectors=vectors[:1])
        assert retriever.documents(["4", "1", "nope", "3", "0"]) == [
            Document("4", "text 4"),
            Document("3", "text 3", {"n": 3}),
            Document("0", "text 0"),
        ]
        assert retriever.documents([]) == []
