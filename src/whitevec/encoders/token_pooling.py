"""Token vectors to one sentence vector: the arithmetic of every pooling, on torch tensors only.

The Encoder uses these, and so does the pooling module an exported sentence-transformers folder loads
(:mod:`whitevec.export.st_modules`), so the two compute the same numbers. Masks mark real tokens with 1 and padding
with 0; batches are padded on the right.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def layer_mean(
    hidden_states: Sequence[torch.Tensor],
    layers: Sequence[int],
    attention_mask: torch.Tensor,
    token_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean over ``layers`` (indices into ``hidden_states``) of each layer's token mean over real tokens, in
    float32.

    With ``token_weights`` (batch x tokens), each layer's vector is ``sum_t w_t v_t / n`` with ``n`` the number
    of tokens ``attention_mask`` marks (the caller leaves special tokens out of it and gives them weight 0): the
    SIF / uSIF ``(1/|s|) sum w(t) v_t``, not divided by ``sum w``."""
    mask = attention_mask.unsqueeze(-1).to(torch.float32)
    counts = mask.sum(dim=1).clamp(min=1.0)
    if token_weights is not None:
        mask = mask * token_weights.unsqueeze(-1).to(torch.float32)
    total = sum((hidden_states[i].float() * mask).sum(dim=1) / counts for i in layers)
    return total / len(layers)  # type: ignore[return-value]


def sentence_transformers_pool(
    token_embeddings: torch.Tensor, attention_mask: torch.Tensor, modes: Sequence[str]
) -> torch.Tensor:
    """sentence-transformers' ``Pooling`` (padded path, no prompt excluded): the vectors of ``modes``
    concatenated in the order given, as its forward does."""
    outputs = []
    dtype = token_embeddings.dtype
    accumulate = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    for mode in modes:
        if mode == "cls":
            first = attention_mask.to(torch.int).argmax(dim=1)
            index = first.unsqueeze(-1).unsqueeze(1).expand(-1, 1, token_embeddings.shape[-1])
            outputs.append(torch.gather(token_embeddings, 1, index).squeeze(1))
        elif mode == "max":
            mask = attention_mask.unsqueeze(-1).expand_as(token_embeddings).to(dtype)
            outputs.append(token_embeddings.masked_fill(mask == 0, float("-inf")).max(dim=1).values)
        elif mode in ("mean", "mean_sqrt_len_tokens"):
            mask = attention_mask.unsqueeze(-1).to(dtype)
            summed = (token_embeddings * mask).sum(dim=1, dtype=accumulate)
            counts = torch.clamp(mask.sum(dim=1, dtype=accumulate), min=1e-9)
            outputs.append((summed / (counts if mode == "mean" else torch.sqrt(counts))).to(dtype))
        elif mode == "weightedmean":
            mask = attention_mask.unsqueeze(-1).to(accumulate)
            weights = torch.arange(
                1, token_embeddings.shape[1] + 1, device=token_embeddings.device, dtype=accumulate
            ).view(1, -1, 1)
            weights = weights - attention_mask.to(torch.int32).argmax(dim=1).view(-1, 1, 1)
            weighted = mask * weights
            summed = (token_embeddings * weighted).sum(dim=1)
            outputs.append((summed / torch.clamp(weighted.sum(dim=1), min=1e-9)).to(dtype))
        elif mode == "lasttoken":
            seq_len = token_embeddings.shape[1]
            values, indices = attention_mask.flip(1).max(1)
            indices = torch.where(values == 0, seq_len - 1, indices)
            index = (seq_len - indices - 1).unsqueeze(-1).unsqueeze(1).expand(-1, 1, token_embeddings.shape[-1])
            mask = attention_mask.unsqueeze(-1).expand_as(token_embeddings).to(dtype)
            outputs.append(torch.gather(token_embeddings * mask, 1, index).squeeze(dim=1))
        else:
            raise ValueError(f"unknown sentence-transformers pooling mode {mode!r}")
    return torch.cat(outputs, dim=-1)
