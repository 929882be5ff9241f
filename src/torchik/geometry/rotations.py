"""Pure rotation and rigid-pose functions on tensors with any leading batch dimensions.

Conventions:

* rotation matrices ``(..., 3, 3)`` act on column vectors, ``x_parent = R @ x_child``;
* quaternions are ``(w, x, y, z)``, scalar first, unit length;
* rotation vectors (axis times angle, radians) are ``(..., 3)``;
* homogeneous transforms are ``(..., 4, 4)`` with last row ``(0, 0, 0, 1)``;
* an argument of another trailing shape is refused with a one-line ValueError naming it and the
  shape it needs.

Every function works for float32 and float64 on any device and is differentiable. Where a
formula is singular (the rotation angle at the identity, ``atan2(0, 0)``, the norm of a zero
vector) the code uses a formulation whose value *and* gradient stay finite: truncated Taylor
series selected with :func:`torch.where`, where the argument fed to the branch that is *not*
selected is replaced by a harmless constant. That matters because ``torch.where`` routes a zero
gradient into the unselected branch, and ``0 * inf`` or ``0 * nan`` is still ``nan``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from torchik.geometry.transforms import _check_shape, matrix_to_pose

__all__ = [
    "skew",
    "unskew",
    "rpy_to_rotmat",
    "rotmat_to_rpy",
    "axis_angle_to_rotmat",
    "rotvec_to_rotmat",
    "rotmat_to_rotvec",
    "rotvec_to_quat",
    "quat_to_rotvec",
    "quat_to_rotmat",
    "rotmat_to_quat",
    "quat_multiply",
    "quat_conjugate",
    "quat_normalize",
    "quat_canonical",
    "rotmat_to_6d",
    "sixd_to_rotmat",
    "geodesic_distance",
    "pose_error",
]

# Taylor coefficients in powers of x^2 (x = an angle or tan of a half-angle).
# cos(x) = sum (-1)^k x^(2k) / (2k)!        sin(x)/x = sum (-1)^k x^(2k) / (2k+1)!
# atan(x)/x = sum (-1)^k x^(2k) / (2k+1)
_COS = tuple((-1) ** k / math.factorial(2 * k) for k in range(5))
_SINC = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(5))
_ATANC = tuple((-1) ** k / (2 * k + 1) for k in range(8))

# The series above are used for squared arguments below these thresholds. With the number of terms
# chosen, the first neglected term is < 1e-17 relative, so the series are exact in float64. Above
# a threshold the closed forms (e.g. sin(h) / h) lose about eps / threshold relative accuracy in
# their *gradients* through cancellation (~1e-4 in float32, ~1e-13 in float64); a smaller
# threshold would need fewer terms but make that worse.
_SMALL_HALF_ANGLE_SQ = 2.5e-3  # (theta / 2)^2: theta < 0.1 rad
_SMALL_TAN_SQ = 1e-2  # tan(theta / 2)^2 = (|v| / w)^2 of a quaternion: theta < ~0.2 rad


def _series(x2: Tensor, coeffs: Sequence[float]) -> Tensor:
    """Evaluates ``sum_k coeffs[k] * x2**k`` by Horner's rule."""
    out = torch.full_like(x2, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        out = out * x2 + c
    return out


def _even_fn(
    x2: Tensor, threshold: float, coeffs: Sequence[float], closed: Callable[[Tensor], Tensor]
) -> Tensor:
    """An even function ``f(x)`` given ``x2 = x**2``, finite with finite gradients at ``x = 0``.

    Below ``threshold`` the Taylor series in ``x2`` is used; above it ``closed(x)``. Each branch
    only sees arguments where it is well defined, so no ``nan`` leaks through ``torch.where``.
    """
    small = x2 < threshold
    series = _series(torch.where(small, x2, 0.0), coeffs)
    closed_val = closed(torch.sqrt(torch.where(small, 1.0, x2)))
    return torch.where(small, series, closed_val)


def _safe_norm(v: Tensor, keepdim: bool = False) -> Tensor:
    """Euclidean norm over the last dim; its gradient at ``v = 0`` is 0 (a subgradient), not nan.
    Without grad mode the same values in three operations instead of seven (IK's evaluation)."""
    n2 = (v * v).sum(dim=-1, keepdim=keepdim)
    if not torch.is_grad_enabled():  # sqrt(0) is the 0 the guard gives
        return torch.sqrt(n2)
    positive = n2 > 0
    return torch.where(positive, torch.sqrt(torch.where(positive, n2, 1.0)), 0.0)


def _normalize(v: Tensor) -> Tensor:
    """``v / |v|`` over the last dim; a zero vector maps to zero with large but finite gradients."""
    # sqrt(tiny) (~1e-19 in float32) keeps 1 / norm and its derivative representable.
    floor = torch.finfo(v.dtype).tiny ** 0.5
    return v / _safe_norm(v, keepdim=True).clamp_min(floor)


def _mat3(entries: Sequence[Tensor]) -> Tensor:
    """Stacks nine row-major ``(...)`` entries into ``(..., 3, 3)``."""
    return torch.stack(torch.broadcast_tensors(*entries), dim=-1).unflatten(-1, (3, 3))


def skew(v: Tensor) -> Tensor:
    """The cross-product matrix: ``skew(v) @ u == cross(v, u)``.

    Args:
        v: Vectors ``(..., 3)``.

    Returns:
        Skew-symmetric matrices ``(..., 3, 3)``.
    """
    _check_shape("skew", "v", v, (3,))
    x, y, z = v.unbind(-1)
    o = torch.zeros_like(x)
    return _mat3((o, -z, y, z, o, -x, -y, x, o))


def unskew(m: Tensor) -> Tensor:
    """The vector of the skew-symmetric part of ``m``; inverse of :func:`skew`.

    Args:
        m: Matrices ``(..., 3, 3)``; only ``(m - m^T) / 2`` is used.

    Returns:
        Vectors ``(..., 3)``.
    """
    _check_shape("unskew", "m", m, (3, 3))
    return 0.5 * torch.stack(
        (
            m[..., 2, 1] - m[..., 1, 2],
            m[..., 0, 2] - m[..., 2, 0],
            m[..., 1, 0] - m[..., 0, 1],
        ),
        dim=-1,
    )


def rpy_to_rotmat(rpy: Tensor) -> Tensor:
    """URDF fixed-axis roll-pitch-yaw to a rotation matrix, ``Rz(yaw) @ Ry(pitch) @ Rx(roll)``.

    Args:
        rpy: Angles ``(..., 3)`` in radians, ordered (roll, pitch, yaw).

    Returns:
        Rotation matrices ``(..., 3, 3)``.
    """
    _check_shape("rpy_to_rotmat", "rpy", rpy, (3,))
    cr, cp, cy = torch.cos(rpy).unbind(-1)
    sr, sp, sy = torch.sin(rpy).unbind(-1)
    return _mat3(
        (
            cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr,
            sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr,
            -sp, cp * sr, cp * cr,
        )
    )  # fmt: skip


def rotmat_to_rpy(rotmat: Tensor) -> Tensor:
    """Rotation matrix to URDF roll-pitch-yaw; inverse of :func:`rpy_to_rotmat`.

    Yaw is read first, ``atan2(R10, R00)``; roll and pitch then come from ``Rz(yaw)^T R``, which
    is ``Ry(pitch) Rx(roll)``. Every ``atan2`` therefore gets a pair of unit norm (or ``cos(pitch)``
    for yaw), and the angles reproduce ``R`` to rounding error even next to gimbal lock.

    Gimbal lock: when ``cos(pitch) < eps`` (the dtype's machine epsilon) roll and yaw are not
    separable; then ``yaw = 0`` and roll carries the rotation about the common axis (the same
    convention as SciPy's ``as_euler("xyz")``). Gradients stay finite there but grow like
    ``1 / cos(pitch)`` as gimbal lock is approached, as the parametrisation itself is singular.

    Args:
        rotmat: Rotation matrices ``(..., 3, 3)``.

    Returns:
        ``(..., 3)`` as (roll, pitch, yaw) with roll and yaw in ``[-pi, pi]`` and pitch in
        ``[-pi/2, pi/2]``.
    """
    _check_shape("rotmat_to_rpy", "rotmat", rotmat, (3, 3))
    r00, r01, r02, r10, r11, r12, r20, _, _ = rotmat.flatten(-2).unbind(-1)
    eps = torch.finfo(rotmat.dtype).eps
    locked = r00 * r00 + r10 * r10 < eps * eps
    # Fixed (0, 1) arguments under lock give yaw = 0 with a finite gradient (atan2(0, 0) has none).
    yaw = torch.atan2(torch.where(locked, 0.0, r10), torch.where(locked, 1.0, r00))
    cy, sy = torch.cos(yaw), torch.sin(yaw)
    # Rows of M = Rz(yaw)^T R = Ry(pitch) Rx(roll): M[0, 0] = cos(pitch), M[1, 1:] = (cr, -sr).
    cos_pitch = cy * r00 + sy * r10
    roll = torch.atan2(sy * r02 - cy * r12, cy * r11 - sy * r01)
    pitch = torch.atan2(-r20, cos_pitch)
    return torch.stack((roll, pitch, yaw), dim=-1)


def axis_angle_to_rotmat(axis: Tensor, angle: Tensor) -> Tensor:
    """Rodrigues' formula ``R = I + sin(a) K + (1 - cos(a)) K^2`` with ``K = skew(axis)``.

    Args:
        axis: Unit rotation axes ``(..., 3)`` (not normalised here).
        angle: Angles ``(...)`` in radians; broadcast against ``axis.shape[:-1]``.

    Returns:
        Rotation matrices ``(..., 3, 3)``.
    """
    _check_shape("axis_angle_to_rotmat", "axis", axis, (3,))
    k = skew(axis)
    a = angle[..., None, None]
    # 1 - cos(a) = 2 sin^2(a / 2) avoids the cancellation of the left-hand form for small a.
    eye = torch.eye(3, dtype=k.dtype, device=k.device)
    return eye + torch.sin(a) * k + 2.0 * torch.sin(0.5 * a) ** 2 * (k @ k)


def rotvec_to_quat(rotvec: Tensor) -> Tensor:
    """Exponential map from a rotation vector to a unit quaternion ``(cos(t/2), sin(t/2) u)``.

    Args:
        rotvec: Rotation vectors ``(..., 3)``, ``t = |rotvec|``; safe (value and gradient) at 0.

    Returns:
        Unit quaternions ``(..., 4)``; ``w < 0`` when ``t > pi`` (no sign canonicalisation, so the
        map stays smooth).
    """
    _check_shape("rotvec_to_quat", "rotvec", rotvec, (3,))
    half2 = 0.25 * (rotvec * rotvec).sum(dim=-1)
    w = _even_fn(half2, _SMALL_HALF_ANGLE_SQ, _COS, torch.cos)
    # sin(t/2) / t = 0.5 * sinc(t/2)
    scale = 0.5 * _even_fn(half2, _SMALL_HALF_ANGLE_SQ, _SINC, lambda h: torch.sin(h) / h)
    return torch.cat((w[..., None], scale[..., None] * rotvec), dim=-1)


def quat_to_rotvec(quat: Tensor) -> Tensor:
    """Logarithm map from a quaternion to a rotation vector with angle in ``[0, pi]``.

    The angle is ``2 atan2(|v|, w)`` of the canonical (``w >= 0``) quaternion, accurate both for
    tiny angles (no ``acos`` of a number near 1) and near ``pi`` (no division by ``sin``). The
    rotation vector is ``v * 2 atan2(|v|, w) / |v|``; for ``|v| << w`` the factor is the series of
    ``2 atan(r) / (r w)``, ``r = |v| / w``, so value and gradient are finite at the identity.

    Args:
        quat: Quaternions ``(..., 4)``, unit (a nonzero scale is tolerated).

    Returns:
        Rotation vectors ``(..., 3)``. At exactly ``pi`` the sign follows :func:`quat_canonical`.
    """
    _check_shape("quat_to_rotvec", "quat", quat, (4,))
    q = quat_canonical(quat)
    w, v = q[..., 0], q[..., 1:]
    s2 = (v * v).sum(dim=-1)
    small = s2 < _SMALL_TAN_SQ * w * w
    w_small = torch.where(small, w, 1.0)
    r2 = torch.where(small, s2, 0.0) / (w_small * w_small)
    factor_small = 2.0 / w_small * _series(r2, _ATANC)
    s = torch.sqrt(torch.where(small, 1.0, s2))
    factor_large = 2.0 * torch.atan2(s, w) / s
    return torch.where(small, factor_small, factor_large)[..., None] * v


def rotvec_to_rotmat(rotvec: Tensor) -> Tensor:
    """Exponential map from a rotation vector (axis times angle) to a rotation matrix.

    Computed through :func:`rotvec_to_quat`, so value and gradient are exact at ``rotvec = 0``.

    Args:
        rotvec: Rotation vectors ``(..., 3)`` in radians.

    Returns:
        Rotation matrices ``(..., 3, 3)``.
    """
    _check_shape("rotvec_to_rotmat", "rotvec", rotvec, (3,))
    return quat_to_rotmat(rotvec_to_quat(rotvec))


def rotmat_to_rotvec(rotmat: Tensor) -> Tensor:
    """Logarithm map from a rotation matrix to a rotation vector with angle in ``[0, pi]``.

    Goes through :func:`rotmat_to_quat` (well conditioned for every rotation) and
    :func:`quat_to_rotvec` (atan2-based), so it is accurate and has finite gradients near 0 and
    near ``pi``. The map is discontinuous at ``pi`` itself, where ``v`` and ``-v`` are equal.

    Args:
        rotmat: Rotation matrices ``(..., 3, 3)``.

    Returns:
        Rotation vectors ``(..., 3)``.
    """
    _check_shape("rotmat_to_rotvec", "rotmat", rotmat, (3, 3))
    return quat_to_rotvec(rotmat_to_quat(rotmat))


def quat_to_rotmat(quat: Tensor) -> Tensor:
    """Quaternion ``(w, x, y, z)`` to rotation matrix.

    Uses ``s = 2 / |q|^2`` instead of 2, so a not exactly unit ``q`` still gives the rotation of
    ``q / |q|`` (an exact rotation up to rounding).

    Args:
        quat: Quaternions ``(..., 4)``, nonzero.

    Returns:
        Rotation matrices ``(..., 3, 3)``.
    """
    _check_shape("quat_to_rotmat", "quat", quat, (4,))
    w, x, y, z = quat.unbind(-1)
    s = 2.0 / (quat * quat).sum(dim=-1)
    return _mat3(
        (
            1 - s * (y * y + z * z), s * (x * y - w * z), s * (x * z + w * y),
            s * (x * y + w * z), 1 - s * (x * x + z * z), s * (y * z - w * x),
            s * (x * z - w * y), s * (y * z + w * x), 1 - s * (x * x + y * y),
        )
    )  # fmt: skip


def rotmat_to_quat(rotmat: Tensor) -> Tensor:
    """Rotation matrix to unit quaternion with ``w >= 0`` (Shepperd's method).

    The symmetric matrix ``M = 4 q q^T`` is formed from sums and differences of the entries of
    ``R`` (its diagonal is ``1 + tr R``, ``1 + R00 - R11 - R22``, ...). Its row with the largest
    diagonal entry is ``4 q_i q`` with ``|q_i| >= 1/2``; normalising that row gives ``+-q`` with
    no square root of a possibly tiny number, equally accurate for every rotation, and it
    projects a slightly non-orthonormal ``R`` onto a unit quaternion.

    Args:
        rotmat: Rotation matrices ``(..., 3, 3)``.

    Returns:
        Unit quaternions ``(..., 4)`` in canonical form (see :func:`quat_canonical`).
    """
    _check_shape("rotmat_to_quat", "rotmat", rotmat, (3, 3))
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = rotmat.flatten(-2).unbind(-1)
    wx, wy, wz = r21 - r12, r02 - r20, r10 - r01
    xy, xz, yz = r01 + r10, r02 + r20, r12 + r21
    m = torch.stack(
        (
            1 + r00 + r11 + r22, wx, wy, wz,
            wx, 1 + r00 - r11 - r22, xy, xz,
            wy, xy, 1 - r00 + r11 - r22, yz,
            wz, xz, yz, 1 - r00 - r11 + r22,
        ),
        dim=-1,
    ).unflatten(-1, (4, 4))  # fmt: skip
    best = torch.diagonal(m, dim1=-2, dim2=-1).argmax(dim=-1)
    row = torch.take_along_dim(m, best[..., None, None], dim=-2).squeeze(-2)
    return quat_canonical(_normalize(row))


def quat_multiply(q1: Tensor, q2: Tensor) -> Tensor:
    """Hamilton product ``q1 * q2``: the rotation ``q2`` followed by ``q1`` (``R1 @ R2``).

    Args:
        q1: Quaternions ``(..., 4)``.
        q2: Quaternions ``(..., 4)``, broadcast against ``q1``.

    Returns:
        Quaternions ``(..., 4)``.
    """
    _check_shape("quat_multiply", "q1", q1, (4,))
    _check_shape("quat_multiply", "q2", q2, (4,))
    w1, x1, y1, z1 = q1.unbind(-1)
    w2, x2, y2, z2 = q2.unbind(-1)
    return torch.stack(
        (
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ),
        dim=-1,
    )


def quat_conjugate(quat: Tensor) -> Tensor:
    """``(w, -x, -y, -z)``: the inverse rotation of a unit quaternion.

    Args:
        quat: Quaternions ``(..., 4)``.

    Returns:
        Quaternions ``(..., 4)``.
    """
    _check_shape("quat_conjugate", "quat", quat, (4,))
    return quat * quat.new_tensor([1.0, -1.0, -1.0, -1.0])


def quat_normalize(quat: Tensor) -> Tensor:
    """Scales quaternions to unit length; the zero quaternion maps to zero (finite gradients).

    Args:
        quat: Quaternions ``(..., 4)``.

    Returns:
        Unit quaternions ``(..., 4)``.
    """
    # no shape check: it scales a vector of any length alike (an axis, say), as it always has
    return _normalize(quat)


def quat_canonical(quat: Tensor) -> Tensor:
    """Picks the sign of ``q`` (``q`` and ``-q`` are the same rotation) so that ``w >= 0``.

    Ties at ``w == 0`` (rotations by exactly ``pi``) are broken by making the first nonzero of
    ``x, y, z`` positive, so equal rotations get equal quaternions.

    Args:
        quat: Quaternions ``(..., 4)``.

    Returns:
        Quaternions ``(..., 4)``, ``quat`` or ``-quat``.
    """
    _check_shape("quat_canonical", "quat", quat, (4,))
    key = quat[..., 0]
    for i in (1, 2, 3):
        key = torch.where(key == 0, quat[..., i], key)
    return torch.where(key[..., None] < 0, -quat, quat)


def rotmat_to_6d(rotmat: Tensor) -> Tensor:
    """The continuous 6D representation of Zhou et al. (CVPR 2019): the first two columns.

    Args:
        rotmat: Rotation matrices ``(..., 3, 3)``.

    Returns:
        ``(..., 6)``: column 0 followed by column 1.
    """
    _check_shape("rotmat_to_6d", "rotmat", rotmat, (3, 3))
    return torch.cat((rotmat[..., :, 0], rotmat[..., :, 1]), dim=-1)


def sixd_to_rotmat(sixd: Tensor) -> Tensor:
    """Gram-Schmidt of two 3-vectors into a rotation; inverse of :func:`rotmat_to_6d`.

    Column 0 is ``a / |a|``, column 1 the normalised part of ``b`` orthogonal to it, column 2
    their cross product. Any input with ``a`` and ``b`` not parallel gives a rotation; parallel
    (or zero) inputs give zero columns with finite, if large, gradients instead of ``nan``.

    Args:
        sixd: ``(..., 6)`` as ``(a, b)``, e.g. network outputs.

    Returns:
        Rotation matrices ``(..., 3, 3)``.
    """
    _check_shape("sixd_to_rotmat", "sixd", sixd, (6,))
    a, b = sixd[..., :3], sixd[..., 3:]
    c0 = _normalize(a)
    c1 = _normalize(b - (c0 * b).sum(dim=-1, keepdim=True) * c0)
    c2 = torch.linalg.cross(c0, c1, dim=-1)
    return torch.stack((c0, c1, c2), dim=-1)


def geodesic_distance(rotmat1: Tensor, rotmat2: Tensor) -> Tensor:
    """The angle of ``R1^T R2`` in ``[0, pi]``: the geodesic distance on SO(3).

    The angle is ``atan2(|s|, (tr - 1) / 2)`` where ``s = unskew(R1^T R2) = sin(angle) u``. Unlike
    ``acos((tr - 1) / 2)`` this keeps full relative precision for tiny angles (``acos`` near 1
    loses half the digits: 1e-8 rad becomes 0 in float64) and its gradient stays bounded.
    The distance is not differentiable at ``R1 == R2`` (a cone, like ``|x|``); there the gradient
    returned is 0, a valid subgradient, instead of ``nan``.

    Args:
        rotmat1: Rotation matrices ``(..., 3, 3)``.
        rotmat2: Rotation matrices ``(..., 3, 3)``, broadcast against ``rotmat1``.

    Returns:
        Angles ``(...)`` in radians.
    """
    _check_shape("geodesic_distance", "rotmat1", rotmat1, (3, 3))
    _check_shape("geodesic_distance", "rotmat2", rotmat2, (3, 3))
    rel = rotmat1.transpose(-1, -2) @ rotmat2
    cos = 0.5 * (torch.diagonal(rel, dim1=-2, dim2=-1).sum(dim=-1) - 1.0)
    return torch.atan2(_safe_norm(unskew(rel)), cos)


def pose_error(transform: Tensor, target: Tensor) -> Tensor:
    """The 6-vector residual that numerical IK drives to zero, expressed in the root frame.

    ``e = [p_target - p, log(R_target @ R^T)]``: the translation still to travel and the rotation
    vector ``w`` with ``R_target = exp(skew(w)) @ R``, both in the frame the transforms are given
    in. To first order it is what a step ``dq`` with the root-frame (spatial) geometric Jacobian
    ``J = [J_v; J_w]`` achieves, so ``J @ dq = e`` is the Gauss-Newton step. The angle part is in
    ``[0, pi]`` and finite-gradient at the target (see :func:`rotmat_to_rotvec`).

    Args:
        transform: Current poses ``(..., 4, 4)``, e.g. forward kinematics of an end effector.
        target: Target poses ``(..., 4, 4)``, broadcast against ``transform``.

    Returns:
        ``(..., 6)``: position error (3) then orientation error (3).
    """
    _check_shape("pose_error", "transform", transform, (4, 4))
    _check_shape("pose_error", "target", target, (4, 4))
    position, rotmat = matrix_to_pose(transform)
    target_position, target_rotmat = matrix_to_pose(target)
    rot_err = rotmat_to_rotvec(target_rotmat @ rotmat.transpose(-1, -2))
    pos_err = target_position - position
    pos_err, rot_err = torch.broadcast_tensors(pos_err, rot_err)
    return torch.cat((pos_err, rot_err), dim=-1)
