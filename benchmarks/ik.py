"""Numerical IK benchmark: protocol "Numerical IK" of shared/BENCHMARKS.md.

Panda (``panda_hand``) and UR5 (``ee_link``, the Neural IK paper's limits). 1000 targets = FK
poses of configurations uniform within limits (seed 0); every solver starts from random
configurations (seed 1), never from the answer. Each answer is checked here, uniformly, by
recomputing FK in float64 (Pinocchio, or pytorch_kinematics if Pinocchio is missing).
Anchors: TRAC-IK (pytracik), pytorch_kinematics PseudoInverseIK, IKPy. torchik rows run as soon
as ``torchik.solve_ik`` exists.

    python benchmarks/ik.py                        # full pose -> benchmarks/results/ik.*
    python benchmarks/ik.py --position-only        # also the position-only tables (slower)
    python benchmarks/ik.py --targets 100 --out /tmp/ik   # a quick look elsewhere
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import math
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from common import (
    ChainSpec,
    Column,
    QuietGate,
    Report,
    Table,
    add_common_args,
    describe,
    fixture_urdf,
    fmt_pct,
    fmt_time,
    log,
    quiet,
    read_chain,
    torchik_robot,
    try_import,
    uniform_configs,
    write_urdf_variant,
)

N_TARGETS, IKPY_TARGETS, RETRIES = 1000, 200, 10
POS_TOL, ROT_TOL, STRICT_TOL = 1e-3, math.radians(1.0), 1e-5
LIMIT_SLACK = 1e-6  # rad: solvers that store limits in float32 may sit ~5e-9 outside them
TRACIK_TIMEOUT, TRACIK_EPS = 0.005, 1e-5
REPEAT_BELOW_S = 20.0  # a solver run faster than this is timed 3 times (median reported)
PK, TRACIK, IKPY, TORCHIK = "pytorch_kinematics", "TRAC-IK", "IKPy", "torchik"
UR5_JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint")
UR5_JOINTS += ("wrist_1_joint", "wrist_2_joint", "wrist_3_joint")


@dataclass(frozen=True)
class RobotCase:
    name: str  # torchik.load_robot name
    urdf: str  # fixture file name
    tip: str
    limits: dict[str, tuple[float, float]] | None = None  # protocol limits overriding the URDF


ROBOTS = {
    "panda": RobotCase("panda", "panda.urdf", "panda_hand"),
    "ur5": RobotCase(
        "ur5",
        "ur5_robot.urdf",
        "ee_link",
        {j: (-2.5, 2.5) if j == "elbow_joint" else (-math.pi, math.pi) for j in UR5_JOINTS},
    ),
}


@dataclass
class Problem:
    """One robot's targets and starts, shared by every solver."""

    case: RobotCase
    spec: ChainSpec  # read from the temporary URDF, so its limits are the protocol's
    targets: np.ndarray  # (N, 4, 4) float64
    starts: np.ndarray  # (N, RETRIES, dof) float64, each target its own starts
    position_only: bool = False


@dataclass
class Solver:
    name: str
    run: Callable[[Problem, int], np.ndarray]  # (problem, n) -> q (n, K, dof)
    n_targets: int = N_TARGETS
    starts: int = RETRIES
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------ checking
def pose_errors(T: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position error (m) and geodesic rotation error (rad) between ``(..., 4, 4)`` poses."""
    pos = np.linalg.norm(T[..., :3, 3] - target[..., :3, 3], axis=-1)
    R = np.swapaxes(target[..., :3, :3], -1, -2) @ T[..., :3, :3]
    # atan2(|sin|, cos) stays accurate near 0, where arccos((trace - 1) / 2) loses digits
    s = np.stack(
        [R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]]
    )
    cos = (np.trace(R, axis1=-2, axis2=-1) - 1) / 2
    return pos, np.arctan2(np.linalg.norm(s, axis=0) / 2, cos)


def make_fk(urdf: Path, spec: ChainSpec) -> tuple[Callable[[np.ndarray], np.ndarray], str]:
    """A float64 FK ``(M, dof) -> (M, 4, 4)`` from Pinocchio, else from pytorch_kinematics."""
    pin, reason = try_import("pinocchio")
    if pin is not None:
        with quiet():
            model = pin.buildModelFromUrdf(str(urdf))
        data, frame = model.createData(), model.getFrameId(spec.tip)
        cols = [model.joints[model.getJointId(n)].idx_q for n in spec.joint_names]

        def pin_fk(q: np.ndarray) -> np.ndarray:
            full = np.tile(pin.neutral(model), (len(q), 1))
            full[:, cols] = q
            out = np.empty((len(q), 4, 4))
            for i, qi in enumerate(full):
                pin.forwardKinematics(model, data, qi)
                out[i] = pin.updateFramePlacement(model, data, frame).homogeneous
            return out

        return pin_fk, f"Pinocchio {pin.__version__} (float64)"
    pk, pk_reason = try_import("pytorch_kinematics")
    if pk is None:
        raise RuntimeError(
            f"no FK to check answers: pinocchio {reason}; pytorch_kinematics {pk_reason}"
        )
    with quiet():
        chain = pk.build_serial_chain_from_urdf(urdf.read_text(), spec.tip).to(dtype=torch.float64)
    return (
        lambda q: chain.forward_kinematics(torch.from_numpy(q)).get_matrix().numpy(),
        "pytorch_kinematics (float64 FK; URDF origins parsed in float32)",
    )


def evaluate(fk: Callable, problem: Problem, q: np.ndarray) -> dict[str, float]:
    """Check every returned candidate the same way; a target counts if any candidate passes."""
    n, k, dof = q.shape
    flat, target = q.reshape(-1, dof), np.repeat(problem.targets[:n], k, axis=0)
    answered = np.isfinite(flat).all(axis=-1)
    T = np.full((len(flat), 4, 4), np.nan)
    T[answered] = fk(flat[answered])
    pos, rot = pose_errors(T, target)
    if problem.position_only:
        rot = np.zeros_like(rot)
    spec = problem.spec
    inside = ((flat >= spec.lower - LIMIT_SLACK) & (flat <= spec.upper + LIMIT_SLACK)).all(axis=-1)
    pose_ok = answered & (pos < POS_TOL) & (rot < ROT_TOL)
    strict = answered & inside & (pos < STRICT_TOL) & (rot < STRICT_TOL)
    per_target = lambda ok: ok.reshape(n, k).any(axis=1).mean()  # noqa: E731
    return {
        "success": per_target(pose_ok & inside),
        "success_strict": per_target(strict),
        "success_ignoring_limits": per_target(pose_ok),
        "answered": per_target(answered),
    }


# ------------------------------------------------------------------------------- solvers
def tracik_solver() -> Solver | str:
    pytracik, reason = try_import("pytracik")
    transform, reason2 = try_import("scipy.spatial.transform")
    if pytracik is None or transform is None:
        return f"missing: {reason or reason2}"

    def run(problem: Problem, n: int) -> np.ndarray:
        spec = problem.spec
        with quiet():
            solver = pytracik.TRAC_IK(
                spec.root,
                spec.tip,
                spec.urdf.read_text(),
                TRACIK_TIMEOUT,
                TRACIK_EPS,
                pytracik.SolveType.Speed,
            )
        if not np.allclose(pytracik.get_joint_lower_bounds(solver), spec.lower, atol=1e-6):
            raise RuntimeError("TRAC-IK read other joint limits than the URDF's")
        quat = transform.Rotation.from_matrix(problem.targets[:n, :3, :3]).as_quat()  # x y z w
        pos, out = problem.targets[:n, :3, 3], np.full((n, 1, spec.dof), np.nan)
        for i in range(n):
            r = pytracik.ik(solver, problem.starts[i, 0], *pos[i], *quat[i])
            if r[0] > 0:
                out[i, 0] = r[1:]
        return out

    return Solver(
        TRACIK,
        run,
        starts=1,
        notes=[f"timeout {TRACIK_TIMEOUT * 1e3:g} ms, eps {TRACIK_EPS:g}, Speed"],
    )


def pk_solver(name: str, dtype: torch.dtype, **options) -> Solver | str:
    pk, reason = try_import("pytorch_kinematics")
    if pk is None:
        return f"missing: {reason}"

    def run(problem: Problem, n: int) -> np.ndarray:
        spec = problem.spec
        with quiet():
            chain = pk.build_serial_chain_from_urdf(spec.urdf.read_text(), spec.tip).to(dtype=dtype)
        if tuple(chain.get_joint_parameter_names()) != spec.joint_names:
            raise RuntimeError("pytorch_kinematics joint order differs from the URDF's")
        limits = torch.tensor(np.stack([spec.lower, spec.upper], axis=1), dtype=dtype)
        ik = pk.PseudoInverseIK(chain, num_retries=RETRIES, joint_limits=limits, **options)
        ik.initial_config = torch.tensor(problem.starts[:n], dtype=dtype)  # (n, RETRIES, dof)
        target = pk.Transform3d(matrix=torch.tensor(problem.targets[:n], dtype=dtype))
        return ik.solve(target).solutions.double().numpy()

    opts = (
        ", ".join(f"{k}={v:g}" for k, v in options.items())
        or "default tolerances (1e-3 m, 1e-2 rad)"
    )
    return Solver(
        name, run, notes=[f"{str(dtype).removeprefix('torch.')}, {RETRIES} retries, {opts}"]
    )


def ikpy_solver(n_targets: int) -> Solver | str:
    ikpy_chain, reason = try_import("ikpy.chain")
    if ikpy_chain is None:
        return f"missing: {reason}"

    def run(problem: Problem, n: int) -> np.ndarray:
        chain, active = ikpy_chain_for(ikpy_chain.Chain, problem.spec)
        mode = None if problem.position_only else "all"
        out = np.full((n, 1, problem.spec.dof), np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(n):
                init = np.zeros(len(chain.links))
                init[active] = problem.starts[i, 0]
                sol = chain.inverse_kinematics_frame(
                    problem.targets[i], initial_position=init, orientation_mode=mode
                )
                out[i, 0] = sol[active]
        return out

    return Solver(
        IKPY, run, n_targets=n_targets, starts=1, notes=["one start per target, least_squares"]
    )


def ikpy_chain_for(chain_cls: type, spec: ChainSpec) -> tuple[object, list[int]]:
    """IKPy chain following the URDF path to the tip exactly (IKPy keeps going past it)."""
    with quiet(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = chain_cls.from_urdf_file(str(spec.urdf), base_elements=list(spec.path))
        names = [link.name for link in full.links]
        links = full.links[: names.index(spec.path[-2]) + 1]  # up to the joint into the tip
        mask = [link.joint_type != "fixed" for link in links]
        chain = chain_cls(links, active_links_mask=mask)
    active = [i for i, m in enumerate(mask) if m]
    if tuple(links[i].name for i in active) != spec.joint_names:
        raise RuntimeError("IKPy joint order differs from the URDF's")
    return chain, active


def torchik_api() -> tuple[Any, Callable]:
    """``torchik`` and its ``solve_ik`` (from ``torchik.ik`` until the top level exports it)."""
    import torchik

    solve_ik = getattr(torchik, "solve_ik", None)
    return torchik, solve_ik or importlib.import_module("torchik.ik").solve_ik


def torchik_solver(
    name: str, dtype: torch.dtype, own_seeds: bool = False, n_targets: int = N_TARGETS, **options
) -> Solver | str:
    """torchik rows against the promised ``solve_ik`` API (not available until it exists).

    By default torchik gets the same starts as pytorch_kinematics (`seeds`, ``(n, 10, dof)``);
    with `own_seeds` it seeds itself (``num_seeds`` and seeding at their defaults, a fixed
    generator), which is what a user gets without passing seeds.
    """
    try:
        torchik, solve_ik = torchik_api()
        default_k = inspect.signature(solve_ik).parameters["num_seeds"].default
    except Exception as exc:  # the library is being written: report, never crash
        return f"not available yet: {describe(exc)}"

    def run(problem: Problem, n: int) -> np.ndarray:
        spec = problem.spec
        robot = torchik_robot(torchik, problem.case.name, dtype)
        cols = [spec.joint_names.index(j) for j in robot.joint_names]
        limits = np.stack([robot.lower.double().numpy(), robot.upper.double().numpy()])
        if not np.allclose(limits, np.stack([spec.lower[cols], spec.upper[cols]]), atol=1e-6):
            raise RuntimeError(f"torchik's {problem.case.name} limits differ from the protocol's")
        target = torch.tensor(problem.targets[:n], dtype=dtype)
        if problem.position_only:
            target = target[..., :3, 3]
        if own_seeds:
            starts = dict(generator=torch.Generator().manual_seed(1))
        else:  # (n, RETRIES, dof) in torchik's joint order
            starts = dict(seeds=torch.tensor(problem.starts[:n][..., cols], dtype=dtype))
        result = solve_ik(
            robot, target, spec.tip, position_only=problem.position_only, **starts, **options
        )
        q_robot = result.q.detach().double().numpy().reshape(n, -1, spec.dof)
        out = np.empty_like(q_robot)
        out[..., cols] = q_robot  # back to the URDF's joint order
        return out

    opts = ", ".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in options.items()
    )
    seeding = "its own seeds" if own_seeds else f"{RETRIES} seeds as pytorch_kinematics"
    note = f"{str(dtype).removeprefix('torch.')}, {seeding}, {opts or 'default tolerances'}"
    starts = default_k if own_seeds else RETRIES
    return Solver(name, run, n_targets=n_targets, starts=starts, notes=[note])


TORCHIK_BASELINES = ("dls", "jt", "gd", "lbfgsb")  # torchik's other solvers (method=...)
LBFGSB_TARGETS = 50  # SciPy L-BFGS-B loops over targets in Python: a subset, like IKPy


def torchik_rows() -> dict[str, Callable[[], Solver | str]]:
    """torchik's rows beyond the two that share pytorch_kinematics' starts: its own seeding
    (the default LM, also at 1e-5 in float64) and each baseline solver, all float64 but the
    first."""
    strict = dict(tol_position=STRICT_TOL, tol_rotation=STRICT_TOL)
    own = f"{TORCHIK} (own seeding)"
    rows = {
        own: lambda: torchik_solver(own, torch.float32, own_seeds=True),
        f"{own[:-1]}, float64, tol 1e-5)": lambda: torchik_solver(
            f"{own[:-1]}, float64, tol 1e-5)", torch.float64, own_seeds=True, **strict
        ),
    }
    for method in TORCHIK_BASELINES:
        name = f"{TORCHIK} {method} (own seeding, float64)"
        n = LBFGSB_TARGETS if method == "lbfgsb" else N_TARGETS
        rows[name] = partial(
            torchik_solver, name, torch.float64, own_seeds=True, n_targets=n, method=method
        )
    return rows


MANY_SLOTS, MANY_ITERS, MANY_DISTANCE, MANY_GOAL = 512, 40, 0.1, 100


def torchik_many_table(problem: Problem, fk: Callable) -> Table:
    """Many solutions of one pose (the first target): ``solve_ik`` with ``MANY_SLOTS`` random
    slots and no early stop, then ``IKResult.distinct``; each kept solution re-checked here."""
    table = Table(
        f"{problem.case.name} ({problem.spec.tip}): many solutions of one pose",
        MANY_COLUMNS,
        references=(),
    )
    try:
        torchik, solve_ik = torchik_api()
    except Exception as exc:
        table.add(TORCHIK, status=f"not available yet: {describe(exc)}")
        return table
    spec = problem.spec
    robot = torchik_robot(torchik, problem.case.name, torch.float64)
    cols = [spec.joint_names.index(j) for j in robot.joint_names]
    target = torch.tensor(problem.targets[0], dtype=torch.float64)

    def run() -> np.ndarray:
        result = solve_ik(
            robot, target, spec.tip, num_seeds=MANY_SLOTS, early_stop=False,
            max_iters=MANY_ITERS, generator=torch.Generator().manual_seed(1),
        )  # fmt: skip
        q, keep = result.distinct(MANY_DISTANCE)
        return q[keep].numpy()

    run()  # warm-up
    walls, q = [], None
    for _ in range(3):
        start = time.perf_counter()
        q = run()
        walls.append(time.perf_counter() - start)
    urdf_q = np.empty_like(q)
    urdf_q[:, cols] = q
    pos, rot = pose_errors(fk(urdf_q), problem.targets[:1])
    inside = ((urdf_q >= spec.lower - LIMIT_SLACK) & (urdf_q <= spec.upper + LIMIT_SLACK)).all(1)
    ok = (pos < POS_TOL) & (rot < ROT_TOL) & inside
    gaps = np.linalg.norm(urdf_q[:, None] - urdf_q[None], axis=-1) + np.eye(len(q)) * 1e9
    wall = float(np.median(walls))
    table.add(
        f"{TORCHIK} (LM)",
        distinct=int(ok.sum()),
        min_gap=float(gaps.min()) if len(q) > 1 else float("nan"),
        wall_s=wall,
        per_solution_s=wall / max(int(ok.sum()), 1),
        settings=f"float64, {MANY_SLOTS} random slots, max_iters {MANY_ITERS}, "
        f"distinct(min_distance={MANY_DISTANCE:g})",
    )
    table.notes.append(
        f"goal: {MANY_GOAL} solutions of one pose more than {MANY_DISTANCE:g} rad apart (joint "
        "space); each counted solution re-checked by FK (1 mm, 1°, limits); wall time includes "
        "the selection of distinct solutions, median of 3 after a warm-up"
    )
    return table


MANY_COLUMNS = [
    Column("distinct", f"distinct solutions (> {MANY_DISTANCE:g} rad apart, checked)"),
    Column("min_gap", "closest pair (rad)", lambda v: f"{v:.3f}"),
    Column("wall_s", "wall time", fmt_time),
    Column("per_solution_s", "per solution", fmt_time),
    Column("settings", "settings"),
]


def solvers(args: argparse.Namespace, position_only: bool) -> list[tuple[str, Solver | str]]:
    """One table's rows in order: (name, solver or the reason it is missing)."""
    # pytorch_kinematics has no position-only switch: zero orientation weight, rotation check off
    free = dict(orientation_weight=0.0, rot_tolerance=4.0) if position_only else {}
    tight = dict(pos_tolerance=STRICT_TOL, rot_tolerance=STRICT_TOL) | free
    pk_tight, tk_tight = f"{PK} (float64, tol 1e-5)", f"{TORCHIK} (float64, tol 1e-5)"
    makers = {
        TRACIK: tracik_solver,
        PK: lambda: pk_solver(PK, torch.float32, **free),
        pk_tight: lambda: pk_solver(pk_tight, torch.float64, **tight),
        IKPY: lambda: ikpy_solver(args.ikpy_targets),
        TORCHIK: lambda: torchik_solver(TORCHIK, torch.float32),
        tk_tight: lambda: torchik_solver(
            tk_tight, torch.float64, tol_position=STRICT_TOL, tol_rotation=STRICT_TOL
        ),
        **torchik_rows(),
    }
    if position_only:
        del makers[TRACIK]  # pytracik's binding has no position-only mode
    return [(name, make()) for name, make in makers.items()]


# -------------------------------------------------------------------------------- driver
def failure(exc: BaseException) -> str:
    """A torchik API that does not exist yet is "not available yet"; anything else "failed"."""
    missing = isinstance(exc, AttributeError | NotImplementedError | TypeError)
    return f"{'not available yet' if missing else 'failed'}: {describe(exc)}"


def robot_table(
    problem: Problem, fk: Callable, entries: list, checker: str, gate: QuietGate
) -> Table:
    """Run every solver on one problem: answers from the first timed run, then repeats."""
    kind = "position only" if problem.position_only else "full pose"
    title = f"{problem.case.name} ({problem.spec.tip}), {kind}"
    refs = (PK,) if problem.position_only else (PK, TRACIK)
    table = Table(title, columns(problem.position_only), time_key="per_target_s", references=refs)
    runs: dict[str, Run] = {}
    for name, solver in entries:
        if isinstance(solver, str):
            table.add(name, status=solver)
            continue
        n = min(solver.n_targets, len(problem.targets))
        log(f"{title}: {name} on {n} targets")
        try:
            solver.run(problem, min(n, 10))  # warm-up
            gate.wait()
            start = time.perf_counter()
            q = solver.run(problem, n)
            runs[name] = Run(solver, n, [time.perf_counter() - start])
            stats = evaluate(fk, problem, q)
        except Exception as exc:
            runs.pop(name, None)
            table.add(name, status=failure(exc), targets=n)
            continue
        settings = "; ".join(solver.notes)
        table.add(name, targets=n, starts=solver.starts, settings=settings, **stats)
    repeat(problem, runs, gate)
    for row in table.rows:
        if row["method"] in runs:
            run = runs[row["method"]]
            wall = float(np.median(run.walls))
            row.update(wall_s=wall, per_target_s=wall / run.n, reps=len(run.walls))
    table.notes.append(f"answers checked with {checker}")
    return table


@dataclass
class Run:
    solver: Solver
    n: int
    walls: list[float]


def repeat(problem: Problem, runs: dict[str, Run], gate: QuietGate) -> None:
    """Two more timed runs of each fast solver, round-robin so load bursts hit all alike."""
    fast = [run for run in runs.values() if run.walls[0] < REPEAT_BELOW_S]
    for _ in range(2):
        for run in fast:
            gate.wait()
            start = time.perf_counter()
            run.solver.run(problem, run.n)
            run.walls.append(time.perf_counter() - start)


def columns(position_only: bool) -> list[Column]:
    tol, strict = ("1 mm", "1e-5 m") if position_only else ("1 mm, 1°", "1e-5 m, 1e-5 rad")
    return [
        Column("targets", "targets"),
        Column("starts", "starts/target"),
        Column("success", f"success ({tol}, limits)", fmt_pct),
        Column("success_strict", f"success ({strict})", fmt_pct),
        *COLUMNS,
    ]


COLUMNS = [
    Column("success_ignoring_limits", "success ignoring limits", fmt_pct),
    Column("wall_s", "wall time, all targets", fmt_time),
    Column("per_target_s", "per target", fmt_time),
    Column("reps", "timed runs"),
    Column("settings", "settings"),
]


def make_problem(
    case: RobotCase, tmp: Path, n: int, fk_maker
) -> tuple[Problem, Callable, str] | str:
    src = fixture_urdf(case.urdf)
    if src is None:
        return f"missing: fixture {case.urdf} not found (no shared/ folder)"
    urdf = write_urdf_variant(src, tmp / f"{case.name}.urdf", case.limits)
    spec = read_chain(urdf, case.tip)
    fk, checker = fk_maker(urdf, spec)
    q_targets = uniform_configs(spec.lower, spec.upper, (n,), seed=0).numpy()
    starts = uniform_configs(spec.lower, spec.upper, (n, RETRIES), seed=1).numpy()
    return Problem(case, spec, fk(q_targets), starts), fk, checker


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", choices=list(ROBOTS), default=list(ROBOTS))
    parser.add_argument("--targets", type=int, default=N_TARGETS)
    parser.add_argument("--ikpy-targets", type=int, default=IKPY_TARGETS, help="IKPy subset")
    parser.add_argument(
        "--position-only",
        action="store_true",
        help="also the position-only tables (several more minutes: IKPy and pytorch_kinematics)",
    )
    parser.add_argument(
        "--no-position-only", action="store_true", help=argparse.SUPPRESS
    )  # default
    add_common_args(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    gate = QuietGate(args.wait_idle)
    gate.wait()
    report = Report("ik", 'Numerical IK benchmark (protocol "Numerical IK")', intro=INTRO)
    with tempfile.TemporaryDirectory(prefix="torchik-bench-") as tmp:
        for name in args.robots:
            made = make_problem(ROBOTS[name], Path(tmp), args.targets, make_fk)
            if isinstance(made, str):
                table = Table(name, columns(False))
                table.add("all anchors", status=made)
                report.tables.append(table)
                continue
            problem, fk, checker = made
            report.tables.append(robot_table(problem, fk, solvers(args, False), checker, gate))
            if name == "panda":
                report.tables.append(torchik_many_table(problem, fk))
            if args.position_only:
                problem.position_only = True
                report.tables.append(robot_table(problem, fk, solvers(args, True), checker, gate))
    report.stamp["waited_for_quiet_s"] = round(gate.waited_s, 1)
    md, _ = report.write(args.out)
    log(f"wrote {md}")
    return 0


INTRO = [
    "Targets: FK poses of configurations uniform within the limits (torch generator seed 0); "
    f"starts: uniform within the limits (seed 1), {RETRIES} per target, each target its own; "
    "single-start solvers use the first. Panda from `shared/fixtures/urdf/panda.urdf`, UR5 from "
    "`ur5_robot.urdf` with the Neural IK paper's limits (±π, elbow ±2.5) written into a temporary "
    "copy; `<safety_controller>` tags are stripped in the temporary copies because pytracik reads "
    "them as zero-width limits. Every anchor reads the same temporary URDF.",
    "",
    "Success is decided here, not by the solvers: FK of each returned configuration is "
    "recomputed in float64; a target is solved when some returned candidate has position error "
    "< 1 mm, geodesic rotation error < 1° and every joint within limits (slack 1e-6 rad for "
    "solvers that store limits in float32). The strict column asks 1e-5 m and 1e-5 rad. 'success "
    "ignoring limits' drops the limit test (a gap to 'success' means answers outside limits). "
    "Position-only tables ignore rotation.",
    "",
    "Wall time covers all targets of the row (the solver's set-up included), after a warm-up on 10 "
    "targets; median of 3 runs when a run takes < 20 s (the repeats round-robin across "
    "solvers). Each run starts once other jobs use < 25 % of the CPU (within the --wait-idle "
    "budget). Ratios compare per-target time (> 1: faster than the reference). IKPy runs a "
    "subset of the targets (its row says how many).",
]


if __name__ == "__main__":
    raise SystemExit(main())
