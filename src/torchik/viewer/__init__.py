"""The 3-D viewer in the browser (viser): a robot, its FK, IK targets and solutions."""

from torchik.viewer.app import (
    Viewer,
    open_robot,
    view,
)

__all__ = [
    "open_robot",
    "view",
    "Viewer",
]
