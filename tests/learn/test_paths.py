"""Path following: windowed sampling, follow_path, refinement and the sequential IK baseline."""

from __future__ import annotations

import math
from functools import cache

import pytest
import torch

from tests.paths import DATA
from torchik import Robot, load_robot, make_dataset
from torchik.learn import (
    PathResult,
    ProblemSpec,
    count_distinct_paths,
    follow_path,
    joint_jumps,
    make_smooth_targets,
    path_distance,
    refine_path,
    sequential_ik_path,
)
from torchik.models import IKNet, IKNetConfig
from torchik.models.mixture import JointDomain, mixture_log_prob, mixture_sample_within
from torchik.train import TrainConfig, train

F64 = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _circle_distance(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return (torch.remainder(x - c + math.pi, 2 * math.pi) - math.pi).abs()


DOMAINS = {
    "limited": (JointDomain(-1.0, 2.0, circular=False), True),
    "circular": (JointDomain(-math.pi, math.pi, circular=True), True),
    "full-turn revolute": (JointDomain(-math.pi, math.pi, circular=True), False),
}


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("name", DOMAINS)
def test_window_sampling_never_leaves_the_window_nor_the_limits(name, dtype):
    domain, wrap = DOMAINS[name]
    g, n, k = _gen(1), 4000, 5
    weights = torch.softmax(3 * torch.randn(n, k, generator=g), -1).to(dtype)
    means = (domain.lower + domain.span * torch.rand(n, k, generator=g)).to(dtype)
    scales = (0.01 + torch.rand(n, k, generator=g)).to(dtype)
    # centres anywhere, some outside the limits; radii from tiny to wider than the range
    center = (domain.lower - 0.5 + (domain.span + 1.0) * torch.rand(n, generator=g)).to(dtype)
    radius = (10 ** (-4 + 5 * torch.rand(n, generator=g))).to(dtype)
    x = mixture_sample_within(weights, means, scales, domain, center, radius, g, wrap=wrap)
    assert x.dtype == dtype and torch.isfinite(x).all()
    assert (x >= domain.lower).all() and (x <= domain.upper).all()
    if domain.circular and wrap:  # the centre is wrapped onto the circle, the window too
        dist = _circle_distance(x.double(), center.double())
        assert (dist <= radius.double() + 1e-6).all()
    else:  # the centre is clamped into the limits
        assert ((x - center.clamp(domain.lower, domain.upper)).abs() <= radius).all()


@pytest.mark.parametrize("name", DOMAINS)
def test_window_sampling_follows_the_restricted_density(name):
    domain, wrap = DOMAINS[name]
    w = torch.tensor([0.3, 0.5, 0.2], dtype=F64)
    m = torch.tensor([-0.8, 0.5, 1.9 if not domain.circular else -3.0], dtype=F64)
    s = torch.tensor([0.1, 0.3, 0.2], dtype=F64)
    c, r, n = (1.8, 0.4, 100_000) if not domain.circular else (3.0, 0.5, 100_000)
    x = mixture_sample_within(
        w.expand(n, 3), m.expand(n, 3), s.expand(n, 3), domain, torch.full((n,), c, dtype=F64),
        r, _gen(2), wrap=wrap,
    )  # fmt: skip
    lo, hi = c - r, min(c + r, domain.upper) if not (domain.circular and wrap) else c + r
    unwrapped = c + (torch.remainder(x - c + math.pi, 2 * math.pi) - math.pi)
    grid = torch.linspace(lo, hi, 4001, dtype=F64)
    density = mixture_log_prob(grid, w.expand(4001, 3), m.expand(4001, 3), s, domain).exp()
    cdf = torch.cat((grid.new_zeros(1), torch.cumulative_trapezoid(density, grid)))
    edges = torch.linspace(lo, hi, 9, dtype=F64)
    expected = torch.diff(torch.from_numpy(__import__("numpy").interp(edges, grid, cdf)))
    observed = torch.histogram(unwrapped, edges).hist / n
    torch.testing.assert_close(observed, expected / cdf[-1], atol=6e-3, rtol=0)


def test_iknet_sample_within_respects_window_and_limits():
    for name in ("digit_arm", "snake2"):
        robot = load_robot(name)
        torch.manual_seed(0)
        model = IKNet(ProblemSpec.from_robot(robot), IKNet.tiny_config()).eval()
        center = robot.random_configuration(3 * 6, _gen(3)).reshape(3, 6, robot.dof)
        radius = torch.linspace(0.05, 0.2, robot.dof)
        q = model.sample_within(torch.randn(3, 3, generator=_gen(4)), 6, center, radius, _gen(5))
        assert q.shape == (3, 6, robot.dof)
        assert ((q - center).abs() <= radius).all()
        assert ((q >= robot.lower) & (q <= robot.upper)).all()
    with pytest.raises(ValueError, match="center"):
        model.sample_within(torch.zeros(2, 3), 4, torch.zeros(2, 3, robot.dof), 0.1)


@cache
def _snake2_model() -> IKNet:
    """IKNet on the 2-link snake after a short CPU training (a few seconds)."""
    data = make_dataset(load_robot("snake2"), 10000, targets="planar", seed=0)
    torch.manual_seed(0)
    model = IKNet(data.spec, IKNetConfig.small(components=4, hyper_width=128))
    config = TrainConfig(
        steps=250, batch_size=256, lr=3e-3, warmup_steps=20, grad_clip=0.3, progress=False
    )
    return train(model, data, config=config).model


def test_follow_path_on_snake2_has_bounded_jumps_and_errors():
    robot = load_robot("snake2", dtype=F64)
    q_true, targets = make_smooth_targets(robot, n_paths=1, steps=25, generator=_gen(6))
    model, radius = _snake2_model(), 0.1
    result = follow_path(model, targets[0, :, :2], 16, radius, robot=robot, generator=_gen(7))
    assert result.q.shape == (16, 25, 2) and result.position_error.shape == (16, 25)
    assert result.radius == radius
    assert result.max_jump.max() <= radius + 1e-6
    assert result.mean_error.max() < 0.03  # the arm reaches 0.2 m; about 0.7 cm measured
    assert 1 <= result.distinct(tol=0.05) <= 16
    best = follow_path(model, targets[0, :, :2], 16, radius, robot=robot, candidates=8,
                       generator=_gen(7))  # fmt: skip
    assert best.max_jump.max() <= radius + 1e-6
    assert best.mean_error.mean() < result.mean_error.mean()
    start = follow_path(model, targets[0, :, :2], 4, radius, start=q_true[0, 0], robot=robot,
                        generator=_gen(8))  # fmt: skip
    assert ((start.q[:, 0] - q_true[0, 0]).abs() <= radius).all()
    refined = follow_path(model, targets[0, :, :2], 16, radius, refine=True, robot=robot,
                          generator=_gen(7))  # fmt: skip
    assert refined.position_error.max() < 1e-4
    assert refined.max_jump.max() <= radius + 1e-6  # refined within the radius
    assert refined.radius == radius
    assert refined.success.shape == (16, 25) and refined.tol_position == 1e-5
    assert (refined.position_error[refined.success] <= 1e-5 * (1 + 1e-6)).all()
    loose = follow_path(model, targets[0, :, :2], 16, radius, robot=robot, tol_position=0.01,
                        generator=_gen(7))  # fmt: skip
    assert torch.equal(loose.success, loose.position_error <= 0.01)
    assert loose.summary()["within_tol"] == loose.success.double().mean().item() > 0.5


def test_sequential_ik_tracks_a_smooth_path():
    robot = load_robot("digit_arm", dtype=F64)
    q_true, targets = make_smooth_targets(robot, n_paths=2, steps=30, generator=_gen(9))
    for i in range(2):
        result = sequential_ik_path(robot, targets[i], start=q_true[i, 0])
        assert result.position_error.max() < 1e-4
        true_step = (q_true[i, 1:] - q_true[i, :-1]).abs().max()
        assert result.max_jump.max() < 4 * true_step


def test_a_path_reports_the_step_it_misses():
    robot = load_robot("digit_arm", dtype=F64)
    q_true, targets = make_smooth_targets(robot, n_paths=1, steps=12, generator=_gen(9))
    targets = targets[0].clone()
    targets[5] = torch.tensor([2.0, 2.0, 2.0], dtype=F64)  # about 2.5 m out of reach
    result = sequential_ik_path(robot, targets, start=q_true[0, 0])
    assert result.success.shape == (1, 12) and result.tol_position == 1e-5
    assert not result.success[0, 5] and result.success[0, :5].all()
    summary = result.summary()
    assert summary["worst_step_error"] > 2.0 > 0.5 > summary["worst_error"]  # the mean hid it
    assert summary["within_tol"] == result.success.double().mean().item() < 1
    assert {"mean_error", "best_error", "worst_error", "max_jump", "distinct"} <= summary.keys()
    refined = refine_path(robot, targets, result.q, radius=0.2)
    assert not refined.success[0, 5] and refined.summary()["worst_step_error"] > 2.0
    old = PathResult(result.q, result.position_error, result.continuous)  # made by hand
    assert math.isnan(old.summary()["within_tol"])


def test_a_one_step_path_has_no_jump():
    robot = load_robot("digit_arm", dtype=F64)
    q_true, targets = make_smooth_targets(robot, n_paths=1, steps=2, generator=_gen(9))
    result = sequential_ik_path(robot, targets[0, :1], start=q_true[0, 0])  # S >= 1 documented
    assert result.jumps.shape == (1, 0, robot.dof)
    assert result.max_jump.tolist() == [0.0] and result.mean_jump.tolist() == [0.0]
    summary = result.summary()  # raised IndexError: amax() of an empty dimension
    assert summary["max_jump"] == 0.0 and summary["mean_jump"] == 0.0


def test_smooth_targets_stay_inside_the_limits_and_move_smoothly():
    robot = load_robot("digit_arm", dtype=F64)
    q, targets = make_smooth_targets(robot, steps=50, n_paths=5, max_move=1.0, generator=_gen())
    assert q.shape == (5, 50, 4) and targets.shape == (5, 50, 3)
    assert ((q >= robot.lower) & (q <= robot.upper)).all()
    assert (q[:, 1:] - q[:, :-1]).abs().max() <= 1.0 * math.pi / (2 * 49) + 1e-12
    torch.testing.assert_close(targets, robot.link_positions(q, "left_hand"))


def test_count_distinct_paths():
    base = torch.zeros(1, 10, 2)
    paths = torch.cat((base, base + 0.01, base + 1.0, base - 1.0))
    assert count_distinct_paths(paths, torch.tensor([False, False]), tol=0.1) == 3
    assert count_distinct_paths(paths, torch.tensor([False, False]), tol=0.001) == 4


def test_distinct_paths_ignore_per_step_noise_but_not_another_motion():
    steps = torch.linspace(0, 1, 40, dtype=F64)[:, None]
    motion = torch.cat((steps, -steps), dim=-1)  # (40, 2)
    noise = 0.1 * torch.randn(2, 8, 40, 2, generator=_gen(), dtype=F64)
    paths = torch.cat((motion + noise[0], motion + 1.0 + noise[1]))  # two motions, 8 draws each
    free = torch.tensor([False, False])
    assert count_distinct_paths(paths, free) == 2  # default tol 0.5: mean distance
    assert count_distinct_paths(paths, free, tol=0.01) == 16
    # the worst step of two noisy draws is far apart, their mean distance is not
    step_distance = (paths[0] - paths[1]).norm(dim=-1)
    assert step_distance.max() > 0.3 and path_distance(paths[0], paths[1], free) < 0.3
    # continuous joints are compared wrapped: paths a turn apart are the same
    turned = torch.cat((motion, motion + torch.tensor([2 * math.pi, 0.0], dtype=F64)))[:, None]
    turned = turned.reshape(2, 40, 2)
    assert count_distinct_paths(turned, torch.tensor([True, False])) == 1
    assert count_distinct_paths(turned, free) == 2


def _noisy_paths(robot: Robot, q: torch.Tensor, n: int, noise: float, seed: int) -> torch.Tensor:
    """``n`` copies of the path ``q (S, D)`` with independent noise, clamped into the limits:
    stand-ins for sampled paths (their jumps exceed the noise)."""
    g = _gen(seed)
    noisy = q + noise * (2 * torch.rand(n, *q.shape, generator=g, dtype=q.dtype) - 1)
    return torch.clamp(noisy, robot.lower, robot.upper)


@pytest.mark.parametrize("radius", [0.05, 0.1])
def test_refinement_within_a_radius_never_jumps_further(radius):
    robot = load_robot("digit_arm", dtype=F64)
    q_true, targets = make_smooth_targets(robot, n_paths=3, steps=30, generator=_gen(11))
    for i in range(3):
        seeds = _noisy_paths(robot, q_true[i], 8, 0.15, seed=i)
        free = refine_path(robot, targets[i], seeds)
        boxed = refine_path(robot, targets[i], seeds, radius=radius)
        assert boxed.radius == radius and boxed.q.shape == (8, 30, 4)
        assert free.max_jump.max() > radius  # the noise is larger than the radius...
        assert boxed.max_jump.max() <= radius + 1e-12  # ...but the boxes hold
        assert bool(((boxed.q >= robot.lower) & (boxed.q <= robot.upper)).all())
        assert boxed.position_error.max() < 1e-4  # the true path moves 0.05 rad a step at most


# a continuous yaw under a limited pitch and a continuous elbow
WRIST_URDF = (DATA / "urdf" / "wrist_arm.urdf").read_text()


def test_refinement_within_a_radius_per_joint_and_across_pi():
    robot = Robot.from_urdf(WRIST_URDF, dtype=F64)
    steps = torch.linspace(0, 1, 25, dtype=F64)[:, None]
    q_true = torch.tensor([math.pi - 0.4, 0.3, 0.5], dtype=F64) + steps * torch.tensor(
        [0.8, 0.2, -0.3], dtype=F64
    )  # the yaw crosses π halfway
    q_true = torch.where(
        robot.continuous, torch.remainder(q_true + math.pi, 2 * math.pi) - math.pi, q_true
    )
    targets = robot.link_positions(q_true, "tip")
    seeds = _noisy_paths(robot, q_true, 6, 0.05, seed=3)
    radius = torch.tensor([0.06, 0.03, 0.05], dtype=F64)
    result = refine_path(robot, targets, seeds, radius=radius)
    assert result.radius is None  # not a number
    assert bool((joint_jumps(result.q, robot.continuous) <= radius + 1e-12).all())
    assert result.position_error.max() < 1e-4
    yaw = result.q[..., 0]
    assert bool(((yaw > -math.pi) & (yaw <= math.pi)).all())
    assert bool((yaw[:, 0] > 2.5).all() and (yaw[:, -1] < -2.5).all())  # crossed the seam


# two unit links in the x-y plane; the shoulder cannot go below -0.5 rad
ELBOW_URDF = """<?xml version="1.0"?>
<robot name="elbow">
  <link name="base"/><link name="upper"/><link name="fore"/><link name="tip"/>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="upper"/><axis xyz="0 0 1"/>
    <limit lower="-0.5" upper="3.0" effort="1" velocity="1"/>
  </joint>
  <joint name="elbow" type="revolute">
    <parent link="upper"/><child link="fore"/><origin xyz="1 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-3.0" upper="3.0" effort="1" velocity="1"/>
  </joint>
  <joint name="tip_joint" type="fixed">
    <parent link="fore"/><child link="tip"/><origin xyz="1 0 0"/>
  </joint>
</robot>
"""


def test_refinement_both_ways_leaves_a_branch_that_ends():
    """The target turns from 0.6 to 0 rad at 1.2 m: the elbow-up branch (shoulder = angle -
    0.93) hits the shoulder limit halfway, the elbow-down one (angle + 0.93) lasts."""
    robot = Robot.from_urdf(ELBOW_URDF, dtype=F64)
    angle = torch.linspace(0.6, 0.0, 40, dtype=F64)
    half = math.acos(0.6)  # the elbow triangle's base angle
    targets = 1.2 * torch.stack((angle.cos(), angle.sin(), torch.zeros_like(angle)), dim=-1)
    elbow_up = torch.stack((angle - half, torch.full_like(angle, 2 * half)), dim=-1)
    seeds = torch.clamp(elbow_up, robot.lower, robot.upper).expand(3, 40, 2)
    forwards = refine_path(robot, targets, seeds, radius=0.1, both_ways=False)
    assert (
        forwards.position_error[:, 0].max() < 1e-4 and forwards.position_error[:, -1].min() > 0.05
    )
    both = refine_path(robot, targets, seeds, radius=0.1, generator=_gen())
    assert both.position_error.max() < 1e-4 and both.max_jump.max() <= 0.1 + 1e-12
    elbow_down = torch.stack((angle + half, torch.full_like(angle, -2 * half)), dim=-1)
    torch.testing.assert_close(both.q, elbow_down.expand(3, 40, 2), atol=1e-4, rtol=0)
    start = refine_path(robot, targets, seeds, radius=0.1, start=elbow_up[0])  # forwards only
    torch.testing.assert_close(start.q, forwards.q)


def test_follow_path_names_the_models_that_follow_paths():
    from torchik.models import MLP, MLPConfig

    data = make_dataset(load_robot("snake2"), 64, seed=0)
    targets = data.target[:3]
    with pytest.raises(TypeError, match=r"IKNet models do \(.*'digit_arm_iknet'.*'mlp' model does"):
        follow_path(MLP(data.spec, MLPConfig(depth=1, width=8)), targets, 2, 0.1)


def test_follow_path_refuses_bad_arguments_in_one_line():
    """A start beyond the limits broke 'step 0 within radius of start' silently (refine raised
    from ik/base.py); shapes failed in torch; n_paths=0 said 'n must be >= 1'."""
    robot = load_robot("snake2", dtype=F64)
    spec = ProblemSpec.from_robot(load_robot("snake2"), targets="planar")
    model = IKNet(spec, IKNet.tiny_config()).eval()
    targets = torch.zeros(3, 2)
    beyond = robot.upper.cpu() + torch.tensor([0.0, 0.5], dtype=F64)
    name = robot.joint_names[1]
    cases = [
        (dict(start=beyond), ValueError, rf"within the joint limits.*outside them: {name}$"),
        (dict(start=beyond, refine=True), ValueError, "within the joint limits"),
        (dict(start=torch.zeros(3)), ValueError, r"start must have shape \(2,\) or \(4, 2\)"),
        (dict(start=torch.zeros(3, 2)), ValueError, r"start must have shape .*got \(3, 2\)"),
        (dict(radius=torch.full((3,), 0.1)), ValueError, r"radius must be a number or \(2,\)"),
        (dict(radius="x"), TypeError, "radius must be a number"),
        (dict(n_paths=0), ValueError, "n_paths must be >= 1"),
        (dict(candidates=0), ValueError, "candidates must be >= 1"),
    ]
    for kwargs, error, match in cases:
        arguments = {"n_paths": 4, "radius": 0.1, "robot": robot, **kwargs}
        with pytest.raises(error, match=match) as caught:
            follow_path(model, targets, **arguments)
        assert "\n" not in str(caught.value)
    inside = follow_path(model, targets, 4, 0.1, start=robot.upper.cpu(), robot=robot)
    assert inside.q.shape == (4, 3, 2)


def test_path_metrics_refuse_bad_arguments_in_one_line():
    """Paths and masks are checked before torch meets them (it said "where expected condition
    to be a boolean tensor", "too many indices", or an AttributeError for a list)."""
    robot = load_robot("panda", dtype=torch.float64)
    paths = robot.random_configuration(12, torch.Generator().manual_seed(0)).view(2, 6, 7)
    mask = robot.continuous
    cases = [
        (lambda: joint_jumps(paths, mask.double()), TypeError, "continuous must be a torch.bool"),
        (lambda: joint_jumps(paths[0, 0], mask), ValueError, "2 dimensions at least"),
        (lambda: joint_jumps(paths, mask[:3]), ValueError, r"continuous must have shape"),
        (lambda: path_distance(paths, paths[:, :4], mask), ValueError, "do not broadcast"),
        (lambda: path_distance(None, paths, mask), TypeError, "a must be a torch.Tensor"),
        (lambda: count_distinct_paths(paths[0], mask), ValueError, "3 dimensions at least"),
        (lambda: count_distinct_paths(paths, mask, -1.0), ValueError, "tol"),
        (lambda: count_distinct_paths(paths.long(), mask), TypeError, "floating-point"),
        (
            lambda: sequential_ik_path(robot, paths[0, :0, :3], paths[0, 0]),
            ValueError,
            r"targets must be \(S, 3\) with S >= 1",
        ),
        (lambda: sequential_ik_path(robot, "x", paths[0, 0]), TypeError, "targets must be a"),
    ]
    for call, error, match in cases:
        with pytest.raises(error, match=match) as caught:
            call()
        assert "\n" not in str(caught.value)
    assert joint_jumps(paths, mask).shape == (2, 5, 7)
    assert path_distance(paths, paths[:1], mask).tolist() == [
        0.0,
        path_distance(paths[1], paths[0], mask).item(),
    ]


def test_smooth_targets_refuse_bad_arguments_in_one_line():
    """A seed where the generator belongs (torch: "rand() received an invalid combination of
    arguments", over many lines), counts that are not ints or too large, a margin of half the
    range or more: one line naming the argument."""
    robot = load_robot("snake2", dtype=F64)
    cases = [
        ({"generator": "3"}, TypeError, "generator must be a torch.Generator or None"),
        ({"steps": 1}, ValueError, "steps must be >= 2"),
        ({"steps": 2.5}, TypeError, "steps must be an int"),
        ({"n_paths": math.inf}, TypeError, "n_paths must be an int"),
        ({"n_paths": 10**9}, ValueError, "n_paths must be <="),
        ({"max_move": math.nan}, ValueError, "max_move must be finite"),
        ({"margin": 0.5}, ValueError, "margin must be < 0.5"),
        ({"margin": "0.1"}, TypeError, "margin must be a number"),
        ({"link": 3}, TypeError, "link must be a link name"),
    ]
    for bad, error, match in cases:
        with pytest.raises(error, match=match) as caught:
            make_smooth_targets(robot, **{"steps": 3, **bad})
        assert "\n" not in str(caught.value)
    q, targets = make_smooth_targets(robot, steps=3, n_paths=2, margin=0, generator=_gen(1))
    assert q.shape == (2, 3, 2) and targets.shape == (2, 3, 3)
