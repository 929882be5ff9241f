"""Pure helpers on a URDF description that :class:`torchik.robot.Robot` is built from: the
frames that align each joint axis with z, the origin transforms, and the description of one
chain cut out of a tree. No state; float64 in, float64 out.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from torchik.rotations import rpy_to_rotmat
from torchik.urdf import URDFModel


def _axis_alignments(axes: Sequence[Sequence[float]]) -> Tensor:
    """Rotations ``(N, 4, 4)`` (homogeneous, float64) whose z columns are the unit ``axes``."""
    z = torch.tensor(axes, dtype=torch.float64).reshape(-1, 3)
    unit_x = z.new_tensor([1.0, 0.0, 0.0]).expand_as(z)
    helper = torch.where(z[:, :1].abs() < 0.9, unit_x, unit_x.roll(1, dims=-1))
    x = torch.linalg.cross(helper, z)
    x = x / x.norm(dim=-1, keepdim=True)
    out = torch.eye(4, dtype=torch.float64).repeat(z.shape[0], 1, 1)
    out[:, :3, :3] = torch.stack((x, torch.linalg.cross(z, x), z), dim=-1)
    return out


def _origin_matrices(xyz: Tensor, rpy: Tensor) -> Tensor:
    """``(N, 4, 4)`` transforms from translations ``(N, 3)`` and roll-pitch-yaw ``(N, 3)``."""
    top = torch.cat((rpy_to_rotmat(rpy), xyz[..., None]), dim=-1)
    bottom = xyz.new_tensor([0.0, 0.0, 0.0, 1.0]).expand(xyz.shape[0], 1, 4)
    return torch.cat((top, bottom), dim=-2)


def _path_model(model: URDFModel, base: str, tip: str) -> URDFModel:
    """The description of the joints from ``base`` down to ``tip``, rooted at ``base``."""
    parent_joint = {joint.child: joint for joint in model.joints}
    path, link = [], tip
    while link != base:
        if link not in parent_joint:
            raise ValueError(f"link {base!r} is not on the path from the root to {tip!r}")
        path.append(parent_joint[link])
        link = path[-1].parent
    path.reverse()
    on_path = {joint.name for joint in path}
    for joint in path:
        if joint.mimic is not None and joint.mimic.joint not in on_path:
            raise ValueError(
                f"joint {joint.name!r} mimics {joint.mimic.joint!r}, which is not between "
                f"{base!r} and {tip!r}"
            )
    return URDFModel(model.name, base, (base, *(joint.child for joint in path)), tuple(path))
