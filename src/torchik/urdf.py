"""URDF text -> plain dataclasses (no torch).

The parser is the only place that reads XML. It never resolves entities or external
resources and turns every malformed description into a :class:`URDFError` whose
message names the problem and the joint or link concerned.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["URDFError", "Origin", "Mimic", "Joint", "URDFModel", "parse_urdf"]

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed")
UNSUPPORTED_TYPES = ("floating", "planar")


class URDFError(ValueError):
    """A robot description that torchik cannot load; the message says why and where."""


@dataclass(frozen=True)
class Origin:
    """A rigid transform given as translation (m) and fixed-axis roll-pitch-yaw (rad)."""

    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Mimic:
    """``q = multiplier * q[joint] + offset``."""

    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class Joint:
    """One URDF joint. ``axis`` is unit length; limits are ``None`` when absent."""

    name: str
    type: str
    parent: str
    child: str
    origin: Origin = field(default_factory=Origin)
    axis: tuple[float, float, float] = (1.0, 0.0, 0.0)
    lower: float | None = None
    upper: float | None = None
    mimic: Mimic | None = None


@dataclass(frozen=True)
class URDFModel:
    """A validated kinematic tree: joints in topological order (parents first)."""

    name: str
    root: str
    links: tuple[str, ...]
    joints: tuple[Joint, ...]
