"""refine_samples: every sample polished in its own slot, no early stop, no restarts."""

from __future__ import annotations

import math

import pytest
import torch

from torchik import load_robot
from torchik.geometry import joint_distance
from torchik.ik import refine_samples, solve_ik

F64 = torch.float64
LINK = "panda_hand"


def near_solutions(n_targets: int, k: int, spread: float, seed: int = 0, dtype=F64):
    """Panda, targets at random configurations and ``k`` samples scattered around each."""
    robot = load_robot("panda", dtype=dtype)
    g = torch.Generator().manual_seed(seed)
    q = robot.random_configuration(n_targets, g)
    noise = spread * torch.randn(n_targets, k, robot.dof, generator=g, dtype=dtype)
    samples = (q[:, None] + noise).clamp(robot.lower, robot.upper)
    return robot, robot.forward_kinematics(q, LINK), samples


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_every_sample_refined_in_its_own_slot(dtype):
    robot, target, _ = near_solutions(1, 1, 0.0, dtype=dtype)
    g = torch.Generator().manual_seed(0)
    found = solve_ik(robot, target[0], num_seeds=64, early_stop=False, generator=g)
    q, keep = found.distinct(0.5)
    assert int(keep.sum()) >= 4
    exact = q[:4]  # four solutions more than 0.5 rad apart
    samples = exact + 0.02 * torch.randn(exact.shape, generator=g, dtype=dtype)
    result = refine_samples(robot, target[0], samples, tol_rotation=0.01)
    assert result.q.shape == samples.shape
    assert bool(result.success.all())  # no early stop: every slot ran to success
    # slot k is sample k refined: it stays by the solution its sample started from
    gaps = joint_distance(result.q[:, None], exact[None], robot.continuous)
    assert torch.equal(gaps.argmin(dim=-1), torch.arange(4))
    assert float(gaps.diagonal().max()) < 0.1


def test_is_solve_ik_with_given_seeds_without_early_stop_or_restarts():
    robot, target, samples = near_solutions(5, 8, 0.6, seed=1)
    result = refine_samples(robot, target, samples, tol_position=1e-5, tol_rotation=1e-5)
    expected = solve_ik(
        robot, target, LINK, seeds=samples, early_stop=False, restarts=False,
        tol_position=1e-5, tol_rotation=1e-5,
    )  # fmt: skip
    torch.testing.assert_close(result.q, expected.q, rtol=0, atol=0)
    assert torch.equal(result.success, expected.success)


def test_float32_samples_and_position_only():
    robot, target, samples = near_solutions(3, 5, 0.3, seed=2)
    result = refine_samples(robot, target[:, :3, 3], samples.float(), position_only=True)
    assert result.q.dtype == F64
    assert bool(result.success.all())
    assert float(result.rotation_error.abs().max()) == 0.0


def test_samples_shared_by_every_target():
    robot, target, samples = near_solutions(3, 4, 0.05, seed=3)
    result = refine_samples(robot, target, samples[0], max_iters=0)  # (K, dof) for all
    assert result.q.shape == (3, 4, robot.dof)
    assert int(result.iterations.max()) == 0


def test_bad_samples_raise():
    robot, target, samples = near_solutions(2, 3, 0.05)
    with pytest.raises(ValueError, match="seeds"):
        refine_samples(robot, target, samples[..., :5])


class _Refined:
    """What ``collect_solutions`` reads of an :class:`IKResult`: ``q`` and ``success``."""

    def __init__(self, n: int, rate: float, round_: int):
        self.q = torch.full((n, 2), float(round_))
        self.success = torch.arange(n) < round(rate * n)


@pytest.mark.parametrize(
    ("rate", "asked", "rounds"),
    [(1.0, [105], 1), (0.9, [105, 9], 2), (0.5, [105, 72, 18, 8], 4)],
)
def test_collect_solutions_asks_for_a_margin_then_for_the_shortfall(rate, asked, rounds):
    from torchik.ik import collect_solutions

    calls: list[int] = []

    def solve(n, round_):
        calls.append(n)
        return _Refined(n, rate, round_)

    got = collect_solutions(solve, 100)
    assert calls == asked and got.rounds == rounds and got.seeds == sum(asked)
    assert got.q.shape == (100, 2) and got.q[0, 0] == 0.0  # the first round's solutions first


def test_collect_solutions_stops_after_its_rounds_and_checks_its_arguments():
    from torchik.ik import collect_solutions

    got = collect_solutions(lambda n, r: _Refined(n, 0.0, r), 10, rounds=2, margin=0.0)
    assert got.q.shape == (0, 2) and got.seeds == 10 + 15 and got.rounds == 2
    bad = [({"count": 0}, ValueError, "count must be >= 1"),
           ({"count": 5, "rounds": 0}, ValueError, "rounds must be >= 1"),
           ({"count": 5, "margin": -0.1}, ValueError, "margin must be in"),
           ({"count": math.inf}, TypeError, "count must be an int"),  # OverflowError before
           ({"count": 5, "rounds": 1.5}, TypeError, "rounds must be an int"),
           ({"count": 10**9}, ValueError, "seeds must be at most")]  # fmt: skip
    for kwargs, error, match in bad:
        with pytest.raises(error, match=match):
            collect_solutions(lambda n, r: _Refined(n, 1.0, r), **kwargs)
