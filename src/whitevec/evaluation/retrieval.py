"""Retrieval quality and speed: recall@k, MRR@10, nDCG@10 and MAP per transform, with build time, latency and
index size.

Metric definitions (per query, then averaged over the queries that have at least one relevant document;
``ranked`` is the list of retrieved document ids best first, ``qrels`` maps doc id -> gain, gain > 0 relevant):

- ``recall@k`` = |relevant in top k| / |relevant|.
- ``MRR@10`` = 1 / rank of the first relevant document within the top 10, else 0.
- ``nDCG@10`` = DCG@10 / IDCG@10 with linear gains, DCG = sum_i gain_i / log2(i + 1) (rank i from 1), as
  trec_eval and BEIR compute it; IDCG sorts all judged gains of the query. Cranfield gains: see
  ``whitevec.datasets.retrieval`` (code 1 -> 4 ... code 4 -> 1).
- ``MAP`` = mean over queries of AP = (1/|relevant|) * sum over relevant documents at rank i of precision@i,
  over a ranking of depth ``map_depth`` (1000, as trec_eval, clamped to the corpus size: on Cranfield the whole
  corpus is ranked, so MAP is exact).

Timing: ``build_s`` is ``Retriever.build`` wall time with the corpus vectors already in the encoder's cache
(fit + transform + index training + write); ``corpus_encode_s`` is the one-off encoding of corpus + queries for
all poolings in one pass (near 0 when the vectors were already in the on-disk cache).
``p50_query_ms`` / ``p99_query_ms`` are the median / 99th percentile over single queries of encode (no cache) +
transform + search + document fetch; ``p50_search_ms`` / ``p99_search_ms`` the same of search + document fetch
for one already embedded query; ``qps`` is queries a second when all judged queries, already embedded, are
searched in one batch (top 10, repeated for at least :data:`QPS_MIN_SECONDS`).

Each configuration is (pooling, transform, encoding): the encoding (``whitevec.index.encodings.spec``) says how the
index stores a vector, ``code_bytes`` is what that costs per vector in memory (the x axis of the quality-per-byte
frontier, ``whitevec.evaluation.frontier``) and ``disk_bytes`` what it keeps on disk beside (a ``+rescore``
encoding's vectors). An encoding that re-ranks a shortlist (``+refine``, ``+rescore``) is scored at each measure's
own depth (k = 10 for the @10 measures), as a user asking for that many would be served.
"""

from __future__ import annotations

import copy
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from whitevec.datasets.retrieval import RetrievalDataset
from whitevec.errors import BadInputError
from whitevec.evaluation.metrics import non_finite_to_none
from whitevec.evaluation.modes import DENSE, LEXICAL, ModePlan, ModeRow, mode_fields, no_term_note
from whitevec.evaluation.timing import machine_description, query_timings
from whitevec.utils.io import write_json

# The depth of the ranking MAP is read over, as trec_eval's.
MAP_DEPTH = 1000

if TYPE_CHECKING:
    from whitevec.encoders.loading import AnyEncoder
    from whitevec.transforms import Transform


# --- metrics -----------------------------------------------------------------------------------------------
def _relevant(qrels: Mapping[str, int]) -> set[str]:
    return {d for d, g in qrels.items() if g > 0}


def recall_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents found in the top ``k`` (0 when none are relevant)."""
    relevant = _relevant(qrels)
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int = 10) -> float:
    """1 / rank of the first relevant document in the top ``k``, else 0."""
    relevant = _relevant(qrels)
    for rank, doc in enumerate(ranked[:k], start=1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int = 10) -> float:
    """Normalised DCG with linear gains and log2(rank + 1) discount."""
    dcg = sum(max(qrels.get(doc, 0), 0) / math.log2(rank + 1) for rank, doc in enumerate(ranked[:k], start=1))
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
    return dcg / idcg if idcg > 0 else 0.0


def average_precision(ranked: Sequence[str], qrels: Mapping[str, int]) -> float:
    """Mean of precision@i over the ranks i of the relevant documents retrieved, divided by all relevant."""
    relevant = _relevant(qrels)
    if not relevant:
        return 0.0
    hits, total = 0, 0.0
    for rank, doc in enumerate(ranked, start=1):
        if doc in relevant:
            hits += 1
            total += hits / rank
    return total / len(relevant)


QueryMetric = Callable[[Sequence[str], Mapping[str, int]], float]


def query_metric(metric: str) -> tuple[QueryMetric, int]:
    """The per-query function of ``metric`` (``ndcg@K``, ``recall@K``, ``mrr@K`` or ``map``, lower-case) and the
    ranking depth it reads (K; MAP: :data:`MAP_DEPTH`)."""
    if metric == "map":
        return average_precision, MAP_DEPTH
    match = re.fullmatch(r"(ndcg|recall|mrr)@([1-9]\d*)", metric)
    if match is None:
        raise BadInputError(f"unknown retrieval metric {metric!r}; valid: ndcg@K, recall@K, mrr@K (K >= 1), map")
    name, k = match.group(1), int(match.group(2))
    if name == "ndcg":
        return (lambda ranked, qrels: ndcg_at_k(ranked, qrels, k)), k
    if name == "recall":
        return (lambda ranked, qrels: recall_at_k(ranked, qrels, k)), k
    return (lambda ranked, qrels: mrr_at_k(ranked, qrels, k)), k


def query_scores(rankings: Iterable[Sequence[str]], qrels: Sequence[Mapping[str, int]], metric: str) -> np.ndarray:
    """Each query's ``metric`` (:func:`query_metric`) of its ranking (document ids, best first) against its
    judgments ``qrels``, in the order given; float64."""
    score_of, _ = query_metric(metric)
    return np.array([score_of(ranked, judged) for ranked, judged in zip(rankings, qrels, strict=True)], np.float64)


@dataclass
class QualityScores:
    """Metric means over the evaluated queries (all as fractions 0..1)."""

    n_queries: int
    recall_at: dict[int, float]
    mrr_10: float
    ndcg_10: float
    map: float


def score_rankings(
    rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], ks: Sequence[int] = (10, 100)
) -> QualityScores:
    """Average the metrics over the queries in ``rankings`` that have a relevant document in ``qrels``."""
    judged = [q for q in rankings if _relevant(qrels.get(q, {}))]
    if not judged:
        raise BadInputError("no ranked query has a relevant document in the judgments; nothing to score")
    recall = {k: float(np.mean([recall_at_k(rankings[q], qrels[q], k) for q in judged])) for k in ks}
    return QualityScores(
        n_queries=len(judged),
        recall_at=recall,
        mrr_10=float(np.mean([mrr_at_k(rankings[q], qrels[q], 10) for q in judged])),
        ndcg_10=float(np.mean([ndcg_at_k(rankings[q], qrels[q], 10) for q in judged])),
        map=float(np.mean([average_precision(rankings[q], qrels[q]) for q in judged])),
    )


# --- runner ------------------------------------------------------------------------------------------------
@dataclass
class RetrievalScore:
    """One transform's row of the report."""

    transform: str
    pooling: str
    dim: int
    n_docs: int
    n_queries: int
    recall_10: float
    recall_100: float
    mrr_10: float
    ndcg_10: float
    map: float
    build_s: float
    p50_query_ms: float
    p50_search_ms: float
    index_bytes: int
    folder_bytes: int
    encoding: str = "float32"
    code_bytes: int = 0  # bytes of one vector's code, in memory (see whitevec.index.encodings.spec)
    disk_bytes: int = 0  # bytes of one vector on disk beyond its code: a +rescore encoding's rescoring vector
    p99_query_ms: float = math.nan
    p99_search_ms: float = math.nan
    qps: float = math.nan  # batched: all queries in one search call
    # The rule for texts with no token the model knows (whitevec.encoders.protocol.known_token_mask): such queries
    # rank
    # nothing (each scores 0, and counts in n_queries), such documents are not indexed (not in n_docs).
    unknown_queries: int = 0
    skipped_documents: int = 0
    mode: str = "dense"  # lexical and hybrid rows (eval-retrieval --mode): whitevec.evaluation.modes
    fusion: str | None = None
    no_term_queries: int = 0  # lexical and hybrid rows: queries with no term left after analysis

    @property
    def label(self) -> str:
        """``transform / encoding`` (with the pooling when it is not last-avg): a configuration's name."""
        if self.mode == "lexical":
            return self.transform
        base = f"{self.transform} / {self.encoding}"
        return base if self.pooling == "last-avg" else f"{self.pooling}: {base}"

    def cells(self) -> list[str]:
        """pooling, transform, dim, R@10, R@100, MRR@10, nDCG@10, MAP (percent), build s, p50 query ms, p50
        search ms and index bytes, formatted for a table (the CLI's and docs/results/retrieval.md's)."""
        quality = (self.recall_10, self.recall_100, self.mrr_10, self.ndcg_10, self.map)
        return [
            self.pooling,
            self.transform,
            str(self.dim),
            *(f"{100 * v:.2f}" for v in quality),
            f"{self.build_s:.2f}",
            f"{self.p50_query_ms:.1f}",
            f"{self.p50_search_ms:.3f}",
            f"{self.index_bytes:,}",
        ]


@dataclass
class RetrievalReport:
    """Everything ``eval-retrieval`` measured, JSON-serialisable."""

    model: str
    dataset: str
    kind: str
    metric: str
    backend: str
    fit_on: str
    corpus_encode_s: dict[str, float]
    scores: list[RetrievalScore] = field(default_factory=list)
    latency_queries: int = 0
    machine: str = ""
    date: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types; the latency medians, NaN when no query was timed (``latency_queries=0``), become
        None."""
        return non_finite_to_none(asdict(self))

    def save_json(self, path: str | os.PathLike[str]) -> Path:
        """Write :meth:`to_dict` as JSON (atomically, UTF-8); returns ``path``."""
        return write_json(path, self.to_dict())


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


TransformChoice = str | tuple[str, "Transform"]  # a spec, or (label, a Transform fitted or to fit)


def plan_configurations(
    transforms: Sequence[TransformChoice],
    encodings: Sequence[str],
    encoder_dim: int,
) -> tuple[list[tuple[TransformChoice, str]], list[str]]:
    """The (transform, encoding) pairs to evaluate, and a note for each pair left out because the encoding does
    not fit the transform's output dimension (PQ's M must divide it). Every spec is checked here, before any
    encoding work: an unknown transform or encoding raises BadInputError."""
    from whitevec.index.build import stored_dim
    from whitevec.index.encodings.spec import parse_encoding
    from whitevec.transforms import make_transform

    parsed = [parse_encoding(e) for e in encodings]
    if not parsed:
        raise BadInputError("give at least one encoding (e.g. float32,sq8,pq48)")
    plan: list[tuple[TransformChoice, str]] = []
    notes: list[str] = []
    for choice in transforms:
        if isinstance(choice, tuple):
            k = getattr(choice[1], "n_components", None)
            dim = encoder_dim if k is None else min(int(k), encoder_dim)
        else:
            make_transform(choice)
            dim = stored_dim(choice, encoder_dim) or encoder_dim
        for encoding in parsed:
            try:
                encoding.check_dim(dim)
            except BadInputError as exc:
                notes.append(f"skipped {_label(choice)} / {encoding.spec}: {exc}")
                continue
            plan.append((choice, encoding.spec))
    if not plan:
        raise BadInputError("no (transform, encoding) pair fits: " + "; ".join(notes))
    return plan, notes


def _label(choice: TransformChoice) -> str:
    return choice[0] if isinstance(choice, tuple) else choice


def evaluate_retrieval(
    encoder: AnyEncoder,
    dataset: RetrievalDataset,
    transforms: Sequence[TransformChoice],
    *,
    poolings: Sequence[str] | None = None,
    encodings: Sequence[str] = ("float32",),
    fit_on: str = "corpus",
    kind: str = "flat",
    metric: str = "cosine",
    backend: str = "faiss",
    uri: str | None = None,
    index_params: dict[str, Any] | None = None,
    workdir: str | os.PathLike[str] | None = None,
    latency_queries: int = 100,
    map_depth: int = MAP_DEPTH,
    query_ids: Sequence[str] | None = None,
    show_progress: bool | None = None,
    modes: ModePlan | None = None,
) -> RetrievalReport:
    """Build one index per (pooling, transform, encoding) over ``dataset.corpus`` and score the judged queries
    (or those of ``query_ids``).

    ``transforms`` holds specs (``whitening-128``, ``pca-64``, ``whitening-128:gamma=0.5``) or ``(label,
    Transform)`` pairs (a transform fitted elsewhere, e.g. on corpus + queries). ``latency_queries=0`` skips
    every timing (latency and QPS: a quality-only run). Indexes go to ``workdir`` (a temporary folder, removed
    afterwards, when not given). ``modes`` (:func:`whitevec.evaluation.modes.plan_modes`; None: dense rows only)
    adds lexical and hybrid rows, untimed, over a BM25 part built into each index.
    """
    if not transforms:
        raise BadInputError("give at least one transform (e.g. none,whitening)")
    if latency_queries < 0:
        raise BadInputError(f"latency_queries must be >= 0, got {latency_queries}")
    plan, skipped = plan_configurations(transforms, encodings, int(encoder.dim))
    _check_backend(plan, backend, kind, index_params, uri)
    queries = _judged_queries(dataset, query_ids)
    run = _Run(dataset, queries, fit_on, kind, metric, backend, uri, index_params, map_depth, latency_queries)
    run.modes = modes if modes is not None else ModePlan()
    pooling_names = list(poolings) if poolings else [encoder.pooling.name]
    report = RetrievalReport(
        model=encoder.model_name,
        dataset=dataset.name,
        kind=kind,
        metric=metric,
        backend=backend,
        fit_on=fit_on,
        corpus_encode_s={},
        latency_queries=min(latency_queries, len(queries)),
        machine=machine_description(),
        date=time.strftime("%Y-%m-%d %H:%M %Z"),
        notes=list(dataset.notes) + skipped,
    )
    report.corpus_encode_s = _encode_once(encoder, run, pooling_names, show_progress)
    with tempfile.TemporaryDirectory(prefix="whitevec-eval-") as scratch:
        base = Path(workdir) if workdir is not None else Path(scratch)
        for pooling in pooling_names:
            pooled = encoder.with_pooling(pooling)
            # Latency must include the forward pass; the cache would answer repeated queries from disk.
            timing_encoder = pooled.without_cache()
            for number, (choice, encoding) in enumerate(plan):
                label = _label(choice)
                safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{label}-{encoding}")
                out = base / f"{dataset.name}-{pooled.pooling.name.replace(':', '_')}-{number}-{safe}"
                retriever, build_s = run.build(out, pooled, choice, encoding, show_progress)
                with retriever:
                    if run.modes.lexical and pooling == pooling_names[0] and number == 0:  # one: no transform
                        report.scores.append(run.score(retriever, label, encoding, 0.0, timing_encoder, LEXICAL))
                    for row in run.modes.index_rows():
                        report.scores.append(run.score(retriever, label, encoding, build_s, timing_encoder, row))
                if workdir is None:
                    shutil.rmtree(out, ignore_errors=True)  # a big grid would otherwise fill the scratch disk
    # The tokenizer and the analyzer decide these counts: the same for every configuration of a mode.
    dense = next((s for s in report.scores if s.mode == "dense"), None)
    no_term = max((s.no_term_queries for s in report.scores), default=0)
    notes = (dense and _empty_text_note(dense), no_term_note(no_term, len(queries), run.modes.analyzer or ""))
    report.notes.extend(note for note in notes if note)
    return report


def _empty_text_note(score: RetrievalScore) -> str | None:
    """One line on the queries and documents with no token the model knows, when there are any (the same for
    every configuration: the tokenizer decides)."""
    if not score.unknown_queries and not score.skipped_documents:
        return None
    return (
        f"{score.unknown_queries} of {score.n_queries} queries have no token the model knows: they rank nothing "
        f"(score 0); {score.skipped_documents} documents have none: not indexed"
    )


def _index_params(given: dict[str, Any] | None, encoding: str) -> dict[str, Any]:
    from whitevec.index.stores.vector import ENCODING

    return {**(given or {}), ENCODING: encoding}


def _check_backend(
    plan: list[tuple[TransformChoice, str]],
    backend: str,
    kind: str,
    index_params: dict[str, Any] | None,
    uri: str | None,
) -> None:
    """Refuse, before any encoding, an encoding or parameter the backend cannot take."""
    from whitevec.index.stores.vector import store_class

    for _, encoding in plan:
        store_class(backend).check_options(kind, _index_params(index_params, encoding), uri)


def _judged_queries(dataset: RetrievalDataset, query_ids: Sequence[str] | None) -> dict[str, str]:
    """``{query id: text}`` of the judged queries to score: all, or those of ``query_ids`` (checked)."""
    queries = dataset.judged_queries()
    if query_ids is not None:
        unknown = [q for q in query_ids if q not in queries]
        if unknown:
            raise BadInputError(f"query ids not among the judged queries of {dataset.name}: {unknown[:5]}")
        queries = {q: queries[q] for q in query_ids}
    if not queries:
        raise BadInputError(f"dataset {dataset.name} has no query with a relevant document")
    return queries


@dataclass
class _Run:
    """One evaluation: the dataset and the queries scored, and how each index is built (the same fit, kind,
    metric, backend and parameters for all; the pooling, transform and encoding vary) and scored."""

    dataset: RetrievalDataset
    queries: dict[str, str]
    fit_on: str
    kind: str
    metric: str
    backend: str
    uri: str | None
    index_params: dict[str, Any] | None
    map_depth: int
    latency_queries: int
    modes: ModePlan = field(default_factory=ModePlan)

    def build(
        self, out: Path, encoder: AnyEncoder, choice: TransformChoice, encoding: str, show_progress: bool | None
    ) -> tuple[Any, float]:
        """The index of one configuration at ``out``, loaded, and its build seconds."""
        from whitevec.index.lexical.analyzers import DEFAULT_ANALYZER
        from whitevec.index.retriever import Retriever

        transform = choice[1] if isinstance(choice, tuple) else choice
        started = time.perf_counter()
        retriever = Retriever.build(
            self.dataset.corpus,
            out,
            encoder=encoder,
            transform=copy.deepcopy(transform) if not isinstance(transform, str) else transform,
            fit_on=self.fit_on,
            kind=self.kind,
            metric=self.metric,
            backend=self.backend,
            uri=None if self.uri is None else _per_index_uri(self.uri, out.name),
            index_params=_index_params(self.index_params, encoding),
            show_progress=show_progress,
            lexical=None if self.modes.analyzer is None else "bm25",
            analyzer=self.modes.analyzer or DEFAULT_ANALYZER,  # unused without a lexical part
        )
        return retriever, time.perf_counter() - started

    def score(
        self,
        retriever: Any,
        label: str,
        encoding: str,
        build_s: float,
        timing_encoder: AnyEncoder,
        row: ModeRow = DENSE,
    ) -> RetrievalScore:
        """One index's quality on the queries in the ``row``'s mode, its timings (dense rows) and its size."""
        from whitevec.index.encodings.spec import parse_encoding
        from whitevec.index.stores.vector import ENCODING

        qids, qtexts = list(self.queries), list(self.queries.values())
        # An index with a lexical part searches in its own mode unless told: every row names its own.
        options = {} if self.modes.analyzer is None else {"mode": row.mode, "fusion": row.fusion}
        quality, unknown_queries = _quality(
            retriever, qids, qtexts, self.dataset.qrels, min(self.map_depth, retriever.count), options
        )
        size: dict[str, Any] = {"n_docs": retriever.count, "folder_bytes": _folder_bytes(retriever.path)}
        if row.mode != "dense":
            hybrid = row.mode == "hybrid"
            return RetrievalScore(
                **mode_fields(retriever, row, label, encoding, self.modes.analyzer or "", qtexts),
                **_quality_fields(quality),
                pooling=timing_encoder.pooling.name if hybrid else "-",
                # A lexical row: the BM25 part's own build time, as its manifest record keeps it.
                build_s=round(build_s, 3) if hybrid else float(retriever.manifest["lexical"]["build_seconds"]),
                code_bytes=_code_bytes(encoding, retriever) if hybrid else 0,
                unknown_queries=unknown_queries,
                **size,
            )
        timing: dict[str, Any] = query_timings(retriever, timing_encoder, qtexts, self.latency_queries)
        stored = retriever.manifest["index_params"].get(ENCODING, encoding)
        return RetrievalScore(
            transform=label,
            pooling=timing_encoder.pooling.name,
            dim=retriever.dim,
            **_quality_fields(quality),
            build_s=round(build_s, 3),
            index_bytes=retriever.index_bytes,
            **size,
            encoding=stored,
            code_bytes=_code_bytes(stored, retriever),
            disk_bytes=parse_encoding(stored).disk_bytes(retriever.dim),
            unknown_queries=unknown_queries,
            skipped_documents=int(retriever.manifest.get("skipped_documents", 0)),
            **timing,
        )


def _quality_fields(quality: QualityScores) -> dict[str, Any]:
    at = quality.recall_at
    return {"n_queries": quality.n_queries, "recall_10": at[10], "recall_100": at[100], "map": quality.map} | {
        "mrr_10": quality.mrr_10,
        "ndcg_10": quality.ndcg_10,
    }


def _encode_once(encoder: AnyEncoder, run: _Run, poolings: list[str], show: bool | None) -> dict[str, float]:
    """One forward pass over the corpus and the queries fills the vector cache for every pooling (the builds then
    read their vectors from it); its seconds, keyed by the poolings."""
    started = time.perf_counter()
    texts = [d.text for d in run.dataset.corpus] + list(run.queries.values())
    encoder.encode_poolings(texts, poolings, show_progress=show)
    return {"+".join(poolings): round(time.perf_counter() - started, 3)}


def _quality(
    retriever: Any,
    qids: list[str],
    qtexts: list[str],
    qrels: Mapping[str, Mapping[str, int]],
    depth: int,
    options: Mapping[str, Any] | None = None,
) -> tuple[QualityScores, int]:
    """Recall@10/100, MRR@10, nDCG@10 and MAP of the index's rankings, and how many queries the index did not
    search (no token the model knows: an empty ranking, scored 0). An encoding that re-ranks a shortlist
    (``+refine``, ``+rescore``: the top K x k) gives another top 10 at k = 10 than at k = 1000, where the shortlist
    is most of a small corpus, and so does a hybrid search (it fuses each ranker's top ``candidates x k``, each
    scaled over its own list); so each measure is taken from a search of its own depth, as a user asking for that
    many would get (10: recall@10, MRR@10, nDCG@10; 100: recall@100; ``depth``: MAP). ``options``: the search's
    mode and fusion."""
    from whitevec.index.encodings.spec import parse_encoding

    unknown: list[int] = []

    def ranked(k: int) -> dict[str, list[str]]:
        hits = retriever.search(qtexts, k=min(k, depth), **(options or {}))
        unknown[:] = hits.unknown_queries
        return {q: [h.id for h in row] for q, row in zip(qids, hits, strict=True)}

    deepest = ranked(depth)
    quality = score_rankings(deepest, qrels, ks=(10, 100))
    encoding = parse_encoding(retriever.manifest["index_params"].get("encoding"))
    if encoding.rescore is None and not encoding.refine and (options or {}).get("mode") != "hybrid":
        return quality, len(unknown)
    at_10, at_100 = score_rankings(ranked(10), qrels, ks=(10,)), score_rankings(ranked(100), qrels, ks=(100,))
    return QualityScores(
        n_queries=quality.n_queries,
        recall_at={10: at_10.recall_at[10], 100: at_100.recall_at[100]},
        mrr_10=at_10.mrr_10,
        ndcg_10=at_10.ndcg_10,
        map=quality.map,
    ), len(unknown)


def _code_bytes(encoding: str, retriever: Any) -> int:
    """A vector's code bytes; for an expert factory string, measured: the index bytes per vector."""
    from whitevec.index.encodings.spec import parse_encoding

    nominal = parse_encoding(encoding).code_bytes(retriever.dim)
    return nominal or round(retriever.index_bytes / max(retriever.count, 1))


def _per_index_uri(uri: str, name: str) -> str:
    # Milvus Lite: one database folder per index, so that builds do not share a lock.
    if "://" in uri:
        return uri
    return str(Path(uri).expanduser() / f"{name}.db")
