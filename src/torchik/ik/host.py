"""Small solves of a robot on a GPU, run by the CPU's compiled code.

A solve of a few rows on a GPU waits on its launches, captured or not, where the CPU's compiled
code (Numba) may answer sooner (one Panda pose: about 0.5 ms on this project's 2-core CI
machine, 1.3-1.8 ms on the 16 cores of the H200 machine below). So where that
code serves, a solve on a CUDA robot of at most :data:`HOST_ROWS` rows (targets times slots;
whole-body IK: :data:`HOST_WHOLEBODY_ROWS`) runs on a CPU copy of the robot (:func:`twin`: made
once, made again when the robot's tensors change), and its result comes back to the robot's
device: one read of the inputs (a wait for the device) and a few small copies. The limits are
what ``benchmarks/gpu.py --only route`` read on an H200 machine (16 cores; 2026-11-28, at
700f8e1, ``benchmarks/results/gpu_route.md``): there the GPU's captured program answered
``solve_ik`` first at every size (one Panda pose 1.1-1.4 ms, the CPU route 1.3-1.8 ms), so
:data:`HOST_ROWS` is 0; the CPU's compiled loop answered whole-body IK first up to 4 000 G1
targets (1 000: 34 ms against 72 ms).

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

HOST_ROWS = 0
"""The most rows (targets times slots) of a ``solve_ik`` call on a CUDA robot that the CPU's
compiled round solves instead. 0 (never): on an H200 machine the GPU's captured program answered
first at every size (one pose: 1.1-1.4 ms, the CPU route 1.3-1.8 ms; 32 poses 1.5 against
5.2 ms). Where the CPU is quicker (one pose in 0.5 ms on this project's 2-core CI machine), a
limit such as 128 may pay: ``benchmarks/gpu.py --only route`` says which."""

HOST_WHOLEBODY_ROWS = 8000
"""The most rows (targets times slots) of a ``solve_wholebody`` call on a CUDA robot that the
CPU's compiled loop solves instead: on an H200 machine the loop on its 16 cores answered the
G1's two hands first up to 4 000 targets, 8 000 rows (1 000 targets: 34 ms, the GPU's captured
iteration 72 ms; 4 000: 86 against 87 ms). 0: never."""

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
