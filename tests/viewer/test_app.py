"""The viewer's viser scene, driven from Python without a browser, and ``torchik view`` errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("viser", reason="the viewer needs the view extra (viser)")

from tests.viewer.test_scene import STL, _urdf  # noqa: E402
from torchik.cli import main  # noqa: E402
from torchik.description import URDFError  # noqa: E402
from torchik.geometry import quat_to_rotmat  # noqa: E402
from torchik.viewer import Viewer, view  # noqa: E402
from torchik.viewer.scene import pose_text  # noqa: E402


def _node_poses(nodes) -> np.ndarray:
    out = np.tile(np.eye(4), (len(nodes), 1, 1))
    for i, node in enumerate(nodes):
        out[i, :3, :3] = quat_to_rotmat(torch.as_tensor(np.asarray(node.wxyz, np.float64)))
        out[i, :3, 3] = node.position
    return out


@pytest.fixture(scope="module")
def panda_viewer():
    with view("panda", port=0, n=6) as viewer:
        yield viewer


def test_one_scene_node_per_link_at_the_fk_poses(panda_viewer):
    robot = panda_viewer.robot
    q = robot.random_configuration(1, torch.Generator().manual_seed(0))[0]
    panda_viewer.set_configuration(q)
    frames = panda_viewer.drawing.frames
    assert [f.name for f in frames] == [f"/robot/{name}" for name in robot.link_names]
    np.testing.assert_allclose(_node_poses(frames), robot.forward_kinematics(q).numpy(), atol=1e-6)
    hand = robot.forward_kinematics(q, panda_viewer.link).numpy()
    assert pose_text(hand) in panda_viewer.panel.pose.content  # the end link's pose read out
    sliders = [s.value for s in panda_viewer.panel.joints]
    np.testing.assert_allclose(sliders, q.numpy(), atol=1e-12)


def test_the_joint_sliders_move_the_robot(panda_viewer):
    robot = panda_viewer.robot
    slider = panda_viewer.panel.joints[1]
    slider.value = 0.7  # as a person dragging it would
    assert panda_viewer.q[1].item() == pytest.approx(0.7)
    expected = robot.forward_kinematics(panda_viewer.q).numpy()
    np.testing.assert_allclose(_node_poses(panda_viewer.drawing.frames), expected, atol=1e-6)


def test_the_gizmo_callback_shows_ghosts_that_meet_the_target(panda_viewer):
    robot, link = panda_viewer.robot, panda_viewer.link
    q = robot.random_configuration(1, torch.Generator().manual_seed(4))[0]
    pose = robot.forward_kinematics(q, link)
    panda_viewer.set_target(pose)
    panda_viewer.gizmo.position = pose[:3, 3].numpy() + np.array([0.0, 0.0, -0.02])
    panda_viewer._solve_latest()  # what a drag of the gizmo calls
    found = panda_viewer.solutions
    assert 1 <= len(found.q) <= 6
    reached = robot.forward_kinematics(found.q, link)
    target = panda_viewer.target()
    assert (reached[:, :3, 3] - target[:3, 3]).norm(dim=-1).max() < 1e-3
    shown = [g for g in panda_viewer.ghosts if g.frames[0].visible]
    assert len(shown) == len(found.q)
    ghost_poses = _node_poses(shown[0].frames)
    np.testing.assert_allclose(ghost_poses, robot.forward_kinematics(found.q[0]).numpy(), atol=1e-6)
    assert f"{len(found.q)} solutions" in panda_viewer.panel.summary.content


def test_position_only_mode_ignores_the_orientation(panda_viewer):
    panda_viewer.panel.position_only.value = True
    try:
        assert panda_viewer.target().shape == (3,)
        assert panda_viewer.solutions.rotation_error is None
    finally:
        panda_viewer.panel.position_only.value = False
    assert panda_viewer.target().shape == (4, 4)
    pose = panda_viewer.target()
    found = panda_viewer.set_target(pose[:3, 3])  # a position turns position-only mode on
    assert panda_viewer.panel.position_only.value and panda_viewer.gizmo.disable_rotations
    assert found.rotation_error is None and found.position_error.max() < 1e-3
    panda_viewer.set_target(pose)
    assert not panda_viewer.panel.position_only.value and not panda_viewer.gizmo.disable_rotations


def test_a_pose_model_needs_the_orientation():
    with view("panda", model="pretrained", port=0, n=3) as viewer:
        assert viewer.link == "panda_hand" and viewer.solutions is None
        found = viewer.solve()
        assert found.source.endswith("+ refinement") and found.rotation_error is not None
        viewer.panel.sources.value = "model samples"
        assert viewer.solutions.source == "fm samples"
        with pytest.raises(ValueError, match="needs the orientation"):
            viewer.set_target(torch.tensor([0.4, 0.0, 0.4]))


def test_playback_shows_each_frame(panda_viewer):
    robot = panda_viewer.robot
    paths = robot.random_configuration(6, torch.Generator().manual_seed(5)).reshape(2, 3, 7)
    assert panda_viewer.play(paths) == 3
    panda_viewer.panel.frame.value = 2
    torch.testing.assert_close(panda_viewer.q, paths[0, 2])
    visible = [g for g in panda_viewer.ghosts if g.frames[0].visible]
    assert len(visible) == 1
    panda_viewer.panel._play()  # the Play button's thread: every frame in turn, ending on the last
    assert panda_viewer.panel.frame.value == 2
    np.testing.assert_allclose(
        _node_poses(visible[0].frames), robot.forward_kinematics(paths[1, 2]).numpy(), atol=1e-6
    )


def test_link_frames_on_demand(panda_viewer):
    checkbox = panda_viewer.panel.link_frames
    checkbox.value = True
    assert all(f.show_axes for f in panda_viewer.drawing.frames)
    checkbox.value = False
    assert not any(f.show_axes for f in panda_viewer.drawing.frames)


def test_without_a_browser_a_screenshot_is_a_clear_error(panda_viewer):
    with pytest.raises(RuntimeError, match="no browser shows the page"):
        panda_viewer.screenshot()


def test_urdf_visuals_are_drawn_instead_of_sticks(tmp_path):
    (tmp_path / "tri.stl").write_text(STL)
    (tmp_path / "vis.urdf").write_text(_urdf("tri.stl"))
    with view(tmp_path / "vis.urdf", port=0, n=2) as viewer:
        assert not viewer.sticks and len(viewer.visuals) == 4
        assert viewer.skipped == ["link 'arm': mesh 'missing.stl' not found"]
        assert viewer.mesh(viewer.visuals[3].path)[1].shape == (1, 3)


def _no_server(monkeypatch):
    import viser

    def refuse(*args, **kwargs):
        raise AssertionError("a server was started")

    monkeypatch.setattr(viser, "ViserServer", refuse)


def test_bad_inputs_fail_before_any_server_starts(tmp_path, monkeypatch):
    _no_server(monkeypatch)
    (tmp_path / "bad.urdf").write_text("<robot name='r'><link name='a'/><joint/></robot>")
    with pytest.raises(URDFError):
        Viewer(tmp_path / "bad.urdf")
    with pytest.raises(URDFError, match="not found"):
        Viewer(tmp_path / "missing.urdf")
    with pytest.raises(ValueError, match="unknown model"):
        Viewer("panda", model="no_such_model")
    with pytest.raises(ValueError, match="unknown link"):
        Viewer("panda", link="no_such_link")
    with pytest.raises(ValueError, match="n must be"):
        Viewer("panda", n=0)
    for port in (99999, -1, 1.5, True):
        with pytest.raises(ValueError, match="port must be a whole number from 0 to 65535"):
            Viewer("snake2", port=port)


def test_a_server_that_does_not_start_is_one_line_not_a_hang(monkeypatch):
    """A busy port 65535 (viser then tries 65536) printed viser's thread's traceback
    (OverflowError) and the constructor waited forever; so did any start whose thread failed."""
    import threading

    import viser

    from torchik.viewer.app import _serve

    hook = threading.excepthook
    with pytest.raises(RuntimeError, match="did not start on .*ValueError: embedded null"):
        Viewer("snake2", host="127.0.0.1\0", port=0, n=1)  # viser's thread fails to bind
    monkeypatch.setattr(viser, "ViserServer", lambda **_: threading.Event().wait())
    with pytest.raises(RuntimeError, match="did not start on 127.0.0.1:0: no answer within"):
        _serve("127.0.0.1", 0, timeout=0.2)
    assert threading.excepthook is hook  # restored


def test_cli_errors_are_one_line(tmp_path, monkeypatch, capsys):
    _no_server(monkeypatch)
    (tmp_path / "bad.urdf").write_text("<robot name='r'><link name='a'/><joint/></robot>")
    for argv in (["view", str(tmp_path / "bad.urdf")], ["view", "panda", "--model", "nope"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert err.startswith("torchik: error: ") and err.count("\n") == 1, err
    (tmp_path / "s.json").write_text('[{"x": 1}]')
    assert main(["view", "panda", "--play", str(tmp_path / "s.json")]) == 1
    assert "not solutions of panda" in capsys.readouterr().err
    for port in ("x", "99999", "-1"):
        assert main(["view", "panda", f"--port={port}"]) == 2
        err = capsys.readouterr().err
        assert "--port" in err and err.count("\n") == 1, err


def test_torchik_view_is_lazy():
    code = "import sys, torchik; print('viser' in sys.modules, torchik.view.__module__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "torchik.viewer.app"]


def test_torchik_view_serves_the_page_on_localhost_until_interrupted():
    import os
    import re
    import signal
    import urllib.request

    command = [sys.executable, "-m", "torchik", "view", "snake2", "--port", "0", "-n", "2"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as process:
        try:
            line = process.stdout.readline()
            url = re.search(r"at (http://127\.0\.0\.1:\d+) ", line)
            assert url, line
            direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only
            with direct.open(url.group(1), timeout=30) as page:
                assert page.status == 200 and b"<html" in page.read().lower()
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()  # never leave the test waiting on a server
                raise
    assert process.returncode == 130


def test_an_mjcf_file_opens_without_urdf_visuals(tmp_path):
    pytest.importorskip("mujoco", reason="the optional mjcf extra (mujoco) is not installed")
    from torchik.viewer.app import open_robot

    path = tmp_path / "arm.xml"
    path.write_text(
        '<mujoco model="xml_arm"><worldbody><body name="a"><joint name="j" range="-1 1"/>'
        '<geom size="0.1"/><body name="b" pos="0.3 0 0"><joint name="k" range="-1 1"/>'
        '<geom size="0.1"/></body></body></worldbody></mujoco>'
    )
    robot, urdf = open_robot(path)
    assert robot.name == "xml_arm" and robot.dof == 2 and urdf is None
    viewer = Viewer(robot, None, port=0, urdf=urdf, n=2)
    try:
        viewer.solve()
        assert viewer.skipped == []
    finally:
        viewer.close()


def test_a_scene_opens_with_its_free_bodies_where_the_file_puts_them(tmp_path):
    """The viewer starts at ``default_configuration``: a free box at its place in the file
    (it was drawn at the world's origin, ``neutral``)."""
    pytest.importorskip("mujoco", reason="the optional mjcf extra (mujoco) is not installed")
    scene = tmp_path / "scene.xml"
    scene.write_text(
        '<mujoco><worldbody><body name="box" pos="1 0 0.5"><freejoint name="box_free"/>'
        '<geom size="0.05"/></body><body name="upper" pos="0 0 0.5">'
        '<joint name="shoulder" axis="0 1 0" range="-2 2"/><geom size="0.02"/>'
        '<body name="hand" pos="0.3 0 0"/></body></worldbody></mujoco>'
    )
    with view(str(scene), port=0, link="hand") as viewer:
        torch.testing.assert_close(viewer.q[:3], torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64))
