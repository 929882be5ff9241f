"""Whole-body IK on the Unitree G1: both hands' full poses at once (``benchmarks/wholebody.py``).

Targets: FK poses of ``left_rubber_hand`` and ``right_rubber_hand`` at configurations uniform
within the limits (all 29 joints; seed 0). torchik solves them all in one batched call with its
own seeds (uniform random pools, never the answer); :func:`run_anchor` drives another library's
solver from uniform random starts. Success is decided by torchik's FK in float64: every link
within 1 mm and 1 degree, every joint within limits. The floating-base rows place both feet's and
hands' poses: :func:`run_quaternion` on ``floating_base=True`` (position + quaternion), and
:func:`run_floating` on an emulated base of 3 slides and 3 Euler hinges (:func:`floating_g1`).

Time is CPU time (``time.process_time``) of single solves, not
:func:`~experiments.timing.time_call`: the benchmark runs with one thread on a shared machine, where
wall time measures the neighbours.

Example:
    >>> row = run_quaternion(4, num_seeds=2)
    >>> row["targets"], row["success"] > 0.5
    (4, True)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from experiments.report import Report, load_warning
from torchik.description import Joint, Origin, bundled_urdf
from torchik.ik import solve_wholebody
from torchik.ik.wholebody import away_from_limits, seeds_near
from torchik.robot import Robot

__all__ = [
    "FEET",
    "HANDS",
    "PATH_POSTURE",
    "PATH_RETRY",
    "PATH_STEPS",
    "arm_joints",
    "beside_a_free_box",
    "floating_g1",
    "path_configurations",
    "quaternion_g1",
    "run_anchor",
    "run_floating",
    "run_one_at_a_time",
    "run_path",
    "run_quaternion",
    "run_torchik",
    "scene_g1",
    "success",
    "targets",
    "wholebody_markdown",
]

HANDS = ("left_rubber_hand", "right_rubber_hand")
"""The G1's hand links (the targets)."""
FEET = ("left_ankle_roll_link", "right_ankle_roll_link")
"""The G1's feet (floating-base rows)."""
TOL_P, TOL_R = 1e-3, math.radians(1.0)
TITLE = "Whole-body IK: G1, both hands' full poses (pelvis fixed, or feet too on a floating base)"


def targets(robot: Any, n: int, active: Sequence[str] | None = None) -> Tensor:
    """``(n, 2, 4, 4)`` hand poses of uniform random configurations (seed 0); with ``active``
    joint names, the others at :meth:`Robot.neutral` (where a solve moving ``active`` alone
    holds them)."""
    q = robot.random_configuration(n, torch.Generator().manual_seed(0))
    if active is not None:
        held = torch.tensor([name not in active for name in robot.joint_names])
        q[:, held] = robot.neutral()[held]
    return robot.forward_kinematics(q, list(HANDS))


def arm_joints(robot: Any) -> list[str]:
    """The G1's arm joints (shoulders, elbows, wrists): the arms-alone row's ``active``."""
    parts = ("shoulder", "elbow", "wrist")
    return [name for name in robot.joint_names if any(part in name for part in parts)]


def success(robot: Any, q: Tensor, poses: Tensor, links: Sequence[str] = HANDS) -> Tensor:
    """``(n,)`` bool: every link (both hands) within 1 mm / 1 degree and every joint within
    limits."""
    got = robot.forward_kinematics(q, list(links))
    pos = (got[..., :3, 3] - poses[..., :3, 3]).norm(dim=-1)
    rel = got[..., :3, :3].transpose(-1, -2) @ poses[..., :3, :3]
    cos = ((rel.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2).clamp(-1, 1)
    ok = (pos < TOL_P) & (torch.arccos(cos) < TOL_R)
    within = ((q >= robot.lower - 1e-9) & (q <= robot.upper + 1e-9)).all(-1)
    return ok.all(-1) & within


def run_torchik(robot: Any, poses: Tensor, num_seeds: int, repeats: int = 3,
                active: Sequence[str] | None = None) -> dict[str, Any]:  # fmt: skip
    """One batched ``solve_wholebody`` of every target (moving the joints ``active``, the
    others held at the neutral; ``None``: every joint); the median CPU time of ``repeats``
    runs."""
    times = []
    for _ in range(repeats):
        g = torch.Generator().manual_seed(1)
        start = time.process_time()
        result = solve_wholebody(robot, dict(zip(HANDS, poses.unbind(1), strict=True)), generator=g,
                                 num_seeds=num_seeds, active=active)  # fmt: skip
        times.append(time.process_time() - start)
    seconds = sorted(times)[len(times) // 2]
    ok = torch.stack([success(robot, result.q[:, k], poses) for k in range(num_seeds)]).any(0)
    rate = ok.float().mean().item()
    note = "median of 3" + ("" if active is None else f", {len(active)} joints moved")
    return {"targets": len(poses), "success": rate, "cpu_s": seconds, "settings": note}


def run_one_at_a_time(robot: Any, poses: Tensor, num_seeds: int) -> dict[str, Any]:
    """``solve_wholebody`` of each target in its own call, as the anchors are driven (and as a
    control loop calls it): the CPU time of every call, its median and tail in the notes."""
    g, times, ok = torch.Generator().manual_seed(1), [], []
    for pose in poses:
        start = time.process_time()
        result = solve_wholebody(robot, dict(zip(HANDS, pose.unbind(0), strict=True)),
                                 generator=g, num_seeds=num_seeds)  # fmt: skip
        times.append(time.process_time() - start)
        ok.append(bool(success(robot, result.q, pose.expand(num_seeds, 2, 4, 4)).any()))
    note = f"one target per call: {_tail(times)}"
    return {"targets": len(poses), "success": sum(ok) / len(ok), "cpu_s": sum(times),
            "settings": note}  # fmt: skip


PATH_STEPS = 100
"""Calls between two waypoints of :func:`run_path`'s paths."""


def path_configurations(robot: Any, n: int, seed: int = 0) -> Tensor:
    """``(n, nq)`` configurations along a path through uniform random waypoints (seed ``seed``),
    :data:`PATH_STEPS` steps from one to the next, interpolated linearly (a floating base's
    quaternion normalised; its position in a 2 m cube)."""
    g = torch.Generator().manual_seed(seed)
    ways = robot.random_configuration(n // PATH_STEPS + 2, g)
    if robot.floating:
        ways[:, :3] = 2 * torch.rand(len(ways), 3, generator=g, dtype=ways.dtype) - 1
    s = torch.arange(n, dtype=ways.dtype) / PATH_STEPS
    i, frac = s.floor().long(), (s - s.floor())[:, None]
    q = ways[i] + frac * (ways[i + 1] - ways[i])
    if robot.floating:
        q[:, 3:7] = q[:, 3:7] / q[:, 3:7].norm(dim=-1, keepdim=True)
    return q


PATH_RETRY = {"n": 8, "scale": 0.5}
"""The seeds of :func:`run_path`'s ``retry`` (:func:`torchik.ik.wholebody.seeds_near`)."""

PATH_POSTURE = {"posture": 0.5, "posture_iters": 3}
"""The posture of :func:`run_path`'s ``away`` rows, with
:func:`torchik.ik.wholebody.away_from_limits` of the previous answer as the rest."""


def run_path(
    robot: Any,
    links: Sequence[str],
    n: int,
    restarts: bool | None = None,
    away: bool = False,
    retry: bool = False,
) -> dict[str, Any]:
    """``solve_wholebody`` of ``n`` targets along a path (:func:`path_configurations`), one
    call each, seeded with the previous call's answer (a control loop's warm start; the
    first call with the path's start), with ``restarts`` (``True``: a stalled slot starts
    again from fresh seeds), with ``away`` the posture :data:`PATH_POSTURE` towards the
    previous answer kept off the limits, and with ``retry`` a failed call once more from
    :data:`PATH_RETRY` seeds near the previous answer (:func:`seeds_near`), the successful
    one nearest it kept: the CPU time of every call (a retry's included), its median and tail
    in the notes, and the largest joint step between two answers. Success by FK here."""
    q = path_configurations(robot, n)
    poses = robot.forward_kinematics(q, list(links))
    seed, times, ok, iters, step = q[:1], [], [], [], 0.0
    joints, g = slice(7 * robot.floating_bases, None), torch.Generator().manual_seed(0)
    for pose in poses:
        posture = dict(rest=away_from_limits(robot, seed[0]), **PATH_POSTURE) if away else {}
        targets = dict(zip(links, pose.unbind(0), strict=True))
        start = time.process_time()
        result = solve_wholebody(robot, targets, seeds=seed, restarts=restarts, **posture)
        if retry and not bool(result.success.all()):
            near = seeds_near(robot, seed[0], **PATH_RETRY, generator=g)
            again = solve_wholebody(robot, targets, seeds=near, restarts=restarts, **posture)
            result = again.nearest(seed[0]) if bool(again.success.any()) else result
        times.append(time.process_time() - start)
        answer = result.q.reshape(1, -1)
        step = max(step, float((answer - seed)[0, joints].abs().max()))
        seed = answer
        ok.append(bool(success(robot, seed, pose[None], links)))
        iters.append(int(result.iterations.max()))
    how = ("restarts=True" if restarts else "no restarts") + (", posture away from the limits"
                                                              if away else "")  # fmt: skip
    how += ", a failed call retried from seeds near the previous answer" if retry else ""
    note = (f"warm-started along a path ({PATH_STEPS} calls between random waypoints), one call "
            f"each, {how}: {_tail(times)}; largest joint step {step:.2f} rad")  # fmt: skip
    return {"targets": n, "success": sum(ok) / n, "cpu_s": sum(times),
            "mean_iterations": sum(iters) / n, "largest_step": step, "settings": note}  # fmt: skip


def _tail(times: Sequence[float]) -> str:
    """The median, 90th and 99th percentiles and the slowest of calls of ``times`` seconds."""
    ms = sorted(1e3 * t for t in times)
    at = lambda p: ms[min(len(ms) - 1, int(p * len(ms)))]  # noqa: E731
    return (f"median {at(0.5):.2f} ms, 90th percentile {at(0.9):.2f}, 99th {at(0.99):.2f}, "
            f"slowest {ms[-1]:.2f}")  # fmt: skip


def floating_g1() -> Any:
    """The G1 on an emulated floating base: world -> x, y, z slides (±1 m) -> yaw (±π), pitch
    (±1.5), roll (±π) hinges -> pelvis. Euler angles, so not the real thing (a quaternion base
    is issue 17 section 2); enough to measure feet + hands targets on a moving pelvis."""

    def joint(name: str, kind: str, parent: str, child: str, axis: str, lo: float, hi: float):
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
    text = bundled_urdf("g1")
    text = text.replace('<robot name="g1">', '<robot name="g1_floating">' + "".join(parts), 1)
    return Robot.from_urdf(text, dtype=torch.float64)


def run_floating(n: int, num_seeds: int) -> dict[str, Any]:
    """Both feet's and hands' poses on :func:`floating_g1` (targets of random joints, seed 0)."""
    robot = floating_g1()
    links = [*FEET, *HANDS]
    poses = robot.forward_kinematics(
        robot.random_configuration(n, torch.Generator().manual_seed(0)), links
    )
    g = torch.Generator().manual_seed(1)
    start = time.process_time()
    result = solve_wholebody(robot, dict(zip(links, poses.unbind(1), strict=True)), generator=g,
                      num_seeds=num_seeds)  # fmt: skip
    seconds = time.process_time() - start
    note = "emulated floating base (6 joints), both feet's and hands' poses"
    rate = result.success.any(-1).float().mean().item()
    return {"targets": n, "success": rate, "cpu_s": seconds, "settings": note}


def quaternion_g1() -> Robot:
    """The G1 on a real floating base (position + quaternion), float64."""
    return Robot.from_urdf(bundled_urdf("g1"), dtype=torch.float64, floating_base=True)


def beside_a_free_box(robot: Robot) -> Robot:
    """``robot`` (a fixed base) beside a free box, in its dtype: a scene as the MJCF reader
    builds one (a floating joint from the root beside the robot's joints; ``q`` starts with
    the box's 7 coordinates), made from the robot's description without mujoco."""
    model = robot.model
    box = Joint("box_free", "floating", model.root, "box", origin=Origin((0.6, 0.0, 0.0)))
    scene = replace(model, links=(model.root, "box", *model.links[1:]), joints=(box, *model.joints))
    return Robot(scene, dtype=robot.dtype)


def scene_g1() -> Robot:
    """The G1 (pelvis fixed) beside a free box, float64 (:func:`beside_a_free_box`)."""
    return beside_a_free_box(Robot.from_urdf(bundled_urdf("g1"), dtype=torch.float64))


def run_quaternion(n: int, num_seeds: int) -> dict[str, Any]:
    """The G1 on a real floating base (``floating_base=True``: position + quaternion, steps in
    the tangent space); targets: both feet's and hands' poses of uniform random joints, the
    base anywhere in a 2 m cube with any orientation (seed 0). Success by FK here."""
    robot = quaternion_g1()
    links = [*FEET, *HANDS]
    g = torch.Generator().manual_seed(0)
    q = robot.random_configuration(n, g)
    q[:, :3] = 2 * torch.rand(n, 3, generator=g, dtype=q.dtype) - 1
    poses = robot.forward_kinematics(q, links)
    g = torch.Generator().manual_seed(1)
    start = time.process_time()
    result = solve_wholebody(robot, dict(zip(links, poses.unbind(1), strict=True)), generator=g,
                      num_seeds=num_seeds)  # fmt: skip
    seconds = time.process_time() - start
    ok = torch.stack([success(robot, result.q[:, k], poses, links) for k in range(num_seeds)])
    note = "quaternion floating base (`floating_base=True`), both feet's and hands' poses"
    iters = result.iterations.float().mean().item()
    return {"targets": n, "success": ok.any(0).float().mean().item(), "cpu_s": seconds,
            "mean_iterations": iters, "settings": note}  # fmt: skip


def run_anchor(
    robot: Any, poses: Tensor, solve_one: Callable[[Tensor, Tensor], Tensor], starts: int
) -> dict[str, Any]:
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


def wholebody_markdown(stamp: dict[str, Any], rows: dict[str, dict[str, Any]]) -> str:
    """The results file: title, machine stamp, the protocol in words, one row per method."""
    report = Report("wholebody", TITLE, stamp=stamp, measured_here=False)
    warning = load_warning(stamp)
    lines = [f"# {TITLE}", "", report.stamp_markdown(), *([warning] if warning else []),
             "CPU time (`time.process_time`), `torch.set_num_threads(1)`, on a shared machine. "
             "Success checked here by FK in float64: both hands within 1 mm and 1°, every "
             "joint within limits. Targets: FK poses of configurations uniform in the limits "
             "(seed 0). torchik: one batched call, its own seeds (the nearest of a "
             "uniform random pool, never the answer); the 'one target per call' row solves "
             "each target in a call of its own, as the anchors are driven (its notes give the "
             "calls' CPU time). Anchors: the same targets, uniform random "
             "starts (seed 1), each iterated through the library's documented loop; the next "
             "start only when FK says the last one failed. The emulated floating-base rows put "
             "3 slides (±1 m) and 3 Euler hinges above the pelvis; the quaternion-base rows load "
             "the G1 with `floating_base=True` (position + quaternion, steps in the tangent "
             "space), targets: both feet's and hands' poses, the base anywhere in a 2 m cube "
             "with any orientation; each seed's base is fitted to the targets (weighted "
             "Procrustes), never taken from the configuration behind them; success by FK here "
             "(all four links within 1 mm and 1°).", "",
             "| method | targets | success | CPU time, all targets | per target | notes | status |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, row in rows.items():
        status = row.get("status", "ok")
        if "success" not in row:
            lines.append(f"| {name} | — | — | — | — | — | {status} |")
            continue
        per, note = row["cpu_s"] / row["targets"], row.get("settings", "")
        cells = [row["targets"], f"{100 * row['success']:.1f} %", f"{row['cpu_s']:.3f} s",
                 f"{1e3 * per:.2f} ms", note, status]  # fmt: skip
        lines.append(f"| {name} | " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines) + "\n"
