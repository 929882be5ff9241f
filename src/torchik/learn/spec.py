"""What a learned-IK problem is: the robot (its name and :func:`robot_hash`), the end link, the
target kind and the joint limits, as a :class:`ProblemSpec` saved in every checkpoint and data set.

:mod:`torchik.learn.data` and :mod:`torchik.models` both build on this module; it imports neither.
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchik.checks import check_bool, check_choice, check_float, check_int, short_repr

if TYPE_CHECKING:
    from torchik.robot.robot import Robot

__all__ = ["MAX_DOF", "TARGET_DIMS", "ProblemSpec", "robot_hash"]

MAX_DOF = 64
"""The most joints a :class:`ProblemSpec` accepts."""

TARGET_DIMS: dict[str, int] = {"position": 3, "pose": 9, "planar": 2}
"""Target kind -> its size ``T``: ``"position"`` (x, y, z), ``"pose"`` (x, y, z and the 6-D
rotation of :func:`torchik.geometry.rotmat_to_6d`), ``"planar"`` (x, y of the end point)."""


# ---------------------------------------------------------------------------- robot identity
def _canonical_text(robot: Robot) -> str:
    """One line per joint (URDF order) with everything that changes the kinematics."""

    def num(x: float | None) -> str:
        return "none" if x is None else repr(float(x))

    lines = [f"robot {robot.name} root {robot.root}", "links " + " ".join(robot.link_names)]
    for j in robot.model.joints:  # the parsed URDF joints: the same for every dtype and device
        mimic = "none" if j.mimic is None else f"{j.mimic.joint} {num(j.mimic.multiplier)}"
        mimic += "" if j.mimic is None else f" {num(j.mimic.offset)}"
        lines.append(
            f"joint {j.name} {j.type} {j.parent} {j.child} "
            f"xyz {' '.join(map(num, j.origin.xyz))} rpy {' '.join(map(num, j.origin.rpy))} "
            f"axis {' '.join(map(num, j.axis))} limits {num(j.lower)} {num(j.upper)} "
            f"mimic {mimic}"
        )
    return "\n".join(lines)


def robot_hash(robot: Robot) -> str:
    """SHA-256 (hex) of a canonical text of the robot's links, joints, origins, axes, limits
    and mimics, as parsed from its URDF.

    The same description gives the same hash whatever the robot's dtype or device; renaming a
    link or moving an origin by any amount changes it. Origins trained with
    :meth:`Robot.learnable_origins` are not included (the hash names the description).

    Raises:
        TypeError: ``robot`` not a :class:`~torchik.Robot`.
    """
    from torchik.robot.robot import Robot

    if not isinstance(robot, Robot):
        raise TypeError(f"robot must be a Robot, got {type(robot).__name__}")
    return hashlib.sha256(_canonical_text(robot).encode()).hexdigest()


# ---------------------------------------------------------------------------- problem spec
def _single(x: float) -> float:
    """``x`` rounded to float32 precision (infinite beyond its range)."""
    if not abs(x) < 3.4e38:  # also inf; NaN is refused before
        return math.copysign(math.inf, x)
    return struct.unpack("f", struct.pack("f", x))[0]


@dataclass(frozen=True)
class ProblemSpec:
    """What a model needs to know about the robot; saved in every checkpoint.

    Attributes:
        robot: the robot's name (``robot.name``).
        robot_hash: :func:`robot_hash` of the robot, to catch a model or data set
            used with another robot of the same name.
        link: the end link whose pose is the target.
        dof: number of actuated joints ``D``.
        targets: ``"position"``, ``"pose"`` or ``"planar"`` (see :data:`TARGET_DIMS`).
        lower, upper: ``D`` joint limits; continuous joints have ``(-pi, pi]``. Kept at
            float32 precision, so that the robot in float32 and in float64 makes one spec
            (a model trained on one takes data of the other).
        continuous: ``D`` flags marking continuous (wrapping) joints.
    """

    robot: str
    robot_hash: str
    link: str
    dof: int
    targets: str
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    continuous: tuple[bool, ...]

    def __post_init__(self) -> None:
        for name in ("robot", "robot_hash", "link"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a str, got {type(getattr(self, name)).__name__}")
        check_int("dof", self.dof, 1, MAX_DOF)
        check_choice("targets", self.targets, TARGET_DIMS)
        for name in ("lower", "upper", "continuous"):
            value = getattr(self, name)
            if not isinstance(value, (tuple, list)) or len(value) != self.dof:
                raise ValueError(
                    f"{name} must hold dof={self.dof} entries, got {short_repr(value)}"
                )
            check = check_bool if name == "continuous" else check_float
            value = tuple(check(f"{name}[{j}]", x) for j, x in enumerate(value))
            if name != "continuous":
                value = tuple(_single(x) for x in value)
            object.__setattr__(self, name, value)  # lists (from a checkpoint) become tuples
        if any(lo > hi for lo, hi in zip(self.lower, self.upper, strict=True)):
            raise ValueError(f"lower {self.lower} exceeds upper {self.upper}")

    @property
    def target_dim(self) -> int:
        """The size ``T`` of one target."""
        return TARGET_DIMS[self.targets]

    @classmethod
    def from_robot(cls, robot: Any, link: str | None = None, targets: str = "position"):
        """The spec of ``robot`` (a :class:`torchik.Robot`).

        Args:
            robot: the robot.
            link: the end link; default :func:`torchik.description.default_end_link`.
            targets: the target kind.

        Example:
            >>> spec = ProblemSpec.from_robot(torchik.load_robot("panda"))
            >>> spec.link, spec.dof, spec.target_dim
            ('panda_hand', 7, 3)
        """
        from torchik.description.end_link import default_end_link

        link = default_end_link(robot) if link is None else link
        robot.link_index(link)  # a clear error for unknown links
        return cls(
            robot=robot.name,
            robot_hash=robot_hash(robot),
            link=link,
            dof=robot.dof,
            targets=targets,
            lower=tuple(float(x) for x in robot.lower.tolist()),
            upper=tuple(float(x) for x in robot.upper.tolist()),
            continuous=tuple(bool(x) for x in robot.continuous.tolist()),
        )

    def differences(self, robot: Any, link: str | None = None) -> list[str]:
        """What differs between this spec and ``robot`` (a :class:`torchik.Robot`) with
        ``link`` (default: this spec's): empty where the robot is the one it was made for.

        Example:
            >>> spec = ProblemSpec.from_robot(torchik.load_robot("snake2"))
            >>> spec.differences(torchik.load_robot("snake4"))
            ["name 'snake4', not 'snake2'", 'dof 4, not 2']
        """

        link = self.link if link is None else link
        pairs: tuple[tuple, ...] = (("name", robot.name, self.robot), ("link", link, self.link))
        pairs += (("dof", robot.dof, self.dof),)
        found = [f"{key} {mine!r}, not {theirs!r}" for key, mine, theirs in pairs if mine != theirs]
        if robot.dof == self.dof:  # limits compared at float32 precision (either dtype)
            limits = (robot.lower.tolist(), robot.upper.tolist(), robot.continuous.tolist())
            theirs = zip(*limits, strict=True)
            mine = zip(self.lower, self.upper, self.continuous, strict=True)
            moved = [j for j, (a, b) in enumerate(zip(theirs, mine, strict=True)) if a[2] != b[2]
                     or not (math.isclose(a[0], b[0], abs_tol=1e-6) and
                             math.isclose(a[1], b[1], abs_tol=1e-6))]  # fmt: skip
            found += [f"the limits of joints {moved}"] if moved else []
        if not found and robot_hash(robot) != self.robot_hash:
            found.append("the geometry (joint origins, axes or links; the robot hash)")
        return found
