"""Fused Levenberg-Marquardt iterations on the CPU, compiled by Numba: the CPU's IK loop; and
FK and Jacobians without gradients on the same code.

On the CPU the IK loop's PyTorch operations are small (a few thousand rows of 6x7 matrices) and
each costs a few microseconds of dispatch whatever its size: a 1 000-pose Panda solve made about
twenty thousand ATen calls. :func:`lm_loop` runs a chunk of iterations of
:func:`torchik.kinematics.fused.lm_loop` (the same arguments, the same state, the same answers
up to rounding) as compiled code, one row after another: the row's frames, Jacobian, residual,
damped step and projection in a few small scratch arrays, and a row that converged stops
costing anything. The fixed-shape IK loop (:mod:`torchik.ik.fixed`) takes it on the CPU through
:meth:`torchik.ik.LevenbergMarquardt.fused_loop`, where it serves (see
:attr:`~torchik.ik.LMSettings.fused_loop`). It also places several links at once, with held
joints, a posture and a floating base: whole-body IK's step
(:class:`torchik.ik.wholebody.WholeBodyLM`), which Triton's loop kernel does not take.

:func:`forward_kinematics` and :func:`jacobian` walk the tree the same way for FK that asks no
gradient (:attr:`torchik.robot.Robot.backend` ``"native"``, and ``"auto"`` on the CPU once this
process has loaded Numba, see :func:`loaded`): IK's seeding and evaluation on the CPU, data
sets, checks.

Numba is imported on the first call (it loads LLVM, about half a second); the kernel is
compiled once per dtype and cached on disk by Numba, so a later process loads it. Without
Numba (:func:`available` false) the IK loop keeps its PyTorch operations.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from torchik.kinematics import fused
from torchik.kinematics.reference import KinematicTree, recording

__all__ = ["available", "forward_kinematics", "ik_round", "jacobian", "link_errors",
           "link_features", "lm_loop", "loaded", "runs_on", "serves", "warm_up"]  # fmt: skip

DTYPES = (torch.float32, torch.float64)
"""The dtypes the kernel is compiled for."""

ROWS_PER_THREAD = 256
"""The fewest rows a thread of :func:`lm_loop` takes: below that, starting it costs about what
it saves."""

SOLVE_ROWS_PER_THREAD = 32
"""The fewest rows a thread of :func:`lm_loop` takes where a call is a whole solve (stalled
rows restart within it, ``restarts`` and ``grouped_chunk``: whole-body IK on the CPU): a row
then runs about ten iterations, often many more, of a whole-body step (4-7 µs each on the
G1's two hands, one core), where a chunk of a few iterations of one link's step is a
microsecond each. With :data:`ROWS_PER_THREAD` there, 1 000 targets (2 000 rows) would run
on 7 of a machine's 16 cores."""

PIECES_PER_THREAD = 8
"""Pieces of the rows per thread of :func:`lm_loop` and :func:`ik_round`: each thread takes the
next piece as it finishes one, so that the rows that run longest (targets that stall and
restart up to ``max_iters``) do not keep one thread busy while the others wait. On the G1's two
hands, 1 000 targets on 2 threads, the two halves of a solve took 56 and 75 ms; in pieces
about 53 ms each, and the solve 65-72 ms instead of 89-90 (medians of 5)."""

FK_ROWS_PER_THREAD = 1024
"""The fewest rows a thread of :func:`forward_kinematics`, :func:`jacobian`,
:func:`link_features` and :func:`link_errors` takes (a row's FK: 0.1-0.2 µs on the Panda,
0.2-0.4 µs for the G1's two hands). On 2 threads, against one: 4 096 Panda rows in 0.37-0.39
ms against 0.54 at best, 4 096 G1 rows (both hands) 0.67-0.70 against 0.82, 16 384 G1 rows 2.4
against 3.4 ms; 2 048 rows about the same (with 8 192 here before, all of these took one
thread)."""

_STATE = ("seed_cost", "stall", "age", "stalled")
"""The stall counters of ``state``, in the kernel's order after ``best_q, best_cost,
iterations, finished``."""


@functools.cache
def available() -> bool:
    """Whether Numba can be imported."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def runs_on(q: Tensor, tree: KinematicTree | None = None) -> bool:
    """Whether :func:`lm_loop` can run on ``q``: a CPU tensor of a float dtype in
    :data:`DTYPES`, Numba installed, and (given the ``tree``) constants that need no gradient
    (learnable origins change in place between steps; the kernel keeps a copy)."""
    if q.device.type != "cpu" or q.dtype not in DTYPES or not available():
        return False
    return tree is None or not (tree.w_joint.requires_grad or tree.w_link.requires_grad)


def loaded() -> bool:
    """Whether this process has loaded the kernels already (Numba and LLVM: about 0.6 s the
    first time, which a few FK calls would not win back); the CPU's IK loop loads them.
    :attr:`torchik.robot.Robot.backend` ``"auto"`` takes :func:`forward_kinematics` then."""
    return "torchik.kinematics._lm_numba" in sys.modules


def serves(q: Tensor, tree: KinematicTree) -> bool:
    """Whether :func:`forward_kinematics` and :func:`jacobian` serve ``q (B, D)``: where
    :func:`runs_on` and nothing records (:func:`torchik.kinematics.reference.recording`: no
    gradient asked, no ``torch.func`` transform, forward-mode AD or ``torch.compile``
    tracing). ``recording`` first: while ``torch.compile`` traces, :func:`available` (a
    ``functools.cache``) is not reached, of which Dynamo warned of "silent incorrectness"."""
    return not recording(q, tree) and runs_on(q, tree)


def forward_kinematics(q: Tensor, tree: KinematicTree, links: tuple[int, ...]) -> Tensor:
    """:func:`torchik.kinematics.forward_kinematics` compiled by Numba, without gradients
    (see :func:`serves`), 64 rows at a time (the rows in the innermost loops): on a
    Panda, float32, one thread, the kernel takes 65 536 rows in 6.3 ms (10 ms a row at a
    time); through :meth:`~torchik.robot.Robot.forward_kinematics` on 2 cores, 65 536 in 2.8 ms
    against 7.6 ms on the reference path, one row in 23 µs against 67 µs (the FK benchmark).
    Equal to the reference up to rounding (float64: 1e-15).

    Args:
        q: ``(B, D)`` joint values on the CPU, float32 or float64.
        tree: the flattened robot.
        links: link indices.

    Returns:
        ``(B, L', 4, 4)`` homogeneous transforms ``T_root_link``.
    """
    from torchik.kinematics import _lm_numba  # Numba loads LLVM: on first use only

    x = _rows(q)
    out = np.empty((x.shape[0], len(links), 4, 4), dtype=x.dtype)
    arrays = _tree_arrays(tree, tuple(links), q.dtype)
    _run_rows(lambda p: _lm_numba.link_poses(x[p], out[p], arrays), x.shape[0])
    return torch.from_numpy(out)


def jacobian(q: Tensor, tree: KinematicTree, link: int) -> tuple[Tensor, Tensor]:
    """:func:`torchik.kinematics.jacobian` compiled by Numba, without gradients (see
    :func:`serves`).

    Args:
        q: ``(B, D)`` joint values on the CPU, float32 or float64.
        tree: the flattened robot.
        link: link index.

    Returns:
        The Jacobian ``(B, 6, D)`` (linear rows first, in the root frame) and the pose
        ``(B, 4, 4)``.
    """
    from torchik.kinematics import _lm_numba  # Numba loads LLVM: on first use only

    x = _rows(q)
    jac = np.empty((x.shape[0], 6, tree.dof), dtype=x.dtype)
    pose = np.empty((x.shape[0], 4, 4), dtype=x.dtype)
    arrays = _tree_arrays(tree, (link,), q.dtype)
    _run_rows(lambda p: _lm_numba.link_jacobian(x[p], jac[p], pose[p], arrays), x.shape[0])
    return torch.from_numpy(jac), torch.from_numpy(pose)


def link_features(q: Tensor, tree: KinematicTree, links: tuple[int, ...],
                  poses: tuple[bool, ...]) -> Tensor:  # fmt: skip
    """:func:`torchik.ik.seeding.link_features` of the ``links``' FK at ``q``, side by side,
    compiled by Numba without gradients (see :func:`serves`): the seeding features of a pool
    of configurations in one pass, without forming its poses. The same float32 values.

    Args:
        q: ``(M, D)`` joint values on the CPU, float32 or float64.
        tree: the flattened robot.
        links: link indices.
        poses: per link, whether its rotation is a feature (a pose target) or not (a position).

    Returns:
        ``(M, F)`` float32, ``F`` 13 per pose and 4 per position.
    """
    from torchik.kinematics import _lm_numba  # Numba loads LLVM: on first use only

    x = _rows(q)
    sizes = np.asarray([6 if pose else 3 for pose in poses], np.int64)
    out = np.empty((x.shape[0], sum(13 if pose else 4 for pose in poses)), np.float32)
    arrays = _tree_arrays(tree, tuple(links), q.dtype)
    _run_rows(lambda p: _lm_numba.pool_features(x[p], arrays, sizes, out[p]), x.shape[0])
    return torch.from_numpy(out)


def link_errors(q: Tensor, tree: KinematicTree, links: tuple[int, ...], position: Tensor,
                rotmat: Tensor, posed: tuple[bool, ...], lower: Tensor,
                upper: Tensor) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """The position and geodesic rotation errors of the ``links``' FK at ``q`` against targets
    and whether ``q`` is within limits, compiled by Numba without gradients (see
    :func:`serves`), in one pass over the rows without forming their poses: whole-body IK's
    check (:func:`torchik.ik.wholebody.evaluate_targets`). Equal to ``|p - p_t|`` and
    :func:`torchik.geometry.geodesic_distance` up to rounding.

    Args:
        q: ``(B, D)`` joint values on the CPU, float32 or float64.
        tree: the flattened robot.
        links: ``T`` link indices.
        position: ``(B, T, 3)`` target positions.
        rotmat: ``(B, T, 3, 3)`` target rotations (any values where not ``posed``).
        posed: per link, whether its rotation is checked (else its rotation error is 0).
        lower: ``(D,)`` joint limits; ``upper`` likewise.

    Returns:
        ``(B, T)`` position errors and ``(B, T)`` rotation errors in ``q``'s dtype, and ``(B,)``
        bool: ``lower <= q <= upper``.
    """
    from torchik.kinematics import _lm_numba  # Numba loads LLVM: on first use only

    x = _rows(q)
    p, r, lo, hi = (np.ascontiguousarray(t.detach().to(q.dtype).numpy())
                    for t in (position, rotmat, lower, upper))  # fmt: skip
    flags = np.asarray(posed, np.bool_)
    out, within = np.empty((2, x.shape[0], len(links)), x.dtype), np.empty(x.shape[0], np.bool_)
    arrays = _tree_arrays(tree, tuple(links), q.dtype)

    def run(k: slice) -> None:
        _lm_numba.link_errors(x[k], arrays, p[k], r[k], flags, lo, hi, out[:, k], within[k])

    _run_rows(run, x.shape[0])
    errors = torch.from_numpy(out)
    return errors[0], errors[1], torch.from_numpy(within)


def _rows(q: Tensor) -> np.ndarray:
    """``q`` as a contiguous NumPy array (one compiled kernel per dtype, not per layout)."""
    _check_q(q)
    return np.ascontiguousarray(q.detach().numpy())


def _run_rows(run: Any, rows: int, per_thread: int | None = None, unit: int = 1,
              pieces: int = 1) -> None:  # fmt: skip
    """``run(part)`` on parts of the rows in multiples of ``unit``, in parallel where there are
    several threads (the kernels release the GIL): one thread per ``per_thread`` rows at most
    (:func:`_parts`), each taking the next of ``pieces`` parts per thread as it finishes one
    (see :data:`PIECES_PER_THREAD`; 1: one part each, for rows that all take as long);
    ``per_thread`` ``None``: :data:`FK_ROWS_PER_THREAD` (read at the call)."""
    per_thread = FK_ROWS_PER_THREAD if per_thread is None else per_thread
    threads = _threads(rows, per_thread, unit)
    if threads == 1:
        run(slice(0, rows))
        return
    queue, lock = iter(_split(rows, threads * pieces, unit)), threading.Lock()

    def worker(_: int) -> None:
        while True:
            with lock:
                part = next(queue, None)
            if part is None:
                return
            run(part)

    list(_pool().map(worker, range(threads)))


def warm_up(tree: KinematicTree) -> bool:
    """Load the kernels for ``tree``'s dtype now (compile them, the first time ever), so that
    a later solve that is timed or latency-bound does not pay for it: the IK loop's, the
    compiled round's (:func:`ik_round`, which ``solve_ik`` runs on the CPU), FK's and whole-body
    IK's check (:func:`link_errors`). About a
    second from Numba's cache, tens of seconds to compile (the floating-base kernel, on a first
    whole-body solve of a floating robot, comes on top). One iteration of one row at the zero
    configuration, for each.

    Returns:
        Whether the kernels serve that dtype on the CPU (False: nothing done).
    """
    q = tree.w_joint.new_zeros(1, tree.dof).detach().cpu()
    if not runs_on(q):
        return False
    long, flag = torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.bool)
    state = dict(best_q=q.clone(), best_cost=torch.full_like(q[:, 0], torch.inf),
                 iterations=long.clone(), finished=flag, it=long[0].clone())  # fmt: skip
    bound, link = torch.ones(tree.dof, dtype=q.dtype), len(tree.link_joint) - 1
    lm_loop(q, tree, link, q.new_zeros(1, 3), None, q.new_ones(3), 0.1, -bound, bound, state,
            n_iters=1, max_iters=1, tol_position=0.0, tol_rotation=0.0)  # fmt: skip
    rotmat = torch.eye(3, dtype=q.dtype)[None]
    ik_round(q, 1, tree, link, q.new_zeros(1, 3), rotmat, q.new_ones(6), torch.zeros(1, 13), 0.1,
             -bound, bound, slots=1, iters=1, tol_position=1e-3, tol_rotation=1e-2)  # fmt: skip
    forward_kinematics(q, tree, (link,))
    jacobian(q, tree, link)
    link_errors(q, tree, (link,), q.new_zeros(1, 1, 3), rotmat[None], (True,), -bound, bound)
    return True


def _tree_arrays(
    tree: KinematicTree, links: tuple[int, ...], dtype: torch.dtype, floating: bool = False
) -> tuple:
    """The constants of the joints that move ``links`` as NumPy arrays (kept with the tree),
    ``chain (T, n)``: which of those joints move each link, ``used``: the Jacobian columns they
    move (a ``floating`` base's 6 twist columns first), and ``slot``: each column's place
    among them, -1 for the others. The IK kernel's Jacobian keeps the ``used`` columns only
    (the G1's two hands: 17 of 29, a G1 row's iteration about a tenth faster, the same values).
    With a ``floating`` base the root's children hang from its frame, the kernel's ``frames[n +
    T]``."""

    def build() -> tuple:
        plan = tree.plan(links)
        needed = list(plan.needed)
        root = len(needed) + len(links) if floating else -1
        parent_pos = [root if p < 0 else p for p in plan.parent_pos]
        floats = lambda t: np.ascontiguousarray(t.detach().to(dtype).numpy())  # noqa: E731
        ints = lambda v: np.asarray(v, dtype=np.int64).reshape(-1)  # noqa: E731
        chain = np.zeros((len(links), len(needed)), dtype=np.bool_)
        for t, pos in enumerate(plan.link_pos):
            while pos >= 0:
                chain[t, pos] = True
                pos = plan.parent_pos[pos]
        shift = 6 if floating else 0
        used = list(range(shift)) + sorted({shift + int(tree.source[j]) for j in needed})
        slot = [-1] * (shift + tree.dof)
        for k, c in enumerate(used):
            slot[c] = k
        return (
            ints(parent_pos),
            ints([tree.kind[j] for j in needed]),
            ints(tree.source[needed].tolist()),
            floats(tree.multiplier[needed]),
            floats(tree.offset[needed]),
            floats(tree.w_joint[needed].transpose(-1, -2)[:, :3, :].reshape(-1, 3, 4)),
            floats(tree.w_link[list(links)].transpose(-1, -2)[:, :3, :]),
            ints([root if p < 0 else p for p in plan.link_pos]),
            chain,
            ints(used),
            ints(slot),
        )

    return tree.cached(("native", links, dtype, floating), build)


def _array(t: Tensor | None, like: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``t`` as a NumPy view (no copy where it is contiguous), or a filler of ``shape``."""
    if t is None:
        return np.zeros(shape, dtype=like.dtype)
    return t.detach().contiguous().numpy()


def lm_loop(
    q: Tensor,
    tree: KinematicTree,
    link: int | Sequence[int],
    target_position: Tensor | Sequence[Tensor],
    target_rotmat: Tensor | None | Sequence[Tensor | None],
    weights: Tensor,
    damping: float,
    lower: Tensor,
    upper: Tensor,
    state: dict[str, Tensor],
    *,
    n_iters: int,
    max_iters: int,
    tol_position: float,
    tol_rotation: float,
    damping_floor: float = 1e-6,
    continuous: Tensor | None = None,
    full_turn: Tensor | None = None,
    patience: int = 4,
    min_improvement: float = 1e-3,
    attempt_iters: int = 0,
    columns: Tensor | None = None,
    rest: Tensor | None = None,
    posture: float = 0.0,
    max_posture_step: float = 0.1,
    base_origin: Tensor | None = None,
    moves_base: bool = True,
    settle: bool = False,
    restarts: tuple[Tensor, Tensor, Tensor, Tensor, int] | None = None,
    grouped_chunk: int = 0,
    early_stop: bool = True,
) -> None:
    """:func:`torchik.kinematics.fused.lm_loop` on the CPU: ``n_iters`` iterations of every row,
    in place, compiled by Numba (the same arguments and state; see that function), for one
    link or several placed at once (whole-body IK, :class:`torchik.ik.wholebody.WholeBodyLM`'s
    step: the targets' residuals and Jacobians stacked, held joints, a posture).

    A row that converges (every link within both tolerances) stops: its stall counters
    (``stall``, ``age``) run on by the iterations left, as they would with its cost no longer
    falling, and it is never ``stalled``.

    Args:
        q: ``(B, D)`` joint values on the CPU, updated in place (float32 or float64, contiguous).
        tree: the flattened robot (fixed base).
        link: the link index, or ``T`` of them.
        target_position: ``(B, 3)``, or one per link.
        target_rotmat: ``(B, 3, 3)`` or ``None`` (a position target), or one per link.
        weights: ``(m,)`` square roots of the residual weights, link after link (``m``: 6 per
            pose, 3 per position).
        damping: ``μ``.
        lower: ``(D,)`` lower joint limits, or ``(B, D)`` one box per row, already
            intersected with the limits (as :meth:`torchik.ik.base.JointLimits.within` makes
            it): then every joint is clamped into its box, periodic ones first moved by whole
            turns nearest its centre, as :meth:`~torchik.ik.base.JointLimits.project` does.
        upper: ``(D,)`` upper joint limits, or ``(B, D)``.
        state: as :func:`~torchik.kinematics.fused.lm_loop`'s, updated in place.
        n_iters: iterations in this call.
        max_iters: iterations of the whole solve.
        tol_position: metres.
        tol_rotation: radians.
        damping_floor: keeps ``λ`` positive at the solution.
        continuous: ``(D,)`` bool, joints wrapped to (-π, π], or ``None``.
        full_turn: ``(D,)`` bool, joints moved by whole turns, or ``None``.
        patience: the stall rule, with ``min_improvement`` and ``attempt_iters``.
        min_improvement: see ``patience``.
        attempt_iters: see ``patience``.
        columns: ``(D,)`` bool, the joints the solve moves (the others' Jacobian columns are
            zeroed, so no step moves them); ``None``: every joint.
        rest: ``(B, D)`` the posture's rest configurations (read with ``posture > 0``).
        posture: gain of the step ``z = posture (rest - q)`` (on the moved joints, at most
            ``max_posture_step`` long) added in the null space of the weighted Jacobian:
            ``z - Jwᵀ (Jw Jwᵀ + μ damping_floor I)⁻¹ Jw z``; 0: none.
        max_posture_step: see ``posture``.
        base_origin: ``(4, 4)``, the origin of a floating base's joint: ``q (B, 7 + D)``
            starts with its position and quaternion (:mod:`torchik.geometry.floating`), the
            Jacobian has its 6 twist columns first (``nv = 6 + D``; ``columns (nv,)``), each
            step moves it by :func:`~torchik.geometry.floating.integrate` and the limits of
            its 7 coordinates are those of ``lower`` and ``upper (7 + D)``; ``None``: a fixed
            base.
        moves_base: with ``base_origin``, whether the base moves (then its quaternion is
            normalised after each projection, as
            :meth:`torchik.ik.wholebody.WholeBodyProblem.project` does).
        settle: every row steps ``n_iters`` times whatever it converged, and ``best_q`` keeps
            its last iterate that met the tolerances (rows that never did keep theirs); the
            rest of ``state`` is left alone: the posture's settling after a solve
            (:meth:`torchik.ik.wholebody.WholeBodyLM.settle`).
        restarts: ``(configs (R, k P, D), features (R, k P, F), aims (B, F), attempt (B,),
            k)``: a row that stalls (with the stall counters in ``state``) starts again at
            once, within the call, from a member of ``R`` pools of ``k`` sub-pools of ``P``
            configurations (rows target after target, row ``r`` slot ``r mod k``): attempt
            ``a`` takes the member of rank ``⌊(a - 1) / R⌋`` (0: the nearest) in pose distance
            (float32 ``aims[r] · features``, as :func:`torchik.ik.seeding.target_features` and
            :func:`~torchik.ik.seeding.link_features` form them) in sub-pool ``(r + a) mod k``
            of pool ``(a - 1) mod R``; ``attempt`` counts, in place. With a moving floating
            base (``base_origin``, ``moves_base``) the member's base is then placed where its
            links best fit the row's targets (as :func:`torchik.ik.wholebody.fit_base` does,
            the weights those of ``weights``; the pools' base coordinates are not read). Once
            the ranks run out the row is ``stalled`` for the caller. ``None``: stalled rows
            wait for the caller.
        grouped_chunk: with ``restarts``, ``> 0``: the rows are the targets' ``k`` slots
            (``B`` a multiple of ``k``), stepped a target at a time in chunks of this many
            iterations; with ``early_stop``, after a chunk in which a slot of a target
            finished, its other slots finish too, their ``iterations`` the chunk's last (where
            unset and under ``max_iters``): what :func:`torchik.ik.fixed.run_fixed` and
            :func:`~torchik.ik.fixed.finish_groups` do between calls, so that a whole solve
            is one call. 0: every row on its own.
        early_stop: see ``grouped_chunk``.

    Raises:
        ValueError: ``q`` not on the CPU, or a malformed argument (as the fused function).
        TypeError: an argument of a dtype other than ``q``'s, or ``q`` neither float32 nor
            float64.
    """
    _check_q(q)
    links, positions, rotmats = fused._link_targets(link, target_position, target_rotmat)
    floating, sized = _check_base(q, tree, base_origin)
    box = _check_box(q, lower, upper)
    named = dict(continuous=continuous, full_turn=full_turn)
    track = fused._check_link_targets(q, sized, positions, rotmats, weights, named, state)
    hold = _check_posture(q, columns, rest, posture, max_posture_step, floating)
    if q.shape[0] == 0 or n_iters <= 0:
        return
    from torchik.kinematics import _lm_numba  # Numba loads LLVM: on first use only

    x = q.detach().numpy()
    limits = tuple(_array(t if box else t[None], x, ()) for t in (lower, upper))  # (R, D)
    masks = tuple(_array(t, np.empty(0, np.bool_), x.shape[1:]) for t in (continuous, full_turn))
    reals = (*map(float, (damping, damping_floor, tol_position, tol_rotation)),
             1.0 - float(min_improvement))  # fmt: skip
    ints = (int(state["it"]), int(n_iters), int(max_iters), int(patience), int(attempt_iters),
            int(track), int(settle))  # fmt: skip
    rest_rows, held, base = _body_arrays(x, hold, base_origin, moves_base)
    rotmat, sizes = _rotmats(rotmats, x)
    per_row = (*_row_arrays(x, state, positions), rotmat, *limits, rest_rows)
    restart = _restart_arrays(x, restarts, grouped_chunk, early_stop)
    shared = (_tree_arrays(tree, links, q.dtype, floating), sizes, masks, box, held,
              (float(posture), float(max_posture_step)), base,
              weights.detach().contiguous().numpy(), reals, ints, restart)  # fmt: skip
    run = lambda p: _run_part(_lm_numba, per_row, shared, p)  # noqa: E731
    _run_rows(run, x.shape[0], *_thread_rows(restart), PIECES_PER_THREAD)


def _thread_rows(restart: tuple) -> tuple[int, int]:
    """``(per_thread, unit)`` of a call of :func:`lm_loop` (``restart``:
    :func:`_restart_arrays`): :data:`SOLVE_ROWS_PER_THREAD` rows at least where the call is a
    whole solve (its stalled rows restart within it from pools, its targets' slots grouped),
    else :data:`ROWS_PER_THREAD`; in multiples of a target's slots where they are grouped."""
    _, size, _, group, chunk, _ = restart[-1]  # (k, P, R, group, chunk, early)
    whole = size > 0 and chunk > 0
    return SOLVE_ROWS_PER_THREAD if whole else ROWS_PER_THREAD, int(group or 1)


def _restart_arrays(x: np.ndarray, restarts: tuple | None, grouped_chunk: int,
                    early_stop: bool) -> tuple:  # fmt: skip
    """:func:`lm_loop`'s ``restarts`` as the kernel's ``restart`` (``(configs, features, aims,
    slot, attempt, (k, P, R, group, chunk, early))``, the per-row arrays cut per part by
    :func:`_run_part`); empty arrays and zeros for none."""
    batch, dof = x.shape
    if restarts is None:
        none = np.empty((0, 1), np.float32)
        empty = np.empty(batch, np.int64)
        return np.empty((0, dof), x.dtype), none, none, empty, empty, np.zeros(6, np.int64)
    configs, features, aims, attempt, k = restarts
    pools, size = configs.shape[0], configs.shape[1] // k
    if configs.shape != (pools, k * size, dof) or size == 0 or attempt.shape != (batch,):
        raise ValueError(f"lm_loop: restarts hold (R, k P, {dof}) configurations, k > 0, "
                         f"P > 0, and ({batch},) attempts, got {tuple(configs.shape)}, k {k}, "
                         f"{tuple(attempt.shape)}")  # fmt: skip
    if features.shape[:2] != configs.shape[:2] or aims.shape != (batch, features.shape[2]):
        raise ValueError(f"lm_loop: restarts' features must be ({pools}, {k * size}, F) and "
                         f"their aims ({batch}, F), got {tuple(features.shape)}, "
                         f"{tuple(aims.shape)}")  # fmt: skip
    if attempt.dtype != torch.long or not attempt.is_contiguous():
        raise ValueError("lm_loop: restarts' attempt must be contiguous int64 (written into)")
    if grouped_chunk < 0 or (grouped_chunk and batch % k):
        raise ValueError(f"lm_loop: grouped_chunk must be >= 0, and grouped rows a multiple of "
                         f"k = {k}, got {grouped_chunk} and {batch} rows")  # fmt: skip
    float32 = [np.ascontiguousarray(t.detach().float().flatten(0, -2).numpy())
               for t in (features, aims)]  # fmt: skip
    pool = np.ascontiguousarray(configs.detach().flatten(0, 1).numpy().astype(x.dtype, copy=False))
    return (pool, *float32, np.arange(batch, dtype=np.int64) % k, attempt.numpy(),
            np.asarray([k, size, pools, k if grouped_chunk else 0, grouped_chunk,
                        int(early_stop)], np.int64))  # fmt: skip


def _check_q(q: Tensor) -> None:
    """A CPU tensor of a dtype the kernel is compiled for."""
    if q.device.type != "cpu":
        raise ValueError(f"native.lm_loop runs on CPU tensors, not on {q.device}")
    if q.dtype not in DTYPES:
        raise TypeError(f"native.lm_loop takes float32 or float64, got {q.dtype}")


def _run_part(kernels: Any, per_row: tuple, shared: tuple, part: slice) -> None:
    """The kernel (of the module ``kernels``: a fixed or a floating base's) on the rows
    ``part``; it releases the GIL: parts run in parallel. Arrays of ``per_row`` with one row
    per row of ``q`` are cut to the part; one-row fillers are not."""
    batch = per_row[0].shape[0]
    cut = [a[part] if a.shape[0] == batch else a for a in (per_row[0], *per_row[2:])]
    x, position, rotmat, lower, upper, rest = cut
    state = tuple(a[part] for a in per_row[1])
    tree, sizes, masks, box, held, gains, base, w, reals, ints, restart = shared
    configs, features, aims, slot, attempt, pool = restart
    slot, attempt = slot[part], attempt[part]  # per row, with restarts or not (then scratch)
    aims = aims[part] if aims.shape[0] == batch else aims  # per row where there are restarts
    kernel = kernels.lm_loop_floating if base[0] else kernels.lm_loop
    kernel(x, state, tree, (position, rotmat, sizes), (lower, upper, *masks, box),
           (rest, held, *gains), base, w, reals, ints,
           (configs, features, aims, slot, attempt, pool))  # fmt: skip


def _body_arrays(x: np.ndarray, hold: tuple, origin: Tensor | None, moves: bool) -> tuple:
    """``(rest (B, nq) or a filler, columns (nv,), base)``: the kernel's whole-body arrays
    (every column stepped where ``hold`` has none), ``base`` its ``(floating, moves, origin)``."""
    floating = origin is not None
    nv = x.shape[1] - 1 if floating else x.shape[1]
    held = np.ones(nv, np.bool_) if hold[0] is None else _array(hold[0], x, ())
    rest_rows = _array(hold[1], x, (1, x.shape[1]))
    top = np.ascontiguousarray(_array(origin, x, (4, 4))[:3])
    return rest_rows, held, (floating, bool(moves), top)


def _check_posture(q, columns, rest, posture, max_step, floating: bool):
    """The held columns' mask and the rest rows, checked (``rest`` only with a posture)."""
    batch, dof = q.shape
    nv = dof - 1 if floating else dof
    if columns is not None and (columns.dtype != torch.bool or tuple(columns.shape) != (nv,)):
        raise ValueError(f"lm_loop: columns must be a ({nv},) bool tensor, got "
                         f"{tuple(columns.shape)} {columns.dtype}")  # fmt: skip
    if not (posture >= 0.0 and max_step > 0.0):
        raise ValueError(f"lm_loop: posture must be >= 0 and max_posture_step > 0, got "
                         f"{posture} and {max_step}")  # fmt: skip
    if posture == 0.0:
        return columns, None
    if rest is None or tuple(rest.shape) != (batch, dof) or rest.dtype != q.dtype:
        got = None if rest is None else (tuple(rest.shape), rest.dtype)
        raise ValueError(f"lm_loop: a posture needs rest, a ({batch}, {dof}) {q.dtype} "
                         f"tensor, got {got}")  # fmt: skip
    return columns, rest


def _check_base(q: Tensor, tree: KinematicTree, origin: Tensor | None) -> tuple[bool, Any]:
    """Whether ``q`` starts with a floating base (``origin`` given), its size checked; and
    what the argument checks take for the tree (they read its ``dof``: ``q``'s row size)."""
    if origin is None:
        return False, tree
    if tuple(origin.shape) != (4, 4) or origin.dtype != q.dtype or origin.device != q.device:
        raise ValueError(f"lm_loop: base_origin must be a (4, 4) {q.dtype} tensor on "
                         f"{q.device}, got {tuple(origin.shape)} {origin.dtype}")  # fmt: skip
    if q.shape[1] != tree.dof + 7:
        raise ValueError(f"lm_loop: with a floating base q must have shape (B, {tree.dof + 7}) "
                         f"(its 7 coordinates, then the joints), got {tuple(q.shape)}")  # fmt: skip
    return True, SimpleNamespace(dof=q.shape[1])


def _rotmats(rotmats: list[Tensor | None], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rotmat (B, T, 3, 3) or a (1, T, 3, 3) filler where no link has one, sizes (T,))``."""
    sizes = np.asarray([3 if r is None else 6 for r in rotmats], dtype=np.int64)
    if all(r is None for r in rotmats):
        return np.zeros((1, len(rotmats), 3, 3), dtype=x.dtype), sizes
    if len(rotmats) == 1:
        return _array(rotmats[0], x, ())[:, None], sizes
    some = next(r for r in rotmats if r is not None)
    full = [torch.zeros_like(some) if r is None else r for r in rotmats]
    return torch.stack(full, dim=1).detach().numpy(), sizes


def _check_box(q: Tensor, lower: Tensor, upper: Tensor) -> bool:
    """Whether ``lower`` and ``upper`` are one box per row ``(B, D)`` (else ``(D,)``, shared);
    their shapes, dtypes and device checked (no value is read)."""
    batch, dof = q.shape
    for name, value in (("lower", lower), ("upper", upper)):
        if tuple(value.shape) not in ((dof,), (batch, dof)) or value.shape != lower.shape:
            raise ValueError(f"lm_loop: {name} must have shape ({dof},) or ({batch}, {dof}) "
                             f"as lower, got {tuple(value.shape)}")  # fmt: skip
        if value.device != q.device or value.dtype != q.dtype:
            raise TypeError(f"lm_loop: {name} has dtype {value.dtype} on {value.device}, "
                            f"q {q.dtype} on {q.device}")  # fmt: skip
    return lower.dim() == 2


def _row_arrays(x: np.ndarray, state: dict[str, Tensor], positions: list[Tensor]) -> tuple:
    """``(q, state, positions (B, T, 3))`` as NumPy views (the positions stacked where there
    are several links); the state in the kernel's order, the stall counters scratch arrays
    where ``state`` has none (the kernel leaves them alone then)."""
    rows = x.shape[0]

    def view(key: str, dtype: Any) -> np.ndarray:
        return state[key].detach().numpy() if key in state else np.empty(rows, dtype)

    kinds = (x.dtype, np.int64, np.int64, np.bool_)
    head = [state[k].detach().numpy() for k in ("best_q", "best_cost", "iterations", "finished")]
    counters = [view(k, t) for k, t in zip(_STATE, kinds, strict=True)]
    if len(positions) == 1:
        position = positions[0].detach().contiguous().numpy()[:, None]
    else:
        position = torch.stack(positions, dim=1).detach().numpy()
    return x, (*head, *counters), position


def _parts(rows: int, per_thread: int = ROWS_PER_THREAD, unit: int = 1) -> list[slice]:
    """Contiguous parts of the rows, one per thread: ``torch.get_num_threads()`` threads (what
    ``solve_ik(num_threads=...)`` sets), fewer where a part would have under ``per_thread``
    rows; each part a multiple of ``unit`` rows (a target's slots), but the last."""
    return _split(rows, _threads(rows, per_thread, unit), unit)


def _threads(rows: int, per_thread: int, unit: int = 1) -> int:
    """Threads for ``rows`` (:func:`_parts`): ``torch.get_num_threads()`` at most, one per
    ``per_thread`` rows and per ``unit`` rows at most, one at least."""
    units = -(-rows // unit)
    return max(1, min(torch.get_num_threads(), rows // per_thread, units))


def _split(rows: int, n: int, unit: int = 1) -> list[slice]:
    """The rows in ``n`` contiguous parts as equal as multiples of ``unit`` rows allow (the
    last may be shorter); fewer where there are fewer units than ``n`` (no empty part)."""
    units = -(-rows // unit)
    bounds = [min(rows, units * i // n * unit) for i in range(n + 1)]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool() -> ThreadPoolExecutor:
    """The threads that run parts of :func:`lm_loop`, made on first use in each process (a
    forked child inherits the parent's pool without its threads: work sent there would wait
    forever)."""
    pid = os.getpid()
    if pid not in _POOLS:
        _POOLS.clear()
        _POOLS[pid] = ThreadPoolExecutor(max_workers=os.cpu_count() or 1,
                                         thread_name_prefix="torchik-lm")  # fmt: skip
    return _POOLS[pid]


def ik_round(
    pool: Tensor,
    pool_size: int,
    tree: KinematicTree,
    link: int,
    position: Tensor,
    rotmat: Tensor | None,
    weights: Tensor,
    aims: Tensor,
    damping: float,
    lower: Tensor,
    upper: Tensor,
    *,
    slots: int,
    iters: int,
    tol_position: float,
    tol_rotation: float,
    damping_floor: float = 1e-6,
    continuous: Tensor | None = None,
    full_turn: Tensor | None = None,
    order: bool = True,
    chunk: int | None = None,
    early_stop: bool = True,
    joint_limits: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """A round of ``solve_ik``, compiled whole: for every target and each of its ``slots``, the
    seed, ``iters`` Levenberg-Marquardt iterations (``iters + 1`` evaluations in chunks, a slot
    stops once it converged), the evaluation by FK and, with ``order``, the target's slots best
    first. What :mod:`torchik.ik.rounds` does in a round of the CPU's
    fixed loop (seeding, :func:`lm_loop`, :func:`torchik.ik.rounds.evaluate`,
    :meth:`~torchik.ik.IKResult.top`) with the same draws and the same answers, without the
    hundreds of small PyTorch operations around the loop (see :mod:`torchik.ik.compiled`).

    Args:
        pool: ``(slots * pool_size, D)`` random configurations: pool ``s`` (rows ``s *
            pool_size`` on) seeds slot ``s`` of every target with its member whose link pose is
            nearest the target (:func:`torchik.ik.seeding.nearest_in_pools`); with
            ``pool_size`` 0, ``(T * slots, D)`` seeds, one per slot.
        pool_size: configurations per pool, or 0 (random or given seeds, one per slot).
        tree: the flattened robot (fixed base); ``link`` the placed link's index.
        position: ``(T, 3)`` targets; ``rotmat`` ``(T, 3, 3)`` or ``None`` (positions).
        weights: ``(m,)`` square roots of the residual weights.
        aims: ``(T, F)`` float32 seeding features of the targets,
            :func:`torchik.ik.seeding.target_features` (read where ``pool_size`` > 0).
        damping: ``μ``.
        lower: ``(D,)`` joint limits, shared by the rows, or ``(T, D)`` a box per target
            already intersected with them (:meth:`torchik.ik.base.JointLimits.within`: a
            periodic joint is moved by whole turns nearest its box's centre, then clamped);
            ``upper`` likewise.
        slots: ``S`` slots per target.
        iters: iterations of the round (its ``max_iters``).
        tol_position: metres.
        tol_rotation: radians (``inf`` for positions).
        damping_floor: keeps ``λ`` positive at the solution.
        continuous: ``(D,)`` bool, joints wrapped to (-π, π], or ``None``.
        full_turn: ``(D,)`` bool, joints moved by whole turns, or ``None``.
        order: each target's slots best first (successes, then by error over the
            tolerances); else in slot order.
        chunk: evaluations per chunk, as :func:`torchik.ik.fixed.run_fixed` runs them (no
            restart between them); ``None``: one chunk.
        early_stop: after a chunk in which some slot of a target converged, its other slots
            stop too (:func:`torchik.ik.fixed.finish_groups`).
        joint_limits: ``(lower, upper)``, each ``(D,)``, that a successful ``q`` is within,
            where ``lower`` and ``upper`` are boxes (then ``q``'s continuous joints are
            wrapped back into (-π, π]); ``None``: ``lower`` and ``upper``.

    Returns:
        ``q (T, S, D)``, ``success (T, S)`` bool, the position and rotation errors ``(T,
        S)`` and the iterations ``(T, S)`` long each slot ran.

    Raises:
        ValueError: a tolerance that is not positive (the slots' scores divide by them).
    """
    if not (tol_position > 0.0 and tol_rotation > 0.0):
        raise ValueError(f"tolerances must be positive, got {tol_position}, {tol_rotation}")
    from torchik.kinematics import _lm_numba  # Numba loads LLVM: on first use only

    x = _rows(pool)
    n_targets, dof, pose = position.shape[0], x.shape[1], rotmat is not None
    arrays, sizes, posture = _round_constants(tree, link, pool.dtype, pose)
    features = (link_features(pool, tree, (link,), (pose,)).numpy() if pool_size
                else np.empty((0, 13 if pose else 4), np.float32))  # fmt: skip
    p = position.detach().numpy()[:, None]
    r = np.zeros((n_targets, 1, 3, 3), x.dtype) if rotmat is None else rotmat.detach().numpy()
    target_aims = np.ascontiguousarray(aims.detach().float().numpy())
    target = (p, r.reshape(n_targets, 1, 3, 3), sizes, target_aims)
    limits, bounds = _round_limits(x, lower, upper, continuous, full_turn, joint_limits)
    box = limits[4]
    scale = tol_rotation if math.isfinite(tol_rotation) else 1.0
    # a tolerance beyond float32's range (1e300) is its largest value, not an overflow's inf
    tols = np.minimum([tol_position, tol_rotation, scale], np.finfo(x.dtype).max).astype(x.dtype)
    reals = (float(damping), float(damping_floor), float(tol_position), float(tol_rotation))
    ints = (slots, iters + 1, iters, int(order), chunk or iters + 1, int(early_stop))
    q, success, *errors, iterations = outputs = _round_outputs(n_targets, slots, dof, x.dtype)
    w = weights.detach().numpy()

    def run(part: slice) -> None:
        rows = slice(part.start * slots, part.stop * slots) if not pool_size else slice(None)
        aim = (p[part], target[1][part], sizes, target[3][part])
        out = (q[part], success[part], errors[0][part], errors[1][part], iterations[part])
        own = (limits[0][part], limits[1][part], *limits[2:]) if box else limits
        _lm_numba.ik_round(x[rows], features, pool_size, arrays, aim, own, bounds, posture, w,
                           reals, ints, tols, out)  # fmt: skip

    _run_rows(run, n_targets, max(1, ROWS_PER_THREAD // slots), pieces=PIECES_PER_THREAD)
    return tuple(torch.from_numpy(v) for v in outputs)  # type: ignore[return-value]


def _round_outputs(n_targets: int, slots: int, dof: int, dtype: Any) -> tuple:
    """:func:`ik_round`'s ``(q, success, position_error, rotation_error, iterations)``."""
    errors = np.empty((2, n_targets, slots), dtype)
    return (np.empty((n_targets, slots, dof), dtype), np.empty((n_targets, slots), np.bool_),
            errors[0], errors[1], np.empty((n_targets, slots), np.int64))  # fmt: skip


def _round_limits(
    x: np.ndarray,
    lower: Tensor,
    upper: Tensor,
    continuous: Tensor | None,
    full_turn: Tensor | None,
    joint_limits: tuple[Tensor, Tensor] | None,
) -> tuple:
    """:func:`ik_round`'s ``(limits, bounds)``: the limits (or a box per target) the kernel
    projects into, and the joint limits its evaluation checks."""
    dof = x.shape[1]
    masks = tuple(_array(t, np.empty(0, np.bool_), (dof,)) for t in (continuous, full_turn))
    box = lower.dim() == 2
    corners = tuple(_array(t, x, ()) for t in (lower, upper))
    limits: tuple[Any, ...] = (*(c if box else c[None] for c in corners), *masks, box)
    joints = corners if joint_limits is None else tuple(_array(t, x, ()) for t in joint_limits)
    return limits, (*joints, masks[0], box)


def _round_constants(tree: KinematicTree, link: int, dtype: torch.dtype, pose: bool) -> tuple:
    """:func:`ik_round`'s arrays that depend on the robot only (kept with the tree): the
    link's tree arrays, the residual's size, the kernel's posture filler."""

    def build() -> tuple:
        np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
        posture = (np.zeros((1, tree.dof), np_dtype), np.ones(tree.dof, np.bool_), 0.0, 0.1)
        sizes = np.asarray([6 if pose else 3], np.int64)
        return _tree_arrays(tree, (link,), dtype), sizes, posture

    return tree.cached(("round", link, dtype, pose), build)
