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
