"""The FAISS backend: the vector store (``store``), the faiss library as it uses it (``library``: the module
loaded on first use, its version, one OpenMP thread), its files written through Python (``files``), filtered
searches and their cost model (``filtered``), what a segment asks of it (``segments``, behind the store's segment
hooks) and vectors as an encoding gives them back, for scoring an encoding without an index (``encoded``)."""
