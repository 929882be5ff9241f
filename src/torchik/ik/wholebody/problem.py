"""The rows of a whole-body IK problem: several link targets solved together."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import cast

import torch
from torch import Tensor

from torchik.geometry.rotations import quat_normalize
from torchik.ik.base import IKProblem, Linearization

__all__ = ["WholeBodyProblem"]


@dataclass
class WholeBodyProblem(IKProblem):
    """The rows of a multi-target problem (targets repeated once per slot).

    ``link``, ``target_position`` and ``target_rotmat`` hold the first target (what the
    single-link helpers read); ``links``, ``positions`` and ``rotmats`` every target.

    Attributes:
        links: the placed links, one per target.
        positions: ``(N, 3)`` per target.
        rotmats: ``(N, 3, 3)`` per target, ``None`` for a position-only one.
        weights_: the weight of each target in the cost.
        active: ``(nq,)`` bool, the coordinates the solver moves (a floating base's 7
            together).
        rest: ``(N, nq)`` the posture's rest configuration.
        posture: gain of the posture step (0: none).
        columns: ``(nv,)`` bool, the Jacobian columns (entries of a step) that ``active``
            moves.
        coordinates: ``(nv,)`` long, the entry of ``q`` each column moves, ``-1`` for a
            floating base's twist (:func:`torchik.geometry.floating.velocity_coordinates`).
    """

    links: tuple[str, ...] = ()
    positions: tuple[Tensor, ...] = ()
    rotmats: tuple[Tensor | None, ...] = ()
    weights_: tuple[float, ...] = ()
    active: Tensor = None  # type: ignore[assignment]
    rest: Tensor = None  # type: ignore[assignment]
    posture: float = 0.0
    columns: Tensor = None  # type: ignore[assignment]
    coordinates: Tensor = None  # type: ignore[assignment]

    def rows(self, index: Tensor) -> WholeBodyProblem:
        """The sub-problem of the rows ``index`` (long)."""
        part = super().rows(index)
        rotmats = tuple(None if r is None else r[index] for r in self.rotmats)
        positions = tuple(p[index] for p in self.positions)
        whole = cast(WholeBodyProblem, part)  # super().rows replaces fields of self's class
        return replace(whole, positions=positions, rotmats=rotmats, rest=self.rest[index])

    def project(self, q: Tensor) -> Tensor:
        """``q (N, nq)`` into the limits, a moving floating base's quaternion normalised (a
        held one stays exactly where its box holds it)."""
        q = super().project(q)
        if not self.robot.floating or not bool(self.active[0]):
            return q
        return torch.cat((q[:, :3], quat_normalize(q[:, 3:7]), q[:, 7:]), dim=-1)

    def weights(self, rotation_weight: float) -> Tensor:
        """``(m,)`` square roots of the residual weights, target after target."""
        parts = []
        for rotmat, weight in zip(self.rotmats, self.weights_, strict=True):
            rows = [1.0] * 3 + ([] if rotmat is None else [rotation_weight] * 3)
            parts.append(math.sqrt(weight) * torch.tensor(rows))
        return torch.cat(parts).to(self.target_position)

    def converged(self, lin: Linearization) -> Tensor:
        """``(B,)`` bool: every target within both tolerances (``lin.angle`` is ``(B, n)``)."""
        done, start = torch.ones_like(lin.cost, dtype=torch.bool), 0
        for i, rotmat in enumerate(self.rotmats):
            done &= lin.error[:, start : start + 3].norm(dim=-1) < self.tol_position
            if rotmat is not None:
                done &= lin.angle[:, i] < self.tol_rotation
            start += 3 if rotmat is None else 6
        return done
