"""The flow-matching family: its config, its joint spaces and solver, and a short CPU training
that reaches the 2-joint snake's targets with both elbow modes."""

from __future__ import annotations

import math

import pytest
import torch

from tests.models.snake_ring import trained_ring_samples
from torchik import load_robot
from torchik.learn import ProblemSpec
from torchik.models import FlowMatching, FMConfig
from torchik.models.fm import VelocityNet


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _model(robot: str = "panda", **config) -> FlowMatching:
    torch.manual_seed(0)
    spec = ProblemSpec.from_robot(load_robot(robot))
    return FlowMatching(spec, FMConfig(width=16, blocks=1, embedding=8, **config))


@pytest.mark.parametrize(
    "bad",
    [{"width": 0}, {"blocks": 0}, {"steps": 0}, {"embedding": 7}, {"space": "angles"},
     {"solver": "rk4"}, {"activation": "sigmoid"}, {"time_power": 0.0},
     {"time_power": float("inf")}],
)  # fmt: skip
def test_config_is_validated(bad):
    with pytest.raises(ValueError):
        FMConfig(**bad)


@pytest.mark.parametrize(("robot", "space", "size"), [
    ("panda", "logit", 7), ("panda", "features", 7), ("snake2", "features", 4),
    ("snake2", "logit", 2),
])  # fmt: skip
def test_spaces_round_trip(robot, space, size):
    model = _model(robot, space=space).double()
    span = model.upper - model.lower
    q = model.lower + span * torch.rand(50, model.spec.dof, dtype=torch.float64)
    x = model.encode(q)
    assert model.size == size and x.shape == (50, size)
    torch.testing.assert_close(model.decode(x), q)


def test_logit_space_has_about_unit_scale():
    model = _model(space="logit")
    q = model.lower + (model.upper - model.lower) * torch.rand(20000, 7, generator=_gen(0))
    std = model.encode(q).std(0)
    assert ((std > 0.9) & (std < 1.1)).all(), std


def test_integrate_steps_and_solvers():
    """A constant field moves noise by exactly ``v``; more steps change a learned field's end."""
    model = _model().eval()
    x, context = torch.randn(6, 7, generator=_gen(1)), torch.zeros(6, 3)
    with torch.no_grad():
        model.net.head[1].weight.zero_()
        model.net.head[1].bias.fill_(0.5)
        torch.testing.assert_close(model.integrate(x, context, steps=3), x + 0.5)
    euler = _model(solver="euler").eval()
    with torch.no_grad():
        a = euler.integrate(x, context, steps=1)
        torch.testing.assert_close(a, x + euler.net(x, torch.zeros(6, 1), context))
        assert not torch.equal(
            euler.sample(context[:2], 3, _gen(2), steps=2),
            euler.sample(context[:2], 3, _gen(2), steps=5),
        )
    with pytest.raises(ValueError, match="steps"):
        model.integrate(x, context, steps=0)


def test_time_power_shifts_training_times():
    model, q = _model(), torch.zeros(4096, 7)
    seen = []
    model.net.register_forward_hook(lambda net, inputs, out: seen.append(inputs[1]))
    for power in (1.0, 3.0):
        model.config = FMConfig(width=16, blocks=1, time_power=power)
        model.loss(q, torch.zeros(4096, 3))
    assert abs(seen[0].mean() - 0.5) < 0.02 and abs(seen[1].mean() - 0.75) < 0.02


def test_velocity_net_time_features_are_not_saved():
    net = VelocityNet(size=2, context=3, width=8, blocks=2, embedding=6)
    assert net.frequencies.shape == (3,) and "frequencies" not in net.state_dict()
    torch.testing.assert_close(net.frequencies[[0, -1]], torch.tensor([1.0, 100.0]))


@pytest.mark.slow
def test_snake2_finds_both_elbow_modes():
    """About 5 s on one core. Measured: median end-point error 2.7 mm (bound 6 mm; 6.5 mm
    with uniform training times, ``time_power=1``), each target's lowest share of accurate
    samples in one elbow mode 31 % (bound 10 %)."""

    def make(spec):
        return FlowMatching(spec, FMConfig(width=64, blocks=2))

    model, q, error = trained_ring_samples(make, steps=600)
    assert ((q >= model.lower) & (q <= model.upper)).all()
    assert error.median() < 0.006, error.median()
    elbow = torch.remainder(q[..., 1] + math.pi, 2 * math.pi) - math.pi
    ok = error < 0.02  # 2 cm on an arm of reach 0.2 m
    up, down = (ok & (elbow > 0)).float().mean(-1), (ok & (elbow < 0)).float().mean(-1)
    assert up.min() >= 0.10 and down.min() >= 0.10, (up, down)
