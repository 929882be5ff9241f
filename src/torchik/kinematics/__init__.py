"""Forward kinematics and Jacobians of a flattened kinematic tree: the reference path (pure
PyTorch, analytic backward), the fused Triton kernels for CUDA (:mod:`torchik.kinematics.fused`)
and the IK loop, FK and Jacobians compiled for the CPU (:mod:`torchik.kinematics.native`,
Numba; FK without gradients).
"""

from torchik.kinematics import fused as fused
from torchik.kinematics import native as native
from torchik.kinematics.reference import (
    KinematicTree,
    forward_kinematics,
    frames_to_matrix,
    jacobian,
)

__all__ = [
    "forward_kinematics",
    "frames_to_matrix",
    "fused",
    "jacobian",
    "KinematicTree",
    "native",
]
