"""The robot a command takes (issue 35): an MJCF file like a URDF, continuous joints' ranges in
``info``, the joints that do not move ``--link`` in ``solve``, the rotation tolerance's unit."""

from __future__ import annotations

import pytest

import torchik
from tests.cli.test_cli import URDF, assert_one_line_error, run

ARM_XML = """<mujoco model="xml_arm"><compiler angle="radian"/><worldbody>
  <body name="base" pos="0 0 0.1">
  <joint name="yaw" axis="0 0 1" range="-3 3"/><geom size="0.05"/>
  <body name="upper" pos="0 0 0.3"><joint name="pitch" axis="0 1 0" range="-2 2"/>
  <geom size="0.04"/><body name="fore" pos="0.3 0 0"><joint name="elbow" axis="0 1 0"
  range="-2.5 2.5"/><geom size="0.03"/><site name="tool0" pos="0.25 0 0"/></body></body>
  </body></worldbody></mujoco>"""


@pytest.fixture
def arm_xml(tmp_path):
    pytest.importorskip("mujoco", reason="the optional mjcf extra (mujoco) is not installed")
    path = tmp_path / "arm.xml"
    path.write_text(ARM_XML)
    return str(path)


def test_every_robot_command_takes_an_mjcf_file(arm_xml, tmp_path, capsys):
    code, out, err = run(capsys, "info", arm_xml, "--samples", "200")
    assert code == 0, err
    assert "xml_arm" in out and "3 dof" in out and "end link tool0" in out
    code, out, err = run(capsys, "solve", arm_xml, "--position", "0.5", "0.1", "0.4", "-n", "4")
    assert code == 0 and "xml_arm tool0: 4 solutions" in out, err
    code, out, err = run(capsys, "dataset", arm_xml, "-n", "8", "--out", str(tmp_path / "d.pt"))
    assert code == 0 and "link tool0" in out, err


def test_an_mjcf_scene_solves_its_arm_and_refuses_a_free_body_in_one_line(tmp_path, capsys):
    pytest.importorskip("mujoco", reason="the optional mjcf extra (mujoco) is not installed")
    path = tmp_path / "two.xml"
    obj = '<body name="obj" pos="1 0 0"><freejoint name="obj_free"/><geom size="0.1"/></body>'
    path.write_text(ARM_XML.replace("</worldbody>", f"{obj}</worldbody>"))
    code, out, err = run(capsys, "solve", str(path), "--position", "0.3", "0.1", "0.5", "-n", "2")
    assert code == 0, err
    assert "the scene's 1 free body stays out of q: solving the chain world -> tool0" in err
    assert "yaw" in out and "obj_free" not in out
    code, out, err = run(capsys, "info", str(path), "--samples", "10")
    assert code == 0, err
    assert "joints    4 moving of 5; q has 10 coordinates" in out and "obj_free/qz" in out
    assert "bodies    2: the world's tree (3 joints), free body obj (0 joints); IK moves" in out
    code, _, err = run(capsys, "solve", str(path), "--link", "obj", "--position", "1", "0", "0")
    assert_one_line_error(code, err)
    assert "obj moves with the floating base 'obj_free'" in err and "--link" in err
    path.write_text(
        ARM_XML.replace('<geom size="0.05"/>', '<joint type="ball"/><geom size="0.05"/>')
    )
    code, _, err = run(capsys, "solve", str(path), "--position", "0.3", "0.1", "0.5")
    assert_one_line_error(code, err)
    assert "is a ball joint" in err


def test_info_shows_the_range_a_continuous_joint_is_drawn_from(capsys):
    code, out, err = run(capsys, "info", str(URDF / "prismatic_continuous.urdf"), "--samples", "50")
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if line.strip().startswith("spin ")]
    assert "-3.1416" in row and "3.1416" in row and "inf" not in row and "wraps around" in row


def test_solve_names_the_joints_that_do_not_move_the_link(capsys):
    code, out, err = run(capsys, "solve", str(URDF / "two_branches.urdf"), "--link", "left_tip",
                         "--position", "0.1", "0.0", "0.5", "-n", "2")  # fmt: skip
    assert "2 joints do not move left_tip (right_pitch, right_roll)" in err
    assert "random starts" in err
    code, out, err = run(capsys, "solve", str(URDF / "two_branches.urdf"), "--position", "0.1",
                         "0.0", "0.5", "-n", "2")  # fmt: skip
    assert "1 joint does not move right_tip (left_pitch)" in err  # the default end link
    code, out, err = run(capsys, "solve", "panda", "--position", "0.4", "0.1", "0.5", "-n", "2")
    assert "not move" not in err  # every joint of an arm moves its hand


def test_the_rotation_tolerance_is_in_degrees_under_both_names(capsys):
    results = []
    for flag in ("--tol-rotation-deg", "--tol-rotation"):
        code, out, err = run(capsys, "solve", "panda", "--pose", "0.36", "0.0", "0.64", "0.2706",
                             "-0.6533", "-0.2706", "0.6533", flag, "5", "-n", "3",
                             "--format", "json")  # fmt: skip
        assert code == 0, err
        results.append(out)
    assert results[0] == results[1]
    code, out, _ = run(capsys, "solve", "--help")
    assert "rotation tolerance in degrees" in " ".join(out.split())


def test_load_robot_of_a_path_loads_the_file():
    robot = torchik.load_robot(str(URDF / "ur10_robot.urdf"))
    assert robot.name == "ur10" and robot.dof == 6
    with pytest.raises(ValueError, match="no bundled robot named 'kuka' and no such file; bundl"):
        torchik.load_robot("kuka")


@pytest.mark.parametrize("command", ["dataset", "train"])
def test_planar_targets_of_an_arm_that_leaves_the_plane_are_refused(capsys, tmp_path, command):
    """``--targets planar`` kept x, y of a spatial arm's end link and dropped z silently (a data
    set or model of an ill-posed problem; ``solve`` refuses x y for that arm)."""
    urdf = str(URDF / "two_branches.urdf")
    argv = (["dataset", urdf, "-n", "10", "--out", str(tmp_path / "d.pt")]
            if command == "dataset" else
            ["train", "--stream", urdf, "--model", "mlp", "--preset", "tiny", "--steps", "2",
             "--out", str(tmp_path / "run")])  # fmt: skip
    code, _, err = run(capsys, *argv, "--targets", "planar")
    assert code == 1 and "Traceback" not in err, err
    assert err.splitlines()[-1].startswith("torchik: error: --targets planar:"), err
    assert "right_tip leaves the plane z = 0" in err and "--targets position" in err
    assert not (tmp_path / "d.pt").exists() and not (tmp_path / "run" / "model.pt").exists()
