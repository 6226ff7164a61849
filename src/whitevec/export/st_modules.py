"""sentence-transformers modules for what sentence-transformers lacks, named by class path in the
``modules.json`` of a folder ``whitevec export-st`` writes.

- :class:`LayerMeanPooling`: the mean of the token means of several ``hidden_states`` (first-last-avg and the
  other layer poolings of :mod:`whitevec.encoders.pooling`), computed by the same function the Encoder uses.
- :class:`FlowModule`: a fitted :class:`whitevec.transforms.Flow` applied to the sentence vector.

Importing this module loads torch, sentence-transformers and :mod:`whitevec.encoders.token_pooling` only; the
flow's
layers are imported when a FlowModule is built. sentence-transformers 6 imports a module class outside its own
package only when asked to: load such a folder with ``SentenceTransformer(folder, trust_remote_code=True)``.
"""

from __future__ import annotations

from typing import Any

import torch

try:  # sentence-transformers 6
    from sentence_transformers.base.modules.module import Module
except ImportError:  # pragma: no cover - sentence-transformers 5
    from sentence_transformers.models import Module  # type: ignore[no-redef,attr-defined]

from whitevec.encoders.token_pooling import layer_mean


class LayerMeanPooling(Module):  # type: ignore[misc]
    """Mean over ``layers`` (indices into the transformer's hidden states; 0 is the embedding layer, -1 the
    last) of each layer's token mean over real tokens. Needs the Transformer to return every hidden state
    (``output_hidden_states: true`` in the model's config.json, which export-st writes)."""

    config_keys = ["embedding_dimension", "layers"]  # noqa: RUF012 - sentence-transformers' own declaration

    def __init__(self, embedding_dimension: int, layers: list[int]) -> None:
        super().__init__()
        self.embedding_dimension = int(embedding_dimension)
        self.layers = [int(i) for i in layers]

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        hidden_states = features.get("all_layer_embeddings")
        if hidden_states is None:
            raise ValueError(
                "LayerMeanPooling needs every hidden state: set output_hidden_states to true in the model's "
                "config.json"
            )
        features["sentence_embedding"] = layer_mean(hidden_states, self.layers, features["attention_mask"])
        return features

    def get_embedding_dimension(self) -> int:
        return self.embedding_dimension

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        self.save_config(output_path)


class FlowModule(Module):  # type: ignore[misc]
    """A fitted whitevec Flow (Glow): sentence vector in, its Gaussian latent out, same size. The weights are
    the Flow's own, saved as safetensors under ``glow.*``."""

    config_keys = ["glow_args", "dtype"]  # noqa: RUF012 - sentence-transformers' own declaration

    def __init__(self, glow_args: dict[str, Any], dtype: str = "float32") -> None:
        """``glow_args``: the keyword arguments of :class:`whitevec.transforms.flow_layers.Glow` (dim, levels,
        depth, width, hidden_layers, affine, mixing); ``dtype``: the flow's working precision."""
        super().__init__()
        from whitevec.transforms.flow_layers import Glow

        self.glow_args, self.dtype = dict(glow_args), dtype
        self._torch_dtype = getattr(torch, dtype)
        # The initial weights do not matter: load replaces every one with the saved ones.
        self.glow = Glow(**self.glow_args, generator=torch.Generator().manual_seed(0)).to(self._torch_dtype)
        self.glow.eval()

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        x = features["sentence_embedding"]
        z, _ = self.glow(x.to(self._torch_dtype))
        features["sentence_embedding"] = z.to(x.dtype)
        return features

    def get_embedding_dimension(self) -> int:
        return int(self.glow_args["dim"])

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs: Any) -> FlowModule:  # type: ignore[override]
        hub = {
            key: kwargs[key] for key in ("token", "cache_folder", "revision", "local_files_only") if key in kwargs
        }
        config = cls.load_config(model_name_or_path, subfolder=subfolder, **hub)
        module = cls(**config)
        cls.load_torch_weights(model_name_or_path, subfolder=subfolder, model=module, **hub)
        module.glow.eval()
        return module
