"""Numerical IK benchmark: protocol "Numerical IK" of shared/BENCHMARKS.md.

Panda (``panda_hand``) and UR5 (``ee_link``, the Neural IK paper's limits) through
:func:`experiments.numerical.numerical_ik_table`: 1000 targets = FK poses of configurations uniform
within limits (seed 0); every solver starts from random configurations (seed 1), never from the
answer; every answer judged by an independent float64 FK (Pinocchio; torchik's own float64 FK
if Pinocchio is missing, said under the table). This script adds the anchors: TRAC-IK
(pytracik), pytorch_kinematics PseudoInverseIK, IKPy.

    python benchmarks/ik.py                        # full pose -> benchmarks/results/ik.*
    python benchmarks/ik.py --position-only        # also the position-only tables (slower)
    python benchmarks/ik.py --targets 100 --out /tmp/ik   # a quick look elsewhere
"""

from __future__ import annotations

import argparse
import math
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from common import (
    ChainSpec,
    Report,
    Table,
    add_common_args,
    fixture_urdf,
    log,
    quiet,
    read_chain,
    try_import,
    wait_for_quiet,
    write_urdf_variant,
)

import torchik
from experiments.numerical import (
    BATCH_SIZES,
    NOTES,
    Solver,
    batch_sizes_table,
    many_solutions_table,
    numerical_ik_table,
    problem,
    torchik_rows,
)

N_TARGETS, IKPY_TARGETS, RETRIES = 1000, 200, 10
STRICT_TOL, TRACIK_TIMEOUT, TRACIK_EPS = 1e-5, 0.005, 1e-5
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


@dataclass(frozen=True)
class Urdf:
    """The anchors' view of a robot: its (temporary) URDF, chain and torchik's joint order."""

    spec: ChainSpec
    cols: list[int]  # URDF joint index of each of torchik's joints

    def to_urdf(self, q: torch.Tensor) -> np.ndarray:
        """``(..., dof)`` torchik joint order -> the URDF's, float64 numpy."""
        out = np.empty(q.shape)
        out[..., self.cols] = q.double().numpy()
        return out

    def from_urdf(self, q: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.asarray(q, dtype=np.float64)[..., self.cols])


def checker(urdf: Urdf) -> tuple[Callable[[torch.Tensor], torch.Tensor] | None, str]:
    """A float64 FK from Pinocchio in torchik's joint order (the protocols' ``check``); None
    (torchik's own FK) if Pinocchio is missing."""
    pin, reason = try_import("pinocchio")
    if pin is None:
        return None, f"torchik's own float64 FK (Pinocchio missing: {reason})"
    with quiet():
        model = pin.buildModelFromUrdf(str(urdf.spec.urdf))
    data, frame = model.createData(), model.getFrameId(urdf.spec.tip)
    cols = [model.joints[model.getJointId(n)].idx_q for n in urdf.spec.joint_names]

    def pin_fk(q: torch.Tensor) -> torch.Tensor:
        full = np.tile(pin.neutral(model), (len(q), 1))
        full[:, cols] = urdf.to_urdf(q)
        out = np.empty((len(q), 4, 4))
        for i, qi in enumerate(full):
            pin.forwardKinematics(model, data, qi)
            out[i] = pin.updateFramePlacement(model, data, frame).homogeneous
        return torch.from_numpy(out)

    return pin_fk, f"Pinocchio {pin.__version__} (float64)"


# ------------------------------------------------------------------------------- anchors
def tracik_solver(urdf: Urdf) -> Solver | str:
    pytracik, reason = try_import("pytracik")
    transform, reason2 = try_import("scipy.spatial.transform")
    if pytracik is None or transform is None:
        return f"missing: {reason or reason2}"
    spec = urdf.spec

    def run(targets: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        with quiet():
            solver = pytracik.TRAC_IK(spec.root, spec.tip, spec.urdf.read_text(), TRACIK_TIMEOUT,
                                      TRACIK_EPS, pytracik.SolveType.Speed)  # fmt: skip
        if not np.allclose(pytracik.get_joint_lower_bounds(solver), spec.lower, atol=1e-6):
            raise RuntimeError("TRAC-IK read other joint limits than the URDF's")
        poses, seeds = targets.numpy(), urdf.to_urdf(starts[:, 0])
        quat = transform.Rotation.from_matrix(poses[:, :3, :3]).as_quat()  # x y z w
        out = np.full((len(poses), 1, spec.dof), np.nan)
        for i in range(len(poses)):
            r = pytracik.ik(solver, seeds[i], *poses[i, :3, 3], *quat[i])
            if r[0] > 0:
                out[i, 0] = r[1:]
        return urdf.from_urdf(out)

    return Solver(
        run, starts=1, settings=f"timeout {TRACIK_TIMEOUT * 1e3:g} ms, eps {TRACIK_EPS:g}, Speed"
    )


def pk_solver(urdf: Urdf, dtype: torch.dtype, **options) -> Solver | str:
    pk, reason = try_import("pytorch_kinematics")
    if pk is None:
        return f"missing: {reason}"
    spec = urdf.spec

    def run(targets: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        with quiet():
            chain = pk.build_serial_chain_from_urdf(spec.urdf.read_text(), spec.tip).to(dtype=dtype)
        if tuple(chain.get_joint_parameter_names()) != spec.joint_names:
            raise RuntimeError("pytorch_kinematics joint order differs from the URDF's")
        limits = torch.tensor(np.stack([spec.lower, spec.upper], axis=1), dtype=dtype)
        ik = pk.PseudoInverseIK(chain, num_retries=RETRIES, joint_limits=limits, **options)
        ik.initial_config = torch.tensor(urdf.to_urdf(starts), dtype=dtype)
        if targets.dim() == 2:  # position only: pk takes poses (the rotation is not weighted)
            pose = torch.eye(4, dtype=targets.dtype).repeat(len(targets), 1, 1)
            pose[:, :3, 3] = targets
            targets = pose
        target = pk.Transform3d(matrix=targets.to(dtype))
        return urdf.from_urdf(ik.solve(target).solutions.double().numpy())

    opts = (
        ", ".join(f"{k}={v:g}" for k, v in options.items())
        or "default tolerances (1e-3 m, 1e-2 rad)"
    )
    return Solver(run, settings=f"{str(dtype).removeprefix('torch.')}, {RETRIES} retries, {opts}")


def ikpy_solver(urdf: Urdf, n_targets: int) -> Solver | str:
    ikpy_chain, reason = try_import("ikpy.chain")
    if ikpy_chain is None:
        return f"missing: {reason}"

    def run(targets: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        chain, active = ikpy_chain_for(ikpy_chain.Chain, urdf.spec)
        position_only = targets.dim() == 2
        seeds, out = urdf.to_urdf(starts[:, 0]), np.full((len(targets), 1, urdf.spec.dof), np.nan)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i, target in enumerate(targets.numpy()):
                init = np.zeros(len(chain.links))
                init[active] = seeds[i]
                frame = np.eye(4) if position_only else target
                frame[:3, 3] = target if position_only else frame[:3, 3]
                sol = chain.inverse_kinematics_frame(
                    frame, initial_position=init, orientation_mode=None if position_only else "all"
                )
                out[i, 0] = sol[active]
        return urdf.from_urdf(out)

    return Solver(
        run, n_targets=n_targets, starts=1, settings="one start per target, least_squares"
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


def solvers(args, case: RobotCase, urdf: Urdf, position_only: bool) -> dict[str, Solver | str]:
    """One table's rows in order (a string: the reason a row is missing)."""
    # pytorch_kinematics has no position-only switch: zero orientation weight, rotation check off
    free = dict(orientation_weight=0.0, rot_tolerance=4.0) if position_only else {}
    tight = dict(pos_tolerance=STRICT_TOL, rot_tolerance=STRICT_TOL) | free
    rows = {
        TRACIK: tracik_solver(urdf),
        PK: pk_solver(urdf, torch.float32, **free),
        f"{PK} (float64, tol 1e-5)": pk_solver(urdf, torch.float64, **tight),
        IKPY: ikpy_solver(urdf, args.ikpy_targets),
        **torchik_rows(case.name, urdf.spec.tip, position_only),
    }
    if position_only:
        del rows[TRACIK]  # pytracik's binding has no position-only mode
    return rows


# -------------------------------------------------------------------------------- driver
def robot_tables(args, case: RobotCase, tmp: Path) -> list[Table]:
    src = fixture_urdf(case.urdf)
    if src is None:
        table = Table(case.name, [])
        table.add("all anchors", status=f"missing: fixture {case.urdf} not found (no shared/)")
        return [table]
    spec = read_chain(write_urdf_variant(src, tmp / f"{case.name}.urdf", case.limits), case.tip)
    robot = torchik.load_robot(case.name, dtype=torch.float64)
    urdf = Urdf(spec, [spec.joint_names.index(j) for j in robot.joint_names])
    if not torch.equal(robot.lower, torch.from_numpy(spec.lower[urdf.cols])):
        raise RuntimeError(f"torchik's {case.name} limits differ from the protocol's")
    check, name = checker(urdf)
    tables = []
    for position_only in (False, True) if args.position_only else (False,):
        kind = "position only" if position_only else "full pose"
        log(f"{case.name}: {kind}")
        table = numerical_ik_table(
            robot, solvers(args, case, urdf, position_only), case.tip, args.targets,
            retries=RETRIES, position_only=position_only, check=check,
            references=(PK,) if position_only else (PK, TRACIK),
            title=f"{case.name} ({case.tip}), {kind}", min_run_time=args.min_run_time,
        )  # fmt: skip
        table.notes.append(f"answers checked with {name}")
        tables.append(table)
        if case.name == "panda" and not position_only:
            p = problem(robot, case.tip, args.targets, check=check)
            tables.append(many_solutions_table(p, min_run_time=args.min_run_time))
            log(f"{case.name}: batch sizes")
            p = problem(robot, case.tip, max(BATCH_SIZES), check=check)
            r32 = torchik.load_robot(case.name, dtype=torch.float32)
            tables.append(batch_sizes_table(p, r32, min_run_time=args.min_run_time))
    return tables


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", choices=list(ROBOTS), default=list(ROBOTS))
    parser.add_argument("--targets", type=int, default=N_TARGETS)
    parser.add_argument("--ikpy-targets", type=int, default=IKPY_TARGETS, help="IKPy subset")
    parser.add_argument("--min-run-time", type=float, default=0.5, help="s measured per row")
    parser.add_argument("--position-only", action="store_true",
                        help="also the position-only tables (several more minutes)")  # fmt: skip
    add_common_args(parser)
    args = parser.parse_args(argv)
    report = Report(
        "ik", 'Numerical IK benchmark (protocol "Numerical IK")', intro=[*INTRO, "", *NOTES]
    )
    report.stamp["waited_for_quiet_s"] = wait_for_quiet(args.wait_idle)
    with tempfile.TemporaryDirectory(prefix="torchik-bench-") as tmp:
        for name in args.robots:
            report.tables += robot_tables(args, ROBOTS[name], Path(tmp))
    md, _ = report.write(args.out)
    log(f"wrote {md}")
    return 0


INTRO = [
    "`experiments.numerical.numerical_ik_table` with this script's anchors. Targets: FK poses of "
    "configurations uniform within the limits (torch generator seed 0); starts: uniform within "
    f"the limits (seed 1), {RETRIES} per target, each target its own; single-start solvers use "
    "the first. Panda from `shared/fixtures/urdf/panda.urdf`, UR5 from `ur5_robot.urdf` with the "
    "Neural IK paper's limits (±π, elbow ±2.5) written into a temporary copy; "
    "`<safety_controller>` tags are stripped in the temporary copies because pytracik reads "
    "them as zero-width limits. Every anchor reads the same temporary URDF.",
]


if __name__ == "__main__":
    raise SystemExit(main())
