"""torchik: batched, differentiable robot kinematics and learned inverse kinematics.

The package is laid out by concept, each subpackage naming its public API in its ``__init__``:

- :mod:`torchik.geometry`: rotations, rigid transforms, joint-space helpers, floating bases;
- :mod:`torchik.description`: URDF and MJCF -> plain dataclasses, the bundled robot files;
- :mod:`torchik.kinematics`: FK and Jacobians of a flattened tree (reference and fused);
- :mod:`torchik.robot`: :class:`Robot`, the model as an ``nn.Module`` with buffers;
- :mod:`torchik.ik`: numerical IK, one loop, each solver its step; whole-body IK;
- :mod:`torchik.learn`: the learning problem, data, metrics, evaluation, posterior, paths;
- :mod:`torchik.models`: learned IK models behind one interface, pretrained weights;
- :mod:`torchik.train`: one training loop, fine-tuning; :mod:`torchik.tune`: studies;
- :mod:`torchik.seq2seq`, :mod:`torchik.viewer`, :mod:`torchik.plot`, :mod:`torchik.cli`.

Importing torchik has no side effects: no prints, no global device or seed, no heavy imports.
The learned parts (``torchik.models``, ``torchik.train``, ``torchik.tune``,
``torchik.seq2seq``), the viewer and the plots are imported on first use of the attribute
(PEP 562), so ``import torchik`` costs nothing for them; ``torchik.view``
(:func:`torchik.viewer.view`) is imported the same way.
"""

from typing import Any

from torchik._version import __version__ as __version__
from torchik.description.bundled import list_robots
from torchik.description.mjcf import MJCFError
from torchik.description.reading import URDFError
from torchik.description.urdf import URDFWarning, parse_urdf
from torchik.ik.result import IKResult
from torchik.ik.solve import solve_ik
from torchik.ik.wholebody.solve import solve_wholebody
from torchik.learn.data import IKDataset, load_dataset, make_dataset
from torchik.robot.planar import PlanarArm
from torchik.robot.robot import Robot, load_robot

__all__ = [
    "IKDataset",
    "IKResult",
    "MJCFError",
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
    "solve_wholebody",
]

_SUBMODULES = ("models", "plot", "seq2seq", "train", "tune", "viewer")
"""Subpackages imported by :func:`__getattr__` on first use, not by ``import torchik``."""


def __getattr__(name: str) -> Any:
    """A lazy subpackage of :data:`_SUBMODULES`, or the function ``torchik.view``, imported on
    first use."""
    if name == "view":
        from torchik.viewer.app import view

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
