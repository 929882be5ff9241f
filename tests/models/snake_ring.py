"""A shared trained-accuracy protocol of the tests: a model trained briefly on 2-joint snake
positions, then sampled on 24 targets spread over the reachable annulus (two elbow modes each)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from torchik import load_robot
from torchik.learn import make_dataset
from torchik.train import TrainConfig, train


def trained_ring_samples(make_model: Callable, steps: int) -> tuple:
    """``make_model(spec)`` (built after ``torch.manual_seed(0)``) trained ``steps`` steps on
    10 000 snake2 position pairs (batch 512, lr 3e-3); returns the trained model, its 100
    samples for each of the 24 ring targets ``q (24, 100, 2)``, and their end-point errors
    ``(24, 100)`` in metres."""
    robot = load_robot("snake2")
    data = make_dataset(robot, 10000, targets="position", seed=0)
    torch.manual_seed(0)
    model = make_model(data.spec)
    config = TrainConfig(
        steps=steps, batch_size=512, lr=3e-3, warmup_steps=20, grad_clip=None, progress=False
    )
    model = train(model, data, config=config).model
    angle, radius = torch.linspace(-3.0, 3.0, 24), torch.linspace(0.04, 0.18, 24)
    target = torch.stack((radius * angle.cos(), radius * angle.sin(), 0 * angle), dim=-1)
    with torch.no_grad():
        q = model.sample(target, 100, generator=torch.Generator().manual_seed(1))
    error = (robot.link_positions(q, "ee") - target[:, None]).norm(dim=-1)
    return model, q, error
