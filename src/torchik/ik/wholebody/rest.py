"""Following a path call after call: a posture's rest made from the previous answer away
from the joint limits (:func:`away_from_limits`), and seeds scattered around it for a call
that failed (:func:`seeds_near`)."""

from __future__ import annotations

import torch
from torch import Tensor

from torchik.checks import check_float, check_generator, check_int
from torchik.ik.base import JointLimits
from torchik.ik.inputs import MAX_SEEDS
from torchik.robot.robot import Robot

__all__ = ["away_from_limits", "seeds_near"]


def away_from_limits(robot: Robot, q: Tensor, margin: float = 0.2) -> Tensor:
    """``q`` with every joint at least ``margin`` of its range inside its limits: the ``rest``
    of :func:`~torchik.ik.solve_wholebody`'s posture when a path is followed call after call,
    each call's rest made from the previous answer. The posture then pulls, in the null space
    of the targets, only the joints that drift towards a limit: warm-started answers of a
    redundant robot otherwise drift along the null space until joints sit on their limits,
    where the path's next targets are out of that branch's reach.

    On 1 000 steps of a path (100 between random waypoints) of the quaternion-base G1's feet
    and hands, warm-started: 62.5 % solved without a posture; 99.7 % with this rest
    (``margin=0.2``), ``posture=0.5`` and ``posture_iters=3``, the largest joint step between
    two answers 0.18 rad (the path's own: 0.05); ``restarts=True`` alone solves all of them but
    jumps up to 5.5 rad. The G1's two hands: 96.7 % and 97.1 %.

    Joints without a range to keep away from (continuous ones, ranges of a full turn) and
    floating bases' coordinates stay as they are.

    Args:
        robot: the robot.
        q: ``(..., nq)`` configurations.
        margin: the share of each joint's range kept free at either end, in ``[0, 0.5]``.

    Returns:
        ``(..., nq)``, the same dtype and device.

    Raises:
        ValueError: ``margin`` outside ``[0, 0.5]``, or ``q`` not ``(..., nq)``.
        TypeError: ``margin`` not a number.

    Example:
        >>> import torchik
        >>> robot = torchik.load_robot("panda", dtype=torch.float64)
        >>> rest = away_from_limits(robot, robot.upper[None])   # every joint on its upper limit
        >>> bool(torch.allclose(rest, robot.upper - 0.2 * (robot.upper - robot.lower)))
        True
    """
    margin = check_float("margin", margin, 0.0, 0.5)
    if not isinstance(q, Tensor) or q.shape[-1:] != (robot.dof,):
        got = tuple(q.shape) if isinstance(q, Tensor) else type(q).__name__
        raise ValueError(f"q must be a (..., {robot.dof}) tensor, got {got}")
    limits = JointLimits.of(robot)
    kept = limits.clamped.clone()
    kept[: 7 * robot.floating_bases] = False  # the bases' coordinates
    span = robot.upper - robot.lower
    kept &= torch.isfinite(span)
    lower = torch.where(kept, robot.lower + margin * span, -torch.inf)
    upper = torch.where(kept, robot.upper - margin * span, torch.inf)
    return torch.minimum(torch.maximum(q, lower.to(q)), upper.to(q))


def seeds_near(
    robot: Robot,
    q: Tensor,
    n: int = 8,
    scale: float = 0.5,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``n`` seeds scattered around ``q``: every joint moved by a normal step of standard
    deviation ``scale`` (rad or m), clamped into its limits; floating bases where ``q`` has
    them. For a path followed call after call, when a warm-started call fails (a stalled
    slot: joints on their limits, a branch out of reach), one more call from these seeds
    finds an answer near the previous one, where ``restarts=True`` jumps to any.

    On 1 000 steps of the benchmark's paths (``benchmarks/wholebody.py``), each call
    warm-started with a posture :func:`away_from_limits`, a failed call retried once from 8
    such seeds (``scale=0.5``), the answer the successful slot nearest the previous one
    (:meth:`~torchik.ik.IKResult.nearest`): the G1's hands 100 % solved (97.1 % without the
    retry), the largest joint step 0.77 rad (``restarts=True``: 4.7-5.5 rad).

    Args:
        robot: the robot.
        q: ``(nq,)`` the configuration to scatter around.
        n: how many seeds.
        scale: the steps' standard deviation, ``> 0``.
        generator: random generator for the steps.

    Returns:
        ``(n, nq)``, the dtype and device of ``q``.

    Raises:
        ValueError: ``q`` not ``(nq,)``, ``n`` not in ``[1, MAX_SEEDS]``
            (:data:`~torchik.ik.inputs.MAX_SEEDS`) or ``scale`` not positive.
        TypeError: an argument of the wrong kind.

    Example:
        >>> import torchik
        >>> robot = torchik.load_robot("panda", dtype=torch.float64)
        >>> g = torch.Generator().manual_seed(0)
        >>> seeds = seeds_near(robot, robot.neutral(), 4, generator=g)
        >>> seeds.shape, bool(((seeds >= robot.lower) & (seeds <= robot.upper)).all())
        (torch.Size([4, 7]), True)
    """
    check_int("n", n, 1, MAX_SEEDS)
    scale = check_float("scale", scale, positive=True)
    check_generator("generator", generator)
    if not isinstance(q, Tensor) or not q.is_floating_point():
        got = f"a {q.dtype} tensor" if isinstance(q, Tensor) else type(q).__name__
        raise TypeError(f"q must be a floating-point tensor, got {got}")
    if q.shape != (robot.dof,) or q.device.type == "meta":
        raise ValueError(f"q must be a ({robot.dof},) tensor with values, got {tuple(q.shape)} "
                         f"on {q.device}")  # fmt: skip
    device = generator.device if generator is not None else q.device
    step = scale * torch.randn(n, robot.nv, generator=generator, dtype=q.dtype, device=device)
    step[:, : 6 * robot.floating_bases] = 0.0  # the bases stay where q has them
    step = step.to(q.device)
    seeds = robot.integrate(q.expand(n, -1), step) if robot.floating else q + step
    return torch.minimum(torch.maximum(seeds, robot.lower.to(q)), robot.upper.to(q))
