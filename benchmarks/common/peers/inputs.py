"""The inputs every system of the peers benchmark gets alike, made once and cached outside the repository.

- Quality: the four collections (Cranfield, MED, CACM, ADI: ``whitevec.datasets.retrieval``), their documents and
  judged queries encoded once by all-MiniLM-L6-v2 (whitevec's encoder, its default pooling, unit rows), kept in
  ``CACHE/quality-NAME.npz``.
- Speed: ``n`` documents, each the text of two of the four collections' documents drawn at random (seed 0) and
  joined by a blank line; their vectors clustered synthetic unit rows (``clustered_unit_vectors``, d = 384, seed 0:
  encoding 100,000 texts with MiniLM would take a quiet hour on 2 cores and say nothing about a store's speed);
  ``bucket``, an integer in [0, 100) drawn at random per document, for the filters (``bucket < 10`` passes 10%,
  ``bucket < 1`` 1%); the queries: the collections' query texts in turn, with the clustered query vectors. No
  two documents share a text (the pairs are distinct). Past ``LEXICAL_MAX`` documents the rows are dense only
  and a document's text is the first ``SHORT_TEXT`` / 2 characters of each of its two (1M joined texts are
  1.5 GB of strings no dense row reads). Kept in
  ``CACHE/speed-N.npz`` (vectors, buckets), ``speed-N.docs.json`` and ``speed-N.queries.json``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from benchmarks.common.data import clustered_unit_vectors, collection

COLLECTIONS = ("cranfield", "med", "cacm", "adi")
MODEL = "all-MiniLM-L6-v2"
DIM = 384
FIELD = "bucket"
BUCKETS = 100
LEXICAL_MAX = 100_000
SHORT_TEXT = 200
SPEED_QUERIES = 200
DEFAULT_CACHE = Path(os.environ.get("WHITEVEC_PEERS_CACHE", Path.home() / ".cache" / "whitevec-peers"))


@dataclass
class Docs:
    """What a system is built from or given to add: ids, texts, unit vectors (n, DIM) and the filter field."""

    ids: list[str]
    texts: list[str]
    vectors: np.ndarray
    buckets: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def part(self, rows: slice) -> Docs:
        return Docs(self.ids[rows], self.texts[rows], self.vectors[rows], self.buckets[rows])


@dataclass
class Queries:
    ids: list[str]
    texts: list[str]
    vectors: np.ndarray


def _encode(texts: list[str]) -> np.ndarray:
    from whitevec.encoders import load_encoder
    from whitevec.utils.linalg import unit_rows

    encoder = load_encoder(MODEL, cache=False)
    return unit_rows(np.asarray(encoder.encode(texts, show_progress=False), dtype=np.float32))


def quality_inputs(name: str, cache: Path, data_dir: str | None = None) -> tuple[Docs, Queries, dict[str, Any]]:
    """One collection's documents and judged queries with their MiniLM vectors (encoded on the first call), and
    its judgments."""
    dataset = collection(name, data_dir)
    judged = dataset.judged_queries()
    path = cache / f"quality-{name}.npz"
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        doc_vectors = _encode([d.text for d in dataset.corpus])
        query_vectors = _encode(list(judged.values()))
        np.savez(path.with_suffix(".tmp.npz"), docs=doc_vectors, queries=query_vectors)
        path.with_suffix(".tmp.npz").replace(path)
    saved = np.load(path)
    ids = [d.id for d in dataset.corpus]
    buckets = np.zeros(len(ids), dtype=np.int64)
    docs = Docs(ids, [d.text for d in dataset.corpus], saved["docs"], buckets)
    return docs, Queries(list(judged), list(judged.values()), saved["queries"]), dataset.qrels


def _speed_paths(n: int, cache: Path) -> tuple[Path, Path, Path]:
    return cache / f"speed-{n}.npz", cache / f"speed-{n}.docs.json", cache / f"speed-{n}.queries.json"


def speed_inputs(n: int, cache: Path, data_dir: str | None = None) -> tuple[Docs, Queries]:
    """The speed corpus of ``n`` documents and its queries (see the module docstring), made on the first call."""
    array_path, docs_path, _ = _speed_paths(n, cache)
    if not array_path.is_file():
        _write_speed_inputs(n, cache, data_dir)
    saved = np.load(array_path)
    stored = json.loads(docs_path.read_text())
    return Docs(stored["ids"], stored["texts"], saved["docs"], saved["buckets"]), speed_queries(n, cache, data_dir)


def speed_queries(n: int, cache: Path, data_dir: str | None = None) -> Queries:
    """The queries of the speed corpus of ``n`` documents alone (a search job holds no document in memory)."""
    array_path, _, queries_path = _speed_paths(n, cache)
    if not array_path.is_file():
        _write_speed_inputs(n, cache, data_dir)
    texts = json.loads(queries_path.read_text())
    return Queries([f"q{i}" for i in range(len(texts))], texts, np.load(array_path)["queries"])


def _write_speed_inputs(n: int, cache: Path, data_dir: str | None) -> None:
    sources = [collection(name, data_dir) for name in COLLECTIONS]
    # Distinct pieces (the collections repeat some documents), so distinct pairs make distinct texts.
    piece = (lambda text: text) if n <= LEXICAL_MAX else (lambda text: text[: SHORT_TEXT // 2])
    pool = list(dict.fromkeys(piece(d.text) for s in sources for d in s.corpus if d.text.strip()))
    query_pool = [t for s in sources for t in s.judged_queries().values()]
    rng = np.random.default_rng(0)
    pairs = _distinct_pairs(rng, len(pool), n)
    texts = [pool[a] + "\n\n" + pool[b] for a, b in pairs.tolist()]
    buckets = rng.integers(0, BUCKETS, n)
    queries = [query_pool[i % len(query_pool)] for i in rng.permutation(SPEED_QUERIES)]
    docs, query_vectors = clustered_unit_vectors(n, SPEED_QUERIES, d=DIM, seed=0)
    cache.mkdir(parents=True, exist_ok=True)
    array_path, docs_path, queries_path = _speed_paths(n, cache)
    docs_path.write_text(json.dumps({"ids": [f"d{i}" for i in range(n)], "texts": texts}))
    queries_path.write_text(json.dumps(queries))
    np.savez(array_path.with_suffix(".tmp.npz"), docs=docs, queries=query_vectors, buckets=buckets)
    array_path.with_suffix(".tmp.npz").replace(array_path)


def _distinct_pairs(rng: np.random.Generator, pool: int, n: int) -> np.ndarray:
    """``n`` distinct ordered pairs of documents, drawn at random: no two documents share a text (txtai is given
    its vectors by text, so a repeated text would take one vector for all)."""
    codes = np.unique(rng.integers(0, pool * pool, n))
    while len(codes) < n:
        codes = np.unique(np.concatenate([codes, rng.integers(0, pool * pool, n - len(codes))]))
    codes = rng.permutation(codes)
    return np.stack([codes // pool, codes % pool], axis=1)


def new_docs(n: int, start: int, like: Docs) -> Docs:
    """``n`` documents to add, ids ``new{start}...``: texts and buckets of the first ones of ``like``, vectors
    of its last ones (unit rows already)."""
    return Docs(
        [f"new{start + i}" for i in range(n)],
        list(like.texts[:n]) or [f"new document {start + i}" for i in range(n)],
        np.ascontiguousarray(like.vectors[-n:]),
        np.asarray(like.buckets[:n]),
    )
