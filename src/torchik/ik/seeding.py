"""Start configurations: uniform random, or the random ones whose link pose is nearest the target.

Both draw uniform random configurations within the limits (never the answer). ``nearest`` draws a
pool of them once per call, computes their link poses in one batched FK, and gives every target
the pool members closest to it in pose space; a local solver started there converges in fewer
iterations and more often than from an arbitrary draw, for the cost of one small FK and a
``(targets, pool)`` distance matrix.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from torchik.robot import Robot

__all__ = ["Seeder", "nearest_candidates"]

Seeder = Callable[[Tensor], Tensor]
"""``groups (n,) -> (n, dof)``: fresh seeds for rows of the given targets."""


def nearest_candidates(
    robot: Robot,
    link: str,
    position: Tensor,
    rotmat: Tensor | None,
    count: int,
    pool_size: int,
    rotation_weight: float,
    generator: torch.Generator | None = None,
) -> Tensor:
    """For every target, the nearest configuration of each of ``count`` random sub-pools.

    ``pool_size`` uniform random configurations are split into ``count`` sub-pools; candidate
    ``c`` of a target is the member of sub-pool ``c`` whose link pose is nearest to it, with the
    distance ``|p - p_t|² + w² (3 - tr(R_tᵀ R))`` (the second term is ``2 w² (1 - cos θ)``, about
    ``w² θ²`` for small angles). Separate sub-pools keep the candidates of one target apart
    (nearest neighbours of a single pool tend to fail together), and an ``argmin`` per sub-pool
    is much cheaper than a ``topk``. The distances are one float32 matrix product.

    Args:
        robot: the robot; ``link`` the placed link.
        position: ``(T, 3)`` target positions; ``rotmat`` ``(T, 3, 3)`` or ``None``.
        count: candidates per target (sub-pools).
        pool_size: random configurations drawn in all (at least ``count``).
        rotation_weight: ``w`` (m/rad).
        generator: for the random configurations.

    Returns:
        ``(T, count, dof)`` configurations.
    """
    per_pool = max(pool_size // count, 1)
    pool = robot.random_configuration(per_pool * count, generator)
    pose = robot.forward_kinematics(pool, link)
    p = pose[:, :3, 3]
    # |p - p_t|² = |p|² - 2 p·p_t + const, and -w² tr(R_tᵀ R) = -w² R_t:R (flattened dot)
    pool_features = [p, (p * p).sum(-1, keepdim=True)]
    target_features = [-2.0 * position, torch.ones_like(position[:, :1])]
    if rotmat is not None:
        pool_features.append(pose[:, :3, :3].flatten(-2))
        target_features.append(-(rotation_weight**2) * rotmat.flatten(-2))
    a = torch.cat(target_features, dim=-1).float()
    b = torch.cat(pool_features, dim=-1).float()
    dist = (a @ b.T).view(-1, count, per_pool)
    index = dist.argmin(dim=-1) + per_pool * torch.arange(count, device=dist.device)
    return pool[index]


def uniform_seeder(robot: Robot, generator: torch.Generator | None) -> Seeder:
    """Fresh uniform random configurations, whatever the target."""
    return lambda groups: robot.random_configuration(groups.shape[0], generator)


def candidate_seeder(
    candidates: Tensor, first: int, robot: Robot, generator: torch.Generator | None
) -> Seeder:
    """Seeds drawn at random among ``candidates[g, first:]`` of each target ``g``; uniform random
    configurations once a target has no spare candidates (``first == C``)."""
    spare = candidates.shape[1] - first
    if spare <= 0:
        return uniform_seeder(robot, generator)

    def seeder(groups: Tensor) -> Tensor:
        u = torch.rand(groups.shape[0], generator=generator, device=groups.device)
        pick = first + (u * spare).long().clamp_max(spare - 1)
        return candidates[groups, pick]

    return seeder
