"""Joint-space helpers: angles on a circle, differences and distances of configurations, and
the projection of configurations into their limits. Any leading batch dims.

A joint is *continuous* when it turns without limits (its range is ``(-pi, pi]``), and
*circular* when its values lie on a circle: continuous, or limited to a range of a full turn or
more (:func:`circular_joints`). These are the one home of the conventions every solver, model,
metric and plot of torchik uses:

- an angle is canonical in ``(-pi, pi]`` (:func:`wrap_angle`);
- a difference of circular coordinates is wrapped to ``(-pi, pi]``, the shortest way round
  (:func:`joint_difference`, :func:`joint_distance`);
- a projection moves a circular joint by whole turns into ``[lower, lower + 2 pi)`` and then
  clamps; a continuous joint may instead be put in its canonical ``(-pi, pi]``
  (:func:`project_to_limits`);
- an angle known only up to whole turns (a direction's ``atan2``) is read inside the limits,
  or at the limit nearest round the circle (:func:`angle_into_limits`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "FULL_TURN_TOL",
    "angle_into_limits",
    "circular_joints",
    "joint_difference",
    "joint_distance",
    "project_to_limits",
    "wrap_angle",
    "wrap_into",
]

TWO_PI = 2.0 * math.pi

FULL_TURN_TOL = 1e-3
"""A limited range at least ``2 pi - FULL_TURN_TOL`` wide is a full turn (URDFs often write
``±3.14`` or ``±3.1415`` for ``±pi``)."""


def wrap_angle(angle: Tensor) -> Tensor:
    """Wraps angles to ``(-pi, pi]``; ``-pi`` maps to ``pi``. The gradient is 1 (the shift is a
    piecewise-constant multiple of ``2 pi``, so it carries no gradient).

    Args:
        angle: Angles ``(...)`` in radians.

    Returns:
        Angles ``(...)`` in ``(-pi, pi]``; an angle already there is returned exactly.

    Example:
        >>> wrap_angle(torch.tensor([3 * math.pi / 2, -math.pi]))
        tensor([-1.5708,  3.1416])
    """
    # k = ceil((x - pi) / 2pi) is the number of turns that puts x in (-pi, pi]; x = -pi gives
    # (-2pi) / 2pi = -1 exactly in floating point, so -pi -> pi exactly. The two where's repair
    # rounding for large |x| where x - 2pi k can land a hair outside the interval.
    turns = torch.ceil((angle - math.pi) / TWO_PI).detach()
    out = angle - TWO_PI * turns
    out = torch.where(out <= -math.pi, out + TWO_PI, out)
    return torch.where(out > math.pi, out - TWO_PI, out)


def wrap_into(q: Tensor, lower: Tensor | float) -> Tensor:
    """Angles moved by whole turns into ``[lower, lower + 2 pi)``.

    Args:
        q: ``(..., D)`` (or any shape) angles.
        lower: the start of the turn, broadcast against ``q``.

    Returns:
        ``lower + ((q - lower) mod 2 pi)``, the shape of ``q``; the gradient is 1.
    """
    return lower + torch.remainder(q - lower, TWO_PI)


def angle_into_limits(angle: Tensor, lower: Tensor, upper: Tensor) -> Tensor:
    """The ``angle + 2 pi k`` inside ``[lower, upper]``: ``angle`` itself where it is inside,
    else the first whole-turn shift inside, else (``angle`` in the gap of a range shorter than
    a turn) the limit nearest to it around the circle.

    Unlike :func:`project_to_limits`, which moves a circular joint into ``[lower, lower + 2 pi)``
    and clamps (a gap's angle always goes to ``upper``), this reads an angle that stands for all
    its turns, such as a direction's ``atan2``.

    Args:
        angle: ``(..., D)`` (or any shape) angles in radians.
        lower, upper: the limits, broadcast against ``angle``, of its dtype and device.

    Returns:
        The broadcast shape, within ``[lower, upper]``; the gradient is 1 where a turn is added
        (the turns carry none) and 0 where an angle in a gap is put on a limit.

    Example:
        >>> lower, upper = torch.tensor([-0.0175, -3.0718]), torch.tensor([3.7525, -0.0698])
        >>> angle_into_limits(torch.tensor([3.3 - 2 * math.pi, 1.0]), lower, upper)
        tensor([ 3.3000, -0.0698])
    """
    # whole turns added to angle itself (not wrap_into's lower + remainder), so that k = 0
    # returns angle exactly; the turns carry no gradient
    turns = torch.ceil((lower - angle) / TWO_PI).detach()
    above = angle + TWO_PI * turns  # the first a + 2 pi k not below lower
    below = above - TWO_PI  # the last one below lower
    # above - upper <= 0 when above is inside; in a gap, the nearer end of the range wins
    # (minimum, not clamp: rounding of above + 2 pi k must not leave the range either)
    nearest = torch.where(above - upper <= lower - below, torch.minimum(above, upper), lower)
    inside = (angle >= lower) & (angle <= upper)
    return torch.where(inside, angle, torch.maximum(nearest, lower))


def circular_joints(
    lower: Tensor, upper: Tensor, continuous: Tensor, tol: float = FULL_TURN_TOL
) -> Tensor:
    """``(D,)`` bool: the joints whose values lie on a circle, continuous or limited to a range
    at least ``2 pi - tol`` wide.

    Args:
        lower, upper: ``(D,)`` limits.
        continuous: ``(D,)`` bool mask of continuous joints.
        tol: how far short of a full turn a range may be (numerical IK passes ``1e-6``: it
            must never wrap across a real gap in the range; the learned models' densities treat
            the common ``±3.14`` as the circle it stands for).
    """
    return continuous | (upper - lower >= TWO_PI - tol)


def joint_difference(q1: Tensor, q2: Tensor, wraps: Tensor) -> Tensor:
    """``q1 - q2`` with the differences of the joints in ``wraps`` wrapped to ``(-pi, pi]``.

    Args:
        q1, q2: ``(..., D)`` joint values (broadcast).
        wraps: ``(D,)`` bool mask: continuous (or circular) joints.

    Returns:
        ``(..., D)``.

    Example:
        >>> joint_difference(torch.tensor([3.0, 3.0]), torch.tensor([-3.0, -3.0]),
        ...                  torch.tensor([True, False]))
        tensor([-0.2832,  6.0000])
    """
    diff = q1 - q2
    return torch.where(wraps, wrap_angle(diff), diff)


def joint_distance(q1: Tensor, q2: Tensor, wraps: Tensor) -> Tensor:
    """Euclidean joint-space distance, the differences of the joints in ``wraps`` wrapped to
    ``(-pi, pi]`` (:func:`joint_difference`).

    Args:
        q1: ``(..., D)`` configurations.
        q2: ``(..., D)``, broadcast against ``q1``.
        wraps: ``(D,)`` bool mask of continuous (or circular) joints.

    Returns:
        ``(...)`` distances.
    """
    diff = q1 - q2
    if bool(wraps.any()):
        diff = torch.where(wraps, wrap_angle(diff), diff)
    return diff.norm(dim=-1)


def project_to_limits(
    q: Tensor,
    lower: Tensor,
    upper: Tensor,
    wraps: Tensor | None = None,
    canonical: Tensor | None = None,
) -> Tensor:
    """Any real ``q`` mapped into ``[lower, upper]``, the one projection of torchik.

    Joints in ``wraps`` are moved by whole turns into ``[lower, lower + 2 pi)``
    (:func:`wrap_into`) before every joint is clamped, so a joint on a circle keeps its angle
    where the range allows; joints in ``canonical`` (continuous joints, whose limits are
    ``(-pi, pi]``) are wrapped to ``(-pi, pi]`` (:func:`wrap_angle`) instead. The gradient is 1
    inside the limits and 0 where a joint is clamped.

    Args:
        q: ``(..., D)`` joint values.
        lower, upper: ``(D,)`` limits (or broadcast against ``q``).
        wraps: ``(D,)`` bool mask of the joints moved by whole turns (``None``: none; the
            function never reads a mask's values, so that it can run in a CUDA graph).
        canonical: ``(D,)`` bool mask of the joints put in ``(-pi, pi]`` (``None``: none).

    Returns:
        ``(..., D)`` within the limits.

    Example:
        >>> lower, upper = torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 7.0])
        >>> project_to_limits(torch.tensor([2.0, 7.5]), lower, upper, torch.tensor([False, True]))
        tensor([1.0000, 1.2168])
    """
    # no test of the masks' contents (a host read): pass None where no joint is in one
    q_in = q if wraps is None else torch.where(wraps, wrap_into(q, lower), q)
    out = torch.clamp(q_in, lower, upper)
    return out if canonical is None else torch.where(canonical, wrap_angle(q), out)
