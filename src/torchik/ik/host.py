"""Small solves of a robot on a GPU, run by the CPU's compiled code.

A solve of a few rows on a GPU waits on its launches, captured or not: on an H200 one Panda
pose took 1.36 ms in the captured program (:mod:`torchik.ik.captured`), and whole-body IK of the
G1's two hands 74 ms for 1 000 targets in the captured iteration, where the CPU's compiled code
(Numba) takes about 0.5 ms for the pose (:mod:`torchik.ik.compiled`) and 0.09 s of one core for
the 1 000 targets (:func:`torchik.kinematics.native.lm_loop`). So where that code serves, a solve
on a CUDA robot of at most :data:`HOST_ROWS` rows (targets times slots; whole-body IK:
:data:`HOST_WHOLEBODY_ROWS`) runs on a CPU copy of the robot (:func:`twin`: made once, made
again when the robot's tensors change), and its result comes back to the robot's device: one
read of the inputs (a wait for the device) and a few small copies.

It does not serve while a CUDA graph is being captured (the solve is then the GPU's own), with
a CUDA generator (its draws are the GPU's: pass none, or a CPU one, to let the CPU solve), or for
a solver's ``loop`` other than ``"auto"`` (``"fixed"`` is the GPU's fixed-shape loop). Set the
limits to 0 to keep every solve on the GPU.
"""

from __future__ import annotations

import copy
import dataclasses
import weakref
from typing import Any, TypeVar

import torch
from torch import Tensor

from torchik.robot.robot import Robot

__all__ = ["ACCELERATORS", "HOST_ROWS", "HOST_WHOLEBODY_ROWS", "back", "serves", "to_host", "twin"]

HOST_ROWS = 128
"""The most rows (targets times slots) of a ``solve_ik`` call on a CUDA robot that the CPU's
compiled round solves instead (one pose: about 0.5 ms there, 1.36 ms in the GPU's captured
program on an H200; 1 000 poses, 2 000 rows: 1.6 ms on the GPU). 0: never."""

HOST_WHOLEBODY_ROWS = 8192
"""The most rows (targets times slots) of a ``solve_wholebody`` call on a CUDA robot that the
CPU's compiled loop solves instead (the G1's two hands, 1 000 targets, 2 000 rows: 0.09 s of one
core, split over the intra-op threads; 74 ms in the GPU's captured iteration on an H200). 0:
never."""

ACCELERATORS = ("cuda",)
"""The device types whose small solves go to the CPU."""

_TWINS: weakref.WeakKeyDictionary[Robot, tuple[Any, Robot]] = weakref.WeakKeyDictionary()
_MADE: weakref.WeakSet[Robot] = weakref.WeakSet()  # the twins themselves: never sent on

T = TypeVar("T")


def serves(robot: Robot, rows: int, limit: int, generator: torch.Generator | None) -> bool:
    """Whether a solve of ``rows`` rows on ``robot`` may go to the CPU: the robot on CUDA
    (:data:`ACCELERATORS`; not a :func:`twin`), at most ``limit`` rows, no CUDA graph being
    captured, no CUDA ``generator``. (The caller asks whether the CPU's compiled code serves the
    solve, on :func:`twin`.)"""
    if robot.device.type not in ACCELERATORS or robot in _MADE or not 0 < rows <= limit:
        return False
    if generator is not None and generator.device.type != "cpu":
        return False
    return not (robot.device.type == "cuda" and torch.cuda.is_current_stream_capturing())


def _version(robot: Robot) -> int:
    """A number that changes when a tensor of ``robot`` is changed in place."""
    # its own tensors (a Robot has no submodules): .parameters() and .buffers() walk the module
    # tree, 16 us a call, as much as the rest of the route
    own = (*robot._parameters.values(), *robot._buffers.values())
    return sum(t._version for t in own if t is not None)


def twin(robot: Robot) -> Robot:
    """A copy of ``robot`` on the CPU, made once per robot and again after an in-place change
    of its tensors or a change of its backend (kept while the robot lives)."""
    version = (_version(robot), robot.backend)
    kept = _TWINS.get(robot)
    if kept is None or kept[0] != version:
        # not its flattened tree: it holds the device's compiled kernels, and .to() drops it
        memo = {id(robot._tree_cache): None} if robot._tree_cache is not None else {}
        kept = (version, copy.deepcopy(robot, memo).to("cpu"))
        _TWINS[robot] = kept
        _MADE.add(kept[1])
    return kept[1]


def to_host(x: T) -> T:
    """``x`` with its tensors on the CPU: a tensor, ``None``, or a tuple, list or dict of
    them (values only)."""
    if isinstance(x, Tensor):
        return x.cpu()  # type: ignore[return-value]
    if isinstance(x, dict):
        return {k: to_host(v) for k, v in x.items()}  # type: ignore[return-value]
    if isinstance(x, tuple | list):
        return type(x)(to_host(v) for v in x)
    return x


def back(result: Any, device: torch.device) -> Any:
    """A result dataclass (:class:`~torchik.ik.IKResult` or a subclass) with its tensors, and
    those of its dict fields, moved to ``device``."""
    moved: dict[str, Any] = {}
    for f in dataclasses.fields(result):
        value = getattr(result, f.name)
        if isinstance(value, Tensor):
            moved[f.name] = value.to(device)
        elif isinstance(value, dict):
            moved[f.name] = {k: v.to(device) if isinstance(v, Tensor) else v
                             for k, v in value.items()}  # fmt: skip
    return dataclasses.replace(result, **moved)
