"""BERT-flow: a Glow normalizing flow fitted by maximum likelihood on cached sentence vectors.

BERT-flow (Li et al., EMNLP 2020) learns an invertible map from sentence vectors to a standard Gaussian and uses
the Gaussian latent as the sentence vector. The original trains it inside the encoder's TensorFlow graph; here it
is fitted once on vectors already encoded, then applied like any other :class:`Transform`.

Architecture (see :mod:`whitevec.transforms.flow_layers`): ``levels`` levels of ``depth`` Glow steps (actnorm,
LU-parameterised invertible linear map, additive or affine coupling with a residual conditioner of ``width``
units); between levels half the dimensions are factored out under N(0, I), as BERT-flow's split does.
"""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.utils._param_validation import Hidden, Interval, StrOptions

from whitevec.errors import BadInputError, CorruptFileError
from whitevec.transforms.base import BadParameterError, Count, Shape, Transform
from whitevec.transforms.flow_layers import Glow, InvertibleLinear, level_dims

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
# The value of a deprecated parameter nobody set (scikit-learn's convention).
_DEPRECATED = "deprecated"
# The cosine schedule ends at this share of ``lr``, not at 0: the last steps still move the weights.
_FINAL_LR_SHARE = 0.01
# Rows used for actnorm's data-dependent init: enough for stable per-dimension moments at 1024 dims.
_INIT_ROWS = 4096
_APPLY_BATCH = 8192
# Defaults of the optimisation (see the class docstring and the README's BERT-flow section for how they were
# chosen).
LR = 1e-3
MAX_STEPS = 500
WARMUP_STEPS = 50
BATCH_SIZE = 64
VALIDATION_INTERVAL = 50
PATIENCE_STEPS: int | None = 300


def bits_per_dim(log_prob: torch.Tensor, dim: int) -> torch.Tensor:
    """Mean negative log-likelihood in bits per dimension (Glow's unit), from per-row log-densities in nats."""
    return -log_prob.mean() / (dim * math.log(2.0))


class Flow(Transform):
    """Glow normalizing flow after BERT-flow, fitted on vectors by maximum likelihood under N(0, I).

    ``transform(X)`` returns the latent ``z`` (float32, same shape as ``X``; the factored-out blocks sit back at
    the positions they left). ``inverse_transform`` maps back, ``score_samples`` gives per-row log-densities.
    Learned: ``module_`` (the Glow), ``n_features_in_``, ``n_steps_``, ``best_step_``, ``stopped_early_``,
    ``val_bits_per_dim_`` and ``history_``, the loss curve (one row per validation check: step, mean training
    bits/dim since the previous check, validation bits/dim or NaN), which ``save`` writes with the weights.

    Parameters
    ----------
    levels, depth, width, coupling:
        Glow shape: ``levels`` levels of ``depth`` steps; coupling conditioner width; ``"additive"`` or
        ``"affine"`` coupling. The defaults (2, 3, 32, additive) are BERT-flow's ``config_l2_d3``-style setting.
    hidden_layers:
        Residual ``width x width`` blocks in each conditioner (BERT-flow's conv stack has one hidden layer).
    mixing:
        ``"lu"``: learned invertible linear map (Glow's 1x1 convolution, LU-parameterised); ``"reverse"``: fixed
        reversal of the dimensions, which is what BERT-flow's published configs (``"permutation": true``) use.
    mixing_init:
        How the learned linear maps start. ``"pca"``: the first one as the rotation onto the principal axes of
        the vectors reaching it at the data-dependent init, so that with the next actnorm (its scales floored as
        Whitening's eps=1e-6 floors eigenvalues) the flow starts at PCA whitening: a correlated Gaussian is then
        gaussianised within the budget whatever its conditioning (docs/notes/flow-budget.md); the others as
        random rotations. ``"random"``: all random rotations, as in Glow and BERT-flow (the earlier default; an
        ill-conditioned input's weakest directions may stay under-scaled after ``max_steps``).
    lr, max_steps, batch_size:
        Peak Adam learning rate, the budget in optimisation steps (whatever the number of rows: small data is
        passed over several times, large data less than once), and rows per step.
    lr_schedule, warmup_steps:
        ``"cosine"``: the rate rises linearly from ``lr / warmup_steps`` to ``lr`` over ``warmup_steps`` steps,
        then falls along a half cosine to ``lr / 100`` at ``max_steps``; ``"constant"``: the same warm-up, then
        ``lr`` throughout.
    validation_fraction, validation_interval, patience_steps:
        Share of rows held out; their bits/dim is measured every ``validation_interval`` steps (and at the last
        step) and the best state is kept. Training stops once ``patience_steps`` steps have passed since the
        best check (``None``: never stops early). With ``validation_fraction=0`` the final state is kept.
    epochs, patience:
        Deprecated (they will be removed): ``epochs`` sets the budget in passes over the training rows instead
        of ``max_steps`` (``max_steps = ceil(epochs * n_train / batch_size)``); ``patience`` counts validation
        checks instead of steps (``patience_steps = patience * validation_interval``). Either, when set, takes
        precedence and warns with a FutureWarning.
    seed:
        Fixes the split, the initial weights and the shuffling; on the CPU the same seed gives identical output.
    device, dtype:
        Torch device for fitting and applying (a loaded Flow's is the device ``load`` was given);
        ``"float32"`` or ``"float64"`` working precision.
    show_progress:
        Progress bar with the loss; ``None`` shows it only when stderr is a terminal.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "levels": [Count(Integral, 1, None, closed="left")],  # bounded by the dimension too: see below
        "depth": [Count(Integral, 1, None, closed="left")],
        "width": [Count(Integral, 1, None, closed="left")],
        "coupling": [StrOptions({"additive", "affine"})],
        "hidden_layers": [Count(Integral, 0, None, closed="left")],
        "mixing": [StrOptions({"lu", "reverse"})],
        "mixing_init": [StrOptions({"pca", "random"})],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "max_steps": [Count(Integral, 1, None, closed="left")],
        "lr_schedule": [StrOptions({"cosine", "constant"})],
        "warmup_steps": [Count(Integral, 0, None, closed="left")],
        "batch_size": [Count(Integral, 2, None, closed="left")],
        "validation_fraction": [Interval(Real, 0, 1, closed="left")],
        "validation_interval": [Count(Integral, 1, None, closed="left")],
        "patience_steps": [Count(Integral, 1, None, closed="left"), None],
        "epochs": [Interval(Real, 0, None, closed="neither"), Hidden(StrOptions({_DEPRECATED}))],
        "patience": [Count(Integral, 1, None, closed="left"), None, Hidden(StrOptions({_DEPRECATED}))],
        "seed": [Count(Integral, None, None, closed="neither")],
        "device": [str],
        "show_progress": ["boolean", None],
        "dtype": [StrOptions(set(_DTYPES))],
    }
    _state_arrays: ClassVar[dict[str, Shape]] = {"history_": (None, 3)}
    _state_values: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "n_features_in_": int,
        "n_steps_": int,
        "best_step_": int,
        "stopped_early_": bool,
        "val_bits_per_dim_": (float, type(None)),
    }
    # The weights live in module_ (a torch module), saved and rebuilt by _get_module_state/_set_module_state.
    _fitted_attribute: ClassVar[str] = "module_"

    def __init__(
        self,
        levels: int = 2,
        depth: int = 3,
        width: int = 32,
        coupling: str = "additive",
        hidden_layers: int = 1,
        mixing: str = "lu",
        mixing_init: str = "pca",
        lr: float = LR,
        max_steps: int = MAX_STEPS,
        lr_schedule: str = "cosine",
        warmup_steps: int = WARMUP_STEPS,
        batch_size: int = BATCH_SIZE,
        validation_fraction: float = 0.1,
        validation_interval: int = VALIDATION_INTERVAL,
        patience_steps: int | None = PATIENCE_STEPS,
        seed: int = 0,
        device: str = "cpu",
        show_progress: bool | None = None,
        dtype: str = "float32",
        epochs: float | str = _DEPRECATED,
        patience: int | str | None = _DEPRECATED,
    ) -> None:
        self.levels = levels
        self.depth = depth
        self.width = width
        self.coupling = coupling
        self.hidden_layers = hidden_layers
        self.mixing = mixing
        self.mixing_init = mixing_init
        self.lr = lr
        self.max_steps = max_steps
        self.lr_schedule = lr_schedule
        self.warmup_steps = warmup_steps
        self.batch_size = batch_size
        self.validation_fraction = validation_fraction
        self.validation_interval = validation_interval
        self.patience_steps = patience_steps
        self.epochs = epochs
        self.patience = patience
        self.seed = seed
        self.device = device
        self.show_progress = show_progress
        self.dtype = dtype

    def _check_dimension_params(self, n_features: int) -> None:
        if level_dims(n_features, self.levels)[-1] < 2:
            need = 2 ** (self.levels - 1) + 1
            raise BadParameterError(
                f"Flow with levels={self.levels} halves the vector {self.levels - 1} times and needs at least "
                f"{need} dimensions; got n_features = {n_features}. Use fewer levels."
            )

    def _torch_dtype(self) -> torch.dtype:
        return _DTYPES[self.dtype]

    def _build(self, dim: int, generator: torch.Generator) -> Glow:
        module = Glow(
            dim,
            levels=self.levels,
            depth=self.depth,
            width=self.width,
            hidden_layers=self.hidden_layers,
            affine=self.coupling == "affine",
            mixing=self.mixing,
            generator=generator,
        )
        return module.to(device=self.device, dtype=self._torch_dtype())

    # --- fitting ---------------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> Flow:
        """Fit the flow by maximum likelihood on the rows of ``X`` (n, d); returns ``self``."""
        # At least 2 rows: one held out when validating, and a batch needs 2.
        data = self._fit_input(X, min_rows=2)
        dim = data.shape[1]
        generator = torch.Generator().manual_seed(int(self.seed))
        train, val = self._split(data, generator)
        module = self._build(dim, generator)
        module.data_init(train[:_INIT_ROWS], principal_axes=self.mixing_init == "pca")
        run = self._train(module, train, val, generator, *self._budget(len(train)))
        for name, value in module.state_dict().items():
            if not torch.isfinite(value).all():
                raise BadInputError(
                    f"Flow training left a non-finite value in {name}; try a smaller learning rate than "
                    f"lr={self.lr:g}"
                )
        module.eval()
        self.module_ = module
        self.n_features_in_ = dim
        self.n_steps_ = run.steps
        self.best_step_ = run.best_step
        self.stopped_early_ = run.stopped_early
        self.val_bits_per_dim_ = run.best_val if len(val) else None
        self.history_ = np.array(run.history, dtype=np.float64).reshape(-1, 3)
        return self

    def _split(self, data: np.ndarray, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``(train, validation)`` rows as tensors on the device, the validation share drawn with the seed;
        BadInputError when fewer than a batch of rows are left to train on."""
        n, dim = data.shape
        order = torch.randperm(n, generator=generator)
        n_val = round(n * self.validation_fraction) if self.validation_fraction > 0 else 0
        if self.validation_fraction > 0:
            n_val = max(n_val, 1)
        n_train = n - n_val
        if n_train < self.batch_size:
            raise BadInputError(
                f"Flow needs at least batch_size={self.batch_size} training rows; X has {n} rows and "
                f"{n_val} are held out for validation, leaving {n_train}. Pass more vectors or a smaller "
                f"batch_size."
            )
        if n_train < 2 * dim:
            warnings.warn(
                f"fitting a {dim}-dimensional flow on {n_train} rows: the density is poorly determined with "
                "fewer rows than twice the dimension, and the latent may not be close to N(0, I)",
                stacklevel=3,
            )
        tensor = torch.from_numpy(data).to(device=self.device, dtype=self._torch_dtype())
        return tensor[order[n_val:].to(self.device)], tensor[order[:n_val].to(self.device)]

    def _train(
        self,
        module: Glow,
        train: torch.Tensor,
        val: torch.Tensor,
        generator: torch.Generator,
        total_steps: int,
        patience_steps: int | None,
    ) -> _Run:
        """Adam on shuffled full batches under the schedule for ``total_steps``, the held-out loss checked every
        ``validation_interval`` steps; the best checked state is loaded back into ``module``."""
        n_train, dim = train.shape
        optimizer = torch.optim.Adam(param_groups(module, self.lr), lr=self.lr, foreach=True)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, self._lr_factor(total_steps))
        best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
        run = _Run()
        running, running_count = 0.0, 0
        with _Progress(self._show(), total_steps) as bar:
            while run.steps < total_steps and not run.stopped_early:
                perm = torch.randperm(n_train, generator=generator).to(self.device)
                # Full batches only: a short last batch would be a noisier step at the same learning rate.
                for start in range(0, n_train - self.batch_size + 1, self.batch_size):
                    if run.steps >= total_steps:
                        break
                    run.steps += 1
                    step = run.steps
                    loss = bits_per_dim(module.log_prob(train[perm[start : start + self.batch_size]]), dim)
                    self._check_finite(loss, step, total_steps, "training")
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    optimizer.step()
                    scheduler.step()
                    running += float(loss.detach())
                    running_count += 1
                    if step % self.validation_interval and step != total_steps:
                        bar(step, float(loss.detach()), None)
                        continue
                    train_bpd = running / running_count
                    running, running_count = 0.0, 0
                    val_bpd = self._evaluate(module, val, dim, step, total_steps) if len(val) else math.nan
                    run.history.append([float(step), train_bpd, val_bpd])
                    bar(step, train_bpd, val_bpd if len(val) else None)
                    if not len(val):
                        continue
                    if val_bpd < run.best_val:
                        run.best_val, run.best_step = val_bpd, step
                        best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
                    elif patience_steps is not None and step - run.best_step >= patience_steps:
                        run.stopped_early = True
                        break
        if len(val):
            module.load_state_dict(best_state)
        else:
            run.best_step = run.steps
        return run

    def _show(self) -> bool:
        if self.show_progress is None:
            return sys.stderr.isatty()
        return bool(self.show_progress)

    def _budget(self, n_train: int) -> tuple[int, int | None]:
        """``(max_steps, patience_steps)`` for ``n_train`` training rows: the one place the deprecated
        ``epochs`` and ``patience`` are read (the parameters were checked by ``_fit_input`` before)."""
        total_steps, patience_steps = int(self.max_steps), self.patience_steps
        if not isinstance(self.epochs, str):
            warnings.warn(
                "Flow(epochs=...) is deprecated and will be removed: the budget is max_steps, in optimisation "
                f"steps. epochs={self.epochs:g} is used as max_steps = ceil(epochs * {n_train} training rows / "
                f"batch_size={self.batch_size}).",
                FutureWarning,
                stacklevel=3,
            )
            total_steps = max(1, math.ceil(self.epochs * n_train / self.batch_size))
        if not isinstance(self.patience, str):
            warnings.warn(
                "Flow(patience=...) is deprecated and will be removed: use patience_steps, counted in steps. "
                f"patience={self.patience} checks is used as patience_steps = patience * "
                f"validation_interval={self.validation_interval}.",
                FutureWarning,
                stacklevel=3,
            )
            patience_steps = None if self.patience is None else int(self.patience) * self.validation_interval
        return total_steps, patience_steps

    def _lr_factor(self, total_steps: int) -> Any:
        """The schedule as the factor of ``lr`` after each step (what ``LambdaLR`` wants)."""
        warmup = min(int(self.warmup_steps), total_steps)
        cosine = self.lr_schedule == "cosine"

        def factor(done: int) -> float:
            if done < warmup:
                return (done + 1) / warmup
            if not cosine or total_steps <= warmup:
                return 1.0
            progress = min(1.0, (done - warmup) / (total_steps - warmup))
            return _FINAL_LR_SHARE + (1.0 - _FINAL_LR_SHARE) * 0.5 * (1.0 + math.cos(math.pi * progress))

        return factor

    def _check_finite(self, loss: torch.Tensor, step: int, total: int, phase: str) -> None:
        if not torch.isfinite(loss):
            raise BadInputError(
                f"Flow {phase} diverged: the loss became {float(loss.detach())} at step {step} of {total}. "
                f"The learning rate lr={self.lr:g} is too large for these vectors; try a smaller one "
                f"(e.g. lr={self.lr / 10:g})."
            )

    def _evaluate(self, module: Glow, val: torch.Tensor, dim: int, step: int, total: int) -> float:
        with torch.no_grad():
            log_prob = torch.cat([module.log_prob(chunk) for chunk in val.split(_APPLY_BATCH)])
            loss = bits_per_dim(log_prob, dim)
        self._check_finite(loss, step, total, "validation")
        return float(loss)

    # --- applying --------------------------------------------------------------------------------------
    def _apply(self, X: Any, name: str, fn: Any) -> np.ndarray:
        # Validated straight into the working precision: no float64 copy of float32 vectors.
        data = self._apply_input(X, name=name, dtype=np.dtype(self.dtype).type)
        tensor = torch.from_numpy(data).to(device=self.device, dtype=self._torch_dtype())
        with torch.no_grad():
            parts = [fn(chunk) for chunk in tensor.split(_APPLY_BATCH)] if len(tensor) else [fn(tensor)]
        return torch.cat(parts).cpu().numpy()

    def transform(self, X: Any) -> np.ndarray:
        """Map vectors ``X`` (n, d) to the latent ``z`` (n, d), float32."""
        return self._apply(X, "X", lambda t: self.module_(t)[0]).astype(np.float32)

    def inverse_transform(self, X: Any) -> np.ndarray:
        """Map latents (n, d) back to vectors, float32."""
        return self._apply(X, "Z", self.module_.inverse).astype(np.float32)

    def score_samples(self, X: Any) -> np.ndarray:
        """Per-row log-density of ``X`` under the fitted flow, in nats (float64)."""
        return self._apply(X, "X", self.module_.log_prob).astype(np.float64)

    def score(self, X: Any, y: Any = None) -> float:
        """Mean per-row log-density in nats (higher is better), scikit-learn style."""
        return float(np.mean(self.score_samples(X)))

    # --- persistence: the one override of the base's module hook ----------------------------------------
    def _get_module_state(self) -> dict[str, np.ndarray]:
        return {f"module.{k}": v.detach().cpu().numpy() for k, v in self.module_.state_dict().items()}

    def _set_module_state(self, arrays: dict[str, np.ndarray], device: str) -> None:
        state: dict[str, torch.Tensor] = {}
        for key, value in arrays.items():
            if not key.startswith("module."):
                raise CorruptFileError(f"saved Flow has an undeclared array {key!r}")
            state[key.removeprefix("module.")] = torch.from_numpy(value)
        # The device a Flow was fitted on is a parameter of the fit, not of the file: it loads where asked.
        self.device = device
        try:
            # The initial weights do not matter: every one is replaced by a saved one.
            module = self._build(self.n_features_in_, torch.Generator().manual_seed(0))
        except (RuntimeError, AssertionError) as exc:  # torch's errors for an unknown or absent device
            raise BadInputError(f"cannot load the Flow onto device {device!r}: {exc}") from exc
        try:
            module.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise CorruptFileError(f"saved Flow weights do not fit its parameters: {exc}") from exc
        module.eval()
        self.module_ = module


@dataclass
class _Run:
    """How a training run went: steps taken, the best held-out check (its step and bits/dim), whether patience
    ran out, and the loss curve (step, mean training bits/dim since the last check, held-out bits/dim)."""

    steps: int = 0
    best_step: int = 0
    best_val: float = math.inf
    stopped_early: bool = False
    history: list[list[float]] = field(default_factory=list)


def param_groups(module: Glow, lr: float) -> list[dict[str, Any]]:
    """Adam groups: the triangular factors of each d x d linear map learn at ``lr / sqrt(d)``.

    Adam moves every entry by about ``lr`` per step whatever its gradient's scale; early gradients of the
    triangular factors share a sign, so a d x d factor changes by up to ``lr * d / 2`` in norm per step, which
    at d = 768 and lr = 1e-3 is 40% and diverges within a few steps (measured). Dividing by ``sqrt(d)`` bounds
    the change near ``lr * sqrt(d) / 2`` and keeps small maps at Glow's usual rate.
    """
    groups: list[dict[str, Any]] = []
    rest: list[torch.nn.Parameter] = []
    for sub in module.modules():
        if isinstance(sub, InvertibleLinear):
            groups.append({"params": [sub.lu], "lr": lr / math.sqrt(sub.dim)})
            rest.append(sub.log_s)
        else:
            rest.extend(sub.parameters(recurse=False))
    return [{"params": rest, "lr": lr}, *groups]


class _Progress:
    """A rich progress bar with the loss, or nothing when hidden; called as ``bar(step, train, val)``."""

    def __init__(self, show: bool, total: int) -> None:
        self.show = show
        self.total = total
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> _Progress:
        if self.show:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("fitting flow"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[loss]}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("flow", total=self.total, loss="")
        return self

    def __call__(self, step: int, train: float, val: float | None) -> None:
        if self._progress is None:
            return
        text = f"train {train:.3f} bits/dim"
        if val is not None:
            text += f", val {val:.3f}"
        self._progress.update(self._task, completed=step, loss=text)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
