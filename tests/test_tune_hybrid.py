"""tune's lexical and hybrid candidates (issue 39 item 3): scored as a search of a built index ranks, the
never-worse rule with them, the modes refused where they cannot apply, and the chosen search in the tuned
configuration and in an index built from it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.test_tune import MODEL, TableEncoder, retrieval_data
from whitevec.datasets.retrieval import Document, RetrievalDataset
from whitevec.errors import BadInputError, CorruptFileError
from whitevec.evaluation.retrieval import ndcg_at_k
from whitevec.index import Retriever, read_manifest
from whitevec.tuning import TunedConfig, tune
from whitevec.tuning.choice import fold_ids
from whitevec.tuning.searches import TUNE_FUSIONS

WORDS = [f"w{i}" for i in range(40)]


def worded_data(
    n_queries: int = 30, *, seed: int = 0, lexical_helps: bool = True
) -> tuple[RetrievalDataset, dict]:
    """60 documents of 6 words from a 40-word vocabulary, vectors near their own (noisy) meaning; each query
    shares 2 words with its document (``lexical_helps``; else two words, for one query in 5), and its vector
    is its document's meaning plus noise: neither ranker is perfect, so the fusion matters."""
    rng = np.random.default_rng(seed)
    docs, table, queries, qrels = [], {}, {}, {}
    meanings = rng.normal(size=(60, 8))
    for i in range(60):
        text = " ".join(rng.choice(WORDS, size=6, replace=False)) + f" d{i}"
        docs.append(Document(f"d{i}", text))
        table[text] = meanings[i] + 0.8 * rng.normal(size=8)
    for q in range(n_queries):
        target = q % 60
        if lexical_helps:
            words = [*rng.choice(docs[target].text.split()[:6], size=2, replace=False), *rng.choice(WORDS, size=1)]
        else:  # a word of its document for one query in 5, else words it lacks: a weak lexical ranker
            own = docs[target].text.split()[:6]
            words = [
                *rng.choice([w for w in WORDS if w not in own], size=2),
                *([own[0], own[1]] if q % 5 == 0 else []),
            ]
        text = " ".join(words)
        text += f" q{q}"
        queries[f"q{q}"], qrels[f"q{q}"] = text, {f"d{target}": 1}
        table[text] = meanings[target] + 1.2 * rng.normal(size=8)
    return RetrievalDataset("worded", docs, queries, qrels), table


def _tune(data: RetrievalDataset, table: dict, **kwargs: object) -> object:
    kwargs.setdefault("include_flow", False)
    return tune(data, models=[MODEL], encoders={MODEL: TableEncoder(table)}, **kwargs)  # type: ignore[arg-type]


def test_fusion_candidates_score_what_a_built_index_serves(tmp_path: Path) -> None:
    data, table = worded_data()
    result = _tune(data, table, transforms=["whitening"])
    rows = {(c.transform, c.mode, c.fusion): c for c in result.candidates}  # type: ignore[attr-defined]
    hybrid = {key for key in rows if key[1] == "hybrid"}
    assert hybrid == {(t, "hybrid", f) for t in ("none", "whitening") for f in TUNE_FUSIONS}
    assert ("none", "lexical", "") in rows and ("whitening", "lexical", "") not in rows
    judged = data.judged_queries()
    fold_of = fold_ids(len(judged), 5, 0)
    for transform in ("none", "whitening"):
        with Retriever.build(
            data.corpus, tmp_path / transform, encoder=TableEncoder(table), transform=transform, lexical="bm25"
        ) as index:
            for (spec, mode, fusion), row in rows.items():
                if spec != transform or mode == "dense":
                    continue
                hits = index.search(list(judged.values()), k=10, mode=mode, fusion=fusion or None)
                per_query = 100 * np.array(
                    [
                        ndcg_at_k([h.id for h in found], data.qrels[q], 10)
                        for q, found in zip(judged, hits, strict=True)
                    ]
                )
                assert row.dev == pytest.approx(per_query.mean(), abs=1e-9), (spec, mode, fusion)
                # Per query too, as far as the result keeps them: each held-out fold's mean.
                held_out = [per_query[fold_of == fold].mean() for fold in range(5)]
                assert row.folds == pytest.approx(held_out, abs=1e-9), (spec, mode, fusion)
    scores = {key: row.dev for key, row in rows.items()}
    assert len({round(v, 6) for k, v in scores.items() if k[1] == "hybrid"}) > 2  # the fusions differ here


def test_hybrid_is_chosen_where_it_wins_and_recorded_in_the_config(tmp_path: Path) -> None:
    data, table = worded_data(40)
    result = _tune(data, table, transforms=["center"])
    chosen = result.chosen  # type: ignore[attr-defined]
    assert chosen.mode == "hybrid" and chosen.significant
    config = result.config  # type: ignore[attr-defined]
    assert (config.mode, config.fusion, config.analyzer) == ("hybrid", chosen.fusion, "english")
    assert config.search == {"mode": "hybrid", "fusion": chosen.fusion}
    from whitevec.cli.tune import _candidates_table

    shown = _candidates_table(result, several_models=False)  # type: ignore[arg-type]
    modes = [row[shown.columns.index("mode")] for row in shown.shown()]
    assert modes[:3] == ["dense", "lexical", "hybrid rrf:60"] and f"hybrid {chosen.fusion}" in modes
    dense = _tune(data, table, transforms=["center"], modes=["dense"])
    assert "mode" not in _candidates_table(dense, several_models=False).columns  # type: ignore[arg-type]


def test_never_worse_than_plain_dense_with_fusion_candidates() -> None:
    # A weak lexical ranker (one query in 5 shares words with its document): a fusion gains a little, not
    # significantly, so plain dense is kept although a hybrid candidate has the best point gain.
    data, table = worded_data(40, lexical_helps=False)
    result = _tune(data, table, transforms=["center"])
    modes = {c.mode for c in result.candidates}  # type: ignore[attr-defined]
    assert modes == {"dense", "lexical", "hybrid"}
    chosen = result.chosen  # type: ignore[attr-defined]
    assert chosen is result.baseline and chosen.mode == "dense"  # type: ignore[attr-defined]
    assert result.config.mode == "dense"  # type: ignore[attr-defined]
    best = max(result.candidates, key=lambda c: c.gain)  # type: ignore[attr-defined]
    assert best.mode == "hybrid" and best.gain > 0 and not best.significant
    lexical = next(c for c in result.candidates if c.mode == "lexical")  # type: ignore[attr-defined]
    assert lexical.gain < 0 and not lexical.significant


def test_modes_dense_keeps_the_dense_run() -> None:
    data, table = retrieval_data(40)
    dense = _tune(data, table, transforms=["whitening"], modes=["dense"])
    every = _tune(data, table, transforms=["whitening"])
    assert [c.mode for c in dense.candidates] == ["dense", "dense"]  # type: ignore[attr-defined]
    same = [c for c in every.candidates if c.mode == "dense"]  # type: ignore[attr-defined]
    assert [c.dev for c in same] == [c.dev for c in dense.candidates]  # type: ignore[attr-defined]
    assert dense.config.mode == "dense"  # type: ignore[attr-defined]
    only_hybrid = _tune(data, table, transforms=["whitening"], modes=["hybrid"])
    assert [c.mode for c in only_hybrid.candidates][:1] == ["dense"]  # type: ignore[attr-defined]
    assert {c.mode for c in only_hybrid.candidates[1:]} == {"hybrid"}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"modes": ["dense", "sparse"]}, "unknown search mode 'sparse'"),
        ({"modes": []}, "give the modes to tune"),
        ({"analyzer": "encoder"}, "tune's --analyzer must be one of english"),
        ({"analyzer": "klingon"}, "tune's --analyzer must be one of english"),
    ],
)
def test_bad_modes_and_analyzers_are_refused(kwargs: dict, needle: str) -> None:
    data, table = retrieval_data(12)
    with pytest.raises(BadInputError, match=needle):
        _tune(data, table, transforms=["center"], **kwargs)


def test_pairs_take_dense_only() -> None:
    from tests.test_tune import anisotropic_pairs

    table, pairs = anisotropic_pairs(60)
    with pytest.raises(BadInputError, match="mode 'hybrid' ranks documents for queries; scored pairs tune dense"):
        tune(pairs, models=[MODEL], encoders={MODEL: TableEncoder(table)}, modes=["dense", "hybrid"])
    result = tune(pairs, models=[MODEL], encoders={MODEL: TableEncoder(table)}, transforms=["center"])
    assert {c.mode for c in result.candidates} == {"dense"}


def test_config_round_trip_and_old_configs_load_as_dense(tmp_path: Path) -> None:
    config = TunedConfig("m", "last-avg", "whitening", mode="hybrid", fusion="CONVEX:0.70", analyzer="plain")
    loaded = TunedConfig.load(config.save(tmp_path / "c.json"))
    assert (loaded.mode, loaded.fusion, loaded.analyzer) == ("hybrid", "convex:0.7", "plain")
    assert loaded.needs_lexical
    old = json.loads((tmp_path / "c.json").read_text())
    for key in ("mode", "fusion", "analyzer"):
        del old[key]
    (tmp_path / "old.json").write_text(json.dumps(old))
    before = TunedConfig.load(tmp_path / "old.json")
    assert before.mode == "dense" and not before.needs_lexical
    for key, value, needle in (
        ("mode", "sparse", "unknown search mode"),
        ("fusion", "rrf:0", "rrf"),
        ("mode", 3, "mode"),
    ):
        bad = {**json.loads((tmp_path / "c.json").read_text()), key: value}
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(CorruptFileError, match=needle):
            TunedConfig.load(tmp_path / "bad.json")


def test_build_writes_the_search_defaults(tmp_path: Path) -> None:
    data, table = worded_data(12)
    search = {"mode": "hybrid", "fusion": "RRF:30"}
    with Retriever.build(
        data.corpus, tmp_path / "i", encoder=TableEncoder(table), lexical="bm25", search=search
    ) as index:
        assert index.search_plan().fusion.spec == "rrf:30"
    assert read_manifest(tmp_path / "i")["search"] == {"mode": "hybrid", "fusion": "rrf:30"}
    with pytest.raises(BadInputError, match="needs a lexical part; build it with --lexical bm25"):
        Retriever.build(data.corpus, tmp_path / "j", encoder=TableEncoder(table), search=search)
    assert not (tmp_path / "j").exists()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_cli_index_build_config_writes_the_search_and_builds_the_lexical_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.index_helpers import tiny_cli_inputs
    from tests.test_cli import run_cli

    files = tiny_cli_inputs(tmp_path)
    config = tmp_path / "tuned.json"
    TunedConfig(str(files["bert"]), "last-avg", "none", max_length=24, mode="hybrid", fusion="convex:0.7").save(
        config
    )

    def build(out: Path, *options: str) -> tuple[int, str, str]:
        argv = ["index", "build", "--corpus", str(files["corpus"]), "--out", str(out), "--config", str(config)]
        return run_cli([*argv, *options, "-q"], capsys)

    code, _, err = build(tmp_path / "idx")
    assert code == 0, err
    manifest = read_manifest(tmp_path / "idx")
    assert manifest["search"] == {"mode": "hybrid", "fusion": "convex:0.7"}
    assert manifest["lexical"]["analyzer"]["name"] == "english"
    code, _, err = build(tmp_path / "no-lexical", "--lexical", "none")
    assert code == 2 and "--lexical none contradicts the tuned configuration" in err
    code, _, err = build(tmp_path / "plain", "--analyzer", "plain")
    assert code == 2 and "--analyzer plain contradicts" in err and len(err.strip().splitlines()) == 1
    # Pairs tune dense only: another mode is refused in one line, before any model loads.
    argv = ["tune", "--pairs", str(files["pairs"]), "--model", str(files["bert"]), "--out", str(config)]
    code, _, err = run_cli([*argv, "--modes", "dense,hybrid", "-q"], capsys)
    assert code == 2 and "scored pairs tune dense only" in err and len(err.strip().splitlines()) == 1


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_cli_tune_on_a_dataset_tunes_the_modes_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.index_helpers import sentences, tiny_bert
    from tests.test_cli import run_cli
    from tests.test_retrieval import _write_beir

    docs = sentences(40, seed=11)
    beir = _write_beir(tmp_path / "beir", docs, [" ".join(d.split()[:4]) for d in docs[:12]])
    bert, config = tiny_bert(tmp_path / "bert"), tmp_path / "tuned.json"
    argv = ["tune", "--dataset", str(beir), "--model", str(bert), "--out", str(config), "--candidates", "center"]
    code, out, err = run_cli([*argv, "--modes", "dense,lexical", "--analyzer", "plain", "-q"], capsys)
    assert code == 0, err
    assert "mode" in out and "lexical" in out and "hybrid" not in out
    saved = json.loads(config.read_text())
    assert saved["mode"] in ("dense", "lexical") and saved["analyzer"] == "plain"
    code, _, err = run_cli([*argv, "--modes", "dense,sparse", "-q"], capsys)
    assert code == 2 and "unknown search mode 'sparse'" in err


def test_texts_the_model_does_not_know_are_scored_as_the_index_serves_them(tmp_path: Path) -> None:
    from tests.test_empty_text import MaskedTableEncoder

    data, table = worded_data(20)
    table["😀 w1 w2 w3"] = table[data.corpus[0].text]  # a document the index skips: never found, by either ranker
    data.corpus.insert(0, Document("dx", "😀 w1 w2 w3"))  # first: the kept rows are not the corpus's
    # Queries the model cannot search get the lexical ranking alone: here one that ranks nothing lexically.
    table["😀 zz"], table["😀 w1 w2"] = table[data.queries["q0"]], table[data.queries["q1"]]
    data.queries |= {"qx": "😀 zz", "qy": "😀 w1 w2"}
    data.qrels |= {"qx": {"d0": 1}, "qy": {"dx": 1, "d1": 1}}
    result = tune(
        data, models=[MODEL], encoders={MODEL: MaskedTableEncoder(table)}, transforms=["center"], modes=["hybrid"]
    )
    judged = data.judged_queries()
    with Retriever.build(data.corpus, tmp_path / "i", encoder=MaskedTableEncoder(table), lexical="bm25") as index:
        for row in result.candidates[1:]:
            assert row.transform == "none" or row.transform == "center"
            if row.transform != "none":
                continue
            hits = index.search(list(judged.values()), k=10, mode="hybrid", fusion=row.fusion)
            per_query = [
                ndcg_at_k([h.id for h in f], data.qrels[q], 10) for q, f in zip(judged, hits, strict=True)
            ]
            assert row.dev == pytest.approx(100 * np.mean(per_query), abs=1e-9), row.fusion


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_cli_eval_retrieval_config_scores_the_tuned_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """eval-retrieval --config scores what the configuration names: its transform and, for a hybrid one, the dense
    row and the hybrid row with its own fusion and analyzer; options may add rows, never leave its own out."""
    from tests.index_helpers import sentences, tiny_bert
    from tests.test_cli import run_cli
    from tests.test_retrieval import _write_beir

    docs = sentences(30, seed=5)
    beir = _write_beir(tmp_path / "beir", docs, [" ".join(d.split()[:4]) for d in docs[:8]])
    bert, config, report = tiny_bert(tmp_path / "bert"), tmp_path / "tuned.json", tmp_path / "report.json"
    TunedConfig(
        str(bert), "last-avg", "center", max_length=24, mode="hybrid", fusion="rrf:7", analyzer="plain"
    ).save(config)
    argv = ["eval-retrieval", "--dataset", str(beir), "--config", str(config), "--latency-queries", "0", "-q"]
    code, _, err = run_cli([*argv, "--json", str(report)], capsys)
    assert code == 0, err
    rows = json.loads(report.read_text())["scores"]
    assert [(r["transform"], r["mode"], r["fusion"]) for r in rows] == [
        ("center", "dense", None),
        ("center + bm25 rrf:7", "hybrid", "rrf:7"),
    ]
    code, _, err = run_cli([*argv, "--mode", "dense,lexical,hybrid", "--fusion", "rrf:7,convex:0.5"], capsys)
    assert code == 0, err
    for options, needle in (
        (["--mode", "dense"], "--mode dense leaves out the tuned configuration's 'hybrid'"),
        (["--fusion", "convex:0.5"], "--fusion convex:0.5 leaves out the tuned configuration's 'rrf:7'"),
        (["--analyzer", "english"], "--analyzer english leaves out the tuned configuration's 'plain'"),
        (["--transform", "none"], "--transform none contradicts the tuned configuration"),
    ):
        code, _, err = run_cli([*argv, *options], capsys)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    # STS scores vectors: eval --config of a hybrid configuration says its search is not what it scores.
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{docs[i]}\t{docs[i + 1]}\t{i % 5}\n" for i in range(10)))
    code, _, err = run_cli(["eval", "--config", str(config), "--tasks", "", "--pairs", str(pairs), "-q"], capsys)
    assert code == 0, err
    assert f"note: {config} searches hybrid rrf:7; STS pairs score its vectors alone" in err
