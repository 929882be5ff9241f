"""Floating bases: the base poses inside ``q``, and stepping on the configuration manifold.

A floating robot's ``q (..., 7 K + n)`` starts with the poses of its ``K`` free bodies (one for
a floating base; several in a MuJoCo scene with free objects), each a position ``(x, y, z)`` in
metres then a quaternion ``(qw, qx, qy, qz)`` (torchik's order, scalar first; Pinocchio's
FreeFlyer stores ``(qx, qy, qz, qw)``), then the ``n`` joint values. A quaternion need not be
unit: every function uses ``quat / |quat|``, so gradients with respect to it are tangent to the
unit sphere. Velocities and steps ``v (..., 6 K + n)`` start with each body's twist in its own
frame, linear then angular (Pinocchio's FreeFlyer convention), so Jacobians have
``nv = nq - K`` columns. Fixed-base robots take the same calls with ``K = 0``: ``nq == nv`` and
plain addition.
"""

from __future__ import annotations

import torch
from torch import Tensor

from torchik.geometry.rotations import (
    quat_conjugate,
    quat_multiply,
    quat_normalize,
    quat_to_rotmat,
    quat_to_rotvec,
    rotvec_to_quat,
    skew,
)

__all__ = [
    "BASE_COORDINATES",
    "base_jacobian",
    "base_pose",
    "difference",
    "integrate",
    "normalize_bases",
    "velocity_coordinates",
]

BASE_COORDINATES = ("x", "y", "z", "qw", "qx", "qy", "qz")
"""The names of a floating base's 7 coordinates in ``q`` (prefixed ``<joint>/`` in a robot)."""


def base_pose(q_base: Tensor, origin: Tensor | None = None) -> Tensor:
    """The base link's pose ``(..., 4, 4)`` in the world, ``origin @ [R(quat) | p]``.

    Args:
        q_base: ``(..., 7)`` position and quaternion ``(w, x, y, z)`` (any nonzero norm).
        origin: ``(4, 4)`` (or ``(..., 4, 4)``, broadcast) the floating joint's ``<origin>``
            (``None``: identity).

    Example:
        >>> base_pose(torch.tensor([1.0, 2.0, 3.0, 1.0, 0.0, 0.0, 0.0]))[:3, 3]
        tensor([1., 2., 3.])
    """
    top = torch.cat((quat_to_rotmat(q_base[..., 3:7]), q_base[..., :3, None]), dim=-1)
    eye = torch.eye(4, dtype=top.dtype, device=top.device)  # made on the device: capturable
    bottom = eye[3:].expand(*top.shape[:-2], 1, 4)
    pose = torch.cat((top, bottom), dim=-2)
    return pose if origin is None else origin @ pose


def base_jacobian(
    q_base: Tensor, origin: Tensor | None, jac: Tensor, pose: Tensor
) -> tuple[Tensor, Tensor]:
    """The world Jacobian ``(B, 6, 6 + n)`` and pose ``(B, 4, 4)`` of a link from its
    Jacobian ``jac (B, 6, n)`` and pose ``pose (B, 4, 4)`` relative to the base.

    The base columns are those of its local twist ``(v, w)``: a step moves the base to
    ``p + R v`` and ``R exp([w]x)``, so the link origin ``x`` moves by ``R v + (R w) x (x - p)``.
    """
    base = base_pose(q_base, origin)
    rot, position = base[..., :3, :3], base[..., :3, 3]
    world = base @ pose
    lever = skew(world[..., :3, 3] - position)
    zeros = torch.zeros_like(rot)
    linear = torch.cat((rot, -lever @ rot, rot @ jac[..., :3, :]), dim=-1)
    angular = torch.cat((zeros, rot, rot @ jac[..., 3:, :]), dim=-1)
    return torch.cat((linear, angular), dim=-2), world


def normalize_bases(q: Tensor, bases: int) -> Tensor:
    """``q (..., nq)`` with each of its ``bases`` quaternions of unit length (the same
    rotations; what a solver steps from). A quaternion of unit length to a few units in the
    last place is kept bit for bit (a held base stays exactly where it was given).

    Example:
        >>> normalize_bases(torch.tensor([1.0, 2.0, 3.0, 2.0, 0.0, 0.0, 0.0, 0.5]), 1)
        tensor([1.0000, 2.0000, 3.0000, 1.0000, 0.0000, 0.0000, 0.0000, 0.5000])

    Raises:
        ValueError: a zero quaternion (no rotation to keep).
    """
    k = int(bases)
    if not k:
        return q
    parts = []
    for b in range(k):
        quat = q[..., 7 * b + 3 : 7 * b + 7]
        if q.device.type != "meta" and bool((quat == 0).all(dim=-1).any()):
            raise ValueError(f"the quaternion of floating base {b} is zero: no rotation")
        unit = (quat.norm(dim=-1, keepdim=True) - 1).abs() <= 8 * torch.finfo(q.dtype).eps
        parts += [q[..., 7 * b : 7 * b + 3], torch.where(unit, quat, quat_normalize(quat))]
    return torch.cat((*parts, q[..., 7 * k :]), dim=-1)


def integrate(q: Tensor, v: Tensor, bases: int) -> Tensor:
    """``q ⊕ v``: the configuration reached from ``q (..., nq)`` by the step ``v (..., nv)``.

    For each of the ``bases`` floating bases, position ``p + R v_lin`` and quaternion
    ``quat * exp(w / 2)`` (normalised): the retraction of SO(3) x R^3 with the step in the base
    frame, whose derivative at ``v = 0`` is what :func:`base_jacobian` uses; joints add.

    Args:
        q: ``(..., 7 K + n)`` configurations.
        v: ``(..., 6 K + n)`` steps.
        bases: ``K``, the number of floating bases (``True``/``False``: one or none).

    Example:
        >>> q = torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.5])
        >>> integrate(q, torch.tensor([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25]), 1)
        tensor([1.0000, 0.0000, 0.0000, 1.0000, 0.0000, 0.0000, 0.0000, 0.7500])

    Raises:
        TypeError: not tensors (or, with floating bases, of two dtypes).
        ValueError: ``v`` not of size ``nq - K``, or batch shapes that do not broadcast.
    """
    k = int(bases)
    _check_pair("q", q, "v", v, k)
    if not k:
        return q + v
    parts = []
    for b in range(k):
        qb, vb = q[..., 7 * b : 7 * b + 7], v[..., 6 * b : 6 * b + 6]
        quat = qb[..., 3:7]
        step = (quat_to_rotmat(quat) @ vb[..., :3, None])[..., 0]
        turned = quat_normalize(quat_multiply(quat, rotvec_to_quat(vb[..., 3:6])))
        parts += [qb[..., :3] + step, turned]
    return torch.cat((*parts, q[..., 7 * k :] + v[..., 6 * k :]), dim=-1)


def difference(q0: Tensor, q1: Tensor, bases: int) -> Tensor:
    """``q1 ⊖ q0 (..., nv)``: the step ``v`` with ``integrate(q0, v, bases) == q1`` (rotation
    angles at most π); ``q1 - q0`` without floating bases.

    Raises:
        TypeError: not tensors (or, with floating bases, of two dtypes).
        ValueError: ``q0`` and ``q1`` of other sizes, or batch shapes that do not broadcast.
    """
    k = int(bases)
    _check_pair("q0", q0, "q1", q1, k)
    if not k:
        return q1 - q0
    parts = []
    for b in range(k):
        a, c = q0[..., 7 * b : 7 * b + 7], q1[..., 7 * b : 7 * b + 7]
        rot = quat_to_rotmat(a[..., 3:7])
        linear = (rot.transpose(-1, -2) @ (c[..., :3] - a[..., :3])[..., None])[..., 0]
        relative = quat_multiply(quat_conjugate(quat_normalize(a[..., 3:7])), c[..., 3:7])
        parts += [linear, quat_to_rotvec(relative)]
    return torch.cat((*parts, q1[..., 7 * k :] - q0[..., 7 * k :]), dim=-1)


def _check_pair(name: str, q: Tensor, other: str, x: Tensor, bases: int) -> None:
    """``q (..., nq)`` and ``x``, a configuration ``(..., nq)`` (``difference``) or a step
    ``(..., nv)`` (``integrate``, named ``v``), with batch shapes that broadcast."""
    for label, value in ((name, q), (other, x)):
        if not isinstance(value, Tensor):
            raise TypeError(f"{label} must be a torch.Tensor, got {type(value).__name__}")
    least = 7 * bases
    if q.dim() == 0 or q.shape[-1] < least:
        raise ValueError(f"{name} must have shape (..., nq), nq >= {least}, got {tuple(q.shape)}")
    size = q.shape[-1] - bases if other == "v" else q.shape[-1]
    if x.dim() == 0 or x.shape[-1] != size:
        raise ValueError(
            f"{other} must have shape (..., {size}) for {name} of shape {tuple(q.shape)}, got "
            f"{tuple(x.shape)}"
        )
    try:
        torch.broadcast_shapes(q.shape[:-1], x.shape[:-1])
    except RuntimeError:
        raise ValueError(
            f"{name} {tuple(q.shape)} and {other} {tuple(x.shape)}: batch shapes do not broadcast"
        ) from None
    if q.device != x.device:
        raise ValueError(f"{name} is on {q.device} but {other} is on {x.device}")
    if bases and q.dtype != x.dtype:
        raise TypeError(f"{name} is {q.dtype} but {other} is {x.dtype}: convert one of them")


def velocity_coordinates(nv: int, bases: int, device: torch.device | None = None) -> Tensor:
    """``(nv,)`` long: the coordinate of ``q`` that each entry of a step ``v`` moves, ``-1``
    for a floating base's six (its twist moves position and quaternion together); with ``K``
    bases, joint ``i`` of ``v`` (``i >= 6 K``) is coordinate ``i + K`` of ``q``.

    Example:
        >>> velocity_coordinates(8, 1)
        tensor([-1, -1, -1, -1, -1, -1,  7,  8])
    """
    k = int(bases)
    index = torch.arange(nv, device=device)
    return torch.where(index < 6 * k, -1, index + k) if k else index
