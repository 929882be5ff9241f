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
* **Sampling**: ``steps`` fixed steps from ``t = 0`` to ``1`` with Euler's rule or the
  midpoint rule (two network evaluations a step), from noise drawn with the caller's
  generator, so samples are reproducible. The default, 8 midpoint steps, is measured
  (``benchmarks/results/learned_recipes.md``, Panda positions after 3000 steps): mean errors
  20.3, 5.7, 4.4 and 4.7 cm with 2, 4, 8 and 16 steps.
* **Network**: a residual MLP. The condition ``c`` is an embedding of sinusoidal features of
  ``t`` and the normalised target; each block adds ``W2 act(W1 LN(h) + Wc c)`` to ``h``.

:meth:`IKModel.log_prob` is not implemented (the density would need the divergence of ``v``
integrated along the ODE).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from torchik.checks import MAX_LAYERS, MAX_WIDTH, check_choice, check_float, check_int
from torchik.learn.spec import ProblemSpec
from torchik.models.common import ACTIVATIONS, JointModel, repeat_targets
from torchik.models.registry import register

__all__ = ["FlowMatching", "FMConfig", "VelocityNet"]

_SPACES = ("logit", "features")
_SOLVERS = ("euler", "midpoint")
_EPS = 1e-5  # keeps the logit of a joint at a limit finite (|u| <= 11.5)
_LOGIT_SCALE = math.pi / math.sqrt(3.0)  # std of logit(U) for U uniform on (0, 1)
_MAX_FREQUENCY = 100.0  # the time features' highest angular frequency (rad per unit t)


@dataclass(frozen=True)
class FMConfig:
    """Hyper-parameters of :class:`FlowMatching`.

    Attributes:
        width: hidden units of the velocity network.
        blocks: residual blocks.
        embedding: sinusoidal time features (even).
        activation: ``"relu"``, ``"gelu"``, ``"silu"`` or ``"tanh"``.
        space: ``"logit"`` or ``"features"`` (see the module docstring).
        steps: integration steps of :meth:`FlowMatching.sample`.
        solver: ``"euler"`` or ``"midpoint"``.
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

    def __post_init__(self) -> None:
        check_int("width", self.width, 1, MAX_WIDTH)
        check_int("blocks", self.blocks, 1, MAX_LAYERS)
        check_int("embedding", self.embedding, 2, MAX_WIDTH)
        check_int("steps", self.steps, 1, 10_000)
        check_float("time_power", self.time_power, 0.0, 100.0, positive=True)
        if self.embedding % 2:
            raise ValueError(f"embedding must be even (sin and cos), got {self.embedding}")
        check_choice("activation", self.activation, tuple(ACTIVATIONS))
        check_choice("space", self.space, _SPACES)
        check_choice("solver", self.solver, _SOLVERS)


class _Block(nn.Module):
    """``h + W2 act(W1 LN(h) + Wc c)``."""

    def __init__(self, width: int, activation: str):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.inner, self.cond = nn.Linear(width, width), nn.Linear(width, width)
        self.act, self.outer = ACTIVATIONS[activation](), nn.Linear(width, width)

    def forward(self, h: Tensor, c: Tensor) -> Tensor:
        return h + self.outer(self.act(self.inner(self.norm(h)) + self.cond(c)))


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
        angle = t * self.frequencies
        c = self.condition(torch.cat((angle.sin(), angle.cos(), context), dim=-1))
        h = self.embed(x) + c
        for block in self.blocks:
            h = block(h, c)
        return self.head(h)


@register
class FlowMatching(JointModel):
    """Conditional flow matching: ``p(q | target)`` as the end of an ODE started in noise.

    Attributes:
        size: ``S``, the width of the space the flow runs in (``D`` for ``"logit"``, the joint
            feature width ``F`` for ``"features"``).

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

    def integrate(self, x: Tensor, context: Tensor, steps: int | None = None) -> Tensor:
        """Carry ``x (..., S)`` (noise at ``t = 0``) to ``t = 1`` with the config's solver.

        Args:
            x: the starting points.
            context: normalised targets ``(..., T)``, broadcast against ``x``.
            steps: integration steps (default ``config.steps``).

        Returns:
            ``(..., S)``, in the flow's space (see :meth:`decode`).
        """
        steps = self.config.steps if steps is None else steps
        if steps < 1:
            raise ValueError(f"steps must be positive, got {steps}")
        h = 1.0 / steps
        for i in range(steps):
            t = torch.full_like(x[..., :1], i * h)
            v = self.net(x, t, context)
            if self.config.solver == "midpoint":
                v = self.net(x + 0.5 * h * v, t + 0.5 * h, context)
            x = x + h * v
        return x

    def sample(
        self,
        target: Tensor,
        n: int,
        generator: torch.Generator | None = None,
        steps: int | None = None,
    ) -> Tensor:
        """``n`` solutions per target: ``target (..., T)`` -> ``(..., n, D)`` within limits;
        ``steps`` overrides ``config.steps``."""
        self._check_target(target, n, generator)
        context = self.normalize_target(repeat_targets(target, n))
        shape = (*context.shape[:-1], self.size)
        x = torch.randn(shape, generator=generator, dtype=context.dtype, device=context.device)
        return self.decode(self.integrate(x, context, steps))
