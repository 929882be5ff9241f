"""Input checks shared by the IK entry points (:func:`~torchik.ik.solve_ik` and its whole-body
form in :mod:`torchik.ik.wholebody`): targets, seeds, boxes and the scalar settings."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from torchik.checks import check_bool, check_float, check_int, check_values
from torchik.robot.robot import Robot

__all__ = [
    "MAX_SEEDS",
    "MAX_SEED_POOL",
    "check_bounds",
    "check_options",
    "check_seeds",
    "check_target",
]

MAX_SEEDS = 1 << 16
"""The most random seeds (slots) per target ``solve_ik`` and ``solve_wholebody`` accept."""

MAX_SEED_POOL = 1 << 20
"""The largest ``seed_pool`` ``solve_ik`` and ``solve_wholebody`` accept."""


def check_options(tol_position, tol_rotation, num_seeds, seed_pool, restarts, position_only):
    """The scalar settings of ``solve_ik`` and ``solve_wholebody``, one line per refusal
    (``max_iters`` is checked by the solver's settings, ``num_threads`` on entry)."""
    check_float("tol_position", tol_position, positive=True)
    if not (isinstance(tol_rotation, float) and tol_rotation == math.inf):
        check_float("tol_rotation", tol_rotation, positive=True)
    check_int("num_seeds", num_seeds, 1, MAX_SEEDS)
    check_int("seed_pool", seed_pool, 0, MAX_SEED_POOL)
    if restarts is not None:
        check_bool("restarts", restarts)
    check_bool("position_only", position_only)


def check_target(robot: Robot, target: Tensor, position_only: bool, values: bool = True):
    """``(batch shape, positions (T, 3), rotations (T, 3, 3) or None)``. ``values``: also
    refuse non-finite values and rotations that are not (one read back to the host: on CUDA
    it waits for the device; ``False`` checks the shapes only, for a probe of its cost)."""
    if not isinstance(target, Tensor):
        raise TypeError(f"target must be a torch.Tensor, got {type(target).__name__}")
    if not target.is_floating_point():
        raise TypeError(f"target must be a floating-point tensor, got {target.dtype}")
    check_values("target", target)
    is_pose = target.dim() >= 2 and target.shape[-2:] == (4, 4)
    if position_only and target.dim() >= 1 and target.shape[-1] == 3:
        batch, position, rotmat = target.shape[:-1], target, None
    elif is_pose:
        batch, position, rotmat = target.shape[:-2], target[..., :3, 3], target[..., :3, :3]
        if position_only:
            rotmat = None
    else:
        want = "(..., 3) positions or (..., 4, 4) poses" if position_only else "(..., 4, 4) poses"
        hint = "" if position_only else " (pass position_only=True for (..., 3) positions)"
        raise ValueError(f"target must be {want}, got shape {tuple(target.shape)}{hint}")
    position = position.to(robot.device, robot.dtype).reshape(-1, 3)
    if rotmat is not None:
        rotmat = rotmat.to(robot.device, robot.dtype).reshape(-1, 3, 3)
    if values:
        _check_target_values(robot, target, rotmat)
    return batch, position, rotmat


ORTHONORMAL_TOL = 1e-3
"""The largest entry of ``|RᵀR - I|`` a target rotation may have."""

_EYE = np.eye(3)


HOST_CHECK_VALUES = 4096
"""The most values of a target tensor on another device that are copied to the host and checked
there in NumPy (one copy, where the device's check launches about fifteen small kernels before
its one read back: a one-pose solve on a GPU waits on them); larger targets are checked on
their device."""


def _check_target_values(robot: Robot, target: Tensor, rotmat: Tensor | None) -> None:
    """NaN or infinity anywhere in ``target``, or ``rotmat (T, 3, 3)`` that are not rotations:
    refused, after one host read (each one stalls a GPU); on the CPU in NumPy, whose small
    operations cost a tenth of torch's (a one-pose solve spent a tenth of its time here), and
    so are small targets of another device, copied once (:data:`HOST_CHECK_VALUES`)."""
    if target.device.type == "cpu" and robot.device.type == "cpu":
        bad = _host_flags(target, rotmat)
    elif target.numel() <= HOST_CHECK_VALUES:
        bad = _host_flags(*_on_host(robot, target, rotmat))
    else:
        bad = _flags(robot, target, rotmat)
    if bad[0]:
        raise ValueError("target contains NaN or infinite values")
    if bad[1]:
        raise ValueError("target rotations must be orthonormal with determinant +1")


def _flags(robot: Robot, target: Tensor, rotmat: Tensor | None) -> list[bool]:
    """``[non-finite values, rotations that are not]``, read back once."""
    flags = [~torch.isfinite(target).all().to(robot.device)]
    if rotmat is not None and len(rotmat):
        eye = torch.eye(3, dtype=rotmat.dtype, device=rotmat.device)
        off = (rotmat.transpose(-1, -2) @ rotmat - eye).abs().amax()
        det = (rotmat[:, 0] * torch.linalg.cross(rotmat[:, 1], rotmat[:, 2])).sum(-1)
        flags.append((off > ORTHONORMAL_TOL) | (det <= 0).any())
    bad = torch.stack(flags).tolist()
    return bad + [False] * (2 - len(bad))


def _on_host(robot: Robot, target: Tensor, rotmat: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """``target`` copied to the host (one copy) and its rotations as :func:`check_target` cut
    them (``(T, 3, 3)`` in the robot's dtype; ``None`` without ``rotmat``)."""
    host = target.detach().cpu()
    if rotmat is None:
        return host, None
    return host, host[..., :3, :3].reshape(-1, 3, 3).to(robot.dtype)


def _host_flags(target: Tensor, rotmat: Tensor | None) -> list[bool]:
    """:func:`_flags` of CPU tensors, in NumPy."""
    flags = [not _finite(target), False]
    if rotmat is not None and len(rotmat):
        r = rotmat.detach().numpy()
        off = np.abs(r.transpose(0, 2, 1) @ r - _EYE).max()
        flags[1] = bool(off > ORTHONORMAL_TOL) or bool((_det(r) <= 0).any())
    return flags


def _det(r: np.ndarray) -> np.ndarray:
    """``(n,)`` determinants of ``r (n, 3, 3)`` by cofactors: about a twentieth of
    ``np.linalg.det``'s time on a thousand matrices (an LU factorisation each)."""
    minors = (r[:, 1, 1] * r[:, 2, 2] - r[:, 1, 2] * r[:, 2, 1],
              r[:, 1, 0] * r[:, 2, 2] - r[:, 1, 2] * r[:, 2, 0],
              r[:, 1, 0] * r[:, 2, 1] - r[:, 1, 1] * r[:, 2, 0])  # fmt: skip
    return r[:, 0, 0] * minors[0] - r[:, 0, 1] * minors[1] + r[:, 0, 2] * minors[2]


def _finite(values: Tensor) -> bool:
    """Whether every value is finite (one host read; on the CPU in NumPy, where float32 and
    float64 map)."""
    if values.device.type == "cpu" and values.dtype in (torch.float32, torch.float64):
        return bool(np.isfinite(values.detach().numpy()).all())
    return bool(torch.isfinite(values).all())


def check_seeds(robot: Robot, seeds: Tensor, batch: torch.Size) -> Tensor:
    """Seeds ``(..., K, dof)`` (or ``(K, dof)`` for every target) -> ``(T * K, dof)``."""
    if not isinstance(seeds, Tensor) or not seeds.is_floating_point():
        kind = seeds.dtype if isinstance(seeds, Tensor) else type(seeds).__name__
        raise TypeError(f"seeds must be a floating-point torch.Tensor, got {kind}")
    check_values("seeds", seeds)
    if seeds.dim() < 2 or seeds.shape[-1] != robot.dof:
        want = f"(..., K, {robot.dof}) or (K, {robot.dof})"
        raise ValueError(f"seeds must have shape {want}, got {tuple(seeds.shape)}")
    if seeds.shape[-2] < 1:
        raise ValueError("seeds must hold at least one configuration per target (K >= 1)")
    if seeds.shape[:-2] != batch and seeds.dim() != 2:
        raise ValueError(
            f"seeds batch shape {tuple(seeds.shape[:-2])} does not match the targets' "
            f"{tuple(batch)}; use (..., K, dof) or (K, dof) for all targets"
        )
    if not _finite(seeds):
        raise ValueError("seeds contain NaN or infinite values")
    seeds = seeds.to(robot.device, robot.dtype).expand(*batch, *seeds.shape[-2:])
    return seeds.reshape(-1, robot.dof)


def check_bounds(robot: Robot, lower, upper, batch: torch.Size):
    """``(lower, upper)``, each ``(T, dof)``, or ``None`` without a box."""
    if lower is None and upper is None:
        return None
    corners = []
    for name, value, default in (("lower", lower, robot.lower), ("upper", upper, robot.upper)):
        value = default if value is None else torch.as_tensor(value)
        check_values(name, value)
        try:
            value = value.to(robot.device, robot.dtype).expand(*batch, robot.dof)
        except RuntimeError as err:
            want = f"({', '.join(map(str, (*batch, robot.dof)))})"
            raise ValueError(f"{name} must broadcast to {want}, got {tuple(value.shape)}") from err
        corners.append(value.reshape(-1, robot.dof))
    return corners[0], corners[1]
