"""The small IKNet of the application protocols (experiments.small_iknet)."""

from __future__ import annotations

import pytest
import torch

import torchik
from experiments.small_iknet import load_or_train_iknet, train_small_iknet
from torchik.models import IKNet, IKNetConfig


@pytest.fixture(scope="module")
def snake():
    return torchik.load_robot("snake2")


def test_recipe_is_seeded_and_caps_the_batch(snake):
    data = torchik.make_dataset(snake, 100, seed=0)  # fewer pairs than a batch of 256
    a, b = (train_small_iknet(data, steps=3, warmup_steps=1) for _ in range(2))
    assert isinstance(a.model, IKNet) and a.steps == 3 and a.seconds > 0
    assert a.model.config == IKNetConfig.small()
    for pa, pb in zip(a.model.parameters(), b.model.parameters(), strict=True):
        assert torch.equal(pa, pb)


def test_trains_where_the_bundled_model_is_no_iknet_and_loads_a_checkpoint(snake, tmp_path):
    path = tmp_path / "iknet.pt"
    model, what = load_or_train_iknet(snake, steps=2, train_size=300, save=path)  # bundled: an MDN
    assert isinstance(model, IKNet) and not model.training and "trained here" in what
    assert "300 uniform snake2 pairs, 2 steps" in what
    loaded, what = load_or_train_iknet(snake, path)
    assert "checkpoint" in what and str(path) in what
    for pa, pb in zip(model.parameters(), loaded.parameters(), strict=True):
        assert torch.equal(pa, pb)
    with pytest.raises(ValueError, match="IKNet of ur5"):
        load_or_train_iknet(torchik.load_robot("ur5"), path)
