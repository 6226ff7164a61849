"""Padded tokens and forward calls of the Ray engine's encoding, by how many corpus units one actor call takes.

The corpus of bench_scale.py (the unique STS sentences), planned into units as ``ray_build`` plans it; each
call's texts are sorted and cut into batches as ``Encoder.encode`` does (``length_batches``, batch 64), so the
counts are exact, not timed. Quoted in the docstring of ``EncodeUnits.__call__`` and the README.

    python benchmarks/investigations/ray_padding.py   (WHITEVEC_DATA set; about a minute: it tokenizes the corpus)

An investigation of 2026-12-04, not part of the maintained suite (`make bench`). Backs
docs/notes/ray-build-costs.md (actor calls take up to 4 units as one sorted batch list, bb55a4c).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: benchmarks.common

from benchmarks.common.scale import BATCH, MODEL, POOLING, write_corpus

from whitevec.datasets.shards import corpus_files, plan_units, read_unit
from whitevec.encoders.compute import length_batches
from whitevec.encoders.transformer import Encoder
from whitevec.engines.ray import auto_unit_bytes, units_per_call


def main() -> None:
    corpus = Path(tempfile.mkdtemp(prefix="ray-padding-")) / "corpus.jsonl"
    docs = write_corpus(corpus, 10**9)
    files = corpus_files(str(corpus))
    units = plan_units(files, auto_unit_bytes(files))
    encoder = Encoder(MODEL, pooling=POOLING, cache=False)
    texts = {u.index: [d.text for d in read_unit(u)] for u in units}

    def cost(batch_texts: list[str]) -> tuple[int, int]:
        ids = encoder.tokenizer(batch_texts, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        lengths = sorted((min(len(x), encoder.max_length) for x in ids), reverse=True)
        cuts = length_batches(lengths, BATCH)
        return sum((stop - start) * lengths[start] for start, stop in cuts), len(cuts)

    print(f"{docs} sentences in {len(units)} units; 2 workers take {units_per_call(len(units), 2)} units a call")
    for per_call in (1, 2, 4, len(units)):
        tokens = calls = 0
        for i in range(0, len(units), per_call):
            t, c = cost([s for u in units[i : i + per_call] for s in texts[u.index]])
            tokens, calls = tokens + t, calls + c
        print(f"{per_call:3d} units a call: {tokens:,} padded tokens in {calls} forward calls")


if __name__ == "__main__":
    main()
