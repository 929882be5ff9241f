"""``torchik info``: joints, limits, links, end link and reach of a robot."""

from __future__ import annotations

import argparse
import math

import torch

from torchik.cli.common import _end_link, _positive_int, _urdf_model


def add_parser(sub) -> None:
    p = sub.add_parser("info", help="joints, limits, links, end link and reach of a robot")
    p.add_argument("robot", help="bundled name, planar:L1,L2,..., a URDF or an MJCF file")
    p.add_argument("--samples", type=_positive_int, default=10000, help="FK samples for the reach")
    p.add_argument("--link", help="link for the reach (default: the robot's end link)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from torchik.robot.robot import Robot

    model = _urdf_model(args.robot)
    robot = Robot(model, dtype=torch.float64)
    try:
        link, why = _end_link(args, robot), ""
    except ValueError as err:  # no single default: show the robot anyway, say why
        if args.link is not None:
            raise
        link, why = None, str(err)
    print(f"robot     {robot.name}  (root {robot.root}, {robot.dof} dof, end link {link or '?'})")
    moving = sum(j.type != "fixed" and j.mimic is None for j in model.joints)
    print(f"joints    {moving} moving of {len(model.joints)}; q has {robot.dof} coordinates")
    for row in _joint_rows(model, robot):
        print("  " + row)
    print(f"links     {len(robot.link_names)}: {', '.join(robot.link_names)}")
    if robot.scene:
        print(_bodies_text(robot))
    print(_reach_text(robot, link, args.samples) if link else f"reach     ? ({why})")
    return 0


def _bodies_text(robot) -> str:
    """A scene's bodies (free bodies beside a fixed tree, :meth:`Robot.scene_body`), each with
    its own joints; IK moves the one that carries its targets."""
    parts = []
    for base in (None, *range(robot.floating_bases)):
        name = "the world's tree" if base is None else f"free body {robot.base_link(base)}"
        try:
            body, _ = robot.scene_body(base)
        except ValueError:  # a joint that mimics one of another body
            parts.append(f"{name} (a joint mimics another body's)")
            continue
        joints = body.n_joints
        parts.append(f"{name} ({joints} joint{'s' if joints != 1 else ''})")
    return (f"bodies    {len(parts)}: {', '.join(parts)}; IK moves the body that carries its "
            "targets, the others stay where the file puts them")  # fmt: skip


def _joint_rows(model, robot) -> list[str]:
    """One row per joint; a continuous joint shows the range ``q`` is drawn from (±π, as
    ``robot.lower``/``upper``), a floating or planar joint the coordinates it becomes."""
    bounds = zip(robot.lower.tolist(), robot.upper.tolist(), strict=True)
    limits = dict(zip(robot.joint_names, bounds, strict=True))
    rows = [f"{'name':<20} {'type':<11} {'lower':>9} {'upper':>9}  unit  note"]
    for j in model.joints:
        unit, note = ("m" if j.type == "prismatic" else "rad"), ""
        if j.type == "fixed":
            lo = hi = unit = ""
        elif j.type in ("floating", "planar"):
            lo = hi = unit = "-"
            names = [n for n in robot.joint_names if n.startswith(f"{j.name}/")]
            note = f"coordinates {', '.join(names)}"
        else:
            lower, upper = limits.get(j.name, (j.lower, j.upper))
            lo, hi = f"{lower:.4f}", f"{upper:.4f}"
            note = "wraps around (any angle)" if j.type == "continuous" else ""
        if j.mimic is not None:
            note = f"mimics {j.mimic.joint}"
        rows.append(f"{j.name:<20} {j.type:<11} {lo:>9} {hi:>9}  {unit:<4}  {note}".rstrip())
    return rows


_REACH_POSES = 2**21
"""Link poses computed at once for the reach: the samples go in chunks of this many divided
by the links (256 MB of float64 poses; 10 000 samples of a 5 000-link chain took 6.1 GB)."""


def _reach_text(robot, link: str, n: int) -> str:
    gen = torch.Generator().manual_seed(0)
    chunk = max(1, _REACH_POSES // max(1, len(robot.link_names)))
    reach, lo, hi = 0.0, torch.full((3,), math.inf), torch.full((3,), -math.inf)
    with torch.no_grad():
        for start in range(0, n, chunk):
            q = robot.random_configuration(min(chunk, n - start), gen)
            points = robot.link_positions(q, link).cpu()
            reach = max(reach, points.norm(dim=-1).max().item())
            lo, hi = torch.minimum(lo, points.amin(dim=0)), torch.maximum(hi, points.amax(dim=0))
    box = ", ".join(
        f"{a} [{b:.3f}, {c:.3f}]" for a, b, c in zip("xyz", lo.tolist(), hi.tolist(), strict=True)
    )
    return (
        f"reach     ~{reach:.3f} m from the root origin to {link} (largest of {n} random "
        "configurations)\n"
        f"workspace {box} m"
    )
