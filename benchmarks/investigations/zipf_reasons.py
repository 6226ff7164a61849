"""Why Zipfian whitening (and SIF, uSIF) falls short here: docs/notes/zipf-reasons.md, reasons 1 and 2, one
subcommand each.

``frequency-source`` (reason 1, web-scale counts): do these methods fall short because the token frequencies
come from the evaluated sentences (about 22,000) rather than a web-scale corpus? The same rows as
maintained/results_token_weights.py, with the frequencies counted three ways:

* ``sts``: the union of the five tasks' sentences (results_token_weights.py's counts);
* ``wordfreq``: web-scale English word frequencies (the ``wordfreq`` package's "large" list: Wikipedia,
  subtitles, news, books, web text, Twitter, Reddit), each word cut by the model's own tokenizer, so a token's
  count is the summed frequency of the words it occurs in (BERT's WordPiece cuts each word on its own, so this
  is the token count of the underlying corpus, but for punctuation, which wordfreq does not count: such tokens
  get the file's smoothing, i.e. weigh as rare tokens);
* ``wordfreq+punct``: as ``wordfreq``, with the tokens wordfreq never produces (punctuation, symbols) given the
  share they have in the ``sts`` counts.

    pip install wordfreq
    python benchmarks/investigations/zipf_reasons.py frequency-source [--models all-MiniLM-L6-v2]
        [--poolings embeddings-avg]

``static-table`` (reason 2, the paper's setting): Zipfian whitening on a static word table. Does it beat uniform
whitening there, with these models' tables and these frequencies? The model's input word-embedding table (no
position embeddings, no LayerNorm: what ``embeddings-avg`` adds) is the static table; a sentence is the uniform
mean of its non-special tokens' rows. Rows (five-task wmean average, Spearman x 100; every fit as the paper's
Algorithm 1 or the whitevec baseline):

* ``raw``: the static mean;
* ``whitening (sentences, per task)``: whitevec's baseline, fitted on each task's target sentence vectors;
* ``uniform whitening (vocabulary)``: the paper's uniform baseline, mean and covariance over the table's
  non-special rows, each row weighing the same;
* ``Zipfian whitening (vocabulary, F)``: mean and covariance over the rows weighted by p(w) from counts F (the
  three of ``frequency-source``), smoothed as whitevec smooths (a row never counted weighs as a very rare
  token).

Whitening is affine, so whitening the rows and then taking the mean equals whitening the mean vector.

    python benchmarks/investigations/zipf_reasons.py static-table [--models all-MiniLM-L6-v2,all-mpnet-base-v2]

An investigation of 2026-12-04, not part of the maintained suite (`make bench`). Backs
docs/notes/zipf-reasons.md, reasons 1 (web-scale counts) and 2 (the static word table, the paper's setting).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.sts import STS_TASKS, run_method, target_union

from whitevec.datasets import load_sts_task
from whitevec.encoders.token_weights import TokenFrequencies, count_frequencies
from whitevec.encoders.transformer import Encoder
from whitevec.evaluation.sts import aggregate, score_pairs
from whitevec.transforms import Whitening

SCALE = 1e9  # wordfreq gives proportions; counts are integers: tokens per billion words


def wordfreq_counts(tokenizer: object, specials: tuple[int, ...]) -> np.ndarray:
    """Token counts (per SCALE words) of wordfreq's large English list, each word cut by ``tokenizer``."""
    from wordfreq import get_frequency_dict

    frequencies = get_frequency_dict("en", wordlist="large")
    words = list(frequencies)
    ids = tokenizer(words, add_special_tokens=False)["input_ids"]  # type: ignore[operator]
    counts = np.zeros(len(tokenizer), dtype=np.float64)  # type: ignore[arg-type]
    for word, token_ids in zip(words, ids, strict=True):
        np.add.at(counts, np.asarray(token_ids, dtype=np.int64), frequencies[word] * SCALE)
    counts[list(specials)] = 0
    return np.rint(counts).astype(np.int64)


def frequency_sources(encoder: Encoder, union: list[str], model: str) -> dict[str, TokenFrequencies]:
    """The three counts of the module docstring, with ``encoder``'s tokenizer; ``union``: the sts sentences."""
    sts = count_frequencies(encoder.tokenizer, union, encoder.max_length, model=model, source="sts")
    web = wordfreq_counts(encoder.tokenizer, sts.special_ids)
    punct = web.copy()
    missing = (web == 0) & (sts.counts > 0)
    # Tokens wordfreq never produces keep their share of the sts counts, scaled to the web total.
    share = sts.counts[missing].sum() / sts.counts.sum()
    punct[missing] = np.rint(sts.counts[missing] / sts.counts[missing].sum() * share / (1 - share) * web.sum())
    sources = {"sts": sts}
    for name, counts in (("wordfreq", web), ("wordfreq+punct", punct)):
        # n_texts sets uSIF's average sentence length: that of the evaluated sentences.
        sources[name] = TokenFrequencies(
            counts=counts,
            n_texts=max(1, round(counts.sum() / sts.average_length)),
            tokenizer_fingerprint=sts.tokenizer_fingerprint,
            special_ids=sts.special_ids,
            model=model,
            source=name,
        )
    return sources


def frequency_source(args: argparse.Namespace) -> None:
    """Reason 1: the rows of results_token_weights.py with the token counts of each source."""
    tasks = [load_sts_task(name) for name in STS_TASKS]
    union = target_union(tasks)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("| model | pooling | frequencies | tokens counted | method | " + " | ".join(STS_TASKS) + " | average |")
    print("|---|---|---|---:|---|" + "---:|" * (len(STS_TASKS) + 1))
    for model in args.models.split(","):
        encoder = Encoder(model, pooling="last-avg")
        sources = frequency_sources(encoder, union, model)
        sts = sources["sts"]
        for pooling in args.poolings.split(","):
            each = encoder.with_pooling(pooling)
            rows = [("—", "raw"), ("—", "whitening")] + [
                (name, method) for method in args.methods.split(",") for name in sources
            ]
            for source, method in rows:
                started = time.perf_counter()
                frequencies = sources.get(source, sts)
                scores = [run_method(each, method, task, frequencies).wmean for task in tasks]
                counted = f"{int(np.count_nonzero(frequencies.counts)):,}" if source != "—" else "—"
                cells = " | ".join(f"{s:.2f}" for s in scores)
                print(
                    f"| {model} | {pooling} | {source} | {counted} | {method} | {cells} | "
                    f"{sum(scores) / len(scores):.2f} |",
                    flush=True,
                )
                print(f"  ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        encoder.close()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def static_table(args: argparse.Namespace) -> None:
    """Reason 2: the model's word-embedding table as a static encoder, whitened uniformly and by Zipf."""
    tasks = [load_sts_task(name) for name in STS_TASKS]
    union = target_union(tasks)
    print(f"load average before: {os.getloadavg()[0]:.2f}\n")
    print("| model | method | " + " | ".join(STS_TASKS) + " | average |")
    print("|---|---|" + "---:|" * (len(STS_TASKS) + 1))
    for model in args.models.split(","):
        encoder = Encoder(model, pooling="last-avg")
        table = encoder.model.get_input_embeddings().weight.detach().double().numpy()
        sources = frequency_sources(encoder, union, model)
        specials = np.asarray(sources["sts"].special_ids, dtype=np.int64)
        ordinary = np.setdiff1d(np.arange(table.shape[0]), specials)

        def static_mean(texts: list[str], table: np.ndarray = table, encoder: Encoder = encoder) -> np.ndarray:
            ids = encoder.tokenizer(
                texts, add_special_tokens=False, truncation=True, max_length=encoder.max_length
            )["input_ids"]
            return np.stack([table[i].mean(axis=0) if i else np.zeros(table.shape[1]) for i in ids])

        fits: dict[str, Whitening | None] = {"raw": None, "whitening (sentences, per task)": None}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # near-singular directions of the table are floored, as always
            fits["uniform whitening (vocabulary)"] = Whitening().fit(table[ordinary])
            for name, frequencies in sources.items():
                p = frequencies.probabilities()[ordinary]
                # Weights summing to the row count: Whitening divides the covariance by (total weight - 1).
                fits[f"Zipfian whitening (vocabulary, {name})"] = Whitening().fit(
                    table[ordinary], sample_weight=p / p.sum() * len(ordinary)
                )
        for method, fitted in fits.items():
            averages = []
            for task in tasks:
                transform = fitted
                if method.startswith("whitening (sentences"):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        transform = Whitening().fit(static_mean(task.sentences("target")))

                def vectors_of(texts: list[str], transform: Whitening | None = transform) -> np.ndarray:
                    x = static_mean(texts)
                    return x if transform is None else transform.transform(x)

                subsets, _ = score_pairs(task, vectors_of)
                averages.append(aggregate(subsets)[1])
            cells = " | ".join(f"{a:.2f}" for a in averages)
            print(f"| {model} | {method} | {cells} | {sum(averages) / len(averages):.2f} |", flush=True)
        encoder.close()
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    runs = parser.add_subparsers(dest="reason", required=True)
    source = runs.add_parser("frequency-source", help="reason 1: the counts from three sources")
    source.add_argument("--models", default="all-MiniLM-L6-v2")
    source.add_argument("--poolings", default="embeddings-avg")
    source.add_argument("--methods", default="zipfian,sif,usif")
    table = runs.add_parser("static-table", help="reason 2: the static word table")
    table.add_argument("--models", default="all-MiniLM-L6-v2,all-mpnet-base-v2")
    args = parser.parse_args()
    if args.reason == "frequency-source":
        frequency_source(args)
    else:
        static_table(args)


if __name__ == "__main__":
    main()
