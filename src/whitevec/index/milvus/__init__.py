"""The Milvus backend: the vector store (``store``), the collection's scalar fields as a document store
(``documents``), BM25 through Milvus's function (``bm25``), writes through insert, upsert and delete
(``writes``) and the in-process Milvus Lite servers (``lite_servers``)."""
