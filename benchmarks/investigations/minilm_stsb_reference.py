"""The reference numbers of tests/test_cli.py::test_default_model_reproduces_reference_numbers, computed without
whitevec's encoder, transforms or scoring: transformers, numpy and scipy only.

all-MiniLM-L6-v2, last-avg (the masked mean of the last layer), on STS-B test (1,379 pairs, 2,552 unique
sentences): Spearman x 100 of the raw cosines, and of the cosines after BERT-whitening (Su et al. 2021:
x -> (x - mu) U S^-1/2 with Sigma = U S U^T) fitted on the test split's sentences, with and without whitevec's
eigenvalue floor (eps x the largest). Output of 2026-12-07: raw 82.03, whitened 78.98 (both floors).

    python benchmarks/investigations/minilm_stsb_reference.py MODEL_FOLDER DATA_FOLDER

An investigation, not part of the maintained suite (`make bench`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr
from transformers import AutoModel, AutoTokenizer

EPS = 1e-6  # whitevec's Whitening default: eigenvalues below EPS x the largest are raised to it


def stsb_test(data: Path) -> list[tuple[str, str, float]]:
    """STS-B test's pairs: TAB-separated, score in field 5, sentences in fields 6 and 7, no quoting."""
    pairs = []
    for line in (data / "sts" / "stsb" / "original" / "sts-test.csv").read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        pairs.append((fields[5], fields[6], float(fields[4])))
    return pairs


def last_avg(folder: str, texts: list[str]) -> np.ndarray:
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    rows = []
    with torch.no_grad():
        for start in range(0, len(texts), 64):
            batch = tokenizer(texts[start : start + 64], padding=True, truncation=True, return_tensors="pt")
            mask = batch["attention_mask"].unsqueeze(-1).float()
            rows.append(((model(**batch).last_hidden_state * mask).sum(1) / mask.sum(1)).double().numpy())
    return np.concatenate(rows)


def main() -> None:
    folder, data = sys.argv[1], Path(sys.argv[2])
    pairs = stsb_test(data)
    texts = list(dict.fromkeys(s for a, b, _ in pairs for s in (a, b)))
    vectors = last_avg(folder, texts)
    row = {text: i for i, text in enumerate(texts)}
    gold = np.array([score for _, _, score in pairs])

    def spearman(space: np.ndarray) -> float:
        a, b = space[[row[p[0]] for p in pairs]], space[[row[p[1]] for p in pairs]]
        cosines = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        return float(100 * spearmanr(cosines, gold).statistic)

    mean = vectors.mean(0)
    eigenvectors, eigenvalues, _ = np.linalg.svd(np.cov(vectors - mean, rowvar=False))
    floor = EPS * eigenvalues.max()
    n_floored = int((eigenvalues < floor).sum())
    print(f"{len(pairs)} pairs, {len(texts)} sentences")
    print(f"raw {spearman(vectors):.2f}")
    centred = vectors - mean
    print(f"whitened {spearman(centred @ (eigenvectors / np.sqrt(eigenvalues))):.2f}")
    floored = np.maximum(eigenvalues, floor)
    print(f"whitened, {n_floored} floored {spearman(centred @ (eigenvectors / np.sqrt(floored))):.2f}")


if __name__ == "__main__":
    main()
