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
# bm25s's words (scikit-learn's CountVectorizer's): two or more word characters. The words of "plain", and of
# "english" before 2026-12-07 (docs/notes/lexical-analyzer.md).
WORD_PATTERN = r"(?u)\b\w\w+\b"
# tantivy's SimpleTokenizer (LanceDB's and Milvus's "simple"/"standard" base): each run of letters and digits,
# one character and numbers included ("3", "d", "b52"), underscores splitting. The words of "english".
ALPHANUMERIC_PATTERN = r"[^\W_]+"
# Terms this long or longer are dropped (tantivy's RemoveLongFilter at LanceDB's default, 40): URLs, hashes,
# base64 and other run-ons no query types.
MAX_TOKEN_LENGTH = 40
# Latin letters Unicode does not decompose, folded as Lucene's ASCIIFoldingFilter folds them.
_FOLD_EXTRA = {"ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ø": "o", "Ø": "O", "ł": "l", "Ł": "L"}
_FOLD_EXTRA |= {"đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "þ": "th", "Þ": "TH", "ı": "i"}
# NLTK's English stop words (Snowball's English list and the pieces contractions split into: "don", "t", "ll"),
# the apostrophe forms left out (no word keeps an apostrophe): the list LanceDB 0.40's English full-text index
# drops. The stop words of "english" (``stop_words="nltk"``); bm25s's is Lucene's 33 words.
# fmt: off
NLTK_ENGLISH_STOP_WORDS = frozenset({
    "a", "about", "above", "after", "again", "against", "ain", "all", "am", "an", "and", "any", "are", "aren",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can",
    "couldn", "d", "did", "didn", "do", "does", "doesn", "doing", "don", "down", "during", "each", "few",
    "for", "from", "further", "had", "hadn", "has", "hasn", "have", "haven", "having", "he", "her", "here",
    "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its",
    "itself", "just", "ll", "m", "ma", "me", "mightn", "more", "most", "mustn", "my", "myself", "needn", "no",
    "nor", "not", "now", "o", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves",
    "out", "over", "own", "re", "s", "same", "shan", "she", "should", "shouldn", "so", "some", "such", "t",
    "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this",
    "those", "through", "to", "too", "under", "until", "up", "ve", "very", "was", "wasn", "we", "were",
    "weren", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "won", "wouldn",
    "y", "you", "your", "yours", "yourself", "yourselves",
})
# fmt: on

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

    ``english`` (LanceDB's English full-text analysis, docs/notes/lexical-analyzer.md): lower case, accents folded
    to ASCII (``ascii_folding``), runs of letters and digits (:data:`ALPHANUMERIC_PATTERN`: one character and
    numbers kept), terms of :data:`MAX_TOKEN_LENGTH` characters or more dropped, Snowball's English stemmer
    (PyStemmer), then the stems that are NLTK's English stop words dropped (``stop_words="nltk"``,
    ``stop_stems``: "its" stems to "it", dropped). An index built before 2026-12-07 keeps the ``english`` it was
    built with (:data:`FORMER_DEFINITIONS`: bm25s's words of two or more characters, its stop words dropped
    before stemming). ``plain``: lower-cased words of two or more word characters
    (:data:`WORD_PATTERN`), nothing dropped or stemmed. ``cjk-bigram`` (Chinese, Japanese, Korean and other
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
    max_token_length: int | None = None
    ascii_folding: bool = False
    # Stop words matched against the stems (tantivy's filter order, as LanceDB chains it), not the words.
    stop_stems: bool = False
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
        if self.ascii_folding:
            items = [text if text.isascii() else text.translate(_ASCII_FOLDING) for text in items]
        if self.name == "cjk-bigram":
            return [_cjk_terms(text) for text in items]
        return _terms(items, self)

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
            "max_token_length": self.max_token_length,
            "ascii_folding": self.ascii_folding,
            "stop_stems": self.stop_stems,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Analyzer:
        """The analyzer a manifest recorded: this whitevec's analyzer of that name, or a former definition of it
        (:data:`FORMER_DEFINITIONS`: an index keeps the terms it was built with); refused when it is neither (its
        terms would not be the index's). An ``encoder`` one still needs :meth:`with_encoder`.

        Raises:
            CorruptFileError: not an analyzer record, an unknown name, or settings this whitevec does not have.
        """
        name = record.get("name") if isinstance(record, dict) else None
        if name not in ANALYZERS:
            raise CorruptFileError(f"the lexical index records an unknown analyzer {name!r}; rebuild the index")
        made = _definition(str(name), model=record.get("model"))
        # A record written before a setting existed lacks it: read as the setting's off value.
        full = {**_SETTINGS_BEFORE_RECORDED, **record}
        for known in (made, *(replace(former, model=made.model) for former in FORMER_DEFINITIONS.get(name, ()))):
            if known.record() == full:
                return known
        raise CorruptFileError(
            f"the lexical index's analyzer {record} is not this whitevec's {name!r} analyzer "
            f"{made.record()}; rebuild the index"
        )

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
        return Analyzer(
            "english",
            token_pattern=ALPHANUMERIC_PATTERN,
            stop_words="nltk",
            stemmer="english",
            max_token_length=MAX_TOKEN_LENGTH,
            ascii_folding=True,
            stop_stems=True,
        )
    if name == "plain":
        return Analyzer("plain")
    if name == "cjk-bigram":
        return Analyzer("cjk-bigram", normalization="NFKC", token_pattern=None)
    return Analyzer("encoder", lowercase=False, token_pattern=None, model=model)


# Earlier definitions of an analyzer that saved indexes may record, newest first: still loaded and applied as
# recorded. "english" until 2026-12-07: bm25s.tokenize's terms (words of two or more characters, its stop list).
FORMER_DEFINITIONS: dict[str, tuple[Analyzer, ...]] = {
    "english": (Analyzer("english", stop_words="english", stemmer="english"),),
}
# The settings added to the record since the first, at the value a record without them means.
_SETTINGS_BEFORE_RECORDED: dict[str, Any] = {"max_token_length": None, "ascii_folding": False, "stop_stems": False}


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


def _terms(texts: list[str], analyzer: Analyzer) -> list[list[str]]:
    """The terms of each (already lower-cased) text: its words by ``analyzer.token_pattern``, the too long and the
    stop words dropped, stemmed. Each distinct word is judged and stemmed once (as bm25s stems), then each text is
    one pass of lookups. A new stemmer per call: PyStemmer's are not to be shared between threads."""
    find = re.compile(analyzer.token_pattern or WORD_PATTERN).findall
    found = [find(text) for text in texts]
    limit = analyzer.max_token_length
    stop = stop_words(analyzer.stop_words) if analyzer.stop_words is not None else frozenset()
    if not stop and limit is None and analyzer.stemmer is None:
        return found
    kept = sorted(
        word
        for word in {word for words in found for word in words}
        if (limit is None or len(word) < limit) and (analyzer.stop_stems or word not in stop)
    )
    if analyzer.stemmer is not None:
        import Stemmer

        term_of = dict(zip(kept, Stemmer.Stemmer(analyzer.stemmer).stemWords(kept), strict=True))
    else:
        term_of = {word: word for word in kept}
    if analyzer.stop_stems:  # stop words matched against the stems: "its" stems to "it", dropped
        term_of = {word: term for word, term in term_of.items() if term not in stop}
    term = term_of.get
    return [[t for word in words if (t := term(word)) is not None] for words in found]


def stop_words(name: str) -> frozenset[str]:
    """The stop words an analyzer drops: ``"nltk"``, NLTK's English list (:data:`NLTK_ENGLISH_STOP_WORDS`);
    ``"english"``, bm25s's English list (Lucene's 33 words: the former ``english`` analyzer's). Milvus's stop
    filter takes them too."""
    if name == "nltk":
        return NLTK_ENGLISH_STOP_WORDS
    if name != "english":
        raise CorruptFileError(f"unknown stop words {name!r}; rebuild the index")
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


class _AsciiFolding(dict[int, str]):
    """``str.translate``'s table folding Latin letters to ASCII, filled as characters are met: a character's
    compatibility decomposition without its combining marks where that is ASCII ("é" to "e", "ﬁ" to "fi"), the
    letters of ``_FOLD_EXTRA``, any other character (other scripts) as it is."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        bare = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        folded = _FOLD_EXTRA.get(char, bare if bare.isascii() and bare else char)
        self[code] = folded
        return folded


_ASCII_FOLDING = _AsciiFolding()


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
