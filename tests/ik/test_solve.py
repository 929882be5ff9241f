"""Numerical IK: every solver converges, limits hold, shapes, seeds, errors, determinism."""

from __future__ import annotations

import dataclasses
import math
import sys

import pytest
import torch

from tests.paths import DATA
from torchik import Robot, load_robot
from torchik.description import END_LINKS
from torchik.geometry import joint_distance, pose_error
from torchik.ik import (
    METHODS,
    DLSSettings,
    GDSettings,
    IKResult,
    JointLimits,
    JTSettings,
    LBFGSBSettings,
    LevenbergMarquardt,
    LMSettings,
    default_link,
    pose_residual,
    solve_ik,
)

F64 = torch.float64

# A spatial arm with two continuous joints (and one limited) for wrapping tests.
CONTINUOUS_URDF = (DATA / "urdf" / "wrist_arm.urdf").read_text()


def robot_and_targets(name: str, n: int, seed: int = 0, dtype=F64):
    robot = load_robot(name, dtype=dtype)
    g = torch.Generator().manual_seed(seed)
    q = robot.random_configuration(n, g)
    return robot, robot.forward_kinematics(q, END_LINKS[name])


def assert_within_limits(robot: Robot, q: torch.Tensor) -> None:
    assert bool(((q >= robot.lower) & (q <= robot.upper)).all())


def assert_errors_match_fk(robot: Robot, result: IKResult, target: torch.Tensor, link: str):
    """The reported errors are those of FK of the returned q (never an internal estimate)."""
    pose = robot.forward_kinematics(result.q, link)
    target = target[..., None, :, :]
    pos_err = (pose[..., :3, 3] - target[..., :3, 3]).norm(dim=-1)
    torch.testing.assert_close(result.position_error, pos_err)
    expected = (result.position_error < result.tol_position) & (
        result.rotation_error < result.tol_rotation
    )
    assert torch.equal(result.success, expected)


@pytest.mark.parametrize("name", ["panda", "ur5"])
def test_lm_solves_full_poses(name):
    robot, target = robot_and_targets(name, 64)
    g = torch.Generator().manual_seed(1)
    result = solve_ik(robot, target, generator=g)
    assert result.q.shape == (64, 2, robot.dof)  # num_seeds defaults to 2
    assert bool(result.success.any(dim=-1).all())
    best = result.best()
    assert best.q.shape == (64, 1, robot.dof)
    assert float(best.position_error.max()) < 1e-3
    assert float(best.rotation_error.max()) < math.radians(1.0)
    assert_within_limits(robot, result.q)
    assert_errors_match_fk(robot, result, target, END_LINKS[name])


def test_lm_reaches_tight_tolerances():
    robot, target = robot_and_targets("panda", 32, seed=3)
    result = solve_ik(robot, target, tol_position=1e-8, tol_rotation=1e-8, generator=None)
    best = result.best()
    assert bool(best.success.all())
    assert float(best.position_error.max()) < 1e-8


# Every solver on small batches; the slow baselines get fewer, easier problems.
SOLVER_CASES = {
    "lm": ("panda", False, 8, {}),
    "dls": ("panda", False, 8, {}),
    "jt": ("digit_arm", True, 8, {}),
    "gd": ("digit_arm", True, 4, {}),
    "lbfgsb": ("ur5", False, 3, {"num_seeds": 2}),
}


@pytest.mark.parametrize("method", METHODS)
def test_every_solver_converges(method):
    pytest.importorskip("scipy") if method == "lbfgsb" else None
    name, position_only, n, kwargs = SOLVER_CASES[method]
    robot, target = robot_and_targets(name, n, seed=5)
    if position_only:
        target = target[..., :3, 3]
    g = torch.Generator().manual_seed(2)
    result = solve_ik(
        robot, target, position_only=position_only, method=method, generator=g, **kwargs
    )
    assert bool(result.success.any(dim=-1).all()), method
    assert_within_limits(robot, result.q)


def test_limits_always_respected_even_from_wild_seeds_and_unreachable_targets():
    robot, target = robot_and_targets("panda", 6)
    target[:2, 0, 3] += 5.0  # far out of reach
    seeds = torch.randn(6, 3, robot.dof, dtype=F64, generator=torch.Generator().manual_seed(0))
    for method in ("lm", "dls", "jt"):
        result = solve_ik(robot, target, seeds=10 * seeds, method=method, max_iters=20)
        assert_within_limits(robot, result.q)
        assert not bool(result.success[:2].any())


def test_unreachable_targets_give_best_effort_not_an_exception():
    robot, target = robot_and_targets("panda", 4)
    target[:, :3, 3] = target[:, :3, 3] * 0 + torch.tensor([3.0, 0.0, 0.5], dtype=F64)
    result = solve_ik(robot, target, max_iters=20, generator=torch.Generator().manual_seed(0))
    assert not bool(result.success.any())
    assert bool(torch.isfinite(result.q).all())
    # the best effort (a compromise with the orientation) leans towards the target
    assert float(result.best().position_error.max()) < math.hypot(3.0, 0.5) - 0.5
    assert_within_limits(robot, result.q)


def test_continuous_joints_are_wrapped():
    robot = Robot.from_urdf(CONTINUOUS_URDF, dtype=F64)
    assert robot.continuous.tolist() == [True, False, True]
    g = torch.Generator().manual_seed(0)
    target = robot.link_positions(robot.random_configuration(16, g), "tip")
    seeds = torch.full((16, 2, 3), 7.0, dtype=F64)  # outside (-π, π]: wrapped, not clamped
    result = solve_ik(robot, target, position_only=True, seeds=seeds, generator=g, restarts=True)
    assert default_link(robot) == "tip"
    assert bool(result.success.any(dim=-1).all())
    q = result.q[..., robot.continuous]
    assert bool(((q > -math.pi) & (q <= math.pi)).all())
    assert_within_limits(robot, result.q)


def test_full_turn_joints_wrap_into_their_range():
    robot = load_robot("ur5", dtype=F64)
    limits = JointLimits.of(robot)
    assert limits.full_turn.tolist() == [True, True, False, True, True, True]
    q = torch.tensor([[3.5, -3.5, 3.0, 7.0, 0.1, -0.1]], dtype=F64)
    out = limits.project(q)
    assert_within_limits(robot, out)
    expected = torch.tensor([3.5 - 2 * math.pi, 2 * math.pi - 3.5, 7.0 - 2 * math.pi], dtype=F64)
    torch.testing.assert_close(out[0, [0, 1, 3]], expected)
    assert out[0, 2] == 2.5  # limited to ±2.5: clamped


def test_wrapped_masks_are_none_where_no_joint_wraps():
    """What Triton's kernels are given: the UR5's full-turn joints, no continuous one; the
    Panda's none of either (its kernels then have no wrapping in them)."""
    continuous, full_turn = JointLimits.of(load_robot("ur5", dtype=F64)).wrapped
    assert continuous is None and full_turn.tolist() == [True, True, False, True, True, True]
    assert JointLimits.of(load_robot("panda", dtype=F64)).wrapped == (None, None)


def test_position_only_accepts_points_and_poses():
    robot, target = robot_and_targets("digit_arm", 16)
    g = torch.Generator().manual_seed(0)
    from_points = solve_ik(robot, target[:, :3, 3], position_only=True, generator=g)
    from_poses = solve_ik(robot, target, position_only=True, generator=g)
    for result in (from_points, from_poses):
        assert bool(result.success.any(dim=-1).all())
        assert bool((result.rotation_error == 0).all())
        assert math.isinf(result.tol_rotation)


def test_user_seeds_are_refined_without_restarts():
    robot, target = robot_and_targets("panda", 8)
    g = torch.Generator().manual_seed(0)
    answer = robot.random_configuration(8, g)  # unrelated start: not all converge
    target = robot.forward_kinematics(answer, "panda_hand")
    near = (answer + 0.05)[:, None].expand(8, 3, 7).clone()
    result = solve_ik(robot, target, seeds=near, early_stop=False)
    assert result.q.shape == (8, 3, 7)
    assert bool(result.success.all())
    assert int(result.iterations.max()) <= 10
    # with early_stop the seeds are used lazily: slot 2 was not needed and keeps its seed
    lazy = solve_ik(robot, target, seeds=near)
    assert bool(lazy.success[:, :2].all())
    projected = torch.clamp(near[:, 2], robot.lower, robot.upper)  # seeds are projected
    assert torch.equal(lazy.q[:, 2], projected) and bool((lazy.iterations[:, 2] == 0).all())
    # (K, dof) seeds are shared by every target
    shared = solve_ik(robot, target, seeds=robot.neutral()[None], max_iters=5)
    assert shared.q.shape == (8, 1, 7)


def test_batch_shapes():
    robot, target = robot_and_targets("ur5", 6)
    result = solve_ik(robot, target.reshape(2, 3, 4, 4), num_seeds=2, max_iters=30)
    assert result.q.shape == (2, 3, 2, 6)
    for field in ("success", "position_error", "rotation_error", "iterations"):
        assert getattr(result, field).shape == (2, 3, 2)
    single = solve_ik(robot, target[0], num_seeds=3)
    assert single.q.shape == (3, 6) and single.success.shape == (3,)
    assert single.best().q.shape == (1, 6)
    empty = solve_ik(robot, target[:0], num_seeds=2)
    assert empty.q.shape == (0, 2, 6)


def test_determinism_with_a_generator():
    robot, target = robot_and_targets("panda", 16)
    runs = [
        solve_ik(robot, target, generator=torch.Generator().manual_seed(7), num_seeds=2)
        for _ in range(2)
    ]
    assert torch.equal(runs[0].q, runs[1].q)
    assert torch.equal(runs[0].iterations, runs[1].iterations)


def test_distinct_solutions_of_one_pose():
    robot, target = robot_and_targets("panda", 1)
    g = torch.Generator().manual_seed(0)
    result = solve_ik(robot, target[0], num_seeds=24, early_stop=False, generator=g)
    q, mask = result.distinct(min_distance=0.3)
    n = int(mask.sum())
    assert n >= 5
    assert bool(mask[:n].all()) and not bool(mask[n:].any())
    kept = q[:n]
    dist = joint_distance(kept[:, None], kept[None], robot.continuous)
    assert float((dist + 10 * torch.eye(n, dtype=F64)).min()) > 0.3
    pose = robot.forward_kinematics(kept, "panda_hand")
    assert float((pose[:, :3, 3] - target[0, :3, 3]).norm(dim=-1).max()) < 1e-3


def test_joint_distance_wraps_continuous_joints():
    a = torch.tensor([3.1, 0.0], dtype=F64)
    b = torch.tensor([-3.1, 0.0], dtype=F64)
    wrapped = joint_distance(a, b, torch.tensor([True, False]))
    assert float(wrapped) == pytest.approx(2 * math.pi - 6.2)
    assert float(joint_distance(a, b, torch.tensor([False, False]))) == pytest.approx(6.2)


def test_float32_robot():
    robot, target = robot_and_targets("panda", 16, dtype=torch.float32)
    result = solve_ik(robot, target, generator=torch.Generator().manual_seed(0))
    assert result.q.dtype == torch.float32
    assert bool(result.success.any(dim=-1).all())


def test_pose_residual_matches_pose_error():
    robot, target = robot_and_targets("panda", 50)
    _, current = robot_and_targets("panda", 50, seed=1)
    residual, angle = pose_residual(current, target[:, :3, 3], target[:, :3, :3])
    expected = pose_error(current, target)
    torch.testing.assert_close(residual, expected)
    torch.testing.assert_close(angle, expected[:, 3:].norm(dim=-1))


def test_clear_errors():
    robot, target = robot_and_targets("panda", 2)
    bad = target.clone()
    bad[0, 0, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        solve_ik(robot, bad)
    bad[0, 0, 3] = float("inf")
    with pytest.raises(ValueError, match="NaN or infinite"):
        solve_ik(robot, bad)
    with pytest.raises(ValueError, match="position_only=True"):
        solve_ik(robot, target[:, :3, 3])
    with pytest.raises(ValueError, match=r"\(\.\.\., 4, 4\)"):
        solve_ik(robot, target[:, :3, :])
    with pytest.raises(ValueError, match="unknown link 'nope'"):
        solve_ik(robot, target, "nope")
    with pytest.raises(ValueError, match="unknown IK method"):
        solve_ik(robot, target, method="newton")
    with pytest.raises(ValueError, match="num_seeds"):
        solve_ik(robot, target, num_seeds=0)
    with pytest.raises(ValueError, match="seeds must have shape"):
        solve_ik(robot, target, seeds=torch.zeros(2, 3, 6, dtype=F64))
    with pytest.raises(ValueError, match="batch shape"):
        solve_ik(robot, target, seeds=torch.zeros(3, 1, 7, dtype=F64))
    with pytest.raises(ValueError, match="orthonormal"):
        solve_ik(robot, target * 2)
    mirrored = target.clone()
    mirrored[..., :3, 0] *= -1  # orthonormal, but a reflection: determinant -1
    with pytest.raises(ValueError, match="determinant"):
        solve_ik(robot, mirrored)
    with pytest.raises(TypeError, match="torch.Tensor"):
        solve_ik(robot, target.tolist())


def test_the_target_check_without_values_touches_no_value():
    """``check_target(..., values=False)`` (what the GPU probe times, to price the one host
    read of the value check) checks shapes only: no operation on the values at all."""
    from tests.ik.recorder import Recorder
    from torchik.ik.inputs import check_target

    robot, target = robot_and_targets("panda", 3)
    bad = target * 2  # not rotations: refused with the values, passed through without
    with Recorder() as seen:
        batch, position, rotmat = check_target(robot, bad, False, values=False)
    views = ("slice", "select", "view", "alias", "_unsafe_view", "expand", "lift_fresh")
    assert all(op.split(".")[1] in views for op in seen.ops), seen.ops
    assert batch == (3,) and rotmat.shape == (3, 3, 3)
    with pytest.raises(ValueError, match="orthonormal"):
        check_target(robot, bad, False)
    with pytest.raises(ValueError, match="position_only=True"):
        check_target(robot, target[:, :3, 3], False, values=False)


BAD_ARGUMENTS = [  # (keyword arguments of solve_ik, error, message)
    ({"tol_position": -1e-3}, ValueError, "tol_position must be > 0, got -0.001"),
    ({"tol_position": 0.0}, ValueError, "tol_position must be > 0"),
    ({"tol_position": math.nan}, ValueError, "tol_position must be finite"),
    ({"tol_position": math.inf}, ValueError, "tol_position must be finite"),
    ({"tol_rotation": math.nan}, ValueError, "tol_rotation must be finite"),
    ({"tol_rotation": -1.0}, ValueError, "tol_rotation must be > 0"),
    ({"tol_rotation": "1"}, TypeError, "tol_rotation must be a number"),
    ({"max_iters": -5}, ValueError, "max_iters must be >= 0, got -5"),
    ({"max_iters": 2.5}, TypeError, "max_iters must be an int"),
    ({"num_seeds": 10**9}, ValueError, "num_seeds must be <= 65536"),
    ({"num_seeds": 2.0}, TypeError, "num_seeds must be an int"),
    ({"seed_pool": -1}, ValueError, "seed_pool must be >= 0, got -1"),
    ({"num_threads": 0}, ValueError, "num_threads must be >= 1, got 0"),
    ({"restarts": "yes"}, TypeError, "restarts must be True or False"),
    ({"early_stop": 1}, TypeError, "early_stop must be True or False"),
    ({"seeds": torch.zeros(7, dtype=F64)}, ValueError, r"seeds must have shape \(\.\.\., K, 7\)"),
    ({"seeds": torch.zeros(1, 7, dtype=torch.long)}, TypeError, "floating-point"),
    ({"seeds": [[0.0] * 7]}, TypeError, "seeds must be a floating-point torch.Tensor"),
]


@pytest.mark.parametrize("kwargs,error,message", BAD_ARGUMENTS)
def test_bad_settings_are_refused_in_one_line(kwargs, error, message):
    robot, target = robot_and_targets("panda", 2)
    threads = torch.get_num_threads()
    with pytest.raises(error, match=message) as info:
        solve_ik(robot, target, **kwargs)
    assert "\n" not in str(info.value) and torch.get_num_threads() == threads


def test_edge_settings_that_are_allowed():
    robot, target = robot_and_targets("panda", 2)
    seeds = robot.random_configuration(3, torch.Generator().manual_seed(1))
    result = solve_ik(robot, target, seeds=seeds, max_iters=0)  # evaluates the seeds only
    assert int(result.iterations.max()) == 0
    result = solve_ik(robot, target, tol_rotation=math.inf, seed_pool=0, num_threads=None)
    assert bool(result.success.any(-1).all())


def test_solver_settings_check_every_field():
    for name, bad in (("damping", -0.1), ("mu_max", math.inf), ("patience", 0), ("adaptive", 1)):
        with pytest.raises((ValueError, TypeError), match=name):
            LMSettings(**{name: bad})
    with pytest.raises(ValueError, match="max_iters must be >= 0"):
        LevenbergMarquardt(max_iters=-1)


def test_settings_are_frozen_and_overridable():
    solver = LevenbergMarquardt(max_iters=7)
    assert solver.settings.max_iters == 7 and solver.settings.damping == LMSettings().damping
    with pytest.raises(dataclasses.FrozenInstanceError):
        solver.settings.max_iters = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        LevenbergMarquardt(dataclasses.replace(LMSettings()).__class__.__bases__[0]())


def test_lbfgsb_without_scipy_says_what_to_install(monkeypatch):
    robot, target = robot_and_targets("ur5", 1)
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    with pytest.raises(ImportError, match=r"torchik\[ik\]"):
        solve_ik(robot, target, method="lbfgsb", num_seeds=1)


def test_default_link():
    assert default_link(load_robot("panda")) == "panda_hand"
    assert default_link(load_robot("planar", link_lengths=[1.0, 1.0])) == "ee"
    assert default_link(Robot.from_urdf(CONTINUOUS_URDF)) == "tip"


def test_num_threads_is_restored():
    robot, target = robot_and_targets("ur5", 4)
    before = torch.get_num_threads()
    solve_ik(robot, target, num_threads=1)
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="num_threads must be at most .* the cores"):
        solve_ik(robot, target, num_threads=100000)  # would kill the interpreter in OpenMP
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError):
        solve_ik(robot, target[:, :3, :], num_threads=1)  # errors inside restore it too
    assert torch.get_num_threads() == before


def test_top_orders_successes_then_failures_by_error():
    from torchik.ik import IKResult

    err = torch.tensor([[1.4055, 1e-4, 1.4068, 1.4044, 2e-4]], dtype=torch.float64)
    result = IKResult(
        q=torch.arange(5, dtype=torch.float64).reshape(1, 5, 1),
        success=err < 1e-3,
        position_error=err,
        rotation_error=torch.zeros_like(err),
        iterations=torch.zeros(1, 5, dtype=torch.long),
        tol_position=1e-3,
        tol_rotation=math.inf,
        continuous=torch.zeros(1, dtype=torch.bool),
    )
    assert result.top(5).q.flatten().tolist() == [1.0, 4.0, 3.0, 0.0, 2.0]
    assert result.best().q.flatten().tolist() == [1.0]


# ---------------------------------------------------------------------------- a box per target
def _box_around(q: torch.Tensor, radius: float, seed: int = 3):
    """``q`` moved by up to ``radius / 2``, and the box of half-width ``radius`` around that:
    the box holds ``q`` (the target stays reachable) without being centred on it."""
    g = torch.Generator().manual_seed(seed)
    center = q + 0.5 * radius * (2 * torch.rand(q.shape, generator=g, dtype=q.dtype) - 1)
    return center, center - radius, center + radius


def assert_within_box(robot: Robot, q: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor):
    lo, hi = torch.maximum(lower, robot.lower), torch.minimum(upper, robot.upper)
    assert bool(((q >= lo) & (q <= hi)).all())


BOX_CASES = {  # robot, position only, solve_ik keywords
    "random seeds in rounds": ("panda", False, {}),
    "given seeds": ("panda", False, {"seeds": "far", "restarts": False}),
    "given seeds, restarts": ("ur5", False, {"seeds": "far", "restarts": True}),
    "no early stop": ("ur5", False, {"early_stop": False, "num_seeds": 3}),
    "position only": ("digit_arm", True, {"seeds": "far", "restarts": True}),
    "dls": ("digit_arm", True, {"method": "dls"}),
    "lbfgsb": ("digit_arm", True, {"method": "lbfgsb"}),
}


@pytest.mark.parametrize("case", list(BOX_CASES))
def test_solutions_stay_in_the_box_of_their_target(case):
    pytest.importorskip("scipy") if case == "lbfgsb" else None
    name, position_only, kwargs = BOX_CASES[case]
    robot = load_robot(name, dtype=F64)
    g = torch.Generator().manual_seed(0)
    q = robot.random_configuration(32, g)
    target = robot.forward_kinematics(q, END_LINKS[name])
    target = target[:, :3, 3] if position_only else target
    _, lower, upper = _box_around(q, 0.2)
    if kwargs.get("seeds") == "far":  # seeds outside the box: projected into it
        kwargs = {**kwargs, "seeds": robot.random_configuration(32 * 2, g).view(32, 2, -1)}
    result = solve_ik(robot, target, position_only=position_only, generator=g, lower=lower,
                      upper=upper, **kwargs)  # fmt: skip
    assert_within_box(robot, result.q, lower[:, None], upper[:, None])
    assert float(result.success.any(dim=-1).double().mean()) >= 0.9
    pose = robot.forward_kinematics(q, END_LINKS[name])
    assert_errors_match_fk(robot, result, pose, END_LINKS[name])


def test_a_box_without_the_answer_gives_the_best_effort_inside_it():
    robot = load_robot("digit_arm", dtype=F64)
    g = torch.Generator().manual_seed(0)
    q = 0.5 * robot.random_configuration(16, g)
    target = robot.link_positions(q, "left_hand")
    lower, upper = q + 0.3, q + 0.5  # every joint pushed away from the answer
    result = solve_ik(robot, target, position_only=True, lower=lower, upper=upper, generator=g)
    assert_within_box(robot, result.q, lower[:, None], upper[:, None])
    assert not bool(result.success.any())
    u = torch.rand(256, 16, 4, generator=g, dtype=F64)  # the box, sampled densely
    sampled = robot.link_positions(lower + 0.2 * u, "left_hand")
    nearest = (sampled - target).norm(dim=-1).amin(dim=0)
    assert bool((result.position_error.amin(dim=-1) <= nearest + 1e-9).all())


def test_box_of_continuous_joints_may_cross_pi():
    robot = Robot.from_urdf(CONTINUOUS_URDF, dtype=F64)
    g = torch.Generator().manual_seed(0)
    q = robot.random_configuration(24, g)
    q[:, 0] = math.pi - 0.05 * torch.rand(24, generator=g, dtype=F64)  # yaw near the seam
    target = robot.link_positions(q, "tip")
    center = q.clone()
    center[:, 0] = center[:, 0] + 0.1  # beyond π: the box [π - 0.05, π + 0.25] crosses it
    seeds = torch.zeros(24, 1, 3, dtype=F64)
    result = solve_ik(robot, target, position_only=True, seeds=seeds, restarts=True,
                      lower=center - 0.15, upper=center + 0.15, generator=g)  # fmt: skip
    assert bool(result.success.all())
    out = result.q[:, 0]
    assert bool(((out[:, 0] > -math.pi) & (out[:, 0] <= math.pi)).all())  # wrapped back
    gap = joint_distance(out, center, robot.continuous)
    assert bool((gap <= 0.15 * math.sqrt(3) + 1e-9).all())
    assert bool(((out[:, 1] >= center[:, 1] - 0.15) & (out[:, 1] <= center[:, 1] + 0.15)).all())


def test_joint_limits_within_a_box():
    robot = Robot.from_urdf(CONTINUOUS_URDF, dtype=F64)
    limits = JointLimits.of(robot)
    lower = torch.tensor([[3.0, -2.0, -10.0], [-0.5, 1.0, -0.5]], dtype=F64)
    upper = torch.tensor([[3.4, 2.0, 10.0], [0.5, 1.2, 0.5]], dtype=F64)
    box = limits.within(lower, upper)
    assert box.per_row and not limits.per_row and bool(box.clamped.all())
    expected_lo = torch.tensor([[3.0, -1.5, -math.pi], [-0.5, 1.0, -0.5]], dtype=F64)
    expected_hi = torch.tensor([[3.4, 1.5, math.pi], [0.5, 1.2, 0.5]], dtype=F64)
    torch.testing.assert_close(box.lower, expected_lo)  # a wide box frees a continuous joint
    torch.testing.assert_close(box.upper, expected_hi)
    q = torch.tensor([[-3.0, 1.4, 3.0], [3.0, 0.0, 6.0]], dtype=F64)
    out = box.project(q)  # -3.0 is 2π - 3.0 ≈ 3.28 on the box's side of the seam
    expected = torch.tensor([[2 * math.pi - 3.0, 1.4, 3.0], [0.5, 1.0, 6.0 - 2 * math.pi]])
    torch.testing.assert_close(out, expected.to(F64))
    assert box.canonical(out)[0, 0] == pytest.approx(-3.0)
    assert box.rows(torch.tensor([1])).lower.shape == (1, 3)
    sample = box.sample(torch.tensor([0, 1, 1]), torch.Generator().manual_seed(0))
    assert bool(((sample >= box.lower[[0, 1, 1]]) & (sample <= box.upper[[0, 1, 1]])).all())
    assert_within_limits(robot, limits.sample(torch.arange(5)))  # shared limits: any row
    with pytest.raises(ValueError, match="empty"):
        limits.within(lower, lower - 0.1)
    with pytest.raises(ValueError, match="empty"):
        limits.within(lower + 5.0, upper + 5.0)  # outside the pitch limits
    with pytest.raises(ValueError, match="empty"):
        limits.within(lower * float("nan"), upper)


def test_a_box_equal_to_the_limits_changes_nothing():
    """Same seeds, same iterates: with the joint limits as the box, the solver takes the same
    path as without a box (the no-box path itself is unchanged, bit for bit, from before boxes
    existed; checked when they were added). On either loop."""
    robot, target = robot_and_targets("panda", 32)
    seeds = robot.random_configuration(64, torch.Generator().manual_seed(1)).view(32, 2, 7)
    for method in (LevenbergMarquardt(), LevenbergMarquardt(loop="host")):
        plain = solve_ik(robot, target, seeds=seeds, restarts=False, method=method)
        boxed = solve_ik(robot, target, seeds=seeds, restarts=False, lower=robot.lower,
                         method=method)  # fmt: skip
        assert torch.equal(plain.q, boxed.q) and torch.equal(plain.iterations, boxed.iterations)


def test_box_arguments_are_checked():
    robot, target = robot_and_targets("panda", 4)
    with pytest.raises(ValueError, match=r"lower must broadcast to \(4, 7\)"):
        solve_ik(robot, target, lower=torch.zeros(3, 7, dtype=F64))
    with pytest.raises(ValueError, match="empty"):
        solve_ik(robot, target, lower=robot.upper, upper=robot.lower)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        (lambda: LMSettings(damping=-1.0), r"damping must be in \[0.0, inf\]"),
        (lambda: LMSettings(adaptive=1), "adaptive must be True or False"),
        (lambda: LMSettings(patience=0), "patience must be >= 1"),
        (lambda: DLSSettings(max_step=math.nan), "max_step must be finite"),
        (lambda: GDSettings(learning_rate=-0.1), r"learning_rate must be in \[0.0, inf\]"),
        (lambda: LBFGSBSettings(scipy_max_iters=0), "scipy_max_iters must be >= 1"),
        (lambda: JTSettings(max_iters=1.5), "max_iters must be an int"),
    ],
)
def test_every_settings_field_is_checked_by_its_own_rule(settings, match):
    with pytest.raises((TypeError, ValueError), match=match):
        settings()


def test_solvers_inside_inference_mode_and_after_it():
    """Every method but gradient descent solves inside ``torch.inference_mode()`` and, after
    that, outside it (cached limits, plans and graphs made in it must not leak out); gradient
    descent, which needs autograd, refuses inference mode in one line instead of autograd's
    "element 0 of tensors does not require grad"."""
    robot = load_robot("panda", dtype=torch.float64)
    q = robot.random_configuration(4, generator=torch.Generator().manual_seed(3))
    targets = robot.forward_kinematics(q, "panda_hand")
    methods = ("lm", "dls", "jt")
    with torch.inference_mode():
        for method in methods:
            assert solve_ik(robot, targets, method=method, max_iters=3).q.shape == (4, 2, 7)
        with pytest.raises(RuntimeError, match="cannot run inside torch.inference_mode") as info:
            solve_ik(robot, targets, method="gd", max_iters=3)
        assert "\n" not in str(info.value)
    for method in (*methods, "gd"):
        assert solve_ik(robot, targets, method=method, max_iters=3).q.shape == (4, 2, 7)
