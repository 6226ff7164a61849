"""How the forward passes run: the bf16 and int8 compute backends, length batches that trade padding for
passes, and the torch activation of a Dense layer."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import torch

from whitevec.encoders.models.st_config import DenseLayer, UnsupportedModuleError
from whitevec.errors import BadInputError, WhitevecWarning


def default_device() -> str:
    """The device an Encoder runs on when none is named: the GPU when there is one."""
    return "cuda" if torch.cuda.is_available() else "cpu"


# What one more forward pass costs beyond its tokens, counted in tokens, per compute backend: splitting a batch
# pays this once more and saves the padding of the shorter texts. A forward of n texts of L tokens takes about
# (overhead + n * L) times the cost of one token. Measured with benchmarks/investigations/forward_cost.py on
# all-MiniLM-L6-v2 (2 CPU threads): float32 48-64, int8 27, bf16 189-271 (oneDNN bf16 matmuls cost more per call).
FORWARD_OVERHEAD_TOKENS = {"torch": 64, "int8": 32, "bf16": 224}

# bf16 pads each batch to a multiple of this many tokens. Why: oneDNN builds (JITs) a kernel for every new
# matrix shape; with lengths free, the server's mixes of queries keep making new shapes. Batches of 32 shuffled
# Cranfield queries: 391-409 queries/s unrounded, 419-451 rounded to 8 (benchmarks/results/bf16_shapes.md).
BF16_LENGTH_MULTIPLE = 8


def length_batches(
    lengths: Sequence[int], batch_size: int, overhead_tokens: int = FORWARD_OVERHEAD_TOKENS["torch"]
) -> list[tuple[int, int]]:
    """``(start, stop)`` slices of ``lengths`` (token counts, longest first) into batches of at most
    ``batch_size``, each padded only to its own longest text: within every run of ``batch_size``, the cuts
    that make the fewest padded tokens plus ``overhead_tokens`` per batch (exact, by dynamic programming)."""
    slices: list[tuple[int, int]] = []
    for first in range(0, len(lengths), batch_size):
        run = lengths[first : first + batch_size]
        n = len(run)
        # best[j]: the least cost of the first j texts; cut[j]: where the last batch of that best plan starts.
        best = [0.0] + [float("inf")] * n
        cut = [0] * (n + 1)
        for stop in range(1, n + 1):
            for start in range(stop):
                cost = best[start] + overhead_tokens + (stop - start) * run[start]
                if cost < best[stop]:
                    best[stop], cut[stop] = cost, start
        bounds = []
        stop = n
        while stop > 0:
            bounds.append((first + cut[stop], first + stop))
            stop = cut[stop]
        slices.extend(reversed(bounds))
    return slices


def to_bfloat16(model: Any, device: torch.device) -> Any:
    """The model in bfloat16: float32's range with an 8-bit mantissa, so no overflow; poolings average in
    float32."""
    if device.type == "cpu" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        warnings.warn(
            "this CPU has no bfloat16 instructions (AVX512-BF16 or AMX): backend 'bf16' is emulated and slower "
            "than float32 here; use backend 'int8' for a faster CPU path",
            WhitevecWarning,
            stacklevel=4,  # the code that made the Encoder (via Encoder.__init__ and Encoder._load_model)
        )
    return model.to(torch.bfloat16)


def quantize_int8(model: Any, device: torch.device) -> Any:
    """Dynamic int8 quantisation (per-channel weights, activations quantised per batch) of the linear layers.

    The feed-forward output projections (``*.output.dense`` outside attention) stay float: their GELU inputs
    have outlier activations that per-tensor int8 rounds badly (cosine to float vectors 0.95 with them
    quantised, 0.99 without, on STS-B with all-MiniLM-L6-v2). CPU only.
    """
    if device.type != "cpu":
        raise BadInputError(f"backend 'int8' runs on the CPU only; got device {device.type!r}. Use device='cpu'.")
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    spec = {
        name: per_channel_dynamic_qconfig
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and not (name.endswith("output.dense") and "attention" not in name)
    }
    with warnings.catch_warnings():
        # torch marks torch.ao.quantization deprecated in favour of torchao, which is not a dependency.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        return quantize_dynamic(model, spec, dtype=torch.qint8)


def _activation(class_path: str) -> torch.nn.Module:
    """A ``torch.nn`` activation from its class path (a Dense layer's ``activation_function``)."""
    import importlib

    module_name, _, class_name = class_path.rpartition(".")
    try:
        klass = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UnsupportedModuleError(f"unknown Dense activation {class_path!r}") from exc
    if not (isinstance(klass, type) and issubclass(klass, torch.nn.Module)):
        raise UnsupportedModuleError(f"Dense activation {class_path!r} is not a torch.nn module")
    return klass()


def dense_modules(layer: DenseLayer, device: torch.device) -> tuple[torch.nn.Module, torch.nn.Module]:
    """A sentence-transformers Dense layer as torch modules on ``device``: its linear layer and its activation."""
    linear = torch.nn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None)
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(layer.weight))
        if layer.bias is not None:
            linear.bias.copy_(torch.from_numpy(layer.bias))
    return linear.to(device).eval(), _activation(layer.activation)
