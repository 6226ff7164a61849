"""The PyTorch layers of :class:`whitevec.transforms.Flow`: Glow for vectors, after BERT-flow.

BERT-flow (Li et al., 2020) reshapes a sentence vector to a ``[1, 1, d]`` image and runs Glow without the
spatial squeeze, so every 1x1 convolution is a plain ``d x d`` linear map. These layers work on ``(n, d)``
tensors directly. Each layer maps ``x -> (y, log|det dy/dx|)`` per row and has an exact ``inverse``.

All randomness (the initial rotations and conditioner weights) comes from a ``torch.Generator`` passed in, so a
seed fixes the result without touching the global RNG.
"""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import nn

# Affine coupling log-scales pass through c * tanh(raw / c): identity near zero, bounded by +-c, so a single
# step can neither blow a value up nor collapse it (the sigmoid(raw + 2) of Glow only contracts and starts off
# the identity). e^2 ~ 7.4 per step is plenty; several steps compose.
_LOG_SCALE_CLAMP = 2.0
# With the principal-axes start, an actnorm scales no axis by more than 1 / (this x its largest standard
# deviation): the eigenvalue floor of Whitening(eps=1e-6) (docs/notes/eps-floor.md). Sentence vectors are often
# rank-deficient (all-MiniLM-L6-v2 last-avg on STS-B: smallest / largest eigenvalue 1.7e-19), and scaling their
# null directions up to unit variance turned float32 rounding into latents of 1e15 (docs/notes/flow-budget.md).
PRINCIPAL_AXES_STD_FLOOR = 1e-3


def _uniform_(tensor: torch.Tensor, fan_in: int, generator: torch.Generator) -> None:
    # PyTorch's default Linear init range, drawn from our generator so the seed alone decides the weights.
    bound = 1.0 / math.sqrt(max(fan_in, 1))
    with torch.no_grad():
        tensor.uniform_(-bound, bound, generator=generator)


def _linear(n_in: int, n_out: int, generator: torch.Generator, *, zero: bool = False) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    if zero:
        # Glow zero-initialises the last conditioner layer so each coupling starts as the identity.
        nn.init.zeros_(layer.weight)
        nn.init.zeros_(layer.bias)
    else:
        _uniform_(layer.weight, n_in, generator)
        _uniform_(layer.bias, n_in, generator)
    return layer


class ActNorm(nn.Module):
    """Per-dimension affine map ``y = (x + bias) * exp(logs)``, initialised from data (Glow, section 3.1).

    Until :meth:`initialize_from` is called on a batch the layer is the identity; the data-dependent init makes
    its output zero-mean, unit-variance per dimension on that batch, which is what lets raw sentence vectors of
    any scale go in without separate standardisation.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(dim))
        self.logs = nn.Parameter(torch.zeros(dim))
        self.pending_init = False
        self.relative_floor = 0.0  # see PRINCIPAL_AXES_STD_FLOOR

    @torch.no_grad()
    def initialize_from(self, x: torch.Tensor) -> None:
        mean = x.mean(dim=0)
        std = x.std(dim=0, unbiased=False)
        self.bias.copy_(-mean)
        # The floor keeps a constant dimension from turning into an infinite scale.
        floor = max(1e-6, self.relative_floor * float(std.max()))
        self.logs.copy_(-torch.log(std.clamp_min(floor)))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.pending_init:
            self.initialize_from(x)
            self.pending_init = False
        y = (x + self.bias) * torch.exp(self.logs)
        return y, self.logs.sum().expand(x.shape[0])

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return y * torch.exp(-self.logs) - self.bias


class InvertibleLinear(nn.Module):
    """Glow's invertible 1x1 convolution on a vector: ``y = x W^T`` with ``W = P L (U + diag(sign_s exp(log_s)))``.

    ``P`` (a permutation) and ``sign_s`` are fixed; ``L`` (unit lower), ``U`` (zero-diagonal upper) and ``log_s``
    are learned. ``log|det W| = sum(log_s)`` costs O(d) instead of a determinant, and ``W`` stays invertible for
    any finite parameters. Starts as the LU decomposition of a random rotation, as in Glow; with
    ``pending_init`` set, the first batch through it (the data-dependent init, :meth:`Glow.data_init`) makes it
    the rotation onto that batch's principal axes instead (:meth:`initialize_from`).
    """

    perm: torch.Tensor
    sign_s: torch.Tensor

    def __init__(self, dim: int, generator: torch.Generator) -> None:
        super().__init__()
        q, _ = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))
        p, lower, upper, s = _lu_of(q)
        # Built in float64; the owner casts the whole module to its working dtype. P is kept as the index
        # vector sigma with P[j, sigma[j]] = 1, so applying it is a gather, not a d x d product.
        self.register_buffer("perm", p)
        self.register_buffer("sign_s", torch.sign(s))
        # L's strict lower triangle and U's strict upper triangle share one d x d parameter (its diagonal is
        # unused: L's is 1, U's is sign_s * exp(log_s)). tril/triu cost one elementwise pass each per step,
        # where scattering packed vectors into identity matrices cost several times that at d = 768. The
        # masked-out entries get an exact zero gradient, so their Adam moments stay exactly zero (no
        # subnormal floats, which would slow the CPU down).
        self.lu = nn.Parameter(lower.tril(-1) + upper.triu(1))
        self.log_s = nn.Parameter(torch.log(torch.abs(s)))
        self.dim = dim
        self.pending_init = False

    @torch.no_grad()
    def initialize_from(self, x: torch.Tensor) -> None:
        """Become the rotation onto the principal axes of ``x`` (largest variance first; still a rotation, so
        ``log|det W| = 0`` as at Glow's init). The next step's actnorm then scales each axis to unit variance
        (floored): the flow starts at PCA whitening of its input, and training begins from the linear solution
        instead of having to reach it (an ill-conditioned input's weak directions take Adam more than the
        default budget to scale up from a random rotation; docs/notes/flow-budget.md)."""
        rows = x.double()
        centred = rows - rows.mean(dim=0)
        _, axes = torch.linalg.eigh(centred.T @ centred / max(rows.shape[0] - 1, 1))
        p, lower, upper, s = _lu_of(axes.T.flip(0))
        self.perm.copy_(p)
        self.sign_s.copy_(torch.sign(s))
        self.lu.copy_(lower.tril(-1) + upper.triu(1))
        self.log_s.copy_(torch.log(torch.abs(s)))

    def scale(self) -> torch.Tensor:
        """The diagonal of ``U``."""
        return self.sign_s * torch.exp(self.log_s)

    def factors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``L`` and ``U`` as dense matrices."""
        eye = torch.eye(self.dim, dtype=self.lu.dtype, device=self.lu.device)
        return self.lu.tril(-1) + eye, self.lu.triu(1) + torch.diag(self.scale())

    def weight(self) -> torch.Tensor:
        """``W = P L U``, multiplied out in float64 (returned in float64)."""
        lower, upper = self.factors()
        return (lower.double() @ upper.double())[self.perm]

    def _applied_weight(self, dtype: torch.dtype) -> torch.Tensor:
        """``W`` in ``dtype``, recomputed only when ``lu`` or ``log_s`` changed (an optimizer step, a load, a
        move to another device all change a tensor's version or storage)."""
        key = (self.lu._version, self.log_s._version, self.lu.data_ptr(), self.log_s.data_ptr(), dtype)
        cached = self.__dict__.get("_weight_cache")
        if cached is None or cached[0] != key:
            cached = (key, self.weight().to(dtype))
            self.__dict__["_weight_cache"] = cached
        return cached[1]

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.pending_init:
            self.initialize_from(x)
            self.pending_init = False
        # x W^T = ((x U^T) L^T) P^T, applied factor by factor: O(n d^2) per batch, where forming W would
        # cost O(d^3), which at d = 768 dominates a batch of 64.
        if not torch.is_grad_enabled():
            # Applying a fitted flow: one product with W, formed once (in float64) and kept until a parameter
            # changes, so a row's output is the same whatever batch it comes in (the factored path below rounds
            # differently) and small batches do not pay the d^3 product each time.
            return x @ self._applied_weight(x.dtype).T, self.log_s.sum().expand(x.shape[0])
        # The unit and scale diagonals are applied as elementwise terms, so no dense factor is built.
        h = x @ self.lu.triu(1).T + x * self.scale()
        y = h @ self.lu.tril(-1).T + h
        return y[:, self.perm], self.log_s.sum().expand(x.shape[0])

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        # Invert in float64: a float32 inverse of a 768 x 768 matrix loses digits the round trip needs.
        w_inv = torch.linalg.inv(self.weight())
        return (y.double() @ w_inv.T).to(y.dtype)


def _lu_of(rotation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(sigma, L, U, diag U)`` of ``rotation = P L U`` (float64), ``P[j, sigma[j]] = 1``."""
    p, lower, upper = torch.linalg.lu(rotation)
    return torch.argmax(p, dim=1), lower, upper, torch.diagonal(upper)


class ReversePermutation(nn.Module):
    """Reverses the order of the dimensions: BERT-flow's published configs (``"permutation": true``) use this
    fixed map in place of the learned 1x1 convolution. Volume-preserving, no parameters."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.flip(-1), x.new_zeros(x.shape[0])

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        return y.flip(-1)


class Conditioner(nn.Module):
    """The coupling network: ``in -> width`` then ``hidden_layers`` residual blocks ``h + relu(W h)``, then a
    zero-initialised ``width -> out`` layer. A vector version of BERT-flow's 1x1 conv stack."""

    def __init__(self, n_in: int, n_out: int, width: int, hidden_layers: int, generator: torch.Generator) -> None:
        super().__init__()
        self.inp = _linear(n_in, width, generator)
        self.hidden = nn.ModuleList(_linear(width, width, generator) for _ in range(hidden_layers))
        self.out = _linear(width, n_out, generator, zero=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.inp(x))
        for layer in self.hidden:
            h = h + torch.relu(layer(h))
        return self.out(h)


class Coupling(nn.Module):
    """Additive (``y_b = x_b + t(x_a)``) or affine (``y_b = (x_b + t(x_a)) * exp(s(x_a))``) coupling.

    ``x_a`` is the first ``ceil(d/2)`` dimensions and passes through unchanged; odd ``d`` works.
    """

    def __init__(self, dim: int, width: int, hidden_layers: int, affine: bool, generator: torch.Generator) -> None:
        super().__init__()
        self.n_a = (dim + 1) // 2
        self.n_b = dim - self.n_a
        self.affine = affine
        self.net = Conditioner(self.n_a, self.n_b * (2 if affine else 1), width, hidden_layers, generator)

    def _shift_logscale(self, x_a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = self.net(x_a)
        if not self.affine:
            return out, None
        shift, raw = out[:, : self.n_b], out[:, self.n_b :]
        return shift, _LOG_SCALE_CLAMP * torch.tanh(raw / _LOG_SCALE_CLAMP)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x_a, x_b = x[:, : self.n_a], x[:, self.n_a :]
        shift, log_scale = self._shift_logscale(x_a)
        if log_scale is None:
            return torch.cat([x_a, x_b + shift], dim=1), x.new_zeros(x.shape[0])
        y_b = (x_b + shift) * torch.exp(log_scale)
        return torch.cat([x_a, y_b], dim=1), log_scale.sum(dim=1)

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        y_a, y_b = y[:, : self.n_a], y[:, self.n_a :]
        shift, log_scale = self._shift_logscale(y_a)
        x_b = y_b - shift if log_scale is None else y_b * torch.exp(-log_scale) - shift
        return torch.cat([y_a, x_b], dim=1)


class FlowStep(nn.Module):
    """One Glow step: actnorm, invertible linear map (or fixed reversal), coupling."""

    def __init__(
        self,
        dim: int,
        width: int,
        hidden_layers: int,
        affine: bool,
        mixing: str,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.actnorm = ActNorm(dim)
        self.mix: nn.Module = InvertibleLinear(dim, generator) if mixing == "lu" else ReversePermutation()
        self.coupling = Coupling(dim, width, hidden_layers, affine, generator)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, ld1 = self.actnorm(x)
        x, ld2 = self.mix(x)
        x, ld3 = self.coupling(x)
        return x, ld1 + ld2 + ld3

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        y = self.coupling.inverse(y)
        y = self.mix.inverse(y)  # type: ignore[operator]
        return self.actnorm.inverse(y)


def level_dims(dim: int, levels: int) -> list[int]:
    """Width of the vector each level works on: level ``l + 1`` keeps the first ``ceil(d_l / 2)`` dimensions."""
    dims = [dim]
    for _ in range(levels - 1):
        dims.append((dims[-1] + 1) // 2)
    return dims


class Glow(nn.Module):
    """Multi-level Glow on vectors with factor-out.

    Level ``l`` runs ``depth`` steps on its ``d_l`` dimensions; every level but the last then factors out the
    trailing ``floor(d_l / 2)`` dimensions, which go straight to the latent under a standard normal prior (as in
    BERT-flow, whose split prior is a fixed N(0, I)), and the next level continues on the first ``ceil(d_l / 2)``.
    The latent puts each factored-out block back at the position it left, so ``z`` has the shape of ``x`` and
    the whole map is one bijection ``x -> z`` with ``z ~ N(0, I)`` as the base.
    """

    def __init__(
        self,
        dim: int,
        levels: int,
        depth: int,
        width: int,
        hidden_layers: int,
        affine: bool,
        mixing: str,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.dim = dim
        self.dims = level_dims(dim, levels)
        self.levels = nn.ModuleList(
            nn.ModuleList(FlowStep(d, width, hidden_layers, affine, mixing, generator) for _ in range(depth))
            for d in self.dims
        )

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logdet = x.new_zeros(x.shape[0])
        factored: list[torch.Tensor] = []
        h = x
        for index in range(len(self.levels)):
            for step in self._steps(index):
                h, ld = step(h)
                logdet = logdet + ld
            if index < len(self.levels) - 1:
                keep = self.dims[index + 1]
                factored.append(h[:, keep:])
                h = h[:, :keep]
        return torch.cat([h, *reversed(factored)], dim=1), logdet

    def _steps(self, index: int) -> list[FlowStep]:
        return list(cast(nn.ModuleList, self.levels[index]))  # type: ignore[arg-type]

    def inverse(self, z: torch.Tensor) -> torch.Tensor:
        last = len(self.levels) - 1
        h = z[:, : self.dims[last]]
        for index in range(last, -1, -1):
            if index < last:
                # Level ``index`` factored out the dims between its kept width and its full width.
                h = torch.cat([h, z[:, self.dims[index + 1] : self.dims[index]]], dim=1)
            for step in reversed(self._steps(index)):
                h = step.inverse(h)
        return h

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Per-row log-density of ``x`` in nats: ``log N(z; 0, I) + log|det dz/dx|``."""
        z, logdet = self.forward(x)
        return standard_normal_log_prob(z) + logdet

    def data_init(self, x: torch.Tensor, principal_axes: bool = False) -> None:
        """Data-dependent init: one forward pass in which every actnorm sets itself from its input; with
        ``principal_axes`` the first invertible linear map too (:meth:`InvertibleLinear.initialize_from`), so
        that the next actnorm whitens (its scales floored at :data:`PRINCIPAL_AXES_STD_FLOOR`) and the flow
        starts at PCA whitening. The later maps keep their random rotations: rotating whitened vectors keeps them
        white, while another principal-axes start would scale the floored directions up once more."""
        for module in self.modules():
            if isinstance(module, ActNorm):
                module.pending_init = True
                module.relative_floor = PRINCIPAL_AXES_STD_FLOOR if principal_axes else 0.0
        first = next((m for m in self.modules() if isinstance(m, InvertibleLinear)), None)
        if principal_axes and first is not None:
            first.pending_init = True
        with torch.no_grad():
            self.forward(x)


def standard_normal_log_prob(z: torch.Tensor) -> torch.Tensor:
    """Per-row ``log N(z; 0, I)`` in nats."""
    return -0.5 * (z * z).sum(dim=1) - 0.5 * z.shape[1] * math.log(2 * math.pi)
