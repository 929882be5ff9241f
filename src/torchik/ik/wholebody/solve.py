"""Whole-body IK: several links placed at once, chosen joints, a posture in the null space.

``solve_wholebody(robot, {"left_hand": T1, "right_hand": T2}, ...)`` places several links. The
residuals and geometric Jacobians of every target are stacked into one least-squares problem per
row, each target's rows scaled by the square root of its weight, and the problem runs through the
same batched loop and Levenberg-Marquardt step as single-link IK (:class:`IKSolver`,
:func:`~torchik.ik.lm.damped_step`, :func:`~torchik.ik.lm.free_limit_columns`). Inactive joints get
a zero-width box at their held value (:meth:`JointLimits.within`) and zero Jacobian columns, so no
step ever moves them.

The posture term pulls the active joints towards a rest configuration without disturbing the
targets: each LM step gets ``N z`` added, ``z = posture (q_rest - q)`` and ``N = I - Jᵀ(J Jᵀ +
εI)⁻¹J`` (weighted) the projection onto the null space of the stacked Jacobian, with the tiny
``ε = damping · damping_floor`` that keeps it bounded at singularities.

A floating base (``Robot.from_urdf(..., floating_base=True)``, :mod:`torchik.geometry.floating`)
moves with the joints: steps and Jacobian columns are in the tangent space (``nv``, the base's twist
first), every update goes through :meth:`Robot.integrate`, the limit test of
:func:`~torchik.ik.lm.free_limit_columns` maps columns to coordinates of ``q`` (the base has none),
the projection normalises the quaternion, and the posture acts on the joints only
(``robot.difference(q, rest)``). Seeds fit the base to the targets
(:mod:`torchik.ik.wholebody.seeds`). In a MuJoCo scene with several free bodies, the one that
carries the target links moves (whichever base it is in ``q``) and the others stay at their
rest pose (where the file puts them, by default): an object beside a robot, a floating robot
among objects. Such a scene is solved as that body alone (:meth:`Robot.scene_body`), which
the CPU's compiled loop takes, and elsewhere with fewer coordinates and no boxes for the held
bodies.

On the CPU the loop runs as compiled code, :func:`torchik.kinematics.native.lm_loop` (this
module's step, held joints, posture and floating base included; see
:meth:`WholeBodyLM._compiled_takes`): with random seeds drawn from pools (``seed_pool``, no
boxes), a whole solve in one call, stalled slots starting again within it from pools drawn
once (:data:`~torchik.ik.wholebody.seeds.RESTART_POOLS`; a floating base placed as the seeds'
is); a warm start of one slot per target without restarts in one call too (nothing happens
between calls); else in calls of :data:`COMPILED_SYNC_EVERY` iterations, stalled slots re-seeded
between them. On CUDA the fixed-shape loop is captured in
CUDA graphs, its chunks separated by host reads; where Triton's loop kernel steps the rows
(:data:`FUSED_LOOP`), a call of random seeds runs instead as one program captured whole
(:mod:`torchik.ik.wholebody.captured`).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

import torch
from torch import Tensor

from torchik.checks import (
    check_float,
    check_generator,
    check_int,
    intra_op_threads,
)
from torchik.geometry.floating import normalize_bases, velocity_coordinates
from torchik.ik import host
from torchik.ik.base import (
    ITERATION_LIMIT,
    IKProblem,
    JointLimits,
    Linearization,
    LinkTarget,
    State,
)
from torchik.ik.fixed import Carry
from torchik.ik.inputs import check_bounds, check_options, check_seeds, check_target
from torchik.ik.lm import LevenbergMarquardt, damped_step, free_limit_columns
from torchik.ik.rounds import reshape_result
from torchik.ik.seeding import Seeder
from torchik.ik.wholebody import captured
from torchik.ik.wholebody.problem import WholeBodyProblem
from torchik.ik.wholebody.result import WholeBodyResult, evaluate_targets
from torchik.ik.wholebody.seeds import wholebody_seeder
from torchik.robot.robot import Robot

__all__ = [
    "COMPILED_SYNC_EVERY",
    "FUSED_LOOP",
    "MAX_ITERS",
    "MAX_POSTURE_STEP",
    "WholeBodyLM",
    "integrate",
    "solve_wholebody",
]

MAX_ITERS = 150
"""Default iterations of :func:`solve_wholebody`: more than one link's 60, since stalled slots
are re-seeded within the solve (no separate retry rounds). On the G1's two hands (1000 targets,
2 slots) 60 iterations solve 99.4 %, 150 all."""


FUSED_LOOP = False
"""Whether whole-body IK on CUDA takes Triton's loop kernel
(:func:`torchik.kinematics.fused.lm_loop` with several links: one launch per chunk of
iterations) where it serves: no posture, every joint active, no boxes, a fixed base, the robot
on the fused kernels. Off until measured on a GPU (``make gpu-check`` times both; equal to the
step in Triton's interpreter): the captured iteration of PyTorch operations otherwise. With it,
a call of random seeds runs as one captured program (:mod:`torchik.ik.wholebody.captured`)."""


COMPILED_SYNC_EVERY = 4
"""Iterations of a call of the CPU's compiled loop (:func:`torchik.kinematics.native.lm_loop`),
between which stalled slots are re-seeded where the kernel does not restart them itself (see
:data:`~torchik.ik.wholebody.seeds.RESTART_POOLS`; the host loop checks after every one). On 1 000
targets of the G1 on an emulated floating base (feet and hands, 2 slots): 99.4 % solved at 4,
99.0 % at 6, 98.7 % at 11, 99.7 % at 1 in about 1.5 times the time."""


MAX_POSTURE_STEP = 0.1
"""Largest norm (rad) of the posture step ``z`` per iteration, before its null-space projection."""


class WholeBodyLM(LevenbergMarquardt):
    """:class:`LevenbergMarquardt` on the stacked targets of a :class:`WholeBodyProblem`, with
    the inactive joints' columns zeroed and the posture step (see the module docstring)."""

    def linearize(self, problem: IKProblem, q: Tensor) -> Linearization:
        """The stacked targets' linearization, the inactive joints' columns zeroed."""
        assert isinstance(problem, WholeBodyProblem)
        lin = super().linearize(problem, q)
        assert lin.jacobian is not None  # IKSolver.linearize sets it
        return replace(lin, jacobian=lin.jacobian * problem.columns)

    def _loop_kernel_serves(self, problem: IKProblem, q: Tensor) -> bool:
        """Triton's loop kernel steps plain LM on several links: with :data:`FUSED_LOOP`, no
        posture, every joint active, the joint limits (no boxes), a fixed base, no adaptive
        damping, the robot on the fused kernels (:meth:`Robot.takes_fused`)."""
        assert isinstance(problem, WholeBodyProblem)
        plain = not problem.posture and problem.all_active and not problem.limits.per_row
        simple = plain and not problem.robot.floating_bases and not self.settings.adaptive
        return FUSED_LOOP and simple and problem.robot.takes_fused(q)

    def _compiled_takes(self, problem: IKProblem) -> bool:
        """The CPU's compiled loop steps this step (stacked targets, held joints, posture) on a
        fixed base or on one floating base that carries the whole robot."""
        return self._takes_robot(problem.robot)

    def _takes_robot(self, robot: Robot) -> bool:
        """See :meth:`_compiled_takes`: it asks nothing of the targets."""
        one_base = robot.floating_bases == 1 and robot.base_of(robot.root) is not None
        return not self.settings.adaptive and (not robot.floating_bases or one_base)

    def _compiled(self, problem: IKProblem, c: Carry, n: int, max_iters: int, track: bool,
                  **options: Any) -> None:  # fmt: skip
        """The CPU's compiled loop; where the seeder drew restart pools (see
        :attr:`WholeBodyProblem.pool`), stalled rows start again within the call from them
        (``restarts`` of :func:`torchik.kinematics.native.lm_loop`) and the call is the whole
        solve; elsewhere the caller re-seeds them between calls."""
        assert isinstance(problem, WholeBodyProblem)
        if track and self._restarts_in_kernel(problem):
            assert problem.pool is not None  # _restarts_in_kernel
            configs, features, aims, k = problem.pool
            options = {"restarts": (configs, features, aims, c.attempt, k),
                       "grouped_chunk": COMPILED_SYNC_EVERY,
                       "early_stop": self.settings.early_stop, **options}  # fmt: skip
        super()._compiled(problem, c, n, max_iters, track, **options)

    @staticmethod
    def _restarts_in_kernel(problem: WholeBodyProblem) -> bool:
        """Whether the compiled loop restarts stalled rows itself, from the pools the seeder
        drew (:attr:`WholeBodyProblem.pool`), and so runs a whole solve
        in one call, the targets' slots in chunks of :data:`COMPILED_SYNC_EVERY` with the
        early stop between them."""
        return problem.pool is not None

    def compiles_on(self, robot: Robot) -> bool:
        """Whether the CPU's compiled loop runs this solver's solves on ``robot`` (on the CPU):
        :meth:`compiled_loop` of any problem on it."""
        return self._compiles(robot, robot.lower[None]) and self._takes_robot(robot)

    def _compiled_extras(self, problem: IKProblem) -> dict[str, Any]:
        """The held joints, the posture and a floating base, for
        :func:`torchik.kinematics.native.lm_loop`."""
        assert isinstance(problem, WholeBodyProblem)
        extras = dict(columns=problem.columns, rest=problem.rest, posture=problem.posture,
                      max_posture_step=MAX_POSTURE_STEP)  # fmt: skip
        if problem.robot.floating:
            extras.update(base_origin=problem.base_origin, moves_base=problem.moves_base)
        return extras

    def solve_in_one_call(self, problem: WholeBodyProblem, q: Tensor) -> tuple[Tensor, Tensor]:
        """:meth:`solve` of seeds ``q (N, nq)``, one slot per target and no restarts, as one
        call of the solver's loop kernel (:meth:`fused_loop`: the CPU's compiled loop where
        :meth:`compiled_loop` serves): what :func:`torchik.ik.fixed.run_fixed` runs in that
        case (a call of ``max_iters + 1`` evaluations; its early stop over a target's slots
        changes nothing with one slot), without its runner's chunks and reads (a tenth of a
        warm-started G1 call): the same ``q`` and iterations. :meth:`solve` where no kernel
        serves."""
        max_iters = self.settings.max_iters
        c = Carry.start(problem.project(q), self.initial_state(q), max_iters)
        if not self.fused_loop(problem, c, max_iters + 1, max_iters, False):
            return self.solve(problem, q)
        return c.best_q, c.iterations

    def settle(self, problem: WholeBodyProblem, q: Tensor, iters: int) -> Tensor:
        """``iters`` more posture steps from ``q (N, nq)``, keeping each row's last iterate that
        meets every target (rows that never did keep their ``q``): compiled on the CPU where
        the solve is (not with ``loop="host"``), else PyTorch operations."""
        if self.settings.loop != "host" and self.compiled_loop(problem, q):
            c = Carry.start(q, {}, iters + 1)  # best_q: q, kept where no iterate converges
            self._compiled(problem, c, iters + 1, iters + 1, False, settle=True)
            return c.best_q
        kept = q.clone()
        for _ in range(iters + 1):
            lin = self.linearize(problem, q)
            kept = torch.where(problem.converged(lin)[:, None], q, kept)
            q = problem.project(self.step(problem, q, lin, {}))
        return kept

    def step(self, problem: IKProblem, q: Tensor, lin: Linearization, state: State) -> Tensor:
        assert isinstance(problem, WholeBodyProblem) and lin.jacobian is not None
        s = self.settings
        w = problem.weights(s.rotation_weight)
        jac = free_limit_columns(problem, q, lin.jacobian, lin.error, w, problem.coordinates)
        delta = damped_step(jac, lin.error, s.damping * (lin.cost + s.damping_floor), w)
        if problem.posture:
            # towards rest in the joints only: a floating base is never pulled
            z = problem.robot.difference(q, problem.rest) * (problem.coordinates >= 0)
            z = problem.posture * z * problem.columns
            # a long null-space step leaves the targets at second order: at most MAX_POSTURE_STEP
            z = z * (MAX_POSTURE_STEP / z.norm(dim=-1, keepdim=True).clamp_min(MAX_POSTURE_STEP))
            floor = lin.cost.new_full(lin.cost.shape, s.damping * s.damping_floor)
            # z minus its component in the row space of J: (I - Jᵀ(JJᵀ + εI)⁻¹J) z, W-weighted
            delta = delta + z - damped_step(jac, (jac @ z[..., None])[..., 0], floor, w)
        return integrate(problem.robot, q, delta)


def integrate(robot: Robot, q: Tensor, step: Tensor) -> Tensor:
    """``q`` moved by a solver ``step``: ``robot.integrate(q, step)`` where the robot has one
    (a floating base, whose ``q`` holds a quaternion), else ``q + step``.

    Args:
        robot: the robot.
        q: ``(B, nq)`` configurations.
        step: ``(B, nv)`` tangent steps (``nv = nq`` without a floating base).

    Returns:
        ``(B, nq)``.
    """
    move = getattr(robot, "integrate", None)
    return q + step if move is None else move(q, step)


def _check_targets(robot, targets, weights, position_only):
    """``(batch, links, positions (T, 3), rotmats (T, 3, 3) or None, weights)``."""
    if not isinstance(targets, Mapping) or not targets:
        raise ValueError("targets must be a non-empty dict {link name: pose or position}")
    weights = {} if weights is None else dict(weights)
    for link in weights:
        if link not in targets:
            raise ValueError(f"weights name {link!r}, which is not a target")
    batch, positions, rotmats, ws = None, [], [], []
    for link, target in targets.items():
        robot.link_index(link)  # a clear error for unknown links
        w = weights.get(link, 1.0)
        if isinstance(w, numbers.Real) and not isinstance(w, bool) and w == 0:
            raise ValueError(
                f"weight of {link!r} is 0: a target without weight cannot steer the solve, "
                "while success still asks for it; leave the target out"
            )
        w = check_float(f"weight of {link!r}", w, positive=True)
        is_position = isinstance(target, Tensor) and target.shape[-2:] != (4, 4)
        try:
            shape, position, rotmat = check_target(robot, target, position_only or is_position)
        except (TypeError, ValueError) as err:
            raise type(err)(f"target {link!r}: {err}") from None
        if batch is not None and shape != batch:
            want, got = tuple(batch), tuple(shape)
            raise ValueError(f"target {link!r} has batch shape {got}, the first target {want}")
        batch = shape
        positions.append(position)
        rotmats.append(rotmat)
        ws.append(float(w))
    return batch, tuple(targets), positions, rotmats, ws


def _check_active(robot: Robot, active, moving: int | None) -> Tensor:
    """``(nq,)`` bool mask from joint names or a mask; ``None``: every joint. A floating
    base's name (``root_joint``) stands for its 7 coordinates, which move together; only the
    base ``moving`` (the free body that carries the targets) may move, the others are held
    (``None``: the free bodies of a scene beside a fixed robot)."""
    names, k = list(robot.joint_names), robot.floating_bases
    bases = [names[7 * b].partition("/")[0] for b in range(k)]
    if active is None:
        mask = torch.ones(robot.dof, dtype=torch.bool, device=robot.device)
        for b in range(k):
            mask[7 * b : 7 * b + 7] = b == moving
        return mask
    if isinstance(active, Tensor):
        if active.dtype != torch.bool or active.shape != (robot.dof,):
            raise ValueError(f"active must be joint names or a ({robot.dof},) bool mask")
        mask = active.to(robot.device)
    else:
        unknown = [name for name in active if name not in names and name not in bases]
        if unknown or isinstance(active, str):
            raise ValueError(f"unknown active joints {unknown or active!r}; the joints are {names}")
        mask = torch.zeros(robot.dof, dtype=torch.bool, device=robot.device)
        mask[[names.index(name) for name in active if name not in bases]] = True
        for b, base in enumerate(bases):
            mask[7 * b : 7 * b + 7] |= base in active
    for b, base in enumerate(bases):
        coordinates = mask[7 * b : 7 * b + 7]
        if bool(coordinates.any()) and not bool(coordinates.all()):
            raise ValueError(f"a floating base moves as a whole: make all 7 of its coordinates "
                             f"active (or name it, {base!r}) or none")  # fmt: skip
        if bool(coordinates.any()) and b != moving:
            raise ValueError(f"the free body of {base!r} carries no target and stays at its "
                             "rest pose; leave it out of active")  # fmt: skip
    return mask


def _moving_base(robot: Robot, links: Sequence[str]) -> int | None:
    """The floating base that carries the target ``links`` (``None``: none does, e.g. an arm
    fixed in a scene with free bodies).

    Raises:
        ValueError: targets on the links of two free bodies (one moves per solve).
    """
    owners = sorted({b for link in links if (b := robot.base_of(link)) is not None})
    if len(owners) > 1:
        carried = ", ".join(robot.base_link(b) for b in owners)
        raise ValueError(
            f"the targets are on {len(owners)} free bodies ({carried}); solve_wholebody "
            "moves one: place the links of one body at a time"
        )
    return owners[0] if owners else None


def _columns(robot: Robot, mask: Tensor) -> Tensor:
    """``(nv,)`` bool, the Jacobian columns ``mask (nq,)`` moves: base ``b``'s six twist
    columns with its coordinates, a joint's with its own."""
    k = robot.floating_bases
    if not k:
        return mask  # a joint's column is its coordinate
    index = torch.arange(robot.nv, device=mask.device)
    return mask[torch.where(index < 6 * k, 7 * torch.div(index, 6, rounding_mode="floor"),
                            index + k)]  # fmt: skip


def _check_rest(robot: Robot, rest, batch) -> Tensor:
    """``(T, dof)`` rest (and held) configuration; ``None``: :meth:`Robot.default_configuration`
    (free bodies where the file puts them)."""
    rest = robot.default_configuration() if rest is None else rest
    if not isinstance(rest, Tensor) or rest.shape[-1:] != (robot.dof,):
        got = tuple(rest.shape) if isinstance(rest, Tensor) else type(rest).__name__
        raise ValueError(f"rest must be a (..., {robot.dof}) tensor, got {got}")
    try:
        rest = rest.to(robot.device, robot.dtype).expand(*batch, robot.dof)
    except RuntimeError:
        raise ValueError(f"rest shape {tuple(rest.shape)} does not broadcast to the targets' "
                         f"{tuple(batch)}") from None  # fmt: skip
    try:  # a held base's quaternion of any length: the rotation it gives
        return normalize_bases(rest.reshape(-1, robot.dof), robot.floating_bases)
    except ValueError as err:
        raise ValueError(f"rest: {err}") from None


def _limits(robot, active, rest, bounds, n_targets) -> JointLimits:
    """The joint limits, with a zero-width box at ``rest`` for the inactive joints."""
    limits = JointLimits.of(robot)
    if bool(active.all()) and bounds is None:
        return limits
    lower, upper = bounds if bounds is not None else (robot.lower, robot.upper)
    held = ~active
    outside = held & ((rest < robot.lower) | (rest > robot.upper))
    if bool(outside.any()):
        joint = robot.joint_names[int(torch.nonzero(outside)[0, 1])]
        raise ValueError(f"inactive joint {joint!r} is held at a value outside its limits")
    lower = torch.where(held, rest, lower.expand(n_targets, -1))
    upper = torch.where(held, rest, upper.expand(n_targets, -1))
    # boxes are finite; unbounded coordinates (a floating base's position) stay unbounded
    free = torch.isinf(lower) | torch.isinf(upper)
    limits = limits.within(lower.masked_fill(free, 0.0), upper.masked_fill(free, 0.0))
    lower, upper = torch.where(free, lower, limits.lower), torch.where(free, upper, limits.upper)
    return replace(limits, lower=lower, upper=upper)


def solve_wholebody(
    robot: Robot,
    targets: Mapping[str, Tensor],
    *,
    weights: Mapping[str, float] | None = None,
    active: Sequence[str] | Tensor | None = None,
    rest: Tensor | None = None,
    posture: float = 0.0,
    posture_iters: int = 10,
    position_only: bool = False,
    seeds: Tensor | None = None,
    num_seeds: int = 2,
    seed_pool: int = 256,
    tol_position: float = 1e-3,
    tol_rotation: float = math.radians(1.0),
    max_iters: int | None = None,
    generator: torch.Generator | None = None,
    num_threads: int | None = None,
    lower: Tensor | None = None,
    upper: Tensor | None = None,
    loop: str = "auto",
    restarts: bool | None = None,
) -> WholeBodyResult:
    """Whole-body IK: place several links at once (what ``solve_ik`` does with a dict).

    Args:
        robot: the robot.
        targets: link name -> ``(..., 4, 4)`` poses or ``(..., 3)`` positions, the same batch
            shape ``(...)`` for every link.
        weights: link name -> weight ``> 0`` of its residual in the cost (default 1).
        active: the joints the solver moves (names, or a ``(dof,)`` bool mask); the others
            stay at their value in ``rest``. ``None``: every joint. A floating base moves as a
            whole: its name (``root_joint``) or all 7 of its coordinates, or none of them;
            free bodies that carry no target (a scene's objects) never move.
        rest: ``(..., dof)`` or ``(dof,)`` rest configuration of the posture term and held
            values of the inactive joints; ``None``: :meth:`Robot.default_configuration`
            (:meth:`Robot.neutral`, free bodies where the file puts them).
        posture: gain in ``[0, 1]`` of the step towards ``rest`` in the null space of the
            targets (0: no posture term); it never pulls a floating base.
        posture_iters: with ``posture > 0``, iterations run after convergence so the posture
            settles; only iterates that still meet every target are kept.
        position_only: place only the link origins, whatever the targets' shapes.
        seeds: ``(..., K, dof)`` or ``(K, dof)`` start configurations; ``None``: ``num_seeds``
            uniform random ones per target (never the answer), re-drawn for stalled slots, a
            floating base fitted to the targets (:func:`~torchik.ik.wholebody.fit_base`).
        num_seeds: ``K`` when ``seeds`` is ``None``.
        seed_pool: each random seed (and restart) is the configuration nearest to the targets,
            in pose space, of ``seed_pool`` uniform random ones (``0``: plain uniform seeds),
            drawn within the box of joints held at one ``rest`` for every target; plain
            uniform ones in each target's box where the boxes differ (a ``rest``, ``lower``
            or ``upper`` per target).
        tol_position: success threshold (m) of every target.
        tol_rotation: success threshold (rad) of every pose target.
        max_iters: iterations of the solve (default :data:`MAX_ITERS`).
        generator: random generator for the seeds.
        num_threads: torch intra-op threads during the solve (``None``: torch's setting).
        lower: ``(..., dof)`` box per target within the limits (see ``solve_ik``).
        upper: likewise.
        loop: the solver's loop (see :attr:`torchik.ik.SolverSettings.loop`): ``"auto"`` is
            the fixed-shape loop, captured on CUDA, compiled by Numba on the CPU
            (:func:`torchik.kinematics.native.lm_loop`: a fixed base or one floating base,
            Numba installed, the robot's backend not ``"reference"``); else the host loop.
        restarts: let stalled slots start again from fresh seeds (drawn as random ones are,
            see ``seed_pool``); default: only when ``seeds`` is ``None``. With ``seeds`` (a
            warm start: the previous solutions of a path), a slot that stalls, e.g. pinned at
            a joint limit, then restarts instead of failing, at the cost of a jump to another
            solution.

    Returns:
        A :class:`WholeBodyResult` with ``q (..., K, dof)``; ``success`` means every target
        within tolerance and every joint within its limits, checked by forward kinematics.

    Raises:
        ValueError: targets on the links of two free bodies, an active free body that
            carries no target, an unknown link or joint, a weight <= 0, targets of
            different batch shapes, malformed targets, seeds, rest or boxes, an inactive joint
            held outside its limits, ``num_seeds`` or ``seed_pool`` above
            :data:`~torchik.ik.inputs.MAX_SEEDS` or :data:`~torchik.ik.inputs.MAX_SEED_POOL`,
            ``max_iters`` above :data:`~torchik.ik.base.ITERATION_LIMIT`.
        TypeError: an argument of the wrong kind (a float ``num_seeds``, a seed for
            ``generator``, ``"yes"`` for a bool).

    Example:
        >>> import torchik
        >>> robot = torchik.load_robot("g1", dtype=torch.float64)
        >>> g = torch.Generator().manual_seed(0)
        >>> hands = ["left_rubber_hand", "right_rubber_hand"]
        >>> poses = robot.forward_kinematics(robot.random_configuration(3, g), hands)
        >>> result = solve_wholebody(robot, dict(zip(hands, poses.unbind(-3))), generator=g)
        >>> bool(result.success.any(-1).all())
        True
    """
    with torch.no_grad(), intra_op_threads(num_threads):
        check_float("posture", posture, 0.0, 1.0)
        check_int("posture_iters", posture_iters, 0)
        check_options(tol_position, tol_rotation, num_seeds, seed_pool, restarts, position_only)
        check_generator("generator", generator)
        iters = MAX_ITERS if max_iters is None else check_int("max_iters", max_iters, 0,
                                                               ITERATION_LIMIT)  # fmt: skip
        if _on_host(robot, targets, seeds, num_seeds, generator, iters, loop):
            cpu = host.twin(robot)
            result = solve_wholebody(
                cpu, host.to_host(dict(targets)), weights=weights, active=host.to_host(active),
                rest=host.to_host(rest), posture=posture, posture_iters=posture_iters,
                position_only=position_only, seeds=host.to_host(seeds), num_seeds=num_seeds,
                seed_pool=seed_pool, tol_position=tol_position, tol_rotation=tol_rotation,
                max_iters=max_iters, generator=generator, lower=host.to_host(lower),
                upper=host.to_host(upper), loop=loop, restarts=restarts,
            )  # fmt: skip
            return host.back(result, robot.device)
        problem, k, batch, q0 = _problem(
            robot, targets, weights, active, rest, posture, position_only,
            seeds, num_seeds, tol_position, tol_rotation, lower, upper,
        )  # fmt: skip
        body = _one_body(problem)  # a scene's body that carries the targets, or None
        part, kept = (problem, None) if body is None else body
        seeds_of_part = q0 if kept is None or q0 is None else q0[:, kept]
        result = _solve_rows(part, k, seeds_of_part, iters, loop, seed_pool, generator, restarts,
                             posture_iters)  # fmt: skip
        if kept is not None:  # back to the scene's q, the other bodies where they were held
            held = problem.rest.view(*result.q.shape[:-1], robot.dof)
            result = cast(WholeBodyResult, result.in_scene(robot, kept, held))
        return _reshape(result, batch)


def _one_body(problem: WholeBodyProblem) -> tuple[WholeBodyProblem, Tensor] | None:
    """A scene's problem as that of the one body that carries every target
    (:meth:`Robot.scene_body`: the moving free body, or the fixed tree), the other free bodies
    held where they are: ``(that robot's problem, the coordinates of q it keeps)``; ``None``
    where the robot is not a scene (or a joint mimics one of another body). Whatever the loop
    and device: the CPU's compiled loop takes that body and not the scene (the G1 beside a
    free box, 1 000 hand poses in 0.11 s against 1.3-1.4 s of PyTorch operations), and other
    loops step fewer coordinates without the held bodies' boxes."""
    robot = problem.robot
    base = problem.moving_bases[0] if problem.moving_bases else None
    if any(robot.base_of(t.link) != base for t in problem.targets):
        return None
    body = _scene_part(robot, base)
    if body is None:
        return None
    part, kept = body
    active, own = problem.active[kept], JointLimits.of(part)
    lower, upper = problem.limits.lower[..., kept], problem.limits.upper[..., kept]
    if problem.limits.per_row and not bool(((lower == own.lower) & (upper == own.upper)).all()):
        # boxes of the body's own (held joints, a box per target); else the other bodies' alone
        own = replace(own, lower=lower, upper=upper, clamped=problem.limits.clamped[kept])
    coordinates = velocity_coordinates(part.nv, part.floating_bases, part.device)
    return replace(problem, robot=part, limits=own, active=active, rest=problem.rest[:, kept],
                   coordinates=coordinates, columns=_columns(part, active)), kept  # fmt: skip


def _scene_part(robot: Robot, base: int | None) -> tuple[Robot, Tensor] | None:
    """``robot.scene_body(base)`` (``(robot, kept coordinates)``) where ``robot`` is a scene
    (without learnable origins, which its bodies would not share); else ``None``."""
    if not robot.scene or robot.learnable:
        return None
    try:
        return robot.scene_body(base)
    except ValueError:  # a joint that mimics one of another body
        return None


def _solve_rows(problem: WholeBodyProblem, k: int, q0: Tensor | None, iters: int, loop: str,
                seed_pool: int, generator, restarts, posture_iters: int):  # fmt: skip
    """The solve of the checked rows (``k`` slots per target, seeds ``q0 (N, nq)`` or random
    ones): one captured program on CUDA where it serves (:mod:`torchik.ik.wholebody.captured`),
    else the solver's loop, then the posture's settling and the check by FK."""
    robot = problem.robot
    solver = _made(iters, loop)
    compiled = loop != "host" and solver.compiled_loop(problem, problem.rest)

    def chunked() -> WholeBodyResult:
        reseed = _seeder(problem, k, seed_pool, generator, q0 is None, restarts, compiled)
        first = q0
        if first is None:
            assert reseed is not None  # no seeds given: random ones
            rows = torch.arange(len(problem), device=robot.device)
            first = reseed(rows, torch.zeros_like(rows))  # and the restarts' pools, if any
        handed = None if restarts is False else reseed
        whole = handed is None and k == 1  # nothing between the calls: one call
        looped = _solver(problem, iters, loop, compiled, whole)  # its calls' length known now
        if compiled and whole:
            q, iterations = looped.solve_in_one_call(problem, first)
        else:
            q, iterations = looped.solve(problem, first, handed)
        if problem.posture and posture_iters:
            q = looped.settle(problem, q, posture_iters)
        return evaluate_targets(problem, q, iterations, (len(problem) // k, k))

    one_graph = q0 is None and restarts is not False and not compiled
    if one_graph and captured.serves(solver, problem, seed_pool, generator):
        return captured.solve(solver, problem, k, seed_pool, generator, chunked)
    return chunked()


def _seeder(problem, k, seed_pool, generator, random: bool, restarts, compiled: bool):
    """The seeder of the first seeds (``random``) and of the restarts, or ``None``: given seeds
    without ``restarts``. A warm start restarts seldom: between the calls of the compiled loop,
    its seeder made only if a slot stalls (:func:`_on_demand`). Random seeds with ``restarts``
    ``False``: the first seeds only (no restart pools for the compiled loop)."""
    if random:
        pools = compiled and restarts is not False
        return wholebody_seeder(problem, k, seed_pool, generator, restarts=pools)
    if restarts:
        return _on_demand(lambda: wholebody_seeder(problem, k, seed_pool, generator))
    return None


def _on_demand(make: Callable[[], Seeder]) -> Seeder:
    """The seeder ``make()`` returns, made at the first draw (making one forms every row's
    target features)."""
    made: list[Seeder] = []

    def seeder(rows: Tensor, attempt: Tensor) -> Tensor:
        if not made:
            made.append(make())
        return made[0](rows, attempt)

    return seeder


def _on_host(robot, targets, seeds, num_seeds, generator, max_iters: int, loop: str) -> bool:
    """Whether the CPU's compiled loop solves this call on the CPU copy of ``robot``
    (:mod:`torchik.ik.host`): ``loop`` ``"auto"``, at most
    :data:`~torchik.ik.host.HOST_WHOLEBODY_ROWS` rows on CUDA, the compiled loop serving
    (:meth:`WholeBodyLM.compiles_on`; in a scene, on the body that carries the targets).
    Malformed inputs count no rows: the checks say why."""
    first = next(iter(targets.values()), None) if isinstance(targets, Mapping) else None
    if loop != "auto" or not isinstance(first, Tensor) or first.dim() < 1:
        return False
    pose = first.dim() >= 2 and first.shape[-2:] == (4, 4)
    k = seeds.shape[-2] if isinstance(seeds, Tensor) and seeds.dim() >= 2 else num_seeds
    rows = math.prod(first.shape[:-2] if pose else first.shape[:-1]) * k
    if not host.serves(robot, rows, host.HOST_WHOLEBODY_ROWS, generator):
        return False
    twin, solver = host.twin(robot), _made(max_iters, loop)
    if solver.compiles_on(twin):
        return True
    try:  # a scene: the body that carries the targets (one, else the checks say why)
        (base,) = {twin.base_of(link) for link in targets}
    except (ValueError, TypeError):  # two bodies, an unknown link, a name not a str
        return False
    body = _scene_part(twin, base)  # the CPU's compiled loop never takes a scene whole
    return body is not None and solver.compiles_on(body[0])


def _problem(robot, targets, weights, active, rest, posture, position_only, seeds, num_seeds,
             tol_position, tol_rotation, lower, upper):  # fmt: skip
    """The checked inputs as rows: ``(problem, K, batch, seeds (N, dof) or None)``."""
    batch, links, positions, rotmats, ws = _check_targets(robot, targets, weights, position_only)
    n_targets = positions[0].shape[0]
    mask = _check_active(robot, active, _moving_base(robot, links))
    rest = _check_rest(robot, rest, batch)
    q0 = None if seeds is None else check_seeds(robot, seeds, batch)
    if q0 is not None:  # unit quaternions: a clamp to [-1, 1] would turn the others
        try:
            q0 = normalize_bases(q0, robot.floating_bases)
        except ValueError as err:
            raise ValueError(f"seeds: {err}") from None
    k = num_seeds if seeds is None else seeds.shape[-2]
    group = torch.arange(n_targets, device=robot.device).repeat_interleave(k)
    coordinates = velocity_coordinates(robot.nv, robot.floating_bases, robot.device)
    limits = _limits(robot, mask, rest, check_bounds(robot, lower, upper, batch), n_targets)
    if limits.per_row:
        limits = replace(limits, lower=limits.lower[group], upper=limits.upper[group])
    if all(r is None for r in rotmats):
        tol_rotation = math.inf
    link_targets = tuple(
        LinkTarget(link, p[group], None if r is None else r[group], w)
        for link, p, r, w in zip(links, positions, rotmats, ws, strict=True)
    )
    problem = WholeBodyProblem(
        robot, link_targets, group, tol_position, tol_rotation, limits,
        active=mask, rest=rest[group], posture=float(posture), coordinates=coordinates,
        columns=_columns(robot, mask),
    )  # fmt: skip
    return problem, k, batch, q0


def _solver(problem: WholeBodyProblem, max_iters: int, loop: str, compiled: bool,
            whole: bool = False) -> WholeBodyLM:  # fmt: skip
    """The solver; where the CPU's compiled loop runs it (``compiled``), in calls of
    :data:`COMPILED_SYNC_EVERY` iterations (stalled slots re-seeded between them), or of the
    whole solve where the kernel restarts them itself or where nothing happens between the
    calls (``whole``: no re-seeding, one slot per target, so no early stop of a target's other
    slots either; a warm start's solve is then one call, not two or more)."""
    if compiled:
        whole = whole or WholeBodyLM._restarts_in_kernel(problem)
        return _made(max_iters, loop, max_iters + 1 if whole else COMPILED_SYNC_EVERY)
    return _made(max_iters, loop)


@functools.lru_cache(maxsize=64)
def _made(max_iters: int, loop: str, sync_every: int = 0) -> WholeBodyLM:
    """A :class:`WholeBodyLM` of these settings, made once (a solver holds nothing but its
    frozen settings; making one checks every setting: a fifth of a warm-started one-target
    solve's time). ``sync_every`` 0 is the settings' default."""
    return WholeBodyLM(max_iters=max_iters, loop=loop, sync_every=sync_every)


def _reshape(result: WholeBodyResult, batch) -> WholeBodyResult:
    """``(T, K, ...)`` fields (and per-target errors) to ``(*batch, K, ...)``."""
    out = reshape_result(result, batch)
    k = result.q.shape[1]
    pos = {name: v.reshape(*batch, k) for name, v in result.position_errors.items()}
    rot = {name: v.reshape(*batch, k) for name, v in result.rotation_errors.items()}
    return replace(cast(WholeBodyResult, out), position_errors=pos, rotation_errors=rot)
