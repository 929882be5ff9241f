"""The data of :mod:`torchik.seq2seq` (which re-exports every name): smooth joint paths of a
robot, the end-link positions along them, and the limits of its (revolute) joints.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from torchik.checks import check_int
from torchik.robot.robot import Robot

__all__ = ["SequenceDataset", "make_sequence_dataset", "revolute_limits"]


# ---------------------------------------------------------------------------- data
def revolute_limits(robot: Robot) -> tuple[Tensor, Tensor]:
    """The joint limits of a robot whose joints all turn, for :class:`~torchik.seq2seq.SequenceIK`.

    The sequence model predicts a direction per joint, which a prismatic joint's value in
    metres is not: such a robot is refused here, before data are drawn or a model trained.

    Args:
        robot: the robot.

    Returns:
        ``(lower (D,), upper (D,))`` (rad), copies in the robot's dtype and device.

    Raises:
        ValueError: a prismatic joint, named.
    """
    prismatic = [n for n, p in zip(robot.joint_names, robot.prismatic.tolist(), strict=True) if p]
    if prismatic:
        names = ", ".join(map(repr, prismatic))
        raise ValueError(f"seq2seq models revolute joints only; {robot.name!r} has the prismatic "
                         f"joint(s) {names}")  # fmt: skip
    return robot.lower.clone(), robot.upper.clone()


@dataclass
class SequenceDataset:
    """Joint paths and the end-link positions along them, float32.

    Attributes:
        q: ``(N, S, D)`` joint angles.
        positions: ``(N, S, 3)`` end-link positions (metres).
        link: the end link.
    """

    q: Tensor
    positions: Tensor
    link: str

    def __len__(self) -> int:
        return self.q.shape[0]

    def subset(self, index: Any) -> SequenceDataset:
        """The sequences ``index`` selects (a slice, indices or a mask)."""
        return SequenceDataset(self.q[index], self.positions[index], self.link)


def make_sequence_dataset(
    robot: Robot,
    n_sequences: int,
    length: int = 100,
    link: str | None = None,
    max_move: float = 1.0,
    margin: float = 0.1,
    seed: int = 0,
) -> SequenceDataset:
    """Smooth random joint paths and their end-link positions (FK in float64).

    Every joint moves from a random start to a random end at most ``max_move`` away with a
    ``(1 - cos)`` profile (see :func:`torchik.learn.make_smooth_targets`).

    Args:
        robot: the robot (copied to float64 for FK if it is not).
        n_sequences: ``N``.
        length: steps ``S`` per sequence.
        link: end link (default: the robot's default end link).
        max_move: largest change of a joint along a sequence (rad).
        margin: fraction of each joint's range kept free at both ends.
        seed: seeds the draw.

    Returns:
        A :class:`SequenceDataset` with ``q (N, S, D)`` and ``positions (N, S, 3)``.

    Raises:
        ValueError: a count, ``max_move`` or ``margin`` out of range, ``seed`` negative, an
            unknown link, a prismatic joint (:func:`revolute_limits`).
        TypeError: arguments of the wrong kind.
    """
    from torchik.ik.solve import default_link
    from torchik.learn.paths import make_smooth_targets

    check_int("seed", seed, 0, 2**63 - 1)
    revolute_limits(robot)

    if robot.dtype != torch.float64:
        robot = copy.deepcopy(robot).to(torch.float64)  # float64 masters: full precision
    link = default_link(robot) if link is None else link
    gen = torch.Generator().manual_seed(seed)
    q, positions = make_smooth_targets(
        robot, link, length, n_sequences, max_move, margin, generator=gen
    )
    return SequenceDataset(q.float().cpu(), positions.float().cpu(), link)
