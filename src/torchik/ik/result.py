"""The result of :func:`torchik.ik.solve_ik`: solutions, their errors, and helpers to pick some."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from torchik.checks import check_float, check_int, check_values, short_repr
from torchik.geometry.joints import joint_distance

__all__ = ["IKResult"]


def _median(x: Tensor) -> float:
    return x.reshape(-1).double().median().item()


def _pairwise_distance(q: Tensor, continuous: Tensor) -> Tensor:
    """``(..., K, K)`` :func:`joint_distance` between the slots of ``q (..., K, dof)``."""
    if bool(continuous.any()):
        return joint_distance(q[..., :, None, :], q[..., None, :, :], continuous)
    return torch.cdist(q, q, compute_mode="donot_use_mm_for_euclid_dist")


@dataclass
class IKResult:
    """Solutions of a batch of IK problems, ``K`` per target (seeds or restarts of one slot).

    Every ``q`` is within the joint limits (continuous joints in (-π, π]); ``success`` and the
    errors come from forward kinematics of the returned ``q``. Slots that did not succeed hold
    their best effort (the lowest weighted pose error met). With random seeds the ``K`` slots
    are the best ``K`` of every seed tried for the target, best first (successes, then by
    error: :meth:`top`); with given seeds they follow the seeds, and under ``early_stop``
    slots that were not needed hold their (projected) seed, ``iterations`` 0.

    Attributes:
        q: ``(..., K, dof)`` joint values.
        success: ``(..., K)`` bool, both errors within tolerance.
        position_error: ``(..., K)`` distance (m) between the link origin and the target.
        rotation_error: ``(..., K)`` geodesic angle (rad) to the target orientation; zeros when
            the problem was position-only.
        iterations: ``(..., K)`` iterations each slot ran (restarts included).
        tol_position: the position tolerance (m) used for ``success``.
        tol_rotation: the rotation tolerance (rad); ``inf`` for position-only problems.
        continuous: ``(dof,)`` bool mask of the robot's continuous joints (for distances).
    """

    q: Tensor
    success: Tensor
    position_error: Tensor
    rotation_error: Tensor
    iterations: Tensor
    tol_position: float
    tol_rotation: float
    continuous: Tensor

    def __init_subclass__(cls, **kwargs) -> None:
        """A subclass keeps the one-line :meth:`__repr__`: ``@dataclass`` would write one that
        prints every tensor (430 lines for a whole-body result), but it never replaces a
        ``__repr__`` the class holds itself."""
        super().__init_subclass__(**kwargs)
        if "__repr__" not in cls.__dict__:
            cls.__repr__ = IKResult.__repr__  # type: ignore[method-assign]

    def __repr__(self) -> str:
        """One line: shapes, targets solved, the median errors of each target's best slot."""
        *batch, k, dof = self.q.shape
        targets = math.prod(batch)
        solved = int(self.success.any(dim=-1).sum())
        tol = f"{1000 * self.tol_position:g} mm"
        pose = math.isfinite(self.tol_rotation)
        if pose:
            tol += f" / {math.degrees(self.tol_rotation):g} deg"
        text = (
            f"{type(self).__name__}(q {tuple(self.q.shape)}: {targets} target(s) x {k} slot(s) "
            f"x {dof} joints; {solved} of {targets} solved within {tol}"
        )
        if targets and k:
            best = self.best()
            text += f"; median best position error {1000 * _median(best.position_error):.3g} mm"
            if pose:
                text += f", rotation {math.degrees(_median(best.rotation_error)):.3g} deg"
        return text + ")"

    @property
    def success_rate(self) -> float:
        """Fraction of targets with at least one successful slot (NaN for no targets)."""
        return self.success.any(dim=-1).double().mean().item()

    def _order(self) -> Tensor:
        """``(..., K)`` slot indices sorted best first: successes, then by normalised error."""
        tol_rot = self.tol_rotation if math.isfinite(self.tol_rotation) else 1.0
        score = self.position_error / self.tol_position + self.rotation_error / tol_rot
        by_score = score.argsort(dim=-1, stable=True)
        # then successes first, keeping the score order within each group (two stable sorts;
        # adding a large constant to failures would round their differences away)
        # gather, not take_along_dim: that one adds a kernel per call for negative indices
        failed = (~self.success).to(torch.int8).gather(-1, by_score)
        return by_score.gather(-1, failed.argsort(dim=-1, stable=True))

    def best(self) -> IKResult:
        """The best slot of every target: a success if any, else the smallest error.

        Returns:
            An :class:`IKResult` with ``K = 1``, i.e. ``q (..., 1, dof)``.
        """
        return self.top(1)

    def top(self, k: int) -> IKResult:
        """The ``k`` best slots of every target, best first (successes, then by error
        normalised by the tolerances).

        Returns:
            An :class:`IKResult` with ``K = min(k, K)``.

        Raises:
            ValueError: ``k < 1``.
            TypeError: ``k`` not an int.
        """
        check_int("k", k, 1)
        return self._take(self._order()[..., :k])

    def nearest(self, q: Tensor) -> IKResult:
        """Each target's successful slot nearest to ``q`` in joint space (continuous joints
        the short way round); :meth:`best`'s where no slot succeeded. Following a path, the
        answer that moves the robot least.

        Args:
            q: ``(..., dof)``, broadcast against each target's slots ``(..., K, dof)``.

        Returns:
            An :class:`IKResult` with ``K = 1``.

        Raises:
            ValueError: ``q`` of another size than ``dof``, of a batch shape that does not
                broadcast to the targets', or on the meta device.
            TypeError: ``q`` not a floating-point tensor.
        """
        self._check_configuration("q", q)
        distance = joint_distance(self.q, q.to(self.q)[..., None, :], self.continuous)
        distance = distance.masked_fill(~self.success, math.inf)
        index = torch.where(self.success.any(-1), distance.argmin(-1), self._order()[..., 0])
        return self._take(index[..., None])

    def in_scene(self, scene: Any, kept: Tensor, held: Tensor) -> IKResult:
        """This result of one body of a scene (:meth:`torchik.robot.Robot.scene_body`) with
        ``q`` of the whole ``scene``: its coordinates ``kept``, the others at ``held``.

        Args:
            scene: the scene's robot.
            kept: ``(nq',)`` long, the coordinates of the scene's ``q`` this result's holds.
            held: ``(..., K, nq)`` or broadcastable to it: the other coordinates' values.

        Returns:
            The same result (of the same class) with ``q (..., K, nq)``.

        Raises:
            ValueError: ``kept`` not ``(nq',)`` distinct indices of the scene's ``q`` (its
                values read on the CPU only), or ``held`` not broadcastable to
                ``(..., K, nq)``.
            TypeError: ``kept`` not an int64 tensor, ``held`` not a floating-point tensor.
        """
        dof, own = scene.dof, self.q.shape[-1]
        if not isinstance(kept, Tensor) or kept.dtype != torch.long:
            raise TypeError(f"kept must be an int64 tensor, got {_kind(kept)}")
        values = kept.tolist() if kept.device.type == "cpu" else []  # no wait on a device
        if kept.shape != (own,) or not all(0 <= i < dof for i in values):
            raise ValueError(f"kept must be ({own},) indices of the scene's {dof} coordinates, "
                             f"got {short_repr(kept)}")  # fmt: skip
        if len(set(values)) != len(values):
            raise ValueError(f"kept names a coordinate twice: {short_repr(kept)}")
        self._check_configuration("held", held, dof, 2)
        q = held.to(self.q).expand(*self.q.shape[:-1], scene.dof).clone()
        q[..., kept] = self.q
        return replace(self, q=q, continuous=scene.continuous)

    def _check_configuration(self, name: str, q: Any, dof: int | None = None,
                             slots: int = 1) -> None:  # fmt: skip
        """``q (..., dof)`` (``dof``: this result's by default) a floating-point tensor with
        values whose batch shape broadcasts to the targets' (with their ``K`` slots where
        ``slots`` is 2), or one line saying what it is not."""
        dof = self.q.shape[-1] if dof is None else dof
        if not isinstance(q, Tensor) or not q.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {_kind(q)}")
        check_values(name, q)
        batch = self.q.shape[: self.q.dim() - 2 + slots - 1]
        try:
            fits = q.shape[-1:] == (dof,) and torch.broadcast_shapes(q.shape[:-1], batch) == batch
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(f"{name} must be (..., {dof}) for targets of batch shape "
                             f"{tuple(batch)}, got {tuple(q.shape)}")  # fmt: skip

    def _take(self, index: Tensor) -> IKResult:
        def take(x: Tensor) -> Tensor:
            return x.gather(-1, index)

        return IKResult(
            q=_rows(self.q, index),
            success=take(self.success),
            position_error=take(self.position_error),
            rotation_error=take(self.rotation_error),
            iterations=take(self.iterations),
            tol_position=self.tol_position,
            tol_rotation=self.tol_rotation,
            continuous=self.continuous,
        )

    def distinct(self, min_distance: float = 0.1) -> tuple[Tensor, Tensor]:
        """Up to ``K`` pairwise distinct successful solutions per target.

        Greedy: successful slots are visited best first and kept when their joint-space distance
        (:func:`joint_distance`, continuous joints wrapped) to every kept one exceeds
        ``min_distance``.

        Args:
            min_distance: distance threshold (rad, or m for prismatic joints).

        Returns:
            ``q (..., K, dof)`` with the kept solutions first (the rest are repeats of slots that
            were not kept and must be ignored) and ``mask (..., K)`` marking the kept ones;
            ``mask.sum(-1)`` is the number of distinct solutions per target.

        Raises:
            ValueError: ``min_distance`` negative or not finite.
            TypeError: ``min_distance`` not a real number.
        """
        check_float("min_distance", min_distance, 0.0)
        order = self._order()  # gathers, as _take's (take_along_dim adds kernels)
        q = _rows(self.q, order)
        ok = self.success.gather(-1, order)
        close = _pairwise_distance(q, self.continuous)
        keep = _greedy_distinct(ok, close <= min_distance)
        first = torch.argsort((~keep).to(torch.uint8), dim=-1, stable=True)
        return _rows(q, first), keep.gather(-1, first)


def _greedy_distinct(ok: Tensor, close: Tensor) -> Tensor:
    """``keep (..., K)``: slot ``k`` is kept when ``ok`` and not ``close`` to a kept slot before
    it. Sequential over ``k`` (vectorised over targets), so it runs in NumPy, whose small
    operations cost far less than torch's; successes come first, so the loop stops at the
    largest number of successes of a target."""
    shape, k = ok.shape, ok.shape[-1]
    ok_np = ok.detach().cpu().numpy().reshape(-1, k)
    close_np = close.detach().cpu().numpy().reshape(-1, k, k)
    keep = np.zeros_like(ok_np)
    for i in range(int(ok_np.sum(axis=-1).max(initial=0))):
        keep[:, i] = ok_np[:, i] & ~(close_np[:, i, :] & keep).any(axis=-1)
    return torch.from_numpy(keep).reshape(shape).to(ok.device)


def _rows(q: Tensor, index: Tensor) -> Tensor:
    """``q (..., K, D)``'s slots in the order ``index (..., K')``: ``(..., K', D)``."""
    return q.gather(-2, index[..., None].expand(*index.shape, q.shape[-1]))


def _kind(value: Any) -> str:
    """What ``value`` is, for a refusal: a tensor's dtype, else its type's name."""
    return f"a {value.dtype} tensor" if isinstance(value, Tensor) else type(value).__name__
