"""Start configurations: uniform random, or the random ones whose link pose is nearest the target.

Both draw uniform random configurations within the limits (never the answer). The ``nearest``
seeder draws a pool of them, computes their link poses in one batched FK, and gives every row
the pool member closest to its target in pose space; a local solver started there converges in
fewer iterations and more often than from an arbitrary draw, for the cost of one small FK and a
``(rows, pool)`` distance matrix. Restarts draw a fresh pool for the stalled rows only.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from torchik.robot.robot import Robot

__all__ = [
    "MAX_POOLS",
    "ONE_PRODUCT",
    "Seeder",
    "link_features",
    "nearest_in_pools",
    "nearest_member",
    "nearest_per_slot",
    "nearest_seeder",
    "pick_per_slot",
    "pooled",
    "target_features",
    "uniform_seeder",
]

MAX_POOLS = 8
"""Above this many slots per target, :func:`nearest_seeder` gives uniform random seeds."""

Seeder = Callable[[Tensor, Tensor], Tensor]
"""``(rows (n,), attempt (n,)) -> (n, dof)``: the seeds of attempt ``attempt`` (0 for the
first seed, 1 for the first restart, ...) of the given rows."""


def pooled(slots: int, pool_size: int) -> bool:
    """Whether ``slots`` per target take seeds from pools of ``pool_size`` nearest
    configurations: a pool at all, and at most :data:`MAX_POOLS` slots (uniform random seeds
    otherwise; see :func:`nearest_seeder`)."""
    return pool_size > 0 and slots <= MAX_POOLS


def nearest_in_pools(
    robot: Robot,
    link: str,
    position: Tensor,
    rotmat: Tensor | None,
    pool: Tensor,
    which: Tensor,
    rotation_weight: float,
) -> Tensor:
    """For every target, the member of one pool whose link pose is nearest to it.

    Distance: ``|p - p_t|² + w² (3 - tr(R_tᵀ R))`` (the second term is ``2 w² (1 - cos θ)``, about
    ``w² θ²`` for small angles), formed as one float32 matrix product; the choice of a seed
    needs no more precision.

    Args:
        robot: the robot; ``link`` the placed link.
        position: ``(n, 3)`` target positions; ``rotmat`` ``(n, 3, 3)`` or ``None``.
        pool: ``(P, S, dof)`` random configurations, ``P`` pools of ``S``.
        which: ``(n,)`` long, the pool each target picks from.
        rotation_weight: ``w`` (m/rad).

    Returns:
        ``(n, dof)`` configurations.
    """
    n_pools, size, dof = pool.shape
    a, b = _features(robot, link, position, rotmat, pool.reshape(-1, dof), rotation_weight)
    b = b.view(n_pools, size, -1)
    return pool[which, nearest_member(a, b, which, batched=pool.device.type != "cpu")]


ONE_PRODUCT = 1 << 22
"""The most distances (``draws * slots * pool_size * T``, float32: 16 MiB) that
:func:`nearest_per_slot` forms in one product; more take one product per draw (a solve of one
pose made two kernels per draw)."""


def nearest_per_slot(
    robot: Robot,
    link: str,
    position: Tensor,
    rotmat: Tensor | None,
    slots: int,
    pool_size: int,
    rotation_weight: float,
    generator: torch.Generator | None = None,
    draws: int = 1,
) -> Tensor:
    """For every draw, target and slot, the nearest member (see :func:`nearest_in_pools`) of a
    random pool of its own: the slots of a target never share a pool, nor do two draws. Every
    shape is fixed and nothing is read back to the host: one FK of ``draws * slots *
    pool_size`` configurations and one distance product (one per draw where they would pass
    :data:`ONE_PRODUCT` distances), for a solve captured in a CUDA graph
    (:mod:`torchik.ik.captured`, which draws its first seeds and every restart's at once).

    Args:
        position: ``(T, 3)`` target positions; ``rotmat`` ``(T, 3, 3)`` or ``None``.
        slots: ``S``, rows per target.
        pool_size: configurations per pool.
        draws: ``D``, sets of seeds.

    Returns:
        ``(D, T * S, dof)`` seeds, target-major (row ``t * S + s``: target ``t``, slot ``s``).
    """
    pool = robot.random_configuration(draws * slots * pool_size, generator)
    a, b = _features(robot, link, position, rotmat, pool, rotation_weight)
    return pick_per_slot(a, b, pool, draws, slots)


def pick_per_slot(a: Tensor, b: Tensor, pool: Tensor, draws: int, slots: int) -> Tensor:
    """The choice of :func:`nearest_per_slot` (and of whole-body IK's
    :func:`~torchik.ik.wholebody.seeds.drawn_seeds`) from features: for every draw ``d``,
    target ``t`` and slot ``s``, the member of pool ``(d, s)`` whose features ``b`` have the
    least product with the target's ``a``.

    Args:
        a: ``(T, F)`` float32 target features (:func:`target_features`).
        b: ``(D * S * P, F)`` float32 features of ``pool`` (:func:`link_features`).
        pool: ``(D * S * P, dof)`` configurations, draw-major, then slot, then member.
        draws: ``D``.
        slots: ``S``.

    Returns:
        ``(D, T * S, dof)``, target-major (row ``t * S + s``).
    """
    n_targets, dof = a.shape[0], pool.shape[-1]
    pool_size = pool.shape[0] // (draws * slots)
    b = b.view(draws, slots * pool_size, -1)
    if draws * slots * pool_size * n_targets <= ONE_PRODUCT:  # every draw at once
        best = _argmin((b @ a.T).view(draws, slots, pool_size, -1), 2)
    else:  # (D, S, T): one (S * P, T) product at a time
        best = torch.stack(
            [_argmin((b[d] @ a.T).view(slots, pool_size, -1), 1) for d in range(draws)]
        )
    pool = pool.view(draws, slots, pool_size, dof)
    chosen = pool.gather(2, best[..., None].expand(-1, -1, -1, dof))  # (D, S, T, dof)
    return chosen.transpose(1, 2).reshape(draws, n_targets * slots, dof)


def target_features(
    position: Tensor, rotmat: Tensor | None, rotation_weight: float, weight: float = 1.0
) -> Tensor:
    """Float32 features ``(n, F)`` of targets whose dot product with :func:`link_features` of a
    link pose is ``weight`` times their pose distance ``|p - p_t|² + w² (3 - tr(R_tᵀ R))`` up
    to a constant per target: ``weight [-2 p_t, 1, -w² R_t]`` (``R_t`` flattened; ``F`` 13,
    or 4 for positions, ``rotmat`` ``None``). The one formula of every pose-space seeder, the
    compiled round's included (:func:`torchik.kinematics.native.ik_round`).

    Args:
        position: ``(n, 3)`` target positions; ``rotmat`` ``(n, 3, 3)`` or ``None``.
        rotation_weight: ``w`` (m/rad).
        weight: the target's weight (whole-body IK's per-link weights).
    """
    # |p - p_t|² = |p|² - 2 p·p_t + |p_t|², and -w² tr(R_tᵀ R) = -w² R_t:R (flattened dot)
    parts = [-2.0 * weight * position, torch.full_like(position[:, :1], weight)]
    if rotmat is not None:
        parts.append(-weight * rotation_weight**2 * rotmat.flatten(-2))
    return torch.cat(parts, dim=-1).float()


def link_features(pose: Tensor, rotations: bool) -> Tensor:
    """Float32 features ``(M, F)`` of link poses ``(M, 4, 4)``: ``[p, |p|², R]`` (``R``
    flattened, only with ``rotations``), the other side of :func:`target_features`."""
    p = pose[:, :3, 3]
    parts = [p, (p * p).sum(-1, keepdim=True)]
    if rotations:
        parts.append(pose[:, :3, :3].flatten(-2))
    return torch.cat(parts, dim=-1).float()


def _features(robot, link, position, rotmat, configurations, rotation_weight):
    """``(n, F)`` target and ``(M, F)`` configuration features, float32, whose dot product is
    the pose distance of :func:`nearest_in_pools` up to a per-target constant."""
    pose = robot.forward_kinematics(configurations, link)
    a = target_features(position, rotmat, rotation_weight)
    return a, link_features(pose, rotmat is not None)


def nearest_member(a: Tensor, b: Tensor, which: Tensor, batched: bool) -> Tensor:
    """``(n,)`` index in its pool of the entry of ``b (P, S, F)`` that minimises ``a_r . b``.

    ``batched``: each row's pool gathered and one batched product, without a host sync (for
    accelerators); else one product per pool over its rows (less work; the CPU)."""
    if batched:
        return _argmin((b[which] @ a[:, :, None]).squeeze(-1), -1)
    best = torch.empty_like(which)
    for k in range(b.shape[0]):  # a few pools: one product per pool, over its rows only
        rows = torch.nonzero(which == k).flatten()
        best[rows] = _argmin(a[rows] @ b[k].T, -1)
    return best


def _argmin(x: Tensor, dim: int) -> Tensor:
    """``x.argmin(dim)``, the same indices (the first of equal minima; a NaN's where one is)
    by ``torch.min``, which PyTorch's CPU reduction runs 2-2.5 times faster: a pool of 256
    against 1 000 rows, 0.29 against 0.74 ms on one thread."""
    return torch.min(x, dim=dim).indices


def uniform_seeder(robot: Robot, generator: torch.Generator | None) -> Seeder:
    """Uniform random configurations, whatever the row."""
    return lambda rows, attempt: robot.random_configuration(rows.shape[0], generator)


def nearest_seeder(
    robot: Robot,
    link: str,
    position: Tensor,
    rotmat: Tensor | None,
    slots: int,
    pool_size: int,
    rotation_weight: float,
    generator: torch.Generator | None = None,
) -> Seeder:
    """Seeds nearest to the targets among random pools (see :func:`nearest_in_pools`).

    Every call draws ``slots`` pools; row ``r`` (target ``r // slots``, slot ``r % slots``)
    picks from pool ``(slot + attempt) % slots``, so the slots of one target never share a pool
    in a call and their seeds differ. With more than :data:`MAX_POOLS` slots per target the
    seeds are uniform random instead: so many slots are asked for to find many different
    solutions, which spread-out seeds find as well, and one pool per slot would cost much more.

    Args:
        position: ``(T, 3)`` target positions; ``rotmat`` ``(T, 3, 3)`` or ``None``.
        slots: ``K``, rows per target.
        pool_size: configurations per pool.
    """

    if not pooled(slots, pool_size):
        return uniform_seeder(robot, generator)

    def seeder(rows: Tensor, attempt: Tensor) -> Tensor:
        pool = robot.random_configuration(slots * pool_size, generator)
        target = rows // slots
        which = (rows % slots + attempt) % slots
        rot = None if rotmat is None else rotmat[target]
        pool = pool.view(slots, pool_size, robot.dof)
        return nearest_in_pools(robot, link, position[target], rot, pool, which, rotation_weight)

    return seeder
