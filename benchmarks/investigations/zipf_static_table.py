"""Zipfian whitening in the paper's own setting: a static word table. Does it beat uniform whitening there, with
these models' tables and these frequencies?

The model's input word-embedding table (no position embeddings, no LayerNorm: what ``embeddings-avg`` adds) is
the static table; a sentence is the uniform mean of its non-special tokens' rows. Rows (five-task wmean average,
Spearman x 100; every fit as the paper's Algorithm 1 or the whitevec baseline):

* ``raw``: the static mean;
* ``whitening (sentences, per task)``: whitevec's baseline, fitted on each task's target sentence vectors;
* ``uniform whitening (vocabulary)``: the paper's uniform baseline, mean and covariance over the table's
  non-special rows, each row weighing the same;
* ``Zipfian whitening (vocabulary, F)``: mean and covariance over the rows weighted by p(w) from counts F (the
  three of benchmarks/investigations/zipf_frequency_source.py), smoothed as whitevec smooths (a row never
  counted weighs as a very rare token).

Whitening is affine, so whitening the rows and then taking the mean equals whitening the mean vector.

    python benchmarks/investigations/zipf_static_table.py [--models all-MiniLM-L6-v2,all-mpnet-base-v2]

An investigation, not part of the maintained suite (`make bench`). Backs docs/notes/zipf-reasons.md, reason 2 (the
static word table, the paper's setting).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for the suite's modules

from zipf_frequency_source import frequency_sources

from results_token_weights import TASKS, target_union
from whitevec.datasets import load_sts_task
from whitevec.encoders.transformer import Encoder
from whitevec.evaluation.sts import aggregate, score_pairs
from whitevec.transforms import Whitening


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="all-MiniLM-L6-v2,all-mpnet-base-v2")
    args = parser.parse_args()
    tasks = [load_sts_task(name) for name in TASKS]
    union = target_union(tasks)
    print(f"load average before: {os.getloadavg()[0]:.2f}\n")
    print("| model | method | " + " | ".join(TASKS) + " | average |")
    print("|---|---|" + "---:|" * (len(TASKS) + 1))
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


if __name__ == "__main__":
    main()
