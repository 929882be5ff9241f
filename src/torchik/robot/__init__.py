"""The robot model: :class:`Robot`, an ``nn.Module`` holding a description's kinematic tree in
buffers, with FK, Jacobians, limits and configurations; :func:`load_robot` for the bundled
robots; :class:`PlanarArm` with closed-form FK.
"""

from torchik.robot.planar import (
    PlanarArm,
)
from torchik.robot.robot import (
    Robot,
    load_robot,
)

__all__ = [
    "load_robot",
    "PlanarArm",
    "Robot",
]
