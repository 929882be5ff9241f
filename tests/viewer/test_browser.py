"""A real browser: headless Chromium opens the viewer's page on 127.0.0.1 and renders it.

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it when missing); without it
the test is skipped and says why. The pictures are the browser's WebGL canvas (SwiftShader),
fetched through viser; the whole test takes some 15-30 s on two cores.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import imageio.v3 as iio
import numpy as np
import pytest
import torch

pytest.importorskip("viser", reason="the viewer needs the view extra (viser)")

from torchik.cli import main  # noqa: E402
from torchik.geometry import quat_to_rotmat  # noqa: E402
from torchik.viewer import view  # noqa: E402
from torchik.viewer.browser import (  # noqa: E402
    find_chromium,
    headless_browser,
    require_chromium,
)

WIDTH, HEIGHT = 480, 360
INK = 40  # summed |RGB difference| above which a pixel counts as drawn


def _project(points: np.ndarray, camera, width: int, height: int) -> np.ndarray:
    """Pixel coordinates ``(N, 2)`` of world points seen by viser's camera (OpenCV convention:
    +z looks forward, +y is down; ``fov`` is vertical)."""
    rot = quat_to_rotmat(torch.as_tensor(np.asarray(camera.wxyz, np.float64))).numpy()
    local = (points - np.asarray(camera.position)) @ rot  # R^T (p - t), row vectors
    focal = (height / 2) / np.tan(camera.fov / 2)
    return np.stack(
        [
            focal * local[:, 0] / local[:, 2] + width / 2,
            focal * local[:, 1] / local[:, 2] + height / 2,
        ],
        axis=-1,
    )


def _wait_for_camera(viewer, client, timeout: float = 20.0) -> None:
    """The page reports the camera the viewer placed (the projection below needs it)."""
    position, look_at = viewer.camera
    deadline = time.monotonic() + timeout

    def reported() -> bool:  # look_at and position can arrive in separate updates
        camera = client.camera
        return bool(np.allclose(camera.look_at, look_at, atol=1e-3)
                    and np.allclose(camera.position, position, atol=1e-3))  # fmt: skip

    while not reported():
        assert time.monotonic() < deadline, (
            f"the page never reported the viewer's camera {position}, {look_at}: it reports "
            f"{client.camera.position}, {client.camera.look_at}"
        )
        time.sleep(0.1)


def _drawn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(int) - b.astype(int)).sum(-1) > INK


def _need_chromium() -> None:
    if find_chromium() is None:
        pytest.skip("no Chromium here: install Debian's chromium package (.ci/run does)")


def test_a_real_browser_draws_the_robot_and_follows_the_target(tmp_path, monkeypatch):
    _need_chromium()
    with view("panda", port=0, n=5) as viewer, headless_browser(viewer, WIDTH, HEIGHT) as client:
        _wait_for_camera(viewer, client)
        robot, link = viewer.robot, viewer.link
        pose = robot.forward_kinematics(
            robot.random_configuration(1, torch.Generator().manual_seed(3))[0], link
        )
        viewer.set_target(pose)
        with_robot = viewer.screenshot(width=WIDTH, height=HEIGHT)
        viewer.drawing.set_visible(False)
        background = viewer.screenshot(width=WIDTH, height=HEIGHT)
        viewer.drawing.set_visible(True)
        # the robot's screen region: its link origins projected, padded
        points = robot.forward_kinematics(viewer.q)[:, :3, 3].numpy()
        pixels = _project(points, client.camera, WIDTH, HEIGHT)
        assert (
            (pixels >= 0).all() and (pixels[:, 0] < WIDTH).all() and (pixels[:, 1] < HEIGHT).all()
        )
        (u0, v0), (u1, v1) = pixels.min(0).astype(int) - 8, pixels.max(0).astype(int) + 8
        region = _drawn(with_robot, background)[max(v0, 0) : v1, max(u0, 0) : u1]
        assert region.mean() > 0.03, f"the robot's region is blank ({region.mean():.3f} drawn)"
        # moving the target through the Python API moves the ghosts in the picture
        pose[:3, 3] += torch.tensor([0.0, -0.25, -0.1], dtype=pose.dtype)
        viewer.set_target(pose)
        moved = viewer.screenshot(width=WIDTH, height=HEIGHT)
        assert _drawn(moved, with_robot).sum() > 200
        # the page's screenshot button writes what the browser shows
        monkeypatch.chdir(tmp_path)
        viewer.panel._screenshot(SimpleNamespace(client=client))
        (saved,) = tmp_path.glob("torchik-view-*.png")
        assert iio.imread(saved).shape == (720, 960, 3)
        assert str(saved) in viewer.panel.saved.content


def test_cli_screenshot_writes_a_png_without_a_person(tmp_path, capsys):
    _need_chromium()
    out = tmp_path / "snake.png"
    argv = ["view", "snake2", "--port", "0", "-n", "4", "--size", "320", "240"]
    assert main([*argv, "--position", "0.1", "0.05", "0", "--screenshot", str(out)]) == 0
    err = capsys.readouterr().err  # each slow stage says what it does before it starts
    assert "starting the viewer of snake2" in err and "headless Chromium" in err
    picture = iio.imread(out)
    assert picture.shape == (240, 320, 3)
    assert (picture.astype(int).sum(-1) < 3 * 255 - INK).mean() > 0.01  # not a blank page


def test_cli_screenshot_without_chromium_says_so_before_starting_anything(
    tmp_path, monkeypatch, capsys
):
    import torchik.viewer.app

    def never(*args, **kwargs):
        raise AssertionError("the viewer started before Chromium was checked")

    monkeypatch.setenv("TORCHIK_CHROMIUM", str(tmp_path / "no-such-browser"))
    monkeypatch.setattr(torchik.viewer.app.Viewer, "__init__", never)
    code = main(["view", "snake2", "--port", "0", "--screenshot", str(tmp_path / "x.png")])
    out, err = capsys.readouterr()
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert "no Chromium found" in err and "TORCHIK_CHROMIUM" in err
    with pytest.raises(RuntimeError, match="no Chromium found"):
        require_chromium()
