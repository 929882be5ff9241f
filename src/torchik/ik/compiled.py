"""A round of ``solve_ik`` with random seeds as one compiled call on the CPU.

On the CPU a round of :mod:`torchik.ik.rounds` (the seeds nearest the targets among random
pools, a chunk of the compiled loop, the evaluation by FK, each target's slots best first) made
about 280 small PyTorch operations around a loop that took tens of microseconds: one Panda pose
took 1.3 ms where TRAC-IK takes 0.4. Here the round after its random draw is one call of
:func:`torchik.kinematics.native.ik_round`: the same draws from the generator, the same seeds,
iterations and evaluation, so the same answers (bit for bit in ``q``, tested), in a few
operations.

It serves where the round would run the compiled loop in one chunk: Levenberg-Marquardt on the
CPU with Numba (:meth:`~torchik.ik.IKSolver.compiled_round`), random seeds in rounds
(``early_stop`` and restarts), no box per target, and ``round_iters + 1`` evaluations in one
chunk (``sync_every``; the default's 11 are). The first round and the retry rounds both take
it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from torchik.ik.base import CUDA_SYNC_EVERY, JointLimits
from torchik.ik.result import IKResult
from torchik.ik.seeding import pooled
from torchik.kinematics import native

__all__ = ["round_of", "serves"]

Run = Any  # torchik.ik.rounds.Run, which calls this module


def serves(run: Run) -> bool:
    """Whether the rounds of ``run`` (random seeds, :meth:`Run.random` and the retry rounds)
    take :func:`round_of`: see the module's docstring."""
    s = run.solver.settings
    if run.bounds is not None or not (run.restarts and run.staged):
        return False
    if min(s.round_iters, s.max_iters) + 1 > (s.sync_every or CUDA_SYNC_EVERY):
        return False  # restarts between the round's chunks: the rounds' own loop
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
    robot, s = run.robot, run.solver.settings
    position, rotmat = run.position, run.rotmat
    if todo is not None:
        position, rotmat = position[todo], None if rotmat is None else rotmat[todo]
    size = run.seed_pool if pooled(slots, run.seed_pool) else 0
    pool = robot.random_configuration(slots * (size or position.shape[0]), run.generator)
    limits = JointLimits.of(robot)
    w = np.full(3 if rotmat is None else 6, s.rotation_weight, pool.numpy().dtype)
    w[:3] = 1.0  # the rows' weights, as LinkTarget.weights makes them
    q, success, pos_err, rot_err, iterations = native.ik_round(
        pool, size, robot.tree, robot.link_index(run.link), position, rotmat,
        torch.from_numpy(w), s.rotation_weight, s.damping, limits.lower, limits.upper,
        slots=slots, iters=iters, tol_position=run.tol_position, tol_rotation=_tol(run),
        damping_floor=s.damping_floor, continuous=limits.continuous,
        full_turn=limits.full_turn, order=order,
    )  # fmt: skip
    if used:
        iterations += used
    return IKResult(q, success, pos_err, rot_err, iterations, run.tol_position, _tol(run),
                    robot.continuous)  # fmt: skip


def _tol(run: Run) -> float:
    """The rotation tolerance of the evaluation: none for positions."""
    return math.inf if run.rotmat is None else run.tol_rotation
