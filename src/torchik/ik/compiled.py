"""A round of ``solve_ik`` as one compiled call on the CPU.

On the CPU a round of :mod:`torchik.ik.rounds` (the seeds nearest the targets among random
pools, a chunk of the compiled loop, the evaluation by FK, each target's slots best first) made
about 280 small PyTorch operations around a loop that took tens of microseconds: one Panda pose
took 1.3 ms where TRAC-IK takes 0.4. Here the round after its random draw is one call of
:func:`torchik.kinematics.native.ik_round`: the same draws from the generator, the same seeds,
iterations and evaluation, so the same answers (``q`` bit for bit in float64, tested), in a
few operations: one pose in about TRAC-IK's time per pose. Where two values tie to rounding,
the kernel, which sums in another order than PyTorch's reductions and BLAS, may break the tie
the other way: two pool members at one distance from a target (a symmetric robot's mirror
configurations) give the other seed, two slots of one error come back in the other order.

It serves where the round would run the compiled loop without restarts between its chunks:
Levenberg-Marquardt on the CPU with Numba (:meth:`~torchik.ik.IKSolver.compiled_round`), the
joint limits or a box per target (``lower``/``upper``), and either random seeds in rounds
(``early_stop`` and restarts; ``round_iters + 1`` evaluations in one chunk, ``sync_every``: the
default's 11 are), the first round and the retry rounds alike, or given seeds (:func:`given`):
a warm start (a previous solution per target, path following: 0.95 ms for one pose before, a
quarter of that now), then random rounds if restarts are allowed, or samples refined each on
its own (:func:`~torchik.ik.refine_samples`).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from torchik.ik.base import CUDA_SYNC_EVERY, JointLimits, LinkTarget
from torchik.ik.result import IKResult
from torchik.ik.seeding import pooled, target_features
from torchik.kinematics import native

__all__ = ["given", "round_of", "serves", "serves_given"]

Run = Any  # torchik.ik.rounds.Run, which calls this module


def serves(run: Run) -> bool:
    """Whether the rounds of ``run`` (random seeds, :meth:`Run.random` and the retry rounds)
    take :func:`round_of`: see the module's docstring."""
    s = run.solver.settings
    if not (run.restarts and run.staged):
        return False
    if min(s.round_iters, s.max_iters) + 1 > _chunk(s):
        return False  # restarts between the round's chunks: the rounds' own loop
    return run.solver.compiled_round(run.robot, run.position)


def serves_given(run: Run) -> bool:
    """Whether :func:`given` takes ``run``'s given seeds: in rounds (``early_stop``), at most
    ``initial_seeds`` per target (a warm start: one round of them, then random rounds if
    restarts are allowed); else without restarts (each seed refined on its own,
    :func:`~torchik.ik.refine_samples`); on a solver whose rounds run compiled
    (:meth:`~torchik.ik.IKSolver.compiled_round`)."""
    if run.staged:
        if run.k > run.solver.settings.initial_seeds:
            return False
    elif run.restarts:
        return False  # restarts between the chunks of one round of max_iters
    return run.solver.compiled_round(run.robot, run.position)


def round_of(
    run: Run, todo: Tensor | None, slots: int, iters: int, used: int, order: bool
) -> IKResult:
    """One round of ``iters`` iterations of ``slots`` fresh random seeds per target (the
    targets ``todo``, long, or all), as :mod:`torchik.ik.rounds` runs it, in one compiled
    call (see :func:`serves`).

    Args:
        run: the call's rounds.
        todo: the targets of this round, or ``None``: every one.
        slots: seeds per target.
        iters: the round's iterations.
        used: iterations of the earlier rounds (added to ``iterations``).
        order: each target's slots best first (:meth:`IKResult.top`), else in slot order.

    Returns:
        An :class:`IKResult` with ``q (T, slots, dof)``.
    """
    position, rotmat, limits = _targets(run, todo)
    n, g = position.shape[0], run.generator
    if limits.per_row:  # uniform in each target's box, as the rounds draw them
        rows = torch.arange(n * slots, device=position.device)
        pool, size = limits.rows(rows // slots).sample(rows, g), 0
    else:
        size = run.seed_pool if pooled(slots, run.seed_pool) else 0
        pool = run.robot.random_configuration(slots * (size or n), g)
    return _call(run, position, rotmat, limits, pool, size, slots, iters, used, order)


def given(run: Run, seeds: Tensor, iters: int) -> IKResult:
    """The given ``seeds (T * K, dof)`` refined for ``iters`` iterations in one compiled call
    (see :func:`serves_given`): the first round of :meth:`Run.given`, slot for slot."""
    position, rotmat, limits = _targets(run, None)
    return _call(run, position, rotmat, limits, seeds, 0, run.k, iters, 0, False)


def _targets(run: Run, todo: Tensor | None) -> tuple[Tensor, Tensor | None, JointLimits]:
    """The targets ``todo`` (or all) of ``run`` and their limits: the joint limits, or each
    target's box within them (:meth:`JointLimits.within`)."""
    position, rotmat, bounds = run.targets(todo)
    limits = JointLimits.of(run.robot)
    return position, rotmat, limits if bounds is None else limits.within(*bounds)


def _call(run: Run, position: Tensor, rotmat: Tensor | None, limits: JointLimits, pool: Tensor,
          size: int, slots: int, iters: int, used: int, order: bool) -> IKResult:  # fmt: skip
    """:func:`torchik.kinematics.native.ik_round` with ``run``'s robot and settings."""
    robot, s = run.robot, run.solver.settings
    w = LinkTarget(run.link, position, rotmat).weights(s.rotation_weight)
    aims = target_features(position, rotmat, s.rotation_weight)
    joints = (robot.lower, robot.upper) if limits.per_row else None
    q, success, pos_err, rot_err, iterations = native.ik_round(
        pool, size, robot.tree, robot.link_index(run.link), position, rotmat,
        w, aims, s.damping, limits.lower, limits.upper,
        slots=slots, iters=iters, tol_position=run.tol_position, tol_rotation=_tol(run),
        damping_floor=s.damping_floor, continuous=limits.continuous,
        full_turn=limits.full_turn, order=order, chunk=_chunk(s), early_stop=s.early_stop,
        joint_limits=joints,
    )  # fmt: skip
    if used:
        iterations += used
    return IKResult(q, success, pos_err, rot_err, iterations, run.tol_position, _tol(run),
                    robot.continuous)  # fmt: skip


def _chunk(s: Any) -> int:
    """Evaluations per chunk of the fixed loop on the CPU (:meth:`IKSolver.solve`)."""
    return s.sync_every or CUDA_SYNC_EVERY


def _tol(run: Run) -> float:
    """The rotation tolerance of the evaluation: none for positions."""
    return math.inf if run.rotmat is None else run.tol_rotation
