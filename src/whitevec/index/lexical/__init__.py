"""The BM25 index beside the vectors (``bm25``: ``LexicalIndex`` on bm25s), its analyzers (``analyzers``: texts
to terms) and BM25 over several segments (``counts``)."""

from whitevec.index.lexical.bm25 import DEFAULT_LEXICAL, LexicalIndex

__all__ = ["DEFAULT_LEXICAL", "LexicalIndex"]
