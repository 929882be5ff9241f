"""torchik: batched, differentiable robot kinematics and learned inverse kinematics.

Importing torchik has no side effects: no prints, no global device or seed, no heavy imports.
"""

from torchik._version import __version__ as __version__
from torchik.data import IKDataset, load_dataset, make_dataset
from torchik.ik import IKResult, solve_ik
from torchik.planar import PlanarArm
from torchik.robot import Robot, load_robot
from torchik.robots import list_robots
from torchik.urdf import URDFError, parse_urdf

__all__ = [
    "IKDataset",
    "IKResult",
    "PlanarArm",
    "Robot",
    "URDFError",
    "list_robots",
    "load_dataset",
    "load_robot",
    "make_dataset",
    "parse_urdf",
    "solve_ik",
]
