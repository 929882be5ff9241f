"""torchik.description.mjcf and Robot.from_mjcf: MuJoCo's own URDF import and mj_kinematics as
references."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

from torchik import Robot
from torchik.description import MJCFError, bundled_urdf, parse_mjcf, qpos_index

mujoco = pytest.importorskip("mujoco", reason="the optional mjcf extra (mujoco) is not installed")

F64 = torch.float64
BUNDLED = ["panda", "ur5", "digit_arm", "snake2", "snake4"]
SHARED = ["two_branches", "prismatic_continuous", "tilted_axes", "mimic", "ur5_robot", "panda"]
# Keep every URDF link as a body (no fusing of fixed joints) and give massless links a mass.
COMPILER = (
    '<mujoco><compiler fusestatic="false" discardvisual="true" '
    'boundmass="1e-3" boundinertia="1e-6"/></mujoco>'
)

ARM = """<mujoco model="arm">
  <compiler angle="degree" boundmass="1e-3" boundinertia="1e-6"/>
  <worldbody>
    <body name="base" pos="0 0 0.1" quat="0.9 0.1 0.3 0.2">
      <joint name="rail" type="slide" axis="1 1 0" range="-0.2 0.3" ref="0.05"/>
      <body name="shoulder" pos="0.1 0 0.2" euler="10 20 30">
        <joint name="pan" axis="0 0 1" range="-90 90" pos="0.05 0 0"/>
        <joint name="tilt" axis="0 1 0" range="-45 120" pos="0 0.02 0.03" ref="15"/>
        <body pos="0.3 0 0">
          <joint name="spin" axis="1 0 0"/>
          <body name="tool" pos="0.1 0 0" quat="0 1 0 0">
            <site name="tip" pos="0 0.01 0.05" euler="0 90 0"/><site pos="0.02 0 0"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def _model_from_urdf(urdf: str):
    """MuJoCo's compiled model of a URDF text, its meshes (absent here) dropped."""
    urdf = re.sub(r"<(visual|collision)\b.*?</\1>", "", urdf, flags=re.S)
    return mujoco.MjModel.from_xml_string(
        re.sub(r"(<robot[^>]*>)", r"\1" + COMPILER, urdf, count=1)
    )


def _urdf_text(name: str, shared: Path | None) -> str:
    """A bundled URDF (``"panda"``) or one of ../shared/fixtures/urdf (``"shared:panda"``)."""
    if not name.startswith("shared:"):
        return bundled_urdf(name)
    name = name.removeprefix("shared:")
    if shared is None:
        pytest.skip("../shared is absent beside the repository: no fixture URDFs")
    return (shared / "urdf" / f"{name}.urdf").read_text()


def _all_joint_values(robot: Robot, q: torch.Tensor) -> dict[str, torch.Tensor]:
    """Every moving joint's value, mimic joints included."""
    values = {name: q[..., i] for i, name in enumerate(robot.joint_names)}
    for joint in robot.model.joints:
        if joint.mimic is not None:
            mimic = joint.mimic
            values[joint.name] = mimic.multiplier * values[mimic.joint] + mimic.offset
    return values


def _mujoco_poses(model, robot: Robot, q: torch.Tensor) -> torch.Tensor:
    """``(B, nbody, 4, 4)`` world poses of every body from mj_kinematics."""
    data = mujoco.MjData(model)
    values = _all_joint_values(robot, q)
    index = qpos_index(model, list(values))
    q_all = torch.stack(list(values.values()), dim=-1)
    out = torch.zeros(q.shape[0], model.nbody, 4, 4, dtype=F64)
    for b, row in enumerate(q_all.tolist()):
        data.qpos[:] = model.qpos0
        data.qpos[index] = row
        mujoco.mj_kinematics(model, data)
        out[b, :, :3, :3] = torch.as_tensor(data.xmat.copy(), dtype=F64).reshape(-1, 3, 3)
        out[b, :, :3, 3] = torch.as_tensor(data.xpos.copy(), dtype=F64)
        out[b, :, 3, 3] = 1.0
    return out


@pytest.mark.parametrize("name", BUNDLED + [f"shared:{n}" for n in SHARED])
def test_urdf_converted_by_mujoco_matches_the_urdf_path(name, shared_fixtures_dir):
    urdf = _urdf_text(name, shared_fixtures_dir)
    model = _model_from_urdf(urdf)
    reference = Robot.from_urdf(urdf, dtype=F64)
    robot = Robot.from_mjcf(model, dtype=F64)
    q = reference.random_configuration(16, torch.Generator().manual_seed(0))
    assert robot.joint_names == reference.joint_names  # a URDF mimic: a joint equality and back
    common = [link for link in reference.link_names if link in robot.link_names]
    assert len(common) >= len(reference.link_names) - 1  # at most the URDF root becomes "world"
    expected = reference.forward_kinematics(q, common)
    world_root = robot.forward_kinematics(q, reference.root)
    got = torch.linalg.inv(world_root)[:, None] @ robot.forward_kinematics(q, common)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
    # and MuJoCo's own forward kinematics of every body, in the world frame
    bodies = [model.body(b).name for b in range(1, model.nbody)]
    poses = robot.forward_kinematics(q[:3], bodies)
    torch.testing.assert_close(poses, _mujoco_poses(model, robot, q[:3])[:, 1:], atol=1e-12, rtol=0)


def test_saved_xml_file_loads_to_six_digits(tmp_path):
    urdf = bundled_urdf("panda")
    path = tmp_path / "panda.xml"
    mujoco.mj_saveLastXML(str(path), _model_from_urdf(urdf))
    reference, robot = Robot.from_urdf(urdf, dtype=F64), Robot.from_mjcf(path, dtype=F64)
    assert robot.joint_names == reference.joint_names
    torch.testing.assert_close(robot.lower, reference.lower)
    q = reference.random_configuration(8, torch.Generator().manual_seed(1))
    link = "panda_hand_tcp"
    # mj_saveLastXML writes 6 significant digits (quaternions such as 0.707107)
    torch.testing.assert_close(
        robot.forward_kinematics(q, link), reference.forward_kinematics(q, link), atol=1e-5, rtol=0
    )


def test_hand_written_model_matches_mj_kinematics():
    model = mujoco.MjModel.from_xml_string(ARM)
    robot = Robot.from_mjcf(ARM, dtype=F64)
    assert robot.root == "world"
    assert robot.joint_names == ("rail", "pan", "tilt", "spin")  # MuJoCo's qpos order
    assert robot.joint_types == ("prismatic", "revolute", "revolute", "continuous")
    assert qpos_index(model, robot.joint_names) == [0, 1, 2, 3]
    torch.testing.assert_close(
        robot.lower[1:3], torch.deg2rad(torch.tensor([-90.0, -45.0], dtype=F64))
    )
    # two hinges with anchors: one helper link per joint, then a fixed joint back to the body
    assert robot.links_to("shoulder") == (
        "world",
        "base",
        "shoulder/pan",
        "shoulder/tilt",
        "shoulder",
    )
    assert "body3" in robot.link_names  # the unnamed body
    q = robot.random_configuration(5, torch.Generator().manual_seed(2))
    q[0] = torch.tensor([0.05, 0.0, 0.0, 0.0], dtype=F64)  # q = qpos: the ref pose, as in the file
    bodies = [model.body(b).name or f"body{b}" for b in range(model.nbody)]
    torch.testing.assert_close(
        robot.forward_kinematics(q, bodies), _mujoco_poses(model, robot, q), atol=1e-12, rtol=0
    )


def test_sites_and_jacobians_match_mujoco():
    model, data = mujoco.MjModel.from_xml_string(ARM), None
    robot = Robot.from_mjcf(model, dtype=F64)
    assert robot.link_names[-2:] == ("tip", "site1")
    assert "tip" not in Robot.from_mjcf(model, sites=False).link_names
    q = robot.random_configuration(3, torch.Generator().manual_seed(3))
    data = mujoco.MjData(model)
    jacp, jacr = torch.zeros(3, model.nv, dtype=F64), torch.zeros(3, model.nv, dtype=F64)
    for values in q:
        data.qpos[:] = values.numpy()
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)  # mj_jacBody needs the com-based quantities
        pose = robot.forward_kinematics(values, ["tip", "site1"])
        site_xmat = torch.as_tensor(data.site_xmat.copy(), dtype=F64).reshape(-1, 3, 3)
        torch.testing.assert_close(pose[:, :3, :3], site_xmat, atol=1e-12, rtol=0)
        torch.testing.assert_close(
            pose[:, :3, 3], torch.as_tensor(data.site_xpos), atol=1e-12, rtol=0
        )
        mujoco.mj_jacBody(model, data, jacp.numpy(), jacr.numpy(), model.body("tool").id)
        expected = torch.cat((jacp, jacr))
        torch.testing.assert_close(robot.jacobian(values, "tool"), expected, atol=1e-12, rtol=0)


GRIPPER = """<mujoco><compiler boundmass="1e-3" boundinertia="1e-6"/><worldbody><body name="palm">
  <body name="a" pos="0 0.1 0">
    <joint name="a" type="slide" axis="0 1 0" range="0 0.04" ref="0.01"/></body>
  <body name="b" pos="0 -0.1 0"><joint name="b" type="slide" axis="0 1 0" ref="-0.02"/></body>
  <body name="c" pos="0.1 0 0"><joint name="c" axis="0 0 1" range="-1 1"/></body>
</body></worldbody><equality>
  <joint joint1="b" joint2="a" polycoef="0.005 -1 0 0 0"/>
  <joint joint1="c" joint2="a" polycoef="0 1 0.5 0 0"/>
</equality></mujoco>"""


def test_linear_joint_equalities_become_mimic_joints():
    model = mujoco.MjModel.from_xml_string(GRIPPER)
    robot = Robot.from_mjcf(model, dtype=F64)
    assert robot.joint_names == ("a", "c")  # b follows a; the quadratic equality is left out
    (mimic,) = [joint.mimic for joint in robot.model.joints if joint.name == "b"]
    # b - (-0.02) = 0.005 - (a - 0.01), so b = -a - 0.005
    assert mimic.joint == "a" and mimic.multiplier == -1.0
    assert mimic.offset == pytest.approx(-0.005, abs=1e-15)
    q = robot.random_configuration(4, torch.Generator().manual_seed(4))
    poses = _mujoco_poses(model, robot, q)
    links = ["world", "palm", "a", "b", "c"]
    torch.testing.assert_close(robot.forward_kinematics(q, links), poses, atol=1e-12, rtol=0)
    chained = GRIPPER.replace(
        'joint1="c" joint2="a" polycoef="0 1 0.5 0 0"', 'joint1="c" joint2="b"'
    )
    with pytest.raises(MJCFError, match="joint 'c' follows 'b', which follows another joint"):
        parse_mjcf(chained)


def test_missing_mujoco_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(ImportError, match=r"pip install 'torchik\[mjcf\]'"):
        parse_mjcf(ARM)


FREE = """<mujoco><compiler boundmass="1e-3" boundinertia="1e-6"/><worldbody>
<body name="base" pos="1 2 3" quat="0 0 0 1">
  <freejoint name="root"/>
  <body name="link" pos="0 0 0.5"><joint name="hinge" axis="0 1 0" range="-1 1"/></body>
</body></worldbody></mujoco>"""


def test_free_joint_is_a_floating_base_or_fixed_or_refused():
    model = mujoco.MjModel.from_xml_string(FREE)
    robot = Robot.from_mjcf(FREE, dtype=F64)  # default: a floating base
    assert robot.floating and robot.nq == 8 and robot.nv == 7
    assert qpos_index(model, robot.joint_names) == list(range(8))  # x y z qw qx qy qz, hinge
    q = robot.random_configuration(4, generator=torch.Generator().manual_seed(0))
    q[:, :3] = torch.randn(4, 3, dtype=F64)  # the base anywhere (it is sampled at 0)
    torch.testing.assert_close(  # the base is the root link: "world" is not a link of it
        robot.forward_kinematics(q, ["base", "link"]),
        _mujoco_poses(model, robot, q)[:, 1:],
        atol=1e-12,
        rtol=0,
    )
    fixed = Robot.from_mjcf(FREE, free_joint="fixed", dtype=F64)
    assert fixed.joint_names == ("hinge",) and qpos_index(model, fixed.joint_names) == [7]
    q = torch.tensor([[0.3], [-0.7]], dtype=F64)
    torch.testing.assert_close(
        fixed.forward_kinematics(q, ["world", "base", "link"]),
        _mujoco_poses(model, fixed, q),
        atol=1e-12,
        rtol=0,
    )
    with pytest.raises(MJCFError, match=r"the MJCF text: joint 'root' in body 'base' is a free"):
        Robot.from_mjcf(FREE, free_joint="error")
    with pytest.raises(ValueError, match="free_joint must be one of"):
        parse_mjcf(FREE, free_joint="ball")


def test_ball_joint_error_names_file_element_and_what_is_accepted(tmp_path):
    path = tmp_path / "ball.xml"
    path.write_text(
        '<mujoco><worldbody><body name="b"><joint name="socket" type="ball"/>'
        '<geom size="0.1"/></body></worldbody></mujoco>'
    )
    with pytest.raises(MJCFError, match=r"ball\.xml: joint 'socket' in body 'b' is a ball.*hinge"):
        Robot.from_mjcf(path)


def test_slide_without_range_needs_limits():
    xml = (
        '<mujoco><worldbody><body name="cart"><joint name="x" type="slide"/><geom size="0.1"/>'
        "</body></worldbody></mujoco>"
    )
    with pytest.raises(MJCFError, match=r"slide joint 'x' in body 'cart' has no range.*limits="):
        parse_mjcf(xml)
    robot = Robot.from_mjcf(xml, limits={"x": (-1.0, 2.0)}, dtype=F64)
    assert robot.joint_types == ("prismatic",) and robot.upper.tolist() == [2.0]
    with pytest.raises(MJCFError, match=r"limits= names \['y'\]"):
        parse_mjcf(xml, limits={"y": (0.0, 1.0)})
    with pytest.raises(MJCFError, match="lower 2 > upper 1"):
        parse_mjcf(xml, limits={"x": (2.0, 1.0)})


def test_unreadable_sources(tmp_path):
    with pytest.raises(MJCFError, match="MJCF file not found: .*missing.xml"):
        parse_mjcf(tmp_path / "missing.xml")
    with pytest.raises(MJCFError, match="the MJCF text: MuJoCo cannot compile it"):
        parse_mjcf("<mujoco><worldbody><body><joint type='nope'/></body></worldbody></mujoco>")
