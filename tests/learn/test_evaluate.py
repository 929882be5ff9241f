"""The evaluation protocol against closed forms (float64): a two-link planar arm of unit links,
whose hand is at ``(cos a + cos(a + b), sin a + sin(a + b))``, and the Panda for pose targets."""

from __future__ import annotations

import math

import pytest
import torch

from torchik import load_robot
from torchik.learn import (
    ProblemSpec,
    SampleReport,
    encode_target,
    evaluate_model,
    evaluate_sampler,
    evaluate_samples,
    sample_errors,
)
from torchik.models import load_pretrained

F64 = torch.float64


@pytest.fixture(scope="module")
def arm():
    robot = load_robot("planar", link_lengths=[1.0, 1.0], dtype=F64)
    return robot, ProblemSpec.from_robot(robot, "ee", targets="planar")


def _hand(q: torch.Tensor) -> torch.Tensor:
    a, b = q[..., 0], q[..., 1]
    return torch.stack((a.cos() + (a + b).cos(), a.sin() + (a + b).sin()), dim=-1)


def _configs(n: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 2, generator=torch.Generator().manual_seed(seed), dtype=F64) * 4 - 2


def test_samples_at_their_targets_have_no_error(arm):
    robot, spec = arm
    q = _configs(6)
    samples = q[:, None].expand(6, 4, 2)
    report = evaluate_samples(robot, samples, _hand(q), spec)
    assert isinstance(report, SampleReport)
    assert (report.targets, report.samples_per_target) == (6, 4)
    assert report.position_mean < 1e-12 and report.position_median < 1e-12
    assert report.accuracy == {0.001: 1.0, 0.005: 1.0, 0.01: 1.0}
    assert report.best_of[4] < 1e-12 and report.rotation_mean is None
    assert report.diversity == 0.0  # identical samples
    assert report.outside_limits == 0 and report.fraction_within_limits == 1.0
    assert report.seconds is None


def test_a_known_offset_is_that_distance(arm):
    robot, spec = arm
    q = _configs(5, seed=1)
    target = _hand(q) + torch.tensor([0.03, 0.04], dtype=F64)  # 5 cm away
    report = evaluate_samples(robot, q[:, None], target, spec, thresholds=(0.1, 0.01))
    assert report.position_mean == pytest.approx(0.05, abs=1e-12)
    assert report.position_median == pytest.approx(0.05, abs=1e-12)
    assert report.position_std == pytest.approx(0.0, abs=1e-12)
    assert report.accuracy == {0.1: 1.0, 0.01: 0.0}
    assert report.best_of[1] == pytest.approx(0.05, abs=1e-12)


def test_one_sample_of_one_target_has_a_std_of_0_without_a_warning(arm):
    """``torchik eval --data one.pt -n 1`` printed torch's "std(): degrees of freedom is <= 0"
    (and the std was NaN)."""
    import warnings

    robot, spec = arm
    q = _configs(1, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = evaluate_samples(robot, q[:, None], _hand(q) + 0.01, spec)
    assert report.position_std == 0.0 and report.position_mean == pytest.approx(0.01 * 2**0.5)


def test_best_of_and_diversity_of_two_samples(arm):
    robot, spec = arm
    q = _configs(3, seed=2)
    far = q + torch.tensor([0.3, 0.4], dtype=F64)  # 0.5 rad from q in joint space
    samples = torch.stack((far, q), dim=1)  # the exact one second
    report = evaluate_samples(robot, samples, _hand(q), spec, best_of=(1, 2, 5))
    expected_first = (_hand(far) - _hand(q)).norm(dim=-1).mean().item()
    assert report.best_of[1] == pytest.approx(expected_first, abs=1e-12)
    assert report.best_of[2] < 1e-12 and 5 not in report.best_of  # more than N: left out
    assert report.diversity == pytest.approx(0.5, abs=1e-12)


def test_diversity_wraps_the_chosen_joints(arm):
    robot, spec = arm
    q = torch.tensor([[[3.1, 0.0], [-3.1, 0.0]]], dtype=F64)
    target = _hand(q[:, 0])
    plain = evaluate_samples(robot, q, target, spec)
    wrapped = evaluate_samples(robot, q, target, spec, wrap=torch.tensor([True, False]))
    assert plain.diversity == pytest.approx(6.2, abs=1e-12)
    assert wrapped.diversity == pytest.approx(2 * math.pi - 6.2, abs=1e-12)


def test_limit_violations_are_counted():
    robot = load_robot("panda", dtype=F64)
    spec = ProblemSpec.from_robot(robot, "panda_hand")
    q = robot.random_configuration(4, torch.Generator().manual_seed(3))
    samples = q[:, None].repeat(1, 3, 1)
    samples[0, 0, 3] = robot.upper[3] + 0.1  # outside
    samples[1, 2, 0] = robot.upper[0] + 1e-6  # within the default slack
    samples[2, 1, 0] = robot.lower[0] - 1e-4  # outside
    target = robot.link_positions(q, "panda_hand")
    report = evaluate_samples(robot, samples, target, spec)
    assert report.outside_limits == 2
    assert report.fraction_outside_limits == pytest.approx(2 / 12)
    assert report.fraction_within_limits == pytest.approx(10 / 12)
    strict = evaluate_samples(robot, samples, target, spec, limit_tol=0.0)
    assert strict.outside_limits == 3


def test_pose_targets_have_rotation_errors():
    robot = load_robot("panda", dtype=F64)
    spec = ProblemSpec.from_robot(robot, "panda_hand", targets="pose")
    q = robot.random_configuration(3, torch.Generator().manual_seed(4))
    target = encode_target(robot.forward_kinematics(q, "panda_hand"), "pose")
    position, rotation = sample_errors(robot, q[:, None], target, spec)
    assert position.shape == rotation.shape == (3, 1)
    assert rotation.max() < 1e-6
    report = evaluate_samples(robot, q[:, None], target, spec)
    assert report.rotation_mean < 1e-6 and report.rotation_median < 1e-6


def test_a_plain_callable_is_a_sampler(arm):
    robot, spec = arm
    q = _configs(4, seed=5)

    def sampler(targets: torch.Tensor) -> torch.Tensor:  # a perfect solver, 1 solution each
        return q[:, None].float()

    report = evaluate_sampler(sampler, _hand(q), robot, spec)
    assert report.samples_per_target == 1 and report.position_mean < 1e-6
    assert report.seconds is not None and report.seconds >= 0


def test_evaluate_model_is_seeded_and_matches_its_samples():
    model = load_pretrained("snake2")
    robot = load_robot("snake2", dtype=F64)
    targets = robot.link_positions(robot.random_configuration(5), model.spec.link).float()
    report = evaluate_model(model, targets, robot, n=6, seed=7)
    again = evaluate_model(model, targets, robot, n=6, seed=7)
    assert report.position_mean == again.position_mean and report.seconds is not None
    samples = model.sample(targets, 6, generator=torch.Generator().manual_seed(7)).double()
    direct = evaluate_samples(robot, samples, targets, model.spec)
    assert report.position_mean == direct.position_mean
    assert report.diversity == direct.diversity and report.best_of == direct.best_of


def test_shapes_are_checked(arm):
    robot, spec = arm
    with pytest.raises(ValueError, match="samples"):
        evaluate_samples(robot, torch.zeros(3, 2, dtype=F64), torch.zeros(3, 2), spec)
    with pytest.raises(ValueError, match="samples"):
        evaluate_samples(robot, torch.zeros(3, 1, 2, dtype=F64), torch.zeros(2, 2), spec)


def test_evaluate_model_refuses_bad_arguments_in_one_line():
    """Targets, ``n`` and ``seed`` are checked before torch meets them (a tuple seed said
    "manual_seed expected a long", meta targets "Cannot copy out of meta tensor", a str an
    AttributeError)."""
    model = load_pretrained("snake2")
    robot = load_robot("snake2", dtype=F64)
    targets = robot.link_positions(robot.random_configuration(2), model.spec.link).float()
    cases = [
        ({"seed": (1.0, 2.0, 3.0)}, TypeError, "seed must be an int, got tuple"),
        ({"seed": 2**64}, ValueError, "seed must be <="),
        ({"targets": targets.to("meta")}, ValueError, "targets is on the meta device"),
        ({"targets": "q"}, TypeError, "targets must be a torch.Tensor, got str"),
        ({"targets": targets[0]}, ValueError, r"targets must have shape \(B, 3\), got \(3,\)"),
        ({"targets": targets[:, :2]}, ValueError, r"targets must have shape \(\.\.\., 3\)"),
        ({"targets": targets.long()}, TypeError, "floating-point"),
        ({"n": -math.inf}, TypeError, "n must be an int, got float -inf"),
        ({"n": 0}, ValueError, "n must be >= 1"),
        ({"n": 1 << 21}, ValueError, "n must be <= 1048576"),
        ({"sample_options": [1]}, TypeError, "sample_options must be a mapping"),
    ]
    for bad, error, match in cases:
        with pytest.raises(error, match=match) as caught:
            evaluate_model(model, **{"targets": targets, "robot": robot, "n": 2, **bad})
        assert "\n" not in str(caught.value)
    report = evaluate_model(model, targets.double(), robot, n=2, seed=-1)  # as manual_seed takes
    assert report.targets == 2 and report.samples_per_target == 2
