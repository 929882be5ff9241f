"""Planar arms with the planar-arm report's vectorised forward kinematics.

For joint angles ``θ (..., N)`` and link lengths ``l (N,)`` the end point is
``x = cos(θ U) · l``, ``y = sin(θ U) · l`` with ``U`` the upper-triangular matrix of ones, so
``(θ U)_i = θ_1 + … + θ_i`` is the absolute angle of link ``i``. The rail arm of Ardizzone et al.
adds a vertical prismatic joint first: ``q = (h, θ_1, …, θ_N)`` and ``y`` gains ``h``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from torchik.checks import MAX_WIDTH, check_bool, check_int, short_repr
from torchik.description.bundled import RAIL_ARM_LENGTHS

__all__ = ["PlanarArm"]


class PlanarArm(nn.Module):
    """An ``N``-joint planar arm (optionally on a vertical rail) with closed-form FK.

    Args:
        n: number of revolute joints.
        link_lengths: ``N`` positive lengths (default: unit links).
        rail: put the arm on a vertical prismatic rail (the first entry of ``q``).

    Example:
        >>> arm = PlanarArm(4)
        >>> arm(torch.zeros(2, 4))
        tensor([[4., 0.],
                [4., 0.]])
    """

    link_lengths: Tensor
    triu: Tensor

    def __init__(self, n: int, link_lengths: Sequence[float] | None = None, rail: bool = False):
        super().__init__()
        check_int("n", n, 1, MAX_WIDTH)
        check_bool("rail", rail)
        try:
            lengths = torch.ones(n) if link_lengths is None else torch.as_tensor(link_lengths)
        except (RuntimeError, TypeError, ValueError):  # None, a dtype, a ragged list
            lengths = torch.zeros(0)
        if not lengths.is_floating_point() and lengths.dtype not in (torch.long, torch.int32):
            lengths = torch.zeros(0)
        lengths = lengths.float()
        if lengths.shape != (n,) or not torch.isfinite(lengths).all() or (lengths <= 0).any():
            raise ValueError(
                f"link_lengths must be {n} positive finite numbers, got {short_repr(link_lengths)}"
            )
        self.rail = rail
        self.register_buffer("link_lengths", lengths.to(torch.get_default_dtype()))
        self.register_buffer("triu", torch.triu(torch.ones(n, n)))

    @classmethod
    def rail_arm(cls) -> PlanarArm:
        """The inverse-problem benchmark arm: rail + links 0.5, 0.5, 1.0."""
        return cls(len(RAIL_ARM_LENGTHS), RAIL_ARM_LENGTHS, rail=True)

    @property
    def n(self) -> int:
        return self.link_lengths.shape[0]

    @property
    def dof(self) -> int:
        return self.n + int(self.rail)

    def _split(self, q: Tensor) -> tuple[Tensor, Tensor | None]:
        if q.shape[-1] != self.dof:
            raise ValueError(f"q must have shape (..., {self.dof}), got {tuple(q.shape)}")
        return (q[..., 1:], q[..., 0]) if self.rail else (q, None)

    def forward(self, q: Tensor) -> Tensor:
        """End point ``(..., 2)`` of joint values ``q (..., dof)``."""
        theta, height = self._split(q)
        absolute = theta @ self.triu.to(theta.dtype)
        lengths = self.link_lengths.to(theta.dtype)
        end = torch.stack((torch.cos(absolute) @ lengths, torch.sin(absolute) @ lengths), dim=-1)
        if height is not None:
            end = end + torch.stack((torch.zeros_like(height), height), dim=-1)
        return end

    def joint_positions(self, q: Tensor) -> Tensor:
        """Base, every joint and the end point: ``(..., N + 1, 2)`` (for drawing the arm)."""
        theta, height = self._split(q)
        absolute = theta @ self.triu.to(theta.dtype)
        lengths = self.link_lengths.to(theta.dtype)
        steps = torch.stack((torch.cos(absolute), torch.sin(absolute)), dim=-1) * lengths[:, None]
        points = torch.cat((torch.zeros_like(steps[..., :1, :]), steps.cumsum(dim=-2)), dim=-2)
        if height is not None:
            points[..., 1] = points[..., 1] + height[..., None]
        return points

    def to_robot(self, dtype: torch.dtype | None = None):
        """The same arm as a generic :class:`torchik.Robot` (end link ``"ee"``)."""
        from torchik.robot.robot import load_robot

        if self.rail:
            return load_robot("rail_arm", dtype=dtype)
        lengths = [float(v) for v in self.link_lengths]
        return load_robot("planar", link_lengths=lengths, dtype=dtype)
