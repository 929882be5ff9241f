"""Datasets for learned IK: sample joints, run forward kinematics, save, load and split.

A dataset is pairs ``(q, target)``: ``q (N, D)`` joint configurations and ``target (N, T)`` the
encoded poses of an end link (see :func:`encode_target`). Forward kinematics runs in float64 on
the CPU; both tensors are stored as float32.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from torchik.rotations import pose_to_matrix, rotmat_to_6d, sixd_to_rotmat

if TYPE_CHECKING:
    from torchik.models.base import ProblemSpec
    from torchik.robot import Robot

__all__ = [
    "DATA_FORMAT_VERSION",
    "IKDataset",
    "decode_target",
    "encode_target",
    "load_dataset",
    "make_dataset",
    "robot_hash",
]

DATA_FORMAT_VERSION = 1
"""Version of the layout that :meth:`IKDataset.save` writes."""

_CHUNK = 65536  # FK batch: bounds peak memory (~L * 16 doubles per row) at any n


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
    """
    return hashlib.sha256(_canonical_text(robot).encode()).hexdigest()


# ---------------------------------------------------------------------------- targets
def encode_target(pose: Tensor, kind: str) -> Tensor:
    """End-link poses as model targets.

    Args:
        pose: ``(..., 4, 4)`` homogeneous transforms ``T_root_link``.
        kind: ``"position"`` -> ``(..., 3)``; ``"pose"`` -> ``(..., 9)``, the position then
            :func:`torchik.rotations.rotmat_to_6d`; ``"planar"`` -> ``(..., 2)``, x and y.

    Returns:
        ``(..., T)``.
    """
    if kind == "position":
        return pose[..., :3, 3]
    if kind == "pose":
        return torch.cat((pose[..., :3, 3], rotmat_to_6d(pose[..., :3, :3])), dim=-1)
    if kind == "planar":
        return pose[..., :2, 3]
    raise ValueError(f"kind must be 'position', 'pose' or 'planar', got {kind!r}")


def decode_target(target: Tensor, kind: str) -> tuple[Tensor, Tensor | None]:
    """Inverse of :func:`encode_target`: ``(position (..., 3), rotmat (..., 3, 3) or None)``.

    Planar targets get ``z = 0``; only ``"pose"`` targets have a rotation (orthonormalised by
    :func:`torchik.rotations.sixd_to_rotmat`, so any network output decodes to a rotation).
    """
    if kind == "position":
        return target, None
    if kind == "pose":
        return target[..., :3], sixd_to_rotmat(target[..., 3:9])
    if kind == "planar":
        return torch.cat((target, torch.zeros_like(target[..., :1])), dim=-1), None
    raise ValueError(f"kind must be 'position', 'pose' or 'planar', got {kind!r}")


def decode_pose(target: Tensor) -> Tensor:
    """``"pose"`` targets ``(..., 9)`` -> homogeneous transforms ``(..., 4, 4)``."""
    position, rotmat = decode_target(target, "pose")
    return pose_to_matrix(position, rotmat)


# ---------------------------------------------------------------------------- the dataset
@dataclass
class IKDataset:
    """Pairs of joints and targets for one robot, link and target kind.

    Attributes:
        q: ``(N, D)`` joint values (float32).
        target: ``(N, T)`` encoded end-link poses (float32).
        spec: the :class:`torchik.models.ProblemSpec` (robot, hash, link, target kind, limits).
        meta: plain-typed provenance: ``sampler``, ``std``, ``seed``, ``format_version``,
            ``created_by``, ``n_clamped`` and, for splits, ``split``.
    """

    q: Tensor
    target: Tensor
    spec: ProblemSpec
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n, t = self.q.shape[0], self.spec.target_dim
        if self.q.shape != (n, self.spec.dof) or self.target.shape != (n, t):
            raise ValueError(
                f"q {tuple(self.q.shape)} and target {tuple(self.target.shape)} must be "
                f"(N, {self.spec.dof}) and (N, {t})"
            )

    def __len__(self) -> int:
        return self.q.shape[0]

    def __repr__(self) -> str:
        """One line: rows, robot, link, target kind, shapes and provenance (not the tensors)."""
        meta = ", ".join(f"{k} {self.meta[k]}" for k in ("sampler", "seed") if k in self.meta)
        return (
            f"IKDataset({len(self)} rows of {self.spec.robot} {self.spec.link}, "
            f"{self.spec.targets} targets: q {tuple(self.q.shape)}, target "
            f"{tuple(self.target.shape)}, {self.q.dtype}" + (f"; {meta})" if meta else ")")
        )

    def subset(self, index: Tensor, **meta: Any) -> IKDataset:
        """The rows ``index`` (a long or bool tensor) as a new dataset; ``meta`` is added."""
        return IKDataset(self.q[index], self.target[index], self.spec, {**self.meta, **meta})

    def split(
        self, fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0
    ) -> tuple[IKDataset, ...]:
        """Disjoint random parts of the rows, one per fraction.

        Part sizes are ``round(cumsum(fractions) * N)`` differences, so they never overlap and,
        when the fractions sum to 1, cover every row. The same ``seed`` gives the same parts.

        Returns:
            One :class:`IKDataset` per fraction (e.g. ``train, val, test``).
        """
        fractions = tuple(float(f) for f in fractions)
        if not fractions or min(fractions) < 0 or sum(fractions) > 1 + 1e-9:
            raise ValueError(f"fractions must be >= 0 and sum to at most 1, got {fractions}")
        order = torch.randperm(len(self), generator=torch.Generator().manual_seed(seed))
        ends = [round(math.fsum(fractions[: i + 1]) * len(self)) for i in range(len(fractions))]
        starts = [0, *ends[:-1]]
        return tuple(
            self.subset(order[a:b], split={"part": i, "fractions": fractions, "seed": seed})
            for i, (a, b) in enumerate(zip(starts, ends, strict=True))
        )

    def save(self, path: str | os.PathLike) -> None:
        """Write the dataset (plain types and tensors, readable with ``weights_only=True``)."""
        from torchik.models.base import atomic_save

        atomic_save(
            {
                "format_version": DATA_FORMAT_VERSION,
                "kind": "torchik.IKDataset",
                "q": self.q.detach().cpu(),
                "target": self.target.detach().cpu(),
                "spec": dataclasses.asdict(self.spec),
                "meta": self.meta,
            },
            path,
        )


# ---------------------------------------------------------------------------- sampling
def _float64_cpu(robot: Robot) -> Robot:
    """The robot in float64 on the CPU, rebuilt from its URDF when it is in another dtype
    (casting float32 constants up would keep their float32 rounding)."""
    from torchik.robot import Robot

    if robot.dtype == torch.float64:
        return robot if robot.device.type == "cpu" else copy.deepcopy(robot).cpu()
    return Robot(robot.model, dtype=torch.float64)


def _sample_joints(
    robot: Robot, n: int, sampler: str, std: float | Sequence[float], gen: torch.Generator
) -> tuple[Tensor, int]:
    """``(n, D)`` float64 joints and the number of entries clamped to the limits."""
    lower, upper = robot.lower, robot.upper
    if sampler == "uniform":
        return lower + torch.rand(n, robot.dof, generator=gen, dtype=torch.float64) * (
            upper - lower
        ), 0
    if sampler != "normal":
        raise ValueError(f"sampler must be 'uniform' or 'normal', got {sampler!r}")
    scale = torch.as_tensor(std, dtype=torch.float64).expand(robot.dof)
    q = torch.randn(n, robot.dof, generator=gen, dtype=torch.float64) * scale
    clamped = torch.clamp(q, lower, upper)
    return clamped, int((clamped != q).sum())


def make_dataset(
    robot: Robot,
    n: int,
    link: str | None = None,
    sampler: str = "uniform",
    std: float | Sequence[float] = 0.2,
    targets: str = "position",
    seed: int = 0,
) -> IKDataset:
    """Sample ``n`` joint configurations and their end-link targets.

    Args:
        robot: the robot (any dtype or device; FK runs on a float64 CPU copy).
        n: number of samples.
        link: the end link (default :func:`torchik.robots.default_end_link`).
        sampler: ``"uniform"`` within the limits, or ``"normal"``: ``N(0, std^2)`` per joint,
            **clamped** to the limits (the count is ``meta["n_clamped"]``; the benchmark priors
            sit far inside their robots' limits, so there it is 0).
        std: the normal sampler's standard deviation: one number or one per joint (e.g.
            :data:`torchik.robots.RAIL_ARM_PRIOR_STD`).
        targets: ``"position"``, ``"pose"`` or ``"planar"`` (see :func:`encode_target`).
        seed: seeds a private generator (the global RNG is untouched).

    Returns:
        The :class:`IKDataset`, float32 on the CPU.

    Example:
        >>> data = make_dataset(torchik.load_robot("panda"), 1000, seed=0)
        >>> data.q.shape, data.target.shape
        (torch.Size([1000, 7]), torch.Size([1000, 3]))
    """
    from torchik import __version__
    from torchik.models.base import ProblemSpec

    spec = ProblemSpec.from_robot(robot, link, targets)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    fk_robot, gen = _float64_cpu(robot), torch.Generator().manual_seed(seed)
    q, n_clamped = _sample_joints(fk_robot, n, sampler, std, gen)
    target = torch.empty(n, spec.target_dim, dtype=torch.float32)
    with torch.no_grad():
        for start in range(0, n, _CHUNK):
            pose = fk_robot.forward_kinematics(q[start : start + _CHUNK], spec.link)
            target[start : start + _CHUNK] = encode_target(pose, targets)
    std_meta = float(std) if isinstance(std, int | float) else tuple(float(s) for s in std)
    meta = {
        "sampler": sampler,
        "std": std_meta if sampler == "normal" else None,
        "seed": seed,
        "format_version": DATA_FORMAT_VERSION,
        "created_by": f"torchik {__version__} make_dataset",
        "n_clamped": n_clamped,
    }
    return IKDataset(q.float(), target, spec, meta)


def load_dataset(path: str | os.PathLike, robot: Robot | None = None) -> IKDataset:
    """Read a dataset written by :meth:`IKDataset.save` (never executes pickled code).

    Args:
        path: the file.
        robot: if given, the dataset must have been made for it (same :func:`robot_hash`).

    Raises:
        ValueError: a corrupt or foreign file, a newer format, or another robot.
    """
    from torchik.models.base import ProblemSpec

    name = os.fspath(path)
    try:
        blob = torch.load(name, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as err:  # torch raises many types for corrupt or foreign files
        raise ValueError(f"{name!r} is not a readable torchik dataset: {err}") from err
    if not isinstance(blob, dict) or blob.get("kind") != "torchik.IKDataset":
        raise ValueError(f"{name!r} is not a torchik dataset")
    version = blob.get("format_version")
    if not isinstance(version, int) or version > DATA_FORMAT_VERSION:
        raise ValueError(f"{name!r} has dataset format {version!r}; this torchik reads up to 1")
    try:
        data = IKDataset(blob["q"], blob["target"], ProblemSpec(**blob["spec"]), blob["meta"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{name!r} is a damaged torchik dataset: {err}") from err
    if robot is not None and robot_hash(robot) != data.spec.robot_hash:
        raise ValueError(
            f"{name!r} was made for robot {data.spec.robot!r} (hash {data.spec.robot_hash[:12]}), "
            f"not for this {robot.name!r} (hash {robot_hash(robot)[:12]}): regenerate it"
        )
    return data
