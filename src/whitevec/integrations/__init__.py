"""whitevec where its users build: a LangChain ``VectorStore`` and ``Embeddings`` (``langchain``), a LlamaIndex
vector store and embedding (``llama_index``), and the Model Context Protocol server behind ``whitevec mcp``
(``mcp``).

Each module imports its framework, which comes with an extra (``pip install "whitevec[langchain]"``,
``[llamaindex]``, ``[mcp]``); nothing here is imported by ``import whitevec`` or by the other commands.
"""
