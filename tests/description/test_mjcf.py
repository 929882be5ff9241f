"""torchik.description.mjcf and Robot.from_mjcf: MuJoCo's own URDF import and mj_kinematics as
references."""

from __future__ import annotations

import math
import re
import sys
import warnings
from pathlib import Path

import pytest
import torch

import torchik
from torchik import Robot
from torchik.description import (
    MJCFError,
    MJCFWarning,
    bundled_urdf,
    mjcf_names,
    parse_mjcf,
    qpos_index,
)

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
    q_all = torch.stack(list(values.values()), dim=-1) if values else q[..., :0]
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


# Free joints beside other top-level bodies (issue 35): each free body a floating base with its 7
# coordinates, FK and Jacobians as MuJoCo's; free_joint="fixed" matches MuJoCo at qpos0.
TORSO = """<body name="torso" pos="0 0 1"><freejoint name="root"/><geom size="0.2"/>
  <body name="leg" pos="0.2 0 -0.2"><joint name="hip" axis="0 1 0" range="-1 1"/>
  <geom size="0.05"/></body></body>"""
ARM_BODY = """<body name="arm" pos="2 0 0.5"><joint name="shoulder" axis="0 0 1" range="-1.5 1.5"/>
  <geom size="0.04"/><body name="forearm" pos="0.4 0 0">
  <joint name="elbow" axis="0 1 0" range="-2 2"/><geom size="0.03"/>
  <site name="tip" pos="0.3 0 0"/></body></body>"""


def _free(name: str, pos: str, quat: str = "1 0 0 0") -> str:
    return (
        f'<body name="{name}" pos="{pos}" quat="{quat}"><freejoint name="{name}_free"/>'
        f'<geom size="0.05"/><body name="{name}_handle" pos="0 0 0.1"><geom size="0.02"/>'
        "</body></body>"
    )


def _scene(*bodies: str, world: str = "") -> str:
    return f"<mujoco><worldbody>{world}{''.join(bodies)}</worldbody></mujoco>"


SCENES = {  # scene -> (free joints in q's order, a body beside them fixed in the world or None)
    "arm_then_free_object": (
        _scene(ARM_BODY, _free("obj", "1 0 0.1", "0.924 0 0 0.383")),
        ("obj_free",),
        "forearm",
    ),
    "table_then_two_free": (
        _scene(
            '<body name="table" pos="0 0 0.4"><geom type="box" size="0.5 0.5 0.02"/></body>',
            _free("a", "0.2 0 0.5"),
            _free("b", "-0.2 0.1 0.5", "0.707 0.707 0 0"),
        ),
        ("a_free", "b_free"),
        "table",
    ),
    "free_first_then_static_body": (
        _scene(TORSO, '<body name="post" pos="2 0 0.5"><geom size="0.1"/></body>'),
        ("root",),
        "post",
    ),
    "free_first_then_hinged_body": (_scene(TORSO, ARM_BODY), ("root",), "forearm"),
    "two_free_bodies": (_scene(TORSO, _free("ball", "1 0 0.1")), ("root", "ball_free"), None),
}


def _scene_configurations(robot: Robot, seed: int) -> torch.Tensor:
    """``(4, nq)`` random configurations with every free body somewhere in a 1 m cube."""
    g = torch.Generator().manual_seed(seed)
    q = robot.random_configuration(4, g)
    for k in range(robot.floating_bases):
        q[:, 7 * k : 7 * k + 3] = torch.rand(4, 3, dtype=F64, generator=g) - 0.5
    return q


def _mujoco_jacobian(model, robot: Robot, q: torch.Tensor, body: str) -> torch.Tensor:
    """``(6, nv)`` Jacobian of ``body``'s origin from mj_jacBody, in torchik's columns: a free
    body's linear velocity in its own frame (MuJoCo's is in the world), joints after."""
    data = mujoco.MjData(model)
    values = _all_joint_values(robot, q[None])
    data.qpos[qpos_index(model, list(values))] = torch.stack([v[0] for v in values.values()])
    mujoco.mj_kinematics(model, data)
    mujoco.mj_comPos(model, data)
    jacp, jacr = torch.zeros(3, model.nv, dtype=F64), torch.zeros(3, model.nv, dtype=F64)
    mujoco.mj_jacBody(model, data, jacp.numpy(), jacr.numpy(), model.body(body).id)
    mj = torch.cat((jacp, jacr))
    columns = []
    for k in range(robot.floating_bases):
        joint = model.joint(robot.joint_names[7 * k].partition("/")[0])
        adr, rot = int(joint.dofadr[0]), torch.as_tensor(data.xmat[joint.bodyid[0]].copy())
        columns += [mj[:, adr : adr + 3] @ rot.reshape(3, 3), mj[:, adr + 3 : adr + 6]]
    joints = robot.joint_names[7 * robot.floating_bases :]
    columns += [mj[:, int(model.joint(name).dofadr[0]), None] for name in joints]
    return torch.cat(columns, dim=-1)


@pytest.mark.parametrize("scene", sorted(SCENES))
def test_every_free_body_of_a_scene_is_a_floating_base_that_matches_mujoco(scene):
    xml, free, static = SCENES[scene]
    model = mujoco.MjModel.from_xml_string(xml)
    robot = Robot.from_mjcf(xml, dtype=F64)
    assert robot.root == "world" and robot.floating_bases == len(free)
    assert robot.joint_names[: 7 * len(free) : 7] == tuple(f"{j}/x" for j in free)
    assert robot.nv == robot.nq - len(free)
    bodies = [model.body(b).name for b in range(model.nbody)]
    owners = {b: robot.base_of(b) for b in bodies}
    assert owners["world"] is None and (static is None or owners[static] is None)
    q = _scene_configurations(robot, len(scene))
    torch.testing.assert_close(
        robot.forward_kinematics(q, bodies), _mujoco_poses(model, robot, q), atol=1e-12, rtol=0
    )
    for body in bodies[1:]:
        expected = _mujoco_jacobian(model, robot, q[0], body)
        torch.testing.assert_close(robot.jacobian(q[0], body), expected, atol=1e-12, rtol=0)
    fixed = Robot.from_mjcf(xml, free_joint="fixed", dtype=F64)  # every free body at qpos0
    assert not fixed.floating
    q = fixed.random_configuration(3, torch.Generator().manual_seed(5))
    torch.testing.assert_close(
        fixed.forward_kinematics(q, bodies), _mujoco_poses(model, fixed, q), atol=1e-12, rtol=0
    )


def test_a_scene_steps_on_its_manifold_and_whole_body_ik_moves_the_targets_body():
    xml, free, _ = SCENES["table_then_two_free"]
    robot = Robot.from_mjcf(xml, dtype=F64)
    q = _scene_configurations(robot, 1)
    v = torch.randn(4, robot.nv, dtype=F64, generator=torch.Generator().manual_seed(2)) / 4
    q1 = robot.integrate(q, v)
    torch.testing.assert_close(robot.difference(q, q1), v, atol=1e-12, rtol=0)
    quats = q1[:, [3, 4, 5, 6, 10, 11, 12, 13]].reshape(4, 2, 4)
    torch.testing.assert_close(quats.norm(dim=-1), torch.ones(4, 2, dtype=F64))
    neutral = robot.neutral()  # the free bodies' zero poses
    assert neutral[3] == 1 and neutral[10] == 1 and neutral.abs().sum() == 2
    rest = robot.default_configuration()  # the free bodies where the file puts them: qpos0
    model = mujoco.MjModel.from_xml_string(xml)
    qpos0 = torch.from_numpy(model.qpos0[qpos_index(model, list(robot.joint_names[:14]))])
    assert torch.equal(rest[:14], qpos0) and bool(rest[:3].abs().sum() > 0)
    target = robot.forward_kinematics(q, "a_handle")
    # whole-body IK moves the free body that carries the target; the other stays at rest
    result = torchik.solve_wholebody(robot, {"a_handle": target},
                                     generator=torch.Generator().manual_seed(3))  # fmt: skip
    assert bool(result.success[:, 0].all())
    best = result.q[:, 0]
    torch.testing.assert_close(robot.forward_kinematics(best, "a_handle"), target,
                               atol=1e-3, rtol=0)  # fmt: skip
    assert torch.equal(best[:, 7:14], rest[7:14].expand(4, 7))  # body b where the file has it
    with pytest.raises(ValueError, match="on 2 free bodies") as info:
        torchik.solve_wholebody(robot, {"a_handle": target, "b": target})
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="'b_free' carries no target and stays at its rest"):
        torchik.solve_wholebody(robot, {"a_handle": target}, active=["a_free", "b_free"])
    with pytest.raises(ValueError, match="'a_handle' moves with 'a' of .*accepted: solve_who"):
        torchik.solve_ik(robot, target, link="a_handle")
    chain = robot.chain("world", "a_handle")  # one free body: a floating robot rooted at it
    assert chain.floating_bases == 1 and chain.base_of(chain.root) == 0


def test_free_bodies_rest_where_the_file_puts_them_in_ik():
    """solve_ik and solve_wholebody on one body of a scene leave the other free bodies at
    their pose in the file (MuJoCo's qpos0; they went to the world's origin)."""
    xml = """<mujoco><worldbody>
      <body name="box" pos="1 0 0.5" quat="0.7071068 0 0 0.7071068"><freejoint name="box_free"/>
        <geom size="0.05"/></body>
      <body name="upper" pos="0 0 0.5"><joint name="shoulder" axis="0 1 0" range="-2 2"/>
        <geom size="0.02"/><body name="hand" pos="0.3 0 0"/></body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    robot = Robot.from_mjcf(xml, dtype=F64)
    qpos0 = torch.from_numpy(model.qpos0[:7])
    target = torch.tensor([[0.3, 0.0, 0.5]], dtype=F64)
    gen = torch.Generator().manual_seed(0)
    held = [
        torchik.solve_wholebody(robot, {"hand": target}, generator=gen).q[0, :, :7],
        torchik.solve_ik(robot, target, "hand", position_only=True, generator=gen).q[0, :, :7],
    ]
    for q in held:
        torch.testing.assert_close(q, qpos0.expand_as(q), atol=1e-15, rtol=0)


def test_a_follower_joints_own_range_is_noted_and_free_joints_take_no_limits():
    xml = """<mujoco><compiler angle="radian"/><worldbody><body name="a">
      <joint name="ja" axis="0 0 1" range="-1 1"/><geom size=".1"/><body name="c" pos="0.3 0 0">
      <joint name="jc" axis="0 1 0" range="-1 1"/><geom size=".1"/></body></body></worldbody>
      <equality><joint joint1="ja" joint2="jc" polycoef="0.5 2 0 0 0"/></equality></mujoco>"""
    with pytest.warns(MJCFWarning, match=r"joint 'ja' mimics 'jc': its own limits \[-1, 1\] "
                      r"are not enforced, the driver's limits give it \[-1.5, 2.5\]"):  # fmt: skip
        Robot.from_mjcf(xml)
    scene = _scene(TORSO)
    with pytest.raises(MJCFError, match=r"limits= names the free joints \['root'\]"):
        Robot.from_mjcf(scene, limits={"root": (-1.0, 1.0)})


def test_a_single_free_root_loads_with_a_site_on_the_world():
    xml = _scene(TORSO, world='<site name="origin_marker" pos="0 1 0"/>')
    model = mujoco.MjModel.from_xml_string(xml)
    robot = Robot.from_mjcf(xml, dtype=F64)
    assert robot.floating and robot.root == "torso" and "origin_marker" not in robot.link_names
    q = robot.random_configuration(4, torch.Generator().manual_seed(6))
    q[:, :3] = torch.randn(4, 3, dtype=F64, generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(
        robot.forward_kinematics(q, ["torso", "leg"]),
        _mujoco_poses(model, robot, q)[:, 1:],
        atol=1e-12,
        rtol=0,
    )
    fixed = Robot.from_mjcf(xml, free_joint="fixed", dtype=F64)
    assert "origin_marker" in fixed.link_names  # a fixed-base robot keeps the world's sites


BAD_NUMBERS = {  # a body / joint / site / equality fragment -> what the message names
    '<joint name="j" axis="nan 0 1" range="-1 1"/>': "joint 'j' in body 'b': axis",
    '<joint name="j" axis="0 0 inf" range="-1 1"/>': "joint 'j' in body 'b': axis",
    '<joint name="j" ref="nan" range="-1 1"/>': "joint 'j' in body 'b': ref",
    '<joint name="j" pos="1e12 0 0" range="-1 1"/>': "joint 'j' in body 'b': pos",
    '<joint name="j" type="slide" range="-1e300 1e300"/>': "joint 'j' in body 'b': range",
    '<joint name="j" range="-1 1"/><site name="s" pos="inf 0 0"/>': "site 's' pos",
    '<joint name="j" range="-1 1"/><site name="s" euler="0 nan 0"/>': "site 's' orientation",
}
BAD_BODIES = {
    'euler="nan 0 0"': "body 'b' orientation",
    'zaxis="nan 0 1"': "body 'b' orientation",
    'axisangle="0 0 1 inf"': "body 'b' orientation",
    'quat="nan 1 0 0"': "body 'b' orientation",
    'pos="1e300 0 0"': "body 'b' pos",
}


@pytest.mark.parametrize(
    "body, inside",
    [("", inner) for inner in BAD_NUMBERS] + [(a, '<joint name="j"/>') for a in BAD_BODIES],
)
def test_numbers_must_be_finite_and_within_the_magnitude_limit(body, inside, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo logs a NaN's warning to MUJOCO_LOG.TXT there
    xml = _scene(f'<body name="b" {body}>{inside}<geom size="0.1"/></body>')
    expected = BAD_NUMBERS.get(inside) if not body else BAD_BODIES[body]
    with pytest.raises(MJCFError, match=re.escape(expected)) as info:
        parse_mjcf(xml)
    assert "\n" not in str(info.value) and re.search(
        r"not finite|beyond the supported", str(info.value)
    )


def test_joint_equality_coefficients_and_limits_are_range_checked():
    xml = GRIPPER.replace('polycoef="0 1 0.5 0 0"', 'polycoef="0 1 0 0 0"')
    with pytest.warns(MJCFWarning, match="joint 'c' mimics 'a': its own limits"):
        parse_mjcf(xml)  # linear: c mimics a, its range [-1, 1] degree left by a's
    with pytest.raises(MJCFError, match=r"joint equality of 'c' and 'a' \(polycoef\) is .*1e\+300"):
        parse_mjcf(xml.replace('polycoef="0 1 0 0 0"', 'polycoef="0 1e300 0 0 0"'))
    with pytest.raises(MJCFError, match=r"limits= for joint 'b' is not finite"):
        parse_mjcf(GRIPPER, limits={"b": (float("nan"), 1.0)})
    with pytest.raises(MJCFError, match=r"limits= for joint 'b' must be a pair of numbers"):
        parse_mjcf(GRIPPER, limits={"b": (0.0,)})


FIFO_SCRIPT = """import sys
from torchik.description import MJCFError, parse_mjcf
try:
    parse_mjcf(sys.argv[1])
except MJCFError as err:
    print(err)
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.parametrize(
    "reference",
    ['<include file="part.xml"/>', '<asset><mesh name="m" file="part.stl"/></asset>'],
)
def test_a_fifo_in_an_include_or_an_asset_is_refused_not_waited_on(tmp_path, reference):
    import os
    import subprocess

    name = "part.xml" if "include" in reference else "part.stl"
    os.mkfifo(tmp_path / name)
    main = tmp_path / "main.xml"
    main.write_text(f"<mujoco>{reference}<worldbody/></mujoco>")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # MuJoCo itself would wait for a writer forever: a subprocess with a timeout
    done = subprocess.run(
        [sys.executable, "-c", FIFO_SCRIPT, str(main)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert f"file='{name}'> is not a regular file" in done.stdout, done.stderr[-500:]


def test_a_urdf_given_to_from_mjcf_is_named_a_urdf(tmp_path):
    path = tmp_path / "arm.urdf"
    path.write_text(bundled_urdf("ur5"))
    with pytest.raises(MJCFError, match=r"arm\.urdf is a URDF .*Robot\.from_urdf"):
        Robot.from_mjcf(path)
    with pytest.raises(MJCFError, match=r"is a URDF"):
        parse_mjcf(bundled_urdf("ur5"))


def test_mujocos_multi_line_message_is_one_line():
    with pytest.raises(MJCFError, match="MuJoCo cannot compile it") as info:
        parse_mjcf('<mujoco><worldbody><body name="b"><body name="b"/></body></worldbody></mujoco>')
    assert "\n" not in str(info.value)


def test_mjcf_names_are_the_link_and_joint_names():
    model = mujoco.MjModel.from_xml_string(ARM)
    bodies, joints = mjcf_names(model)
    assert bodies == ["world", "base", "shoulder", "body3", "tool"]
    assert joints == ["rail", "pan", "tilt", "spin"]
    robot = Robot.from_mjcf(model)
    assert set(bodies) <= set(robot.link_names) and set(joints) == set(robot.joint_names)


def test_is_mjcf_reads_the_root_element_only(tmp_path):
    import os

    from torchik.description import is_mjcf

    (tmp_path / "arm.xml").write_text('<?xml version="1.0"?>\n<!-- an arm -->\n' + ARM)
    (tmp_path / "arm.urdf").write_text(bundled_urdf("ur5"))
    assert is_mjcf(tmp_path / "arm.xml") and is_mjcf(str(tmp_path / "arm.xml")) and is_mjcf(ARM)
    assert not is_mjcf(tmp_path / "arm.urdf") and not is_mjcf(bundled_urdf("ur5"))
    assert not is_mjcf(tmp_path / "missing.xml") and not is_mjcf(tmp_path)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.xml")
        assert not is_mjcf(tmp_path / "fifo.xml")  # refused at once, never waited on


def test_mujoco_warnings_are_python_warnings_not_a_log_file(tmp_path, monkeypatch):
    """MuJoCo appends its compile warnings to ``MUJOCO_LOG.TXT`` in the current folder (a file
    in the user's folder); torchik says them as an :class:`MJCFWarning` naming the model, once
    the model loads, and a refused model says only why it is refused."""
    monkeypatch.chdir(tmp_path)
    twin = (
        '<mujoco><worldbody><body name="b"><joint name="a" axis="0 0 1" range="-1 1"/>'
        '<joint name="c" axis="0 0 1" range="-1 1"/><geom size="0.05"/></body></worldbody>'
        "</mujoco>"
    )  # fmt: skip  (two joints on one axis: a singular inertia matrix)
    with pytest.warns(MJCFWarning, match="the MJCF text: MuJoCo: Inertia matrix"):
        assert Robot.from_mjcf(twin).dof == 2
    ball = twin.replace('<joint name="c" axis="0 0 1" range="-1 1"/>', '<joint type="ball"/>')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(MJCFError, match="ball joint"):
            Robot.from_mjcf(ball)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


@pytest.mark.parametrize("entry", ["parse_mjcf", "Robot.from_mjcf", "load_robot"])
def test_an_mjcf_warning_points_at_the_users_line(entry, tmp_path):
    """MuJoCo's warnings and a follower's own range are said at the caller's line (this file)
    from each public way in, not at torchik's own call."""
    xml = """<mujoco><compiler angle="radian"/><worldbody><body name="a">
      <joint name="ja" axis="0 0 1" range="-1 1"/><joint name="jb" axis="0 0 1" range="-1 1"/>
      <geom size=".1"/><body name="c" pos="0.3 0 0">
      <joint name="jc" axis="0 1 0" range="-1 1"/><geom size=".1"/></body></body></worldbody>
      <equality><joint joint1="ja" joint2="jc" polycoef="0.5 2 0 0 0"/></equality></mujoco>"""
    path = tmp_path / "scene.xml"  # ja and jb on one axis: MuJoCo warns of the inertia too
    path.write_text(xml)
    call = {
        "parse_mjcf": lambda: parse_mjcf(xml),
        "Robot.from_mjcf": lambda: Robot.from_mjcf(path),
        "load_robot": lambda: torchik.load_robot(path),
    }[entry]
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        call()
    assert [str(w.message).split(": ")[1] for w in said] == ["MuJoCo", "joint 'ja' mimics 'jc'"]
    assert {w.filename for w in said} == {__file__}


MISSING_ASSETS = """<mujoco model="meshy"><asset><mesh name="m" file="meshes/link.stl"/>
  <texture name="t" type="2d" file="textures/wood.png"/><material name="wood" texture="t"/>
  </asset><worldbody><body name="base" pos="0 0 0.1"><geom type="mesh" mesh="m"/>
  <body name="arm" pos="0 0 0.2"><joint name="j" axis="0 1 0" range="-2 2"/>
  <geom type="mesh" mesh="m" material="wood"/><site name="tool0" pos="0.3 0 0"/>
  </body></body></worldbody></mujoco>"""


def test_mesh_and_texture_files_that_are_absent_are_not_needed(tmp_path):
    """An MJCF whose mesh files are absent was refused (``Error opening file``); kinematics
    needs no mesh (a URDF's absent ``package://`` meshes never stopped it)."""
    (tmp_path / "arm.xml").write_text(MISSING_ASSETS)
    with pytest.warns(MJCFWarning, match=r"meshes/link.stl.*kinematics needs none"):
        robot = Robot.from_mjcf(tmp_path / "arm.xml", dtype=torch.float64)
    q = torch.tensor([0.5], dtype=torch.float64)
    expected = [0.3 * math.cos(0.5), 0.0, 0.3 - 0.3 * math.sin(0.5)]  # turned about y
    position = robot.forward_kinematics(q, "tool0")[:3, 3]
    torch.testing.assert_close(position, torch.tensor(expected, dtype=torch.float64))


def test_an_absent_include_is_still_refused(tmp_path):
    (tmp_path / "arm.xml").write_text(
        MISSING_ASSETS.replace("<worldbody>", '<include file="x.xml"/><worldbody>')
    )
    with pytest.raises(MJCFError, match="x.xml"):
        Robot.from_mjcf(tmp_path / "arm.xml")
