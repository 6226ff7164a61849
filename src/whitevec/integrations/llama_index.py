"""LlamaIndex on whitevec (``pip install "whitevec[llamaindex]"``; docs/how-to/llama-index.md).

- :class:`WhitevecVectorStore`: a LlamaIndex vector store kept in a whitevec index folder. Nodes come with their
  embeddings (LlamaIndex's ``embed_model`` made them), so the index holds *external* vectors; each node's text
  is the document's text (the lexical part indexes it), its id the document's id, and the rest of the node
  (ref_doc_id, metadata, relationships) its metadata, so a node comes back whole. Queries map to whitevec's
  search modes (``DEFAULT`` dense, ``HYBRID`` hybrid with ``alpha`` the convex fusion's dense weight,
  ``TEXT_SEARCH`` and ``SPARSE`` lexical BM25) and ``MetadataFilters`` to whitevec's filter language
  (:func:`filter_expression`).
- :class:`WhitevecEmbedding`: a whitevec encoder plus an optional fitted transform as a LlamaIndex
  ``BaseEmbedding`` (``Settings.embed_model``, an index's ``embed_model``).

What LlamaIndex can ask and whitevec cannot answer is refused in one line (a BadInputError): the filter operators
on arrays, substrings and emptiness, the query modes other than those above, a node without an embedding.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from whitevec.datasets.retrieval import Document
from whitevec.errors import BadInputError, DataNotFoundError
from whitevec.index.filters.language import KEYWORDS
from whitevec.index.retriever import Retriever
from whitevec.index.search.fusion import Fusion

if TYPE_CHECKING:
    from whitevec.encoders.protocol import EncoderLike
    from whitevec.transforms import Transform
    from whitevec.transforms.frozen import AppliesVectors

# --- filters ---------------------------------------------------------------------------------------------------
_COMPARED = {
    FilterOperator.EQ: "==",
    FilterOperator.NE: "!=",
    FilterOperator.GT: ">",
    FilterOperator.GTE: ">=",
    FilterOperator.LT: "<",
    FilterOperator.LTE: "<=",
}
_LISTED = (FilterOperator.IN, FilterOperator.NIN)
SUPPORTED_OPERATORS = (*_COMPARED, *_LISTED)
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")  # a field name of whitevec's filter language


def filter_expression(filters: MetadataFilters | None) -> str | None:
    """``filters`` as a whitevec filter expression (:mod:`whitevec.index.filters.language`); None for no filter.

    Each of ``==, !=, >, >=, <, <=`` is itself, ``IN`` is ``in [...]``, ``NIN`` is ``not (... in [...])``;
    ``AND`` and ``OR`` join, ``NOT`` is LlamaIndex's "none of them" (``not (a or b)``), and nested
    ``MetadataFilters`` nest in parentheses. whitevec's logic is SQL's (and Milvus's): a document without the
    field passes neither ``year != 2000`` nor ``not year == 2000``. The other operators (``ANY``, ``ALL``,
    ``CONTAINS``, ``TEXT_MATCH``, ``TEXT_MATCH_INSENSITIVE``, ``IS_EMPTY``: arrays, substrings, emptiness) are a
    one-line BadInputError naming the operator, as are a key that is not a top-level field name and a value of a
    kind the operator cannot take."""
    if filters is None or not filters.filters:
        return None
    return _group(filters)


def _group(filters: MetadataFilters) -> str:
    if not filters.filters:
        raise BadInputError("a nested MetadataFilters holds no filter")
    parts = [f"({_group(part)})" if isinstance(part, MetadataFilters) else _one(part) for part in filters.filters]
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.NOT:  # LlamaIndex's NOT: none of the filters matches
        return f"not ({' or '.join(parts)})"
    return f" {condition.value} ".join(parts)


def _one(part: MetadataFilter) -> str:
    operator, key, value = FilterOperator(part.operator), part.key, part.value
    if operator not in SUPPORTED_OPERATORS:
        raise BadInputError(
            f"the LlamaIndex filter operator {operator.name} ({operator.value!r}, on {key!r}) has no whitevec "
            f"equivalent; whitevec filters compare top-level scalar fields with "
            f"{', '.join(op.name for op in SUPPORTED_OPERATORS)}"
        )
    if not _FIELD.match(key) or key.lower() in KEYWORDS:
        raise BadInputError(
            f"the metadata filter key {key!r} is not a field whitevec can filter on: a top-level metadata key of "
            "letters, digits and underscores, not starting with a digit, and not a keyword (and, or, not, in, "
            "true, false)"
        )
    if operator in _COMPARED:
        if isinstance(value, list) or value is None:
            raise BadInputError(f"the filter {key} {operator.name} needs one string or number, got {value!r}")
        return f"{key} {_COMPARED[operator]} {_literal(value)}"
    if not isinstance(value, list) or not value:
        raise BadInputError(f"the filter {key} {operator.name} needs a non-empty list of values, got {value!r}")
    member = f"{key} in [{', '.join(_literal(item) for item in value)}]"
    return member if operator == FilterOperator.IN else f"not ({member})"


def _literal(value: str | int | float) -> str:
    """``value`` as the filter language writes it: strings as JSON strings (their escapes are the language's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float) and not math.isfinite(value):
        raise BadInputError(f"a metadata filter compares with finite numbers, got {value!r}")
    return repr(value)


# --- the vector store ----------------------------------------------------------------------------------------
_MODES = {
    VectorStoreQueryMode.DEFAULT: "dense",
    VectorStoreQueryMode.HYBRID: "hybrid",
    VectorStoreQueryMode.TEXT_SEARCH: "lexical",
    VectorStoreQueryMode.SPARSE: "lexical",
}


class WhitevecVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store in the whitevec index folder ``path``: opened when it holds an index, else
    built there by the first :meth:`add` from its nodes' embeddings (their dimension is the index's), with
    ``transform`` (fitted on those embeddings: the first add must bring enough), ``kind``, ``metric`` and
    ``lexical`` (``"bm25"``, the default, makes hybrid and text searches possible; None, dense only). Every
    write is on disk when it returns, so :meth:`persist` has nothing left to write; reopen the store with
    ``WhitevecVectorStore(path)`` or :meth:`from_persist_dir`."""

    stores_text: bool = True
    flat_metadata: bool = False
    path: str
    transform: str = "none"
    kind: str = "flat"
    metric: str = "cosine"
    lexical: str | None = "bm25"
    encoder_name: str = "llama_index"

    _retriever: Retriever | None = PrivateAttr(default=None)
    _building: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, path: str | os.PathLike[str], **settings: Any) -> None:
        fields: dict[str, Any] = {"path": str(Path(path).expanduser()), **settings}
        super().__init__(**fields)
        try:
            self._retriever = Retriever.load(self.path)
        except DataNotFoundError:  # built by the first add, when the dimension is known
            self._retriever = None

    @classmethod
    def class_name(cls) -> str:
        return "WhitevecVectorStore"

    @classmethod
    def from_persist_dir(cls, persist_dir: str | os.PathLike[str], **settings: Any) -> WhitevecVectorStore:
        """The store of the index folder ``persist_dir`` (as ``WhitevecVectorStore(persist_dir)``)."""
        return cls(persist_dir, **settings)

    @property
    def client(self) -> Retriever | None:
        """The whitevec :class:`~whitevec.index.retriever.Retriever` of the folder (None before the first add)."""
        return self._retriever

    def persist(self, persist_path: str, fs: Any = None) -> None:
        """Nothing to do: each write was on disk in the index folder when it returned (``persist_path``, a file
        LlamaIndex names in its storage folder, is not written)."""

    # --- writes ---------------------------------------------------------------------------------------------
    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Add ``nodes`` with their embeddings (a node whose id the index holds replaces it); their ids. A node
        without an embedding, embeddings of another length than the index's, or a NaN in one: one line, nothing
        written."""
        if not nodes:
            return []
        vectors = _embeddings(nodes)
        docs = [
            Document(
                node.node_id,
                node.get_content(metadata_mode=MetadataMode.NONE),
                node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata),
            )
            for node in nodes
        ]
        with self._building:
            index = self._retriever
            if index is None:  # the first add builds the index: a refused one leaves no folder behind
                self._retriever = Retriever.build(
                    docs,
                    self.path,
                    vectors=vectors,
                    encoder_name=self.encoder_name,
                    transform=self.transform,
                    kind=self.kind,
                    metric=self.metric,
                    lexical=self.lexical,
                    show_progress=False,
                )
        if index is not None:
            index.upsert(docs, vectors=vectors)
        return [node.node_id for node in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete the nodes of the source document ``ref_doc_id``."""
        self._delete([doc.id for doc in self._documents(None, f"ref_doc_id == {_literal(ref_doc_id)}")])

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """Delete the nodes with these ids that pass ``filters`` (either may be None: no condition)."""
        self._delete([doc.id for doc in self._documents(node_ids, filter_expression(filters))])

    def clear(self) -> None:
        """Delete every node (the index folder and its settings stay)."""
        self._delete([doc.id for doc in self._documents(None, None)])

    def get_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        """The nodes with these ids (in that order; those the index lacks left out) that pass ``filters``."""
        return [
            _node(doc.id, doc.text, doc.metadata) for doc in self._documents(node_ids, filter_expression(filters))
        ]

    # --- queries --------------------------------------------------------------------------------------------
    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The ``similarity_top_k`` best nodes (``hybrid_top_k`` in hybrid mode when given), best first, with
        whitevec's scores (:class:`~whitevec.index.search.hits.SearchHit`)."""
        mode, fusion = _mode(query)
        expression = _query_filter(query)
        index = self._retriever
        if index is None or index.count == 0:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        texts = None if mode == "dense" else [_query_text(query, mode)]
        vectors = None if mode == "lexical" else _query_vector(query, mode)
        k = query.hybrid_top_k if mode == "hybrid" and query.hybrid_top_k else query.similarity_top_k
        (hits,) = index.search(texts, k, mode=mode, fusion=fusion, filter=expression, query_vectors=vectors)
        return VectorStoreQueryResult(
            nodes=[_node(hit.id, hit.text, hit.metadata) for hit in hits],
            similarities=[hit.score for hit in hits],
            ids=[hit.id for hit in hits],
        )

    # --- async twins: the work on a thread, the event loop free ---------------------------------------------
    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    async def adelete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        await asyncio.to_thread(self.delete_nodes, node_ids, filters, **delete_kwargs)

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        return await asyncio.to_thread(self.get_nodes, node_ids, filters)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await asyncio.to_thread(self.query, query, **kwargs)

    # --- the index ------------------------------------------------------------------------------------------
    def _documents(self, ids: list[str] | None, expression: str | None) -> list[Document]:
        # An index with no live document refuses every filter (no document has its field): nothing to find.
        if self._retriever is None or self._retriever.count == 0 or ids == []:
            return []
        return self._retriever.documents(ids, filter=expression)

    def _delete(self, ids: list[str]) -> None:
        if ids and self._retriever is not None:
            self._retriever.delete(ids)


def _embeddings(nodes: Sequence[BaseNode]) -> np.ndarray:
    """The nodes' embeddings as one float32 matrix; a node without one, or of another length than the first's, is
    one line naming it (the index checks the width against its own, and NaN, before it writes)."""
    width = None
    for node in nodes:
        if node.embedding is None:
            raise BadInputError(
                f"node {node.node_id!r} has no embedding; nothing was written (a VectorStoreIndex computes them "
                "with its embed_model; nodes added to the store directly need theirs)"
            )
        width = len(node.embedding) if width is None else width
        if len(node.embedding) != width:
            raise BadInputError(
                f"node {node.node_id!r} has an embedding of {len(node.embedding)} values, the first node one of "
                f"{width}; nothing was written"
            )
    return np.asarray([node.embedding for node in nodes], dtype=np.float32)


def _node(doc_id: str, text: str, metadata: dict[str, Any] | None) -> BaseNode:
    """The node a document holds: its text, and the rest of it from the metadata where this store wrote it there;
    a document of an index built otherwise (``whitevec index build --vectors``) is a TextNode of its id, text and
    metadata."""
    if metadata is None or "_node_content" not in metadata:
        return TextNode(id_=doc_id, text=text, metadata=metadata or {})
    return metadata_dict_to_node(metadata, text=text)


def _mode(query: VectorStoreQuery) -> tuple[str, Fusion | None]:
    answered = ", ".join(m.name for m in _MODES)
    try:
        asked = VectorStoreQueryMode(query.mode)  # a dataclass field: a plain string is not converted
    except ValueError:
        raise BadInputError(f"unknown LlamaIndex query mode {query.mode!r}; whitevec answers {answered}") from None
    mode = _MODES.get(asked)
    if mode is None:
        raise BadInputError(
            f"the LlamaIndex query mode {asked.name} has no whitevec equivalent; whitevec answers {answered}"
        )
    if query.alpha is not None and mode != "hybrid":
        raise BadInputError(f"alpha weighs a hybrid search's two rankings; this is a {asked.name} query")
    # alpha: LlamaIndex's 1 is vector search alone, 0 BM25 alone; whitevec's convex weight is the dense one too.
    return mode, None if query.alpha is None else Fusion("convex", alpha=query.alpha)


def _query_filter(query: VectorStoreQuery) -> str | None:
    """The query's filters and its ``doc_ids`` (source documents) as one whitevec filter."""
    if query.node_ids:  # VectorStoreIndex.as_retriever passes its index struct's, empty for a store of texts
        raise BadInputError(
            "a query restricted to node_ids has no whitevec equivalent (filters read metadata, not ids); "
            "filter on metadata, or on the source documents with doc_ids"
        )
    parts = [filter_expression(query.filters)]
    if query.doc_ids is not None:
        if not query.doc_ids:
            raise BadInputError("doc_ids is an empty list: no source document to search within")
        parts.append(f"ref_doc_id in [{', '.join(_literal(doc_id) for doc_id in query.doc_ids)}]")
    given = [f"({part})" for part in parts if part is not None]
    return " and ".join(given) or None


def _query_text(query: VectorStoreQuery, mode: str) -> str:
    if not query.query_str or not query.query_str.strip():
        raise BadInputError(f"a {mode} query needs its text (query_str) for the lexical ranking")
    return query.query_str


def _query_vector(query: VectorStoreQuery, mode: str) -> np.ndarray:
    if query.query_embedding is None:
        raise BadInputError(f"a {mode} query needs its embedding (query_embedding)")
    return np.asarray([query.query_embedding], dtype=np.float32)


# --- the embedding -------------------------------------------------------------------------------------------
class WhitevecEmbedding(BaseEmbedding):
    """A whitevec encoder, then a fitted transform if given, as a LlamaIndex embedding model.

    ``model``: a model name, alias or folder (a static table folder too), or a whitevec encoder (an
    ``EncoderLike``); ``pooling``, ``max_length`` and ``device`` are for a named model. ``transform``: a fitted
    :class:`~whitevec.transforms.Transform` or a saved one's path (``whitevec fit``); None, the encoder's vectors
    as they are. Queries and texts are embedded alike (whitevec's encoders take no query prefix).
    """

    _encoder: EncoderLike = PrivateAttr()
    _transform: AppliesVectors | None = PrivateAttr(default=None)

    def __init__(
        self,
        model: str | os.PathLike[str] | EncoderLike | None = None,
        *,
        transform: str | os.PathLike[str] | Transform | None = None,
        pooling: str | None = None,
        max_length: int | None = None,
        device: str | None = None,
        **kwargs: Any,
    ) -> None:
        from whitevec.encoders.protocol import EncoderLike

        if isinstance(model, EncoderLike):
            if pooling is not None or max_length is not None or device is not None:
                raise BadInputError("pooling, max_length and device are for a named model, not a given encoder")
            encoder = model
        else:
            from whitevec.encoders.loading import load_encoder
            from whitevec.encoders.models import DEFAULT_MODEL

            encoder = load_encoder(model or DEFAULT_MODEL, pooling, max_length=max_length, device=device)
        applied = _fitted(transform)
        kwargs.setdefault("model_name", str(encoder.describe().get("model", "whitevec")))
        super().__init__(**kwargs)
        self._encoder, self._transform = encoder, applied

    @classmethod
    def class_name(cls) -> str:
        return "WhitevecEmbedding"

    @property
    def encoder(self) -> EncoderLike:
        return self._encoder

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 vectors of ``texts``: encoded, then transformed."""
        vectors = self._encoder.encode(list(texts), show_progress=False)
        if self._transform is not None:
            vectors = self._transform.transform(vectors)
        return np.asarray(vectors, dtype=np.float32)

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self.embed(texts).tolist()  # type: ignore[no-any-return]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._get_text_embeddings([query])[0]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


def _fitted(transform: str | os.PathLike[str] | Transform | None) -> AppliesVectors | None:
    """A transform to apply: a saved one read from its path, or a given one checked fitted (one line if not)."""
    if transform is None:
        return None
    from whitevec.transforms import Transform

    if not isinstance(transform, Transform):
        return Transform.load(transform)
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    try:
        check_is_fitted(transform)
    except NotFittedError as exc:
        raise BadInputError(f"the transform {transform!r} is not fitted; fit it, or give a saved one") from exc
    return transform
