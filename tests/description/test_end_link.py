"""The default end link in the library's entry points, and one chain out of a tree:
``robot.chain(base, link)`` and ``Robot.from_urdf(..., link=...)``."""

from __future__ import annotations

import pytest
import torch

import torchik
from tests.paths import DATA
from torchik import Robot

URDF = DATA / "urdf"


def test_a_ur10_file_is_solved_at_its_flange_without_naming_it():
    robot = Robot.from_urdf(URDF / "ur10_robot.urdf", dtype=torch.float64)
    q = robot.random_configuration(20, torch.Generator().manual_seed(0))
    target = robot.forward_kinematics(q, "ee_link")
    assert torchik.solve_ik(robot, target).success_rate == 1.0  # was 0.0: it placed `base`
    assert torchik.make_dataset(robot, 5).spec.link == "ee_link"  # was "pass link=..."


def _same_fk(full: Robot, sub: Robot, base: str, generator: torch.Generator) -> None:
    q = full.random_configuration(64, generator)
    index = [full.joint_names.index(name) for name in sub.joint_names]
    t_base = full.forward_kinematics(q, base)
    for link in sub.link_names:
        expected = torch.linalg.solve(t_base, full.forward_kinematics(q, link))
        actual = sub.forward_kinematics(q[:, index], link)
        torch.testing.assert_close(actual, expected, rtol=0, atol=1e-12)


def test_one_arm_of_a_tree_has_the_same_fk():
    full = Robot.from_urdf(URDF / "two_branches.urdf", dtype=torch.float64)
    right = full.chain("base", "right_tip")
    assert right.root == "base" and right.link_names == ("base", "trunk", "right1", "right2",
                                                        "right_tip")  # fmt: skip
    assert right.joint_names == ("trunk_yaw", "right_pitch", "right_roll")
    _same_fk(full, right, "base", torch.Generator().manual_seed(0))
    forearm = full.chain("trunk", "right_tip")  # a base that is not the root
    assert forearm.joint_names == ("right_pitch", "right_roll") and forearm.dtype == torch.float64
    _same_fk(full, forearm, "trunk", torch.Generator().manual_seed(1))
    assert torchik.description.default_end_link(full.chain("base", "left_tip")) == "left_tip"


def test_from_urdf_with_a_tip_drops_the_other_frames():
    full = Robot.from_urdf(URDF / "ur10_robot.urdf", dtype=torch.float64)
    arm = Robot.from_urdf(URDF / "ur10_robot.urdf", dtype=torch.float64, link="tool0")
    assert arm.root == "world" and arm.link_names[-1] == "tool0" and arm.dof == 6
    assert "base" not in arm.link_names and "ee_link" not in arm.link_names
    _same_fk(full, arm, "world", torch.Generator().manual_seed(2))


def test_chain_with_one_link_still_names_the_links():
    robot = torchik.load_robot("panda")
    assert robot.links_to("panda_link2") == ("panda_link0", "panda_link1", "panda_link2")
    assert robot.chain("panda_link2", "panda_hand").dof == 5


def test_chain_refuses_links_off_the_path_and_orphaned_mimics():
    full = Robot.from_urdf(URDF / "two_branches.urdf")
    with pytest.raises(ValueError, match="'left1' is not on the path from the root to 'right_tip'"):
        full.chain("left1", "right_tip")
    with pytest.raises(ValueError, match="unknown link 'nope'"):
        full.chain("base", "nope")
    mimic = Robot.from_urdf(URDF / "mimic.urdf")
    follower = next(j for j in mimic.model.joints if j.mimic is not None)
    with pytest.raises(ValueError, match=f"mimics {follower.mimic.joint!r}"):
        mimic.chain(follower.parent, follower.child)
