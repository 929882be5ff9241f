"""Geometry on tensors with any leading batch dims: rotations, rigid transforms, joint-space
helpers. Pure functions, float32 and float64, differentiable.

The floating-base coordinates (position and unit quaternion of a base in ``q``) are
:mod:`torchik.geometry.floating`.
"""

from torchik.geometry import floating as floating
from torchik.geometry.joints import (
    FULL_TURN_TOL,
    angle_into_limits,
    circular_joints,
    joint_difference,
    joint_distance,
    project_to_limits,
    wrap_angle,
    wrap_into,
)
from torchik.geometry.rotations import (
    axis_angle_to_rotmat,
    geodesic_distance,
    pose_error,
    quat_canonical,
    quat_conjugate,
    quat_multiply,
    quat_normalize,
    quat_to_rotmat,
    quat_to_rotvec,
    rotmat_to_6d,
    rotmat_to_quat,
    rotmat_to_rotvec,
    rotmat_to_rpy,
    rotvec_to_quat,
    rotvec_to_rotmat,
    rpy_to_rotmat,
    sixd_to_rotmat,
    skew,
    unskew,
)
from torchik.geometry.transforms import (
    invert_transform,
    matrix_to_pose,
    pose_to_matrix,
)

__all__ = [
    "axis_angle_to_rotmat",
    "floating",
    "geodesic_distance",
    "invert_transform",
    "matrix_to_pose",
    "pose_error",
    "pose_to_matrix",
    "quat_canonical",
    "quat_conjugate",
    "quat_multiply",
    "quat_normalize",
    "quat_to_rotmat",
    "quat_to_rotvec",
    "rotmat_to_6d",
    "rotmat_to_quat",
    "rotmat_to_rotvec",
    "rotmat_to_rpy",
    "rotvec_to_quat",
    "rotvec_to_rotmat",
    "rpy_to_rotmat",
    "sixd_to_rotmat",
    "skew",
    "unskew",
    "wrap_angle",
    "wrap_into",
    "FULL_TURN_TOL",
    "angle_into_limits",
    "circular_joints",
    "joint_difference",
    "joint_distance",
    "project_to_limits",
]
