"""A real browser: headless Chromium opens the viewer's page on 127.0.0.1 and renders it.

Chromium is Debian's ``chromium`` package (``.ci/run`` installs it when missing); without it
the test is skipped and says why. The pictures are the browser's WebGL canvas (SwiftShader),
fetched through viser; the whole test takes some 15-30 s on two cores.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

pytest.importorskip("viser", reason="the viewer needs the view extra (viser)")

from torchik.rotations import quat_to_rotmat  # noqa: E402
from torchik.viewer import view  # noqa: E402
from torchik.viewer_browser import find_chromium, headless_browser  # noqa: E402

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
    while not np.allclose(client.camera.look_at, look_at, atol=1e-3):
        assert time.monotonic() < deadline, "the page never reported the viewer's camera"
        time.sleep(0.1)
    assert np.allclose(client.camera.position, position, atol=1e-3)


def _drawn(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.astype(int) - b.astype(int)).sum(-1) > INK


def test_a_real_browser_draws_the_robot_and_follows_the_target():
    if find_chromium() is None:
        pytest.skip("no Chromium here: install Debian's chromium package (.ci/run does)")
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
