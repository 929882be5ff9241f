"""torchik.models.pipeline: a model's samples and their refinement in one call, slot for slot
what ``model.sample`` and ``refine_samples`` give apart; the model is checked against the robot."""

from __future__ import annotations

import pytest
import torch

from torchik import load_robot
from torchik.ik import refine_samples
from torchik.learn.data import encode_target
from torchik.models import (
    FEW_PASSES,
    check_model_fits,
    load_pretrained,
    model_targets,
    solve_with_model,
)


@pytest.fixture(scope="module")
def panda():
    return load_robot("panda", dtype=torch.float64)


@pytest.fixture(scope="module")
def model():
    return load_pretrained("panda")


def _poses(robot, n: int, seed: int) -> torch.Tensor:
    q = robot.random_configuration(n, torch.Generator().manual_seed(seed))
    return robot.forward_kinematics(q, "panda_hand")


@pytest.mark.parametrize("options", [None, {"sampler": FEW_PASSES}])
def test_samples_and_refinement_match_the_two_calls(panda, model, options):
    pose = _poses(panda, 2, 0)
    out = solve_with_model(panda, model, pose, 6, generator=torch.Generator().manual_seed(1),
                           sample_options=options, tol_rotation=0.01)  # fmt: skip
    with torch.no_grad():
        target = encode_target(pose, "pose").float()
        raw = model.sample(target, 6, torch.Generator().manual_seed(1), **(options or {}))
    assert out.samples.dtype == torch.float64 and out.samples.shape == (2, 6, 7)
    assert torch.equal(out.samples, raw.double())
    apart = refine_samples(panda, pose, raw.double(), "panda_hand", tol_rotation=0.01)
    assert torch.equal(out.result.q, apart.q) and torch.equal(out.result.success, apart.success)
    assert out.result.success.any(-1).all()
    assert out.result.position_error[out.result.success].max() <= 1e-3


def test_one_pose_gives_one_row_of_solutions(panda, model):
    out = solve_with_model(panda, model, _poses(panda, 1, 2)[0], 5, tol_rotation=0.01,
                           sample_options={"sampler": FEW_PASSES})  # fmt: skip
    assert out.samples.shape == out.result.q.shape == (5, 7)


def test_position_targets_of_a_position_model(panda):
    model = load_pretrained("panda_position")
    position = _poses(panda, 3, 3)[..., :3, 3]
    assert torch.equal(model_targets(model, position, position_only=True), position.float())
    out = solve_with_model(panda, model, position, 4, position_only=True)
    assert out.result.q.shape == (3, 4, 7) and out.result.success.any(-1).all()


def test_a_model_of_another_robot_or_link_or_target_is_refused(panda, model):
    with pytest.raises(ValueError, match="link 'panda_hand', not for this one: link 'panda_link7'"):
        check_model_fits(model, panda, "panda_link7")
    with pytest.raises(ValueError, match="is for robot 'panda'"):
        solve_with_model(load_robot("ur5", dtype=torch.float64), model, torch.eye(4), 2)
    with pytest.raises(ValueError, match="trained on full poses"):
        solve_with_model(panda, model, torch.zeros(3, dtype=torch.float64), 2, position_only=True)
    assert check_model_fits(model, panda) == "panda_hand"


def test_solutions_with_model_gathers_as_many_exact_solutions_as_asked(panda, model):
    from torchik.models import solutions_with_model

    pose = _poses(panda, 1, 4)[0]
    got = solutions_with_model(panda, model, pose, 40, generator=torch.Generator().manual_seed(0),
                               sample_options={"sampler": FEW_PASSES}, tol_rotation=0.01,
                               max_iters=3)  # fmt: skip
    assert got.q.shape == (40, 7) and got.seeds >= 42 and got.rounds >= 1
    placed = panda.forward_kinematics(got.q, "panda_hand")
    assert (placed[:, :3, 3] - pose[:3, 3]).norm(dim=-1).max() <= 1e-3
    with pytest.raises(ValueError, match=r"one target, a \(4, 4\) pose, got shape \(2, 4, 4\)"):
        solutions_with_model(panda, model, _poses(panda, 2, 5), 4)
