"""How ``solve_ik`` spends its iterations: rounds, retries of unsolved targets, given seeds.

Under ``early_stop`` the work is cut into rounds of ``round_iters`` iterations (see
:class:`~torchik.ik.base.SolverSettings`). Random seeds: every target starts with ``K`` slots;
after each round, the targets still unsolved get ``retry_seeds`` fresh slots and keep their best
``K``. Given seeds: the first ``initial_seeds`` slots run first, then ``retry_seeds`` more of the
targets still unsolved, and so on. Every round ends with a check by forward kinematics.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from torchik.checks import check_generator
from torchik.geometry.rotations import geodesic_distance
from torchik.ik import compiled
from torchik.ik.base import IKProblem, IKSolver, JointLimits, LinkTarget
from torchik.ik.fixed import bucket, capturable
from torchik.ik.result import IKResult
from torchik.ik.seeding import Seeder, nearest_seeder, uniform_seeder
from torchik.robot.robot import Robot

__all__ = ["Run", "evaluate", "make_problem", "reshape_result", "take_targets"]


@dataclass
class Run:
    """The rounds of one ``solve_ik`` call (see :class:`SolverSettings` ``round_iters``)."""

    solver: IKSolver
    robot: Robot
    link: str
    tol_position: float
    tol_rotation: float
    position: Tensor
    rotmat: Tensor | None
    k: int
    restarts: bool
    seed_pool: int
    generator: torch.Generator | None
    bounds: tuple[Tensor, Tensor] | None = None

    def __post_init__(self) -> None:
        check_generator("generator", self.generator)  # solve_ik(generator=5) was AttributeError

    def make(self, position: Tensor, rotmat: Tensor | None, k: int, bounds=None) -> IKProblem:
        """The rows of ``k`` slots for the targets ``position (T, 3)``, ``rotmat`` (see
        :func:`make_problem`)."""
        return make_problem(self.robot, self.link, position, rotmat, k, self.tol_position,
                            self.tol_rotation, bounds)  # fmt: skip

    @property
    def staged(self) -> bool:
        """Rounds with host checks between them, under ``early_stop``, on either loop. On the
        fixed-shape loop (accelerators) each round is one call, whose stalled slots are also
        re-seeded between chunks (:mod:`torchik.ik.fixed`), and the retry rounds run at bucket
        sizes (:func:`_padded`) so that their captured chunks are reused. One round of
        ``max_iters`` instead left the few hard targets of a batch on one slot each, and kept
        every row of the batch stepping until they finished: on an H200, 1 000 Panda poses
        took 22 ms at 99.6 % and 100 000 took 157 ms at 99.7 % that way."""
        s = self.solver.settings
        return s.early_stop and s.round_iters > 0

    def problem(self, k: int, todo: Tensor | None = None) -> IKProblem:
        """The rows of ``k`` slots for every target, or for the targets ``todo`` (long)."""
        position, rotmat, bounds = self.targets(todo)
        return self.make(position, rotmat, k, bounds=bounds)

    def targets(self, todo: Tensor | None = None) -> tuple[Tensor, Tensor | None, tuple | None]:
        """``(position, rotmat, bounds)`` of every target, or of the targets ``todo`` (long)."""
        position, rotmat, bounds = self.position, self.rotmat, self.bounds
        if todo is not None:
            position, rotmat = position[todo], None if rotmat is None else rotmat[todo]
            bounds = None if bounds is None else (bounds[0][todo], bounds[1][todo])
        return position, rotmat, bounds

    def random(self) -> IKResult:
        """Random seeds; with restarts and ``early_stop``, in rounds. Each target's slots come
        back best first (:meth:`IKResult.top`), as from the one-graph program."""
        s, k = self.solver.settings, self.k
        rounds = self.staged and self.restarts
        iters = min(s.round_iters, s.max_iters) if rounds else s.max_iters  # a hard cap
        if rounds and compiled.serves(self):  # one compiled call per round (the CPU)
            first = compiled.round_of(self, None, k, iters, 0, order=True)
            result = self.retry(first, iters)
            return first if result is first else result.top(k)
        problem = self.problem(k)
        seeder = _seeder(problem, k, self.seed_pool, self.solver, self.generator)
        q0 = seeder(*_first_attempt(len(problem), self.position.device))
        result = _run(self.solver, problem, q0, seeder if self.restarts else None, iters, 0, k)
        return (self.retry(result, iters) if rounds else result).top(k)

    def given(self, q0: Tensor) -> IKResult:
        """Given seeds ``(T * K, dof)``: lazily in rounds under ``early_stop``, then random
        retry rounds if restarts are allowed."""
        k = self.k
        s = self.solver.settings
        if compiled.serves_given(self):  # one compiled call per round (the CPU)
            if not self.restarts:
                return compiled.given(self, q0, s.max_iters)
            iters = min(s.round_iters, s.max_iters)  # one round of them, then random ones
            return self.retry(compiled.given(self, q0, iters), iters)
        if not self.staged:
            problem = self.problem(k)
            reseed = _uniform(problem, self.generator) if self.restarts else None
            return _run(self.solver, problem, q0, reseed, self.solver.settings.max_iters, 0, k)
        seeds = q0.view(-1, k, q0.shape[-1])
        result, used = _given_seeds_in_rounds(self.solver, self.problem, seeds, self.restarts)
        return self.retry(result, used) if self.restarts else result

    def retry(self, result: IKResult, used: int) -> IKResult:
        """Retry rounds after ``used`` iterations (see :func:`_retry`); ``result`` itself
        where none runs."""
        return _retry(result, self, used)

    def round(self, todo: Tensor, slots: int, iters: int, used: int) -> IKResult:
        """A round of ``slots`` fresh random seeds for each of the targets ``todo`` (long):
        one compiled call where :func:`torchik.ik.compiled.serves`; else the seeds, the
        solver's loop (restarts between its chunks) and the evaluation. Slots in order."""
        if compiled.serves(self):
            return compiled.round_of(self, todo, slots, iters, used, order=False)
        padded = _padded(todo, self.solver)
        problem = self.problem(slots, padded)
        seeder = _seeder(problem, slots, self.seed_pool, self.solver, self.generator)
        q0 = seeder(*_first_attempt(len(problem), todo.device))
        retried = _run(self.solver, problem, q0, seeder, iters, used, slots)
        if padded.numel() > todo.numel():  # the padding's results are dropped
            retried = take_targets(retried, slice(0, todo.numel()))
        return retried


def make_problem(
    robot, link, position, rotmat, k, tol_position, tol_rotation, bounds=None
) -> IKProblem:
    """The rows of ``k`` slots for each of the targets ``position (T, 3)``, ``rotmat``, and
    optionally a box ``bounds = (lower, upper)``, each ``(T, dof)``, per target."""
    group = torch.arange(position.shape[0], device=robot.device).repeat_interleave(k)
    rot = None if rotmat is None else rotmat[group]
    limits = JointLimits.of(robot)
    if bounds is not None:
        limits = limits.within(bounds[0][group], bounds[1][group])
    target = LinkTarget(link, position[group], rot)
    return IKProblem(robot, (target,), group, tol_position, tol_rotation, limits)


def _first_attempt(n_rows: int, device) -> tuple[Tensor, Tensor]:
    rows = torch.arange(n_rows, device=device)
    return rows, torch.zeros_like(rows)


def _seeder(problem: IKProblem, k: int, seed_pool: int, solver: IKSolver, generator) -> Seeder:
    """Random seeds for the ``k`` slots of each target of ``problem`` (see ``seed_pool``);
    uniform within the box of each row if it has one."""
    robot = problem.robot
    if not seed_pool or problem.limits.per_row:
        return _uniform(problem, generator)
    # the rows repeat each target k times: slot 0 rows give the targets
    target = problem.target
    position = target.position[::k]
    rotmat = None if target.rotmat is None else target.rotmat[::k]
    w = solver.settings.rotation_weight
    return nearest_seeder(robot, target.link, position, rotmat, k, seed_pool, w, generator)


def _uniform(problem: IKProblem, generator) -> Seeder:
    """Uniform random seeds within the limits (or each row's box) of ``problem``."""
    if problem.limits.per_row:
        return lambda rows, attempt: problem.limits.sample(rows, generator)
    return uniform_seeder(problem.robot, generator)


def _run(solver, problem, q0, reseed, iters, used, k) -> IKResult:
    """One call of the solver loop, evaluated by FK; ``(T, k)`` slots."""
    q, iterations = solver.solve(problem, q0, reseed, iters)
    return evaluate(problem, q, iterations + used, (len(problem) // k, k))


def _given_seeds_in_rounds(solver, problem_of: Callable, seeds: Tensor, restarts: bool):
    """User seeds ``(T, K, dof)`` used lazily: round 0 refines the first ``initial_seeds``
    slots of every target, each later round the next ``retry_seeds`` slots of the targets still
    unsolved. Slots never run keep their (projected) seed, with ``iterations`` 0. Without
    ``restarts`` the last round (no given seed left after it) runs for the rest of
    ``max_iters``: no random round follows to use it (it ran ``round_iters``, so a warm start
    with one seed had 10 LM iterations whatever ``max_iters`` said).

    Returns:
        The result and the iterations used.
    """
    s = solver.settings
    n_targets, k, dof = seeds.shape
    # where the first round runs every slot, its result is the whole result: no slot is left
    # with its seed (a warm start, one seed per target, is the common case: one FK saved)
    result = None if k <= s.initial_seeds and s.max_iters > 0 else _as_given(problem_of, seeds)
    start, width, used = 0, s.initial_seeds, 0
    todo = torch.arange(n_targets, device=seeds.device)
    while start < k and used < s.max_iters and todo.numel():
        block = torch.arange(start, min(k, start + width), device=seeds.device)
        last = start + width >= k and not restarts
        iters = s.max_iters - used if last else min(s.round_iters, s.max_iters - used)
        part = problem_of(block.numel(), todo)
        q0 = seeds[todo][:, block].reshape(-1, dof)
        done = _run(solver, part, q0, None, iters, used, block.numel())
        result = done if result is None else _replace_slots(result, todo, block, done)
        todo = todo[~done.success.any(dim=-1)]
        start, width, used = start + block.numel(), s.retry_seeds, used + iters
    assert result is not None  # the first round ran (targets, slots and iterations > 0)
    return result, used


def _as_given(problem_of: Callable, seeds: Tensor) -> IKResult:
    """The seeds ``(T, K, dof)`` evaluated as they are (projected), ``iterations`` 0: what
    the slots never run keep."""
    n_targets, k, dof = seeds.shape
    problem = problem_of(k)
    flat = problem.project(seeds.reshape(-1, dof))
    unused = torch.zeros(n_targets * k, dtype=torch.long, device=seeds.device)
    return evaluate(problem, flat, unused, (n_targets, k))


def _retry(result: IKResult, run: Run, used: int) -> IKResult:
    """Rounds after the first: targets without a success get ``retry_seeds`` fresh slots each
    for ``round_iters`` more iterations, until ``max_iters``; each keeps its best ``K`` slots.

    Few targets are left by then, and a batched iteration costs about as much for 10 rows as for
    200, so many parallel seeds finish the hard targets in fewer iterations than restarting
    their few slots one after another.
    """
    s = run.solver.settings
    k, r = result.q.shape[-2], s.retry_seeds
    while used < s.max_iters:
        todo = _unsolved(result.success)
        if todo.numel() == 0:
            break
        iters = min(s.round_iters, s.max_iters - used)
        retried = run.round(todo, r, iters, used)
        result = _replace_rows(result, todo, _concat(take_targets(result, todo), retried).top(k))
        used += iters
    return result


def _unsolved(success: Tensor) -> Tensor:
    """``(n,)`` long: the targets of ``success (T, K)`` without a successful slot (on the CPU
    in NumPy: a solve of one pose spent 3 % of its time on the PyTorch form)."""
    if success.device.type == "cpu":
        return torch.from_numpy(np.flatnonzero(~success.numpy().any(axis=-1)))
    return torch.nonzero(~success.any(dim=-1)).flatten()


def _padded(todo: Tensor, solver) -> Tensor:
    """The targets ``todo (n,)`` of a retry round, repeated up to the next power of two where
    the fixed-shape loop's chunks are captured (CUDA): a captured chunk per shape, so a few
    bucket sizes are captured once and replayed by later solves instead of one capture per
    count of unsolved targets. The repeats are solved too and their results dropped."""
    n = todo.numel()
    if n == 0 or not (solver._fixed(todo) and capturable(solver, todo)):
        return todo
    return todo[torch.arange(bucket(n), device=todo.device) % n]


def evaluate(problem: IKProblem, q: Tensor, iterations: Tensor, shape: tuple) -> IKResult:
    """Success and errors from forward kinematics of the final ``q (N, dof)``."""
    robot, target = problem.robot, problem.target
    q = problem.limits.canonical(q)
    with torch.no_grad():
        pose = robot.forward_kinematics(q, target.link)
        pos_err = (pose[:, :3, 3] - target.position).norm(dim=-1)
        if target.rotmat is None:
            rot_err, tol_rot = torch.zeros_like(pos_err), math.inf
        else:
            rot_err = geodesic_distance(pose[:, :3, :3], target.rotmat)
            tol_rot = problem.tol_rotation
        within = ((q >= robot.lower) & (q <= robot.upper)).all(dim=-1)
    success = (pos_err < problem.tol_position) & (rot_err < tol_rot) & within
    return IKResult(
        q=q.reshape(*shape, robot.dof),
        success=success.reshape(shape),
        position_error=pos_err.reshape(shape),
        rotation_error=rot_err.reshape(shape),
        iterations=iterations.reshape(shape),
        tol_position=problem.tol_position,
        tol_rotation=tol_rot,
        continuous=robot.continuous,
    )


# the Tensor fields (mypy checks replace(**{f: tensor}) against the float ones too: ignored)
_FIELDS = ("q", "success", "position_error", "rotation_error", "iterations")


def _map(result: IKResult, fn) -> IKResult:
    return replace(result, **{f: fn(getattr(result, f)) for f in _FIELDS})


def reshape_result(result: IKResult, batch: tuple) -> IKResult:
    """``(T, K, ...)`` fields to ``(*batch, K, ...)`` (``result`` itself where ``batch`` is
    ``(T,)``: a tenth of a replayed one-pose solve's host time went to reshaping in place)."""
    if tuple(batch) == tuple(result.q.shape[:1]):
        return result
    k = result.q.shape[1]
    return _map(result, lambda x: x.reshape(*batch, k, *x.shape[2:]))


def take_targets(result: IKResult, index: Tensor | slice) -> IKResult:
    """The answers of the targets ``index`` (long, or a slice: views) of a ``(T, K, ...)``
    result."""
    return _map(result, lambda x: x[index])


def _concat(a: IKResult, b: IKResult) -> IKResult:
    """Slots of ``a`` then of ``b``, per target."""
    return replace(a, **{f: torch.cat((getattr(a, f), getattr(b, f)), dim=1) for f in _FIELDS})  # type: ignore[arg-type]


def _replace_rows(result: IKResult, index: Tensor, rows: IKResult) -> IKResult:
    def put(name: str) -> Tensor:
        value = getattr(result, name).clone()
        value[index] = getattr(rows, name)
        return value

    return replace(result, **{f: put(f) for f in _FIELDS})  # type: ignore[arg-type]


def _replace_slots(result: IKResult, rows: Tensor, slots: Tensor, part: IKResult) -> IKResult:
    def put(name: str) -> Tensor:
        value = getattr(result, name).clone()
        value[rows[:, None], slots] = getattr(part, name)
        return value

    return replace(result, **{f: put(f) for f in _FIELDS})  # type: ignore[arg-type]
