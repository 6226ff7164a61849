"""LangChain's own standard suites (langchain-tests) against whitevec's LangChain integration (issue 51, item 2):
``VectorStoreIntegrationTests`` (sync and async, get_by_ids) against :class:`WhitevecVectorStore` with the suite's
embeddings (vectors given: an index with an external encoder), the same with a BM25 part (every search hybrid),
and with whitevec's own encoder (a tiny static table whose words are the suite's texts); the embeddings suites
against :class:`WhitevecEmbeddings` (the saved tiny static table). Not one is overridden (the suites check that
themselves: ``test_no_overrides_DO_NOT_OVERRIDE``) and none is skipped; the embeddings' ``test_init_from_env``
checks nothing here (it checks the environment variables a class names, and WhitevecEmbeddings reads none)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_tests")

from langchain_tests.integration_tests import EmbeddingsIntegrationTests, VectorStoreIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

from tests.static_helpers import tiny_table
from whitevec.encoders.static_format import write_static_folder
from whitevec.integrations.langchain import WhitevecEmbeddings, WhitevecVectorStore

# The suite's async tests are plain ``async def``, which pytest-asyncio's strict mode runs only where marked; the
# mark reaches the inherited tests only from here, the sync ones too, which pytest-asyncio then warns of.
pytestmark = [
    pytest.mark.asyncio,
    pytest.mark.filterwarnings("ignore:The test <Function .* is marked with '@pytest.mark.asyncio'"),
]

SAVED_STATIC = Path(__file__).parent / "fixtures" / "saved" / "static"
# Every word the suite's documents and queries hold ("foo", "bar", "baz", "new foo"), so none is a text without a
# known token (which whitevec's own encoder neither finds nor searches).
SUITE_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "foo", "bar", "baz", "new"]


class TestStoreExternalVectors(VectorStoreIntegrationTests):
    """The suite's DeterministicFakeEmbedding (6-d): every vector given to the index."""

    @pytest.fixture
    def vectorstore(self) -> Iterator[WhitevecVectorStore]:
        with WhitevecVectorStore(self.get_embeddings()) as store:
            yield store


class TestStoreHybrid(VectorStoreIntegrationTests):
    """The suite's embeddings beside a BM25 part: every search of the suite hybrid (the index's default mode)."""

    @pytest.fixture
    def vectorstore(self) -> Iterator[WhitevecVectorStore]:
        with WhitevecVectorStore(self.get_embeddings(), lexical="bm25") as store:
            yield store


@pytest.fixture(scope="module")
def suite_static(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_static_folder(tmp_path_factory.mktemp("suite-static") / "static", tiny_table(vocab=SUITE_VOCAB))


class TestStoreOwnEncoder(VectorStoreIntegrationTests):
    """whitevec's own encoder: the index encodes the texts itself (a static table of the suite's words)."""

    @pytest.fixture
    def vectorstore(self, suite_static: Path) -> Iterator[WhitevecVectorStore]:
        with WhitevecVectorStore(WhitevecEmbeddings(suite_static)) as store:
            yield store


class StaticTableEmbeddings:
    """The embeddings suites' parameters: WhitevecEmbeddings of the saved tiny static table."""

    @property
    def embeddings_class(self) -> type[WhitevecEmbeddings]:
        return WhitevecEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"model": SAVED_STATIC}


class TestEmbeddingsUnit(StaticTableEmbeddings, EmbeddingsUnitTests):
    pass


class TestEmbeddingsIntegration(StaticTableEmbeddings, EmbeddingsIntegrationTests):
    pass
