"""The protocols every backend meets, and their registries: vector stores (``vector``), document stores
(``documents``), and the SQLite document store every local build writes (``sqlite_docs``)."""
