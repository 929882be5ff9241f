"""torchik: batched, differentiable robot kinematics and learned inverse kinematics.

Importing torchik has no side effects: no prints, no global device or seed, no heavy imports.
"""

from torchik.robot import Robot, load_robot
from torchik.urdf import URDFError, parse_urdf

__all__ = ["Robot", "URDFError", "load_robot", "parse_urdf"]
__version__ = "0.1.0"
