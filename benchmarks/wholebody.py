"""Whole-body IK on the Unitree G1 (pelvis fixed): both hands' full poses at once.

The protocol is :mod:`experiments.wholebody`; this script adds the anchors, placo
(``KinematicsSolver`` with two ``frame_task``s, floating base masked, joint limits on) and mink
(``FrameTask``s on the bodies, ``ConfigurationLimit``, daqp), each started from a uniform random
configuration per target and iterated through its documented loop, and writes the results.

    python benchmarks/wholebody.py                 # -> benchmarks/results/wholebody.*
    python benchmarks/wholebody.py --targets 100 --anchor-targets 10 --out /tmp/wb  # a quick look
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from common import add_common_args, dist_version, machine_stamp, wait_for_quiet

import torchik
from experiments.report import load_average
from experiments.wholebody import (
    FEET,
    HANDS,
    TITLE,
    arm_joints,
    quaternion_g1,
    run_anchor,
    run_floating,
    run_one_at_a_time,
    run_path,
    run_quaternion,
    run_torchik,
    scene_g1,
    targets,
    wholebody_markdown,
)
from torchik.files import write_text
from torchik.ik import solve_wholebody


def placo_solver(robot, iters: int):
    """placo's documented loop: frame tasks, floating base masked, ``solve(True)``."""
    import placo

    wrapper = placo.RobotWrapper(str(_urdf()), placo.Flags.ignore_collisions)
    solver = placo.KinematicsSolver(wrapper)
    solver.mask_fbase(True)
    solver.enable_joint_limits(True)
    tasks = [solver.add_frame_task(hand, np.eye(4)) for hand in HANDS]
    for hand, task in zip(HANDS, tasks, strict=True):
        task.configure(hand, "soft", 1.0, 1.0)
    names = list(robot.joint_names)

    def solve_one(q0: torch.Tensor, poses: torch.Tensor) -> torch.Tensor:
        for name, value in zip(names, q0.tolist(), strict=True):
            wrapper.set_joint(name, value)
        for task, pose in zip(tasks, poses, strict=True):
            task.T_world_frame = pose.numpy()
        for _ in range(iters):
            wrapper.update_kinematics()
            solver.solve(True)
        return torch.tensor([wrapper.get_joint(name) for name in names], dtype=q0.dtype)

    return solve_one


def mink_solver(robot, iters: int):
    """mink's documented loop: ``FrameTask``s, ``ConfigurationLimit``, daqp, dt 0.1."""
    import mink
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(_urdf(mujoco=True)))
    config = mink.Configuration(model)
    tasks = [mink.FrameTask(h, "body", position_cost=1.0, orientation_cost=1.0) for h in HANDS]
    limits = [mink.ConfigurationLimit(model)]
    names = [model.joint(j).name for j in range(model.njnt)]
    order = [names.index(name) for name in robot.joint_names]

    def solve_one(q0: torch.Tensor, poses: torch.Tensor) -> torch.Tensor:
        q = np.zeros(model.nq)
        q[order] = q0.numpy()
        config.update(q)
        for task, pose in zip(tasks, poses, strict=True):
            task.set_target(mink.SE3.from_matrix(pose.numpy()))
        for _ in range(iters):
            vel = mink.solve_ik(config, tasks, 0.1, "daqp", damping=1e-3, limits=limits)
            config.integrate_inplace(vel, 0.1)
        return torch.from_numpy(config.q[order].copy())

    return solve_one


def anchor_status(exc: Exception) -> str:
    """An anchor's row status: ``missing: …`` when it does not import (the README's rule: a
    missing anchor is said so, not reported as a failure of the anchor), else ``failed: …``."""
    kind = "missing" if isinstance(exc, ImportError) else "failed"
    return f"{kind}: {type(exc).__name__}: {exc}"[:200]


def _urdf(mujoco: bool = False) -> Path:
    """The bundled G1 as a file (for MuJoCo: the hand frames kept, small inertias added)."""
    text = torchik.description.bundled_urdf("g1")
    if mujoco:
        keep = '<mujoco><compiler fusestatic="false" discardvisual="true"/></mujoco>'
        text = text.replace('<robot name="g1">', f'<robot name="g1">{keep}', 1)
        # MuJoCo refuses massless moving bodies; a small inertia changes no kinematics
        inertial = (
            '<inertial><mass value="0.1"/>'
            '<inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial>'
        )
        text = re.sub(r'<link name="([^"]+)" />', rf'<link name="\1">{inertial}</link>', text)
    path = Path(tempfile.mkdtemp()) / "g1.urdf"
    path.write_text(text)
    return path


PATH_ROWS = ((None, False, False), (True, False, False), (None, True, False), (None, True, True))
"""The path rows' ``(restarts, away, retry)`` (:func:`experiments.wholebody.run_path`)."""


def _path_row(name: str, restarts: bool | None, away: bool, retry: bool) -> str:
    """A path row's name: ``name`` and its settings."""
    name += (", restarts" if restarts else "") + (", posture off the limits" if away else "")
    return name + (", a failure retried near the last answer" if retry else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--anchor-targets", type=int, default=100)
    parser.add_argument("--anchor-iters", type=int, default=100)
    parser.add_argument("--starts", type=int, default=4, help="random starts per anchor target")
    add_common_args(parser)  # --out FOLDER (wholebody.md, .json there), --wait-idle
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)  # before the run, not after it
    out = args.out / "wholebody"
    torch.set_num_threads(1)
    started, stamp = time.perf_counter(), machine_stamp()
    stamp["waited_for_quiet_s"] = wait_for_quiet(args.wait_idle)
    stamp["anchors"] = {d: dist_version(d) for d in ("placo", "mink", "mujoco", "daqp", "pin")}
    robot = torchik.load_robot("g1", dtype=torch.float64)
    poses = targets(robot, args.targets)
    solve_wholebody(robot, dict(zip(HANDS, poses[:10].unbind(1), strict=True)))  # warm-up
    run_quaternion(4, 2)  # and the floating base's kernel (loaded from Numba's cache: ~1 s)
    rows = {f"torchik ({k} seeds)": run_torchik(robot, poses, k) for k in (2, 4)}
    arms = arm_joints(robot)  # the waist and legs held at the neutral, the targets made so
    rows["torchik, arms alone (2 seeds)"] = run_torchik(robot, targets(robot, args.targets, arms),
                                                        2, active=arms)  # fmt: skip
    rows["torchik, beside a free box, a scene (2 seeds)"] = run_torchik(scene_g1(), poses, 2)
    rows["torchik, one target per call (2 seeds)"] = run_one_at_a_time(robot, poses, 2)
    for restarts, away, retry in PATH_ROWS:
        name = _path_row("torchik, one target per call, warm-started", restarts, away, retry)
        rows[name] = run_path(robot, HANDS, args.targets, restarts, away, retry)
    for k in (2, 4):
        rows[f"torchik, floating base, 4 targets ({k} seeds)"] = run_floating(args.targets, k)
    for k in (2, 4):
        rows[f"torchik, quaternion base, 4 targets ({k} seeds)"] = run_quaternion(args.targets, k)
    floating = quaternion_g1()
    for restarts, away, retry in PATH_ROWS:
        name = _path_row("torchik, quaternion base, 4 targets, one per call, warm-started",
                         restarts, away, retry)  # fmt: skip
        rows[name] = run_path(floating, [*FEET, *HANDS], args.targets, restarts, away, retry)
    for name, make in (("placo", placo_solver), ("mink", mink_solver)):
        try:
            solve_one = make(robot, args.anchor_iters)
            rows[name] = run_anchor(robot, poses[: args.anchor_targets], solve_one, args.starts)
            used = rows[name]["starts_used"]
            rows[name]["settings"] = (f"{args.anchor_iters} iterations per start, up to "
                                      f"{args.starts} random starts ({used} used)")  # fmt: skip
        except Exception as exc:  # an anchor that fails to import or run is reported, not fatal
            rows[name] = {"status": anchor_status(exc)}
    stamp["cpu_duration_s"] = round(time.process_time(), 1)
    stamp["load_average_at_end"] = load_average()  # as every Report's stamp: load at both ends
    stamp["duration_s"] = round(time.perf_counter() - started, 1)
    table = [
        {"method": name, "status": row.get("status", "ok"), **row} for name, row in rows.items()
    ]
    result = {"stamp": stamp, "tables": [{"title": TITLE, "rows": table}]}
    write_text(out.with_suffix(".json"), json.dumps(result, indent=1))
    write_text(out.with_suffix(".md"), wholebody_markdown(stamp, rows))
    print(wholebody_markdown(stamp, rows))


if __name__ == "__main__":
    main()
