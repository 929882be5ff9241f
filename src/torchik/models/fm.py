"""Conditional flow matching (a rectified flow): a velocity field that carries Gaussian noise to
the joint solutions of a target (Lipman et al., "Flow matching for generative modeling", ICLR
2023; Liu et al., "Flow straight and fast", ICLR 2023).

Design choices:

* **Training**: for joints ``x1`` in the model's unbounded space, noise ``x0 ~ N(0, I)`` and a
  time ``t`` in ``[0, 1]``, the network ``v(x_t, t, target)`` regresses ``x1 - x0`` at
  ``x_t = (1 - t) x0 + t x1`` (mean squared error). No density, no inverse, no adversary:
  every mode of ``p(q | target)`` gets its share of the noise.
* **Time weighting** (``time_power`` ``p``): ``t = U^(1/p)``, density ``p t^(p-1)``. IK needs
  the end of the path precise (the solutions are thin manifolds the field must contract onto),
  so the default ``p = 3`` trains mostly near ``t = 1``. Measured on Panda positions (1000
  steps, lr 3e-3, 200 targets x 20 samples): mean / median error 15.1 / 12.5 cm with ``p = 1``
  (uniform), 11.6 / 9.2 with 2, 10.1 / 7.6 with 3, 13.4 / 9.5 with 5 (too little training
  near the noise: samples drift off the solutions); a logit-normal ``t`` (as in image models)
  15.8 / 13.6.
* **Joint space** (``space``). ``"features"`` (the default: it learned faster; median errors
  after 300 steps on the 2-joint snake 1.7 cm against 4.3 cm for ``"logit"``, after 1000 on
  Panda positions 20 cm against 27 cm, both with uniform times and lr 1e-3) runs the flow on
  :meth:`~torchik.models.common.JointModel.joint_features` (``(cos, sin)`` of circular joints:
  no seam at ``+-pi``; normalised angles otherwise) and projects the decoded joints into the
  limits. ``"logit"`` maps joints to ``logit((q - lower) / span) / s`` as
  :mod:`~torchik.models.flow` does, with ``s = pi / sqrt(3)`` (the standard deviation of a
  uniform joint's logit, so that the data has about the noise's scale); its samples
  ``lower + span * sigmoid(s x)`` are inside the limits without clamping.
* **Sampling** (:class:`FMSampler`; :attr:`FlowMatching.default_sampler` where one is set,
  else the config's fields, another per call):
  ``steps`` fixed steps from ``t = 0`` to ``1`` from noise drawn with the caller's generator,
  so samples are reproducible. Solvers: Euler's rule, the midpoint rule (two network passes a
  step) and ``"dpm2m"``, DPM-Solver++(2M) (Lu et al., 2022) written for this flow: the
  network's estimate of the end point ``x + (1 - t) v`` is extrapolated linearly in
  ``log(t / (1 - t))`` from the previous pass, so each step costs one pass; its first step and
  its last (to ``t = 1``) are Euler's, which for this flow is DDIM's. ``schedule`` ``p``
  spaces the steps as ``t_i = 1 - (1 - i / steps)^p``: ``p > 1`` puts them where the field
  contracts onto the thin solution sets. Measured on the bundled Panda pose model
  (``benchmarks/results/fm_samplers.md``: 1000 held-out targets x 10 samples, two noise seeds;
  its own 32 midpoint steps, 64 passes: 5.60 / 5.61 mm and 1.31 / 1.39 deg mean):
  :data:`FEW_PASSES` (``"dpm2m"``, 12 steps, ``p = 2``) 5.49 / 5.19 mm and 1.33 / 1.32 deg;
  on the uniform grid ``"dpm2m"`` needs far more steps (8.5 mm at 16); 8 midpoint steps give
  10.1 mm with ``p = 1`` and 5.7 with ``p = 2``. Heun's rule and RK4, tried on 200 targets
  before this module had them, evaluate the field at ``t = 1``, where it is stiffest: 84 mm at
  16 passes. ``bf16_until`` runs the per-sample layers of the passes before that time in
  bfloat16 (the conditioning, and so the time features, stay in full precision): 3 times
  faster where the matrix units take bfloat16 (recent Xeons, GPUs), slower where bfloat16 is
  emulated. The last pass stays in full precision because its errors land in the samples:
  every pass in bfloat16 gives 6.2 mm, all but the last (:data:`FEW_PASSES_BF16`) 5.5 / 5.2.
  ``mixed`` runs the other passes half-way: the blocks' matrix products in bfloat16, the
  residual stream in full precision (:meth:`VelocityNet.mixed_trunk`), at about half the cost
  of a full-precision pass. On the CPU those passes over one target's samples run through
  oneDNN's fused linear kernels (:data:`ONEDNN`; PyTorch's own, those its compiler emits):
  1050 Panda samples drawn with the fitted sampler in 60 ms against 73 ms through the modules'
  operations. A sampler fitted to a model (:mod:`torchik.models.fm_fit`) moves its grid,
  weights and velocity scales for fewer passes.
  The config's default, 8 midpoint steps, is measured (``benchmarks/results/learned_recipes.md``,
  Panda positions after 3000 steps): mean errors 20.3, 5.7, 4.4 and 4.7 cm with 2, 4, 8 and 16
  steps.
* **Network**: a residual MLP. The condition ``c`` is an embedding of sinusoidal features of
  ``t`` and the normalised target; each block adds ``W2 act(W1 LN(h) + Wc c)`` to ``h``.
  ``c`` and the terms ``Wc c`` depend on the target and ``t`` only, so sampling with a
  :class:`FMSampler` computes them once per target and pass (:meth:`VelocityNet.conditioning`)
  and broadcasts them over the samples (:meth:`VelocityNet.trunk`): a third of the work of a
  pass at width 512.

:meth:`IKModel.log_prob` is not implemented (the density would need the divergence of ``v``
integrated along the ODE).
"""

from __future__ import annotations

import copy
import functools
import math
import os
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import torch
from torch import Tensor, nn

from torchik.checks import (
    MAX_LAYERS,
    MAX_WIDTH,
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_kind,
)
from torchik.ik.fixed import on_side_stream
from torchik.learn.spec import ProblemSpec
from torchik.models.common import ACTIVATIONS, JointModel
from torchik.models.registry import register

__all__ = [
    "FEW_PASSES",
    "FEW_PASSES_BF16",
    "FMConfig",
    "FMSampler",
    "FlowMatching",
    "VelocityNet",
    "bf16_is_fast",
    "dpm2m_weight",
    "run_steps",
]

_SPACES = ("logit", "features")
_SOLVERS = ("euler", "midpoint", "dpm2m")
_PASSES = {"euler": 1, "midpoint": 2, "dpm2m": 1}  # network passes per step
_EPS = 1e-5  # keeps the logit of a joint at a limit finite (|u| <= 11.5)
_LOGIT_SCALE = math.pi / math.sqrt(3.0)  # std of logit(U) for U uniform on (0, 1)
_MAX_FREQUENCY = 100.0  # the time features' highest angular frequency (rad per unit t)


@dataclass(frozen=True)
class FMSampler:
    """How :meth:`FlowMatching.sample` integrates from noise (``t = 0``) to joints (``t = 1``).

    Attributes:
        steps: integration steps.
        solver: ``"euler"``, ``"midpoint"`` (two network passes a step) or ``"dpm2m"`` (one
            pass a step, second order; see the module docstring).
        schedule: ``p`` of the time grid ``t_i = 1 - (1 - i / steps)^p`` (1: uniform).
        bf16_until: passes at times below it run the per-sample layers in bfloat16 (0: none).
        mixed: the other passes run the blocks' matrix products in bfloat16 too, keeping the
            residual stream, the normalisations, the embedding and the head in full precision
            (:meth:`VelocityNet.mixed_trunk`; False: those passes in full precision).
        times: an explicit time grid, ``steps + 1`` increasing values from 0 to 1, in place of
            ``schedule`` (empty: the schedule's); fitted by
            :func:`torchik.models.fm_fit.fit_sampler`.
        weights: ``"dpm2m"`` only: each step's extrapolation weight ``w`` in ``D' = (1 + w) D
            - w D_prev`` (``steps`` values; the first two steps and the last have no previous
            pass and ignore theirs; empty: ``0.5 / r`` from the grid, DPM-Solver++(2M)).
        scales: each step's factor on the network's velocity (``steps`` values; empty: 1).

    Example:
        >>> FMSampler(steps=12, solver="dpm2m", schedule=2.0).passes
        12
        >>> FMSampler(2, "euler", times=(0.0, 0.75, 1.0)).intervals()
        [(0.0, 0.75), (0.75, 0.25)]
    """

    steps: int = 8
    solver: str = "midpoint"
    schedule: float = 1.0
    bf16_until: float = 0.0
    times: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    scales: tuple[float, ...] = ()
    mixed: bool = False

    def __post_init__(self) -> None:
        check_int("steps", self.steps, 1, 10_000)
        check_bool("mixed", self.mixed)
        check_choice("solver", self.solver, _SOLVERS)
        check_float("schedule", self.schedule, 0.1, 10.0)
        check_float("bf16_until", self.bf16_until, 0.0, 1.0)
        for name in ("times", "weights", "scales"):  # lists (from JSON) become tuples
            values = tuple(float(v) for v in getattr(self, name))
            if not all(math.isfinite(v) for v in values):
                raise ValueError(f"{name} must be finite, got {values}")
            object.__setattr__(self, name, values)
        t = self.times
        if t and (len(t) != self.steps + 1 or t[0] != 0.0 or t[-1] != 1.0
                  or any(b <= a for a, b in zip(t[:-1], t[1:], strict=True))):  # fmt: skip
            raise ValueError(
                f"times must be {self.steps + 1} increasing values from 0 to 1, got {t}"
            )
        for name in ("weights", "scales"):
            if getattr(self, name) and len(getattr(self, name)) != self.steps:
                raise ValueError(f"{name} must have one value per step ({self.steps}), got "
                                 f"{getattr(self, name)}")  # fmt: skip
        if self.weights and self.solver != "dpm2m":
            raise ValueError(f"weights are for the 'dpm2m' solver, not {self.solver!r}")
        if any(v <= 0.0 for v in self.scales):
            raise ValueError(f"scales must be positive, got {self.scales}")

    @property
    def passes(self) -> int:
        """Network passes per sample."""
        return self.steps * _PASSES[self.solver]

    def grid(self) -> list[float]:
        """The ``steps + 1`` times from 0 to 1: :attr:`times`, or the schedule's."""
        if self.times:
            return list(self.times)
        h = 1.0 / self.steps
        return [1.0 - (1.0 - i * h) ** self.schedule for i in range(self.steps)] + [1.0]

    def intervals(self) -> list[tuple[float, float]]:
        """``(start, length)`` of each step; the uniform grid is ``(i h, h)`` with ``h = 1 /
        steps`` exactly, as the sampler has always stepped."""
        if self.schedule == 1.0 and not self.times:
            h = 1.0 / self.steps
            return [(i * h, h) for i in range(self.steps)]
        t = self.grid()
        return [(a, b - a) for a, b in zip(t[:-1], t[1:], strict=True)]


FEW_PASSES = FMSampler(steps=12, solver="dpm2m", schedule=2.0)
"""12 passes for the 64 of the bundled models' 32 midpoint steps, at their accuracy (measured
on the Panda pose model: see the module docstring and ``scripts/fm_samplers.py``)."""

FEW_PASSES_BF16 = replace(FEW_PASSES, bf16_until=0.98)
""":data:`FEW_PASSES` with its first 11 of 12 passes in bfloat16 (for CPUs with bfloat16
matrix units, and GPUs); the last, at ``t = 0.993``, in full precision."""


@dataclass(frozen=True)
class FMConfig:
    """Hyper-parameters of :class:`FlowMatching`.

    Attributes:
        width: hidden units of the velocity network.
        blocks: residual blocks.
        embedding: sinusoidal time features (even).
        activation: ``"relu"``, ``"gelu"``, ``"silu"`` or ``"tanh"``.
        space: ``"logit"`` or ``"features"`` (see the module docstring).
        steps, solver, schedule, bf16_until: the default sampler (:attr:`sampler`); the
            last two were added later, with defaults that keep older checkpoints sampling as
            they did.
        time_power: training times are ``U^(1 / time_power)`` (1: uniform).
    """

    width: int = 256
    blocks: int = 3
    embedding: int = 32
    activation: str = "silu"
    space: str = "features"
    steps: int = 8
    solver: str = "midpoint"
    time_power: float = 3.0
    schedule: float = 1.0
    bf16_until: float = 0.0

    def __post_init__(self) -> None:
        check_int("width", self.width, 1, MAX_WIDTH)
        check_int("blocks", self.blocks, 1, MAX_LAYERS)
        check_int("embedding", self.embedding, 2, MAX_WIDTH)
        check_float("time_power", self.time_power, 0.0, 100.0, positive=True)
        if self.embedding % 2:
            raise ValueError(f"embedding must be even (sin and cos), got {self.embedding}")
        check_choice("activation", self.activation, tuple(ACTIVATIONS))
        check_choice("space", self.space, _SPACES)
        _ = self.sampler  # checks steps, solver, schedule and bf16_until

    @property
    def sampler(self) -> FMSampler:
        """The sampler of :meth:`FlowMatching.sample` when the call names none."""
        return FMSampler(self.steps, self.solver, self.schedule, self.bf16_until)


class _Block(nn.Module):
    """``h + W2 act(W1 LN(h) + Wc c)``, given ``Wc c`` (:meth:`VelocityNet.conditioning`)."""

    def __init__(self, width: int, activation: str):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.inner, self.cond = nn.Linear(width, width), nn.Linear(width, width)
        self.act, self.outer = ACTIVATIONS[activation](), nn.Linear(width, width)

    def forward(self, h: Tensor, term: Tensor) -> Tensor:
        return h + self.outer(self.act(self.inner(self.norm(h)) + term))


class VelocityNet(nn.Module):
    """The velocity ``v(x, t, context)``: ``x (..., S)``, ``t (..., 1)``, ``context (..., T)``
    -> ``(..., S)``.

    Example:
        >>> net = VelocityNet(size=2, context=3, width=16, blocks=1, embedding=8)
        >>> net(torch.zeros(5, 2), torch.rand(5, 1), torch.zeros(5, 3)).shape
        torch.Size([5, 2])
    """

    frequencies: Tensor

    def __init__(
        self, size: int, context: int, width: int, blocks: int, embedding: int, activation="silu"
    ):
        super().__init__()
        frequencies = torch.logspace(0.0, math.log10(_MAX_FREQUENCY), embedding // 2)
        self.register_buffer("frequencies", frequencies, persistent=False)  # from the config
        act = ACTIVATIONS[activation]
        self.condition = nn.Sequential(nn.Linear(embedding + context, width), act())
        self.embed = nn.Linear(size, width)
        self.blocks = nn.ModuleList(_Block(width, activation) for _ in range(blocks))
        self.head = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, size))

    def forward(self, x: Tensor, t: Tensor, context: Tensor) -> Tensor:
        return self.trunk(x, *self.conditioning(t, context))

    def conditioning(self, t: Tensor, context: Tensor) -> tuple[Tensor, list[Tensor]]:
        """The condition ``c (..., W)`` of times ``t (..., 1)`` and ``context (..., T)`` (the
        same batch shape) and each block's term ``Wc c (..., W)``."""
        angle = t * self.frequencies
        c = self.condition(torch.cat((angle.sin(), angle.cos(), context), dim=-1))
        return c, [cast(_Block, block).cond(c) for block in self.blocks]

    def mixed_trunk(self, x: Tensor, c: Tensor, terms: list[Tensor], low: VelocityNet) -> Tensor:
        """:meth:`trunk` with the blocks' matrix products taken from ``low``, a bfloat16 copy of
        this network, while the residual stream, the normalisations, the embedding and the
        head stay in full precision: near ``t = 1`` the field is stiff, and rounding ``x`` or
        the stream to bfloat16 moves the samples (measured on the bundled Panda model: every
        pass in bfloat16 6.4 mm, the last one mixed 5.8, in full precision 5.6)."""
        h = self.embed(x) + c
        for block, half, term in zip(self.blocks, low.blocks, terms, strict=True):
            block, half = cast(_Block, block), cast(_Block, half)
            u = block.norm(h).to(torch.bfloat16)
            h = h + half.outer(half.act(half.inner(u) + term.to(torch.bfloat16))).to(h.dtype)
        return self.head(h)

    def trunk(self, x: Tensor, c: Tensor, terms: list[Tensor]) -> Tensor:
        """The per-sample layers: ``x (..., S)`` with ``c`` and ``terms`` of
        :meth:`conditioning` broadcast against it -> ``(..., S)``."""
        h = self.embed(x) + c
        for block, term in zip(self.blocks, terms, strict=True):
            h = block(h, term)
        return self.head(h)


@register
class FlowMatching(JointModel):
    """Conditional flow matching: ``p(q | target)`` as the end of an ODE started in noise.

    Attributes:
        size: ``S``, the width of the space the flow runs in (``D`` for ``"logit"``, the joint
            feature width ``F`` for ``"features"``).
        default_sampler: the sampler of :meth:`sample` and :meth:`integrate` when a call names
            none, or ``None``: the config's (:attr:`FMConfig.sampler`).
            :func:`torchik.models.load_pretrained` sets a few-pass one. It is not saved in
            checkpoints: a sampler fitted to these weights need not suit weights trained
            further.
        default_sampler_bf16: the default in its place where bfloat16 is fast
            (:func:`bf16_is_fast` of the call's device), or ``None``: ``default_sampler``
            everywhere.

    Example:
        >>> spec = ProblemSpec.from_robot(torchik.load_robot("panda"))
        >>> model = FlowMatching(spec, FMConfig(width=32, blocks=1))
        >>> model.sample(torch.zeros(5, 3), n=4).shape
        torch.Size([5, 4, 7])
    """

    family = "fm"
    Config = FMConfig
    config: FMConfig

    def __init__(self, spec: ProblemSpec, config: FMConfig | None = None):
        super().__init__(spec, config)
        cfg = self.config
        self.size = spec.dof if cfg.space == "logit" else self.feature_dim
        self.net = VelocityNet(
            self.size, spec.target_dim, cfg.width, cfg.blocks, cfg.embedding, cfg.activation
        )
        self.default_sampler: FMSampler | None = None
        self.default_sampler_bf16: FMSampler | None = None

    @classmethod
    def tiny_config(cls) -> FMConfig:
        return FMConfig(width=16, blocks=1, embedding=8, steps=2)

    def encode(self, q: Tensor) -> Tensor:
        """Joints ``(..., D)`` -> the flow's space ``(..., S)``."""
        if self.config.space == "features":
            return self.joint_features(q)
        unit = ((q - self.lower) / (self.upper - self.lower)).clamp(_EPS, 1.0 - _EPS)
        return torch.logit(unit) / _LOGIT_SCALE

    def decode(self, x: Tensor) -> Tensor:
        """The flow's space ``(..., S)`` -> joints ``(..., D)`` within the limits."""
        if self.config.space == "features":
            return self.project(self.from_features(x))
        return self.squash_to_limits(x * _LOGIT_SCALE)

    def loss(self, q: Tensor, target: Tensor) -> Tensor:
        """Mean squared error of the velocity against ``x1 - x0`` on straight paths."""
        self._check(q, target)
        x1 = self.encode(q)
        x0 = torch.randn_like(x1)
        t = torch.rand_like(x1[..., :1]).pow(1.0 / self.config.time_power)
        v = self.net(x0 + t * (x1 - x0), t, self.normalize_target(target))
        return (v - (x1 - x0)).square().mean()

    def integrate(
        self,
        x: Tensor,
        context: Tensor,
        steps: int | None = None,
        sampler: FMSampler | None = None,
    ) -> Tensor:
        """Carry ``x (..., S)`` (noise at ``t = 0``) to ``t = 1``.

        Args:
            x: the starting points.
            context: normalised targets ``(..., T)``, broadcast against ``x`` (one row per
                target, ``(..., 1, T)``, computes the conditioning once per target).
            steps: integration steps (default: the sampler's); without a ``sampler`` they
                are the config's sampler's (:attr:`FMConfig.sampler`), as before default
                samplers: a fitted one's grid is made for its own steps.
            sampler: how to integrate (default: :attr:`default_sampler` or, where bfloat16 is
                fast, :attr:`default_sampler_bf16`, else the config's :attr:`FMConfig.sampler`).

        Returns:
            ``(..., S)``, in the flow's space (see :meth:`decode`).
        """
        sampler = self._sampler(sampler, x.device, steps)
        if steps is not None:
            if steps < 1:
                raise ValueError(f"steps must be positive, got {steps}")
            sampler = replace(sampler, steps=steps)
        if _capturable(x):  # captured and replayed with x's device current (cuda:1 too)
            with torch.cuda.device(x.device):
                return _graphed(self, sampler, x, context)
        return run_steps(sampler, self._velocity(context, sampler), x)

    def _sampler(
        self, sampler: FMSampler | None, device: torch.device, steps: int | None = None
    ) -> FMSampler:
        """``sampler``, else (no ``steps`` asked for) the default sampler for ``device``
        (:attr:`default_sampler_bf16` where it is set and bfloat16 is fast there, else
        :attr:`default_sampler`), else the config's."""
        if sampler is not None:
            what = "an FMSampler (a solver by name: FMSampler(solver='midpoint'))"
            return check_kind("sampler", sampler, FMSampler, what)
        if steps is not None:
            return self.config.sampler
        low = self.default_sampler_bf16
        if low is not None and bf16_is_fast(device):
            return low
        return self.config.sampler if self.default_sampler is None else self.default_sampler

    def _kept(self, name: str, build: Callable[[], Any]) -> Any:
        """``build()``, kept in the plain attribute ``name`` (no submodule, not saved) until a
        weight moves or changes, one per inference mode (what is made in it holds inference
        tensors)."""
        weights, inference = _weights_key(self), torch.is_inference_mode_enabled()
        name = f"{name}_inference" if inference else name
        cached = self.__dict__.get(name)
        if cached is None or cached[0] != weights:
            cached = (weights, build())
            self.__dict__[name] = cached
        return cached[1]

    def _bf16_net(self) -> VelocityNet:
        """A bfloat16 copy of :attr:`net`, kept (:meth:`_kept`: a copy took 6 - 8 ms of each
        60 ms draw of 1000 Panda samples)."""
        return self._kept("_bf16_copy", lambda: copy.deepcopy(self.net).to(torch.bfloat16))

    def _onednn(self, x: Tensor, context: Tensor) -> _OneDNN | None:
        """The bfloat16 copy's kernels fused by oneDNN (:class:`_OneDNN`), kept as the copy is,
        where they serve this call: on the CPU, no gradient recorded, one target."""
        if not (ONEDNN and x.device.type == "cpu" and not torch.is_grad_enabled() and x.numel()
                and context.numel() == context.shape[-1] and _onednn_available()):  # fmt: skip
            return None
        rows = x[..., :1].numel()
        return self._kept("_onednn_copy", lambda: _OneDNN(self._bf16_net(), rows))

    def _velocity(self, context: Tensor, sampler: FMSampler) -> Velocity:
        """``v(x, t, dt)`` at the time tensor ``t + dt`` (formed as a tensor sum, as the
        midpoint rule always did), in bfloat16 before ``sampler.bf16_until``, mixed after it
        where ``sampler.mixed``; those passes through :class:`_OneDNN`'s kernels where they
        serve."""
        bf16_until, mixed = sampler.bf16_until, sampler.mixed
        low = self._bf16_net() if bf16_until > 0 or mixed else None

        def velocity(x: Tensor, t: float, dt: float = 0.0) -> Tensor:
            time = context.new_full((*context.shape[:-1], 1), t)
            c, terms = self.net.conditioning(time + dt if dt else time, context)
            if low is None or (t + dt >= bf16_until and not mixed):
                return self.net.trunk(x, c, terms)
            late = t + dt >= bf16_until
            fused = self._onednn(x, context)
            if fused is not None:
                return fused.trunk(self.net, x, c, terms, mixed=late)
            if late:
                return self.net.mixed_trunk(x, c, terms, low)
            half = [u.to(torch.bfloat16) for u in (x, c, *terms)]
            return low.trunk(half[0], half[1], half[2:]).to(x.dtype)

        return velocity

    def sample(
        self,
        target: Tensor,
        n: int,
        generator: torch.Generator | None = None,
        steps: int | None = None,
        sampler: FMSampler | None = None,
    ) -> Tensor:
        """``n`` solutions per target: ``target (..., T)`` -> ``(..., n, D)`` within limits.

        Args:
            target: ``(..., T)`` targets.
            n: samples per target.
            generator: draws the noise.
            steps: overrides the sampler's steps (without a ``sampler``: the config's, see
                :meth:`integrate`).
            sampler: overrides the default samplers and :attr:`FMConfig.sampler`. With
                neither this nor a default sampler the conditioning is computed for every
                sample, which reproduces earlier versions' samples bit for bit; else it is
                computed once per target and broadcast (a third of a pass at width 512; the
                same samples up to float rounding).
        """
        self._check_target(target, n, generator)
        context = self.normalize_target(target).unsqueeze(-2)  # (..., 1, T): once per target
        own = steps is not None or self.default_sampler is self.default_sampler_bf16 is None
        if sampler is None and own:
            context = context.expand(*target.shape[:-1], n, context.shape[-1])
        shape = (*target.shape[:-1], n, self.size)
        x = torch.randn(shape, generator=generator, dtype=context.dtype, device=context.device)
        return self.decode(self.integrate(x, context, steps, sampler))


# ---------------------------------------------------------------------------- oneDNN (CPU)
ONEDNN = True
"""Run the bfloat16 and mixed passes of one target's samples on the CPU through oneDNN's fused
linear kernels (:class:`_OneDNN`) where PyTorch has them and the CPU takes bfloat16; ``False``:
through the modules' operations, as before (the same samples up to bfloat16 rounding)."""

_ONEDNN_ACTIVATIONS = {nn.SiLU: "swish", nn.ReLU: "relu", nn.Tanh: "tanh", nn.GELU: "gelu"}


def bf16_is_fast(device: torch.device | str) -> bool:
    """Whether bfloat16 matrix products run on matrix units on ``device``: a CUDA device of
    compute capability 8 or more (Ampere on), or a CPU with AMX (Intel Xeon since Sapphire
    Rapids). There the bfloat16 samplers were measured faster than the float32 ones at the same
    accuracy: on an H200, 1000 samples of one Panda pose in 1.6 ms against 2.4
    (``benchmarks/results/gpu.md``); on two cores of a Xeon with AMX 47 ms against 145 (the
    fitted 7-pass sampler, ``benchmarks/results/fm_samplers.md``). Elsewhere bfloat16 may be
    emulated, and slower than float32: with oneDNN capped below AMX (``ONEDNN_MAX_CPU_ISA=AVX2``) 10
    samples of each of 1000 Panda poses took 14 s in bfloat16 against 1.6 s in float32, so a
    CPU whose oneDNN is capped so counts as without AMX.

    Example:
        >>> bf16_is_fast("meta")
        False
    """
    device = torch.device(device)
    return _bf16_is_fast(device.type, device.index)


@functools.cache
def _bf16_is_fast(kind: str, index: int | None) -> bool:
    """:func:`bf16_is_fast`, once per device."""
    if kind == "cuda":
        return torch.cuda.get_device_capability(index)[0] >= 8
    if kind == "cpu":
        cap = (
            os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA", "")
        ).upper()
        if cap and "AMX" not in cap and cap not in ("ALL", "DEFAULT"):
            return False  # oneDNN told to leave the matrix units alone: bfloat16 is emulated
        amx = getattr(torch.cpu, "_is_amx_tile_supported", None)  # PyTorch's own probe
        return bool(amx is not None and amx() and torch.backends.mkldnn.is_available())
    return False


@functools.cache
def _onednn_available() -> bool:
    """PyTorch's oneDNN kernels for prepacked bfloat16 linear layers are there (the ones its
    compiler emits on the CPU), this CPU takes bfloat16 in them, and they run as called here
    (tried once on a few rows: a PyTorch that changed them turns this path off, not sampling)."""
    try:
        ops = torch.ops.mkldnn
        if not (torch.backends.mkldnn.is_available() and ops._is_mkldnn_bf16_supported()):
            return False
        x, w = torch.ones(2, 8, dtype=torch.bfloat16), torch.eye(8, dtype=torch.bfloat16)
        packed, bias = ops._reorder_linear_weight(w, 2), torch.zeros(8, dtype=torch.bfloat16)
        y = ops._linear_pointwise(x, packed, bias, "swish", [], "")
        z = ops._linear_pointwise.binary(y, x, packed, bias, "add")
        return bool(torch.allclose(z.float(), torch.nn.functional.silu(x.float()) + 1, atol=0.05))
    except (AttributeError, RuntimeError, TypeError):
        return False


class _OneDNN:
    """A bfloat16 :class:`VelocityNet`'s matrices prepacked for oneDNN's fused linear kernels.

    A block ``h + W2 act(W1 LN(h) + b1 + Wc c) + b2`` of one target's samples is a layer norm
    and two kernels: the first takes the target's term ``Wc c`` into its bias and applies the
    activation, the second adds its product to ``h`` (the pure bfloat16 passes; the mixed ones
    add it to the float32 stream). On the 2-core development CPU (AMX) a pass over 1050 Panda
    samples took 15 - 20 % less time than the modules' operations, which write and read each
    intermediate (the bias broadcast, the term, the activation, the residual sum) once more.
    """

    def __init__(self, low: VelocityNet, rows: int):
        pack = lambda layer: torch.ops.mkldnn._reorder_linear_weight(layer.weight, rows)  # noqa: E731
        blocks = [cast(_Block, b) for b in low.blocks]
        self.low, self.embed = low, pack(low.embed)
        self.inner, self.outer = [pack(b.inner) for b in blocks], [pack(b.outer) for b in blocks]
        act = blocks[0].act if blocks else nn.SiLU()
        algorithm = getattr(act, "approximate", "")  # GELU's: "none" or "tanh"
        self.act = (_ONEDNN_ACTIVATIONS[type(act)], algorithm)

    def trunk(
        self, net: VelocityNet, x: Tensor, c: Tensor, terms: list[Tensor], mixed: bool
    ) -> Tensor:
        """``net``'s pass of one target's samples ``x (..., S)`` (``c`` and ``terms`` of one
        row): :meth:`VelocityNet.mixed_trunk` where ``mixed``, else the pure bfloat16 pass;
        ``(..., S)`` in ``x``'s dtype."""
        linear, (attr, algorithm) = torch.ops.mkldnn._linear_pointwise, self.act
        rows, low, bf16 = x.reshape(-1, x.shape[-1]), self.low, torch.bfloat16
        c, terms = c.reshape(-1), [term.reshape(-1).to(bf16) for term in terms]
        blocks = [cast(_Block, b) for b in low.blocks]
        if mixed:  # the float32 stream, normalised in float32, the products in bfloat16
            h = net.embed(rows).add_(c)
            for block, half, inner, outer, term in zip(
                net.blocks, blocks, self.inner, self.outer, terms, strict=True
            ):
                u = cast(_Block, block).norm(h).to(bf16)
                a = linear(u, inner, half.inner.bias + term, attr, [], algorithm)
                h.add_(linear(a, outer, half.outer.bias, "none", [], ""))
            return net.head(h).reshape(x.shape)
        h = linear(rows.to(bf16), self.embed, low.embed.bias + c.to(bf16), "none", [], "")
        for half, inner, outer, term in zip(blocks, self.inner, self.outer, terms, strict=True):
            a = linear(half.norm(h), inner, half.inner.bias + term, attr, [], algorithm)
            h = linear.binary(a, h, outer, half.outer.bias, "add")
        return low.head(h).to(x.dtype).reshape(x.shape)


# ---------------------------------------------------------------------------- CUDA graphs
CUDA_GRAPHS = True
"""Integrate in CUDA graphs on CUDA: each (model weights, sampler, shape) is captured once and
replayed, one launch for all the passes' kernels (sampling is launch-bound on a GPU), with the
same samples. Only where no gradient is recorded; ``False``: launch kernel by kernel as before."""

MAX_GRAPHS = 8
"""Captured integrations kept (least recently used dropped)."""

_GRAPHS: OrderedDict[tuple, _Graphed | None] = OrderedDict()


def _weights_key(model: FlowMatching) -> tuple:
    """What a copy or a capture of ``model.net`` depends on: each weight's storage and version
    (an in-place update moves the version)."""
    return tuple((p.data_ptr(), p._version) for p in model.net.parameters())


def _capturable(x: Tensor) -> bool:
    return CUDA_GRAPHS and x.is_cuda and not torch.is_grad_enabled()


class _Graphed:
    """One integration captured in a CUDA graph: its noise and context buffers, the velocity
    (with its bfloat16 copy of the network) and the output buffer it writes."""

    def __init__(self, model: FlowMatching, sampler: FMSampler, x: Tensor, context: Tensor):
        self.model = weakref.ref(model)
        self.x, self.context = x.clone(), context.clone()
        # the bfloat16 copy made or taken here lives as long as the graph that reads it (the
        # model's own copy may be replaced: a freed copy was read as garbage on an H200)
        self.velocity = velocity = model._velocity(self.context, sampler)

        def run() -> Tensor:
            return run_steps(sampler, velocity, self.x)

        on_side_stream(run)  # the warm-up a capture wants (x's device is the current one)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = run()

    def __call__(self, x: Tensor, context: Tensor) -> Tensor:
        self.x.copy_(x)
        self.context.copy_(context)
        self.graph.replay()
        return self.out.clone()


def _graphed(model: FlowMatching, sampler: FMSampler, x: Tensor, context: Tensor) -> Tensor:
    """``run_steps`` through the cached graph of this model state, sampler and shape (captured
    on first use); eagerly where a capture failed (warned once per key)."""
    inference = torch.is_inference_mode_enabled()  # its buffers take no copy_ outside it
    weights = _weights_key(model)
    key = (id(model), weights, sampler, x.shape, context.shape, x.dtype, x.device, inference)
    cached = _GRAPHS.get(key)
    if cached is not None and cached.model() is not model:
        del _GRAPHS[key]  # another model at a freed one's address
    if key not in _GRAPHS:
        try:
            _GRAPHS[key] = _Graphed(model, sampler, x, context)
        except RuntimeError as err:  # something in the pass cannot be captured
            torch.cuda.synchronize(x.device)
            warnings.warn(f"sampling runs eagerly: CUDA graph capture failed ({err})",
                          RuntimeWarning, stacklevel=4)  # fmt: skip
            _GRAPHS[key] = None
        while len(_GRAPHS) > MAX_GRAPHS:
            _GRAPHS.popitem(last=False)
    _GRAPHS.move_to_end(key)
    graphed = _GRAPHS[key]
    if graphed is None:
        return run_steps(sampler, model._velocity(context, sampler), x)
    return graphed(x, context)


# ---------------------------------------------------------------------------- ODE steps
Velocity = Callable[..., Tensor]
"""``velocity(x, t, dt=0.0) -> v`` at time ``t + dt`` (see ``FlowMatching._velocity``)."""
State = tuple[Tensor, float | Tensor] | None
"""What a multistep rule carries from one step to the next."""


Time = float | Tensor
"""A time, step length or coefficient: a float when sampling, a tensor when fitting them
(:mod:`torchik.models.fm_fit`)."""


def run_steps(
    sampler: FMSampler,
    velocity: Velocity,
    x: Tensor,
    intervals: Sequence[tuple[Time, Time]] | None = None,
    weights: Sequence[Time | None] | None = None,
    scales: Sequence[Time] | None = None,
) -> Tensor:
    """Integrate ``x`` from ``t = 0`` to ``1`` with ``sampler``'s solver: each step's
    ``(start, length)``, extrapolation weight and velocity scale are the sampler's unless given
    (as tensors, to differentiate through them)."""
    step = _STEPS[sampler.solver]
    grid: Sequence[tuple[Time, Time]] = sampler.intervals() if intervals is None else intervals
    weights = weights or list(sampler.weights or [None] * sampler.steps)
    scales = scales or list(sampler.scales or [1.0] * sampler.steps)
    state = None
    for (t, h), w, k in zip(grid, weights, scales, strict=True):
        field = velocity
        if not isinstance(k, float) or k != 1.0:
            field = lambda x, t, dt=0.0, k=k: k * velocity(x, t, dt)  # noqa: E731
        x, state = step(field, x, t, h, state, w)
    return x


def dpm2m_weight(previous: float, t: float, end: float) -> float:
    """DPM-Solver++(2M)'s extrapolation weight ``0.5 / r`` of a step from ``t`` to ``end`` after
    one from ``previous``: ``r`` is the ratio of the two steps' lengths in ``lambda = log(t / (1
    - t))`` (all three strictly between 0 and 1)."""
    lam = lambda s: math.log(s / (1.0 - s))  # noqa: E731
    return 0.5 / ((lam(t) - lam(previous)) / (lam(end) - lam(t)))


def _euler(velocity: Velocity, x: Tensor, t: Time, h: Time, state: State, weight=None):
    return x + h * velocity(x, t), state


def _midpoint(velocity: Velocity, x: Tensor, t: Time, h: Time, state: State, weight=None):
    v = velocity(x, t)
    return x + h * velocity(x + 0.5 * h * v, t, 0.5 * h), state


def _dpm2m(velocity: Velocity, x: Tensor, t: Time, h: Time, state: State, weight=None):
    """DPM-Solver++(2M) for the straight path ``x_t = (1 - t) x0 + t x1``: with the network's
    end point ``D = x + (1 - t) v``, the exact step for a constant ``D`` is ``x' = ((1 - t') x
    + (t' - t) D) / (1 - t)``; ``D`` is extrapolated in ``lambda = log(t / (1 - t))`` from
    the previous pass, ``(1 + w) D - w D_prev`` with ``w = 0.5 / r`` unless ``weight`` is
    given. The first step (``lambda = -inf``) and the last (``+inf``) use ``D``."""
    end = t + h
    d = x + (1.0 - t) * velocity(x, t)
    ahead = d
    if state is not None and end < 1.0:
        if weight is None:
            weight = dpm2m_weight(float(state[1]), float(t), float(end))
        ahead = (1.0 + weight) * d - weight * state[0]
    x = ((1.0 - end) * x + h * ahead) / (1.0 - t)
    return x, ((d, t) if t > 0.0 else None)


_STEPS = {"euler": _euler, "midpoint": _midpoint, "dpm2m": _dpm2m}
