"""What the viewer shows, as plain arrays: no viser, no browser, so all of it is tested directly.

- :func:`link_poses` and :func:`bone_poses`: where every link frame and every stick of the
  stick-and-joint drawing goes for a configuration;
- :func:`solve_ghosts`: the ghost robots of a target, from numerical IK (distinct solutions) or
  from a learned model's samples (raw or refined), with their errors and the solve time;
- :func:`resolve_model`, :func:`load_solutions` and :func:`playback_frames`: the inputs of the
  page checked before any server starts.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from torchik.files import MAX_DATA_BYTES, load_tensors, read_text
from torchik.geometry.rotations import geodesic_distance, rotmat_to_quat, rotmat_to_rpy
from torchik.robot.robot import Robot

__all__ = [
    "Solutions",
    "bone_pairs",
    "bone_poses",
    "link_poses",
    "load_solutions",
    "playback_frames",
    "pose_text",
    "resolve_model",
    "solve_ghosts",
    "to_wxyz_position",
]


def link_poses(robot: Robot, q: Tensor) -> np.ndarray:
    """``(..., L, 4, 4)`` poses of every link (``robot.link_names`` order) in the root frame.

    Example:
        >>> from torchik.robot import load_robot
        >>> robot = load_robot("snake2", dtype=torch.float64)
        >>> link_poses(robot, robot.neutral()).shape  # base, two links, tip
        (4, 4, 4)
    """
    with torch.no_grad():
        q = torch.as_tensor(q, dtype=robot.dtype, device=robot.device)
        return robot.forward_kinematics(q).cpu().numpy()


def to_wxyz_position(pose: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(..., 4)`` unit quaternions (w, x, y, z; w >= 0) and ``(..., 3)`` positions of
    ``(..., 4, 4)`` poses: what viser takes.

    Example:
        >>> wxyz, xyz = to_wxyz_position(np.eye(4))
        >>> wxyz.tolist(), xyz.tolist()
        ([1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    """
    rot = torch.as_tensor(np.asarray(pose, dtype=np.float64)[..., :3, :3])
    return rotmat_to_quat(rot).numpy(), np.asarray(pose, dtype=np.float64)[..., :3, 3]


def bone_pairs(robot: Robot) -> list[tuple[int, int]]:
    """``(parent link index, child link index)`` of every joint: the sticks of the drawing."""
    return [(robot.link_index(j.parent), robot.link_index(j.child)) for j in robot.model.joints]


def bone_poses(poses: np.ndarray, pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Sticks between link origins as unit-height z-cylinders to scale.

    Args:
        poses: ``(L, 4, 4)`` link poses.
        pairs: ``(parent, child)`` link indices (see :func:`bone_pairs`).

    Returns:
        ``(B, 4, 4)`` poses whose origin is the middle of each stick and whose z axis runs along
        it, and ``(B,)`` lengths (the z scale of a cylinder of height 1).

    Example:
        >>> poses = np.stack([np.eye(4), np.eye(4)]); poses[1, :3, 3] = (0.0, 2.0, 0.0)
        >>> out, length = bone_poses(poses, [(0, 1)])
        >>> out[0, :3, 3].tolist(), out[0, :3, 2].round(6).tolist(), length.tolist()
        ([0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [2.0])
    """
    out = np.tile(np.eye(4), (len(pairs), 1, 1))
    lengths = np.zeros(len(pairs))
    for b, (parent, child) in enumerate(pairs):
        start, end = poses[parent, :3, 3], poses[child, :3, 3]
        d = end - start
        lengths[b] = np.linalg.norm(d)
        z = d / lengths[b] if lengths[b] > 1e-12 else np.array([0.0, 0.0, 1.0])
        helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
        x = np.cross(helper, z)
        x /= np.linalg.norm(x)
        out[b, :3, :3] = np.stack([x, np.cross(z, x), z], axis=-1)
        out[b, :3, 3] = (start + end) / 2
    return out, lengths


def pose_text(pose: np.ndarray) -> str:
    """A pose read out for people: position (m) and roll-pitch-yaw (degrees).

    Example:
        >>> pose_text(np.eye(4))
        'xyz (m): 0.000 0.000 0.000 | rpy (deg): 0.0 0.0 0.0'
    """
    rpy = torch.rad2deg(rotmat_to_rpy(torch.as_tensor(np.asarray(pose)[:3, :3]))).tolist()
    xyz = np.asarray(pose)[:3, 3].tolist()
    # rounded first, then + 0.0: no "-0.0" for a value a hair below zero
    rpy, xyz = [round(v, 1) + 0.0 for v in rpy], [round(v, 3) + 0.0 for v in xyz]
    return "xyz (m): {:.3f} {:.3f} {:.3f} | rpy (deg): {:.1f} {:.1f} {:.1f}".format(*xyz, *rpy)


# ---------------------------------------------------------------------------- solutions
@dataclass(frozen=True)
class Solutions:
    """The ghost robots of one target.

    Attributes:
        q: ``(K, D)`` configurations, best first.
        position_error: ``(K,)`` distance (m) of the link to the target.
        rotation_error: ``(K,)`` geodesic angle (rad) to the target; ``None`` position-only.
        seconds: wall-clock time of the solve (or sampling and refinement).
        source: how they were made, for the side panel.
    """

    q: Tensor
    position_error: Tensor
    rotation_error: Tensor | None
    seconds: float
    source: str

    def summary(self) -> str:
        """Markdown lines for the side panel."""
        lines = [f"**{len(self.q)} solutions** by {self.source} in {1000 * self.seconds:.0f} ms"]
        for k in range(len(self.q)):
            text = f"{k + 1}. {1000 * self.position_error[k].item():.2f} mm"
            if self.rotation_error is not None:
                text += f", {math.degrees(self.rotation_error[k].item()):.2f} deg"
            lines.append(text)
        return "\n".join(lines)


def _errors(robot: Robot, q: Tensor, target: Tensor, link: str, position_only: bool):
    pose = robot.forward_kinematics(q.to(robot.dtype), link)
    position = target if position_only else target[:3, 3]
    pos_err = (pose[:, :3, 3] - position).norm(dim=-1)
    if position_only:
        return pos_err, None
    return pos_err, geodesic_distance(pose[:, :3, :3], target[:3, :3].expand_as(pose[:, :3, :3]))


@torch.no_grad()
def solve_ghosts(
    robot: Robot,
    target: Tensor,
    link: str,
    n: int,
    *,
    position_only: bool = False,
    model: Any = None,
    refine: bool = True,
    seed: int = 0,
    min_distance: float = 0.1,
) -> Solutions:
    """Up to ``n`` solutions of one target for the ghost robots.

    Args:
        robot: the robot (its dtype and device are used).
        target: ``(4, 4)`` pose of ``link``, or ``(3,)`` position with ``position_only``.
        link: the link to place.
        n: the most solutions to return.
        position_only: ignore the orientation.
        model: ``None`` for numerical IK (:func:`torchik.solve_ik` from ``4 n`` seeds, then
            :meth:`~torchik.IKResult.distinct`), else a learned model whose ``n`` samples are
            shown as drawn or, with ``refine``, polished by :func:`torchik.ik.refine_samples`.
        refine: refine the model's samples.
        seed: the random seed (the same target gives the same ghosts).
        min_distance: joint-space distance (rad) between distinct numerical solutions.

    Returns:
        The :class:`Solutions`; numerical IK without a success returns its best effort.
    """
    from torchik.ik.refine import refine_samples
    from torchik.ik.solve import solve_ik

    target = torch.as_tensor(target, dtype=robot.dtype, device=robot.device)
    start = time.perf_counter()
    if model is None:
        result = solve_ik(
            robot,
            target,
            link,
            position_only=position_only,
            num_seeds=4 * n,
            early_stop=False,
            generator=torch.Generator().manual_seed(seed),
        )
        q, keep = result.distinct(min_distance)
        q = q[keep][:n] if keep.any() else result.best().q
        source = "numerical IK, distinct"
    else:
        gen = torch.Generator(model.target_mean.device).manual_seed(seed)
        encoded = _encode(model, target, position_only)
        q = model.sample(encoded, n, generator=gen).to(robot.device, robot.dtype)
        source = f"{model.family} samples"
        if refine:
            q = refine_samples(robot, target, q, link, position_only=position_only).q
            source += " + refinement"
    seconds = time.perf_counter() - start
    pos_err, rot_err = _errors(robot, q, target, link, position_only)
    order = pos_err.argsort() if rot_err is None else (pos_err / 1e-3 + rot_err / 0.017).argsort()
    rot_err = None if rot_err is None else rot_err[order]
    return Solutions(q[order], pos_err[order], rot_err, seconds, source)


def _encode(model: Any, target: Tensor, position_only: bool) -> Tensor:
    """The model's ``(T,)`` encoding of a ``(4, 4)`` pose or ``(3,)`` position
    (:func:`torchik.learn.as_target`), in the model's dtype and device."""
    from torchik.learn.data import as_target

    if position_only and model.spec.targets == "pose":
        raise ValueError("this model was trained on full poses: leave position-only mode")
    return as_target(target, model.spec.targets).to(model.target_mean)


# ---------------------------------------------------------------------------- inputs
def resolve_model(model: Any, robot: Robot) -> Any:
    """A learned model for ``robot`` from a name, a checkpoint path or a model, checked.

    Args:
        model: ``None``; ``"pretrained"`` (the bundled model of the robot's name); a bundled
            model's name (see :data:`torchik.models.PRETRAINED`); a checkpoint file written by
            ``torchik train``; or an :class:`~torchik.models.IKModel`.
        robot: the robot the model must have been trained for.

    Returns:
        The model in eval mode on the CPU, or ``None``.

    Raises:
        ValueError: an unknown name, a file that is not a model, or a model of another robot.
    """
    if model is None:
        return None
    if isinstance(model, str | os.PathLike):
        model = _load_model(os.fspath(model), robot)
    from torchik.learn.spec import robot_hash

    if model.spec.robot_hash != robot_hash(robot):
        raise ValueError(f"the model is for robot {model.spec.robot!r}, not {robot.name!r}")
    return model.eval()


def _load_model(name: str, robot: Robot) -> Any:
    from torchik.models import PRETRAINED, load_pretrained
    from torchik.models.registry import load

    if name == "pretrained":
        name = robot.name
    if name in PRETRAINED:
        return load_pretrained(name, map_location="cpu")
    if Path(name).is_file():
        return load(name, map_location="cpu")
    raise ValueError(
        f"unknown model {name!r}: use 'pretrained', a bundled model ({', '.join(PRETRAINED)}) "
        "or a checkpoint file written by 'torchik train'"
    )


def load_solutions(path: str | os.PathLike, robot: Robot) -> Tensor:
    """Saved configurations to play back: ``(K, D)``, ``(S, D)`` or paths ``(P, S, D)``.

    Args:
        path: the JSON records of ``torchik solve --format json`` (one object per solution,
            keyed by joint name), or a torch file of a tensor (or of a dict with ``"q"``),
            read with ``weights_only=True``.
        robot: the robot; the last dimension must be its ``dof``.

    Raises:
        ValueError: the file holds no configurations of this robot.
    """
    path = Path(path)
    if path.suffix.lower() == ".json":
        records = json.loads(read_text(path, MAX_DATA_BYTES))
        try:
            q = torch.tensor([[float(r[name]) for name in robot.joint_names] for r in records])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: not solutions of {robot.name} ({err})") from None
    else:
        data = load_tensors(path, "cpu", "torch file of configurations")
        q = data.get("q") if isinstance(data, dict) else data  # type: ignore[assignment]  # checked next
    if not isinstance(q, Tensor) or q.dim() not in (2, 3) or q.shape[-1] != robot.dof:
        raise ValueError(f"{path}: expected configurations (..., {robot.dof}) of {robot.name}")
    return q.to(torch.float64)


def playback_frames(q: Any) -> Tensor:
    """``(S, P, D)`` frames of a playback: frame ``s`` shows ``P`` robots.

    ``(K, D)`` saved solutions become ``K`` frames of one robot; ``(P, S, D)`` paths (or a
    :class:`torchik.learn.PathResult`) become ``S`` frames of ``P`` robots.

    Example:
        >>> playback_frames(torch.zeros(5, 7)).shape, playback_frames(torch.zeros(3, 9, 7)).shape
        (torch.Size([5, 1, 7]), torch.Size([9, 3, 7]))
    """
    q = getattr(q, "q", q)
    q = torch.as_tensor(q)
    if q.dim() == 2:
        return q[:, None]
    if q.dim() == 3:
        return q.transpose(0, 1)
    raise ValueError(f"expected (K, D) solutions or (P, S, D) paths, got shape {tuple(q.shape)}")
