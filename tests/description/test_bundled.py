"""Bundled robot descriptions and the planar / rail arm generators.

The expected joints are the tables of ROBOTS.md, written out literally here; forward kinematics
is a small numpy 4x4 product over the parsed joints, independent of torchik's torch kernels.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.paths import DATA, ROBOT_FILES, SHARED
from torchik.description import (
    BUNDLED,
    END_LINKS,
    RAIL_ARM_LENGTHS,
    RAIL_ARM_PRIOR_STD,
    Joint,
    URDFModel,
    bundled_urdf,
    default_end_link,
    list_robots,
    parse_urdf,
    planar_arm_urdf,
    rail_arm_urdf,
)

PI = math.pi
shared = SHARED
FIXTURES = shared / "fixtures"
needs_shared = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"shared fixtures not found at {FIXTURES}"
)

Z, Y, NZ = (0.0, 0.0, 1.0), (0.0, 1.0, 0.0), (0.0, 0.0, -1.0)
H, Q = PI / 2, PI / 4
FIXED = (None, None, None)  # axis, lower, upper of a fixed joint

# The tables of ROBOTS.md. Each robot is a serial chain: joint i links chain[i] -> chain[i + 1].
# Rows: name, origin xyz, origin rpy, axis, lower, upper; the fixed joints have no axis.
PANDA_CHAIN = [
    "panda_link0",
    *(f"panda_link{i}" for i in range(1, 9)),
    "panda_hand",
    "panda_hand_tcp",
]
PANDA = [
    ("panda_joint1", (0, 0, 0.333), (0, 0, 0), Z, -2.8973, 2.8973),
    ("panda_joint2", (0, 0, 0), (-H, 0, 0), Z, -1.7628, 1.7628),
    ("panda_joint3", (0, -0.316, 0), (H, 0, 0), Z, -2.8973, 2.8973),
    ("panda_joint4", (0.0825, 0, 0), (H, 0, 0), Z, -3.0718, -0.0698),
    ("panda_joint5", (-0.0825, 0.384, 0), (-H, 0, 0), Z, -2.8973, 2.8973),
    ("panda_joint6", (0, 0, 0), (H, 0, 0), Z, -0.0175, 3.7525),
    ("panda_joint7", (0.088, 0, 0), (H, 0, 0), Z, -2.8973, 2.8973),
    ("panda_joint8", (0, 0, 0.107), (0, 0, 0), *FIXED),
    ("panda_hand_joint", (0, 0, 0), (0, 0, -Q), *FIXED),
    ("panda_hand_tcp_joint", (0, 0, 0.1034), (0, 0, 0), *FIXED),
]  # fmt: skip
UR5_CHAIN = [
    "base_link", "shoulder_link", "upper_arm_link", "forearm_link",
    "wrist_1_link", "wrist_2_link", "wrist_3_link", "ee_link",
]  # fmt: skip
UR5 = [
    ("shoulder_pan_joint", (0, 0, 0.089159), (0, 0, 0), Z, -PI, PI),
    ("shoulder_lift_joint", (0, 0.13585, 0), (0, H, 0), Y, -PI, PI),
    ("elbow_joint", (0, -0.1197, 0.425), (0, 0, 0), Y, -2.5, 2.5),
    ("wrist_1_joint", (0, 0, 0.39225), (0, H, 0), Y, -PI, PI),
    ("wrist_2_joint", (0, 0.093, 0), (0, 0, 0), Z, -PI, PI),
    ("wrist_3_joint", (0, 0, 0.09465), (0, 0, 0), Y, -PI, PI),
    ("ee_fixed_joint", (0, 0.0823, 0), (0, 0, H), *FIXED),
]  # fmt: skip
DIGIT_CHAIN = [
    "base_link", "left_shoulder_roll", "left_shoulder_pitch", "left_shoulder_yaw",
    "left_elbow", "left_hand",
]  # fmt: skip
DIGIT_ARM = [
    ("shoulder_roll_joint_left", (-0.001, 0.12, 0.4), (-H, -1.3962633, H), Z, -1.309, 1.309),
    ("shoulder_pitch_joint_left", (-0.00317, -0.011055, 0.0555), (H, Q, -0.2792527),
        NZ, -2.5307, 2.5307),
    ("shoulder_yaw_joint_left", (0, -0.165, -0.1), (H, 0, 0), Z, -1.7453, 1.7453),
    ("elbow_joint_left", (0, -0.0385, 0.185), (H, -0.3926991, 0), Z, -1.3526, 1.3526),
    ("hand_left", (0.369, 0, -0.07912), (H, 0, -0.1745329252), *FIXED),
]  # fmt: skip


def _snake(n: int) -> tuple[list[str], list[tuple]]:
    """The Neural IK paper's planar chain: links of 0.1 m along x, axes z, limits +-pi."""
    chain = ["base", *(f"link_{i}" for i in range(1, n + 1)), "ee"]
    rows = [
        (f"joint_{i}", (0.1 if i > 1 else 0, 0, 0), (0, 0, 0), Z, -PI, PI) for i in range(1, n + 1)
    ]
    return chain, [*rows, ("ee_joint", (0.1, 0, 0), (0, 0, 0), *FIXED)]


EXPECTED = {
    "panda": (PANDA_CHAIN, PANDA),
    "ur5": (UR5_CHAIN, UR5),
    "digit_arm": (DIGIT_CHAIN, DIGIT_ARM),
    "snake2": _snake(2),
    "snake4": _snake(4),
}

# bundled name -> fixture URDF (and fk_reference.json key) carrying the same numbers
FIXTURE_OF = {"panda": "panda", "ur5": "ur5_robot", "digit_arm": "digit_arm"}


# ----------------------------------------------------------------------------- numpy FK


def _rpy_matrix(rpy) -> np.ndarray:
    """Fixed-axis roll-pitch-yaw: ``Rz(yaw) @ Ry(pitch) @ Rx(roll)``."""
    (cr, cp, cy), (sr, sp, sy) = np.cos(rpy), np.sin(rpy)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def _transform(rotation: np.ndarray, translation) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3], t[:3, 3] = rotation, translation
    return t


def _motion(joint: Joint, q: float) -> np.ndarray:
    """The joint's own motion, in the joint frame (after its origin)."""
    axis = np.asarray(joint.axis, dtype=float)
    if joint.type == "prismatic":
        return _transform(np.eye(3), q * axis)
    if joint.type in ("revolute", "continuous"):
        k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
        rotation = np.eye(3) + math.sin(q) * k + (1 - math.cos(q)) * k @ k  # Rodrigues
        return _transform(rotation, np.zeros(3))
    return np.eye(4)


def link_poses(model: URDFModel, q: dict[str, float]) -> dict[str, np.ndarray]:
    """``T_root_link`` for every link; joints absent from ``q`` sit at 0."""
    poses = {model.root: np.eye(4)}
    for joint in model.joints:  # topological order: parents first
        origin = _transform(_rpy_matrix(joint.origin.rpy), joint.origin.xyz)
        poses[joint.child] = poses[joint.parent] @ origin @ _motion(joint, q.get(joint.name, 0.0))
    return poses


def _actuated(model: URDFModel) -> list[Joint]:
    return [j for j in model.joints if j.type != "fixed"]


# ----------------------------------------------------------------------------- bundled files


FILES = sorted(set(BUNDLED) - {"rail_arm"})  # rail_arm is generated by rail_arm_urdf()
CONVERTED = {"g1": "Licence: BSD-3-Clause"}  # upstream URDFs stripped to kinematics: their licence


def test_bundled_names_match_the_files_on_disk():
    folder = ROBOT_FILES
    if folder.is_dir():
        assert {p.stem for p in folder.glob("*.urdf")} == set(FILES)
    assert set(BUNDLED) <= set(END_LINKS)
    assert set(EXPECTED) == set(FILES) - set(CONVERTED)


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(ValueError, match="no bundled robot named 'kuka'") as info:
        bundled_urdf("kuka")
    for name in BUNDLED:
        assert name in str(info.value)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bundled_joints_match_robots_md(name):
    model = parse_urdf(bundled_urdf(name))
    chain, table = EXPECTED[name]
    assert model.name == name
    assert list(model.links) == chain
    assert [j.name for j in model.joints] == [row[0] for row in table]
    for i, (joint, row) in enumerate(zip(model.joints, table, strict=True)):
        _, xyz, rpy, axis, lower, upper = row
        assert (joint.parent, joint.child) == (chain[i], chain[i + 1]), joint.name
        assert joint.type == ("fixed" if axis is None else "revolute"), joint.name
        np.testing.assert_allclose(joint.origin.xyz, xyz, rtol=0, atol=1e-15, err_msg=joint.name)
        np.testing.assert_allclose(joint.origin.rpy, rpy, rtol=0, atol=1e-15, err_msg=joint.name)
        if axis is not None:
            assert joint.axis == axis, joint.name
            assert (joint.lower, joint.upper) == (lower, upper), joint.name
            assert joint.mimic is None


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_default_end_link_is_the_tip_of_the_chain(name):
    model = parse_urdf(bundled_urdf(name))
    assert END_LINKS[name] in model.links
    dofs = {"panda": 7, "ur5": 6, "digit_arm": 4, "snake2": 2, "snake4": 4, "rail_arm": 4, "g1": 29}
    assert len(_actuated(model)) == dofs[name]


@pytest.mark.parametrize("name", FILES)
def test_bundled_files_are_kinematics_only(name):
    text = bundled_urdf(name)
    assert text.startswith('<?xml version="1.0"?>\n<!-- ')
    origin = CONVERTED.get(name, "written for torchik from its published kinematic parameters")
    assert origin in " ".join(text.split())
    for tag in ("<mesh", "<inertial", "<visual", "<collision", "<safety_controller", "<mimic"):
        assert tag not in text, tag
    assert not any("finger" in j.name for j in parse_urdf(text).joints)


@pytest.mark.parametrize("n", [2, 4])
def test_bundled_snakes_equal_the_generated_planar_arm(n):
    bundled = parse_urdf(bundled_urdf(f"snake{n}"))
    generated = parse_urdf(planar_arm_urdf([0.1] * n, name=f"snake{n}"))
    assert bundled == generated


# ----------------------------------------------------------------------------- shared fixtures


@needs_shared
@pytest.mark.parametrize("name", sorted(FIXTURE_OF))
def test_origins_equal_the_shared_fixture(name):
    """Fixture files write pi/2 as 1.57079632679 (5e-12 off); ours carry full precision."""
    ours = parse_urdf(bundled_urdf(name))
    fixture_path = FIXTURES / "urdf" / f"{FIXTURE_OF[name]}.urdf"
    theirs = {j.name: j for j in parse_urdf(fixture_path.read_text()).joints}
    for joint in ours.joints:
        other = theirs[joint.name]
        assert (joint.type, joint.parent, joint.child) == (other.type, other.parent, other.child)
        np.testing.assert_allclose(joint.origin.xyz, other.origin.xyz, rtol=0, atol=1e-12)
        np.testing.assert_allclose(joint.origin.rpy, other.origin.rpy, rtol=0, atol=1e-10)
        if joint.type != "fixed":
            assert joint.axis == other.axis


@needs_shared
@pytest.mark.parametrize("name", sorted(FIXTURE_OF))
def test_link_poses_match_the_reference(name):
    """Pinocchio's poses (fk_reference.json) for every link the bundled chain shares."""
    reference = json.loads((FIXTURES / "fk_reference.json").read_text())
    entry = reference["robots"][FIXTURE_OF[name]]
    model = parse_urdf(bundled_urdf(name))
    for sample in entry["samples"]:
        poses = link_poses(model, sample["q"])
        shared_links = set(poses) & set(sample["links"])
        assert END_LINKS[name] in shared_links
        for link in shared_links:
            expected = sample["links"][link]
            np.testing.assert_allclose(poses[link][:3, 3], expected["xyz"], atol=1e-9, err_msg=link)
            np.testing.assert_allclose(
                poses[link][:3, :3], expected["rotation"], atol=1e-9, err_msg=link
            )


# ----------------------------------------------------------------------------- planar arms


@pytest.mark.parametrize(
    "lengths", [[], [0.0], [1.0, -0.5], [1.0, math.nan], [math.inf], ["a"], [None]]
)
def test_planar_arm_rejects_bad_lengths(lengths):
    with pytest.raises(ValueError, match="link length|at least one"):
        planar_arm_urdf(lengths)


@pytest.mark.parametrize("lower, upper", [(1.0, 1.0), (1.0, -1.0), (-math.inf, 0.0), (0, math.nan)])
def test_planar_arm_rejects_bad_limits(lower, upper):
    with pytest.raises(ValueError, match="lower < upper"):
        planar_arm_urdf([1.0, 1.0], lower, upper)


def test_planar_arm_refuses_arguments_of_the_wrong_kind_in_one_line():
    """A name that is not a str (None raised an AttributeError), lengths that are no sequence
    or beyond the floats (an OverflowError), limits that are no numbers or no bool."""
    cases = [
        ({"name": None}, TypeError, "name must be a str, got NoneType None"),
        ({"link_lengths": 5}, TypeError, "link_lengths must be a sequence of numbers, got 5"),
        ({"link_lengths": np.array(1.0)}, TypeError, "link_lengths must be a sequence"),
        ({"link_lengths": "12"}, TypeError, "link_lengths must be a sequence"),
        ({"link_lengths": [10**400]}, ValueError, "link length 1 of 1 is not a number"),
        ({"link_lengths": [1.0, -0.5]}, ValueError, "link length 2 of 2 must be positive and fi"),
        ({"lower": "3"}, TypeError, "lower must be a number, got str '3'"),
        ({"upper": None}, TypeError, "upper must be a number"),
        ({"upper": 10**400}, ValueError, "joint limits must be finite"),
        ({"limits": 1}, TypeError, "limits must be True or False"),
    ]
    for bad, error, match in cases:
        with pytest.raises(error, match=match) as caught:
            planar_arm_urdf(**{"link_lengths": [1.0, 0.5], **bad})
        assert "\n" not in str(caught.value)
    assert '<robot name="">' in planar_arm_urdf([1.0], name="")
    assert 'type="continuous"' in planar_arm_urdf([1.0], None, None, limits=False)


def test_planar_arm_without_limits_has_continuous_joints():
    model = parse_urdf(planar_arm_urdf([1.0, 2.0], math.nan, math.nan, limits=False))
    joints = _actuated(model)
    assert [j.type for j in joints] == ["continuous", "continuous"]
    assert all(j.lower is None and j.upper is None for j in joints)


def test_planar_arm_name_and_limits():
    model = parse_urdf(planar_arm_urdf(np.array([0.3, 0.2]), -1.5, 2.0, name='arm "A" & B'))
    assert model.name == 'arm "A" & B'
    assert model.root == "base"
    assert [(j.name, j.lower, j.upper) for j in _actuated(model)] == [
        ("joint_1", -1.5, 2.0),
        ("joint_2", -1.5, 2.0),
    ]


@pytest.mark.parametrize("n", [1, 2, 4, 7])
def test_planar_arm_matches_the_closed_form(n):
    rng = np.random.default_rng(n)
    lengths = rng.uniform(0.1, 2.0, n)
    model = parse_urdf(planar_arm_urdf(lengths.tolist()))
    assert [j.name for j in _actuated(model)] == [f"joint_{i}" for i in range(1, n + 1)]
    for theta in rng.uniform(-PI, PI, (8, n)):
        poses = link_poses(model, {f"joint_{i + 1}": t for i, t in enumerate(theta)})
        cumulative = np.cumsum(theta)
        tip = [lengths @ np.cos(cumulative), lengths @ np.sin(cumulative), 0.0]
        np.testing.assert_allclose(poses["ee"][:3, 3], tip, atol=1e-12)
        # the end frame turns with the total angle
        np.testing.assert_allclose(
            poses["ee"][:3, :3], _rpy_matrix([0, 0, cumulative[-1]]), atol=1e-12
        )


def test_rail_arm_structure():
    model = parse_urdf(rail_arm_urdf())
    joints = _actuated(model)
    assert [(j.name, j.type, j.axis) for j in joints] == [
        ("rail", "prismatic", Y),
        ("joint_1", "revolute", Z),
        ("joint_2", "revolute", Z),
        ("joint_3", "revolute", Z),
    ]
    # limits are wide enough never to clip the N(0, diag(std)^2) prior (>= 6 std)
    for joint, std in zip(joints, RAIL_ARM_PRIOR_STD, strict=True):
        assert joint.lower <= -6 * std and joint.upper >= 6 * std
    assert END_LINKS["rail_arm"] in model.links
    assert RAIL_ARM_LENGTHS == (0.5, 0.5, 1.0)


def test_rail_arm_matches_the_closed_form():
    model = parse_urdf(rail_arm_urdf())
    lengths = np.array(RAIL_ARM_LENGTHS)
    rng = np.random.default_rng(0)
    for x in rng.normal(0.0, RAIL_ARM_PRIOR_STD, (16, 4)):
        h, theta = x[0], np.cumsum(x[1:])
        q = dict(zip(["rail", "joint_1", "joint_2", "joint_3"], x, strict=True))
        end = link_poses(model, q)["ee"][:3, 3]
        expected = [lengths @ np.cos(theta), h + lengths @ np.sin(theta), 0.0]
        np.testing.assert_allclose(end, expected, atol=1e-12)
    # at zero the arm lies along +x, at height 0
    np.testing.assert_allclose(link_poses(model, {})["ee"][:3, 3], [2.0, 0.0, 0.0], atol=1e-15)


# ----------------------------------------------------------------------------- the default end link
URDF = DATA / "urdf"


def test_default_end_link_of_a_ur10_file_is_its_flange_not_the_root_frame():
    # ur_description's layout: the last link in tree order is `base`, fixed at the root
    model = parse_urdf(URDF / "ur10_robot.urdf")
    assert model.links[-1] == "base"
    assert default_end_link(model) == "ee_link"  # ee_link and tool0: one body, file order


def test_default_end_link_keeps_the_named_tips_and_accepts_a_robot():
    import torchik

    for name in list_robots():
        assert default_end_link(torchik.load_robot(name)) == END_LINKS[name]
    assert default_end_link(parse_urdf(planar_arm_urdf([1.0], name="planar_x"))) == "ee"


def test_default_end_link_takes_the_longest_movable_chain():
    model = parse_urdf(URDF / "two_branches.urdf")  # left: 2 moving joints, right: 3
    assert default_end_link(model) == "right_tip"


def _tree(*joints: tuple[str, str, str, str]) -> str:
    links = {"root"} | {j[3] for j in joints}
    body = [f'<link name="{link}"/>' for link in sorted(links)]
    for name, kind, parent, child in joints:
        limit = '<limit lower="-1" upper="1"/>' if kind == "revolute" else ""
        body.append(f'<joint name="{name}" type="{kind}"><parent link="{parent}"/>'
                    f'<child link="{child}"/>{limit}</joint>')  # fmt: skip
    return f'<robot name="tree">{"".join(body)}</robot>'


def test_default_end_link_refuses_two_equal_branches_and_lists_them():
    text = _tree(("a", "revolute", "root", "l1"), ("b", "revolute", "root", "r1"),
                 ("c", "fixed", "r1", "r_tip"))  # fmt: skip
    with pytest.raises(ValueError, match=r"end in \['l1', 'r_tip'\]; name one"):
        default_end_link(parse_urdf(text))


def test_default_end_link_never_a_link_without_a_moving_joint_above():
    text = _tree(("a", "fixed", "root", "frame"), ("b", "revolute", "root", "arm"),
                 ("c", "fixed", "arm", "tip"), ("d", "fixed", "tip", "deeper"))  # fmt: skip
    assert default_end_link(parse_urdf(text)) == "deeper"
    with pytest.raises(ValueError, match="no moving joint"):
        default_end_link(parse_urdf(_tree(("a", "fixed", "root", "frame"))))


def test_list_robots_names_every_loadable_robot():
    import torchik

    assert torchik.list_robots() == list_robots() == sorted(BUNDLED)
    assert "rail_arm" in BUNDLED
    for name in list_robots():
        assert torchik.load_robot(name).dof >= 2
        assert parse_urdf(bundled_urdf(name)).name == name


def test_g1_matches_pinocchio_on_the_upstream_urdf():
    """The stripped G1 keeps the kinematics: poses from Pinocchio 3.8 on example-robot-data's
    g1_29dof_rev_1_0.urdf at q_i = 0.1 ((i mod 7) - 3), joints in file order."""
    import torch

    import torchik

    robot = torchik.load_robot("g1", dtype=torch.float64)
    assert robot.joint_names[:2] == ("left_hip_pitch_joint", "left_hip_roll_joint")
    q = torch.tensor([0.1 * ((i % 7) - 3) for i in range(29)], dtype=torch.float64)
    expected = {
        "left_rubber_hand": (
            [0.2296349470246118, 0.11029360602038875, 0.20167806380431155],
            [0.9902747501829066, 0.13828338438154797, -0.015284788325888754,
             -0.1321843466686086, 0.9009043849640506, -0.4133988239561631,
             -0.043396055649969414, 0.4113988268779222, 0.9104217635785592],
        ),
        "right_ankle_roll_link": (
            [-0.1581794631338795, -0.2816815880919104, -0.7136631654885238],
            [0.9680664378219459, 0.17936035013909432, 0.17514918429929935,
             -0.21137770444279044, 0.9596179940025167, 0.1856145782288729,
             -0.13478441314641976, -0.21670987606606096, 0.9668867522043146],
        ),
    }  # fmt: skip
    for link, (position, rotation) in expected.items():
        pose = robot.forward_kinematics(q, link).numpy()
        np.testing.assert_allclose(pose[:3, 3], position, rtol=0, atol=1e-14, err_msg=link)
        np.testing.assert_allclose(pose[:3, :3].ravel(), rotation, rtol=0, atol=1e-14)
