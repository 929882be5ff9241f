"""The side panel of the viewer (:mod:`torchik.viewer.app`): target mode, the ghosts' errors and
solve time, joint sliders with the end link's pose, playback and the screenshot button.

The panel knows the viewer only through the attributes and methods it calls (a structural
type, :class:`ViewerLike`), so this module does not import the app that builds it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from torchik.viewer.scene import Solutions, pose_text

SOURCES = {"numerical IK": "numerical", "model samples": "raw", "model + refinement": "refined"}
PLAYBACK_FPS = 10


class ViewerLike(Protocol):
    """What :class:`Panel` uses of its viewer (:class:`torchik.viewer.app.Viewer`)."""

    server: Any
    robot: Any
    model: Any
    refine: bool
    position_only: bool
    link: str
    frames: Any
    drawing: Any

    def solve(self) -> Any: ...
    def set_configuration(self, q: torch.Tensor) -> None: ...
    def set_position_only(self, on: bool) -> None: ...
    def show_frame(self, s: int) -> None: ...
    def screenshot(self, path: Any = None, *, client: Any = None) -> Any: ...


class Panel:
    """The GUI of one :class:`~torchik.viewer.app.Viewer` (built by it)."""

    def __init__(self, viewer: ViewerLike):
        self.viewer, gui = viewer, viewer.server.gui
        self._syncing = False
        with gui.add_folder("Target"):
            self._add_target_controls(gui)
        with gui.add_folder("Joints (FK)"):
            self.joints = [self._joint_slider(gui, i) for i in range(viewer.robot.dof)]
            self.pose = gui.add_markdown("")
        with gui.add_folder("Playback"):
            self.frame = gui.add_slider("frame", 0, 1, 1, 0, disabled=True)
            self.frame.on_update(lambda _: self._on_frame())
            self.play = gui.add_button("Play", disabled=True)
            self.play.on_click(lambda _: threading.Thread(target=self._play, daemon=True).start())
        self.link_frames = gui.add_checkbox("link frames", False)
        self.link_frames.on_update(lambda _: self._show_frames(self.link_frames.value))
        shot = gui.add_button("Screenshot")
        shot.on_click(self._screenshot)
        self.saved = gui.add_markdown("")

    def _add_target_controls(self, gui: Any) -> None:
        viewer = self.viewer
        self.position_only = gui.add_checkbox(
            "position only", viewer.position_only, disabled=viewer.model is not None
        )
        self.position_only.on_update(lambda _: self._on_mode())
        options = list(SOURCES) if viewer.model is not None else ["numerical IK"]
        initial = options[0] if viewer.model is None else options[2 if viewer.refine else 1]
        self.sources = gui.add_dropdown("solutions from", options, initial_value=initial)
        self.sources.on_update(lambda _: viewer.solve())
        self.ghosts = gui.add_checkbox("show ghosts", True)
        self.ghosts.on_update(lambda _: viewer.solve())
        gui.add_button("Solve").on_click(lambda _: viewer.solve())
        self.summary = gui.add_markdown("Drag the target to solve.")

    def _joint_slider(self, gui: Any, i: int) -> Any:
        robot = self.viewer.robot
        lower, upper = float(robot.lower[i]), float(robot.upper[i])
        value = float(np.clip(0.0, lower, upper))
        slider = gui.add_slider(robot.joint_names[i], lower, upper, 1e-3, value)
        slider.on_update(lambda _: self._on_joint())
        return slider

    # ---------------------------------------------------------------- state the viewer reads
    def source(self) -> str:
        """``"numerical"``, ``"raw"`` or ``"refined"``: where the ghosts come from."""
        return SOURCES[self.sources.value]

    def ghosts_on(self) -> bool:
        return bool(self.ghosts.value)

    # ---------------------------------------------------------------- what the viewer shows
    def show_pose(self, pose: np.ndarray, q: Any) -> None:
        """Read out the end link's pose and put the sliders at ``q``."""
        self.pose.content = f"**{self.viewer.link}**: {pose_text(pose)}"
        self._syncing = True
        try:
            for slider, value in zip(self.joints, q.tolist(), strict=True):
                slider.value = float(np.clip(value, slider.min, slider.max))
        finally:
            self._syncing = False

    def show_solutions(self, solutions: Solutions) -> None:
        self.summary.content = solutions.summary()

    def show_mode(self, position_only: bool) -> None:
        """Tick the position-only box (without solving)."""
        self._syncing = True
        try:
            self.position_only.value = position_only
        finally:
            self._syncing = False

    def set_frames(self, count: int) -> None:
        self._syncing = True
        try:
            self.frame.max = max(count - 1, 1)
            self.frame.value = 0
        finally:
            self._syncing = False
        self.frame.disabled = self.play.disabled = False

    # ---------------------------------------------------------------- callbacks
    def _on_joint(self) -> None:
        if not self._syncing:
            self.viewer.set_configuration(torch.tensor([float(s.value) for s in self.joints]))

    def _on_mode(self) -> None:
        if not self._syncing:
            self.viewer.set_position_only(bool(self.position_only.value))
            self.viewer.solve()

    def _on_frame(self) -> None:
        if not self._syncing and self.viewer.frames is not None:
            self.viewer.show_frame(min(int(self.frame.value), len(self.viewer.frames) - 1))

    def _play(self) -> None:
        frames = self.viewer.frames
        for s in range(0 if frames is None else len(frames)):
            self.frame.value = s
            time.sleep(1 / PLAYBACK_FPS)

    def _show_frames(self, on: bool) -> None:
        for frame in self.viewer.drawing.frames:
            frame.show_axes = on

    def _screenshot(self, event: Any) -> None:
        path = Path(f"torchik-view-{time.strftime('%Y%m%d-%H%M%S')}.png").resolve()
        self.viewer.screenshot(path, client=event.client)
        self.saved.content = f"Saved `{path}`"
