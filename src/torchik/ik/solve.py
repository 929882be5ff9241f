"""``solve_ik``: checks the inputs, builds the rows, runs a solver, re-checks with FK."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping

import torch
from torch import Tensor

from torchik.checks import intra_op_threads
from torchik.ik import captured, compiled, host
from torchik.ik.base import IKProblem, IKSolver
from torchik.ik.inputs import check_bounds, check_options, check_seeds, check_target
from torchik.ik.result import IKResult
from torchik.ik.rounds import Run, reshape_result
from torchik.robot.robot import Robot

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
    """The link IK places by default: :func:`torchik.description.default_end_link`."""
    from torchik.description.end_link import default_end_link

    return default_end_link(robot)


def _make_solver(method: str | IKSolver, **overrides) -> IKSolver:
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(method, IKSolver):
        return type(method)(method.settings, **overrides) if overrides else method
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"unknown IK method {method!r}; choose one of {list(METHODS)}")
    return _methods()[method](**overrides) if overrides else _default_solver(method)


@functools.cache
def _default_solver(method: str) -> IKSolver:
    """The solver ``method`` with its default settings, made once (a solver holds nothing but
    its frozen settings; making one checks every setting, 14 µs of a 0.4 ms solve)."""
    return _methods()[method]()


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
    num_threads: int | None = None,
    lower: Tensor | None = None,
    upper: Tensor | None = None,
) -> IKResult:
    """Numerical inverse kinematics for a batch of targets, several slots per target.

    Args:
        robot: the robot.
        target: ``(..., 4, 4)`` poses of ``link`` in the root frame, or with
            ``position_only=True`` ``(..., 3)`` positions (poses are accepted too).
        link: the link to place; ``None``: :func:`torchik.description.default_end_link` (the tip
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
        num_threads: torch intra-op threads during the solve, at most the machine's cores (the
            previous setting is restored after; it is process-wide while the solve runs).
            ``None`` (default) keeps torch's setting. The batched operations are small (a few
            thousand rows of 6x7 matrices): on a busy machine ``1`` can be much faster.
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
        TypeError: an argument of the wrong kind (a float ``max_iters``, an int tensor target;
            a dict of targets: several links at once are
            :func:`~torchik.ik.wholebody.solve_wholebody`'s).
        ValueError: malformed targets or seeds (shape, NaN/inf, non-rotations), an empty box,
            an unknown link or method, a setting out of range: tolerances must be > 0 and finite
            (``tol_rotation`` may be ``math.inf``: any orientation), ``max_iters >= 0`` (0: evaluate
            the seeds as given), ``1 <= num_seeds <= MAX_SEEDS``, ``0 <= seed_pool <=
            MAX_SEED_POOL``, ``1 <= num_threads <= cores``; a floating-base robot with a single
            target (its solvers step additively; :func:`~torchik.ik.wholebody.solve_wholebody`
            solves targets on a floating base, or fix the base with ``robot.chain`` or
            ``Robot.from_urdf`` without ``floating_base``). In a MuJoCo scene a link of the
            fixed tree beside the free bodies is solved (:meth:`Robot.scene_body`), the free
            bodies held where the file puts them; one on a free body is refused.

    Example:
        >>> import torchik
        >>> robot = torchik.load_robot("panda", dtype=torch.float64)
        >>> g = torch.Generator().manual_seed(0)
        >>> target = robot.forward_kinematics(robot.random_configuration(5, g), "panda_hand")
        >>> result = solve_ik(robot, target, generator=g)
        >>> result.q.shape, bool(result.success.any(-1).all())
        (torch.Size([5, 2, 7]), True)
    """
    if isinstance(target, Mapping):
        raise TypeError(
            "solve_ik places one link; several links at once: "
            "torchik.solve_wholebody(robot, {link: target, ...})"
        )
    with torch.no_grad(), intra_op_threads(num_threads):
        check_options(tol_position, tol_rotation, num_seeds, seed_pool, restarts, position_only)
        link = default_link(robot) if link is None else link
        robot.link_index(link)  # a clear error for unknown links
        if getattr(robot, "floating", False):
            body = _scene_body(robot, link)
            if body is None:
                _refuse_floating(robot, link)
            options = dict(position_only=position_only, num_seeds=num_seeds, method=method,
                           tol_position=tol_position, tol_rotation=tol_rotation,
                           max_iters=max_iters, generator=generator, restarts=restarts,
                           early_stop=early_stop, seed_pool=seed_pool)  # fmt: skip
            return _on_scene_body(robot, body, target, link, seeds, lower, upper, options)
        batch, position, rotmat = check_target(robot, target, position_only)
        solver = _make_solver(method, max_iters=max_iters, early_stop=early_stop)
        if seeds is None:
            k, q0 = num_seeds, None
        else:
            q0 = check_seeds(robot, seeds, batch)
            k = seeds.shape[-2]
        restarts = seeds is None if restarts is None else restarts
        bounds = check_bounds(robot, lower, upper, batch)
        run = Run(solver, robot, link, tol_position, tol_rotation, position, rotmat, k,
                  restarts, seed_pool, generator, bounds)  # fmt: skip
        if position.shape[0] == 0:
            return reshape_result(_empty_result(run.make(position, rotmat, k), k), batch)
        return reshape_result(_solve(run, q0), batch)


def _solve(run: Run, q0: Tensor | None) -> IKResult:
    """On the CPU's compiled rounds where :mod:`torchik.ik.host` sends a small solve on a GPU;
    else one program captured whole (:mod:`torchik.ik.captured`) where it serves; else given
    seeds ``q0`` or random ones in rounds."""
    cpu = _on_host(run, q0)
    if cpu is not None:
        return host.back(_solve(cpu, host.to_host(q0)), run.position.device)
    if captured.serves(run, q0):
        return captured.solve(run, q0)
    return run.random() if q0 is None else run.given(q0)


def _on_host(run: Run, q0: Tensor | None) -> Run | None:
    """``run`` on the CPU copy of its robot (:func:`torchik.ik.host.twin`), where
    :func:`torchik.ik.host.serves` a solve of its rows (at most :data:`~torchik.ik.host.HOST_ROWS`
    on CUDA), the solver's ``loop`` is ``"auto"`` and the CPU's compiled rounds take it
    (:mod:`torchik.ik.compiled`); else ``None``."""
    rows = run.position.shape[0] * run.k
    if run.solver.settings.loop != "auto":
        return None
    if not host.serves(run.robot, rows, host.HOST_ROWS, run.generator):
        return None
    twin = host.twin(run.robot)
    if not run.solver.compiled_round(twin, twin.lower[None]):  # before reading the device
        return None
    cpu = dataclasses.replace(
        run, robot=twin, position=run.position.cpu(),
        rotmat=host.to_host(run.rotmat), bounds=host.to_host(run.bounds),
    )  # fmt: skip
    return cpu if (compiled.serves(cpu) if q0 is None else compiled.serves_given(cpu)) else None


def _empty_result(problem: IKProblem, k: int) -> IKResult:
    q = problem.target.position.new_zeros(0, k, problem.robot.dof)
    zeros = q.new_zeros(0, k)
    tol_rot = math.inf if problem.position_only else problem.tol_rotation
    return IKResult(
        q, zeros.bool(), zeros, zeros, zeros.long(),
        problem.tol_position, tol_rot, problem.robot.continuous,
    )  # fmt: skip


def _scene_body(robot, link: str) -> tuple[Robot, Tensor] | None:
    """The fixed tree of a scene (:meth:`Robot.scene_body`) where ``link`` is on it (not on a
    free body), which ``solve_ik`` solves with the free bodies held where the file puts them;
    else ``None``."""
    if robot.base_of(link) is not None:
        return None
    try:
        return robot.scene_body(None)
    except ValueError:  # not a scene, or a joint that mimics one of a free body
        return None


def _on_scene_body(robot, body, target, link, seeds, lower, upper, options) -> IKResult:
    """``solve_ik`` of a link on a scene's fixed tree: the scene's checks, then the solve of
    that tree (``body``: :func:`_scene_body`), its ``q`` back in the scene's coordinates, the
    free bodies at :meth:`Robot.default_configuration` (where the file puts them)."""
    part, kept = body
    batch = check_target(robot, target, options["position_only"])[0]
    rows = target.reshape(-1, *target.shape[len(batch) :])
    if seeds is not None:
        checked = check_seeds(robot, seeds, batch)  # (T K, nq): refused before its shape is read
        seeds = checked.view(-1, seeds.shape[-2], robot.dof)[..., kept]
    bounds = check_bounds(robot, lower, upper, batch)
    lower, upper = (None, None) if bounds is None else (b[:, kept] for b in bounds)
    result = solve_ik(part, rows, link, seeds=seeds, lower=lower, upper=upper, **options)
    return reshape_result(result.in_scene(robot, kept, robot.default_configuration()), batch)


def _refuse_floating(robot, link: str) -> None:
    """solve_ik's one-line refusal of a robot with floating bases, naming what is accepted."""
    whole = f"solve_wholebody(robot, {{{link!r}: target}})"
    base = robot.base_of(link)
    if robot.scene and base is not None:  # a link of a free body
        raise ValueError(
            f"solve_ik does not place links of a free body ({link!r} moves with "
            f"{robot.base_link(base)!r} of {robot.name!r}); accepted: {whole}, or a link of "
            "the fixed tree beside the free bodies"
        )
    raise ValueError(
        f"solve_ik does not take floating-base robots ({robot.name!r} has nq={robot.nq}, "
        f"nv={robot.nv}); accepted: {whole}, or a fixed base, e.g. "
        f"robot.chain({robot.root!r}, {link!r})"
    )
