"""whitevec in LangChain (``pip install "whitevec[langchain]"``): :class:`WhitevecVectorStore`, a LangChain
``VectorStore`` over a whitevec index, and :class:`WhitevecEmbeddings`, a whitevec encoder (and a fitted transform)
as a LangChain ``Embeddings``.

The store keeps its index in a folder: one given (reopened when it holds an index, made on the first add when it
does not), or a temporary one it owns and removes on :meth:`WhitevecVectorStore.close`. It encodes in one of two
ways, chosen by ``embedding``:

- whitevec's own encoder (a model name or folder, an encoder, or a :class:`WhitevecEmbeddings`): the index encodes
  the texts and records the model, and applies its transform (``transform="whitening-256"``, fitted on the first
  add that brings enough documents);
- any other LangChain ``Embeddings``: the store embeds the texts and gives the index the vectors (an index with an
  external encoder: its dimension and a name, no model).

Vectors given to the ``*_by_vector`` methods are in the encoder's space (what
:attr:`WhitevecVectorStore.embeddings` gives), before the index's transform, which the index applies. Metadata
filters take LangChain's dict form, turned into whitevec's filter language by :func:`filter_expression`; search
keyword arguments ``mode``, ``fusion`` and ``candidates`` ask for a hybrid or lexical search of an index with a
lexical part (``lexical="bm25"``; such an index searches in hybrid mode by default, as it does everywhere).

Importing this module imports LangChain; ``import whitevec`` does not import it.
"""

from whitevec.integrations.langchain.embeddings import WhitevecEmbeddings
from whitevec.integrations.langchain.filters import filter_expression
from whitevec.integrations.langchain.store import WhitevecVectorStore

__all__ = ["WhitevecEmbeddings", "WhitevecVectorStore", "filter_expression"]
