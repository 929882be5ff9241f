"""``solve_ik``: checks the inputs, builds the rows, runs a solver, re-checks with FK."""

from __future__ import annotations

import contextlib
import math
from functools import partial

import torch
from torch import Tensor

from torchik.checks import check_bool, check_float, check_int
from torchik.ik.base import IKProblem, IKSolver
from torchik.ik.result import IKResult
from torchik.ik.rounds import Run, make_problem, reshape_result
from torchik.robot import Robot

__all__ = ["MAX_SEEDS", "MAX_SEED_POOL", "METHODS", "default_link", "solve_ik"]

MAX_SEEDS = 1 << 16
"""The most random seeds (slots) per target ``solve_ik`` accepts."""

MAX_SEED_POOL = 1 << 20
"""The largest ``seed_pool`` ``solve_ik`` accepts."""


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
    """The link IK places by default: :func:`torchik.robots.default_end_link` (the one rule)."""
    from torchik.robots import default_end_link

    return default_end_link(robot)


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
    if not isinstance(seeds, Tensor) or not seeds.is_floating_point():
        kind = seeds.dtype if isinstance(seeds, Tensor) else type(seeds).__name__
        raise TypeError(f"seeds must be a floating-point torch.Tensor, got {kind}")
    if seeds.dim() < 2 or seeds.shape[-1] != robot.dof:
        want = f"(..., K, {robot.dof}) or (K, {robot.dof})"
        raise ValueError(f"seeds must have shape {want}, got {tuple(seeds.shape)}")
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
    lower: Tensor | None = None,
    upper: Tensor | None = None,
) -> IKResult:
    """Numerical inverse kinematics for a batch of targets, several slots per target.

    Args:
        robot: the robot.
        target: ``(..., 4, 4)`` poses of ``link`` in the root frame, or with
            ``position_only=True`` ``(..., 3)`` positions (poses are accepted too).
        link: the link to place; ``None``: :func:`torchik.robots.default_end_link` (the tip
            of a bundled robot, else the deepest leaf of the longest moving chain).
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
        lower: ``(..., dof)`` lower corner of a box per target, broadcast against the targets'
            batch shape (e.g. ``q_prev - r`` to stay within ``r`` of a previous solution);
            ``None``: the joint limits. Every slot of the target stays in the box intersected
            with the joint limits: seeds are projected into it, restarts drawn uniformly in it.
            A continuous joint's box may lie anywhere on the real line (see
            :meth:`JointLimits.within`); its result is still wrapped to (-π, π].
        upper: ``(..., dof)`` upper corner, likewise.

    Returns:
        An :class:`IKResult` with ``q (..., K, dof)``. Unreachable targets give
        ``success=False`` with the best effort, not an exception.

    Raises:
        TypeError: an argument of the wrong kind (a float ``max_iters``, an int tensor target).
        ValueError: malformed targets or seeds (shape, NaN/inf, non-rotations), an empty box,
            an unknown link or method, a setting out of range: tolerances must be > 0 and
            finite (``tol_rotation`` may be ``math.inf``: any orientation), ``max_iters >= 0``
            (0: evaluate the seeds as given), ``1 <= num_seeds <= MAX_SEEDS``,
            ``0 <= seed_pool <= MAX_SEED_POOL``, ``num_threads >= 1``; a floating-base robot
            (its solvers step additively; fix the base with ``robot.chain`` or
            ``Robot.from_urdf`` without ``floating_base``).

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
        _check_options(tol_position, tol_rotation, num_seeds, seed_pool, restarts, position_only)
        link = default_link(robot) if link is None else link
        robot.link_index(link)  # a clear error for unknown links
        if getattr(robot, "floating", False):
            raise ValueError(
                f"solve_ik does not take floating-base robots ({robot.name!r} has nq="
                f"{robot.nq}, nv={robot.nv}); accepted: a fixed base, e.g. "
                f"robot.chain({robot.root!r}, {link!r})"
            )
        batch, position, rotmat = _check_target(robot, target, position_only)
        solver = _make_solver(method, max_iters=max_iters, early_stop=early_stop)
        make = partial(
            make_problem, robot, link, tol_position=tol_position, tol_rotation=tol_rotation
        )
        if seeds is None:
            k, q0 = num_seeds, None
        else:
            q0 = _check_seeds(robot, seeds, batch)
            k = seeds.shape[-2]
        if position.shape[0] == 0:
            return reshape_result(_empty_result(make(position, rotmat, k), k), batch)
        restarts = seeds is None if restarts is None else restarts
        bounds = _check_bounds(robot, lower, upper, batch)
        run = Run(solver, make, position, rotmat, k, restarts, seed_pool, generator, bounds)
        return reshape_result(run.given(q0) if q0 is not None else run.random(), batch)


def _check_bounds(robot: Robot, lower, upper, batch: torch.Size):
    """``(lower, upper)``, each ``(T, dof)``, or ``None`` without a box."""
    if lower is None and upper is None:
        return None
    corners = []
    for name, value, default in (("lower", lower, robot.lower), ("upper", upper, robot.upper)):
        value = default if value is None else torch.as_tensor(value)
        try:
            value = value.to(robot.device, robot.dtype).expand(*batch, robot.dof)
        except RuntimeError as err:
            want = f"({', '.join(map(str, (*batch, robot.dof)))})"
            raise ValueError(f"{name} must broadcast to {want}, got {tuple(value.shape)}") from err
        corners.append(value.reshape(-1, robot.dof))
    return corners[0], corners[1]


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
    if n is not None:
        check_int("num_threads", n, 1)
    previous = torch.get_num_threads()
    if n is None or n == previous:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _check_options(tol_position, tol_rotation, num_seeds, seed_pool, restarts, position_only):
    """The scalar settings of :func:`solve_ik`, one line per refusal (``max_iters`` and
    ``early_stop`` are checked by the solver's settings, ``num_threads`` on entry)."""
    check_float("tol_position", tol_position, positive=True)
    if not (isinstance(tol_rotation, float) and tol_rotation == math.inf):
        check_float("tol_rotation", tol_rotation, positive=True)
    check_int("num_seeds", num_seeds, 1, MAX_SEEDS)
    check_int("seed_pool", seed_pool, 0, MAX_SEED_POOL)
    if restarts is not None:
        check_bool("restarts", restarts)
    check_bool("position_only", position_only)
