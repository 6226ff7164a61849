"""The poolings: how an Encoder makes one sentence vector of a transformers model's token vectors, each by name
and exactly defined.

Every pooling averages token vectors over the real tokens of a sentence (padding masked out; [CLS] and [SEP]
included, as in BERT-whitening, BERT-flow and sentence-transformers) from one or more entries of the model's
``hidden_states`` tuple, then averages those layer means. ``hidden_states[0]`` is the embedding layer output,
``hidden_states[i]`` the output of transformer layer i, ``hidden_states[-1]`` the last layer.

=====================  ==========================================================================
name                   vector
=====================  ==========================================================================
cls                    hidden_states[-1][:, 0]: the last layer's first ([CLS]) token
pooler                 the model's pooler output (tanh dense over [CLS]); error if it has no pooler
last-avg               token mean of hidden_states[-1]
first-last-avg         mean of the token means of hidden_states[1] and hidden_states[-1] (first transformer
                       layer and last: the BERT-whitening / BERT-flow definition)
embeddings-last-avg    mean of the token means of hidden_states[0] and hidden_states[-1] (older SimCSE code)
last2avg               mean of the token means of hidden_states[-2] and hidden_states[-1]
embeddings-avg         token mean of hidden_states[0] (static token + position embeddings, layer-normed)
"i,j,..."              mean of the token means of the listed hidden_states indices, e.g. "0,-1" or [2, -1]
model                  what the folder's sentence-transformers modules compute (Pooling mode, Dense layers,
                       Normalize), as SentenceTransformer(folder).encode(texts) does; the default for such folders
=====================  ==========================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from whitevec.errors import BadInputError

# What a pooling reads (Pooling.kind): a token mean over layers, one token's vector, the pooler output, or the
# folder's own sentence-transformers modules.
MEAN_KIND = "mean"
CLS_KIND = "cls"
POOLER_KIND = "pooler"
MODEL_KIND = "model"
# The pooling an Encoder uses when none is named: the folder's own (sentence-transformers modules) when it has
# them, else this one.
FALLBACK_POOLING = "first-last-avg"


@dataclass(frozen=True)
class Pooling:
    """How token vectors become one sentence vector: ``kind`` and the ``hidden_states`` indices it reads."""

    name: str
    kind: str
    layers: tuple[int, ...]

    def resolved_layers(self, n_hidden_states: int) -> tuple[int, ...]:
        """Layer indices made non-negative for a model with ``n_hidden_states`` entries (layers + 1)."""
        out = []
        for index in self.layers:
            real = index + n_hidden_states if index < 0 else index
            if not 0 <= real < n_hidden_states:
                raise BadInputError(
                    f"pooling {self.name!r} reads hidden_states[{index}] but the model has only "
                    f"{n_hidden_states} (indices {-n_hidden_states}..{n_hidden_states - 1})"
                )
            out.append(real)
        return tuple(out)


POOLINGS: dict[str, Pooling] = {
    "cls": Pooling("cls", CLS_KIND, (-1,)),
    "pooler": Pooling("pooler", POOLER_KIND, ()),
    "last-avg": Pooling("last-avg", MEAN_KIND, (-1,)),
    "first-last-avg": Pooling("first-last-avg", MEAN_KIND, (1, -1)),
    "embeddings-last-avg": Pooling("embeddings-last-avg", MEAN_KIND, (0, -1)),
    "last2avg": Pooling("last2avg", MEAN_KIND, (-2, -1)),
    "embeddings-avg": Pooling("embeddings-avg", MEAN_KIND, (0,)),
    "model": Pooling("model", MODEL_KIND, (-1,)),
}


def get_pooling(spec: str | Sequence[int] | Pooling) -> Pooling:
    """A pooling from its name, a comma-separated string of layer indices, or a list of indices."""
    if isinstance(spec, Pooling):
        return spec
    if isinstance(spec, str):
        key = spec.strip().lower()
        if key in POOLINGS:
            return POOLINGS[key]
        parts = [p.strip() for p in key.removeprefix("layers:").split(",") if p.strip()]
        try:
            indices = [int(p) for p in parts]
        except ValueError:
            indices = []
        if not indices:
            raise BadInputError(
                f"unknown pooling {spec!r}; valid: {', '.join(POOLINGS)}, or a list of hidden_states indices "
                "such as '0,-1'"
            )
    else:
        indices = [int(i) for i in spec]
        if not indices:
            raise BadInputError("a layer-list pooling needs at least one hidden_states index")
    return Pooling("layers:" + ",".join(str(i) for i in indices), MEAN_KIND, tuple(indices))


def check_weighted_pooling(pooling: Pooling) -> None:
    """BadInputError unless token weights can apply to ``pooling`` (a mean kind)."""
    if pooling.kind != MEAN_KIND:
        raise BadInputError(
            f"token weights apply inside the token mean of a mean pooling (last-avg, first-last-avg, "
            f"embeddings-avg, a list of layers); pooling {pooling.name!r} "
            + (
                "reads one token's vector"
                if pooling.kind in (CLS_KIND, POOLER_KIND)
                else "is the folder's own modules"
            )
            + ", so weights cannot apply to it"
        )
