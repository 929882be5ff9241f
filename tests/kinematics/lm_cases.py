"""Rows and robots for the tests of the fused LM kernels (Triton's and the CPU's): targets far
and near, joints on their limits, robots with prismatic, continuous, mimic joints and branches."""

from __future__ import annotations

import torch
from torch import Tensor

from tests.paths import DATA
from torchik import Robot, load_robot
from torchik.ik.base import IKProblem, JointLimits, LinkTarget
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


def lm_problem(robot, link, position, rotmat, box=None) -> IKProblem:
    """One row per target, tolerances that no row meets (every row steps); ``box``: ``(lower,
    upper)`` per row (:meth:`JointLimits.within`)."""
    target = LinkTarget(link, position, rotmat)
    limits = JointLimits.of(robot) if box is None else JointLimits.of(robot).within(*box)
    return IKProblem(robot, (target,), torch.arange(len(position)), 1e-9, 1e-9, limits)


def boxes(robot: Robot, q: Tensor, seed: int = 0) -> tuple[Tensor, Tensor]:
    """A box per row around ``q (B, D)``: 0.05 to 1 rad (m) either side, unlimited prismatic
    joints included; continuous joints' boxes where ``q`` is (anywhere on the real line)."""
    g = torch.Generator().manual_seed(seed)
    below, above = (0.05 + 0.95 * torch.rand(q.shape, generator=g, dtype=q.dtype) for _ in "ab")
    return q - below, q + above


def solver_step(name: str, link: str | None, pose: bool, box: bool = False):
    """A case's robot, link, rows (``q``, target position, rotation or ``None``), the solver's
    linearization at ``q`` and its projected step (within a box per row with ``box``, then
    the last item: the problem's limits): what the kernels must give."""
    robot = case_robot(name)
    link = link or robot.link_names[-1]
    q, position, rotmat = lm_rows(robot, link)
    rotmat = rotmat if pose else None
    problem = lm_problem(robot, link, position, rotmat, boxes(robot, q) if box else None)
    solver = LevenbergMarquardt(SETTINGS)
    lin = solver.linearize(problem, q)
    expected = problem.project(solver.step(problem, q, lin, {}))
    assert not torch.equal(expected, problem.project(q))  # the rows do move
    return robot, link, (q, position, rotmat), lin, expected, problem.limits


CASES = [("panda", "panda_hand", True), ("panda", "panda_link5", False), ("ur5", "ee_link", True),
         ("prismatic_continuous", None, True), ("mimic", None, True), ("two_branches", None, True),
         ("tilted_axes", None, False)]  # fmt: skip
