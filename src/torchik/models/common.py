"""Pieces shared by the generative model families (cvae, inn, flow, mdn, rnn).

:class:`JointModel` is an unregistered :class:`~torchik.models.base.IKModel` subclass that knows
which joints turn a full circle and how to encode joints as network features:

* a joint is **circular** when it is continuous or its range spans a full turn (``>= 2 pi``
  within ``1e-3``, URDF limits are rounded), as in :class:`~torchik.models.mixture.JointDomain`;
  losses on circular joints use differences wrapped to ``(-pi, pi]``
  (:func:`~torchik.models.base.joint_difference` with that mask);
* **features** of a circular joint are ``(cos q, sin q)`` (no seam at ``+-pi``) when the
  model's config has ``cos_sin=True``, else the normalised angle; limited joints are always
  normalised with the model's ``q_mean``/``q_std``. :meth:`JointModel.from_features` inverts
  the map (``atan2`` of the two features, which need not have unit norm);
* :meth:`JointModel.project` maps any real joints into ``[lower, upper]``: circular joints wrap
  into ``[lower, lower + 2 pi)``, limited ones are clamped.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from torchik.geometry.joints import FULL_TURN_TOL, joint_difference, project_to_limits
from torchik.learn.spec import ProblemSpec
from torchik.models.base import IKModel

__all__ = ["ACTIVATIONS", "JointModel", "circular_mask", "mlp", "repeat_targets"]

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "tanh": nn.Tanh}


def circular_mask(spec: ProblemSpec) -> tuple[bool, ...]:
    """Per joint: continuous, or a range of at least a full turn."""
    # plain floats, not circular_joints: this runs under torch.device("meta") too
    return tuple(
        bool(c or hi - lo >= 2 * math.pi - FULL_TURN_TOL)
        for lo, hi, c in zip(spec.lower, spec.upper, spec.continuous, strict=True)
    )


def mlp(size_in: int, size_out: int, width: int, depth: int, activation: str) -> nn.Sequential:
    """``depth`` hidden layers of ``width`` units (``activation`` after each), then a linear
    output layer; ``depth=0`` is one linear layer."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(size_in, width), ACTIVATIONS[activation]()]
        size_in = width
    layers.append(nn.Linear(size_in, size_out))
    return nn.Sequential(*layers)


def repeat_targets(target: Tensor, n: int) -> Tensor:
    """``target (..., T)`` -> ``(..., n, T)`` (an expanded view, no copy)."""
    return target.unsqueeze(-2).expand(*target.shape[:-1], n, target.shape[-1])


class JointModel(IKModel):
    """An :class:`IKModel` with circular-joint bookkeeping (not a family itself).

    Buffers (not saved: they follow from the spec): ``circular`` ``(D,)`` bool and
    ``feature_index`` ``(D,)``, the first feature column of each joint.

    Attributes:
        feature_dim: ``F``, the width of :meth:`joint_features`.
    """

    circular: Tensor
    feature_index: Tensor

    def __init__(self, spec: ProblemSpec, config=None):
        super().__init__(spec, config)
        circular = circular_mask(spec)
        self.cos_sin = bool(getattr(self.config, "cos_sin", True))
        widths = [2 if c and self.cos_sin else 1 for c in circular]
        self.feature_dim = sum(widths)
        starts = [sum(widths[:j]) for j in range(spec.dof)]
        self.register_buffer("circular", torch.tensor(circular), persistent=False)
        self.register_buffer("feature_index", torch.tensor(starts), persistent=False)
        self._pairs = [j for j, w in enumerate(widths) if w == 2]  # joints coded as (cos, sin)

    def wrapped_difference(self, q1: Tensor, q2: Tensor) -> Tensor:
        """``q1 - q2`` ``(..., D)`` with circular joints' differences wrapped to ``(-pi, pi]``."""
        return joint_difference(q1, q2, self.circular)

    def project(self, q: Tensor) -> Tensor:
        """Any real ``q (..., D)`` mapped into ``[lower, upper]``: circular joints wrapped into
        ``[lower, lower + 2 pi)``, the others clamped."""
        return project_to_limits(q, self.lower, self.upper, wraps=self.circular)

    def joint_features(self, q: Tensor) -> Tensor:
        """``q (..., D)`` -> features ``(..., F)``."""
        z = self.normalize_q(q)
        if not self._pairs:
            return z
        columns = []
        for j in range(self.spec.dof):
            if j in self._pairs:
                columns += [torch.cos(q[..., j]), torch.sin(q[..., j])]
            else:
                columns.append(z[..., j])
        return torch.stack(columns, dim=-1)

    def from_features(self, f: Tensor) -> Tensor:
        """Features ``(..., F)`` -> joints ``(..., D)`` (not yet projected into the limits)."""
        if not self._pairs:
            return self.denormalize_q(f)
        start = self.feature_index
        angle = torch.atan2(f[..., (start + 1).clamp_max(self.feature_dim - 1)], f[..., start])
        return torch.where(self.circular, angle, self.denormalize_q(f[..., start]))
