"""Rows and robots for the tests of the fused LM kernels (Triton's and the CPU's): targets far
and near, joints on their limits, robots with prismatic, continuous, mimic joints and branches."""

from __future__ import annotations

import torch

from tests.paths import DATA
from torchik import Robot, load_robot
from torchik.ik.base import IKProblem, LinkTarget
from torchik.ik.lm import LevenbergMarquardt, LMSettings

SETTINGS = LMSettings(rotation_weight=0.3, damping=0.1, damping_floor=1e-6)


def case_robot(name: str) -> Robot:
    """A bundled robot, or a test URDF of ``tests/data/urdf`` (float64)."""
    if name in ("panda", "ur5"):
        return load_robot(name, dtype=torch.float64)
    return Robot.from_urdf(DATA / "urdf" / f"{name}.urdf", dtype=torch.float64)


def lm_rows(robot: Robot, link: str, n: int = 160):
    """``q`` with some joints on a limit, and targets far and near."""
    g = torch.Generator().manual_seed(n)
    q = robot.random_configuration(n, generator=g)
    on_limit = torch.rand(q.shape, generator=g) < 0.15
    q = torch.where(on_limit, torch.where(torch.rand(q.shape, generator=g) < 0.5, robot.lower,
                                          robot.upper), q)  # fmt: skip
    q = torch.where(torch.isfinite(q), q, 0.0)  # unlimited prismatic joints stay at 0
    far = robot.forward_kinematics(robot.random_configuration(n, generator=g), link)
    near = robot.forward_kinematics(q + 1e-3 * torch.randn(q.shape, generator=g, dtype=q.dtype),
                                    link)  # fmt: skip
    pose = torch.where((torch.arange(n) % 2 == 0)[:, None, None], far, near)
    return q, pose[:, :3, 3].contiguous(), pose[:, :3, :3].contiguous()


def lm_problem(robot, link, position, rotmat) -> IKProblem:
    """One row per target, tolerances that no row meets (every row steps)."""
    target = LinkTarget(link, position, rotmat)
    return IKProblem(robot, (target,), torch.arange(len(position)), 1e-9, 1e-9)


def solver_step(name: str, link: str | None, pose: bool):
    """A case's robot, link, rows (``q``, target position, rotation or ``None``), the solver's
    linearization at ``q`` and its projected step: what the kernels must give."""
    robot = case_robot(name)
    link = link or robot.link_names[-1]
    q, position, rotmat = lm_rows(robot, link)
    rotmat = rotmat if pose else None
    problem, solver = lm_problem(robot, link, position, rotmat), LevenbergMarquardt(SETTINGS)
    lin = solver.linearize(problem, q)
    expected = problem.project(solver.step(problem, q, lin, {}))
    assert not torch.equal(expected, problem.project(q))  # the rows do move
    return robot, link, (q, position, rotmat), lin, expected


CASES = [("panda", "panda_hand", True), ("panda", "panda_link5", False), ("ur5", "ee_link", True),
         ("prismatic_continuous", None, True), ("mimic", None, True), ("two_branches", None, True),
         ("tilted_axes", None, False)]  # fmt: skip
