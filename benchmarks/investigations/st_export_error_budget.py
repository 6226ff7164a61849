"""Where the export error of a full whitening comes from (all-MiniLM-L6-v2, pooling ``model``): a quality figure.

Splits docs/results/st_equality.md's export difference for ``whitening`` into its two sources, each measured
alone on the same 1000 STS-B sentences (the transform fitted on the 4000 before them, as st_equality.py does):
- amplification: whitevec's float64 transform applied to whitevec's and to sentence-transformers' pooled
  vectors (which differ by the load figure, ~1e-7): whitening scales the smallest directions by
  lambda^-1/2, so it multiplies that input difference;
- arithmetic: sentence-transformers' float32 Dense layer against the same affine map in float64, both on
  sentence-transformers' own vectors (identical input).

    WHITEVEC_DATA=../shared/data python benchmarks/investigations/st_export_error_budget.py

An investigation of 2026-12-03, not part of the maintained suite (`make bench`). Backs docs/results/st_equality.md,
"Where the full-whitening export difference comes from".
"""

from __future__ import annotations

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from whitevec.datasets import load_sts_task
from whitevec.encoders.transformer import Encoder
from whitevec.export.sentence_transformers import affine_parts
from whitevec.transforms import Whitening


def main() -> None:
    sentences = load_sts_task("stsb").sentences("target")
    fit_texts, eval_texts = sentences[:4000], sentences[4000:5000]
    with Encoder("all-MiniLM-L6-v2", "model", cache=False) as encoder:
        whitening = Whitening().fit(encoder.encode(fit_texts))
        ours = encoder.encode(eval_texts)
        theirs = SentenceTransformer(str(encoder.model_path), device="cpu").encode(eval_texts, batch_size=32)
    weight, bias = affine_parts(whitening, ours.shape[1])
    exact = theirs.astype(np.float64) @ weight.T + bias
    dense = torch.nn.Linear(weight.shape[1], weight.shape[0])
    dense.weight.data = torch.from_numpy(weight.astype(np.float32))
    dense.bias.data = torch.from_numpy(bias.astype(np.float32))
    with torch.no_grad():
        float32_dense = dense(torch.from_numpy(theirs)).numpy()
    print(f"pooled vectors, whitevec vs sentence-transformers: {np.abs(ours - theirs).max():.2e}")
    print(
        "amplification (float64 whitening of both): "
        f"{np.abs(whitening.transform(ours) - whitening.transform(theirs)).max():.2e}"
    )
    print(f"arithmetic (float32 Dense vs float64, same input): {np.abs(float32_dense - exact).max():.2e}")
    print(f"largest whitened value: {np.abs(exact).max():.3g}")
    # The map's gain: its largest singular value, the most it can stretch an input difference.
    print(f"largest singular value of the whitening map: {np.linalg.svd(weight, compute_uv=False).max():.3g}")


if __name__ == "__main__":
    main()
