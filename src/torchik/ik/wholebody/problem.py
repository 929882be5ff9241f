"""The rows of a whole-body IK problem: several link targets solved together, chosen joints, and
a posture."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import torch
from torch import Tensor

from torchik.geometry.rotations import quat_normalize
from torchik.geometry.transforms import pose_to_matrix
from torchik.ik.base import IKProblem

__all__ = ["WholeBodyProblem"]


@dataclass
class WholeBodyProblem(IKProblem):
    """An :class:`IKProblem` (its ``targets``: every placed link, weighted) with the joints the
    solver moves and the posture it is pulled towards.

    Attributes:
        active: ``(nq,)`` bool, the coordinates the solver moves (a floating base's 7
            together).
        rest: ``(N, nq)`` the posture's rest configuration.
        posture: gain of the posture step (0: none).
        columns: ``(nv,)`` bool, the Jacobian columns (entries of a step) that ``active``
            moves.
        coordinates: ``(nv,)`` long, the entry of ``q`` each column moves, ``-1`` for a
            floating base's twist (:func:`torchik.geometry.floating.velocity_coordinates`).
        pool: pools of configurations the CPU's compiled loop restarts stalled rows from,
            ``(configs (R, k P, nq), features (R, k P, F) float32, aims (N, F) float32, k)``
            (see ``restarts`` of :func:`torchik.kinematics.native.lm_loop`), or ``None``: set
            by :func:`~torchik.ik.wholebody.seeds.wholebody_seeder`'s first draw.
    """

    active: Tensor = None  # type: ignore[assignment]
    rest: Tensor = None  # type: ignore[assignment]
    posture: float = 0.0
    columns: Tensor = None  # type: ignore[assignment]
    coordinates: Tensor = None  # type: ignore[assignment]
    pool: tuple[Tensor, Tensor, Tensor, int] | None = None

    def rows(self, index: Tensor) -> WholeBodyProblem:
        """The sub-problem of the rows ``index`` (long)."""
        part = super().rows(index)
        assert isinstance(part, WholeBodyProblem)  # super().rows replaces fields of self's class
        return replace(part, rest=self.rest[index], pool=None)  # the pool's aims are per row

    @cached_property
    def moves_base(self) -> bool:
        """Whether the first floating base moves (the compiled loop's one base)."""
        return 0 in self.moving_bases

    @cached_property
    def moving_bases(self) -> tuple[int, ...]:
        """The floating bases that move: those whose coordinates are active (read once:
        :meth:`project` never reads the device). Free bodies that carry no target are held."""
        k = self.robot.floating_bases
        return tuple(b for b in range(k) if bool(self.active[7 * b]))

    @cached_property
    def all_active(self) -> bool:
        """Whether every joint moves (read once: a captured chunk never reads the device)."""
        return bool(self.active.all())

    @cached_property
    def base_origin(self) -> Tensor:
        """``(4, 4)`` the first floating base's frame at its zero pose (:meth:`base_frame`)."""
        return self.base_frame(0)

    def base_frame(self, k: int) -> Tensor:
        """``(4, 4)`` floating base ``k``'s frame at its zero pose: its joint's origin (FK of
        the link it carries at :meth:`Robot.neutral`; made once per base and robot, kept with
        its tree: a warm-started call of a floating G1 spent a tenth of its time here)."""
        robot = self.robot

        def frame() -> Tensor:
            return robot.forward_kinematics(robot.neutral(), robot.base_link(k)).detach()

        return robot.tree.cached(("wholebody", "base_frame", k), frame)

    @cached_property
    def target_poses(self) -> Tensor:
        """``(N, L, 4, 4)`` every row's targets (identity rotations for position targets),
        made once."""
        poses = []
        for t in self.targets:
            rot = torch.eye(3, dtype=t.position.dtype, device=t.position.device)
            rot = rot.expand(len(self), 3, 3) if t.rotmat is None else t.rotmat
            poses.append(pose_to_matrix(t.position, rot))
        return torch.stack(poses, dim=1)

    def project(self, q: Tensor) -> Tensor:
        """``q (N, nq)`` into the limits, each moving floating base's quaternion normalised
        first (a clamp of a longer one's components to [-1, 1] would turn it; a held one stays
        exactly where its box holds it)."""
        if not self.moving_bases:
            return super().project(q)
        # not normalize_bases: that checks for a zero quaternion (a device read, refused in the
        # captured chunks), keeps near-unit ones and takes held bases too; the compiled loop
        # (kinematics._lm_numba._advance) normalises a moving base as here
        parts, start = [], 0
        for b in self.moving_bases:
            parts += [q[:, start : 7 * b + 3], quat_normalize(q[:, 7 * b + 3 : 7 * b + 7])]
            start = 7 * b + 7
        return super().project(torch.cat((*parts, q[:, start:]), dim=-1))
