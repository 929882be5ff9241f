"""Pure metric functions for IK solutions: errors, accuracy, limits, diversity, timing."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import Tensor

from torchik.rotations import geodesic_distance, wrap_angle

if TYPE_CHECKING:
    from torchik.robot import Robot

__all__ = [
    "accuracy",
    "best_of_n",
    "limit_violations",
    "mean_pairwise_distance",
    "position_error",
    "rotation_error",
    "timed",
]

R = TypeVar("R")

_PAIR_BLOCK = 1 << 24  # elements of one (rows, n, D) block of wrapped pairwise differences


def _fk(robot: Robot, q: Tensor, link: str) -> Tensor:
    """``(..., 4, 4)`` poses of ``link``, with ``q`` cast to the robot's dtype and device."""
    return robot.forward_kinematics(q.to(robot.device, robot.dtype), link)


def position_error(robot: Robot, q: Tensor, target_pos: Tensor, link: str) -> Tensor:
    """Distance between the origin of ``link`` at ``q`` and a target position.

    Args:
        robot: the robot.
        q: ``(..., D)`` joint values (any dtype; computed in the robot's).
        target_pos: ``(..., 3)`` positions, or ``(..., 2)`` planar ``x, y`` (then only ``x, y``
            are compared); broadcast against ``q``'s batch dims, e.g. ``q (B, n, D)`` with
            ``target_pos[:, None]`` of shape ``(B, 1, 3)``.
        link: the end link.

    Returns:
        ``(...)`` distances in metres, in the robot's dtype.
    """
    position = _fk(robot, q, link)[..., :3, 3]
    target = target_pos.to(position)
    return (position[..., : target.shape[-1]] - target).norm(dim=-1)


def rotation_error(robot: Robot, q: Tensor, target_rot: Tensor, link: str) -> Tensor:
    """Geodesic angle between the orientation of ``link`` at ``q`` and a target rotation.

    Args:
        robot: the robot.
        q: ``(..., D)`` joint values.
        target_rot: ``(..., 3, 3)`` rotation matrices, broadcast against ``q``'s batch dims.
        link: the end link.

    Returns:
        ``(...)`` angles in ``[0, pi]`` radians.
    """
    rotmat = _fk(robot, q, link)[..., :3, :3]
    return geodesic_distance(rotmat, target_rot.to(rotmat))


def accuracy(errors: Tensor, threshold: float) -> float:
    """Fraction of ``errors (...)`` strictly below ``threshold`` (NaN counts as a miss).

    Example:
        >>> accuracy(torch.tensor([0.01, 0.2, 0.05]), 0.1)
        0.6666666666666666
    """
    if errors.numel() == 0:
        raise ValueError("accuracy of no errors is undefined")
    return (errors < threshold).double().mean().item()


def limit_violations(q: Tensor, lower: Tensor, upper: Tensor, tol: float = 0.0) -> Tensor:
    """Number of joints outside ``[lower - tol, upper + tol]`` per configuration.

    Args:
        q: ``(..., D)`` joint values.
        lower, upper: ``(D,)`` limits (continuous joints: ``-pi``, ``pi``).
        tol: slack, e.g. for values rounded to float32.

    Returns:
        ``(...)`` int64 counts; ``(limit_violations(q, lo, hi) > 0).double().mean()`` is the
        fraction of configurations with any violation. NaN joints count as violations.
    """
    lower, upper = lower.to(q), upper.to(q)
    inside = (q >= lower - tol) & (q <= upper + tol)
    return (~inside).sum(dim=-1)


def _pairwise_wrapped(x: Tensor, continuous: Tensor) -> Tensor:
    """Sum over pairs of ``|wrap(x_i - x_j)|`` for ``x (B, n, D)``: ``(B,)``, in blocks."""
    b, n, d = x.shape
    rows = max(1, _PAIR_BLOCK // max(1, n * d))
    total = x.new_zeros(b)
    for start in range(0, n, rows):
        diff = x[:, start : start + rows, None, :] - x[:, None, :, :]
        diff = torch.where(continuous, wrap_angle(diff), diff)
        total += diff.norm(dim=-1).sum(dim=(1, 2))
    return total


def mean_pairwise_distance(samples: Tensor, continuous: Tensor | None = None) -> Tensor:
    """Diversity: the mean Euclidean joint-space distance over pairs ``i != j`` of samples.

    Args:
        samples: ``(..., n, D)`` joint values, ``n`` samples per target.
        continuous: ``(D,)`` bool mask of continuous joints, whose differences are wrapped to
            ``(-pi, pi]`` (``None``: no wrapping).

    Returns:
        ``(...)``; zero where ``n < 2``.
    """
    n, d = samples.shape[-2:]
    if n < 2:
        return samples.new_zeros(samples.shape[:-2])
    flat = samples.reshape(-1, n, d)
    if continuous is None or not bool(continuous.any()):
        total = torch.cdist(flat, flat).sum(dim=(1, 2))
    else:
        total = _pairwise_wrapped(flat, continuous.to(samples.device))
    return (total / (n * (n - 1))).reshape(samples.shape[:-2])


def best_of_n(errors: Tensor, n: int | None = None) -> Tensor:
    """The smallest of the first ``n`` errors per target.

    Args:
        errors: ``(..., N)`` errors of ``N`` samples per target.
        n: how many samples to consider (default all ``N``); ``1 <= n <= N``.

    Returns:
        ``(...)``.
    """
    total = errors.shape[-1]
    n = total if n is None else n
    if not 1 <= n <= total:
        raise ValueError(f"n must be in [1, {total}], got {n}")
    return errors[..., :n].amin(dim=-1)


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def timed(
    fn: Callable[..., R], *args: Any, repeat: int = 1, warmup: int = 0, **kwargs: Any
) -> tuple[R, float]:
    """Run ``fn(*args, **kwargs)`` and time it (CUDA is synchronised around each call).

    Args:
        fn: the function.
        repeat: timed calls; the median is returned.
        warmup: untimed calls first.

    Returns:
        ``(result of the last call, median seconds per call)``.

    Example:
        >>> out, seconds = timed(torch.ones, 3, repeat=3)
    """
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    for _ in range(warmup):
        fn(*args, **kwargs)
    times = []
    for _ in range(repeat):
        _sync()
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        _sync()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)
