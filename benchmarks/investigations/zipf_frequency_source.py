"""Does Zipfian whitening (and SIF, uSIF) fall short here because the token frequencies come from the evaluated
sentences (about 22,000) rather than a web-scale corpus? The same rows as results_token_weights.py, with the
frequencies counted three ways:

* ``sts``: the union of the five tasks' sentences (results_token_weights.py's counts);
* ``wordfreq``: web-scale English word frequencies (the ``wordfreq`` package's "large" list: Wikipedia,
  subtitles, news, books, web text, Twitter, Reddit), each word cut by the model's own tokenizer, so a token's
  count is the summed frequency of the words it occurs in (BERT's WordPiece cuts each word on its own, so this
  is the token count of the underlying corpus, but for punctuation, which wordfreq does not count: such tokens
  get the file's smoothing, i.e. weigh as rare tokens);
* ``wordfreq+punct``: as ``wordfreq``, with the tokens wordfreq never produces (punctuation, symbols) given the
  share they have in the ``sts`` counts.

    pip install wordfreq
    python benchmarks/investigations/zipf_frequency_source.py [--models all-MiniLM-L6-v2]
        [--poolings embeddings-avg]

An investigation, not part of the maintained suite (`make bench`). Backs docs/notes/zipf-reasons.md, reason 1
(web-scale counts).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for the suite's modules

from results_token_weights import TASKS, run_method, target_union
from whitevec.datasets import load_sts_task
from whitevec.encoders.token_weights import TokenFrequencies, count_frequencies
from whitevec.encoders.transformer import Encoder

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="all-MiniLM-L6-v2")
    parser.add_argument("--poolings", default="embeddings-avg")
    parser.add_argument("--methods", default="zipfian,sif,usif")
    args = parser.parse_args()
    tasks = [load_sts_task(name) for name in TASKS]
    union = target_union(tasks)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("| model | pooling | frequencies | tokens counted | method | " + " | ".join(TASKS) + " | average |")
    print("|---|---|---|---:|---|" + "---:|" * (len(TASKS) + 1))
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


if __name__ == "__main__":
    main()
