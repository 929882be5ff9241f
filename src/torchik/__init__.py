"""torchik: batched, differentiable robot kinematics and learned inverse kinematics.

Importing torchik has no side effects: no prints, no global device or seed, no heavy imports.
The sub-packages for learned IK (``torchik.models``, ``torchik.train``, ``torchik.evaluate``,
``torchik.protocols``) are imported on first use of the attribute (PEP 562), so ``import torchik``
costs nothing for them. ``torchik.view`` (:func:`torchik.viewer.view`, the 3-D viewer in the
browser) is imported the same way, with viser.
"""

from typing import Any

from torchik._version import __version__ as __version__
from torchik.data import IKDataset, load_dataset, make_dataset
from torchik.ik import IKResult, solve_ik
from torchik.planar import PlanarArm
from torchik.robot import Robot, load_robot
from torchik.robots import list_robots
from torchik.urdf import URDFError, URDFWarning, parse_urdf

__all__ = [
    "IKDataset",
    "IKResult",
    "PlanarArm",
    "Robot",
    "URDFError",
    "URDFWarning",
    "list_robots",
    "load_dataset",
    "load_robot",
    "make_dataset",
    "parse_urdf",
    "solve_ik",
]

_SUBMODULES = ("evaluate", "models", "protocols", "train")
"""Submodules imported by :func:`__getattr__` on first use, not by ``import torchik``."""


def __getattr__(name: str) -> Any:
    """``torchik.models``, ``torchik.train``, ``torchik.evaluate``, ``torchik.protocols`` or the
    function ``torchik.view``, imported on first use."""
    if name == "view":
        from torchik.viewer import view

        return view
    if name not in _SUBMODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as err:
        if err.name != f"{__name__}.{name}":  # a dependency of the submodule is missing
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from err


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBMODULES, "view"})
