"""Refinement of given configurations, typically a learned model's samples, by a solver."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from torchik.checks import check_float, check_int
from torchik.ik.base import IKSolver
from torchik.ik.result import IKResult
from torchik.ik.solve import solve_ik
from torchik.robot.configuration import MAX_CONFIGURATIONS
from torchik.robot.robot import Robot

__all__ = ["MARGIN", "Collected", "collect_solutions", "refine_samples"]


def refine_samples(
    robot: Robot,
    target: Tensor,
    samples: Tensor,
    link: str | None = None,
    *,
    position_only: bool = False,
    method: str | IKSolver = "lm",
    tol_position: float = 1e-3,
    tol_rotation: float = math.radians(1.0),
    max_iters: int | None = None,
    num_threads: int | None = None,
) -> IKResult:
    """Polish every sample with a numerical solver: slot ``k`` is sample ``k`` refined.

    This is :func:`~torchik.ik.solve_ik` with the samples as ``seeds``, ``early_stop=False``
    (every sample runs, even once another one of its target has succeeded, so each gives its own
    solution and :meth:`IKResult.distinct` sees them all) and ``restarts=False`` (a sample that
    stalls stays a failure instead of being swapped for a random seed, so the success rate and
    the distance moved describe the samples, not the solver's seeding).

    Args:
        robot: the robot.
        target: ``(..., 4, 4)`` poses of ``link``, or with ``position_only=True`` ``(..., 3)``
            positions.
        samples: ``(..., K, dof)`` configurations per target (or ``(K, dof)`` for every target),
            any floating dtype (cast to the robot's); projected into the limits first.
        link: the link to place (default: :func:`~torchik.ik.default_link`).
        position_only: ignore the orientation.
        method: a name in :data:`~torchik.ik.METHODS` or a configured solver.
        tol_position: success threshold (m); the solver stops a slot once within both.
        tol_rotation: success threshold (rad) on the geodesic rotation error.
        max_iters: override the solver's iteration budget.
        num_threads: torch intra-op threads during the solve (see :func:`~torchik.ik.solve_ik`).

    Returns:
        An :class:`IKResult` with ``q (..., K, dof)``, slot for slot the refined samples.

    Example:
        >>> import torch, torchik
        >>> from torchik.ik import refine_samples
        >>> robot = torchik.load_robot("panda", dtype=torch.float64)
        >>> g = torch.Generator().manual_seed(0)
        >>> q = robot.random_configuration(3, g)
        >>> target = robot.forward_kinematics(q, "panda_hand")
        >>> noise = 0.05 * torch.randn(3, 4, 7, generator=g, dtype=torch.float64)
        >>> result = refine_samples(robot, target, q[:, None] + noise)
        >>> result.q.shape, bool(result.success.all())
        (torch.Size([3, 4, 7]), True)
    """
    return solve_ik(
        robot, target, link, position_only=position_only, seeds=samples, method=method,
        tol_position=tol_position, tol_rotation=tol_rotation, max_iters=max_iters,
        early_stop=False, restarts=False, num_threads=num_threads,
    )  # fmt: skip


MARGIN = 0.05
""":func:`collect_solutions`' first round draws this share more seeds than solutions wanted
(the bundled Panda model's samples refine at 97.5 % within 15 LM iterations: most poses then
need one round)."""


@dataclass(frozen=True)
class Collected:
    """What :func:`collect_solutions` gathered.

    Attributes:
        q: ``(m, dof)`` solutions, ``m <= count`` (fewer only when the rounds ran out).
        seeds: seeds refined in all.
        rounds: rounds run.
    """

    q: Tensor
    seeds: int
    rounds: int


def collect_solutions(
    solve: Callable[[int, int], IKResult],
    count: int,
    *,
    margin: float = MARGIN,
    rounds: int = 5,
) -> Collected:
    """``count`` solutions of one target from rounds of seeds refined: ``solve(n, round)``
    refines ``n`` seeds (a model's samples, random configurations) and returns their
    :class:`IKResult` ``(n, dof)``; the first round asks for ``ceil(count * (1 + margin))``,
    each later one for 1.5 times the shortfall (at least 8), until ``count`` succeed or
    ``rounds`` have run. One host read per round (the successes counted).

    Raises:
        ValueError: ``count`` or ``rounds`` under 1, ``margin`` outside ``[0, 100]``, or
            more first seeds than :data:`~torchik.robot.configuration.MAX_CONFIGURATIONS`.
        TypeError: counts that are not ints, a margin that is not a number.

    Example:
        >>> import torch, torchik
        >>> robot = torchik.load_robot("panda", dtype=torch.float64)
        >>> pose = robot.forward_kinematics(robot.random_configuration(1)[0], "panda_hand")
        >>> def solve(n, round_):
        ...     seeds = robot.random_configuration(n, torch.Generator().manual_seed(round_))
        ...     return refine_samples(robot, pose, seeds, tol_rotation=0.01)
        >>> got = collect_solutions(solve, 20)
        >>> got.q.shape, got.seeds >= 21
        (torch.Size([20, 7]), True)
    """
    check_int("count", count, 1)
    check_int("rounds", rounds, 1)
    margin = check_float("margin", margin, 0.0, 100.0)
    if math.ceil(count * (1.0 + margin)) > MAX_CONFIGURATIONS:
        raise ValueError(f"count * (1 + margin) seeds must be at most {MAX_CONFIGURATIONS}, "
                         f"got {count} and {margin}")  # fmt: skip
    found: list[Tensor] = []
    solved = seeds = round_ = 0
    while round_ < rounds and solved < count:
        n = (
            math.ceil(count * (1.0 + margin))
            if not round_
            else max(8, math.ceil(1.5 * (count - solved)))
        )
        result = solve(n, round_)
        found.append(result.q[result.success])
        solved, seeds, round_ = solved + int(result.success.sum()), seeds + n, round_ + 1
    return Collected(torch.cat(found)[:count], seeds, round_)
