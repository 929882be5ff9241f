"""Seeds of whole-body IK (:mod:`torchik.ik.wholebody.solve`), on a fixed or a floating base.

Fixed base: each seed is the member of a pool of uniform random configurations whose link poses
are nearest to the targets (as :func:`~torchik.ik.seeding.nearest_seeder` does for one link).

Floating base: a random configuration says nothing about where the base should be, so the pool
is compared with the targets *relative to a reference target* (the first pose target: every
pose in its frame), which no base pose changes; the chosen seed's base is then put where its
links best fit the targets, a weighted Procrustes fit (:func:`fit_base`). Only the targets are
used, never the configurations they were made from.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from torchik.geometry.rotations import rotmat_to_quat
from torchik.geometry.transforms import invert_transform, pose_to_matrix
from torchik.ik.base import JointLimits
from torchik.ik.lm import LMSettings
from torchik.ik.seeding import (
    Seeder,
    link_features,
    nearest_member,
    pick_per_slot,
    target_features,
)
from torchik.ik.wholebody.problem import WholeBodyProblem
from torchik.kinematics import native

__all__ = ["RESTART_POOLS", "RESTART_ROWS", "drawn_seeds", "fit_base", "wholebody_seeder"]

_ROTATION_WEIGHT = LMSettings.rotation_weight
"""ρ (m/rad) of the seeds' pose distance: the Levenberg-Marquardt settings' default (read from
the class: making the settings checks every field, a tenth of a millisecond per solve)."""


def wholebody_seeder(
    problem: WholeBodyProblem,
    k: int,
    pool_size: int,
    generator: torch.Generator | None,
    restarts: bool = False,
) -> Seeder:
    """Seeds for the rows of ``problem`` (``k`` slots per target): the member nearest to the
    targets of a pool of ``pool_size`` uniform random configurations (one pool per slot),
    drawn within the rows' box where they share one (joints held at one rest for every
    target: an arm's joints alone, a scene's free bodies); uniform random ones within each
    row's box where the boxes differ (a rest or box per target) or ``pool_size`` is 0. A
    floating base is fitted to the targets (:func:`fit_base`), or held at its rest pose when
    inactive. With ``restarts`` (the CPU's compiled loop solves the problem) the first draw
    also draws :attr:`WholeBodyProblem.pool`, pools the compiled loop restarts stalled rows
    from (placing a floating base itself, as :func:`fit_base` does)."""
    limits, robot = problem.limits, problem.robot
    if robot.floating:  # a base box is infinite: sample a finite one, then place the base
        lower, upper = (b.nan_to_num(0.0, 0.0, 0.0) for b in (limits.lower, limits.upper))
        limits = replace(limits, lower=lower, upper=upper)
    box = _shared_box(limits) if limits.per_row else None
    if not pool_size or (limits.per_row and box is None):

        def uniform(rows: Tensor, attempt: Tensor) -> Tensor:
            index = torch.arange(rows.shape[0], device=rows.device)
            return _place_base(problem, limits.rows(rows).sample(index, generator), rows)

        return uniform

    aims = _target_features(problem)  # every row's

    def seeder(rows: Tensor, attempt: Tensor) -> Tensor:
        size = k * pool_size  # this draw's pool, and the first time the restarts' pools
        pools = _restart_pools(len(problem)) if restarts and problem.pool is None else 0
        drawn = _random_pool(problem, (1 + pools) * size, generator, box)
        features = _pool_features(problem, drawn)  # one FK call for them all
        pool, a, b = drawn[:size], aims[rows], features[:size]
        if pools:
            shape = (pools, size, -1)
            problem.pool = drawn[size:].view(shape), features[size:].view(shape), aims, k
        which = (rows % k + attempt) % k
        batched = rows.device.type != "cpu"  # no host read on accelerators
        best = nearest_member(a, b.view(k, pool_size, -1), which, batched) + which * pool_size
        return _place_base(problem, pool[best], rows)

    return seeder


def drawn_seeds(
    problem: WholeBodyProblem,
    k: int,
    pool_size: int,
    generator: torch.Generator | None,
    draws: int,
) -> Tensor:
    """``(draws, N, nq)``: ``draws`` seeds of every row of ``problem`` (``k`` slots per target),
    drawn at once and with no host read, for whole-body IK's one-graph program
    (:mod:`torchik.ik.wholebody.captured`: the first seeds, then one per restart offer). Each
    draw has its own ``k`` pools of ``pool_size`` uniform random configurations, and row ``r``
    takes the member of pool ``r % k`` nearest to its targets, as the first draw of
    :func:`wholebody_seeder` does (one FK call and, up to
    :data:`~torchik.ik.seeding.ONE_PRODUCT` distances, one product for every draw:
    :func:`~torchik.ik.seeding.pick_per_slot`); ``pool_size`` 0: uniform random
    configurations. A fixed base, the joint limits shared by the rows."""
    robot, n = problem.robot, len(problem)
    if not pool_size:
        return robot.random_configuration(draws * n, generator).view(draws, n, robot.dof)
    pool = robot.random_configuration(draws * k * pool_size, generator)
    aims = _target_features(problem).view(n // k, k, -1)[:, 0]  # a target's slots share it
    return pick_per_slot(aims, _pool_features(problem, pool), pool, draws, k)


RESTART_POOLS = 4
"""Fresh pools the CPU's compiled loop restarts stalled rows from, at most: one per
:data:`RESTART_ROWS` rows, one at least. Restart ``a`` of a row takes the nearest member of
pool ``(a - 1) mod R``'s sub-pool, then the next nearest once every pool served (see
``restarts`` of :func:`torchik.kinematics.native.lm_loop`). On the G1's two hands, 1000 targets
(2000 rows, float32): the same success and mean iterations as a fresh pool drawn at every
restart (100 %, 9.97 against 9.95), where the first pool's next nearest members alone solved
99.6 % in 11.4. Restarting in the kernel, a solve is one call of it (see
:func:`wholebody_seeder`)."""

RESTART_ROWS = 128
"""Rows per restart pool (:data:`RESTART_POOLS`). Fewer rows take one pool all the same, drawn
with the first seeds' (one FK call): then a solve is one call of the compiled loop however
many restarts it takes. G1 hands, float64, one thread, 400 targets one at a time: median 4.9-5.5
ms, 90th percentile 5.6-5.7, 99th 6.2-12.3, where restarting between calls of 4 iterations
from a pool drawn each time took 4.5-5.0, 9.8 and 17.7-18.7 ms (the median pays for the pool's
FK); all 400 solved either way, 9.2 mean iterations against 10.4. On a small two-arm tree in
batches of 20 targets: 1 775 of 1 800 solved against 1 779."""


def _restart_pools(rows: int) -> int:
    """How many pools a problem of ``rows`` rows restarts from (:data:`RESTART_POOLS`)."""
    return max(1, min(RESTART_POOLS, rows // RESTART_ROWS))


def _shared_box(limits: JointLimits) -> JointLimits | None:
    """The box every row of the per-row ``limits`` shares (one row's), or ``None`` where two
    rows' boxes differ (one host read) or there is no row."""
    lower, upper = limits.lower, limits.upper
    if not len(lower) or not bool(((lower == lower[:1]) & (upper == upper[:1])).all()):
        return None
    return replace(limits, lower=lower[:1], upper=upper[:1])


def _random_pool(problem: WholeBodyProblem, n: int, generator: torch.Generator | None,
                 box: JointLimits | None = None) -> Tensor:  # fmt: skip
    """``(n, nq)`` uniform random configurations, within the rows' shared ``box`` if given
    (its floating bases' boxes made finite), every moving floating base at its zero pose (a
    seed's base is placed where its links fit the targets: :func:`fit_base`, or the compiled
    loop's own fit for a restart); a held one stays where its box holds it."""
    robot = problem.robot
    if box is None:
        pool = robot.random_configuration(n, generator)
    else:
        pool = box.sample(torch.zeros(n, dtype=torch.long, device=robot.device), generator)
    for b in problem.moving_bases:
        pool[:, 7 * b : 7 * b + 7] = robot.neutral()[7 * b : 7 * b + 7]
    return pool


def _place_base(problem: WholeBodyProblem, q: Tensor, rows: Tensor) -> Tensor:
    """``q (n, nq)`` with the moving floating base fitted to the targets of ``rows``
    (:func:`fit_base`); ``q`` itself without one. A held base is at its rest pose already:
    held coordinates make boxes per row, whose uniform draw is that pose."""
    return fit_base(problem, q, rows) if problem.moving_bases else q


def _target_features(problem: WholeBodyProblem) -> Tensor:
    """Float32 features ``(N, f)`` of every row's targets whose product with
    :func:`_pool_features` of link poses is their weighted pose distance up to a constant per
    row: ``Σ_i w_i (|p_i - p_ti|² + ρ² (3 - tr(R_tiᵀ R_i)))`` (as :func:`nearest_in_pools`), the
    poses in the frame of the reference target on a floating base."""
    rho = _ROTATION_WEIGHT
    if not problem.moving_bases:  # the targets as they are (the same values as their poses')
        return torch.cat([target_features(t.position, t.rotmat, rho, t.weight)
                          for t in problem.targets], dim=-1)  # fmt: skip
    targets = _relative(problem, problem.target_poses)
    return torch.cat([
        target_features(targets[:, i, :3, 3], None if t.rotmat is None else targets[:, i, :3, :3],
                        rho, t.weight)
        for i, t in enumerate(problem.targets)
    ], dim=-1)  # fmt: skip


def _pool_features(problem: WholeBodyProblem, pool: Tensor) -> Tensor:
    """Float32 features ``(P, f)`` of the target links' poses at the configurations ``pool``
    (see :func:`_target_features`); on a fixed base and the CPU's compiled FK, in one pass
    (:func:`torchik.kinematics.native.link_features`: the same values)."""
    robot, links = problem.robot, [t.link for t in problem.targets]
    if robot.takes_native(pool):
        index = tuple(robot.link_index(link) for link in links)
        posed = tuple(t.rotmat is not None for t in problem.targets)
        return native.link_features(pool, robot.tree, index, posed)
    poses = robot.forward_kinematics(pool, links)
    if problem.moving_bases:
        poses = _relative(problem, poses)
    parts = [
        link_features(poses[:, i], t.rotmat is not None) for i, t in enumerate(problem.targets)
    ]
    return torch.cat(parts, dim=-1)


def _relative(problem: WholeBodyProblem, poses: Tensor) -> Tensor:
    """``poses (n, L, 4, 4)`` in the frame of the reference target: the first pose target of
    positive weight (the first target of positive weight, translated only, if none)."""
    weighted = [i for i, t in enumerate(problem.targets) if t.weight > 0]
    posed = [i for i in weighted if problem.targets[i].rotmat is not None]
    frame = poses[:, (posed or weighted)[0]].clone()
    if not posed:
        frame[:, :3, :3] = torch.eye(3, dtype=frame.dtype, device=frame.device)
    return invert_transform(frame)[:, None] @ poses


def fit_base(problem: WholeBodyProblem, q: Tensor, rows: Tensor) -> Tensor:
    """``q (n, nq)`` with its floating base moved to where its target links best fit the
    targets of ``rows``.

    With the links' poses ``X_i = [R_i | x_i]`` at the neutral base, the world motion
    ``[R | t]`` minimises ``Σ_i w_i (|R x_i + t - p_i|² + ρ² (3 - tr(R_tiᵀ R R_i)))``: ``R``
    maximises ``tr(Rᵀ M)``, ``M = Σ w_i (p_i - p̄)(x_i - x̄)ᵀ + ρ² Σ w_i R_ti R_iᵀ`` (the
    Kabsch SVD, with the sign fix that keeps ``det R = 1``), and ``t = p̄ - R x̄`` (weighted
    means).

    The base is the one that moves (:attr:`WholeBodyProblem.moving_bases`; the others keep
    their coordinates in ``q``).

    Returns:
        ``(n, nq)``.
    """
    robot, rho = problem.robot, _ROTATION_WEIGHT
    (k,) = problem.moving_bases
    at, neutral = slice(7 * k, 7 * k + 7), robot.neutral()
    q = q.clone()
    q[:, at] = neutral[at]
    links = [t.link for t in problem.targets]
    poses, targets = robot.forward_kinematics(q, links), problem.target_poses[rows]
    w = q.new_tensor([t.weight for t in problem.targets])
    x, p = poses[..., :3, 3], targets[..., :3, 3]
    x_mean, p_mean = (w[:, None] * x).sum(1) / w.sum(), (w[:, None] * p).sum(1) / w.sum()
    m = ((p - p_mean[:, None]) * w[:, None]).transpose(-1, -2) @ (x - x_mean[:, None])
    for i, t in enumerate(problem.targets):
        if t.rotmat is not None:
            m = m + w[i] * rho**2 * targets[:, i, :3, :3] @ poses[:, i, :3, :3].transpose(-1, -2)
    u, _, vh = torch.linalg.svd(m)
    sign = torch.linalg.det(u @ vh)
    u = torch.cat((u[..., :2], u[..., 2:] * sign[:, None, None]), dim=-1)
    rot = u @ vh
    world = pose_to_matrix(p_mean - (rot @ x_mean[..., None])[..., 0], rot)
    origin = problem.base_frame(k)  # the base frame at neutral
    base = invert_transform(origin) @ world @ origin
    q[:, at] = torch.cat((base[:, :3, 3], rotmat_to_quat(base[:, :3, :3])), dim=-1)
    return q
