"""The Milvus backend: the vector store (``store``) and which Milvus index type keeps each kind and encoding
(``index_types``), the collection's scalar fields as a document store (``documents``), BM25 through Milvus's
function (``bm25``), metadata filters as Milvus's filter argument and expression (``filters``), writes through
insert, upsert and delete (``writes``) and the in-process Milvus Lite servers (``lite_servers``)."""
