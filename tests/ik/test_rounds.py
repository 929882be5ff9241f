"""torchik.ik.rounds (and the inputs it checks): ``max_iters`` is a hard cap however the work is
cut into rounds; a generator that is not one, and tensors on the meta device, are refused in
one line."""

from __future__ import annotations

import pytest
import torch

import torchik
from torchik.ik import solve_ik

F64 = torch.float64


@pytest.fixture(scope="module")
def panda():
    robot = torchik.load_robot("panda", dtype=F64)
    q = robot.random_configuration(3, torch.Generator().manual_seed(0))
    return robot, robot.forward_kinematics(q, "panda_hand")


@pytest.mark.parametrize("early_stop", [True, False])
@pytest.mark.parametrize("given", [False, True])
@pytest.mark.parametrize("max_iters", [0, 1, 3])
def test_max_iters_is_a_hard_cap(panda, early_stop, given, max_iters):
    """``max_iters=0`` ran 3 to 8 iterations: the first early-stop round used ``round_iters``."""
    robot, target = panda
    seeds = robot.random_configuration(4, torch.Generator().manual_seed(1)) if given else None
    result = solve_ik(robot, target, "panda_hand", max_iters=max_iters, early_stop=early_stop,
                      seeds=seeds, generator=torch.Generator().manual_seed(2))  # fmt: skip
    assert int(result.iterations.max()) <= max_iters


def test_solve_ik_refuses_a_seed_for_a_generator_and_meta_tensors(panda):
    robot, target = panda
    with pytest.raises(TypeError, match="generator must be a torch.Generator or None, got int 5"):
        solve_ik(robot, target, "panda_hand", generator=5)  # was an AttributeError
    meta = {"target": target.to("meta"), "seeds": torch.zeros(2, 7, device="meta")}
    meta["lower"] = torch.zeros(7, device="meta")
    for name, value in meta.items():
        kwargs = {"target": target, name: value}
        with pytest.raises(ValueError, match=f"{name} is on the meta device: it has a shape but"):
            solve_ik(robot, link="panda_hand", **kwargs)  # were RuntimeErrors
