"""The GRU baseline of the Neural IK paper: one GRU shared over the joints, per-joint MLPs
before and after it.

Step ``j`` reads the normalised target and the features of joint ``j - 1`` through joint
``j``'s input MLP, advances the shared GRU (its initial state is a linear map of the target)
and joint ``j``'s output MLP returns either

* ``output="mixture"``: a one-dimensional Gaussian mixture on joint ``j`` (softmax weights),
  using :mod:`torchik.models.mixture`: wrapped normals for circular joints (means as
  ``(cos, sin)`` directions), normals truncated to the limits otherwise (means squashed
  inside). :meth:`RNN.log_prob` is then an exact normalised density and samples lie inside the
  limits; or
* ``output="point"``: one value per joint, trained with the squared (wrapped) joint
  difference; sampling is then deterministic and there is no ``log_prob``.

Training is teacher-forced (the true previous joints are fed); sampling feeds back its own
draws, one joint after another.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from torchik.checks import MAX_LAYERS, MAX_WIDTH, check_bool, check_choice, check_float, check_int
from torchik.geometry.joints import wrap_into
from torchik.learn.spec import ProblemSpec
from torchik.models.common import ACTIVATIONS, JointModel, circular_mask, mlp, repeat_targets
from torchik.models.mixture import JointDomain, mixture_log_prob, mixture_sample, scale_range
from torchik.models.registry import register

__all__ = ["RNN", "RNNConfig"]

_OUTPUTS = ("mixture", "point")


@dataclass(frozen=True)
class RNNConfig:
    """Hyper-parameters of :class:`RNN`.

    Attributes:
        hidden: GRU state size.
        width: hidden units of the per-joint MLPs.
        depth: hidden layers of the per-joint MLPs.
        output: ``"mixture"`` or ``"point"``.
        components: Gaussian components per joint (``"mixture"``).
        min_scale: smallest component scale (radians or metres).
        activation: ``"relu"``, ``"gelu"``, ``"silu"`` or ``"tanh"``.
        cos_sin: feed circular joints back as ``(cos, sin)``.
    """

    hidden: int = 128
    width: int = 128
    depth: int = 1
    output: str = "mixture"
    components: int = 4
    min_scale: float = 1e-4
    activation: str = "relu"
    cos_sin: bool = True

    def __post_init__(self) -> None:
        for name in ("hidden", "width", "components"):
            check_int(name, getattr(self, name), 1, MAX_WIDTH)
        check_int("depth", self.depth, 0, MAX_LAYERS)
        check_choice("output", self.output, _OUTPUTS)
        check_float("min_scale", self.min_scale, positive=True)
        check_choice("activation", self.activation, ACTIVATIONS)
        check_bool("cos_sin", self.cos_sin)


@register
class RNN(JointModel):
    """Autoregressive GRU over joints: ``p(q | x) = prod_j p(q_j | q_<j, x)``.

    Example:
        >>> spec = ProblemSpec.from_robot(torchik.load_robot("panda"))
        >>> model = RNN(spec, RNNConfig(hidden=16, width=16))
        >>> model.sample(torch.zeros(5, 3), n=4).shape
        torch.Size([5, 4, 7])
    """

    family = "rnn"
    Config = RNNConfig
    config: RNNConfig

    def __init__(self, spec: ProblemSpec, config: RNNConfig | None = None):
        super().__init__(spec, config)
        cfg, t = self.config, spec.target_dim
        self.domains = tuple(
            JointDomain.from_limits(lo, hi, bool(c))
            for lo, hi, c in zip(spec.lower, spec.upper, circular_mask(spec), strict=True)
        )
        widths = [2 if d.circular and self.cos_sin else 1 for d in self.domains]
        self._widths = widths
        ins = [t] + [t + w for w in widths[:-1]]
        outs = [self._out_size(d) for d in self.domains]
        act = cfg.activation
        self.before = nn.ModuleList(mlp(i, cfg.hidden, cfg.width, cfg.depth, act) for i in ins)
        self.after = nn.ModuleList(mlp(cfg.hidden, o, cfg.width, cfg.depth, act) for o in outs)
        self.initial = nn.Linear(t, cfg.hidden)
        self.gru = nn.GRU(cfg.hidden, cfg.hidden, batch_first=True)

    @classmethod
    def tiny_config(cls) -> RNNConfig:
        return RNNConfig(hidden=8, width=8, components=2)

    def _out_size(self, domain: JointDomain) -> int:
        if self.config.output == "point":
            return 2 if domain.circular and self.cos_sin else 1
        return (3 + domain.circular) * self.config.components  # logits, scales, 1-2 per mean

    # ------------------------------------------------------------ pieces
    def _feature(self, q: Tensor, j: int) -> Tensor:
        """Features ``(..., 1 or 2)`` of joint ``j``'s values ``q (...)``."""
        if self._widths[j] == 2:
            return torch.stack((torch.cos(q), torch.sin(q)), dim=-1)
        return ((q - self.q_mean[j]) / self.q_std[j]).unsqueeze(-1)

    def _step(self, x: Tensor, j: int, previous: Tensor | None, h: Tensor) -> tuple[Tensor, Tensor]:
        """One GRU step for joint ``j``: ``x (B, T)``, previous features, state ``(1, B, H)``."""
        inputs = x if previous is None else torch.cat((x, previous), dim=-1)
        out, h = self.gru(self.before[j](inputs).unsqueeze(1), h)
        return self.after[j](out.squeeze(1)), h

    def _mixture(self, out: Tensor, j: int) -> tuple[Tensor, Tensor, Tensor]:
        """Weights, means, scales ``(..., K)`` of joint ``j`` from its output MLP."""
        k, domain = self.config.components, self.domains[j]
        logits, raw_scale, raw_mean = out[..., :k], out[..., k : 2 * k], out[..., 2 * k :]
        if domain.circular:
            means = torch.atan2(raw_mean[..., k:], raw_mean[..., :k])
            means = wrap_into(means, domain.lower)
        else:
            means = domain.lower + domain.span * torch.sigmoid(raw_mean)
        lo, hi = scale_range(domain, self.config.min_scale)
        return logits.softmax(-1), means, lo + (hi - lo) * torch.sigmoid(raw_scale)

    def _point(self, out: Tensor, j: int) -> Tensor:
        if self._widths[j] == 2:
            return torch.atan2(out[..., 1], out[..., 0])
        return out[..., 0] * self.q_std[j] + self.q_mean[j]

    def _teacher_forced(self, q: Tensor, target: Tensor) -> list[Tensor]:
        """Every joint's output ``(B, O_j)`` reading the true previous joints."""
        x = self.normalize_target(target)
        h, previous, outs = self.initial(x).unsqueeze(0), None, []
        for j in range(self.spec.dof):
            out, h = self._step(x, j, previous, h)
            outs.append(out)
            previous = self._feature(q[:, j], j)
        return outs

    # ------------------------------------------------------------ the interface
    def log_prob(self, q: Tensor, target: Tensor) -> Tensor:
        """Exact log density ``(...)`` (``output="mixture"`` only)."""
        self._check(q, target, finite=True)
        if self.config.output == "point":
            raise NotImplementedError("the 'rnn' model with point outputs has no log_prob")
        if (empty := self._no_rows(q, target)) is not None:
            return empty
        shape = torch.broadcast_shapes(q.shape[:-1], target.shape[:-1])
        q = q.expand(*shape, q.shape[-1]).reshape(-1, q.shape[-1])
        outs = self._teacher_forced(q, target.expand(*shape, target.shape[-1]).reshape(len(q), -1))
        total = q.new_zeros(len(q))
        for j, out in enumerate(outs):
            total = total + mixture_log_prob(q[:, j], *self._mixture(out, j), self.domains[j])
        return total.reshape(shape)

    def loss(self, q: Tensor, target: Tensor) -> Tensor:
        """Teacher-forced NLL (mixture) or mean squared wrapped joint difference (point)."""
        self._check(q, target)
        if self.config.output == "mixture":
            return -self.log_prob(self.project(q), target).mean()
        outs = self._teacher_forced(q, target)
        pred = torch.stack([self._point(out, j) for j, out in enumerate(outs)], dim=-1)
        return (self.wrapped_difference(pred, q) / self.q_std).square().mean()

    def sample(self, target: Tensor, n: int, generator: torch.Generator | None = None) -> Tensor:
        self._check_target(target, n, generator)
        batch = target.shape[:-1]
        x = self.normalize_target(repeat_targets(target, n).reshape(-1, target.shape[-1]))
        h, previous, joints = self.initial(x).unsqueeze(0), None, []
        for j in range(self.spec.dof):
            out, h = self._step(x, j, previous, h)
            if self.config.output == "point":
                value = self._point(out, j)
            else:
                value = mixture_sample(*self._mixture(out, j), self.domains[j], generator)
            joints.append(value)
            previous = self._feature(value, j)
        return self.project(torch.stack(joints, dim=-1)).reshape(*batch, n, self.spec.dof)
