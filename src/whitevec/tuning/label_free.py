"""``whitevec tune --pseudo-queries N``: a tuned configuration chosen without labels (issue 53).

Pseudo-queries cut from the user's corpus (:mod:`whitevec.index.search.pseudo_queries`) choose the hybrid fusion
and its weight, as an index build with ``--lexical bm25`` does for itself (:mod:`whitevec.index.build_fusion`:
one code path). The pooling is the model's, and the transform and encoding stay the plain ones: the study
(benchmarks/investigations/pseudo_queries.py) measured only the fusion on pseudo-queries, so tune does not
claim they judge the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from whitevec.datasets.retrieval import Document
from whitevec.encoders.loading import load_encoder
from whitevec.errors import BadInputError
from whitevec.index.build_fusion import build_fusion_choice
from whitevec.index.lexical.bm25 import LexicalIndex, make_analyzer
from whitevec.index.search.pseudo_queries import FusionChoice, check_pseudo_count
from whitevec.index.stores.vector import stored_form
from whitevec.tuning.config import TunedConfig, config_max_length


def tune_label_free(
    corpus: Sequence[Document],
    n: int,
    *,
    model: str,
    pooling: str | None = None,
    analyzer: str = "english",
    seed: int = 0,
    encoder_options: dict[str, Any] | None = None,
    show_progress: bool | None = None,
) -> tuple[TunedConfig, FusionChoice]:
    """The configuration (``model``, its pooling, no transform, float32, hybrid with the chosen fusion and
    ``analyzer``) and the choice, made on ``n`` pseudo-queries (``seed``) cut from ``corpus``.

    Raises:
        BadInputError: ``n`` out of range, an empty corpus, or no document long enough to cut (one line each).
    """
    count = check_pseudo_count(n)
    if not corpus:
        raise BadInputError("the corpus is empty: no pseudo-queries can be made")
    texts = [doc.text for doc in corpus]
    encoder = load_encoder(model, pooling, **(encoder_options or {}))
    stored = stored_form(None, encoder.encode(texts, show_progress=show_progress), "cosine")
    lexical = LexicalIndex.build(texts, make_analyzer(analyzer))
    choice = build_fusion_choice(texts, stored, lexical, encoder, None, "cosine", count, seed=seed)
    if not choice.scores:
        raise BadInputError(f"no pseudo-queries could be made from the corpus ({choice.rule}); tune on labels")
    described = encoder.describe()
    config = TunedConfig(
        model=model,
        pooling=str(described["pooling"]),
        transform="none",
        encoding="float32",
        dim=int(described["dim"]),
        bytes_per_vector=4 * int(described["dim"]),
        metric="ndcg@10",
        max_length=config_max_length(described),
        model_fingerprint=described.get("model_fingerprint"),
        fit_on="",
        selection={"label_free": choice.record()},
        mode="hybrid",
        fusion=choice.fusion.spec,
        analyzer=analyzer,
    )
    return config, choice
