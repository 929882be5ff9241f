"""Random ``solve_wholebody`` calls with nonsense arguments.

Each call draws one to three arguments from pools of bad and edge values (negative, zero, NaN,
infinite, huge, wrong types, wrong shapes, unknown links and joints) on top of a small valid
call (the G1, or every other call the G1 beside a free box as a MuJoCo scene loads, both hands,
two targets, a few iterations). Every call must return a
:class:`~torchik.ik.wholebody.WholeBodyResult` of the right shape or raise a ValueError or
TypeError with a one-line message, in under a second. ``tests/fuzz/test_wholebody.py`` runs a
bounded sample in CI; ``make fuzz`` runs ``python -m tests.fuzz.wholebody --n 3000``.
"""

from __future__ import annotations

import math
import random
from functools import cache

import torch

import torchik
from experiments.wholebody import scene_g1
from tests.fuzz.solve_ik import KINDS, NUMBERS, attempt, campaign
from torchik.ik import solve_wholebody

F64 = torch.float64
HANDS = ("left_rubber_hand", "right_rubber_hand")
SMALL = [n for n in NUMBERS if not isinstance(n, int) or n < 64]


@cache
def _problem(scene: bool = False):
    """The G1 (``scene``: beside a free box, as a MuJoCo scene loads, its 7 coordinates first)
    and both hands' targets."""
    g1 = torchik.load_robot("g1", dtype=F64)
    q = g1.random_configuration(2, torch.Generator().manual_seed(0))
    poses = g1.forward_kinematics(q, list(HANDS))
    return scene_g1() if scene else g1, {HANDS[0]: poses[:, 0], HANDS[1]: poses[:, 1]}


def _tensors(dof: int) -> list:
    shapes = [(dof,), (2, dof), (2, 3, dof), (3, 2, dof), (2, 3, dof - 1), (0, dof), (1, 1, dof)]
    values: list = [torch.zeros(s, dtype=F64) for s in shapes]
    values += [
        torch.full((2, 2, dof), math.nan, dtype=F64),
        torch.zeros(2, 2, dof, dtype=torch.long),
    ]
    return values + [[0.0] * dof, "rest"]


def _targets() -> list:
    _, good = _problem()
    left, right = good[HANDS[0]], good[HANDS[1]]
    nan = left.clone()
    nan[0, 0, 3] = math.nan
    skew = left.clone()
    skew[:, :3, :3] *= 2.0
    return [
        {}, None, "hands", [left, right], {HANDS[0]: left}, {HANDS[0]: left, "nope": right},
        {HANDS[0]: left, HANDS[1]: right[:1]}, {HANDS[0]: nan, HANDS[1]: right},
        {HANDS[0]: skew, HANDS[1]: right}, {HANDS[0]: left[:, :3, 3], HANDS[1]: right[:, :3]},
        {HANDS[0]: left.tolist(), HANDS[1]: right}, {HANDS[0]: left.float(), HANDS[1]: right},
        {HANDS[0]: left[0], HANDS[1]: right[0]}, {HANDS[0]: left[:0], HANDS[1]: right[:0]},
        {3: left}, {HANDS[0]: torch.zeros(2, 4, 4, dtype=F64), HANDS[1]: right},
    ]  # fmt: skip


def arguments(seed: int) -> dict:
    """The ``seed``-th set of bad keyword arguments for ``solve_wholebody``."""
    rng = random.Random(seed)
    robot, _ = _problem(scene=seed % 2 == 1)
    names = list(robot.joint_names)
    pools = {
        "targets": _targets(),
        "weights": [{HANDS[0]: -1.0}, {HANDS[0]: math.nan}, {"nope": 1.0}, [1.0],
                    {HANDS[0]: 0.0, HANDS[1]: 0.0}, {HANDS[0]: "1"}, {HANDS[0]: math.inf}],
        "active": [["nope"], names[0], [], names[:3], torch.ones(robot.dof),
                   torch.ones(3, dtype=torch.bool), [3], torch.zeros(robot.dof, dtype=torch.bool)],
        "rest": _tensors(robot.dof),
        "seeds": _tensors(robot.dof),
        "lower": _tensors(robot.dof),
        "upper": _tensors(robot.dof),
        "posture": NUMBERS + KINDS,
        "posture_iters": SMALL + KINDS,  # a billion is a valid (long) request
        "position_only": [True, False, 1, "yes"],
        "num_seeds": NUMBERS + KINDS,
        "seed_pool": NUMBERS + KINDS,
        "tol_position": NUMBERS + KINDS,
        "tol_rotation": NUMBERS + KINDS,
        "max_iters": SMALL + [2**31, 2**63] + KINDS,  # a billion: valid, and as long as asked
        "generator": [3, "g", torch.Generator().manual_seed(1)],
        "num_threads": SMALL + KINDS,
        "loop": ["host", "fixed", "auto", "fast", 3, None],
        "restarts": [0, 1, "yes", None, True, False],
    }  # fmt: skip
    keys = rng.sample(sorted(pools), rng.randint(1, 3))
    kwargs = {k: rng.choice(pools[k]) for k in keys}
    kwargs.setdefault("max_iters", 5)  # keep the valid calls quick
    return kwargs


def run_one(seed: int) -> tuple[str, float, str]:
    """``(result, seconds, message)`` of the ``seed``-th call."""
    robot, targets = _problem(scene=seed % 2 == 1)
    kwargs = arguments(seed)
    targets = kwargs.pop("targets", targets)
    return attempt(lambda: solve_wholebody(robot, targets, **kwargs), kwargs)


def main(argv: list[str] | None = None) -> int:
    return campaign(run_one, __doc__.splitlines()[0], 3000, argv)


if __name__ == "__main__":
    raise SystemExit(main())
