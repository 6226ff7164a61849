"""What the index asks of an encoder, as a protocol: importable without torch, so code that only passes an
encoder along (the index, tests' stand-ins) can name the type at run time for free."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from whitevec.errors import BadInputError

if TYPE_CHECKING:
    import numpy as np

# The arithmetic an Encoder computes in (its ``backend=``; CLI ``--compute``): float32, bfloat16 or int8.
COMPUTE_BACKENDS = ("torch", "bf16", "int8")
# What a build or an add does with documents that hold no token the encoder knows (see known_token_mask).
EMPTY_DOCUMENTS = ("skip", "keep", "error")


@runtime_checkable
class EncoderLike(Protocol):
    """Texts to vectors, and a record of how. :class:`whitevec.encoders.transformer.Encoder` is one; so is any
    object with
    these two methods (the tests' hash encoder, a remote model's client).

    An encoder may also say which texts carry meaning (:class:`KnowsTokens`, ``known_token_mask``); one that
    does not is taken to know every non-blank text (see :func:`known_token_mask`).

    ``describe()`` holds ``model`` (name), ``pooling`` (name), ``max_length`` and ``dim`` (vector size); it may
    add ``model_fingerprint`` (same model, same string), ``layers`` (hidden_states indices) and ``backend`` (the
    arithmetic, ``"torch"`` when absent). An index manifest records them, and loading compares them.
    """

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> np.ndarray:
        """float32 vectors, one row per text, in input order."""
        ...

    def describe(self) -> dict[str, Any]:
        """How the vectors are made (see the class docstring for the keys)."""
        ...


@runtime_checkable
class KnowsTokens(Protocol):
    """An encoder that can say, without encoding, which texts hold a token its vocabulary knows.

    Both whitevec encoders are; kept apart from :class:`EncoderLike` so that an encoder without the method (a
    stand-in, a remote client) still is one.
    """

    def known_token_mask(self, texts: Sequence[str]) -> np.ndarray:
        """A bool per text: True where the text has at least one token the vocabulary knows, other than the
        special tokens ([CLS], [SEP], padding) and the unknown token."""
        ...


@runtime_checkable
class KnowsTokenStrings(Protocol):
    """An encoder that can give each text's tokens as strings, as its vocabulary spells them: what a lexical
    index with the ``encoder`` analyzer indexes (:mod:`whitevec.index.lexical.bm25`). Both whitevec encoders
    are."""

    def token_strings(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's tokens, the whole text (no truncation: a lexical index reads all of it), without the
        special tokens and the unknown token."""
        ...


def known_token_mask(encoder: object, texts: Sequence[str]) -> np.ndarray:
    """The one rule for texts without meaning: a bool per text, True where ``encoder`` knows one of its tokens.

    A text with none (empty, blank, only emoji or characters the vocabulary lacks) encodes to the special tokens
    alone, or to zeros, and a transform maps all of them to one direction: it finds nothing and is found by
    nothing. An encoder without ``known_token_mask`` (:class:`KnowsTokens`) is asked nothing: a non-blank text is
    taken to carry meaning.
    """
    import numpy as np

    if isinstance(encoder, KnowsTokens):
        return np.asarray(encoder.known_token_mask(texts), dtype=bool).reshape(len(texts))
    return np.fromiter((bool(text.strip()) for text in texts), dtype=bool, count=len(texts))


def check_empty_documents(choice: str) -> str:
    """``choice`` of :data:`EMPTY_DOCUMENTS`, lower-cased; a one-line BadInputError for another (checked
    before any model loads: this module imports nothing heavy)."""
    key = str(choice).strip().lower()
    if key not in EMPTY_DOCUMENTS:
        raise BadInputError(f"unknown empty_documents choice {choice!r}; valid: {', '.join(EMPTY_DOCUMENTS)}")
    return key


def zero_unknown_rows(vectors: np.ndarray, known: np.ndarray) -> np.ndarray:
    """``vectors`` with the rows of texts without a known token set to 0 (in place; returned), after any
    transform: a zero row has no direction, so its cosine with anything is 0 (a transform would otherwise give
    every such text the same vector, its image of 0)."""
    vectors[~known] = 0
    return vectors


# What an index built from the caller's vectors records as its encoder (the manifest's ``encoder`` field, its
# ``pooling`` and ``encoder_backend``): no model, so nothing to load.
EXTERNAL = "external"


class ExternalEncoder:
    """The encoder of an index whose vectors the caller gives (an embedding API's, another library's): its
    dimension and the name the caller gave it, and no model. It encodes nothing: searches take ``query_vectors``
    and writes ``vectors`` (:meth:`whitevec.index.Retriever.search`, :meth:`~whitevec.index.Retriever.add`)."""

    def __init__(self, dim: int, name: str | None = None) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise BadInputError(f"the vectors' dimension must be a positive integer, got {dim!r}")
        if name is not None and (not isinstance(name, str) or not name.strip() or "\n" in name):
            raise BadInputError(f"the encoder name must be a non-blank line of text, got {name!r}")
        self.dim = int(dim)
        self.name = EXTERNAL if name is None else name.strip()

    def encode(
        self, texts: Sequence[str], batch_size: int | None = None, show_progress: bool | None = None
    ) -> np.ndarray:
        raise BadInputError(
            f"this index holds vectors given by the caller ({self.name}, {self.dim}-d) and encodes no text: give "
            "a search the queries' vectors (query_vectors), a write the documents' (vectors)"
        )

    def describe(self) -> dict[str, Any]:
        return {"model": self.name, "pooling": EXTERNAL, "max_length": None, "dim": self.dim, "backend": EXTERNAL}

    def __repr__(self) -> str:
        return f"ExternalEncoder(dim={self.dim}, name={self.name!r})"
