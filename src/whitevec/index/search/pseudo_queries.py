"""Label-free queries made from a corpus, and the fusion chosen on them (issue 53).

Inverse cloze (Lee et al. 2019): a sentence cut out of a document is a query whose one relevant document is the
rest of that document. The cut sentence leaves the document (the rest is searched in its place), or BM25 would
find its own words and be favoured. :func:`make_pseudo_queries` makes them, seeded, and says what it made;
:func:`choose_fusion` scores each fusion on them (nDCG@10 with the one relevant document) and moves off the
default only when the pseudo-queries say so by a margin (benchmarks/investigations/pseudo_queries.py: the
plain best weight on pseudo-queries cost MiniLM on Cranfield 1.2 points against the default).

Nothing here imports more than numpy and the fusion: an index build chooses its fusion with it (floor 4).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from whitevec.errors import BadInputError
from whitevec.index.search.fusion import CANDIDATE_FACTOR, DEFAULT_FUSION, Fusion, fuse

PSEUDO_FORMS = ("ict", "first")  # a random sentence of the document, or its first (a title, where it has one)
MIN_WORDS = 5  # a shorter sentence is not a query (a heading, a formula's leftovers)
MIN_SENTENCES = 3  # a document keeps at least two sentences of its own after the cut
DEFAULT_PSEUDO_QUERIES = 200
# A build cuts at most a tenth of its documents (at least 50 pseudo-queries, at most 200): encoding the rests of
# the cut documents is most of the choice's cost, so it stays near a tenth of encoding the corpus. 100 of them
# chose as well as 200 on the study's collections (benchmarks/investigations/pseudo_queries.py).
BUILD_SHARE, BUILD_FEWEST = 10, 50
MAX_PSEUDO_QUERIES = 100_000
DEPTH = 10  # nDCG@10, the pages' measure
# The convex weights a choice scores (dense weight alpha; 0 is BM25's order, 1 the dense order).
CHOICE_ALPHAS = tuple(a / 10 for a in range(11))
# Move off the default only when the best weight's mean nDCG@10 on the pseudo-queries beats the default's by
# this much and the per-query differences say so (a paired bootstrap): MiniLM's pseudo-queries favour the
# lexical side by a point or two where real queries do not.
CHOICE_MARGIN = 0.02
BOOTSTRAP_DRAWS = 1000
BOOTSTRAP_LEVEL = 0.95

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_WORD = re.compile(r"\w+")

Ranking = tuple[np.ndarray, np.ndarray]  # (rows, scores), (n, depth), best first, -1 where fewer


@dataclass(frozen=True)
class PseudoQueries:
    """``queries[i]`` was cut out of document ``relevant[i]``; ``corpus`` is the corpus with every cut sentence
    removed (search it, not the original, to judge); the counts say what was made from what."""

    queries: list[str]
    relevant: np.ndarray
    corpus: list[str]
    form: str
    seed: int
    asked: int
    documents: int
    too_short: int

    @property
    def cut(self) -> np.ndarray:
        """The rows whose text changed (each pseudo-query's document, once)."""
        return np.unique(self.relevant)

    def report(self) -> dict[str, int | str]:
        """What was made: the form, the seed, how many asked and made, from how many documents, and how many
        documents were too short to cut (fewer than MIN_SENTENCES sentences of MIN_WORDS words)."""
        return {
            "form": self.form,
            "seed": self.seed,
            "asked": self.asked,
            "made": len(self.queries),
            "documents": self.documents,
            "too_short": self.too_short,
        }


def check_pseudo_count(n: object) -> int:
    """``n`` pseudo-queries, an integer from 1 to MAX_PSEUDO_QUERIES; a one-line BadInputError otherwise."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 1 <= n <= MAX_PSEUDO_QUERIES:
        raise BadInputError(
            f"the number of pseudo-queries must be an integer from 1 to {MAX_PSEUDO_QUERIES}, got {n!r}"
        )
    return int(n)


def build_pseudo_count(documents: int) -> int:
    """How many pseudo-queries a build of ``documents`` documents cuts: a tenth of them, from 50 to 200."""
    return min(DEFAULT_PSEUDO_QUERIES, max(BUILD_FEWEST, documents // BUILD_SHARE))


def sentences(text: str) -> list[str]:
    """``text`` cut at sentence ends (., !, ?, ; then a space) and line breaks, blank pieces dropped."""
    return [piece.strip() for piece in _SENTENCE_END.split(text) if piece.strip()]


def make_pseudo_queries(
    texts: Sequence[str],
    n: int = DEFAULT_PSEUDO_QUERIES,
    *,
    seed: int = 0,
    form: str = "ict",
    min_words: int = MIN_WORDS,
    min_sentences: int = MIN_SENTENCES,
) -> PseudoQueries:
    """Up to ``n`` pseudo-queries, one per document, from documents drawn at random (``seed``) among those with
    at least ``min_sentences`` sentences of ``min_words`` words; the others are counted in ``too_short``.

    ``form`` ``ict``: a random sentence of ``min_words`` words or more; ``first``: the first sentence (it must
    have ``min_words`` words). The sentence is removed from its document in ``corpus``.
    """
    count = check_pseudo_count(n)
    if form not in PSEUDO_FORMS:
        raise BadInputError(f"unknown pseudo-query form {form!r}; valid: {', '.join(PSEUDO_FORMS)}")
    split = [sentences(text) for text in texts]
    usable = [
        i
        for i, parts in enumerate(split)
        if sum(len(_WORD.findall(p)) >= min_words for p in parts) >= min_sentences
        and (form != "first" or len(_WORD.findall(parts[0])) >= min_words)
    ]
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.permutation(np.asarray(usable, dtype=np.int64))[:count])
    corpus, queries = list(texts), []
    for row in chosen.tolist():
        parts = split[row]
        if form == "first":
            at = 0
        else:
            long_enough = [j for j, p in enumerate(parts) if len(_WORD.findall(p)) >= min_words]
            at = int(long_enough[rng.integers(len(long_enough))])
        queries.append(parts[at])
        corpus[row] = " ".join(parts[:at] + parts[at + 1 :])
    return PseudoQueries(queries, chosen, corpus, form, seed, count, len(texts), len(texts) - len(usable))


@dataclass(frozen=True)
class FusionChoice:
    """The fusion chosen on pseudo-queries, how (``rule``), and each scored fusion's mean nDCG@10 on them."""

    fusion: Fusion
    rule: str
    scores: dict[str, float] = field(default_factory=dict)
    made: dict[str, int | str] = field(default_factory=dict)
    seconds: float = 0.0  # what the choice cost, pseudo-queries made, encoded and searched

    def record(self) -> dict[str, object]:
        """The manifest's ``fusion_choice`` record (and a tuned configuration's): the fusion, the rule that
        chose it, each scored fusion's mean nDCG@10 on the pseudo-queries, what was made, and its cost."""
        return {
            "fusion": self.fusion.spec,
            "rule": self.rule,
            "scores": {name: round(score, 6) for name, score in self.scores.items()},
            "pseudo_queries": dict(self.made),
            "seconds": round(self.seconds, 3),
        }


def single_ndcg(found: Sequence[Sequence[int]], relevant: np.ndarray, k: int = DEPTH) -> np.ndarray:
    """Each query's nDCG@k with one relevant row: 1 / log2(rank + 1) where it is among the top k, else 0."""
    out = np.zeros(len(relevant))
    for i, (rows, want) in enumerate(zip(found, relevant.tolist(), strict=True)):
        top = list(rows[:k])
        if want in top:
            out[i] = 1.0 / np.log2(top.index(want) + 2)
    return out


def fusion_scores(
    dense: Ranking, lexical: Ranking, relevant: np.ndarray, fusions: Sequence[Fusion], k: int = DEPTH
) -> dict[str, np.ndarray]:
    """Each fusion's per-query nDCG@k on the pseudo-queries, fusing each ranker's top CANDIDATE_FACTOR x k as
    a search does (the rankings must be that deep or the corpus's size)."""
    depth = CANDIDATE_FACTOR * k
    d_rows, d_scores = dense[0][:, :depth], dense[1][:, :depth]
    l_rows, l_scores = lexical[0][:, :depth], lexical[1][:, :depth]
    out = {}
    for fusion in fusions:
        fused = fuse(d_rows, d_scores, l_rows, l_scores, fusion, k)
        out[fusion.spec] = single_ndcg([[hit.row for hit in hits] for hits in fused], relevant, k)
    return out


def choose_fusion(
    dense: Ranking,
    lexical: Ranking,
    relevant: np.ndarray,
    *,
    default: Fusion = DEFAULT_FUSION,
    margin: float = CHOICE_MARGIN,
    seed: int = 0,
) -> FusionChoice:
    """The convex weight (of :data:`CHOICE_ALPHAS`) best on the pseudo-queries, kept only if it beats
    ``default`` by ``margin`` in mean nDCG@10 and the lower end of a paired bootstrap interval of the gain is
    above 0; otherwise ``default``. ``dense`` and ``lexical`` rank the pseudo-queries against the cut corpus.

    Raises:
        BadInputError: no pseudo-queries (nothing to judge on).
    """
    if len(relevant) == 0:
        raise BadInputError("no pseudo-queries to choose a fusion on: no document has enough sentences to cut")
    fusions = [default, *(Fusion("convex", alpha=a) for a in CHOICE_ALPHAS if a != default.alpha)]
    per_query = fusion_scores(dense, lexical, relevant, fusions)
    best, rule = pick_fusion(per_query, default.spec, margin=margin, seed=seed)
    means = {name: float(values.mean()) for name, values in per_query.items()}
    return FusionChoice(fusions[[f.spec for f in fusions].index(best)], rule, means)


def pick_fusion(
    per_query: dict[str, np.ndarray],
    default: str,
    *,
    margin: float = CHOICE_MARGIN,
    seed: int = 0,
    paired: bool = True,
) -> tuple[str, str]:
    """``(spec, rule)``: the fusion of ``per_query`` (spec -> each pseudo-query's nDCG@10) with the best mean,
    if it beats ``default``'s by ``margin`` and (``paired``) a paired bootstrap's lower end of the gain is above
    0; else ``default``. Ties go to the default."""
    means = {name: float(values.mean()) for name, values in per_query.items()}
    best = max(means, key=lambda name: (means[name], name == default))
    gain = per_query[best] - per_query[default]
    n = len(gain)
    if best == default or gain.mean() < margin or (paired and _bootstrap_low(gain, seed) <= 0):
        return default, f"default kept: no weight beat it by {margin:g} nDCG@10 on {n} pseudo-queries"
    return best, f"best on {n} pseudo-queries, by {gain.mean():.3f} nDCG@10 over {default}"


def _bootstrap_low(gain: np.ndarray, seed: int) -> float:
    """The lower end of the BOOTSTRAP_LEVEL interval of the mean of ``gain`` (queries resampled)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, gain.size, size=(BOOTSTRAP_DRAWS, gain.size))
    return float(np.quantile(gain[draws].mean(axis=1), 1 - BOOTSTRAP_LEVEL))
