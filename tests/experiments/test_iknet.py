"""The IKNet table (experiments.iknet) against closed forms on a two-link planar arm of unit
links (float64): turning the base joint by ``d`` moves the hand ``2 |hand| sin(d / 2)``."""

from __future__ import annotations

import math

import pytest
import torch

from experiments.iknet import (
    IKNetRow,
    iknet_metrics,
    iknet_sizes,
    iknet_table,
    iknet_test_targets,
    sampler_rows,
    training_step_seconds,
)
from torchik import load_robot
from torchik.learn import ProblemSpec

F64 = torch.float64


@pytest.fixture(scope="module")
def arm():
    robot = load_robot("planar", link_lengths=[1.0, 1.0], dtype=F64)
    return robot, ProblemSpec.from_robot(robot, "ee", targets="position")


def _truth(robot, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    q = robot.lower + (robot.upper - robot.lower) * torch.rand(n, 2, generator=gen, dtype=F64)
    return q, robot.link_positions(q, "ee")


class Oracle:
    """A stand-in model: every sample is the truth turned at the base by a fixed angle."""

    def __init__(self, spec, q, turns):
        self.spec, self.q, self.turns = spec, q, turns
        self.target_mean = torch.zeros(3, dtype=F64)

    def sample(self, target, n, generator=None, temperature=1.0):
        turn = self.turns[:n] * temperature
        return self.q[: len(target), None] + torch.stack((turn, 0 * turn), -1)


def test_exact_samples_score_zero(arm):
    robot, spec = arm
    q, targets = _truth(robot, 8)
    row = iknet_metrics(robot, q[:, None].expand(8, 12, 2).clone(), targets, spec)
    assert isinstance(row, IKNetRow) and (row.targets, row.samples) == (8, 12)
    assert row.mean_cm < 1e-10 and row.best10_cm < 1e-10 and row.diversity == 0.0
    assert row.acc_1cm == row.acc_2cm == row.acc_10cm == 1.0
    assert math.isnan(row.runtime_1_s or math.nan)


def test_base_turns_give_the_chord_lengths(arm):
    robot, spec = arm
    q, targets = _truth(robot, 16, seed=1)
    turns = torch.tensor([0.001, 0.003, 0.02, 0.2], dtype=F64)
    row = iknet_table(robot, Oracle(spec, q, turns), targets, n_samples=4, timing=False)
    chord = 2 * targets[:, :2].norm(dim=-1, keepdim=True) * (turns / 2).sin()
    assert row.mean_cm == pytest.approx(100 * chord.mean().item(), rel=1e-9)
    assert row.acc_1cm == pytest.approx((chord < 0.01).double().mean().item())
    assert row.acc_10cm == pytest.approx((chord < 0.10).double().mean().item())
    assert math.isnan(row.best10_cm)  # fewer than 10 samples
    assert row.best100_cm == pytest.approx(100 * chord.min(-1).values.mean().item(), rel=1e-9)
    assert row.diversity > 0 and row.inside_limits <= 1.0


def test_temperature_and_timing_reach_the_model(arm):
    robot, spec = arm
    q, targets = _truth(robot, 10, seed=2)
    model = Oracle(spec, q, torch.full((100,), 0.2, dtype=F64))
    hot = iknet_table(robot, model, targets, n_samples=1, timing=False)
    cold = iknet_table(robot, model, targets, n_samples=1, temperature=0.0, timing=True)
    assert cold.mean_cm < 1e-10 < hot.mean_cm
    assert cold.runtime_1_s > 0 and cold.runtime_100_s > 0
    assert math.isnan(cold.diversity) and math.isnan(cold.best100_cm)
    assert "| mean_cm |" in cold.markdown() and "runtime_1_s" in cold.markdown()


def test_default_targets_are_seeded_positions(arm):
    robot, spec = arm
    a, b = iknet_test_targets(robot, "ee", 5), iknet_test_targets(robot, "ee", 5)
    assert a.shape == (5, 3) and torch.equal(a, b)
    assert not torch.equal(a, iknet_test_targets(robot, "ee", 5, seed=0))


def test_sampler_rows_time_one_solution_per_target(arm):
    robot, spec = arm
    q, targets = _truth(robot, 6, seed=3)
    rows = sampler_rows(robot, {"exact": lambda: q.clone()}, targets, spec)
    assert rows["exact"].mean_cm < 1e-10 and rows["exact"].runtime_1_s > 0


def test_sizes_count_parameters_and_memory():
    from torchik.models import IKNet

    config = IKNet.tiny_config()
    sizes = iknet_sizes(config, batch=32, robot="snake2")
    assert sizes["config"]["primary_width"] == config.primary_width
    assert 0 < sizes["head_parameters"] < sizes["parameters"]
    assert sizes["state_mib"] == pytest.approx(16 * sizes["parameters"] / 2**20)
    assert sizes["generated_mib_per_1000"] == pytest.approx(
        sizes["generated_per_target"] * 4000 / 2**20
    )
    assert sizes["saved_mib"] > 0 and sizes["step_s"] > 0 and sizes["sample_per_target_s"] > 0


def test_a_training_step_changes_the_model(arm):
    from torchik.models import IKNet

    robot, spec = arm
    q, targets = _truth(robot, 16)
    model = IKNet(spec, IKNet.tiny_config()).double()
    before = [p.clone() for p in model.parameters()]
    assert training_step_seconds(model, q, targets, lr=1e-3, min_run_time=0.01) > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
