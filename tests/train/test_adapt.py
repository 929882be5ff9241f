"""Perturbed robots, calibration of link origins and few-shot fine-tuning."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from torchik import load_robot, make_dataset
from torchik.learn import robot_hash
from torchik.models import IKNet, IKNetConfig
from torchik.seq2seq import make_sequence_dataset
from torchik.train import (
    FINETUNE_CONFIG,
    TrainConfig,
    calibrate,
    family_dataset,
    finetune,
    perturbed_robot,
    train,
    with_origins,
)

F64 = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("name", ["digit_arm", "panda"])
def test_perturbed_robot_changes_lengths_by_at_most_the_scale(name):
    robot = load_robot(name, dtype=F64)
    other = perturbed_robot(robot, 0.2, _gen(1))
    length, new = robot.origin_xyz.norm(dim=-1), other.origin_xyz.norm(dim=-1)
    moved = length > 0
    ratio = new[moved] / length[moved]
    assert ((ratio >= 0.8 - 1e-12) & (ratio <= 1.2 + 1e-12)).all()
    assert (ratio - 1).abs().max() > 0.05  # it did change something
    # directions and rotations are kept, the description (and hash) names the new geometry
    cosine = (
        (robot.origin_xyz[moved] * other.origin_xyz[moved]).sum(-1) / length[moved] / new[moved]
    )
    torch.testing.assert_close(cosine, torch.ones_like(cosine))
    torch.testing.assert_close(other.origin_rpy, robot.origin_rpy)
    assert robot_hash(other) != robot_hash(robot)
    assert perturbed_robot(robot, 0.0, _gen(1)).origin_xyz.equal(robot.origin_xyz)
    with pytest.raises(ValueError, match="scale"):
        perturbed_robot(robot, 1.5)


def test_family_dataset_draws_each_chunk_from_its_own_perturbed_arm():
    arm = load_robot("planar", link_lengths=[0.5, 0.3], dtype=F64)
    data = family_dataset(arm, 250, per_arm=100, scale=0.2, seed=3, targets="planar")
    assert len(data) == 250 and data.meta["family"]["arms"] == 3
    assert data.spec == make_dataset(arm, 1, targets="planar").spec  # the nominal robot's spec
    # each chunk's targets are FK of its own arm: rebuild the arms from the same draws
    gen, lengths = _gen(3), []
    for start in range(0, 250, 100):
        true = perturbed_robot(arm, 0.2, gen)
        torch.randint(2**62, (1,), generator=gen)  # the chunk's sampling seed
        chunk = slice(start, start + 100)
        fk = true.link_positions(data.q[chunk].double(), "ee")[:, :2]
        torch.testing.assert_close(fk.float(), data.target[chunk], atol=1e-6, rtol=0)
        lengths.append(true.origin_xyz.norm(dim=-1))
    assert not torch.allclose(lengths[0], lengths[1])
    nominal = arm.link_positions(data.q[:100].double(), "ee")[:, :2].float()
    assert (nominal - data.target[:100]).abs().max() > 1e-3
    assert family_dataset(arm, 250, 100, seed=3, targets="planar").q.equal(data.q)  # seeded
    with pytest.raises(ValueError, match="per_arm"):
        family_dataset(arm, 10, per_arm=0)


def test_calibration_recovers_perturbed_planar_link_lengths():
    lengths = [0.5, 0.3, 0.2]
    arm = load_robot("planar", link_lengths=lengths, dtype=F64)
    true = perturbed_robot(arm, 0.2, _gen(2))
    q = true.random_configuration(200, _gen(3))
    fit = calibrate(arm, q, true.link_positions(q, "ee"), "ee")
    assert fit.residual_before > 1e-3 and fit.residual_after < 1e-8
    # joint_2, joint_3 and the tool joint carry the three lengths
    assert (fit.robot.origin_xyz - true.origin_xyz).abs().max() < 1e-4
    assert fit.robot.dtype == F64 and not fit.robot.learnable


def test_calibration_with_noise_fits_the_digit_arm():
    arm = load_robot("digit_arm", dtype=F64)
    true = perturbed_robot(arm, 0.2, _gen(4))
    q = true.random_configuration(300, _gen(5))
    noisy = true.link_positions(q, "left_hand") + 1e-3 * torch.randn(300, 3, generator=_gen(6))
    fit = calibrate(arm, q, noisy, "left_hand", fit_rotations=True)
    assert fit.residual_after < 1.7e-3 < 0.01 < fit.residual_before


def test_finetune_reduces_the_loss_on_the_new_robot():
    arm = load_robot("planar", link_lengths=[0.5, 0.3], dtype=F64)
    data_a = make_dataset(arm, 4000, targets="planar", seed=0)
    torch.manual_seed(0)
    model = IKNet(data_a.spec, IKNetConfig.small(components=4, hyper_width=64))
    config = TrainConfig(steps=150, batch_size=256, lr=3e-3, warmup_steps=10, progress=False)
    model = train(model, data_a, config=config).model
    other = perturbed_robot(arm, 0.2, _gen(7))
    data_b = make_dataset(other, 1000, targets="planar", seed=1)
    test_b = make_dataset(other, 1000, targets="planar", seed=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        loss_before = model.loss(test_b.q, test_b.target).item()
    config_b = dataclasses.replace(FINETUNE_CONFIG, steps=150, progress=False)
    tuned = finetune(model, data_b, config_b).model
    with torch.no_grad():
        loss_after = tuned.loss(test_b.q, test_b.target).item()
    assert loss_after < loss_before - 0.1
    assert tuned.spec == data_b.spec and tuned is not model
    assert all(v.equal(model.state_dict()[k]) for k, v in before.items())  # input untouched
    with pytest.raises(ValueError, match="differ"):
        finetune(model, make_dataset(load_robot("snake4"), 300, targets="planar"))


def test_finetune_keeps_the_models_normalisation_and_takes_float64_data():
    """Whatever ``config.normalize`` says (the guide passes a plain TrainConfig), fine-tuning
    keeps the normalisation the weights were learned with: at lr 0 the model is unchanged.
    Data of the robot in float64 fits a model of it in float32 (the specs' limits agree)."""
    arm = load_robot("planar", link_lengths=[0.5, 0.3])
    data = make_dataset(arm, 600, targets="planar", seed=0)
    torch.manual_seed(0)
    model = IKNet(data.spec, IKNetConfig.small(components=2, hyper_width=16))
    model = train(model, data, config=TrainConfig(steps=3, batch_size=64, progress=False)).model
    few = make_dataset(perturbed_robot(arm, 0.2, _gen(3)), 50, targets="planar", seed=1)
    config = TrainConfig(steps=1, batch_size=64, lr=1e-30, warmup_steps=0, progress=False)
    tuned = finetune(model, few, config).model
    for name in ("target_mean", "target_std", "q_mean", "q_std"):
        assert torch.equal(getattr(tuned, name), getattr(model, name)), name
    arm64 = load_robot("planar", link_lengths=[0.5, 0.3], dtype=F64)
    data64 = make_dataset(arm64, 100, targets="planar", seed=2)
    assert data64.spec == data.spec
    finetune(model, data64, dataclasses.replace(config, steps=1))
    train(model, data64, config=config)


def test_adapt_functions_refuse_bad_arguments_in_one_line():
    """Checked before torch meets them: a seed that is not an int (manual_seed's RuntimeError
    before), a string generator (torch's multi-line message), origins of other shapes, a list
    of configurations, no link."""
    robot = load_robot("planar", link_lengths=[0.5, 0.3], dtype=F64)
    q = robot.random_configuration(4, _gen())
    measured = robot.link_positions(q, "ee")
    joints = len(robot.model.joints)
    cases = [
        (lambda: perturbed_robot(robot, 0.1, "3"), TypeError, "generator"),
        (lambda: perturbed_robot(robot, 1.0), ValueError, r"scale must be in \[0, 1\)"),
        (lambda: perturbed_robot(robot, "0.1"), TypeError, "scale"),
        (
            lambda: with_origins(robot, torch.zeros(joints + 1, 3, dtype=F64)),
            ValueError,
            rf"xyz must be \({joints}, 3\)",
        ),
        (lambda: with_origins(robot, "q"), TypeError, "xyz must be a torch.Tensor"),
        (lambda: family_dataset(robot, 4, seed="3"), TypeError, "seed must be an int"),
        (lambda: family_dataset(robot, 4, per_arm=0), ValueError, "per_arm must be >= 1"),
        (lambda: family_dataset(robot, 10**9), ValueError, r"n must be <= 268435456"),
        (lambda: with_origins(robot, None), TypeError, "xyz must be a torch.Tensor"),
        (lambda: calibrate(robot, None, measured, "ee"), TypeError, "q must be a torch.Tensor"),
        (lambda: calibrate(robot, q, measured[:2], "ee"), ValueError, r"measured \(N, 3\)"),
        (lambda: calibrate(robot, q, measured, None), TypeError, "a link is named"),
        (lambda: calibrate(robot, q, measured, "ee", steps=0), ValueError, "steps"),
        (lambda: make_sequence_dataset(robot, 2, 4, seed=1e300), TypeError, "seed must be an int"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match) as caught:
            call()
        assert "\n" not in str(caught.value)
