"""torchik.models.pipeline: a model's samples and their refinement in one call, slot for slot
what ``model.sample`` and ``refine_samples`` give apart; the model is checked against the robot."""

from __future__ import annotations

import math

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


def _refused(call, error, match):
    """``call()`` raises ``error`` matching ``match``, its message one line."""
    with pytest.raises(error, match=match) as caught:
        call()
    assert "\n" not in str(caught.value)


def test_bad_arguments_are_refused_in_one_line_naming_them(panda, model):
    """Targets, counts and settings are checked before the model or torch meet them (a meta
    target said "Cannot copy out of meta tensor", None an AttributeError, a (2,) position
    "The expanded size of the tensor (3) must match", count=inf an OverflowError)."""
    from torchik.models import solutions_with_model

    position_model, pose = load_pretrained("panda_position"), _poses(panda, 1, 5)[0]
    position = pose[:3, 3]
    cases = [
        (lambda: solve_with_model(panda, model, torch.zeros(4, 4, device="meta"), 2),
         ValueError, "target is on the meta device"),
        (lambda: solve_with_model(panda, model, None, 2), TypeError, "target must be a torch"),
        (lambda: solve_with_model(panda, model, [[0.0] * 4] * 4, 2), TypeError, "target must be"),
        (lambda: solve_with_model(panda, position_model, position[:2], 2, position_only=True),
         ValueError, r"target must have shape \(\.\.\., 3\), got \(2,\)"),
        (lambda: solve_with_model(panda, model, pose[:3], 2), ValueError, r"\(\.\.\., 4, 4\)"),
        (lambda: solve_with_model(panda, model, pose.long(), 2), TypeError, "floating-point"),
        (lambda: solve_with_model(panda, model, pose, 0), ValueError, "n must be >= 1"),
        (lambda: solve_with_model(panda, model, pose, 2.0), TypeError, "n must be an int"),
        (lambda: solve_with_model(panda, model, pose, 2, generator=3), TypeError, "generator"),
        (lambda: solve_with_model(panda, model, pose, 2, position_only="yes"), TypeError,
         "position_only must be True or False"),
        (lambda: solve_with_model(panda, model, pose, 2, sample_options=[1]), TypeError,
         "sample_options must be a mapping"),
        (lambda: solutions_with_model(panda, model, None, 5), TypeError, "target must be"),
        (lambda: solutions_with_model(panda, model, pose, math.inf), TypeError,
         "count must be an int, got float inf"),
        (lambda: solutions_with_model(panda, model, pose, 5, rounds=(1.0, 2.0, 3.0)), TypeError,
         "rounds must be an int"),
        (lambda: solutions_with_model(panda, model, pose, 5, rounds=1000), ValueError,
         "rounds must be <= 100"),
        (lambda: solutions_with_model(panda, model, pose, 5, margin=math.nan), ValueError,
         "margin must be finite"),
        (lambda: solutions_with_model(panda, model, pose, 1 << 20), ValueError,
         "count must be <= 524288"),
        (lambda: solutions_with_model(panda, model, pose, 100_000, margin=100.0), ValueError,
         r"count \* \(1 \+ margin\) must be <= 1048576"),
    ]  # fmt: skip
    for call, error, match in cases:
        _refused(call, error, match)
