"""Homogeneous rigid transforms ``(..., 4, 4)``, with any leading batch dims.

These functions need no rotation parametrisation, only matrix blocks (rotations are
:mod:`torchik.geometry.rotations`). Transforms are ``[[R, p], [0, 1]]`` with ``R`` acting on
column vectors. An argument of another trailing shape is refused with a one-line ValueError
naming it and the shape it needs.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["pose_to_matrix", "matrix_to_pose", "invert_transform"]


def _check_shape(where: str, name: str, x: Tensor, shape: tuple[int, ...]) -> None:
    """A one-line ValueError unless the last dims of ``x`` are ``shape``, for geometry's pure
    functions: torch would meet a wrong one deep inside (an unpacking, indexing or broadcasting
    error naming no argument) or, given a larger matrix, answer from its corner. A comparison
    of sizes only: no device read, and torch.compile and vmap trace it (vmap's shapes are a
    sample's)."""
    if x.shape[-len(shape) :] != shape:
        sizes = ", ".join(map(str, shape))
        raise ValueError(f"{where}: {name} must have shape (..., {sizes}), got {tuple(x.shape)}")


def pose_to_matrix(position: Tensor, rotmat: Tensor) -> Tensor:
    """Homogeneous transform ``[[R, p], [0, 1]]``.

    Args:
        position: Translations ``(..., 3)``.
        rotmat: Rotation matrices ``(..., 3, 3)``; batch dims broadcast against ``position``.

    Returns:
        Transforms ``(..., 4, 4)``.
    """
    _check_shape("pose_to_matrix", "position", position, (3,))
    _check_shape("pose_to_matrix", "rotmat", rotmat, (3, 3))
    batch = torch.broadcast_shapes(position.shape[:-1], rotmat.shape[:-2])
    top = torch.cat((rotmat.expand(*batch, 3, 3), position.expand(*batch, 3)[..., None]), dim=-1)
    bottom = position.new_tensor([0.0, 0.0, 0.0, 1.0]).expand(*batch, 1, 4)
    return torch.cat((top, bottom), dim=-2)


def matrix_to_pose(transform: Tensor) -> tuple[Tensor, Tensor]:
    """Splits a homogeneous transform into translation and rotation.

    Args:
        transform: Transforms ``(..., 4, 4)``.

    Returns:
        ``(position (..., 3), rotmat (..., 3, 3))`` (views of ``transform``).
    """
    _check_shape("matrix_to_pose", "transform", transform, (4, 4))
    return transform[..., :3, 3], transform[..., :3, :3]


def invert_transform(transform: Tensor) -> Tensor:
    """Inverse of a rigid transform, ``[[R^T, -R^T p], [0, 1]]`` (no general matrix inverse).

    Args:
        transform: Rigid transforms ``(..., 4, 4)``.

    Returns:
        Transforms ``(..., 4, 4)``.
    """
    _check_shape("invert_transform", "transform", transform, (4, 4))
    position, rotmat = matrix_to_pose(transform)
    rot_t = rotmat.transpose(-1, -2)
    return pose_to_matrix(-(rot_t @ position[..., None])[..., 0], rot_t)
