"""Texts to terms for the lexical index (:mod:`whitevec.index.lexical.bm25`): one :class:`Analyzer` for documents
and queries alike, recorded in the manifest by every setting, and refused at load when this whitevec's analyzer of
that name would give other terms."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from whitevec.encoders.protocol import KnowsTokenStrings
from whitevec.errors import BadInputError, CorruptFileError

if TYPE_CHECKING:
    from whitevec.encoders.protocol import EncoderLike

ANALYZERS = ("english", "cjk-bigram", "plain", "encoder")
DEFAULT_ANALYZER = "english"
# bm25s's words (scikit-learn's CountVectorizer's): two or more word characters.
WORD_PATTERN = r"(?u)\b\w\w+\b"

# Scripts written without spaces between words, bigrammed by "cjk-bigram" as Lucene's CJKBigramFilter does (Han,
# Hiragana, Katakana, Hangul): Hangul Jamo, the iteration and zero marks, kana, compatibility Jamo, CJK
# Extension A, Unified Ideographs, Hangul syllables, compatibility ideographs, half-width kana, Extensions B-F.
_CJK = (
    "\u1100-\u11ff\u3005\u3007\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
)
# A run of those scripts, or a word of two or more other word characters.
_CJK_RUNS = re.compile(f"([{_CJK}]+)|([^\\W{_CJK}]{{2,}})")


def check_analyzer_name(name: str) -> str:
    """``name`` as one of :data:`ANALYZERS` (lower-cased); a one-line BadInputError for another."""
    key = str(name).strip().lower()
    if key not in ANALYZERS:
        raise BadInputError(f"unknown analyzer {name!r}; valid: {', '.join(ANALYZERS)}")
    return key


@dataclass(frozen=True)
class Analyzer:
    """Texts to terms, the same for documents and queries; :func:`make_analyzer` makes one by name.

    ``english``: lower-cased words (:data:`WORD_PATTERN`), bm25s's English stop words dropped, then Snowball's
    English stemmer (PyStemmer): the terms ``bm25s.tokenize(texts, stopwords="en", stemmer=...)`` gives.
    ``plain``: the same words, nothing dropped or stemmed. ``cjk-bigram`` (Chinese, Japanese, Korean and other
    text without spaces, no dictionary): NFKC (full-width Latin to plain, as Lucene's CJKWidthFilter), lower
    case, overlapping bigrams of each run of CJK characters (a lone one as itself), other runs as words, as
    Lucene's CJKAnalyzer. ``encoder``: the tokens of the encoder's own tokenizer (``model`` records which).
    """

    name: str
    lowercase: bool = True
    normalization: Literal["NFC", "NFD", "NFKC", "NFKD"] | None = None
    token_pattern: str | None = WORD_PATTERN
    stop_words: str | None = None
    stemmer: str | None = None
    model: str | None = None
    # The encoder's tokens, for "encoder"; not part of the record (bound again at load, from the index's model).
    tokens: Callable[[Sequence[str]], list[list[str]]] | None = field(default=None, compare=False, repr=False)

    @property
    def needs_encoder(self) -> bool:
        return self.name == "encoder"

    def analyze(self, texts: Sequence[str]) -> list[list[str]]:
        """The terms of each text, in order (a term twice, twice)."""
        if isinstance(texts, str):
            raise BadInputError("analyze takes a sequence of texts, not one string")
        items = list(texts)
        if self.name == "encoder":
            if self.tokens is None:
                raise BadInputError(
                    "the encoder analyzer needs the index's encoder to analyse texts; load the index through "
                    "Retriever.load, or bind one with LexicalIndex.with_encoder"
                )
            return [list(terms) for terms in self.tokens(items)]
        if self.normalization is not None:
            items = [unicodedata.normalize(self.normalization, text) for text in items]
        if self.lowercase:
            items = [text.lower() for text in items]
        words = [_cjk_terms(text) for text in items] if self.name == "cjk-bigram" else _words(items, self)
        return _stemmed(words, self.stemmer) if self.stemmer is not None else words

    def record(self) -> dict[str, Any]:
        """What the manifest keeps of the analyzer: every setting, by name."""
        return {
            "name": self.name,
            "lowercase": self.lowercase,
            "normalization": self.normalization,
            "token_pattern": self.token_pattern,
            "stop_words": self.stop_words,
            "stemmer": self.stemmer,
            "model": self.model,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Analyzer:
        """The analyzer a manifest recorded, refused when this whitevec's analyzer of that name differs (its
        terms would not be the index's); an ``encoder`` one still needs :meth:`with_encoder`.

        Raises:
            CorruptFileError: not an analyzer record, an unknown name, or settings this whitevec does not have.
        """
        name = record.get("name") if isinstance(record, dict) else None
        if name not in ANALYZERS:
            raise CorruptFileError(f"the lexical index records an unknown analyzer {name!r}; rebuild the index")
        made = _definition(str(name), model=record.get("model"))
        if made.record() != record:
            raise CorruptFileError(
                f"the lexical index's analyzer {record} is not this whitevec's {name!r} analyzer "
                f"{made.record()}; rebuild the index"
            )
        return made

    def with_encoder(self, encoder: object) -> Analyzer:
        """This analyzer with ``encoder``'s tokens bound (for ``encoder``; any other is returned as it is)."""
        if not self.needs_encoder:
            return self
        if not isinstance(encoder, KnowsTokenStrings):
            raise BadInputError(
                f"the encoder analyzer needs an encoder that gives its tokens (token_strings); "
                f"{type(encoder).__name__} does not"
            )
        return replace(self, tokens=encoder.token_strings)


def _definition(name: str, model: str | None = None) -> Analyzer:
    """The settings of each analyzer (tokens unbound)."""
    if name == "english":
        return Analyzer("english", stop_words="english", stemmer="english")
    if name == "plain":
        return Analyzer("plain")
    if name == "cjk-bigram":
        return Analyzer("cjk-bigram", normalization="NFKC", token_pattern=None)
    return Analyzer("encoder", lowercase=False, token_pattern=None, model=model)


def make_analyzer(name: str, encoder: EncoderLike | None = None) -> Analyzer:
    """The analyzer called ``name`` (:data:`ANALYZERS`); ``encoder`` is needed (and used) for ``encoder`` only.

    Raises:
        BadInputError: an unknown name, or ``encoder`` without an encoder that gives its tokens.
    """
    key = check_analyzer_name(name)
    if key != "encoder":
        return _definition(key)
    if encoder is None:
        raise BadInputError("the encoder analyzer needs the encoder whose tokenizer it uses")
    return _definition(key, model=str(encoder.describe()["model"])).with_encoder(encoder)


def _words(texts: list[str], analyzer: Analyzer) -> list[list[str]]:
    """The words of each (already lower-cased) text by ``analyzer.token_pattern``, stop words dropped."""
    find = re.compile(analyzer.token_pattern or WORD_PATTERN).findall
    if analyzer.stop_words is None:
        return [find(text) for text in texts]
    stop = stop_words(analyzer.stop_words)
    return [[word for word in find(text) if word not in stop] for text in texts]


def stop_words(language: str) -> frozenset[str]:
    """The stop words an analyzer drops for ``language`` (bm25s's English list; Milvus's stop filter takes them
    too)."""
    from bm25s.stopwords import STOPWORDS_EN

    if language != "english":
        raise CorruptFileError(f"unknown stop words {language!r}; rebuild the index")
    return frozenset(STOPWORDS_EN)


def _stemmed(words: list[list[str]], language: str) -> list[list[str]]:
    """``words`` stemmed by Snowball's ``language`` stemmer, each distinct word once (as bm25s does). A new
    stemmer per call: PyStemmer's are not to be shared between threads."""
    import Stemmer

    distinct = sorted({word for text in words for word in text})
    stem_of = dict(zip(distinct, Stemmer.Stemmer(language).stemWords(distinct), strict=True))
    return [[stem_of[word] for word in text] for text in words]


def _cjk_terms(text: str) -> list[str]:
    """Overlapping bigrams of each CJK run (a run of one character as itself), other runs as words."""
    terms: list[str] = []
    for run, word in _CJK_RUNS.findall(text):
        if word:
            terms.append(word)
        elif len(run) == 1:
            terms.append(run)
        else:
            terms.extend(run[i : i + 2] for i in range(len(run) - 1))
    return terms
