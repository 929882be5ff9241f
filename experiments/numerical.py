"""The numerical-IK table (protocol "Numerical IK" of the benchmarks): solvers on random poses.

Targets are FK poses of configurations uniform within the limits (seed ``seed``); every solver
gets the same random starts (seed ``start_seed``, ``retries`` per target, never the answer) and
may use them or seed itself. Each answer is judged here, not by the solver: FK of every returned
configuration (the robot's own float64 FK, or ``check``); a target is solved when some candidate
is within 1 mm and 1° with every joint within the limits, and "strict" asks 1e-5 m and 1e-5 rad.
Runtimes come from :func:`experiments.timing.time_call`.

Example:
    >>> import torch, torchik
    >>> from experiments import numerical_ik_table
    >>> robot = torchik.load_robot("snake2", dtype=torch.float64)
    >>> table = numerical_ik_table(robot, n_targets=8, position_only=True, min_run_time=0.01)
    >>> table.row("torchik lm")["success"]
    1.0
"""

from __future__ import annotations

import copy
import functools
import inspect
import itertools
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from experiments.table import Column, Table, fmt_pct, fmt_time
from experiments.timing import Timing, time_call
from torchik.geometry import geodesic_distance

if TYPE_CHECKING:
    from torchik.robot import Robot

__all__ = [
    "Solver",
    "check_answers",
    "errors",
    "many_solutions_table",
    "numerical_ik_table",
    "float64",
    "judge",
    "problem",
    "run_timed",
    "torchik_rows",
    "torchik_solver",
]

POS_TOL, ROT_TOL, STRICT_TOL = 1e-3, math.radians(1.0), 1e-5
LIMIT_SLACK = 1e-6
"""rad: solvers that store limits in float32 may sit ~5e-9 outside them."""
METHODS = ("lm", "dls", "jt", "gd")
"""torchik's solvers in the default table (``lbfgsb`` loops over targets in Python)."""

FK = Callable[[Tensor], Tensor]
"""Float64 FK ``(M, dof) -> (M, 4, 4)`` of the end link, in the robot's joint order."""


@dataclass(frozen=True)
class Solver:
    """A row of the table: ``run(targets, starts) -> q``.

    Attributes:
        run: ``targets (n, 4, 4)`` (``(n, 3)`` position-only) and ``starts (n, R, dof)`` in the
            robot's joint order -> ``q (n, K, dof)`` candidates (NaN where there is no answer).
        n_targets: run on the first ``n_targets`` only (None: all), e.g. for a slow solver.
        starts: the candidates per target it reports (None: ``R``).
        settings: a note for the settings column.
    """

    run: Callable[[Tensor, Tensor], Tensor]
    n_targets: int | None = None
    starts: int | str | None = None
    settings: str = ""


@dataclass
class Problem:
    """Targets and starts shared by every solver, and the FK that judges the answers."""

    robot: Robot  # float64
    link: str
    targets: Tensor  # (N, 4, 4) float64
    starts: Tensor  # (N, R, dof) float64
    fk: FK
    position_only: bool = False

    def solver_targets(self, n: int) -> Tensor:
        """The first ``n`` targets as a solver gets them: poses, or positions."""
        return self.targets[:n, :3, 3] if self.position_only else self.targets[:n]


def float64(robot: Robot) -> Robot:
    """The robot in float64 (a copy when it is not: ``Module.to`` works in place)."""
    return robot if robot.dtype == torch.float64 else copy.deepcopy(robot).to(torch.float64)


def problem(
    robot: Robot,
    link: str | None = None,
    n_targets: int = 1000,
    seed: int = 0,
    *,
    start_seed: int = 1,
    retries: int = 10,
    position_only: bool = False,
    check: FK | None = None,
) -> Problem:
    """Targets (FK of uniform configurations, ``seed``) and starts (uniform, ``start_seed``).

    ``check`` is the FK that makes the targets and judges the answers (default: the robot's own
    FK of ``link`` in float64).
    """
    from torchik.ik import default_link

    robot = float64(robot)
    link = link or default_link(robot)
    if check is None:
        check = lambda q: robot.forward_kinematics(q.to(robot.dtype), link)  # noqa: E731
    q = robot.random_configuration(n_targets, torch.Generator().manual_seed(seed))
    gen = torch.Generator().manual_seed(start_seed)
    starts = robot.random_configuration(n_targets * retries, gen)
    starts = starts.reshape(n_targets, retries, robot.dof)
    return Problem(robot, link, check(q), starts, check, position_only)


def errors(p: Problem, q: Tensor) -> dict[str, Tensor]:
    """Every candidate ``q (n, K, dof)`` for the first ``n`` targets, measured by ``p.fk``.

    Returns:
        ``(n, K)`` tensors: ``position`` (m) and ``rotation`` (rad, geodesic; zeros for
        position-only problems) errors (NaN where unanswered), ``answered`` (finite) and
        ``inside`` (every joint within the limits, slack :data:`LIMIT_SLACK`).
    """
    n, k, dof = q.shape
    flat = q.reshape(-1, dof).to(torch.float64)
    target = p.targets[:n].repeat_interleave(k, dim=0)
    answered = torch.isfinite(flat).all(dim=-1)
    T = torch.full((len(flat), 4, 4), math.nan, dtype=torch.float64)
    T[answered] = p.fk(flat[answered]).to(T)
    pos = (T[:, :3, 3] - target[:, :3, 3]).norm(dim=-1)
    rot = geodesic_distance(target[:, :3, :3], T[:, :3, :3])
    if p.position_only:
        rot = torch.zeros_like(rot)
    lower, upper = p.robot.lower - LIMIT_SLACK, p.robot.upper + LIMIT_SLACK
    inside = ((flat >= lower) & (flat <= upper)).all(dim=-1)
    out = {"position": pos, "rotation": rot, "answered": answered, "inside": inside}
    return {key: value.reshape(n, k) for key, value in out.items()}


def judge(p: Problem, q: Tensor, tol_position: float, tol_rotation: float) -> dict[str, Tensor]:
    """:func:`errors` plus ``pose``: ``(n, K)`` bool, answered and within both tolerances."""
    out = errors(p, q)
    out["pose"] = out["answered"] & (out["position"] < tol_position)
    out["pose"] &= out["rotation"] < tol_rotation
    return out


def check_answers(p: Problem, q: Tensor) -> dict[str, Any]:
    """Success rates of candidates ``q (n, K, dof)`` for the first ``n`` targets.

    Returns:
        ``success`` (1 mm, 1°, limits), ``success_strict`` (1e-5 m, 1e-5 rad, limits),
        ``success_ignoring_limits`` and ``answered`` (some finite candidate): fractions of the
        targets where some candidate passes.
    """
    loose, strict = judge(p, q, POS_TOL, ROT_TOL), judge(p, q, STRICT_TOL, STRICT_TOL)

    def per_target(ok: Tensor) -> float:
        return ok.any(dim=1).double().mean().item()

    return {
        "success": per_target(loose["pose"] & loose["inside"]),
        "success_strict": per_target(strict["pose"] & strict["inside"]),
        "success_ignoring_limits": per_target(loose["pose"]),
        "answered": per_target(loose["answered"]),
    }


def run_timed(fn: Callable[[], Any], min_run_time: float) -> tuple[Any, Timing, float]:
    """The answer of ``fn()`` (its last call), its :func:`time_call` timing, and the process's
    CPU seconds per call over every call made (warm-up included).

    ``fn`` must give the same answer every call (seed its generators inside it).
    """
    out: list[Any] = []
    cpu = time.process_time()
    timing = time_call(lambda: out.append(fn()), min_run_time=min_run_time)
    return out[-1], timing, (time.process_time() - cpu) / len(out)


def torchik_solver(
    robot: Robot,
    link: str | None = None,
    *,
    own_seeds: bool = True,
    seed: int = 1,
    position_only: bool = False,
    threads: int = 1,
    **options: Any,
) -> Solver:
    """A :func:`torchik.ik.solve_ik` row (in the robot's dtype).

    Args:
        robot: the robot the solver runs on (its dtype is the solver's).
        link: the end link (default: :func:`torchik.ik.default_link`).
        own_seeds: seed itself (``num_seeds`` and seeding at their defaults, generator ``seed``),
            as a user gets without passing seeds; False: the problem's starts as ``seeds``.
        seed: the generator's seed with ``own_seeds``.
        position_only: position targets.
        threads: ``solve_ik``'s ``num_threads`` (one in the table, as the anchors run).
        **options: for ``solve_ik`` (``method``, ``tol_position``, ...).
    """
    from torchik.ik import solve_ik

    def run(targets: Tensor, starts: Tensor) -> Tensor:
        given: dict[str, Any] = {}
        if own_seeds:
            given["generator"] = torch.Generator().manual_seed(seed)
        else:
            given["seeds"] = starts.to(robot.dtype)
        result = solve_ik(robot, targets.to(robot.dtype), link, position_only=position_only,
                          num_threads=threads, **given, **options)  # fmt: skip
        return result.q.detach()

    opts = ", ".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in options.items()
    )
    seeding = "its own seeds" if own_seeds else "the shared starts as seeds"
    settings = (
        f"{str(robot.dtype).removeprefix('torch.')}, {seeding}, {opts or 'default tolerances'}"
    )
    default = inspect.signature(solve_ik).parameters["num_seeds"].default
    return Solver(run, starts=options.get("num_seeds", default) if own_seeds else None,
                  settings=settings)  # fmt: skip


def _columns(position_only: bool) -> list[Column]:
    tol, strict = ("1 mm", "1e-5 m") if position_only else ("1 mm, 1°", "1e-5 m, 1e-5 rad")
    return [
        Column("targets", "targets"),
        Column("starts", "starts/target"),
        Column("success", f"success ({tol}, limits)", fmt_pct),
        Column("success_strict", f"success ({strict})", fmt_pct),
        Column("success_ignoring_limits", "success ignoring limits", fmt_pct),
        Column("wall_s", "wall time, all targets", fmt_time),
        Column("per_target_s", "per target", fmt_time),
        Column("reps", "timed runs"),
        Column("settings", "settings"),
    ]


def solver_row(table: Table, p: Problem, name: str, solver: Solver, min_run_time: float) -> None:
    """Run one solver (answers from its last timed call), judge and time it, add its row."""
    n = min(solver.n_targets or len(p.targets), len(p.targets))
    targets, starts = p.solver_targets(n), p.starts[:n]
    try:
        q, timing, _ = run_timed(lambda: solver.run(targets, starts), min_run_time)
        stats = check_answers(p, torch.as_tensor(q).reshape(n, -1, p.robot.dof))
    except Exception as exc:  # a row reports its failure; the table goes on
        kind = isinstance(exc, AttributeError | NotImplementedError | TypeError)
        text = (str(exc).strip().splitlines() or [""])[0][:120]
        table.add(name, f"{'not available yet' if kind else 'failed'}: {type(exc).__name__}: "
                  f"{text}", targets=n)  # fmt: skip
        return
    table.add(
        name, targets=n, starts=solver.starts or starts.shape[1], settings=solver.settings,
        wall_s=timing.median, per_target_s=timing.median / n, reps=timing.runs, **stats,
    )  # fmt: skip


def numerical_ik_table(
    robot: Robot,
    solvers: Mapping[str, Solver | Callable[[Tensor, Tensor], Tensor] | str] | None = None,
    link: str | None = None,
    n_targets: int = 1000,
    seed: int = 0,
    *,
    start_seed: int = 1,
    retries: int = 10,
    position_only: bool = False,
    check: FK | None = None,
    references: tuple[str, ...] = (),
    min_run_time: float = 0.2,
    title: str | None = None,
) -> Table:
    """Success rates and runtimes of numerical IK solvers on one robot.

    Args:
        robot: the robot (targets and starts are made in float64).
        solvers: name -> :class:`Solver`, a plain ``run(targets, starts) -> q`` callable, or a
            string (a row that only reports it, e.g. "missing: ..."). Default: torchik's
            solvers in float64 with their own seeding.
        link: the end link (default: :func:`torchik.ik.default_link`).
        n_targets: targets (FK poses of configurations uniform within the limits).
        seed: seed of the target configurations.
        start_seed: seed of the shared starts.
        retries: starts per target.
        position_only: position targets; the rotation is not judged.
        check: float64 FK ``(M, dof) -> (M, 4, 4)`` that makes the targets and judges answers
            (default: the robot's own).
        references: methods the runtime ratios are taken against.
        min_run_time: seconds of measurement per solver (:func:`time_call`).
        title: the table's title.

    Returns:
        A :class:`~experiments.table.Table`, one row per solver: ``success``,
        ``success_strict``, ``success_ignoring_limits``, ``answered``, ``wall_s`` (all its
        targets), ``per_target_s``.
    """
    p = problem(robot, link, n_targets, seed, start_seed=start_seed, retries=retries,
                position_only=position_only, check=check)  # fmt: skip
    if solvers is None:
        solvers = {
            f"torchik {m}": torchik_solver(p.robot, p.link, method=m, position_only=position_only)
            for m in METHODS
        }
    kind = "position only" if position_only else "full pose"
    table = Table(title or f"{robot.name}, {kind}", _columns(position_only),
                  time_key="per_target_s", references=references)  # fmt: skip
    for name, solver in solvers.items():
        if isinstance(solver, str):
            table.add(name, status=solver)
            continue
        solver_row(table, p, name, solver if isinstance(solver, Solver) else Solver(solver),
                   min_run_time)  # fmt: skip
    return table


MANY_COLUMNS = [
    Column("distinct", "distinct solutions (> 0.1 rad apart, checked)"),
    Column("min_gap", "closest pair (rad)", lambda v: f"{v:.3f}"),
    Column("wall_s", "wall time", fmt_time),
    Column("per_solution_s", "per solution", fmt_time),
    Column("settings", "settings"),
]


def many_solutions_table(
    p: Problem,
    slots: int = 512,
    max_iters: int = 40,
    min_distance: float = 0.1,
    min_run_time: float = 0.2,
) -> Table:
    """Many solutions of one pose (the problem's first target): ``solve_ik`` with ``slots``
    random slots and no early stop, then ``IKResult.distinct``; each kept one re-checked."""
    from torchik.ik import solve_ik

    robot, target, link = p.robot, p.targets[0], p.link

    def run() -> Tensor:
        gen = torch.Generator().manual_seed(1)
        result = solve_ik(robot, target, link, num_seeds=slots, early_stop=False,
                          max_iters=max_iters, generator=gen, num_threads=1)  # fmt: skip
        q, keep = result.distinct(min_distance)
        return q[keep]

    q, timing, _ = run_timed(run, min_run_time)
    checked = judge(p, q[None], POS_TOL, ROT_TOL)
    ok = (checked["pose"] & checked["inside"])[0]
    gaps = torch.cdist(q, q) + torch.eye(len(q), dtype=q.dtype) * 1e9
    table = Table(f"{robot.name} ({link}): many solutions of one pose", MANY_COLUMNS)
    table.add(
        "torchik (LM)", distinct=int(ok.sum()), wall_s=timing.median,
        min_gap=gaps.min().item() if len(q) > 1 else math.nan,
        per_solution_s=timing.median / max(int(ok.sum()), 1),
        settings=f"float64, {slots} random slots, max_iters {max_iters}, "
        f"distinct(min_distance={min_distance:g})",
    )  # fmt: skip
    table.notes.append(
        f"goal: 100 solutions of one pose more than {min_distance:g} rad apart (joint space); "
        "each counted solution re-checked by FK (1 mm, 1°, limits); wall time includes the "
        "selection of distinct solutions (torch.utils.benchmark, after a warm-up)"
    )
    return table


BATCH_COLUMNS = [
    Column("poses", "poses"),
    Column("loop", "loop"),
    Column("threads", "threads"),
    Column("success", "success (1 mm, 1°, limits)", fmt_pct),
    Column("wall_s", "wall time", fmt_time),
    Column("per_pose_s", "per pose", fmt_time),
]

BATCH_SIZES = (1, 10, 1000, 10000)
"""Poses per solve in :func:`batch_sizes_table`."""


def batch_sizes_table(
    p: Problem, robot: Robot, sizes: tuple[int, ...] = BATCH_SIZES, min_run_time: float = 0.2
) -> Table:
    """``solve_ik``'s defaults (own seeding) on ``robot`` (its dtype: float32 in the benchmark)
    for the problem's first ``n`` targets, each ``n`` of ``sizes``: the compiled CPU loop
    against the host loop (PyTorch operations), on one thread and on every core. The answers
    are judged by the problem's FK (:func:`check_answers`)."""
    from torchik.ik import LevenbergMarquardt
    from torchik.kinematics import native

    table = Table(f"{robot.name} ({p.link}): batch sizes, loops and threads", BATCH_COLUMNS)
    for n in sizes:
        targets = p.targets[:n].to(robot.dtype)
        for loop, threads in itertools.product(("auto", "host"), sorted({1, os.cpu_count() or 1})):
            solver = torchik_solver(robot, p.link, threads=threads,
                                    method=LevenbergMarquardt(loop=loop))  # fmt: skip
            run = functools.partial(solver.run, targets, p.starts[:n])  # (own seeds: unused)
            q, timing, _ = run_timed(run, min_run_time)
            label = "host" if loop == "host" or not native.available() else "compiled"
            table.add(f"{n} poses, {label}, {threads} thread(s)", poses=n, loop=label,
                      threads=threads, success=check_answers(p, q)["success"],
                      wall_s=timing.median, per_pose_s=timing.median / n)  # fmt: skip
            if threads == 1:  # the same poses from a previous answer nearby
                _warm_row(table, p, robot, targets, q[:, 0], loop, label, min_run_time)
    table.notes.append(
        f"the default LM with its own seeding (two slots per pose, retries), {robot.dtype}; "
        "'compiled': loop='auto', which takes the CPU's compiled loop "
        "(torchik.kinematics.native, Numba); 'host': loop='host', PyTorch operations; "
        "threads: solve_ik(num_threads=...); wall time by torch.utils.benchmark after a "
        "warm-up (the compiled kernel loaded)"
    )
    table.notes.append(
        f"warm start: one seed per pose, the row's own answer moved by {WARM_START_RAD:g} rad "
        "per joint (normal noise, generator seed 2, clamped into the limits), the call of a "
        "control loop or of path following (solve_ik(seeds=q_prev[:, None]), no restarts)"
    )
    return table


WARM_START_RAD = 0.05
"""How far (rad, standard deviation per joint) a warm start lies from an answer, in
:func:`batch_sizes_table` and the GPU probe's warm rows (:func:`warm_starts`)."""


def warm_starts(robot: Robot, q: Tensor, rad: float, generator: torch.Generator) -> Tensor:
    """``q (n, dof)`` moved by normal noise of ``rad`` per joint (drawn on the CPU by
    ``generator``), clamped into the limits: the previous answers a warm start starts from."""
    noise = rad * torch.randn(q.shape, generator=generator, dtype=q.dtype).to(q.device)
    return torch.minimum(torch.maximum(q + noise, robot.lower), robot.upper)


def _warm_row(table: Table, p: Problem, robot: Robot, targets: Tensor, answers: Tensor,
              loop: str, label: str, min_run_time: float) -> None:  # fmt: skip
    """A row of ``solve_ik`` from seeds :data:`WARM_START_RAD` away from ``answers (n, dof)``
    on one thread."""
    from torchik.ik import LevenbergMarquardt

    seeds = warm_starts(robot, answers, WARM_START_RAD, torch.Generator().manual_seed(2))
    solver = torchik_solver(robot, p.link, own_seeds=False, threads=1,
                            method=LevenbergMarquardt(loop=loop))  # fmt: skip
    n = targets.shape[0]
    q, timing, _ = run_timed(functools.partial(solver.run, targets, seeds[:, None]), min_run_time)
    table.add(f"{n} poses, warm start, {label}, 1 thread(s)", poses=n, loop=f"{label}, warm",
              threads=1, success=check_answers(p, q)["success"], wall_s=timing.median,
              per_pose_s=timing.median / n)  # fmt: skip


LBFGSB_TARGETS = 50
"""Targets of the L-BFGS-B row (a slow solver)."""


def torchik_rows(name: str, tip: str, position_only: bool) -> dict[str, Solver]:
    """torchik's rows of the numerical-IK table of a bundled robot.

    The shared starts (float32, and float64 at 1e-5), its own seeding (the default LM, also at
    1e-5 in float64, and in float32 on the host loop: the default's PyTorch operations where it
    does not compile its loop), and each other method (DLS, Jacobian transpose, gradient
    descent, L-BFGS-B on :data:`LBFGSB_TARGETS` targets) in float64.

    Args:
        name: a bundled robot (``torchik.load_robot``).
        tip: the link.
        position_only: position targets.

    Returns:
        Row name -> :class:`Solver`.
    """
    from torchik.ik import LevenbergMarquardt
    from torchik.robot import load_robot

    r32, r64 = (load_robot(name, dtype=d) for d in (torch.float32, torch.float64))
    strict: dict[str, Any] = dict(tol_position=STRICT_TOL, tol_rotation=STRICT_TOL)
    strict["position_only"] = plain = position_only
    own = "torchik (own seeding)"
    rows = {
        "torchik": torchik_solver(r32, tip, own_seeds=False, position_only=plain),
        "torchik (float64, tol 1e-5)": torchik_solver(r64, tip, own_seeds=False, **strict),
        own: torchik_solver(r32, tip, position_only=plain),
        f"{own[:-1]}, float64, tol 1e-5)": torchik_solver(r64, tip, **strict),
    }
    host = torchik_solver(r32, tip, position_only=plain, method=LevenbergMarquardt(loop="host"))
    settings = "float32, its own seeds, loop='host' (PyTorch operations)"
    rows[f"{own[:-1]}, host loop)"] = replace(host, settings=settings)
    for method in ("dls", "jt", "gd", "lbfgsb"):
        solver = torchik_solver(r64, tip, method=method, position_only=plain)
        n = LBFGSB_TARGETS if method == "lbfgsb" else None
        row = f"torchik {method} (own seeding, float64)"
        rows[row] = Solver(solver.run, n, solver.starts, solver.settings)
    return rows


NOTES = [
    "Success is decided here, not by the solvers: FK of each returned configuration is "
    "recomputed in float64; a target is solved when some returned candidate has position error "
    "< 1 mm, geodesic rotation error < 1° and every joint within limits (slack 1e-6 rad for "
    "solvers that store limits in float32). The strict column asks 1e-5 m and 1e-5 rad. 'success "
    "ignoring limits' drops the limit test (a gap to 'success' means answers outside limits). "
    "Position-only tables ignore rotation.",
    "",
    "Wall time covers all targets of the row (the solver's set-up included): "
    "`torch.utils.benchmark` (`experiments.timing.time_call`: a warm-up block, then blocks until "
    "--min-run-time seconds are measured; median over the blocks, 'timed runs' = blocks); the "
    "answers judged are those of its last call. Ratios compare per-target time (> 1: faster "
    "than the reference). IKPy and L-BFGS-B run a subset of the targets (their rows say how many).",
]
"""How the table judges and times (the results' intro after the anchors' paragraph)."""
