"""``torchik.view``: the robot, a draggable target and its IK solutions in the browser (viser).

The page is served on this machine only (``127.0.0.1``); to see it from another computer,
forward the port: ``ssh -L 8080:127.0.0.1:8080 HOST``, then open ``http://127.0.0.1:8080``.
What is drawn comes from :mod:`torchik.viewer.scene` (poses, ghosts, inputs) and
:mod:`torchik.description.visuals` (visual geometry); this module only puts it into viser, and
:mod:`torchik.viewer.panel` builds the side panel. viser is imported on first use (the ``view``
extra: ``pip install torchik[view]``).
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from torchik.description.mjcf import is_mjcf
from torchik.description.visuals import Visual, read_visuals
from torchik.files import atomic_write
from torchik.robot.robot import Robot
from torchik.viewer.scene import (
    Solutions,
    bone_pairs,
    bone_poses,
    link_poses,
    playback_frames,
    resolve_model,
    solve_ghosts,
    to_wxyz_position,
)

__all__ = ["Viewer", "open_robot", "view"]

ROBOT_COLOR = (90, 130, 200)
GHOST_COLOR = (230, 120, 40)
GHOST_OPACITY = 0.35
STICK_RADIUS = 0.018
JOINT_RADIUS = 0.032


def _viser() -> Any:
    try:
        import viser
    except ImportError:
        raise ImportError("the viewer needs viser: pip install 'torchik[view]'") from None
    return viser


def check_port(port: Any) -> int:
    """``port``, checked to be a TCP port: a whole number in [0, 65535] (0: any free one).

    Raises:
        ValueError: anything else (viser's server thread failed on it, and its start hung).
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port must be a whole number from 0 to 65535 (0: any free one), "
                         f"got {port!r}")  # fmt: skip
    return port


def _serve(host: str, port: int, timeout: float = 60.0) -> Any:
    """A started ``viser.ViserServer`` on ``host`` at ``port`` (or the next free one).

    viser binds in a thread of its own and its constructor waits for that thread's signal,
    which a failed start never gives (a busy 65535 makes it try 65536: the thread dies with a
    traceback and the constructor waits forever). The constructor runs here in a helper
    thread, watched: the failure of viser's thread (told by viser's frames in its traceback)
    or no start within ``timeout`` seconds is raised as one line.

    Raises:
        ValueError: a port outside [0, 65535].
        RuntimeError: the server did not start.
    """
    viser, where = _viser(), f"{host}:{check_port(port)}"
    started: list[Any] = []
    failed: list[BaseException] = []
    previous = threading.excepthook

    def construct() -> None:
        try:
            started.append(viser.ViserServer(host=host, port=port, verbose=False))
        except BaseException as err:  # noqa: BLE001 - raised again in the caller's thread
            failed.append(err)

    def hook(args: threading.ExceptHookArgs) -> None:  # viser's server thread failing
        if args.exc_value is not None and _from_viser(args.exc_traceback):
            failed.append(args.exc_value)
        else:
            previous(args)

    helper = threading.Thread(target=construct, name="torchik-viewer-start", daemon=True)
    threading.excepthook = hook
    try:  # viser prints a banner (we print the url); restored here, whatever the helper does
        with contextlib.redirect_stdout(io.StringIO()):
            helper.start()
            _wait(helper, failed, timeout)
    finally:
        threading.excepthook = previous
    if started:
        return started[0]
    if failed and not isinstance(failed[0], Exception):  # KeyboardInterrupt, SystemExit
        raise failed[0]
    reason = _one_line(failed[0]) if failed else f"no answer within {timeout:g} s"
    raise RuntimeError(f"the viewer's server did not start on {where}: {reason}")


def _wait(helper: threading.Thread, failed: list[BaseException], timeout: float) -> None:
    """Until ``helper`` ends, something fails or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while helper.is_alive() and not failed and time.monotonic() < deadline:
        helper.join(0.05)


def _from_viser(trace: Any) -> bool:
    """Whether a traceback passes through viser's code."""
    while trace is not None:
        if f"{os.sep}viser{os.sep}" in trace.tb_frame.f_code.co_filename:
            return True
        trace = trace.tb_next
    return False


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return f"{type(err).__name__}: {text}" if text != type(err).__name__ else text


def open_robot(robot: Robot | str | os.PathLike, urdf: str | os.PathLike | None = None):
    """``(robot, urdf)``: a float64 CPU robot from a :class:`~torchik.Robot`, a bundled name, a
    URDF or an MJCF file, and the URDF file its visuals come from (``urdf`` if given, else the
    URDF file named; an MJCF file has none).

    Raises:
        URDFError: a missing or malformed URDF file.
    """
    from torchik.description import bundled as robots

    if isinstance(robot, Robot):
        return robot.to("cpu", torch.float64), urdf
    if not isinstance(robot, str | os.PathLike):
        raise TypeError(f"robot must be a Robot, a bundled name or a URDF path, not {robot!r}")
    name = os.fspath(robot)
    if name in robots.BUNDLED or name == "rail_arm":
        from torchik.robot.robot import load_robot

        return load_robot(name, dtype=torch.float64), urdf
    if is_mjcf(name):  # no URDF visuals: frames only, unless urdf= names a URDF to draw
        return Robot.from_mjcf(Path(name), dtype=torch.float64), urdf
    return Robot.from_urdf(Path(name), dtype=torch.float64), urdf or Path(name)


def _load_mesh(path: Path) -> tuple[np.ndarray, np.ndarray] | None:
    import trimesh

    try:
        mesh: Any = trimesh.load(path, force="mesh")
        return np.asarray(mesh.vertices, np.float32), np.asarray(mesh.faces, np.uint32)
    except Exception:  # noqa: BLE001 - any unreadable mesh is drawn as nothing, not a crash
        return None


class _Drawing:
    """The scene nodes of one robot: a frame per link (``PREFIX/LINK``) holding its visuals
    or joint ball, and sticks between link origins (``PREFIX/sticks/I``) when there are no
    visuals."""

    def __init__(self, viewer: Viewer, prefix: str, color, opacity: float | None):
        scene, robot = viewer.server.scene, viewer.robot
        self.pairs = bone_pairs(robot) if viewer.sticks else []
        self.frames = [
            scene.add_frame(f"{prefix}/{name}", show_axes=False, axes_length=0.1, axes_radius=0.005)
            for name in robot.link_names
        ]
        moving = {j.child for j in robot.model.joints if j.type != "fixed"} | {robot.root}
        style = {"color": color, "opacity": opacity}
        for name in robot.link_names if viewer.sticks else ():
            if name in moving:
                scene.add_icosphere(f"{prefix}/{name}/joint", JOINT_RADIUS, **style)
        self.sticks = [
            scene.add_cylinder(f"{prefix}/sticks/{b}", STICK_RADIUS, 1.0, **style)
            for b in range(len(self.pairs))
        ]
        for i, visual in enumerate(viewer.visuals):
            _add_visual(viewer, f"{prefix}/{visual.link}/visual{i}", visual, color, opacity)

    def show(self, poses: np.ndarray) -> None:
        """Move the nodes to ``(L, 4, 4)`` link poses."""
        wxyz, xyz = to_wxyz_position(poses)
        for frame, r, t in zip(self.frames, wxyz, xyz, strict=True):
            frame.wxyz, frame.position = r, t
        if self.sticks:
            sticks, lengths = bone_poses(poses, self.pairs)
            wxyz, xyz = to_wxyz_position(sticks)
            for stick, r, t, length in zip(self.sticks, wxyz, xyz, lengths, strict=True):
                stick.wxyz, stick.position, stick.scale = r, t, (1.0, 1.0, max(length, 1e-6))

    def set_visible(self, visible: bool) -> None:
        for node in (*self.frames, *self.sticks):
            node.visible = visible


def _add_visual(viewer: Viewer, name: str, visual: Visual, color, opacity) -> None:
    scene = viewer.server.scene
    wxyz, xyz = to_wxyz_position(visual.origin)
    color = visual.color if opacity is None and visual.color else color
    style = {"color": color, "opacity": opacity, "wxyz": wxyz, "position": xyz}
    if visual.shape == "box":
        scene.add_box(name, dimensions=visual.size, **style)
    elif visual.shape == "cylinder":
        scene.add_cylinder(name, visual.size[0], visual.size[1], **style)
    elif visual.shape == "sphere":
        scene.add_icosphere(name, visual.size[0], **style)
    elif (mesh := viewer.mesh(visual.path)) is not None:
        scene.add_mesh_simple(name, *mesh, scale=tuple(visual.size), **style)


class Viewer:
    """A running page: the robot, a target gizmo and up to ``n`` ghost solutions.

    Build it with :func:`view`. Everything the page does is also a method, so it is driven
    from Python (a notebook, a test) as well as by hand.

    Attributes:
        server: the ``viser.ViserServer``.
        url: the page's address, ``http://127.0.0.1:PORT``.
        robot: the robot shown (float64, CPU).
        link: the link the target places.
        model: the learned model, or ``None`` for numerical IK.
        solutions: the ghosts of the last target (:class:`~torchik.viewer.scene.Solutions`).
        q: ``(D,)`` the configuration of the shown robot.
    """

    def __init__(
        self,
        robot: Robot | str | os.PathLike,
        model: Any = None,
        *,
        link: str | None = None,
        n: int = 20,
        host: str = "127.0.0.1",
        port: int = 8080,
        urdf: str | os.PathLike | None = None,
        refine: bool = True,
        seed: int = 0,
    ):
        from torchik.description.end_link import default_end_link

        self.robot, urdf = open_robot(robot, urdf)
        self.model = resolve_model(model, self.robot)
        if self.model is not None and link not in (None, self.model.spec.link):
            raise ValueError(f"the model places {self.model.spec.link!r}, not {link!r}")
        chosen = self.model.spec.link if self.model is not None else link
        self.link: str = chosen or default_end_link(self.robot)
        self.robot.link_index(self.link)  # a clear error for unknown links
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive number of ghosts, got {n!r}")
        check_port(port)
        self.visuals, self.skipped = read_visuals(urdf) if urdf is not None else ([], [])
        self.sticks, self.n, self.refine, self.seed = not self.visuals, n, refine, seed
        self.position_only = self._positions_only()
        self._meshes: dict[Path, Any] = {}
        self._lock, self._pending = threading.Lock(), False
        self.server = _serve(host, port)
        self.server.gui.configure_theme(show_share_button=False)  # no tunnels: localhost only
        self.url = f"http://{host}:{self.server.get_port()}"
        try:
            self._build_scene()
        except BaseException:
            self.server.stop()  # no server left running behind an error
            raise

    def _build_scene(self) -> None:
        from torchik.viewer.panel import Panel

        scene = self.server.scene
        scene.set_up_direction("+z")
        scene.add_light_ambient("/ambient", intensity=1.5)  # no side of a stick goes black
        scene.add_grid("/grid", width=2.0, height=2.0, cell_size=0.1, plane="xy")
        self.drawing = _Drawing(self, "/robot", ROBOT_COLOR, None)
        self.ghosts = [
            _Drawing(self, f"/ghosts/{i}", GHOST_COLOR, GHOST_OPACITY) for i in range(self.n)
        ]
        for ghost in self.ghosts:
            ghost.set_visible(False)
        self.q = self.robot.default_configuration().double()  # free bodies where the file has them
        pose = link_poses(self.robot, self.q)[self.robot.link_index(self.link)]
        wxyz, xyz = to_wxyz_position(pose)
        self.gizmo = scene.add_transform_controls(
            "/target", scale=0.25, wxyz=wxyz, position=xyz, disable_rotations=self.position_only
        )
        self.gizmo.on_update(lambda _: self._solve_latest())
        self.solutions: Solutions | None = None
        self.frames: Tensor | None = None
        self.panel = Panel(self)
        self.set_configuration(self.q)
        reach = float(np.linalg.norm(link_poses(self.robot, self.q)[:, :3, 3], axis=-1).max())
        reach = max(reach, 0.2)
        self.camera = ((1.0 * reach, -1.0 * reach, 0.8 * reach), (0.0, 0.0, 0.35 * reach))
        self.server.on_client_connect(self._place_camera)

    def _place_camera(self, client: Any) -> None:
        """Look at the robot from the front right, a little above it."""
        client.camera.position, client.camera.look_at = self.camera

    def mesh(self, path: Path | None):
        """``(vertices, faces)`` of a mesh file, read once; ``None`` if it cannot be read."""
        if path is not None and path not in self._meshes:
            self._meshes[path] = _load_mesh(path)
        return self._meshes.get(path) if path is not None else None

    # ---------------------------------------------------------------- the shown robot
    def set_configuration(self, q: Tensor) -> None:
        """Show the robot at ``q (D,)`` and read out the pose of :attr:`link`."""
        self.q = torch.as_tensor(q, dtype=torch.float64).reshape(self.robot.dof)
        poses = link_poses(self.robot, self.q)
        self.drawing.show(poses)
        self.panel.show_pose(poses[self.robot.link_index(self.link)], self.q)

    # ---------------------------------------------------------------- the target
    def set_target(self, target: Tensor | np.ndarray) -> Solutions:
        """Move the gizmo to a ``(4, 4)`` pose or a ``(3,)`` position (which turns on
        position-only mode; a pose turns it off unless the model knows positions only) and
        solve for it.

        Returns:
            The new ghosts (also in :attr:`solutions`).
        """
        target = np.asarray(target, dtype=np.float64)
        if target.shape not in ((4, 4), (3,)):
            raise ValueError(f"target must be a (4, 4) pose or a (3,) position, not {target.shape}")
        self.set_position_only(target.shape == (3,) or self._positions_only())
        if target.shape == (4, 4):
            self.gizmo.wxyz, self.gizmo.position = to_wxyz_position(target)
        else:
            self.gizmo.position = target
        return self.solve()

    def _positions_only(self) -> bool:
        return self.model is not None and self.model.spec.targets != "pose"

    def set_position_only(self, on: bool) -> None:
        """Solve for the gizmo's position only (its rotation handles hidden), or for its pose."""
        if not on and self._positions_only():
            raise ValueError(f"the model knows {self.model.spec.targets} targets only")
        if on and self.model is not None and self.model.spec.targets == "pose":
            raise ValueError("the model was trained on full poses: it needs the orientation")
        self.position_only = on
        self.gizmo.disable_rotations = on
        self.panel.show_mode(on)

    def target(self) -> Tensor:
        """The gizmo's ``(4, 4)`` pose, or its ``(3,)`` position in position-only mode."""
        from torchik.geometry.rotations import quat_to_rotmat

        position = torch.as_tensor(np.asarray(self.gizmo.position, dtype=np.float64))
        if self.position_only:
            return position
        pose = torch.eye(4, dtype=torch.float64)
        pose[:3, :3] = quat_to_rotmat(torch.as_tensor(np.asarray(self.gizmo.wxyz, np.float64)))
        pose[:3, 3] = position
        return pose

    def solve(self) -> Solutions:
        """Solve for the gizmo's target now and show the ghosts."""
        mode = self.panel.source() if self.model is not None else "numerical"
        model = None if mode == "numerical" else self.model
        refine = self.refine if mode == "default" else mode == "refined"
        solutions = solve_ghosts(
            self.robot,
            self.target(),
            self.link,
            self.n,
            model=model,
            refine=refine,
            position_only=self.position_only,
            seed=self.seed,
        )
        self.show_ghosts(solutions.q)
        self.solutions = solutions
        self.panel.show_solutions(solutions)
        return solutions

    def _solve_latest(self) -> None:
        """The gizmo's callback: solve, and once more if it moved meanwhile (drags send many
        updates; solving each in turn would lag behind the hand)."""
        if not self._lock.acquire(blocking=False):
            self._pending = True
            return
        try:
            self._pending = True
            while self._pending:
                self._pending = False
                self.solve()
        finally:
            self._lock.release()

    def show_ghosts(self, q: Tensor) -> None:
        """Show ``q (K, D)`` as the first ``K`` ghosts (at most ``n``) and hide the rest."""
        q = torch.as_tensor(q, dtype=torch.float64).reshape(-1, self.robot.dof)[: self.n]
        poses = link_poses(self.robot, q)
        with self.server.atomic():
            for k, ghost in enumerate(self.ghosts):
                if k < len(q):
                    ghost.show(poses[k])
                ghost.set_visible(k < len(q) and self.panel.ghosts_on())

    # ---------------------------------------------------------------- playback
    def play(self, q: Any) -> int:
        """Load a playback: saved solutions ``(K, D)``, paths ``(P, S, D)`` or a
        :class:`torchik.learn.PathResult`; returns the number of frames."""
        frames = playback_frames(q).to(torch.float64)
        if frames.shape[-1] != self.robot.dof:
            raise ValueError(f"expected configurations of {self.robot.dof} joints")
        self.frames = frames
        self.panel.set_frames(len(frames))
        self.show_frame(0)
        return len(frames)

    def show_frame(self, s: int) -> None:
        """Show frame ``s`` of the playback: its first robot as the robot, the rest as ghosts."""
        if self.frames is None:
            raise ValueError("nothing to play: call play() first")
        self.set_configuration(self.frames[s][0])
        self.show_ghosts(self.frames[s][1:])

    # ---------------------------------------------------------------- pictures
    def screenshot(
        self,
        path: str | os.PathLike | None = None,
        width: int = 960,
        height: int = 720,
        timeout: float = 30.0,
        client: Any = None,
    ) -> np.ndarray:
        """The picture a connected browser renders, on white: ``(height, width, 3)`` uint8;
        written as PNG to ``path`` if given.

        Args:
            path: the PNG file to write, or ``None``.
            width, height: the picture's size (at most the browser window's).
            timeout: seconds to wait for the browser's picture.
            client: the viser client to ask (default: the first connected one).

        Raises:
            RuntimeError: no browser is connected (open :attr:`url`, or see
                :func:`torchik.viewer.browser.headless_browser`).
        """
        clients = [client] if client is not None else list(self.server.get_clients().values())
        if not clients:
            raise RuntimeError(f"no browser shows the page: open {self.url} first")
        rgba = clients[0].get_render(height, width, transport_format="png", timeout=timeout)
        alpha = rgba[..., 3:4].astype(np.float32) / 255
        rgb = (rgba[..., :3] * alpha + 255 * (1 - alpha)).round().astype(np.uint8)
        if path is not None:
            import imageio.v3 as iio

            atomic_write(path, lambda tmp: iio.imwrite(tmp, rgb, extension=".png"))
        return rgb

    def close(self) -> None:
        """Stop the server."""
        self.server.stop()

    def __enter__(self) -> Viewer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def view(robot: Robot | str, model: Any = None, **options: Any) -> Viewer:
    """Serve the viewer of ``robot`` on ``127.0.0.1`` and return it (the server runs in the
    background, so this returns at once and works from a notebook).

    Args:
        robot: a :class:`~torchik.Robot`, a bundled robot's name or a URDF file (whose visual
            geometry is drawn where it resolves; else a stick-and-joint drawing).
        model: ``None`` for numerical IK; ``"pretrained"``, a bundled model's name, a
            checkpoint file or an :class:`~torchik.models.IKModel` for a learned model's samples.
        **options: ``link`` (default: the model's, else the robot's end link), ``n`` ghosts
            (20), ``port`` (8080; the next free one is taken if busy, 0 for any), ``host``,
            ``urdf`` (the visuals of a :class:`~torchik.Robot`), ``refine`` (the model's
            samples, True) and ``seed`` (0).

    Returns:
        The :class:`Viewer`; ``viewer.url`` is the page, ``viewer.server`` the viser server.

    Raises:
        URDFError, ValueError: a bad robot, model, link, ``n`` or ``port``, before any server
            starts.
        RuntimeError: the server did not start (no free port from ``port`` up, an unknown
            ``host``).
        ImportError: viser is not installed.

    Example:
        >>> import torchik
        >>> viewer = torchik.view("snake2", port=0)  # doctest: +SKIP
        >>> viewer.set_target(torch.tensor([0.1, 0.05, 0.0]))  # doctest: +SKIP
    """
    return Viewer(robot, model, **options)
