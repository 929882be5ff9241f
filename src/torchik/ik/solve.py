"""``solve_ik``: checks the inputs, builds the rows, runs a solver, re-checks with FK."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import torch
from torch import Tensor

from torchik.ik.base import IKProblem, IKSolver
from torchik.ik.result import IKResult
from torchik.ik.seeding import Seeder, nearest_seeder, uniform_seeder
from torchik.robot import Robot
from torchik.rotations import geodesic_distance

__all__ = ["METHODS", "default_link", "solve_ik"]


def _methods() -> dict[str, type[IKSolver]]:
    from torchik.ik.gradient import GradientDescent
    from torchik.ik.jacobian import DampedLeastSquares, JacobianTranspose
    from torchik.ik.lbfgsb import LBFGSB
    from torchik.ik.lm import LevenbergMarquardt

    return {
        "lm": LevenbergMarquardt,
        "dls": DampedLeastSquares,
        "jt": JacobianTranspose,
        "gd": GradientDescent,
        "lbfgsb": LBFGSB,
    }


METHODS = ("lm", "dls", "jt", "gd", "lbfgsb")
"""Names ``solve_ik`` accepts for ``method``: Levenberg-Marquardt (default), damped least
squares with fixed damping, Jacobian transpose, gradient descent through autograd FK, and
SciPy's L-BFGS-B per row (needs the ``ik`` extra)."""


def default_link(robot: Robot) -> str:
    """The link IK places by default: ``END_LINKS[robot.name]`` for a bundled robot (when the
    robot has that link), else the last link in ``robot.link_names``."""
    from torchik.robots import END_LINKS

    link = END_LINKS.get(robot.name)
    if link is None and robot.name.startswith("planar"):
        link = END_LINKS["planar"]
    return link if link in robot.link_names else robot.link_names[-1]


def _check_target(robot: Robot, target: Tensor, position_only: bool):
    """``(batch shape, positions (T, 3), rotations (T, 3, 3) or None)``."""
    if not isinstance(target, Tensor):
        raise TypeError(f"target must be a torch.Tensor, got {type(target).__name__}")
    if not target.is_floating_point():
        raise TypeError(f"target must be a floating-point tensor, got {target.dtype}")
    is_pose = target.dim() >= 2 and target.shape[-2:] == (4, 4)
    if position_only and target.dim() >= 1 and target.shape[-1] == 3:
        batch, position, rotmat = target.shape[:-1], target, None
    elif is_pose:
        batch, position, rotmat = target.shape[:-2], target[..., :3, 3], target[..., :3, :3]
        if position_only:
            rotmat = None
    else:
        want = "(..., 3) positions or (..., 4, 4) poses" if position_only else "(..., 4, 4) poses"
        hint = "" if position_only else " (pass position_only=True for (..., 3) positions)"
        raise ValueError(f"target must be {want}, got shape {tuple(target.shape)}{hint}")
    if not bool(torch.isfinite(target).all()):
        raise ValueError("target contains NaN or infinite values")
    position = position.to(robot.device, robot.dtype).reshape(-1, 3)
    if rotmat is not None:
        rotmat = rotmat.to(robot.device, robot.dtype).reshape(-1, 3, 3)
        eye = torch.eye(3, dtype=rotmat.dtype, device=rotmat.device)
        off = (rotmat.transpose(-1, -2) @ rotmat - eye).abs().amax().item() if len(rotmat) else 0
        if off > 1e-3 or bool((torch.linalg.det(rotmat) <= 0).any()):
            raise ValueError("target rotations must be orthonormal with determinant +1")
    return batch, position, rotmat


def _check_seeds(robot: Robot, seeds: Tensor, batch: torch.Size) -> Tensor:
    """Seeds ``(..., K, dof)`` (or ``(K, dof)`` for every target) -> ``(T * K, dof)``."""
    if not isinstance(seeds, Tensor) or seeds.dim() < 2 or seeds.shape[-1] != robot.dof:
        shape = tuple(seeds.shape) if isinstance(seeds, Tensor) else type(seeds).__name__
        raise ValueError(f"seeds must have shape (..., K, {robot.dof}), got {shape}")
    if seeds.shape[-2] < 1:
        raise ValueError("seeds must hold at least one configuration per target (K >= 1)")
    if seeds.shape[:-2] != batch and seeds.dim() != 2:
        raise ValueError(
            f"seeds batch shape {tuple(seeds.shape[:-2])} does not match the targets' "
            f"{tuple(batch)}; use (..., K, dof) or (K, dof) for all targets"
        )
    if not bool(torch.isfinite(seeds).all()):
        raise ValueError("seeds contain NaN or infinite values")
    seeds = seeds.to(robot.device, robot.dtype).expand(*batch, *seeds.shape[-2:])
    return seeds.reshape(-1, robot.dof)


def _make_solver(method: str | IKSolver, **overrides) -> IKSolver:
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(method, IKSolver):
        return type(method)(method.settings, **overrides) if overrides else method
    methods = _methods()
    if method not in methods:
        raise ValueError(f"unknown IK method {method!r}; choose one of {list(methods)}")
    return methods[method](**overrides)


def solve_ik(
    robot: Robot,
    target: Tensor,
    link: str | None = None,
    *,
    position_only: bool = False,
    seeds: Tensor | None = None,
    num_seeds: int = 2,
    method: str | IKSolver = "lm",
    tol_position: float = 1e-3,
    tol_rotation: float = math.radians(1.0),
    max_iters: int | None = None,
    generator: torch.Generator | None = None,
    restarts: bool | None = None,
    early_stop: bool | None = None,
    seed_pool: int = 256,
    num_threads: int | None = 1,
) -> IKResult:
    """Numerical inverse kinematics for a batch of targets, several slots per target.

    Args:
        robot: the robot.
        target: ``(..., 4, 4)`` poses of ``link`` in the root frame, or with
            ``position_only=True`` ``(..., 3)`` positions (poses are accepted too).
        link: the link to place; ``None``: :func:`default_link` (``END_LINKS`` of a bundled
            robot, else the last link).
        position_only: ignore the orientation.
        seeds: ``(..., K, dof)`` start configurations (e.g. samples of a learned model to
            refine), or ``(K, dof)`` for every target; projected into the limits first.
        num_seeds: ``K`` random starts per target when ``seeds`` is ``None``.
        method: a name in :data:`METHODS` or a configured :class:`IKSolver`.
        tol_position: success threshold (m) on the distance of the link origin to the target.
        tol_rotation: success threshold (rad) on the geodesic rotation error.
        max_iters: override the solver's ``max_iters``.
        generator: random generator for the seeds and restarts (determinism).
        restarts: allow fresh random seeds: for stalled slots and, under ``early_stop``, for the
            targets still unsolved after each round (after the given ``seeds`` are used up);
            default: only when ``seeds`` is ``None``.
        early_stop: stop a target's slots once one succeeds (the solver's default is ``True``;
            pass ``False`` to fill every slot, e.g. for :meth:`IKResult.distinct`).
        seed_pool: each random seed (and restart) is the configuration nearest to the target,
            in pose space, of a pool of ``seed_pool`` uniform random configurations; ``0``:
            plain uniform random seeds (see :mod:`torchik.ik.seeding`).
        num_threads: torch intra-op threads during the solve (the previous setting is restored
            after). The batched operations are small (a few thousand rows of 6x7 matrices), so
            handing each to several threads costs more than it saves: on a busy 2-core machine
            two threads made a solve ten times slower. ``None`` keeps torch's setting.

    Returns:
        An :class:`IKResult` with ``q (..., K, dof)``. Unreachable targets give
        ``success=False`` with the best effort, not an exception.

    Raises:
        ValueError: malformed targets or seeds (shape, NaN/inf, non-rotations), an unknown
            link or method.

    Example:
        >>> import torchik
        >>> robot = torchik.load_robot("panda", dtype=torch.float64)
        >>> g = torch.Generator().manual_seed(0)
        >>> target = robot.forward_kinematics(robot.random_configuration(5, g), "panda_hand")
        >>> result = solve_ik(robot, target, generator=g)
        >>> result.q.shape, bool(result.success.any(-1).all())
        (torch.Size([5, 2, 7]), True)
    """
    with torch.no_grad(), _intra_op_threads(num_threads):
        link = default_link(robot) if link is None else link
        robot.link_index(link)  # a clear error for unknown links
        batch, position, rotmat = _check_target(robot, target, position_only)
        solver = _make_solver(method, max_iters=max_iters, early_stop=early_stop)
        make = partial(_problem, robot, link, tol_position=tol_position, tol_rotation=tol_rotation)
        if seeds is None:
            k, q0 = _check_num_seeds(num_seeds), None
        else:
            k, q0 = seeds.shape[-2], _check_seeds(robot, seeds, batch)
        if position.shape[0] == 0:
            return _reshape(_empty_result(make(position, rotmat, k), k), batch)
        restarts = seeds is None if restarts is None else restarts
        run = _Run(solver, make, position, rotmat, k, restarts, seed_pool, generator)
        return _reshape(run.given(q0) if q0 is not None else run.random(), batch)


@dataclass
class _Run:
    """The rounds of one ``solve_ik`` call (see :class:`SolverSettings` ``round_iters``)."""

    solver: IKSolver
    make: Callable
    position: Tensor
    rotmat: Tensor | None
    k: int
    restarts: bool
    seed_pool: int
    generator: torch.Generator | None

    @property
    def staged(self) -> bool:
        s = self.solver.settings
        return s.early_stop and s.round_iters > 0

    def random(self) -> IKResult:
        """Random seeds; with restarts and ``early_stop``, in rounds."""
        s, k = self.solver.settings, self.k
        problem = self.make(self.position, self.rotmat, k)
        seeder = _seeder(problem, k, self.seed_pool, self.solver, self.generator)
        q0 = seeder(*_first_attempt(len(problem), self.position.device))
        rounds = self.staged and self.restarts
        iters = s.round_iters if rounds else s.max_iters
        result = _run(self.solver, problem, q0, seeder if self.restarts else None, iters, 0, k)
        return self.retry(result, iters) if rounds else result

    def given(self, q0: Tensor) -> IKResult:
        """Given seeds ``(T * K, dof)``: lazily in rounds under ``early_stop``, then random
        retry rounds if restarts are allowed."""
        k = self.k
        if not self.staged:
            problem = self.make(self.position, self.rotmat, k)
            reseed = uniform_seeder(problem.robot, self.generator) if self.restarts else None
            return _run(self.solver, problem, q0, reseed, self.solver.settings.max_iters, 0, k)
        seeds = q0.view(-1, k, q0.shape[-1])
        result, used = _given_seeds_in_rounds(
            self.solver, self.make, self.position, self.rotmat, seeds
        )
        return self.retry(result, used) if self.restarts else result

    def retry(self, result: IKResult, used: int) -> IKResult:
        return _retry(
            result, self.make, self.position, self.rotmat, self.solver, self.seed_pool,
            self.generator, used,
        )  # fmt: skip


def _empty_result(problem: IKProblem, k: int) -> IKResult:
    q = problem.target_position.new_zeros(0, k, problem.robot.dof)
    zeros = q.new_zeros(0, k)
    tol_rot = math.inf if problem.position_only else problem.tol_rotation
    return IKResult(
        q, zeros.bool(), zeros, zeros, zeros.long(),
        problem.tol_position, tol_rot, problem.robot.continuous,
    )  # fmt: skip


@contextlib.contextmanager
def _intra_op_threads(n: int | None):
    """Run the block with ``n`` torch intra-op threads, then restore the previous number."""
    previous = torch.get_num_threads()
    if n is None or n == previous:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _check_num_seeds(num_seeds: int) -> int:
    if not isinstance(num_seeds, int) or isinstance(num_seeds, bool) or num_seeds < 1:
        raise ValueError(f"num_seeds must be a positive int, got {num_seeds!r}")
    return num_seeds


def _problem(robot, link, position, rotmat, k, tol_position, tol_rotation) -> IKProblem:
    """The rows of ``k`` slots for each of the targets ``position (T, 3)``, ``rotmat``."""
    group = torch.arange(position.shape[0], device=robot.device).repeat_interleave(k)
    rot = None if rotmat is None else rotmat[group]
    return IKProblem(robot, link, position[group], rot, group, tol_position, tol_rotation)


def _first_attempt(n_rows: int, device) -> tuple[Tensor, Tensor]:
    rows = torch.arange(n_rows, device=device)
    return rows, torch.zeros_like(rows)


def _seeder(problem: IKProblem, k: int, seed_pool: int, solver: IKSolver, generator) -> Seeder:
    """Random seeds for the ``k`` slots of each target of ``problem`` (see ``seed_pool``)."""
    robot = problem.robot
    if not seed_pool:
        return uniform_seeder(robot, generator)
    # the rows repeat each target k times: slot 0 rows give the targets
    position = problem.target_position[::k]
    rotmat = None if problem.target_rotmat is None else problem.target_rotmat[::k]
    w = solver.settings.rotation_weight
    return nearest_seeder(robot, problem.link, position, rotmat, k, seed_pool, w, generator)


def _run(solver, problem, q0, reseed, iters, used, k) -> IKResult:
    """One call of the solver loop, evaluated by FK; ``(T, k)`` slots."""
    q, iterations = solver.solve(problem, q0, reseed, iters)
    return _evaluate(problem, q, iterations + used, (len(problem) // k, k))


def _given_seeds_in_rounds(solver, make, position, rotmat, seeds: Tensor):
    """User seeds ``(T, K, dof)`` used lazily: round 0 refines the first ``initial_seeds``
    slots of every target, each later round the next ``retry_seeds`` slots of the targets still
    unsolved. Slots never run keep their (projected) seed, with ``iterations`` 0.

    Returns:
        The result and the iterations used.
    """
    s = solver.settings
    n_targets, k, _ = seeds.shape
    problem = make(position, rotmat, k)
    result = _evaluate(problem, problem.project(seeds.reshape(-1, seeds.shape[-1])),
                       torch.zeros(n_targets * k, dtype=torch.long), (n_targets, k))  # fmt: skip
    start, width, used = 0, s.initial_seeds, 0
    todo = torch.arange(n_targets, device=seeds.device)
    while start < k and used < s.max_iters and todo.numel():
        block = torch.arange(start, min(k, start + width), device=seeds.device)
        iters = min(s.round_iters, s.max_iters - used)
        rot = None if rotmat is None else rotmat[todo]
        part = make(position[todo], rot, block.numel())
        q0 = seeds[todo][:, block].reshape(-1, seeds.shape[-1])
        done = _run(solver, part, q0, None, iters, used, block.numel())
        result = _replace_slots(result, todo, block, done)
        todo = todo[~done.success.any(dim=-1)]
        start, width, used = start + block.numel(), s.retry_seeds, used + iters
    return result, used


def _retry(result, make, position, rotmat, solver, seed_pool, generator, used) -> IKResult:
    """Rounds after the first: targets without a success get ``retry_seeds`` fresh slots each
    for ``round_iters`` more iterations, until ``max_iters``; each keeps its best ``K`` slots.

    Few targets are left by then, and a batched iteration costs about as much for 10 rows as for
    200, so many parallel seeds finish the hard targets in fewer iterations than restarting
    their few slots one after another.
    """
    s = solver.settings
    k, r = result.q.shape[-2], s.retry_seeds
    while used < s.max_iters:
        todo = torch.nonzero(~result.success.any(dim=-1)).flatten()
        if todo.numel() == 0:
            break
        iters = min(s.round_iters, s.max_iters - used)
        rot = None if rotmat is None else rotmat[todo]
        problem = make(position[todo], rot, r)
        seeder = _seeder(problem, r, seed_pool, solver, generator)
        q0 = seeder(*_first_attempt(len(problem), position.device))
        retried = _run(solver, problem, q0, seeder, iters, used, r)
        result = _replace_rows(result, todo, _concat(_take_rows(result, todo), retried).top(k))
        used += iters
    return result


def _evaluate(problem: IKProblem, q: Tensor, iterations: Tensor, shape: tuple) -> IKResult:
    """Success and errors from forward kinematics of the final ``q (N, dof)``."""
    robot = problem.robot
    with torch.no_grad():
        pose = robot.forward_kinematics(q, problem.link)
        pos_err = (pose[:, :3, 3] - problem.target_position).norm(dim=-1)
        if problem.position_only:
            rot_err, tol_rot = torch.zeros_like(pos_err), math.inf
        else:
            rot_err = geodesic_distance(pose[:, :3, :3], problem.target_rotmat)
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


_FIELDS = ("q", "success", "position_error", "rotation_error", "iterations")


def _map(result: IKResult, fn) -> IKResult:
    return replace(result, **{f: fn(getattr(result, f)) for f in _FIELDS})


def _reshape(result: IKResult, batch: tuple) -> IKResult:
    """``(T, K, ...)`` fields to ``(*batch, K, ...)``."""
    k = result.q.shape[1]
    return _map(result, lambda x: x.reshape(*batch, k, *x.shape[2:]))


def _take_rows(result: IKResult, index: Tensor) -> IKResult:
    return _map(result, lambda x: x[index])


def _concat(a: IKResult, b: IKResult) -> IKResult:
    """Slots of ``a`` then of ``b``, per target."""
    return replace(a, **{f: torch.cat((getattr(a, f), getattr(b, f)), dim=1) for f in _FIELDS})


def _replace_rows(result: IKResult, index: Tensor, rows: IKResult) -> IKResult:
    def put(name: str) -> Tensor:
        value = getattr(result, name).clone()
        value[index] = getattr(rows, name)
        return value

    return replace(result, **{f: put(f) for f in _FIELDS})


def _replace_slots(result: IKResult, rows: Tensor, slots: Tensor, part: IKResult) -> IKResult:
    def put(name: str) -> Tensor:
        value = getattr(result, name).clone()
        value[rows[:, None], slots] = getattr(part, name)
        return value

    return replace(result, **{f: put(f) for f in _FIELDS})
