"""Fitting a training to a time budget: the speed of the real loop, measured on copies."""

from __future__ import annotations

import time

import pytest
import torch

from torchik import load_robot
from torchik.learn import FKStream, make_dataset
from torchik.models import MLP, MLPConfig
from torchik.train import TrainConfig, steps_for_minutes, steps_per_second

CONFIG = TrainConfig(steps=100, batch_size=32, progress=False, val_every=10, log_every=5)


def _model_and_data():
    robot = load_robot("snake2", dtype=torch.float64)
    data = make_dataset(robot, 200, seed=0)
    torch.manual_seed(0)
    return MLP(data.spec, MLPConfig(depth=1, width=16)).double(), data


def test_steps_per_second_measures_a_copy():
    model, data = _model_and_data()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    q_before = data.q.clone()
    rate = steps_per_second(model, data, CONFIG, seconds=0.05)
    assert 1.0 < rate < 1e6
    for k, v in model.state_dict().items():  # the model given did not train
        assert torch.equal(v, before[k]), k
    assert torch.equal(data.q, q_before)


def test_steps_per_second_on_a_stream():
    robot = load_robot("snake2")
    stream = FKStream(robot, seed=0)
    torch.manual_seed(0)
    model = MLP(stream.spec, MLPConfig(depth=1, width=16))
    assert steps_per_second(model, stream, CONFIG, seconds=0.05) > 1.0


def test_steps_for_minutes_scales_with_the_budget():
    model, data = _model_and_data()
    short = steps_for_minutes(model, data, CONFIG, minutes=0.005, min_steps=1)
    long = steps_for_minutes(model, data, CONFIG, minutes=0.05, min_steps=1)
    assert long > 3 * short > 0
    assert steps_for_minutes(model, data, CONFIG, minutes=0.001, min_steps=10**6) == 10**6


def test_steps_for_minutes_counts_from_started():
    model, data = _model_and_data()
    spent = time.perf_counter() - 120.0  # the budget of 1 minute already spent
    assert steps_for_minutes(model, data, CONFIG, minutes=1.0, started=spent, min_steps=7) == 7


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m, d: steps_per_second(m, d, CONFIG, seconds=0), "seconds must be positive"),
        (lambda m, d: steps_for_minutes(m, d, CONFIG, minutes=-1), "minutes must be positive"),
    ],
)
def test_bad_budgets(call, match):
    model, data = _model_and_data()
    with pytest.raises(ValueError, match=match):
        call(model, data)
