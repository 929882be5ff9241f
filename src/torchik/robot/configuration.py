"""Joint limits and configurations of a :class:`torchik.robot.Robot`: what the limits are for
each joint type, the neutral and random configurations, and per-joint overrides.

Limits (``lower``, ``upper``, one entry per coordinate of ``q``):

- revolute and prismatic joints: their ``<limit lower upper>``;
- continuous joints, and revolute joints loaded as unlimited (a ``<limit>`` without bounds,
  or ``lower > upper``): ``(-π, π]``, marked in the ``continuous`` mask (IK wraps them);
- prismatic joints loaded as unlimited and a planar joint's ``x``, ``y``: ``(-inf, inf)``;
- a floating base: position ``(-inf, inf)``, quaternion components ``[-1, 1]``.

:func:`random_configuration` draws every coordinate with finite limits uniformly between them,
puts those with an infinite range at 0 (give them a range with :func:`with_limits` to sample
them), and draws a floating base's orientation uniformly over all rotations.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from torchik.checks import check_generator, check_int, short_repr
from torchik.description.reading import MAX_MAGNITUDE
from torchik.description.urdf import Joint
from torchik.geometry.floating import BASE_COORDINATES

__all__ = [
    "MAX_CONFIGURATIONS",
    "check_q",
    "default_configuration",
    "limits_of",
    "neutral",
    "random_configuration",
    "with_limits",
]

MAX_CONFIGURATIONS = 1 << 28
"""The most configurations one :func:`random_configuration` call draws (draw more in parts)."""

_BASE_LOWER = (-math.inf,) * 3 + (-1.0,) * 4
_BASE_UPPER = (math.inf,) * 3 + (1.0,) * 4


def limits_of(actuated: Sequence[Joint], bases: Sequence[Joint]) -> dict[str, list]:
    """``names``, ``types``, ``lower``, ``upper``, ``continuous`` and ``prismatic`` per
    coordinate of ``q``: each floating base's 7 (``<joint>/x`` ... ``<joint>/qz``) first, then
    the joints."""
    out: dict[str, list] = {k: [] for k in ("names", "types", "lower", "upper")}
    out.update(continuous=[], prismatic=[])
    for base in bases:
        out["names"] += [f"{base.name}/{c}" for c in BASE_COORDINATES]
        out["types"] += ["floating"] * 7
        out["lower"] += _BASE_LOWER
        out["upper"] += _BASE_UPPER
        out["continuous"] += [False] * 7
        out["prismatic"] += [True] * 3 + [False] * 4
    for joint in actuated:
        wraps = joint.type == "continuous" or (joint.type == "revolute" and joint.lower is None)
        slides = joint.type == "prismatic"
        free = math.inf if slides else math.pi
        out["names"].append(joint.name)
        out["types"].append(joint.type)
        out["lower"].append(-free if joint.lower is None else joint.lower)
        out["upper"].append(free if joint.upper is None else joint.upper)
        out["continuous"].append(wraps)
        out["prismatic"].append(slides)
    return out


def neutral(robot) -> Tensor:
    """``(nq,)``: zeros, or the middle of the range for joints whose range excludes zero;
    floating bases at the origin with the identity quaternion ``(1, 0, 0, 0)`` (their zero
    pose, as Pinocchio's ``neutral``; :func:`default_configuration` puts them where the file
    does). A new tensor
    each call (a copy of the one kept with the robot's flattened tree, which a change of
    limits rebuilds: a whole-body solve asks for it several times)."""

    def build() -> Tensor:
        lower, upper = robot.lower, robot.upper
        inside = (lower <= 0) & (upper >= 0)
        q = torch.where(inside, torch.zeros_like(lower), (lower + upper) / 2)
        for k in range(robot.floating_bases):
            q[7 * k + 3] = 1.0
        return q

    return robot.tree.cached(("configuration", "neutral", robot._limits_stamp()), build).clone()


def default_configuration(robot) -> Tensor:
    """``(nq,)``: :func:`neutral`, with each free body where the description puts it (an MJCF
    body's place, MuJoCo's ``qpos0``; a URDF floating joint has no such pose: the origin).
    Where IK holds the free bodies that carry no target. A new tensor each call."""

    def build() -> Tensor:
        q = neutral(robot)
        for k, base in enumerate(robot._bases):
            if base.rest is not None:
                q[7 * k : 7 * k + 7] = torch.tensor(base.rest, dtype=q.dtype, device=q.device)
        return q

    key = ("configuration", "default", robot._limits_stamp())
    return robot.tree.cached(key, build).clone()


def random_configuration(robot, n: int, generator: torch.Generator | None = None) -> Tensor:
    """``(n, nq)``: uniform within finite limits, 0 where the range is infinite, and a
    uniformly random unit quaternion for each floating base.

    Raises:
        TypeError: ``n`` is not an int, ``generator`` not a ``torch.Generator``.
        ValueError: ``n`` is negative or over :data:`MAX_CONFIGURATIONS`.
    """
    check_int("n", n, 0, MAX_CONFIGURATIONS)
    check_generator("generator", generator)
    device = generator.device if generator is not None else robot.device
    u = torch.rand(n, robot.dof, generator=generator, dtype=robot.dtype, device=device)
    lower, span = _uniform_box(robot)
    q = lower + u.to(robot.device) * span
    parts, k = [], robot.floating_bases
    for b in range(k):  # normalised Gaussians are uniform on the 3-sphere
        quat = torch.randn(n, 4, generator=generator, dtype=robot.dtype, device=device)
        quat = quat / quat.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        parts += [q[:, 7 * b : 7 * b + 3], quat.to(robot.device)]
    return torch.cat((*parts, q[:, 7 * k :]), dim=-1) if k else q


def _uniform_box(robot) -> tuple[Tensor, Tensor]:
    """``(lower, span)`` ``(nq,)`` of :func:`random_configuration`'s uniform draw: the limits
    where both are finite, ``(0, 0)`` elsewhere. Kept with the robot's flattened tree under the
    limits' stamp (an edit in place makes a new one): a draw is then three operations, not
    seventeen (``isfinite`` alone dispatches four)."""

    def build() -> tuple[Tensor, Tensor]:
        lower, upper = robot.lower, robot.upper
        finite = torch.isfinite(lower) & torch.isfinite(upper)
        return torch.where(finite, lower, 0.0), torch.where(finite, upper - lower, 0.0)

    return robot.tree.cached(("configuration", "uniform box", robot._limits_stamp()), build)


def with_limits(robot, limits: Mapping[str, tuple[float, float]]):
    """A copy of ``robot`` whose coordinates named in ``limits`` get ``(lower, upper)``.

    A continuous joint given limits is no longer marked continuous (IK stops wrapping it).

    Raises:
        ValueError: an unknown name (the message lists the known ones), a floating base's
            quaternion, or bounds that are not ``lower <= upper`` or beyond ±1e9 (infinite
            bounds are allowed).
        TypeError: bounds that are not two numbers.
    """
    if not isinstance(limits, Mapping):
        raise TypeError(f"with_limits takes {{name: (lower, upper)}}, got {short_repr(limits)}")
    index = {name: i for i, name in enumerate(robot.joint_names)}
    out = copy.deepcopy(robot)
    lower, upper = out.lower.detach().clone(), out.upper.detach().clone()
    continuous = out.continuous.clone()
    for name, bounds in limits.items():
        quaternion = (
            name in index and index[name] < 7 * robot.floating_bases and index[name] % 7 > 2
        )
        if name not in index or quaternion:
            raise ValueError(
                f"with_limits: {name!r} is not a joint or base position of robot "
                f"{robot.name!r}; accepted: {list(robot.joint_names)}"
            )
        low, high = _bounds(name, bounds)
        i = index[name]
        lower[i], upper[i], continuous[i] = low, high, False
    out.continuous.copy_(continuous)
    out.lower.copy_(lower)
    out.upper.copy_(upper)
    out._adopt({"lower": out.lower, "upper": out.upper})
    return out


def _bounds(name: str, bounds: Any) -> tuple[float, float]:
    """``(lower, upper)`` of :func:`with_limits`: two numbers, ``lower <= upper``, each infinite
    or within ±``MAX_MAGNITUDE`` (the URDF reader's rule; 1e300 overflowed float32 robots)."""
    try:
        low, high = (float(value) for value in bounds)
    except (TypeError, ValueError):
        raise TypeError(
            f"with_limits: {name!r} needs (lower, upper), two numbers; got {short_repr(bounds)}"
        ) from None
    if not low <= high:  # also refuses nan
        raise ValueError(f"with_limits: {name!r} needs lower <= upper, got ({low}, {high})")
    for value in (low, high):
        if math.isfinite(value) and abs(value) > MAX_MAGNITUDE:
            raise ValueError(
                f"with_limits: {name!r} has the bound {value:g}, beyond the supported "
                f"±{MAX_MAGNITUDE:g} (an infinite bound means unlimited)"
            )
    return low, high


def check_q(robot, q: Tensor) -> Tensor:
    """Validate ``q (..., nq)`` for ``robot`` and flatten it to ``(B, nq)``."""
    if not isinstance(q, Tensor):
        raise TypeError(f"q must be a torch.Tensor, got {type(q).__name__}")
    if q.dim() == 0 or q.shape[-1] != robot.dof:
        raise ValueError(
            f"q must have shape (..., {robot.dof}) for the {robot.dof} joints "
            f"{list(robot.joint_names)}, got {tuple(q.shape)}"
        )
    if q.dtype != robot.dtype:
        kinematic = q.dtype in (torch.float32, torch.float64)  # what a Robot can be moved to
        other = f" or robot.to({q.dtype})" if kinematic else ""
        raise TypeError(
            f"q has dtype {q.dtype} but the robot is {robot.dtype}: convert q "
            f"(q.to({robot.dtype})){other}"
        )
    if q.device != robot.device:
        raise ValueError(
            f"q is on {q.device} but the robot is on {robot.device}: use robot.to(q.device)"
        )
    return q.reshape(math.prod(q.shape[:-1]), robot.dof)
