"""A round of ``solve_ik`` as one compiled call on the CPU (:mod:`torchik.ik.compiled`): the
rounds' answers (same draws, same seeds, same iterations, ``q`` bit for bit in float64), where
it serves and only there."""

from __future__ import annotations

import math
import os
import types

import pytest
import torch

from torchik import load_robot, solve_ik
from torchik.ik import DampedLeastSquares, LevenbergMarquardt, compiled
from torchik.ik.base import JointLimits
from torchik.ik.inputs import _check_target_values, _flags, _host_flags, _on_host
from torchik.ik.rounds import Run
from torchik.ik.solve import default_link

pytest.importorskip("numba", reason="the compiled round needs Numba (a dependency)")


@pytest.fixture(scope="module")
def robots():
    return {name: load_robot(name, dtype=torch.float64) for name in ("panda", "ur5")}


def _targets(robot, n, seed, unreachable=0):
    q = robot.random_configuration(n, generator=torch.Generator().manual_seed(seed))
    poses = robot.forward_kinematics(q, default_link(robot))
    poses[:unreachable, :3, 3] *= 3.0  # out of reach: every retry round runs
    return poses


def _solve(robot, targets, on: bool, monkeypatch, **options):
    """``solve_ik`` with the compiled round (``on``) or the rounds' own loop."""
    with monkeypatch.context() as m:
        if not on:
            m.setattr(compiled, "serves", lambda run: False)
        g = torch.Generator().manual_seed(5)
        return solve_ik(robot, targets, generator=g, **options)


OPTIONS = [
    {},  # two slots, nearest seeds from pools of 256
    {"num_seeds": 3},
    {"seed_pool": 0},  # uniform seeds
    {"num_seeds": 12},  # more slots than pools: uniform seeds
    {"position_only": True},
    {"max_iters": 25},  # a shorter last round
    {"tol_position": 1e-5, "tol_rotation": 1e-5},
]


@pytest.mark.parametrize("name", ["panda", "ur5"])
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_the_compiled_round_gives_the_rounds_answers(robots, name, options, monkeypatch):
    """Float64, unreachable targets included (retry rounds of ``retry_seeds`` slots): the same
    ``q`` bit for bit, successes and iterations; errors to rounding. The UR5's joints span a
    full turn (wrapped into their range)."""
    robot = robots[name]
    targets = _targets(robot, 120, seed=1, unreachable=6)
    if options.get("position_only"):
        targets = targets[:, :3, 3]
    calls = []
    real = compiled.round_of
    monkeypatch.setattr(compiled, "round_of", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = _solve(robot, targets, True, monkeypatch, **options)
    assert len(calls) > 1, "the first round and some retry rounds run compiled"
    want = _solve(robot, targets, False, monkeypatch, **options)
    assert torch.equal(got.q, want.q)
    assert torch.equal(got.success, want.success) and torch.equal(got.iterations, want.iterations)
    torch.testing.assert_close(got.position_error, want.position_error, atol=1e-12, rtol=0)
    torch.testing.assert_close(got.rotation_error, want.rotation_error, atol=1e-12, rtol=0)
    assert 0.9 < got.success_rate < 1.0  # the unreachable ones fail
    assert got.tol_rotation == want.tol_rotation


def test_float32_and_threads(monkeypatch):
    """Float32: the same successes and iterations (two slots of nearly equal error may swap:
    the errors round differently); two threads split the targets with the same answers."""
    robot = load_robot("panda")
    targets = _targets(robot, 600, seed=2, unreachable=3)
    got = _solve(robot, targets, True, monkeypatch, num_threads=1)
    want = _solve(robot, targets, False, monkeypatch, num_threads=1)
    assert torch.equal(got.success, want.success) and torch.equal(got.iterations, want.iterations)
    assert float((got.q - want.q).abs().amax()) < 1e-3
    if (os.cpu_count() or 1) >= 2:
        threads = _solve(robot, targets, True, monkeypatch, num_threads=2)
        assert torch.equal(threads.q, got.q)


def _run(robot, targets, method=None, **changes):
    settings = dict(restarts=True, seed_pool=256, generator=None, bounds=None)
    settings.update(changes)
    position, rotmat = targets[:, :3, 3], targets[:, :3, :3]
    return Run(method or LevenbergMarquardt(), robot, default_link(robot), 1e-3, 0.01, position,
               rotmat, 2, settings["restarts"], settings["seed_pool"], settings["generator"],
               settings["bounds"])  # fmt: skip


def test_where_the_compiled_round_serves(robots):
    """Levenberg-Marquardt's rounds with random seeds on the CPU, with a box per target too;
    not without restarts or ``early_stop``, with restarts between a round's chunks
    (``sync_every`` under ``round_iters + 1``), on the reference backend, with another
    method, the host loop, adaptive damping or without ``fused_loop``."""
    robot = robots["panda"]
    targets = _targets(robot, 4, seed=3)
    assert compiled.serves(_run(robot, targets))
    box = (robot.lower.expand(4, 7), robot.upper.expand(4, 7))
    assert compiled.serves(_run(robot, targets, bounds=box))
    assert not compiled.serves(_run(robot, targets, restarts=False))
    for method in (
        LevenbergMarquardt(early_stop=False),
        LevenbergMarquardt(sync_every=5),
        LevenbergMarquardt(loop="host"),
        LevenbergMarquardt(adaptive=True),
        LevenbergMarquardt(fused_loop=False),
        DampedLeastSquares(),
    ):
        assert not compiled.serves(_run(robot, targets, method)), method
    assert compiled.serves(_run(robot, targets, LevenbergMarquardt(sync_every=11)))
    robot.backend = "reference"
    try:
        assert not compiled.serves(_run(robot, targets))
    finally:
        robot.backend = "auto"


def test_a_round_in_slot_order_or_best_first(robots):
    """``order=False``: the slots as seeded; ``order=True``: the same slots, successes first,
    then by error over the tolerances (:meth:`IKResult.top`)."""
    robot = robots["panda"]
    targets = _targets(robot, 40, seed=4, unreachable=5)
    results = {}
    for order in (False, True):
        run = _run(robot, targets, generator=torch.Generator().manual_seed(9))
        results[order] = compiled.round_of(run, None, 4, 6, 0, order=order)
    plain, ranked = results[False], results[True]
    top = plain.top(4)
    assert torch.equal(top.q, ranked.q) and torch.equal(top.success, ranked.success)
    assert not torch.equal(plain.q, ranked.q)  # some target's slots were reordered
    todo = torch.tensor([0, 2])
    run = _run(robot, targets, generator=torch.Generator().manual_seed(9))
    part = compiled.round_of(run, todo, 3, 6, 7, order=False)
    assert part.q.shape == (2, 3, 7) and bool((part.iterations >= 7).all())


def test_ik_round_refuses_what_it_cannot_take():
    """The kernel's own checks: CPU tensors of float32 or float64, positive tolerances (a
    zero one divided the slots' scores by zero inside the kernel)."""
    from torchik.kinematics import native

    robot = load_robot("panda", dtype=torch.float64)
    limits = JointLimits.of(robot)
    pool = robot.random_configuration(4)
    w = torch.ones(6, dtype=torch.float64)

    def call(pool, tol_position=1e-3):
        native.ik_round(pool, 2, robot.tree, 9, torch.zeros(1, 3), None, w, torch.zeros(1, 4), 0.1,
                        limits.lower, limits.upper, slots=2, iters=3, tol_position=tol_position,
                        tol_rotation=math.inf)  # fmt: skip

    with pytest.raises(TypeError, match="float32 or float64"):
        call(pool.half())
    with pytest.raises(ValueError, match="tolerances must be positive"):
        call(pool, tol_position=0.0)


@pytest.mark.parametrize("case", ["good", "nan", "stretched", "mirrored", "position"])
def test_the_host_value_check_agrees_with_the_device_one(robots, case):
    """The CPU's NumPy check of target values flags what the PyTorch one (other devices)
    does."""
    robot = robots["panda"]
    target = _targets(robot, 3, seed=6)
    if case == "nan":
        target[1, 0, 3] = math.nan
    elif case == "stretched":
        target[2, :3, 0] *= 1.01
    elif case == "mirrored":
        target[0, :3, 2] *= -1.0
    rotmat = None if case == "position" else target[:, :3, :3].contiguous()
    host, device = _host_flags(target, rotmat), _flags(robot, target, rotmat)
    assert host == device
    assert host == [case == "nan", case in ("stretched", "mirrored")]
    # a small target of another device: copied once, its rotations cut on the host
    assert _host_flags(*_on_host(robot, target.float(), rotmat)) == host
    accelerator = types.SimpleNamespace(device=torch.device("cuda"), dtype=torch.float64)
    if host == [False, False]:
        _check_target_values(accelerator, target, rotmat)  # type: ignore[arg-type]
    else:
        with pytest.raises(ValueError, match="NaN" if host[0] else "orthonormal"):
            _check_target_values(accelerator, target, rotmat)  # type: ignore[arg-type]


def _given(robot, targets, seeds, on: bool, monkeypatch, **options):
    """``solve_ik`` with given seeds, compiled (``on``) or by the rounds' own code."""
    calls = []
    real = compiled.given
    with monkeypatch.context() as m:
        m.setattr(compiled, "given", lambda *a: calls.append(1) or real(*a))
        if not on:
            m.setattr(compiled, "serves_given", lambda run: False)
        result = solve_ik(robot, targets, seeds=seeds, **options)
    assert bool(calls) == on
    return result


GIVEN = {
    "warm start": ("near", {}),
    "two seeds each, early stop over chunks": ("far", {}),
    "refined each on its own": ("far", {"early_stop": False, "restarts": False}),
    "seeds evaluated as given": ("near", {"max_iters": 0}),
    "positions": ("far", {"position_only": True}),
    "one set of seeds for every target": ("shared", {}),
    "chunks of 4": ("far", {"method": LevenbergMarquardt(sync_every=4)}),
}


@pytest.mark.parametrize("name", ["panda", "ur5"])
@pytest.mark.parametrize("case", list(GIVEN))
def test_given_seeds_compiled_give_the_rounds_answers(robots, name, case, monkeypatch):
    """Warm starts and refinement (no restarts) in one compiled call: the same ``q`` bit for
    bit, successes and iterations (float64), including the early stop over a target's slots
    after the chunk in which one converged."""
    robot = robots[name]
    g = torch.Generator().manual_seed(7)
    q = robot.random_configuration(150, g)
    targets = robot.forward_kinematics(q, default_link(robot))
    kind, options = GIVEN[case]
    seeds = {
        "near": (q + 0.1 * torch.randn(q.shape, generator=g, dtype=q.dtype))[:, None],
        "far": robot.random_configuration(300, g).view(150, 2, -1),
        "shared": robot.random_configuration(2, g),
    }[kind]
    if options.get("position_only"):
        targets = targets[:, :3, 3]
    got = _given(robot, targets, seeds, True, monkeypatch, **options)
    want = _given(robot, targets, seeds, False, monkeypatch, **options)
    assert torch.equal(got.q, want.q)
    assert torch.equal(got.success, want.success) and torch.equal(got.iterations, want.iterations)
    torch.testing.assert_close(got.position_error, want.position_error, atol=1e-12, rtol=0)
    if case == "two seeds each, early stop over chunks":  # a chunk's last evaluation: 10, 21, ...
        ends = (got.iterations % 11 == 10) & (got.iterations < 60)
        stopped = got.success.any(-1, keepdim=True) & ~got.success & ends
        assert bool(stopped.any()), "no slot stopped for its sibling's success"


def test_given_seeds_take_the_rounds_where_they_must(robots):
    """More seeds per target than ``initial_seeds`` under ``early_stop`` (given seeds in
    rounds), or restarts without ``early_stop`` (restarts between the chunks of one round):
    the rounds' own code. A warm start with restarts, or in a box, is compiled."""
    robot = robots["panda"]
    targets = _targets(robot, 4, seed=8)
    assert compiled.serves_given(_run(robot, targets, restarts=False))
    assert compiled.serves_given(_run(robot, targets, restarts=True))
    box = (robot.lower.expand(4, 7), robot.upper.expand(4, 7))
    assert compiled.serves_given(_run(robot, targets, restarts=False, bounds=box))
    many = _run(robot, targets, restarts=False)
    many.k = 3  # more than initial_seeds (2), early_stop: given seeds in rounds
    assert not compiled.serves_given(many)
    many.solver = LevenbergMarquardt(early_stop=False)
    assert compiled.serves_given(many)
    many.restarts = True
    assert not compiled.serves_given(many)
    assert not compiled.serves_given(_run(robot, targets, DampedLeastSquares(), restarts=False))


def _near(robot, q, g, sigma=0.2):
    """``q`` moved by noise, clamped into the limits: the previous solutions of a path."""
    noise = sigma * torch.randn(q.shape, generator=g, dtype=q.dtype)
    return torch.minimum(torch.maximum(q + noise, robot.lower), robot.upper)


BOXES = {
    "random seeds in each box": lambda prev, r: {"lower": prev - r, "upper": prev + r},
    "a warm start in a box, then random rounds (refine_path)": lambda prev, r: {
        "seeds": prev[:, None], "lower": prev - r, "upper": prev + r, "restarts": True},
    "a warm start in a box": lambda prev, r: {"seeds": prev[:, None], "lower": prev - r,
                                              "upper": prev + r},
    "a warm start, then random rounds": lambda prev, r: {"seeds": prev[:, None], "restarts": True},
    "boxes wider than the limits": lambda prev, r: {"lower": prev - 4.0, "upper": prev + 4.0},
}  # fmt: skip


@pytest.mark.parametrize("name", ["panda", "ur5"])
@pytest.mark.parametrize("case", list(BOXES))
def test_boxes_compiled_give_the_rounds_answers(robots, name, case, monkeypatch):
    """A box per target (``lower``/``upper``: uniform seeds in it, the kernel's projection
    into it) and warm starts followed by random rounds: the rounds' answers bit for bit."""
    robot = robots[name]
    g = torch.Generator().manual_seed(11)
    q = robot.random_configuration(150, g)
    targets = robot.forward_kinematics(q, default_link(robot))
    options = BOXES[case](_near(robot, q, g), 0.3)
    calls = []
    for fn in ("serves", "serves_given"):
        real = getattr(compiled, fn)
        monkeypatch.setattr(
            compiled, fn, lambda run, real=real: calls.append(real(run)) or calls[-1]
        )
    got = solve_ik(robot, targets, generator=torch.Generator().manual_seed(3), **options)
    assert any(calls), "served compiled"
    monkeypatch.setattr(compiled, "serves", lambda run: False)
    monkeypatch.setattr(compiled, "serves_given", lambda run: False)
    want = solve_ik(robot, targets, generator=torch.Generator().manual_seed(3), **options)
    assert torch.equal(got.q, want.q)
    assert torch.equal(got.success, want.success) and torch.equal(got.iterations, want.iterations)
    assert 0.3 < got.success_rate


def test_continuous_joints_in_boxes_come_back_wrapped(monkeypatch):
    """Boxes around continuous joints may cross ±π: the answers keep to the boxes (a turn
    aside) and come back in (-π, π], solving what the rounds solve. (Two slots stuck at one
    point may come back in the other order than the rounds': their errors tie to rounding.)"""
    from torchik import Robot
    from torchik.geometry.joints import wrap_angle

    robot = Robot.from_urdf("tests/data/urdf/wrist_arm.urdf", dtype=torch.float64)
    g = torch.Generator().manual_seed(1)
    q = robot.random_configuration(200, g)
    targets = robot.forward_kinematics(q, "tip")[:, :3, 3]
    prev = _near(robot, q, g)
    options = {"lower": prev - 0.3, "upper": prev + 0.3, "position_only": True}
    got = solve_ik(robot, targets, generator=torch.Generator().manual_seed(3), **options)
    monkeypatch.setattr(compiled, "serves", lambda run: False)
    want = solve_ik(robot, targets, generator=torch.Generator().manual_seed(3), **options)
    assert torch.equal(got.success.any(-1), want.success.any(-1))
    best, other = got.best(), want.best()
    torch.testing.assert_close(best.position_error, other.position_error, atol=1e-9, rtol=0)
    assert bool((got.q.abs() <= math.pi).all())
    offset = wrap_angle(got.q - prev[:, None])  # within the box, up to whole turns
    assert bool((offset.abs() <= 0.3 + 1e-12).all())


@pytest.mark.parametrize(
    ("urdf", "link"),
    [("mimic", "finger_a"), ("prismatic_continuous", None), ("tilted_axes", None),
     ("two_branches", None), ("ur10_robot", None)],
)  # fmt: skip
def test_other_joints_compiled_give_the_rounds_answers(urdf, link, monkeypatch):
    """Mimic, prismatic and continuous joints, tilted axes, branches: random seeds and warm
    starts, full poses, the rounds' answers bit for bit."""
    from torchik import Robot

    robot = Robot.from_urdf(f"tests/data/urdf/{urdf}.urdf", dtype=torch.float64)
    link = link or default_link(robot)
    q = robot.random_configuration(60, torch.Generator().manual_seed(1))
    targets = robot.forward_kinematics(q, link)
    for seeds in (None, q[:, None] + 0.01):
        options = {} if seeds is None else {"seeds": seeds}
        got = solve_ik(robot, targets, link, generator=torch.Generator().manual_seed(3), **options)
        with monkeypatch.context() as m:
            m.setattr(compiled, "serves", lambda run: False)
            m.setattr(compiled, "serves_given", lambda run: False)
            want = solve_ik(robot, targets, link, generator=torch.Generator().manual_seed(3),
                            **options)  # fmt: skip
        assert torch.equal(got.q, want.q) and torch.equal(got.success, want.success)
        assert got.success_rate > 0.9


def test_float32_takes_tolerances_beyond_its_range():
    """A tolerance beyond float32's range (1e300: anything goes) is its largest value in the
    compiled round, without NumPy's overflow warning; every target is solved at once."""
    import warnings

    robot = load_robot("panda")
    targets = _targets(robot, 4, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = solve_ik(robot, targets, tol_position=1e300, tol_rotation=1e300)
    assert bool(result.success.any(dim=-1).all())
