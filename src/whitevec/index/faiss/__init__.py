"""The FAISS backend: the vector store (``store``, with what a segment asks of it), its index parameters
(``params``), the faiss library as it uses it (``library``: the module loaded on first use, its version, one
OpenMP thread), its files written through Python (``files``), filtered searches and their cost model
(``filtered``) and vectors as an encoding gives them back, for scoring an encoding without an index
(``encoded``)."""
