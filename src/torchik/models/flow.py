"""A conditional normalizing flow (cINN / IKFlow-style) built on `zuko`_.

``zuko`` is optional: install it with ``pip install torchik[flows]``. This module imports it
only when a :class:`Flow` is built, so importing :mod:`torchik.models` never needs it.

Design choices:

* **Bounded joints, exact density.** Joints are mapped to ``u = logit((q - lower) / span)``;
  a zuko flow (a neural spline flow by default, or a MAF) conditioned on the normalised target
  models ``u``. :meth:`Flow.log_prob` adds the log-determinant of that map, so it is the exact
  density of ``q`` on ``[lower, upper]``, and samples ``lower + span * sigmoid(u)`` are always
  inside the limits. Circular joints use the same map over their range; a mode straddling
  ``+-pi`` becomes two tails of ``u``.
* **Sampling with a generator**: the base noise is drawn here and pushed through the inverse
  transform of ``flow(context)``, so samples are reproducible.
* Optional Gaussian noise (``noise``, radians or metres) on the training joints smooths the
  data density.
* **Softflow** (``softflow``, IKFlow's recipe after Kim et al., "SoftFlow", NeurIPS 2020): each
  training row gets noise of its own standard deviation ``s ~ U(0, softflow)`` on its joints,
  and ``s / softflow`` is an extra context input; sampling and :meth:`Flow.log_prob` use
  ``s = 0``, the noise-free conditional. The flow learns the family of smoothed densities
  instead of one that must fit the thin solution manifolds exactly. Off by default: the
  context is then the target alone, as in checkpoints written before the option existed.
  It did not pay off at CPU scale: Panda positions after 3000 steps (the recipe of
  ``benchmarks/learned_recipes.py``), mean / median error 5.9 / 4.0 cm with ``softflow=0.01``
  against 5.4 / 3.5 cm without; whether it helps in long (GPU) runs is untested here.

.. _zuko: https://github.com/probabilists/zuko
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from torchik.checks import MAX_LAYERS, MAX_WIDTH, check_choice, check_float, check_int
from torchik.learn.spec import ProblemSpec
from torchik.models.common import JointModel, repeat_targets
from torchik.models.registry import register

__all__ = ["Flow", "FlowConfig"]

_KINDS = ("nsf", "maf")
_EPS = 1e-6  # keeps logit finite for joints at (or one rounding step past) a limit


@dataclass(frozen=True)
class FlowConfig:
    """Hyper-parameters of :class:`Flow`.

    Attributes:
        kind: ``"nsf"`` (rational-quadratic splines) or ``"maf"`` (affine).
        transforms: autoregressive transforms.
        width: hidden units of each transform's network.
        depth: hidden layers of each transform's network.
        bins: spline bins (``"nsf"`` only).
        noise: standard deviation of Gaussian noise added to training joints (0: none).
        softflow: the largest softflow noise standard deviation (0: off).
    """

    kind: str = "nsf"
    transforms: int = 4
    width: int = 256
    depth: int = 2
    bins: int = 8
    noise: float = 0.0
    softflow: float = 0.0

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, _KINDS)
        check_int("transforms", self.transforms, 1, MAX_LAYERS)
        check_int("width", self.width, 1, MAX_WIDTH)
        check_int("depth", self.depth, 1, MAX_LAYERS)
        check_int("bins", self.bins, 1, MAX_WIDTH)
        check_float("noise", self.noise, 0.0)
        check_float("softflow", self.softflow, 0.0)


def _zuko():
    try:
        import zuko
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the 'flow' model needs zuko: pip install 'torchik[flows]' (or pip install zuko)"
        ) from err
    return zuko


@register
class Flow(JointModel):
    """Conditional normalizing flow ``p(q | target)`` with an exact density on the limits.

    Example:
        >>> spec = ProblemSpec.from_robot(torchik.load_robot("panda"))
        >>> model = Flow(spec, FlowConfig(width=32))
        >>> model.sample(torch.zeros(5, 3), n=4).shape
        torch.Size([5, 4, 7])
    """

    family = "flow"
    Config = FlowConfig
    config: FlowConfig

    def __init__(self, spec: ProblemSpec, config: FlowConfig | None = None):
        super().__init__(spec, config)
        zuko, cfg = _zuko(), self.config
        kwargs = {"hidden_features": (cfg.width,) * cfg.depth, "transforms": cfg.transforms}
        context = spec.target_dim + (1 if cfg.softflow > 0 else 0)
        if cfg.kind == "nsf":
            self.flow = zuko.flows.NSF(spec.dof, context, bins=cfg.bins, **kwargs)
        else:
            self.flow = zuko.flows.MAF(spec.dof, context, **kwargs)

    @classmethod
    def tiny_config(cls) -> FlowConfig:
        return FlowConfig(transforms=2, width=16, depth=1, bins=4)

    @classmethod
    def parameter_count(cls, spec: ProblemSpec, config: FlowConfig) -> int:
        """Counted from the sizes: zuko's masked networks cannot be built on the meta device.

        Each transform's network maps ``D + T`` inputs through ``depth`` layers of ``width`` to
        ``D`` times the spline's ``3 * bins - 1`` parameters (2 for an affine ``"maf"``).
        """
        per_joint = 3 * config.bins - 1 if config.kind == "nsf" else 2
        sizes = (spec.dof + spec.target_dim, *(config.width,) * config.depth, spec.dof * per_joint)
        return config.transforms * sum(
            (a + 1) * b for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        )

    def _to_unbounded(self, q: Tensor) -> tuple[Tensor, Tensor]:
        """``u = logit((q - lower) / span)`` and ``log |du/dq|`` summed over joints."""
        span = self.upper - self.lower
        unit = ((q - self.lower) / span).clamp(_EPS, 1.0 - _EPS)
        log_det = -(span.log() + unit.log() + torch.log1p(-unit)).sum(-1)
        return torch.logit(unit), log_det

    def _context(self, target: Tensor, scale: Tensor | None = None) -> Tensor:
        """The flow's context ``(..., T)``, or ``(..., T + 1)`` with softflow's noise scale
        ``scale (..., 1)`` in ``[0, 1]`` (default 0) appended."""
        context = self.normalize_target(target)
        if self.config.softflow <= 0:
            return context
        scale = torch.zeros_like(context[..., :1]) if scale is None else scale
        return torch.cat((context, scale.expand_as(context[..., :1])), dim=-1)

    def _log_prob(self, q: Tensor, target: Tensor, scale: Tensor | None) -> Tensor:
        self._check(q, target)
        shape = torch.broadcast_shapes(q.shape[:-1], target.shape[:-1])
        u, log_det = self._to_unbounded(q.expand(*shape, q.shape[-1]))
        context = self._context(target.expand(*shape, target.shape[-1]), scale)
        return self.flow(context).log_prob(u) + log_det

    def log_prob(self, q: Tensor, target: Tensor) -> Tensor:
        """Exact log density ``(...)`` of ``q (..., D)`` inside the limits given ``target``."""
        self._check(q, target, finite=True)
        if (empty := self._no_rows(q, target)) is not None:
            return empty
        return self._log_prob(q, target, None)

    def loss(self, q: Tensor, target: Tensor) -> Tensor:
        """Negative log-likelihood, after optional noise on the joints (in training mode)."""
        self._check(q, target)
        cfg, scale = self.config, None
        if self.training and cfg.noise > 0:
            q = self.project(q + cfg.noise * torch.randn_like(q))
        if self.training and cfg.softflow > 0:
            scale = torch.rand_like(q[..., :1])
            q = self.project(q + cfg.softflow * scale * torch.randn_like(q))
        return -self._log_prob(q, target, scale).mean()

    def sample(self, target: Tensor, n: int, generator: torch.Generator | None = None) -> Tensor:
        self._check_target(target, n, generator)
        context = self._context(repeat_targets(target, n))
        dist = self.flow(context)
        shape = (*context.shape[:-1], self.spec.dof)
        z = torch.randn(shape, generator=generator, dtype=context.dtype, device=context.device)
        u = dist.transform.inv(z)
        return self.squash_to_limits(u)  # lower + span * sigmoid(u), clamped against rounding
