"""What a whole-body solve answers, and the check by forward kinematics that makes the answer:
:class:`WholeBodyResult` and :func:`evaluate_targets`."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from torchik.geometry.rotations import geodesic_distance
from torchik.ik.result import IKResult
from torchik.ik.wholebody.problem import WholeBodyProblem
from torchik.kinematics import native

__all__ = ["WholeBodyResult", "evaluate_targets"]


@dataclass
class WholeBodyResult(IKResult):
    """An :class:`IKResult` whose ``position_error`` and ``rotation_error`` are the worst over
    the targets, with every target's own errors.

    Attributes:
        position_errors: link -> ``(..., K)`` position error (m).
        rotation_errors: link -> ``(..., K)`` rotation error (rad; zeros for position targets).
    """

    position_errors: dict[str, Tensor]
    rotation_errors: dict[str, Tensor]

    def _take(self, index: Tensor) -> WholeBodyResult:
        """The slots ``index (..., k)`` of every target, per-target errors included (what
        :meth:`best` and :meth:`top` return)."""
        out = super()._take(index)

        def take(errors: dict[str, Tensor]) -> dict[str, Tensor]:
            return {link: v.gather(-1, index) for link, v in errors.items()}  # as IKResult

        return WholeBodyResult(**vars(out), position_errors=take(self.position_errors),
                               rotation_errors=take(self.rotation_errors))  # fmt: skip


def evaluate_targets(
    problem: WholeBodyProblem, q: Tensor, iterations: Tensor, shape
) -> WholeBodyResult:
    """Success and errors of ``q (N, dof)`` by forward kinematics of every target link."""
    robot, targets = problem.robot, problem.targets
    links = [t.link for t in targets]
    q = problem.limits.canonical(q)
    pos_all, rot_all, within = _link_errors(problem, q)  # (N, L) each: every link at once
    pos_err, rot_err = pos_all.amax(dim=1), rot_all.amax(dim=1)
    pos_errs = dict(zip(links, pos_all.unbind(1), strict=True))
    rot_errs = dict(zip(links, rot_all.unbind(1), strict=True))
    success = (pos_err < problem.tol_position) & (rot_err < problem.tol_rotation) & within
    return WholeBodyResult(
        q.reshape(*shape, robot.dof), success.reshape(shape), pos_err.reshape(shape),
        rot_err.reshape(shape), iterations.reshape(shape), problem.tol_position,
        problem.tol_rotation, robot.continuous,
        {k: v.reshape(shape) for k, v in pos_errs.items()},
        {k: v.reshape(shape) for k, v in rot_errs.items()},
    )  # fmt: skip


def _link_errors(problem: WholeBodyProblem, q: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(N, L)`` position and geodesic rotation errors (0 for a position target) of every
    target link at ``q (N, dof)``, and ``(N,)`` whether ``q`` is within the joint limits: in
    one compiled pass where FK runs natively (a fixed base on the CPU:
    :func:`torchik.kinematics.native.link_errors`), else from the links' poses."""
    robot, targets = problem.robot, problem.targets
    position = torch.stack([t.position for t in targets], dim=1)
    if robot.takes_native(q):
        index = tuple(robot.link_index(t.link) for t in targets)
        eye = torch.eye(3, dtype=q.dtype).expand(len(q), 3, 3)
        rotmat = torch.stack([eye if t.rotmat is None else t.rotmat for t in targets], dim=1)
        posed = tuple(t.rotmat is not None for t in targets)
        return native.link_errors(q, robot.tree, index, position, rotmat, posed, robot.lower,
                                  robot.upper)  # fmt: skip
    poses = robot.forward_kinematics(q, [t.link for t in targets])  # (N, L, 4, 4)
    pos_all = (poses[..., :3, 3] - position).norm(dim=-1)
    rotmats = [t.rotmat for t in targets if t.rotmat is not None]
    if len(rotmats) == len(targets):  # every link a pose: all at once
        rot_all = geodesic_distance(poses[..., :3, :3], torch.stack(rotmats, dim=1))
    else:  # link by link: an index made on the host would be a copy to the device (in a capture)
        zeros = pos_all.new_zeros(pos_all.shape[:1])
        rot_all = torch.stack([zeros if t.rotmat is None else
                               geodesic_distance(poses[:, i, :3, :3], t.rotmat)
                               for i, t in enumerate(targets)], dim=1)  # fmt: skip
    within = ((q >= robot.lower) & (q <= robot.upper)).all(dim=-1)
    return pos_all, rot_all, within
