"""Metric functions against closed forms and brute force."""

from __future__ import annotations

import math

import pytest
import torch

from torchik import load_robot
from torchik.geometry import axis_angle_to_rotmat
from torchik.learn import metrics as m


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda", dtype=torch.float64)


def test_position_error_is_zero_at_the_fk_and_broadcasts(panda):
    gen = torch.Generator().manual_seed(0)
    q = panda.random_configuration(4, gen)
    target = panda.link_positions(q, "panda_hand")
    assert m.position_error(panda, q, target, "panda_hand").abs().max() < 1e-12
    shifted = target + torch.tensor([0.0, 0.03, 0.04], dtype=torch.float64)
    err = m.position_error(panda, q.float(), shifted, "panda_hand")  # in the robot's dtype
    torch.testing.assert_close(err, torch.full((4,), 0.05, dtype=torch.float64), atol=1e-6, rtol=0)
    samples = q[:, None].expand(4, 5, 7)  # (B, n, D) against (B, 1, 3)
    assert m.position_error(panda, samples, target[:, None], "panda_hand").shape == (4, 5)


def test_position_error_planar_targets():
    arm = load_robot("planar", link_lengths=[1.0, 1.0], dtype=torch.float64)
    q = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    err = m.position_error(arm, q, torch.tensor([[1.0, 1.0]], dtype=torch.float64), "ee")
    torch.testing.assert_close(err, torch.tensor([math.sqrt(2.0)], dtype=torch.float64))


def test_rotation_error_is_the_angle_of_an_extra_rotation(panda):
    q = panda.random_configuration(3, torch.Generator().manual_seed(1))
    rotmat = panda.forward_kinematics(q, "panda_hand")[..., :3, :3]
    angle = torch.tensor([0.0, 0.3, 2.0], dtype=torch.float64)
    z = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64).expand(3, 3)
    target = rotmat @ axis_angle_to_rotmat(z, angle)
    torch.testing.assert_close(m.rotation_error(panda, q, target, "panda_hand"), angle)


def test_accuracy():
    assert m.accuracy(torch.tensor([0.01, 0.2, 0.05, math.nan]), 0.1) == 0.5
    assert m.accuracy(torch.tensor([0.1]), 0.1) == 0.0  # strictly below
    with pytest.raises(ValueError):
        m.accuracy(torch.tensor([]), 0.1)


def test_limit_violations():
    lower, upper = torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 2.0])
    q = torch.tensor([[0.0, 1.0], [1.5, 1.0], [-2.0, 3.0], [1.0 + 1e-9, math.nan]])
    assert m.limit_violations(q, lower, upper).tolist() == [0, 1, 2, 1]
    assert m.limit_violations(q[:1, None], lower, upper).shape == (1, 1)
    assert m.limit_violations(torch.tensor([1.05, 0.0]), lower, upper, tol=0.1).item() == 0


def _brute_force(samples, continuous):
    n = samples.shape[0]
    total = 0.0
    for i in range(n):
        for j in range(n):
            if i != j:
                d = samples[i] - samples[j]
                d = torch.where(continuous, torch.remainder(d + math.pi, 2 * math.pi) - math.pi, d)
                total += d.norm().item()
    return total / (n * (n - 1))


@pytest.mark.parametrize("wrap", [False, True])
def test_mean_pairwise_distance(wrap, monkeypatch):
    gen = torch.Generator().manual_seed(2)
    samples = (torch.rand(3, 6, 4, generator=gen, dtype=torch.float64) - 0.5) * 6
    continuous = torch.tensor([wrap, False, wrap, False])
    monkeypatch.setattr(m, "_PAIR_BLOCK", 40)  # exercise the blocked loop too
    out = m.mean_pairwise_distance(samples, continuous if wrap else None)
    expected = [_brute_force(s, continuous) for s in samples]
    torch.testing.assert_close(out, torch.tensor(expected, dtype=torch.float64))


def test_mean_pairwise_distance_wraps_continuous_joints():
    near = torch.tensor([[math.pi - 0.1], [-math.pi + 0.1]], dtype=torch.float64)
    out = m.mean_pairwise_distance(near, torch.tensor([True]))
    torch.testing.assert_close(out, torch.tensor(0.2, dtype=torch.float64))
    assert m.mean_pairwise_distance(torch.zeros(2, 1, 3)).tolist() == [0.0, 0.0]


def test_best_of_n():
    errors = torch.tensor([[3.0, 1.0, 2.0, 0.5]])
    assert m.best_of_n(errors).tolist() == [0.5]
    assert m.best_of_n(errors, 2).tolist() == [1.0]
    with pytest.raises(ValueError):
        m.best_of_n(errors, 5)


def test_timed():
    result, seconds = m.timed(torch.ones, 3, repeat=3, warmup=1)
    assert result.shape == (3,) and 0.0 <= seconds < 1.0


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"repeat": 0}, ValueError, "repeat must be >= 1, got 0"),
        ({"repeat": -3}, ValueError, "repeat must be >= 1, got -3"),
        ({"repeat": 10**12}, ValueError, "repeat must be <= 1000000, got 1000000000000"),
        ({"warmup": -1}, ValueError, "warmup must be >= 0, got -1"),
        ({"repeat": 2.5}, TypeError, "repeat must be an int, got float 2.5"),
        ({"repeat": True}, TypeError, "repeat must be an int, got bool True"),
    ],
)
def test_timed_refuses_a_bad_count_before_any_call(options, error, message):
    calls = []
    with pytest.raises(error, match=f"^{message}$"):
        m.timed(calls.append, 1, **options)
    assert calls == []


def test_metrics_refuse_bad_arguments_in_one_line(panda):
    """What torch would meet with a message naming no argument (or an AttributeError for a
    list) is refused first, naming the argument."""
    q = panda.random_configuration(4, torch.Generator().manual_seed(0))
    pose = panda.forward_kinematics(q, "panda_hand")
    samples = q.view(2, 2, 7)
    cases = [
        (
            lambda: m.position_error(panda, q.tolist(), pose[:, :3, 3], "panda_hand"),
            TypeError,
            r"^q must be a torch.Tensor, got list",
        ),
        (lambda: m.position_error(panda, q, pose[:2, None, :3, 3], "panda_hand"), None, None),
        (
            lambda: m.position_error(panda, q, pose[:2, :3, 3], "panda_hand"),
            ValueError,
            r"q's batch shape \(4,\) and target_pos's \(2,\) do not broadcast",
        ),
        (lambda: m.position_error(panda, q, pose[:, :3, 3], None), TypeError, "a link is named"),
        (
            lambda: m.position_error(panda, q, pose[:, :4, 3], "panda_hand"),
            ValueError,
            r"target_pos must have shape \(\.\.\., 3\) or \(\.\.\., 2\)",
        ),
        (
            lambda: m.rotation_error(panda, q[:, :6], pose[:, :3, :3], "panda_hand"),
            ValueError,
            r"q must have shape \(\.\.\., 7\)",
        ),
        (
            lambda: m.rotation_error(panda, q, pose[:, :3, :3].to("meta"), "panda_hand"),
            ValueError,
            "target_rot is on the meta device",
        ),
        (lambda: m.accuracy(None, 0.1), TypeError, "errors must be a torch.Tensor"),
        (lambda: m.accuracy(q, math.nan), ValueError, "threshold"),
        (
            lambda: m.limit_violations(q, panda.lower[:3], panda.upper),
            ValueError,
            r"lower must have shape \(7,\), got \(3,\)",
        ),
        (lambda: m.limit_violations(q, panda.lower, panda.upper, tol=-1.0), ValueError, "tol"),
        (lambda: m.mean_pairwise_distance(q[0]), ValueError, "2 dimensions at least"),
        (
            lambda: m.mean_pairwise_distance(samples, panda.lower),
            TypeError,
            "continuous must be a torch.bool tensor",
        ),
        (lambda: m.best_of_n(torch.zeros(()), 1), ValueError, "1 dimensions at least"),
        (lambda: m.best_of_n(torch.zeros(3), 1.5), TypeError, "n must be an int"),
        (lambda: m.mmd(samples, samples, 3), TypeError, "bandwidths must be a non-empty tuple"),
        (lambda: m.mmd(samples, samples, (-0.1,)), ValueError, "bandwidth"),
        (lambda: m.mmd("x", samples), TypeError, "x must be a torch.Tensor"),
        (lambda: m.mmd(samples[:, :0], samples), ValueError, "a sample each at least, got 0"),
        (
            lambda: m.resimulation_error(lambda x: x[..., :3], samples, q[:3, :3]),
            ValueError,
            "do not broadcast",
        ),
        (
            lambda: m.resimulation_error(lambda x: x[..., :3], samples, q[:2]),
            ValueError,
            r"targets must have shape \(\.\.\., 3\)",
        ),
        (lambda: m.convex_hull_area(torch.zeros(3, 3)), ValueError, r"\(\.\.\., \*, 2\)"),
        (lambda: m.convex_hull_area(torch.zeros(5, 2), torch.tensor(1.0)), TypeError, "percentile"),
        (lambda: m.convex_hull_area(torch.zeros(5, 2), 0.0), ValueError, "percentile"),
    ]
    for call, error, match in cases:
        if error is None:
            call()  # broadcasts
            continue
        with pytest.raises(error, match=match) as caught:
            call()
        assert "\n" not in str(caught.value)
    assert m.convex_hull_area(torch.zeros(2, 0, 2)).tolist() == [0.0, 0.0]  # no points


def test_convex_hull_area_checks_its_arguments_before_importing_scipy(monkeypatch):
    """A bad argument was refused only after SciPy's import (0.45 s on a first call; the API
    fuzzer's slowest refusal)."""
    import sys

    monkeypatch.setitem(sys.modules, "scipy.spatial", None)  # importing it now fails
    with pytest.raises(TypeError, match="points must be a torch.Tensor"):
        m.convex_hull_area("q")
    with pytest.raises(ValueError, match="percentile"):
        m.convex_hull_area(torch.zeros(4, 2, dtype=torch.float64), percentile=0.0)
    with pytest.raises(ImportError):  # good arguments reach the import
        m.convex_hull_area(torch.zeros(4, 2, dtype=torch.float64))
