"""torchik.robot.configuration and the steps of torchik.geometry.floating: out-of-range counts,
bounds and shapes are one-line ValueErrors or TypeErrors (they were torch's RuntimeErrors, a
multi-line TypeError, or accepted on a float64 robot and an error on a float32 one)."""

from __future__ import annotations

import math

import pytest
import torch

import torchik
from torchik.robot.configuration import MAX_CONFIGURATIONS, random_configuration


@pytest.fixture(scope="module")
def panda():
    return torchik.load_robot("panda")


def test_random_configuration_counts_and_generators(panda):
    assert random_configuration(panda, 0).shape == (0, 7)
    with pytest.raises(ValueError, match="n must be >= 0, got -1"):
        panda.random_configuration(-1)
    with pytest.raises(ValueError, match=f"n must be <= {MAX_CONFIGURATIONS}"):
        panda.random_configuration(10**9)
    for bad in (1.5, "3", None):
        with pytest.raises(TypeError, match="n must be an int") as err:
            panda.random_configuration(bad)
        assert "\n" not in str(err.value)
    with pytest.raises(TypeError, match="generator must be a torch.Generator or None, got int"):
        panda.random_configuration(2, 5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_with_limits_bounds_beyond_the_urdf_readers_rule(dtype):
    robot = torchik.load_robot("panda", dtype=dtype)
    with pytest.raises(ValueError, match=r"'panda_joint1' has the bound 1e\+300, beyond the"):
        robot.with_limits({"panda_joint1": (1e300, 1e301)})
    for bad in ((0.0, 1.0, 2.0), 5, ("a", 1.0)):
        with pytest.raises(TypeError, match="needs \\(lower, upper\\), two numbers"):
            robot.with_limits({"panda_joint1": bad})
    wide = robot.with_limits({"panda_joint1": (-math.inf, 1e9)})
    assert wide.lower[0] == -math.inf and wide.upper[0] == 1e9


def test_difference_and_integrate_check_their_shapes(panda):
    q = panda.random_configuration(3)
    with pytest.raises(ValueError, match=r"q1 must have shape \(\.\.\., 7\) for q0 of shape"):
        panda.difference(q, q[:, :6])
    with pytest.raises(ValueError, match="batch shapes do not broadcast"):
        panda.difference(q, q[:2])
    with pytest.raises(TypeError, match="q1 must be a torch.Tensor, got list"):
        panda.difference(q, [0.0] * 7)
    with pytest.raises(ValueError, match=r"v must have shape \(\.\.\., 7\)"):
        panda.integrate(q, torch.zeros(3, 6))
    assert torch.equal(panda.difference(q, q), torch.zeros_like(q))


def test_a_draw_is_three_operations_and_follows_the_limits(panda):
    """The uniform box is kept with the flattened tree: a draw dispatches rand, mul and add,
    and a robot with other limits (a copy, another dtype) draws within its own."""
    from tests.ik.recorder import Recorder

    panda.random_configuration(1)
    with Recorder() as seen:
        q = panda.random_configuration(500, torch.Generator().manual_seed(0))
    assert [op.split(".")[1] for op in seen.ops] == ["rand", "mul", "add"]
    assert bool(((q >= panda.lower) & (q <= panda.upper)).all())
    narrow = panda.with_limits({"panda_joint1": (-0.1, 0.1)})
    assert narrow.random_configuration(500)[:, 0].abs().max() <= 0.1
    assert panda.random_configuration(500)[:, 0].abs().max() > 0.5  # the original keeps its own
    wide = narrow.to(torch.float64)
    assert wide.random_configuration(500).dtype == torch.float64
    assert wide.random_configuration(500)[:, 0].abs().max() <= 0.1


def test_limits_edited_in_place_hold_for_draws_the_neutral_and_a_change_of_dtype():
    """``robot.lower[0] = ...`` under no_grad: the uniform draw and the neutral configuration
    (kept with the tree) follow it, and a change of dtype keeps it (the float64 masters were
    restoring the file's limits)."""
    robot = torchik.load_robot("panda")
    robot.random_configuration(1), robot.neutral()  # the kept box and neutral exist
    with torch.no_grad():
        robot.lower[0], robot.upper[0] = 0.5, 0.6
    q = robot.random_configuration(500, torch.Generator().manual_seed(0))
    assert float(q[:, 0].min()) >= 0.5 and float(q[:, 0].max()) <= 0.6
    assert float(robot.neutral()[0]) == pytest.approx(0.55)
    wide = robot.to(torch.float64)
    assert float(wide.lower[0]) == pytest.approx(0.5) and float(wide.upper[0]) == pytest.approx(0.6)
    assert float(wide.random_configuration(200)[:, 0].min()) >= 0.5 - 1e-7
    assert torch.equal(wide.lower[1:], torchik.load_robot("panda", dtype=torch.float64).lower[1:])
    # unedited limits of a copy come back as their float64 values, not float32 roundings
    import copy

    exact = torchik.load_robot("panda", dtype=torch.float64).lower
    assert torch.equal(copy.deepcopy(torchik.load_robot("panda")).double().lower, exact)


def test_a_chain_keeps_the_robots_limits():
    """``Robot.chain`` takes this robot's limits, also where ``with_limits`` changed them."""
    robot = torchik.load_robot("panda", dtype=torch.float64)
    narrow = robot.with_limits({"panda_joint1": (-0.1, 0.1), "panda_joint3": (0.2, 0.3)})
    arm = narrow.chain(narrow.root, "panda_hand")
    assert torch.equal(arm.lower, narrow.lower) and torch.equal(arm.upper, narrow.upper)
    part = narrow.chain("panda_link2", "panda_hand")
    assert part.joint_names[0] == "panda_joint3"
    assert (float(part.lower[0]), float(part.upper[0])) == (0.2, 0.3)
    assert torch.equal(robot.chain(robot.root, "panda_hand").lower, robot.lower)
