"""Whole-body IK on the Unitree G1 (pelvis fixed): both hands' full poses at once.

Targets: FK poses of ``left_rubber_hand`` and ``right_rubber_hand`` at configurations uniform
within the limits (all 29 joints; seed 0). torchik solves them all in one batched call with its
own seeds (uniform random pools, never the answer). Anchors, where they import: placo
(``KinematicsSolver`` with two ``frame_task``s, floating base masked, joint limits on) and mink
(``FrameTask``s on the bodies, ``ConfigurationLimit``, daqp), each started from a uniform random
configuration per target and iterated to convergence (their documented loop). Success is decided
here by torchik's FK in float64: both hands within 1 mm and 1 degree, every joint within limits.

Floating base (issue 17 section 4): the G1 with ``floating_base=True`` (position + quaternion)
placing both feet's and hands' full poses, targets from uniform random joints with the base
anywhere in a 2 m cube and any orientation (:func:`run_quaternion`), next to the older emulated
base of 3 slides and 3 Euler hinges (:func:`floating_g1`).

Time is CPU time (``time.process_time``) with ``torch.set_num_threads(1)``: the machine is
shared, so wall time would measure the neighbours.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from common import RESULTS_DIR, dist_version, machine_stamp

import torchik
from torchik.ik import solve_ik

HANDS = ("left_rubber_hand", "right_rubber_hand")
TOL_P, TOL_R = 1e-3, math.radians(1.0)
TITLE = "Whole-body IK: G1, both hands' full poses (pelvis fixed, or feet too on a floating base)"


def targets(robot, n: int) -> torch.Tensor:
    """``(n, 2, 4, 4)`` hand poses of uniform random configurations (seed 0)."""
    q = robot.random_configuration(n, torch.Generator().manual_seed(0))
    return robot.forward_kinematics(q, list(HANDS))


def success(robot, q: torch.Tensor, poses: torch.Tensor, links=HANDS) -> torch.Tensor:
    """``(n,)`` bool: every link (both hands) within 1 mm / 1 degree and every joint within
    limits."""
    got = robot.forward_kinematics(q, list(links))
    pos = (got[..., :3, 3] - poses[..., :3, 3]).norm(dim=-1)
    rel = got[..., :3, :3].transpose(-1, -2) @ poses[..., :3, :3]
    cos = ((rel.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2).clamp(-1, 1)
    ok = (pos < TOL_P) & (torch.arccos(cos) < TOL_R)
    within = ((q >= robot.lower - 1e-9) & (q <= robot.upper + 1e-9)).all(-1)
    return ok.all(-1) & within


def run_torchik(robot, poses: torch.Tensor, num_seeds: int, repeats: int = 3) -> dict:
    """One batched ``solve_ik`` over every target; the median CPU time of ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        g = torch.Generator().manual_seed(1)
        start = time.process_time()
        result = solve_ik(robot, dict(zip(HANDS, poses.unbind(1), strict=True)), generator=g,
                          num_seeds=num_seeds)  # fmt: skip
        times.append(time.process_time() - start)
    seconds = sorted(times)[len(times) // 2]
    ok = torch.stack([success(robot, result.q[:, k], poses) for k in range(num_seeds)]).any(0)
    rate = ok.float().mean().item()
    return {"targets": len(poses), "success": rate, "cpu_s": seconds, "settings": "median of 3"}


FEET = ("left_ankle_roll_link", "right_ankle_roll_link")


def floating_g1():
    """The G1 on an emulated floating base: world -> x, y, z slides (±1 m) -> yaw (±π), pitch
    (±1.5), roll (±π) hinges -> pelvis. Euler angles, so not the real thing (a quaternion base
    is issue 17 section 2); enough to measure feet + hands targets on a moving pelvis."""

    def joint(name, kind, parent, child, axis, lo, hi):
        return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child '
                f'link="{child}"/><axis xyz="{axis}"/><limit lower="{lo}" upper="{hi}" '
                f'effort="1" velocity="1"/></joint>')  # fmt: skip

    chain = [("base_x", "prismatic", "1 0 0", 1), ("base_y", "prismatic", "0 1 0", 1),
             ("base_z", "prismatic", "0 0 1", 1), ("base_yaw", "revolute", "0 0 1", math.pi),
             ("base_pitch", "revolute", "0 1 0", 1.5),
             ("base_roll", "revolute", "1 0 0", math.pi)]  # fmt: skip
    parts, parent = ['<link name="world"/>'], "world"
    for i, (name, kind, axis, limit) in enumerate(chain):
        child = "pelvis" if i == len(chain) - 1 else f"{name}_link"
        parts += [f'<link name="{child}"/>' if child != "pelvis" else ""]
        parts.append(joint(name, kind, parent, child, axis, -limit, limit))
        parent = child
    text = torchik.robots.bundled_urdf("g1")
    text = text.replace('<robot name="g1">', '<robot name="g1_floating">' + "".join(parts), 1)
    return torchik.Robot.from_urdf(text, dtype=torch.float64)


def run_floating(n: int, num_seeds: int) -> dict:
    robot = floating_g1()
    links = [*FEET, *HANDS]
    poses = robot.forward_kinematics(
        robot.random_configuration(n, torch.Generator().manual_seed(0)), links
    )
    g = torch.Generator().manual_seed(1)
    start = time.process_time()
    result = solve_ik(robot, dict(zip(links, poses.unbind(1), strict=True)), generator=g,
                      num_seeds=num_seeds)  # fmt: skip
    seconds = time.process_time() - start
    note = "emulated floating base (6 joints), both feet's and hands' poses"
    rate = result.success.any(-1).float().mean().item()
    return {"targets": n, "success": rate, "cpu_s": seconds, "settings": note}


def run_quaternion(n: int, num_seeds: int) -> dict:
    """The G1 on a real floating base (``floating_base=True``: position + quaternion, steps in
    the tangent space); targets: both feet's and hands' poses of uniform random joints, the
    base anywhere in a 2 m cube with any orientation (seed 0). Success by FK here."""
    robot = torchik.Robot.from_urdf(
        torchik.robots.bundled_urdf("g1"), dtype=torch.float64, floating_base=True
    )
    links = [*FEET, *HANDS]
    g = torch.Generator().manual_seed(0)
    q = robot.random_configuration(n, g)
    q[:, :3] = 2 * torch.rand(n, 3, generator=g, dtype=q.dtype) - 1
    poses = robot.forward_kinematics(q, links)
    g = torch.Generator().manual_seed(1)
    start = time.process_time()
    result = solve_ik(robot, dict(zip(links, poses.unbind(1), strict=True)), generator=g,
                      num_seeds=num_seeds)  # fmt: skip
    seconds = time.process_time() - start
    ok = torch.stack([success(robot, result.q[:, k], poses, links) for k in range(num_seeds)])
    note = "quaternion floating base (`floating_base=True`), both feet's and hands' poses"
    iters = result.iterations.float().mean().item()
    return {"targets": n, "success": ok.any(0).float().mean().item(), "cpu_s": seconds,
            "mean_iterations": iters, "settings": note}  # fmt: skip


def run_anchor(robot, poses: torch.Tensor, solve_one, starts: int) -> dict:
    """``solve_one(q_start (29,), poses (2, 4, 4)) -> q (29,)`` from up to ``starts`` uniform
    random starts per target, the next one only while FK says the last one failed."""
    q0 = robot.random_configuration(len(poses) * starts, torch.Generator().manual_seed(1))
    q0 = q0.view(len(poses), starts, -1)
    q_out, tries = torch.empty_like(q0[:, 0]), 0
    start = time.process_time()
    for i in range(len(poses)):
        for k in range(starts):
            q_out[i] = solve_one(q0[i, k], poses[i])
            tries += 1
            if bool(success(robot, q_out[i : i + 1], poses[i : i + 1])):
                break
    seconds = time.process_time() - start
    ok = success(robot, q_out, poses)
    return {"targets": len(poses), "success": ok.float().mean().item(), "cpu_s": seconds,
            "starts_used": tries}  # fmt: skip


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


def _urdf(mujoco: bool = False) -> Path:
    """The bundled G1 as a file (for MuJoCo: the hand frames kept, small inertias added)."""
    text = torchik.robots.bundled_urdf("g1")
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument("--anchor-targets", type=int, default=100)
    parser.add_argument("--anchor-iters", type=int, default=100)
    parser.add_argument("--starts", type=int, default=4, help="random starts per anchor target")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "wholebody")
    args = parser.parse_args()
    torch.set_num_threads(1)
    stamp = machine_stamp()
    stamp["anchors"] = {d: dist_version(d) for d in ("placo", "mink", "mujoco", "daqp", "pin")}
    robot = torchik.load_robot("g1", dtype=torch.float64)
    poses = targets(robot, args.targets)
    solve_ik(robot, dict(zip(HANDS, poses[:10].unbind(1), strict=True)))  # warm-up
    rows = {f"torchik ({k} seeds)": run_torchik(robot, poses, k) for k in (2, 4)}
    for k in (2, 4):
        rows[f"torchik, floating base, 4 targets ({k} seeds)"] = run_floating(args.targets, k)
    for k in (2, 4):
        rows[f"torchik, quaternion base, 4 targets ({k} seeds)"] = run_quaternion(args.targets, k)
    for name, make in (("placo", placo_solver), ("mink", mink_solver)):
        try:
            solve_one = make(robot, args.anchor_iters)
            rows[name] = run_anchor(robot, poses[: args.anchor_targets], solve_one, args.starts)
            used = rows[name]["starts_used"]
            rows[name]["settings"] = (f"{args.anchor_iters} iterations per start, up to "
                                      f"{args.starts} random starts ({used} used)")  # fmt: skip
        except Exception as exc:  # an anchor that fails to import or run is reported, not fatal
            rows[name] = {"status": f"failed: {type(exc).__name__}: {exc}"[:200]}
    stamp["cpu_duration_s"] = round(time.process_time(), 1)
    table = [
        {"method": name, "status": row.get("status", "ok"), **row} for name, row in rows.items()
    ]
    result = {"stamp": stamp, "tables": [{"title": TITLE, "rows": table}]}
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1))
    args.out.with_suffix(".md").write_text(_markdown(stamp, rows))
    print(_markdown(stamp, rows))


def _markdown(stamp: dict, rows: dict) -> str:
    lines = [f"# {TITLE}", "", "| machine | |",
             "|---|---|", *(f"| {k} | {v} |" for k, v in stamp.items()), "",
             "CPU time (`time.process_time`), `torch.set_num_threads(1)`, on a shared machine. "
             "Success checked here by FK in float64: both hands within 1 mm and 1°, every "
             "joint within limits. Targets: FK poses of configurations uniform in the limits "
             "(seed 0). torchik: one batched `solve_ik` call, its own seeds (the nearest of a "
             "uniform random pool, never the answer). Anchors: the same targets, uniform random "
             "starts (seed 1), each iterated through the library's documented loop; the next "
             "start only when FK says the last one failed. The emulated floating-base rows put "
             "3 slides (±1 m) and 3 Euler hinges above the pelvis; the quaternion-base rows load "
             "the G1 with `floating_base=True` (position + quaternion, steps in the tangent "
             "space), targets: both feet's and hands' poses, the base anywhere in a 2 m cube "
             "with any orientation; each seed's base is fitted to the targets (weighted "
             "Procrustes), never taken from the configuration behind them; success by FK here "
             "(all four links within 1 mm and 1°).", "",
             "| method | targets | success | CPU time, all targets | per target | notes |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for name, row in rows.items():
        if "success" not in row:
            lines.append(f"| {name} | | | | | {row.get('status', '')} |")
            continue
        per, note = row["cpu_s"] / row["targets"], row.get("settings", "")
        lines.append(f"| {name} | {row['targets']} | {100 * row['success']:.1f} % | "
                     f"{row['cpu_s']:.3f} s | {1e3 * per:.2f} ms | {note} |")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
