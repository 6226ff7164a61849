"""``WhitevecVectorStore``: a LangChain ``VectorStore`` over a whitevec index (see the package docstring)."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.documents import Document as LangChainDocument
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from whitevec.datasets.retrieval import Document, check_unique_ids
from whitevec.encoders.protocol import EncoderLike
from whitevec.errors import BadInputError
from whitevec.index import Retriever
from whitevec.index.build import as_documents, check_build
from whitevec.index.folder.manifest import MANIFEST
from whitevec.index.lexical.analyzers import DEFAULT_ANALYZER
from whitevec.integrations.langchain.embeddings import ModelLike, WhitevecEmbeddings
from whitevec.integrations.langchain.filters import filter_expression
from whitevec.transforms.frozen import as_transform
from whitevec.transforms.validation import check_vectors

if TYPE_CHECKING:
    from typing import Self

SEARCH_OPTIONS = ("filter", "mode", "fusion", "candidates")
INDEX_DIR = "index"  # inside the temporary folder a store owns


class WhitevecVectorStore(VectorStore):
    """A LangChain ``VectorStore`` over a whitevec index (see the module docstring).

    ``embedding``: whitevec's own encoder (a model name or folder, an encoder, a :class:`WhitevecEmbeddings`: its
    transform, if any, becomes the index's) or any other LangChain ``Embeddings`` (vectors given to the index);
    None only to reopen an index with its own model. ``folder``: where the index lives (None: a temporary folder
    removed on :meth:`close`). The index's settings, used when the first add makes it: ``transform`` (a spec
    such as ``"whitening-256"``), ``kind``, ``metric``, ``index_params``, ``lexical`` (``"bm25"`` for hybrid and
    lexical searches) and ``analyzer``, ``search`` (its default mode and fusion), ``encoder_name`` (the name an
    external encoder is recorded under; default: the Embeddings' class and model).

    Scores (``similarity_search_with_score``) are whitevec's: in dense mode the cosine similarity (metric
    ``cosine``) or inner product (``ip``) in the index's space, higher is closer, or the squared L2 distance
    (``l2``), lower is closer; in hybrid mode the fused score (higher is closer). Relevance scores map them
    into [0, 1] (:meth:`_select_relevance_score_fn`).
    """

    def __init__(
        self,
        embedding: Embeddings | ModelLike | None = None,
        *,
        folder: str | os.PathLike[str] | None = None,
        transform: str = "none",
        kind: str = "flat",
        metric: str = "cosine",
        index_params: dict[str, Any] | None = None,
        lexical: str | None = None,
        analyzer: str = DEFAULT_ANALYZER,
        search: Mapping[str, str] | None = None,
        encoder_name: str | None = None,
    ) -> None:
        self._own, self._external = _encoders(embedding)
        if isinstance(embedding, WhitevecEmbeddings) and embedding.transform is not None:
            if transform != "none":
                raise BadInputError("the embeddings bring a fitted transform; give no transform spec beside it")
            self._settings: dict[str, Any] = {"transform": as_transform(embedding.transform)}
        else:
            self._settings = {"transform": transform}
        self._settings.update(kind=kind, metric=metric, index_params=index_params, lexical=lexical)
        self._settings.update(analyzer=analyzer, search=search)
        self._encoder_name = encoder_name
        self._lock = threading.RLock()  # the index's creation on the first add
        self._owned: Path | None = None
        if folder is None:
            self._owned = Path(tempfile.mkdtemp(prefix="whitevec-langchain-"))
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._owned, ignore_errors=True)
            folder = self._owned / INDEX_DIR
        self.folder = Path(folder).expanduser()
        self._was_folder = self.folder.is_dir()
        self._retriever: Retriever | None = None
        self._closed = False
        if (self.folder / MANIFEST).is_file():
            self._retriever = self._open()
        else:  # the settings, refused before any add
            check_build(self.folder, **{k: v for k, v in self._settings.items() if k != "transform"})

    def _open(self) -> Retriever:
        retriever = Retriever.load(self.folder, encoder=self._own)
        if retriever.is_external and self._external is None:
            retriever.close()
            raise BadInputError(
                f"the index at {self.folder} holds vectors made elsewhere ({retriever.manifest.get('model')!r}); "
                "give the LangChain Embeddings that made them"
            )
        if not retriever.is_external and self._external is not None:
            retriever.close()
            raise BadInputError(
                f"the index at {self.folder} encodes with its own model; give no Embeddings (or a "
                "WhitevecEmbeddings of that model)"
            )
        return retriever

    # --- what LangChain asks ---------------------------------------------------------------------------------
    @property
    def embeddings(self) -> Embeddings:
        """What makes the vectors the ``*_by_vector`` methods take: the Embeddings given, or the index's own
        encoder (in its space, before the index's transform)."""
        if self._external is not None:
            return self._external
        return WhitevecEmbeddings(self._encoder())

    @property
    def retriever(self) -> Retriever | None:
        """The whitevec index (None until the first add makes it)."""
        return self._retriever

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Add texts (an id the index holds is replaced: adding the same ids again changes nothing); their ids,
        made (uuid4) where none is given. Bad input is one line, and nothing is written."""
        _no_options(kwargs, "add_texts")
        items = list(texts)
        if metadatas is not None and len(metadatas) != len(items):
            raise BadInputError(f"{len(metadatas)} metadatas for {len(items)} texts")
        if ids is not None and len(ids) != len(items):
            raise BadInputError(f"{len(ids)} ids for {len(items)} texts")
        if not items:
            return []
        given: list[str | None] = list(ids) if ids is not None else [None] * len(items)
        chosen = [str(uuid.uuid4()) if doc_id is None else doc_id for doc_id in given]
        metas: list[dict[str, Any] | None] = list(metadatas) if metadatas else [None] * len(items)
        docs = as_documents(
            [Document(i, text, meta or None) for i, text, meta in zip(chosen, items, metas, strict=True)]
        )
        check_unique_ids(docs, where="the documents to add")
        vectors = None if self._external is None else _matrix(self._external.embed_documents(items), len(items))
        with self._lock:
            held = self._opened()
            retriever = held or self._create(vectors)
            try:
                retriever.write(docs, vectors=vectors, on_existing="replace", empty_documents="keep")
            except BaseException:
                if held is None:  # the index this add made goes too: a refused add leaves nothing
                    self._discard()
                raise
        return chosen

    def _create(self, vectors: np.ndarray | None) -> Retriever:
        """The index, made for the first add (its dimension the first vectors' or the encoder's)."""
        settings = dict(self._settings)
        if self._external is not None:
            assert vectors is not None
            settings.update(dim=int(vectors.shape[1]), encoder_name=self._encoder_name or _name_of(self._external))
        else:
            settings.update(encoder=self._own)
        self._retriever = Retriever.create(self.folder, **settings)
        return self._retriever

    def _discard(self) -> None:
        """Remove the index the first add made: the folder as it was (absent or empty, as checked when the store
        was made)."""
        assert self._retriever is not None
        self._retriever.close()
        self._retriever = None
        shutil.rmtree(self.folder, ignore_errors=True)
        if self._was_folder:
            self.folder.mkdir()

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete the documents with these ids (ids the index does not hold are passed over); True."""
        _no_options(kwargs, "delete")
        if ids is None:
            raise BadInputError("delete takes the ids to delete (whitevec deletes documents by id)")
        retriever = self._opened()
        if ids and retriever is not None:
            retriever.delete(list(ids))
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[LangChainDocument]:
        """The documents the index holds with these ids, in the order given; the others left out."""
        retriever = self._opened()
        if retriever is None or not ids:
            return []
        return [_document(doc.id, doc.text, doc.metadata) for doc in retriever.documents(list(ids))]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[LangChainDocument]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[LangChainDocument, float]]:
        """The ``k`` best documents with whitevec's scores (see the class docstring). Keyword arguments:
        ``filter`` (LangChain's dict form, or a whitevec expression string), ``mode``, ``fusion``,
        ``candidates``."""
        return self._search(query, None, k, kwargs)

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[LangChainDocument]:
        return [doc for doc, _ in self.similarity_search_with_score_by_vector(embedding, k, **kwargs)]

    def similarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[tuple[LangChainDocument, float]]:
        """:meth:`similarity_search_with_score` for a vector in the encoder's space (dense mode)."""
        return self._search(None, embedding, k, kwargs)

    def _search(
        self, query: str | None, vector: Sequence[float] | None, k: int, options: Mapping[str, Any]
    ) -> list[tuple[LangChainDocument, float]]:
        retriever, known = self._opened(), _search_options(options)
        if retriever is None:
            return []
        if query is None and not known.keys() & {"mode", "fusion", "candidates"}:
            known["mode"] = "dense"  # a vector alone: its dense ranking, whatever the index's default mode
        plan = retriever.search_plan(known.get("mode"), known.get("fusion"), known.get("candidates"))
        if self._external is not None and query is not None and vector is None and plan.mode != "lexical":
            vector = self._external.embed_query(query)
        vectors = None if vector is None else _matrix([vector], 1)
        (hits,) = retriever.search(
            None if query is None else [query], _within(k, retriever.count), query_vectors=vectors, **known
        )
        return [(_document(hit.id, hit.text, hit.metadata), hit.score) for hit in hits]

    def max_marginal_relevance_search(
        self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[LangChainDocument]:
        """The index's ``fetch_k`` best for ``query`` (any mode), ``k`` of them chosen by maximal marginal
        relevance over their vectors in the encoder's space (cosine; the candidates are embedded again)."""
        vector = self.embeddings.embed_query(query)  # given Embeddings embed it once, for both steps
        candidates = self._search(query, vector if self._external is not None else None, fetch_k, kwargs)
        return self._diverse(vector, candidates, k, lambda_mult)

    def max_marginal_relevance_search_by_vector(
        self, embedding: list[float], k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5, **kwargs: Any
    ) -> list[LangChainDocument]:
        candidates = self.similarity_search_with_score_by_vector(embedding, fetch_k, **kwargs)
        return self._diverse(embedding, candidates, k, lambda_mult)

    def _diverse(
        self,
        query: Sequence[float],
        candidates: list[tuple[LangChainDocument, float]],
        k: int,
        lambda_mult: float,
    ) -> list[LangChainDocument]:
        if not candidates:
            return []
        found = [doc for doc, _ in candidates]
        vectors = _matrix(self.embeddings.embed_documents([doc.page_content for doc in found]), len(found))
        chosen = maximal_marginal_relevance(np.asarray(query, dtype=np.float32), vectors.tolist(), lambda_mult, k)
        return [found[i] for i in chosen]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Dense scores into [0, 1], higher is closer: cosine ``(1 + s) / 2``; squared L2 distance
        ``1 / (1 + d)``; inner product ``1 / (1 + exp(-s))``."""
        metric = self._settings["metric"] if self._retriever is None else self._retriever.manifest["metric"]
        return RELEVANCE[metric]

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[LangChainDocument, float]]:
        """Relevance in [0, 1]: a dense search's scores mapped by the metric, a convex fusion's as they are; a
        lexical or rrf-fused search's scores have no such scale (refused in one line)."""
        if self._retriever is None:
            return self.similarity_search_with_score(query, k, **kwargs)  # none, or a bad argument named
        plan = self._retriever.search_plan(kwargs.get("mode"), kwargs.get("fusion"), kwargs.get("candidates"))
        if plan.mode == "lexical" or (plan.mode == "hybrid" and plan.fusion.method != "convex"):
            raise BadInputError(
                f"a {plan.mode} search's scores ({plan.fusion.spec if plan.mode == 'hybrid' else 'BM25'}) have no "
                "[0, 1] scale; ask for relevance scores of a dense or convex-fused hybrid search"
            )
        found = self.similarity_search_with_score(query, k, **kwargs)
        relevance = self._select_relevance_score_fn() if plan.mode == "dense" else float
        return [(doc, relevance(score)) for doc, score in found]

    # --- made from texts, and let go ----------------------------------------------------------------------------
    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> Self:
        """A store (``kwargs``: the constructor's) holding ``texts``."""
        store = cls(embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    def _opened(self) -> Retriever | None:
        """The index (None before the first add); a closed store refused in one line."""
        if self._closed:
            raise BadInputError(f"this store of {self.folder} is closed; make another to open a kept folder")
        return self._retriever

    def close(self) -> None:
        """Let go of the index; a temporary folder the store made is removed."""
        self._closed = True
        if self._retriever is not None:
            self._retriever.close()
        if self._owned is not None:
            self._cleanup()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _encoder(self) -> EncoderLike:
        if self._own is not None:
            return self._own
        assert self._retriever is not None  # an index opened with its own model
        return self._retriever.encoder


RELEVANCE: dict[str, Callable[[float], float]] = {
    "cosine": lambda s: (1.0 + s) / 2.0,
    "l2": lambda d: 1.0 / (1.0 + d),
    "ip": lambda s: 1.0 / (1.0 + math.exp(-s)) if s >= 0 else math.exp(s) / (1.0 + math.exp(s)),
}


def _encoders(embedding: Embeddings | ModelLike | None) -> tuple[EncoderLike | None, Embeddings | None]:
    """(whitevec's own encoder, or the Embeddings that make the vectors): one of them, or neither (reopen)."""
    if isinstance(embedding, WhitevecEmbeddings):
        return embedding.encoder, None
    if isinstance(embedding, Embeddings):
        return None, embedding
    if embedding is None:
        return None, None
    return WhitevecEmbeddings(embedding).encoder, None


def _name_of(embedding: Embeddings) -> str:
    """The name an external encoder is recorded under: the Embeddings' class, and its model where it says."""
    model = getattr(embedding, "model", None) or getattr(embedding, "model_name", None)
    kind = type(embedding).__name__
    return f"{kind}:{model}" if isinstance(model, str) and model else kind


def _matrix(rows: Any, n: int) -> np.ndarray:
    """Vectors an Embeddings gave as a float32 (n, d) matrix; ragged, NaN or inf rows refused in one line."""
    try:
        array = np.asarray(rows, dtype=np.float32)
    except (TypeError, ValueError):
        raise BadInputError("the embeddings are not rows of numbers of one length") from None
    if array.ndim != 2 or array.shape[0] != n:
        raise BadInputError(f"expected {n} embedding vector(s), got an array of shape {array.shape}")
    return check_vectors(array, name="the embeddings", dtype=np.float32)


def _within(k: int, count: int) -> int:
    """``k`` held to the documents there are (whitevec would log each such clamp); a bad ``k`` left to whitevec."""
    return min(k, count) if isinstance(k, int) and not isinstance(k, bool) and k > count > 0 else k


def _search_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The search keyword arguments whitevec takes (a LangChain dict filter turned into its language)."""
    _no_options(
        {k: v for k, v in options.items() if k not in SEARCH_OPTIONS}, f"a search (it takes {SEARCH_OPTIONS})"
    )
    known = {k: v for k, v in options.items() if v is not None}
    if isinstance(known.get("filter"), Mapping):
        known["filter"] = filter_expression(known["filter"])
    return {k: v for k, v in known.items() if v is not None}


def _no_options(options: Mapping[str, Any], where: str) -> None:
    if options:
        raise BadInputError(f"{where} takes no keyword argument {', '.join(map(repr, options))}")


def _document(doc_id: str, text: str, metadata: dict[str, Any] | None) -> LangChainDocument:
    return LangChainDocument(id=doc_id, page_content=text, metadata=dict(metadata or {}))
