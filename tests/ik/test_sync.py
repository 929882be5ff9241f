"""The IK loop's host checks (issue 19, part 2): ``sync_every`` freezes finished rows by masks
on the device and consults the host only every N iterations; the answers stay right.

The default on the CPU (``sync_every=0`` -> 1) is the loop as it always was; on an accelerator
it becomes :data:`torchik.ik.base.CUDA_SYNC_EVERY`. These tests run the masked loop on the CPU.
"""

import math

import pytest
import torch

from torchik import load_robot, solve_ik
from torchik.ik import LevenbergMarquardt, SolverSettings
from torchik.ik.base import CUDA_SYNC_EVERY


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda", dtype=torch.float64)


def _targets(robot, n, seed):
    q = robot.random_configuration(n, generator=torch.Generator().manual_seed(seed))
    return robot.forward_kinematics(q, "panda_hand")


@pytest.mark.parametrize("sync_every", [1, 3, CUDA_SYNC_EVERY])
@pytest.mark.parametrize("early_stop", [True, False])
def test_masked_loop_solves_and_meets_the_targets(panda, sync_every, early_stop):
    targets = _targets(panda, 64, seed=8)  # the same targets for every setting
    solver = LevenbergMarquardt(sync_every=sync_every)
    g = torch.Generator().manual_seed(0)
    res = solve_ik(panda, targets, method=solver, generator=g, early_stop=early_stop)
    assert res.success.any(-1).all()
    reached = panda.forward_kinematics(res.q, "panda_hand")
    ok = res.success
    dist = (reached[..., :3, 3] - targets[:, None, :3, 3]).norm(dim=-1)
    assert (dist[ok] < 1e-3).all()
    lower, upper = panda.lower, panda.upper
    assert ((res.q >= lower - 1e-12) & (res.q <= upper + 1e-12)).all()
    assert (res.iterations[ok] < 100).all()  # converged slots record the iteration they did


def test_masked_loop_agrees_with_the_host_loop(panda):
    targets = _targets(panda, 128, seed=7)
    results = {}
    for every in (1, 5):
        g = torch.Generator().manual_seed(0)
        solver = LevenbergMarquardt(loop="host", sync_every=every, patience=1000)  # same path
        results[every] = solve_ik(panda, targets, method=solver, generator=g, restarts=False)
    a, b = results[1], results[5]
    assert torch.equal(a.success, b.success)
    # frozen rows keep their q; the others step in a batch of another size, whose batched
    # products round differently (7.9e-11 seen on the CPU and on CUDA): not bit for bit
    torch.testing.assert_close(a.q, b.q, atol=1e-9, rtol=0)
    assert torch.equal(a.iterations, b.iterations)


def test_sync_every_is_validated():
    with pytest.raises(ValueError, match="sync_every"):
        SolverSettings(sync_every=-1)
    assert SolverSettings().sync_every == 0
    assert math.isfinite(CUDA_SYNC_EVERY) and CUDA_SYNC_EVERY > 1


def test_seed_choice_without_host_sync_equals_the_per_pool_loop():
    from torchik.ik.seeding import nearest_member

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(50, 6, generator=g), torch.randn(3, 40, 6, generator=g)
    which = torch.randint(0, 3, (50,), generator=g)
    batched = nearest_member(a, b, which, batched=True)
    assert torch.equal(batched, nearest_member(a, b, which, batched=False))
