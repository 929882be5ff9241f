"""The posterior table (experiments.posterior) on a two-link planar arm (float64 truth)."""

from __future__ import annotations

import pytest
import torch

from experiments.posterior import (
    PosteriorTable,
    posterior_metrics,
    posterior_table,
    posterior_truth,
)
from torchik import PlanarArm


@pytest.fixture(scope="module")
def truth():
    return posterior_truth(PlanarArm(2), [0.2, 0.2], n_targets=3, n_samples=60, radius=0.02)


class Replay:
    """A stand-in model drawing the given samples."""

    def __init__(self, samples):
        self.samples = samples

    def sample(self, target, n, generator=None):
        return self.samples[: len(target), :n]


def test_truth_holds_two_draws_per_target(truth):
    assert truth.n == 60 and truth.samples.samples.shape == (3, 120, 2)
    assert truth.info["accepted"] == 120 and truth.info["complete"] == 1.0
    assert truth.info["radius_median"] == pytest.approx(0.02) and truth.info["seconds"] > 0
    ends = PlanarArm(2)(truth.samples.samples)
    radius = truth.samples.radius[:, None]
    assert ((ends - truth.samples.targets[:, None]).norm(dim=-1) <= radius + 1e-6).all()


def test_samples_against_themselves_have_no_mismatch(truth):
    ref = truth.samples.samples[:, :60]
    m = posterior_metrics(PlanarArm(2), ref, ref, truth.samples.targets)
    assert m["mmd"] == pytest.approx(0.0, abs=1e-6)
    assert m["resim"] <= 0.02**2 * 4  # within the widest acceptance radius
    assert m["diversity"] > 0 and m["hull"] >= 0


def test_a_model_replaying_the_second_draw_is_the_floor(truth):
    second = truth.samples.samples[:, 60:]
    table = posterior_table(PlanarArm(2), {"replay": Replay(second), "prior": None}, truth=truth)
    assert isinstance(table, PosteriorTable) and table.truth is truth.info
    assert list(table.rows) == ["ground truth (2nd draw)", "replay", "prior"]
    assert table.rows["replay"] == table.rows["ground truth (2nd draw)"]
    assert table.rows["prior"]["mmd"] > 10 * table.rows["replay"]["mmd"]
    assert table.rows["prior"]["resim"] > 100 * table.rows["replay"]["resim"]
    assert "| prior |" in table.markdown()


def test_the_truth_is_made_when_not_given():
    table = posterior_table(PlanarArm(2), {}, [0.2, 0.2], n_targets=2, n_samples=20)
    assert table.truth["targets"] == 2 and list(table.rows) == ["ground truth (2nd draw)"]
    with pytest.raises(ValueError, match="prior_std"):
        posterior_table(PlanarArm(2), {})
    assert torch.isfinite(torch.tensor(list(table.rows["ground truth (2nd draw)"].values()))).all()
