"""torchik.geometry.joints: an angle read inside its joint's limits."""

from __future__ import annotations

import math

import torch

from torchik.geometry import angle_into_limits, wrap_angle

F64 = torch.float64


def test_an_angle_inside_is_itself_else_a_turn_inside_else_the_nearest_limit():
    lower = torch.tensor([-0.0175, -3.0718, -math.pi, 0.0], dtype=F64)
    upper = torch.tensor([3.7525, -0.0698, math.pi, 10.0], dtype=F64)
    angles = torch.linspace(-12.0, 12.0, 2401, dtype=F64)[:, None].expand(-1, 4)
    out = angle_into_limits(angles, lower, upper)
    assert ((out >= lower) & (out <= upper)).all()
    inside = (angles >= lower) & (angles <= upper)
    assert torch.equal(out[inside], angles[inside])  # exactly, not lower + a remainder
    has_turn = angles + 2 * math.pi * torch.ceil((lower - angles) / (2 * math.pi)) <= upper
    assert wrap_angle(out - angles)[has_turn].abs().max() < 1e-12
    ends = wrap_angle(torch.stack((lower, upper)) - angles[..., None, :]).abs()  # (N, 2, D)
    nearest = torch.where(ends[:, 0] < ends[:, 1], lower, upper)
    assert torch.equal(out[~has_turn], nearest[~has_turn])
    assert (~has_turn).any(0).tolist() == [True, True, False, False]  # a gap: under a turn


def test_the_gradient_is_one_inside_and_zero_on_a_limit():
    lower, upper = torch.tensor([-0.5, 0.0], dtype=F64), torch.tensor([2.0, 1.0], dtype=F64)
    angle = torch.tensor([[0.3, 0.5], [1.0 - 2 * math.pi, 2.0]], dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: angle_into_limits(a, lower, upper), (angle,))
    angle_into_limits(angle, lower, upper).sum().backward()
    assert angle.grad.tolist() == [[1.0, 1.0], [1.0, 0.0]]  # 2.0 is in joint 2's gap
