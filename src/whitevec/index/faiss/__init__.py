"""The FAISS backend: the vector store (``store``), its files written through Python (``files``), filtered
searches and their cost model (``filtered``), what a segment asks of it (``segments``) and vectors as an
encoding gives them back, for scoring an encoding without an index (``encoded``)."""
