"""Whole-body IK (several targets, active joints, posture) on a small two-arm tree, float64."""

from __future__ import annotations

import math
import os
from types import SimpleNamespace

import pytest
import torch

from torchik import Robot
from torchik.ik import solve_ik
from torchik.ik.wholebody import WholeBodyResult, solve_wholebody
from torchik.ik.wholebody.solve import integrate

AXES = {"x": "1 0 0", "y": "0 1 0", "z": "0 0 1"}


def _arm(side: str, y: float, axes: str) -> list[str]:
    """An arm hanging off ``torso`` at ``y``: one revolute joint per letter of ``axes``, links
    0.2 m apart along x, a fixed ``<side>_hand`` 0.1 m beyond the last joint."""
    parts, parent = [], "torso"
    for i, axis in enumerate(axes):
        child = f"{side}_{i}"
        xyz = f"0 {y} 0.1" if i == 0 else "0.2 0 0"
        parts.append(
            f'<link name="{child}"/><joint name="{side}_j{i}" type="revolute">'
            f'<parent link="{parent}"/><child link="{child}"/><origin xyz="{xyz}"/>'
            f'<axis xyz="{AXES[axis]}"/><limit lower="-2.5" upper="2.5" effort="1" velocity="1"/>'
            "</joint>"
        )
        parent = child
    parts.append(
        f'<link name="{side}_hand"/><joint name="{side}_hand_joint" type="fixed">'
        f'<parent link="{parent}"/><child link="{side}_hand"/><origin xyz="0.1 0 0"/></joint>'
    )
    return parts


TWO_ARMS = (
    '<robot name="two_arms"><link name="base"/><link name="torso"/>'
    '<joint name="waist" type="revolute"><parent link="base"/><child link="torso"/>'
    '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'
    + "".join(_arm("left", 0.2, "zyxyzx") + _arm("right", -0.2, "zyy"))
    + "</robot>"
)
HANDS = ["left_hand", "right_hand"]


@pytest.fixture
def robot() -> Robot:
    return Robot.from_urdf(TWO_ARMS, dtype=torch.float64)


def _targets(robot: Robot, n: int, seed: int = 0) -> tuple[dict, torch.Tensor]:
    """Left hand pose, right hand position of ``n`` random configurations."""
    q = robot.random_configuration(n, torch.Generator().manual_seed(seed))
    poses = robot.forward_kinematics(q, HANDS)
    return {"left_hand": poses[:, 0], "right_hand": poses[:, 1, :3, 3]}, q


def test_two_targets_are_met_and_checked_by_fk(robot):
    targets, _ = _targets(robot, 20)
    g = torch.Generator().manual_seed(1)
    # 4 slots: 2 solve about 98.6 % of this arm's targets (1 775 of 1 800 in batches of 20)
    result = solve_wholebody(robot, targets, generator=g, num_seeds=4)
    assert isinstance(result, WholeBodyResult)
    assert result.q.shape == (20, 4, robot.dof)
    assert bool(result.success.any(-1).all())
    best = result.best()
    poses = robot.forward_kinematics(best.q[:, 0], HANDS)
    assert (poses[:, 0, :3, 3] - targets["left_hand"][:, :3, 3]).norm(dim=-1).max() < 1e-3
    assert (poses[:, 1, :3, 3] - targets["right_hand"]).norm(dim=-1).max() < 1e-3
    rot = poses[:, 0, :3, :3].transpose(-1, -2) @ targets["left_hand"][:, :3, :3]
    cos = ((rot.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2).clamp(-1, 1)
    assert torch.arccos(cos).max() < math.radians(1.0)
    assert set(result.position_errors) == set(HANDS)
    assert torch.equal(
        result.rotation_errors["right_hand"], torch.zeros(20, 4, dtype=torch.float64)
    )
    worst = torch.maximum(result.position_errors["left_hand"], result.position_errors["right_hand"])
    torch.testing.assert_close(result.position_error, worst)


def test_inactive_joints_keep_their_held_values(robot):
    targets, q_true = _targets(robot, 10, seed=2)
    names = list(robot.joint_names)
    active = [name for name in names if name.startswith("left")]
    rest = q_true.clone()  # the right arm and the waist held where the targets were made
    rest[:, [names.index(a) for a in active]] = 0.0
    g = torch.Generator().manual_seed(3)
    result = solve_wholebody(
        robot, targets, active=active, rest=rest, num_seeds=4, max_iters=400, generator=g
    )
    held = [i for i, name in enumerate(names) if name not in active]
    assert torch.equal(result.q[..., held], rest[:, None, held].expand(-1, 4, -1))
    assert bool(result.success.any(-1).all())


def test_held_joints_at_one_rest_take_pooled_seeds_within_their_box(robot, monkeypatch):
    """Joints held at one rest for every target (an arm alone, a scene's free bodies): the
    seeds are the pool members nearest the targets, drawn within the rows' shared box (the
    held joints at their rest), and the compiled loop restarts from such pools; a rest per
    target (boxes that differ) keeps uniform seeds in each row's box."""
    from torchik.ik.wholebody import seeds as wholebody_seeds
    from torchik.ik.wholebody.solve import _problem
    from torchik.kinematics import native

    names = list(robot.joint_names)
    active = [name for name in names if name.startswith("left")]
    held = [i for i, name in enumerate(names) if name not in active]
    q_true = robot.random_configuration(40, torch.Generator().manual_seed(31))
    rest = q_true[0].clone()
    q_true[:, held] = rest[held]  # the waist and the right arm where the rest holds them
    targets = {"left_hand": robot.forward_kinematics(q_true, "left_hand")}

    def first_seeds(rest, pool_size):
        problem = _problem(robot, targets, None, active, rest, 0.0, False, None, 1, 1e-3,
                           0.02, None, None)[0]  # fmt: skip
        seeder = wholebody_seeds.wholebody_seeder(problem, 1, pool_size,
                                                  torch.Generator().manual_seed(5))  # fmt: skip
        return seeder(torch.arange(40), torch.zeros(40, dtype=torch.long)), problem

    pooled, problem = first_seeds(rest, 256)
    uniform = first_seeds(rest, 0)[0]
    assert torch.equal(pooled[:, held], rest[held].expand(40, -1))
    assert torch.equal(uniform[:, held], rest[held].expand(40, -1))

    def distance(q):  # the hand's distance to its target, in the seeds' pose metric
        hand = robot.forward_kinematics(q, "left_hand")
        return (hand[:, :3, 3] - targets["left_hand"][:, :3, 3]).norm(dim=-1)

    assert float(distance(pooled).mean()) < 0.5 * float(distance(uniform).mean())
    box = wholebody_seeds._shared_box(problem.limits)
    assert box is not None and box.lower.shape == (1, robot.dof)
    per_target = rest.expand(40, -1).clone()
    per_target[1:, held[0]] += 0.01  # a rest per target: boxes that differ
    drawn, real_pool = [], wholebody_seeds._random_pool
    monkeypatch.setattr(wholebody_seeds, "_random_pool",
                        lambda *a: drawn.append(a) or real_pool(*a))  # fmt: skip
    seeds, problem = first_seeds(per_target, 256)
    assert wholebody_seeds._shared_box(problem.limits) is None and not drawn
    assert wholebody_seeds._shared_box(problem.limits.rows(torch.arange(0))) is None  # no row
    none = {"left_hand": targets["left_hand"][:0]}  # no target, a box: an empty answer
    assert solve_wholebody(robot, none, upper=robot.upper, max_iters=5).q.shape == (0, 2, 10)
    assert torch.equal(seeds[:, held], per_target[:, held])
    calls, real = [], native.lm_loop
    monkeypatch.setattr(native, "lm_loop", lambda *a, **k: calls.append(k) or real(*a, **k))
    result = solve_wholebody(robot, targets, active=active, rest=rest,
                             generator=torch.Generator().manual_seed(6))  # fmt: skip
    assert bool(result.success.any(-1).all()) and drawn
    assert len(calls) == 1 and calls[0]["restarts"] is not None  # one call, its own restarts
    assert torch.equal(result.q[..., held], rest[held].expand(40, 2, -1))


def test_a_target_out_of_reach_of_the_active_joints_fails(robot):
    targets, q_true = _targets(robot, 1, seed=4)
    rest = q_true + 0.5  # the right arm held away from where its target was made
    active = [n for n in robot.joint_names if n.startswith("left")]
    result = solve_wholebody(robot, targets, active=active, rest=rest.clamp(-1, 1), max_iters=30)
    assert not bool(result.success.any())


def test_posture_pulls_towards_rest_when_redundant(robot):
    # position targets for both hands: 6 equations, 7 + 3 + 1 = 10 joints
    targets, q_true = _targets(robot, 16, seed=5)
    targets["left_hand"] = targets["left_hand"][:, :3, 3]
    noise = torch.randn(
        q_true.shape, generator=torch.Generator().manual_seed(6), dtype=q_true.dtype
    )
    seeds = torch.clamp(q_true + 0.3 * noise, robot.lower, robot.upper)[:, None]  # not the answer
    rest = robot.neutral()
    plain = solve_wholebody(robot, targets, seeds=seeds)
    pulled = solve_wholebody(robot, targets, seeds=seeds, posture=0.5, posture_iters=40)
    assert bool(plain.success.all()) and bool(pulled.success.all())
    d_plain = (plain.q - rest).norm(dim=-1)
    d_pulled = (pulled.q - rest).norm(dim=-1)
    assert bool((d_pulled <= d_plain + 1e-9).all())
    assert float(d_pulled.mean()) < 0.9 * float(d_plain.mean())


def test_one_link_keeps_the_whole_body_step(robot, monkeypatch):
    """A whole-body problem of one link on a fixed base looks like ``solve_ik``'s to the LM
    kernels, but its step has the posture and the inactive columns: the CPU's compiled loop
    takes it with them (Triton's, which steps plain LM, never serves it). With the posture, a
    redundant hand's answer moves towards rest, as on two links."""
    from torchik.kinematics import native

    calls, real = [], native.lm_loop
    monkeypatch.setattr(native, "lm_loop", lambda *a, **k: calls.append(k) or real(*a, **k))
    targets, q_true = _targets(robot, 16, seed=5)
    one = {"left_hand": targets["left_hand"][:, :3, 3]}
    noise = torch.randn(q_true.shape, generator=torch.Generator().manual_seed(6),
                        dtype=q_true.dtype)  # fmt: skip
    seeds = torch.clamp(q_true + 0.3 * noise, robot.lower, robot.upper)[:, None]
    plain = solve_wholebody(robot, one, seeds=seeds)
    pulled = solve_wholebody(robot, one, seeds=seeds, posture=0.5, posture_iters=40)
    assert {k["posture"] for k in calls} == {0.0, 0.5}
    assert all(k["columns"] is not None for k in calls)
    assert bool(plain.success.all()) and bool(pulled.success.all())
    rest = robot.neutral()
    assert float((pulled.q - rest).norm(dim=-1).mean()) < float(
        (plain.q - rest).norm(dim=-1).mean()
    )


def test_the_compiled_loop_solves_as_the_host_loop(robot):
    """The CPU's compiled loop (the default there) and the host loop (PyTorch operations) on
    the same seeds, without restarts: the same answers, float64, up to rounding; with held
    joints and the posture too."""
    targets, q_true = _targets(robot, 24, seed=7)
    noise = torch.randn(q_true.shape, generator=torch.Generator().manual_seed(8),
                        dtype=q_true.dtype)  # fmt: skip
    seeds = torch.clamp(q_true + 0.3 * noise, robot.lower, robot.upper)[:, None]
    active = [n for n in robot.joint_names if n != "right_j1"]
    for options in ({}, dict(active=active, rest=q_true, posture=0.3, posture_iters=5)):
        out = {loop: solve_wholebody(robot, targets, seeds=seeds, loop=loop, **options)
               for loop in ("auto", "host")}  # fmt: skip
        torch.testing.assert_close(out["auto"].q, out["host"].q, atol=1e-9, rtol=0)
        assert torch.equal(out["auto"].success, out["host"].success)
        assert bool(out["auto"].success.mean(dtype=torch.float64) > 0.9)


def test_the_compiled_loop_restarts_stalled_rows_from_the_seeders_pools(robot, monkeypatch):
    """On the CPU and a fixed base, random seeds: the compiled loop takes the seeder's pools
    (``restarts``, one per ``RESTART_ROWS`` rows, 4 here, one at least) and starts stalled rows
    again within the call; targets out of reach make every slot restart (its attempts
    counted), reachable ones are still met. Given seeds: no pools."""
    from torchik.ik.wholebody import seeds as wholebody_seeds
    from torchik.ik.wholebody.solve import WholeBodyLM
    from torchik.kinematics import native

    monkeypatch.setattr(wholebody_seeds, "RESTART_ROWS", 4)
    attempts, real = [], native.lm_loop
    monkeypatch.setattr(native, "lm_loop", lambda *a, **k: attempts.append(k.get("restarts"))
                        or real(*a, **k))  # fmt: skip
    targets, _ = _targets(robot, 6, seed=21)
    far = {"left_hand": targets["left_hand"].clone(), "right_hand": targets["right_hand"]}
    far["left_hand"][:3, :3, 3] += 3.0  # three targets out of reach
    result = solve_wholebody(robot, far, generator=torch.Generator().manual_seed(2))
    assert attempts and all(r is not None for r in attempts)
    configs, features, aims, attempt, k = attempts[-1]
    assert k == 2 and configs.shape == (3, 2 * 256, robot.dof) and aims.shape[0] == 12
    assert bool((attempt.view(6, 2)[:3] > 0).all())  # the far targets' slots restarted
    assert result.success.any(-1).tolist() == [False] * 3 + [True] * 3
    attempts.clear()  # given seeds: no pool, the caller's rows alone
    solve_wholebody(robot, targets, seeds=robot.random_configuration(2)[None].expand(6, 2, -1))
    assert attempts and all(r is None for r in attempts)
    monkeypatch.setattr(wholebody_seeds, "RESTART_ROWS", 13)
    attempts.clear()  # 12 rows: one pool all the same, the solve one call
    result = solve_wholebody(robot, far, generator=torch.Generator().manual_seed(2))
    assert len(attempts) == 1 and attempts[0][0].shape == (1, 2 * 256, robot.dof)
    assert result.success.any(-1).tolist() == [False] * 3 + [True] * 3
    assert WholeBodyLM().compiles_on(robot)


@pytest.mark.parametrize("loop", ["auto", "host"])
def test_random_seeds_do_not_restart_with_restarts_false(robot, loop, monkeypatch):
    """``restarts=False`` holds for random seeds too (it was ignored: stalled slots restarted
    all the same): the seeder draws once, the compiled loop gets no restart pools; with the
    default, targets out of reach make the slots restart."""
    from torchik.ik.wholebody import seeds as wholebody_seeds
    from torchik.ik.wholebody import solve as wholebody
    from torchik.kinematics import native

    draws, pools, real_seeder, real_loop = [], [], wholebody_seeds.wholebody_seeder, native.lm_loop

    def seeder(*args, **kwargs):
        made = real_seeder(*args, **kwargs)
        return lambda rows, attempt: draws.append(len(rows)) or made(rows, attempt)

    monkeypatch.setattr(wholebody, "wholebody_seeder", seeder)
    monkeypatch.setattr(native, "lm_loop", lambda *a, **k: pools.append(k.get("restarts"))
                        or real_loop(*a, **k))  # fmt: skip
    targets, _ = _targets(robot, 4, seed=23)
    targets["left_hand"] = targets["left_hand"].clone()
    targets["left_hand"][:2, :3, 3] += 3.0  # two targets out of reach: their slots stall
    g = torch.Generator().manual_seed(0)
    held = solve_wholebody(robot, targets, loop=loop, restarts=False, generator=g)
    assert draws == [8] and all(p is None for p in pools)
    assert held.success.any(-1).tolist()[:2] == [False, False]
    draws.clear()
    solve_wholebody(robot, targets, loop=loop, generator=g)
    assert len(draws) > 1 or any(p is not None for p in pools)  # restarts: drawn again, or pools


@pytest.mark.parametrize("loop", ["auto", "host"])
def test_given_seeds_restart_where_asked(robot, loop):
    """Seeds pinned at a corner of the limits stall for every target; with ``restarts`` the
    stalled slots start again from fresh seeds (between the compiled loop's calls, or the host
    loop's iterations) and every target is met; without, the seeds are all there is."""
    targets, _ = _targets(robot, 20, seed=5)
    corner = robot.upper[None]
    stuck = solve_wholebody(robot, targets, seeds=corner, loop=loop)
    assert not bool(stuck.success.any())
    g = torch.Generator().manual_seed(0)
    freed = solve_wholebody(robot, targets, seeds=corner, loop=loop, restarts=True, generator=g)
    assert bool(freed.success.all()) and freed.q.shape == (20, 1, robot.dof)
    with pytest.raises(TypeError, match="restarts"):
        solve_wholebody(robot, targets, restarts=1)


def test_one_grouped_call_gives_the_chunked_calls_answers(robot, monkeypatch):
    """With the kernel's restarts a solve is one call of the compiled loop, the targets' slots
    stepped together in chunks with the early stop between them (``grouped_chunk``): the same
    answers, bit for bit, as calls of ``COMPILED_SYNC_EVERY`` iterations with
    :func:`torchik.ik.fixed.finish_groups` between them (reachable and unreachable targets:
    early stops and restarts)."""
    from torchik.ik.wholebody import seeds as wholebody_seeds
    from torchik.ik.wholebody import solve as wholebody
    from torchik.kinematics import native

    monkeypatch.setattr(wholebody_seeds, "RESTART_ROWS", 4)
    targets, _ = _targets(robot, 8, seed=31)
    targets["left_hand"][:2, :3, 3] += 3.0  # two targets out of reach
    calls, real = [], native.lm_loop
    monkeypatch.setattr(native, "lm_loop", lambda *a, **k: calls.append(k) or real(*a, **k))
    one = solve_wholebody(robot, targets, generator=torch.Generator().manual_seed(3))
    assert len(calls) == 1 and calls[0]["grouped_chunk"] == wholebody.COMPILED_SYNC_EVERY
    assert calls[0]["n_iters"] == wholebody.MAX_ITERS + 1
    monkeypatch.setattr(native, "lm_loop", lambda *a, **k: calls.append(k)
                        or real(*a, **{**k, "grouped_chunk": 0}))  # fmt: skip
    monkeypatch.setattr(wholebody, "_solver", lambda problem, iters, loop, compiled, *_:
                        wholebody._made(iters, loop, wholebody.COMPILED_SYNC_EVERY))  # fmt: skip
    calls.clear()
    chunked = solve_wholebody(robot, targets, generator=torch.Generator().manual_seed(3))
    assert len(calls) > 1
    assert torch.equal(one.q, chunked.q) and torch.equal(one.iterations, chunked.iterations)
    assert one.success.any(-1).tolist() == [False] * 2 + [True] * 6


def test_a_warm_start_of_one_slot_is_one_compiled_call(robot, monkeypatch):
    """Given seeds, one per target, without restarts (a control loop's warm start): nothing
    happens between the compiled loop's calls, so the solve is one call, the same answers bit
    for bit as calls of ``COMPILED_SYNC_EVERY`` iterations (an unreachable target's slot ran
    38 calls of 4 iterations: 15 ms a G1 call instead of 1.8); two slots still run in chunks,
    the early stop between them."""
    from torchik.ik.wholebody import solve as wholebody
    from torchik.kinematics import native

    targets, q = _targets(robot, 6, seed=41)
    targets["left_hand"][:2, :3, 3] += 3.0  # two targets out of reach
    seeds = (q + 0.2)[:, None].clamp(robot.lower, robot.upper)
    calls, real = [], native.lm_loop
    monkeypatch.setattr(native, "lm_loop", lambda *a, **k: calls.append(k) or real(*a, **k))
    one = solve_wholebody(robot, targets, seeds=seeds)
    assert [k["n_iters"] for k in calls] == [wholebody.MAX_ITERS + 1]
    calls.clear()
    solve_wholebody(robot, targets, seeds=seeds.expand(-1, 2, -1))
    assert len(calls) > 1 and calls[0]["n_iters"] == wholebody.COMPILED_SYNC_EVERY
    # the fixed loop's runner (run_fixed), in one call and in calls of COMPILED_SYNC_EVERY
    monkeypatch.setattr(wholebody.WholeBodyLM, "solve_in_one_call",
                        lambda self, problem, q: self.solve(problem, q))  # fmt: skip
    calls.clear()
    runner = solve_wholebody(robot, targets, seeds=seeds)
    assert [k["n_iters"] for k in calls] == [wholebody.MAX_ITERS + 1]
    monkeypatch.setattr(wholebody, "_solver", lambda problem, iters, loop, compiled, *_:
                        wholebody._made(iters, loop, wholebody.COMPILED_SYNC_EVERY))  # fmt: skip
    calls.clear()
    chunked = solve_wholebody(robot, targets, seeds=seeds)
    assert len(calls) == (wholebody.MAX_ITERS + 1) // wholebody.COMPILED_SYNC_EVERY + 1
    for other in (runner, chunked):
        assert torch.equal(one.q, other.q) and torch.equal(one.iterations, other.iterations)
    assert one.success[:, 0].tolist() == [False] * 2 + [True] * 4


def test_weights_trade_targets_that_cannot_both_be_met(robot):
    # both hands at one point: only reachable approximately, the heavier hand wins
    far = torch.tensor([[0.6, 0.0, 0.1]], dtype=torch.float64)
    targets = {"left_hand": far, "right_hand": far}
    g = torch.Generator().manual_seed(7)
    result = solve_wholebody(robot, targets, weights={"left_hand": 100.0}, generator=g)
    best = result.best()
    assert float(best.position_errors["left_hand"]) < float(best.position_errors["right_hand"])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"targets": {"nose": "pose"}}, ValueError, "unknown link 'nose'"),
        ({"weights": {"left_hand": -1.0}}, ValueError, "weight of 'left_hand'"),
        ({"weights": {"left_hand": 0.0}}, ValueError, "weight of 'left_hand' is 0: .*leave the"),
        ({"weights": {"nose": 1.0}}, ValueError, "weights name 'nose'"),
        (
            {"targets": {"left_hand": torch.zeros(2, 3), "right_hand": torch.zeros(3, 3)}},
            ValueError,
            "target 'right_hand' has batch shape",
        ),  # fmt: skip
        ({"targets": {"left_hand": torch.zeros(2, 5)}}, ValueError, "target 'left_hand': target"),
        ({"targets": {}}, ValueError, "non-empty dict"),
        ({"active": ["waist", "elbow"]}, ValueError, "unknown active joints"),
        ({"rest": torch.zeros(3)}, ValueError, "rest must be"),
        ({"posture": 2.0}, ValueError, "posture"),
    ],
)
def test_bad_input_raises_one_clear_line(robot, kwargs, error, match):
    targets = kwargs.pop(
        "targets", {"left_hand": torch.zeros(2, 3), "right_hand": torch.zeros(2, 3)}
    )
    with pytest.raises(error, match=match) as info:
        solve_wholebody(robot, targets, **kwargs)
    assert "\n" not in str(info.value)


def test_solve_ik_places_one_link_and_points_to_solve_wholebody(robot):
    target = torch.zeros(3, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"several links at once: torchik.solve_wholebody"):
        solve_ik(robot, {"left_hand": target})
    with pytest.raises(TypeError, match="posture"):
        solve_ik(robot, target, "left_hand", position_only=True, posture=0.1)


def test_an_inactive_joint_held_outside_its_limits_is_refused(robot):
    rest = robot.neutral().clone()
    rest[0] = 3.0
    targets = {"left_hand": torch.zeros(3, dtype=torch.float64)}
    with pytest.raises(ValueError, match="inactive joint 'waist'"):
        solve_wholebody(robot, targets, active=list(robot.joint_names[1:]), rest=rest)


def test_integrate_uses_the_robots_own_when_it_has_one():
    q, step = torch.zeros(2, 3), torch.ones(2, 3)
    assert torch.equal(integrate(SimpleNamespace(), q, step), step)
    floating = SimpleNamespace(integrate=lambda q, v: q + 2 * v)
    assert torch.equal(integrate(floating, q, step), 2 * step)


# ---------------------------------------------------------------- a floating base
BASE = [f"root_joint/{c}" for c in ("x", "y", "z", "qw", "qx", "qy", "qz")]


@pytest.fixture
def floater() -> Robot:
    return Robot.from_urdf(TWO_ARMS, dtype=torch.float64, floating_base=True)


def _floating_targets(robot: Robot, n: int, seed: int) -> tuple[dict, torch.Tensor]:
    """Both hands' poses of ``n`` random configurations, the base anywhere in a 2 m cube."""
    g = torch.Generator().manual_seed(seed)
    q = robot.random_configuration(n, g)
    q[:, :3] = 2 * torch.rand(n, 3, generator=g, dtype=q.dtype) - 1
    return dict(zip(HANDS, robot.forward_kinematics(q, HANDS).unbind(1), strict=True)), q


def _fk_errors(robot: Robot, q: torch.Tensor, targets: dict) -> tuple[float, float]:
    """Worst position (m) and rotation (rad) error of ``q (n, nq)`` by FK."""
    poses = robot.forward_kinematics(q, HANDS)
    want = torch.stack([targets[h] for h in HANDS], dim=1)
    pos = (poses[..., :3, 3] - want[..., :3, 3]).norm(dim=-1).max()
    rot = poses[..., :3, :3].transpose(-1, -2) @ want[..., :3, :3]
    cos = ((rot.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2).clamp(-1, 1)
    return float(pos), float(torch.arccos(cos).max())


def test_floating_base_targets_are_met_with_the_base_free(floater):
    targets, q_true = _floating_targets(floater, 30, seed=10)
    result = solve_wholebody(floater, targets, generator=torch.Generator().manual_seed(11))
    assert result.q.shape == (30, 2, floater.nq)
    assert bool(result.success.any(-1).all())
    best = result.best().q[:, 0]
    pos, rot = _fk_errors(floater, best, targets)
    assert pos < 1e-3 and rot < math.radians(1.0)
    torch.testing.assert_close(result.q[..., 3:7].norm(dim=-1), torch.ones(30, 2).double())
    assert float((best[:, :3] - floater.neutral()[:3]).norm(dim=-1).min()) > 0.05  # it moved


def test_floating_base_given_seeds_keep_a_unit_quaternion(floater):
    targets, q_true = _floating_targets(floater, 8, seed=12)
    seeds = floater.random_configuration(8 * 4, torch.Generator().manual_seed(13)).view(8, 4, -1)
    seeds[..., 3:7] *= 3.0  # any nonzero norm is a rotation; the solver normalises it
    result = solve_wholebody(floater, targets, seeds=seeds, max_iters=300)
    torch.testing.assert_close(result.q[..., 3:7].norm(dim=-1), torch.ones(8, 4).double())
    assert bool(result.success.any(-1).all())


def test_exact_seeds_and_a_held_rest_with_longer_quaternions_are_the_same_rotations(floater):
    """A quaternion of any length is its rotation: exact seeds scaled by 2 converge at once
    (a clamp of each component to [-1, 1] turned them: 2-3 iterations, 0.3 mm off), and a
    held base's rest scaled by 3 is taken (it was 'held outside its limits')."""
    targets, q_true = _floating_targets(floater, 6, seed=21)
    for scale in (2.0, 0.5):
        seeds = q_true[:, None].clone()
        seeds[..., 3:7] *= scale
        result = solve_wholebody(floater, targets, seeds=seeds)
        assert int(result.iterations.max()) == 0 and bool(result.success.all())
        torch.testing.assert_close(result.q[..., 3:7].norm(dim=-1), torch.ones(6, 1).double())
    rest = q_true.clone()
    rest[:, 3:7] *= 3.0
    joints = [n for n in floater.joint_names if n not in BASE]
    g = torch.Generator().manual_seed(22)
    result = solve_wholebody(floater, targets, rest=rest, active=joints, num_seeds=8,
                             max_iters=300, generator=g)  # fmt: skip
    torch.testing.assert_close(result.q[..., :7], q_true[:, None, :7].expand(-1, 8, -1))
    assert bool(result.success.any(-1).all())
    with pytest.raises(ValueError, match="^rest: the quaternion of floating base 0 is zero"):
        solve_wholebody(floater, targets, rest=torch.zeros(floater.dof, dtype=torch.float64))


def test_the_base_frame_is_made_once_per_robot_and_follows_its_dtype(floater):
    """A problem's floating-base frame (FK at the neutral configuration) is kept with the
    robot's tree: the next problem (the next call of a control loop) takes it as is, and a
    robot moved to another dtype gets its own."""
    from torchik.ik.wholebody.solve import _problem

    targets, _ = _floating_targets(floater, 2, seed=3)

    def frame(robot) -> torch.Tensor:
        problem = _problem(robot, targets, None, None, None, 0.0, False, None, 1, 1e-3, 0.01,
                           None, None)[0]  # fmt: skip
        return problem.base_origin

    first = frame(floater)
    assert frame(floater) is first
    expected = floater.forward_kinematics(floater.neutral(), floater.base_link(0))
    torch.testing.assert_close(first, expected, rtol=0, atol=0)
    floater.to(torch.float32)
    assert frame(floater).dtype == torch.float32


def test_floating_base_inactive_joints_and_base_keep_their_values(floater):
    targets, q_true = _floating_targets(floater, 10, seed=14)
    names = list(floater.joint_names)
    left = [name for name in names if name.startswith("left")]
    g = torch.Generator().manual_seed(15)
    for active in (["root_joint", *left], left, BASE + left):
        rest = q_true.clone()
        rest[:, [names.index(a) for a in left]] = 0.0
        result = solve_wholebody(  # 300 iterations: a 6-joint arm's pose from uniform seeds
            floater, targets, active=active, rest=rest, num_seeds=4, generator=g, max_iters=300
        )
        held = [i for i, name in enumerate(names) if name not in active and name not in BASE]
        held += list(range(7)) if active == left else []
        assert torch.equal(result.q[..., held], rest[:, None, held].expand(-1, 4, -1))
        assert bool(result.success.any(-1).all())


def test_floating_base_half_active_is_refused(floater):
    targets, _ = _floating_targets(floater, 1, seed=16)
    with pytest.raises(ValueError, match="floating base moves as a whole"):
        solve_wholebody(floater, targets, active=["root_joint/x", "left_j0"])


def test_floating_base_posture_pulls_the_joints_towards_rest(floater):
    targets, q_true = _floating_targets(floater, 12, seed=17)
    targets = {hand: pose[:, :3, 3] for hand, pose in targets.items()}  # positions: redundant
    noise = torch.randn(q_true.shape, generator=torch.Generator().manual_seed(18)).double()
    seeds = q_true + 0.2 * noise  # near, not the answer; the quaternion is normalised
    seeds = torch.clamp(seeds, floater.lower, floater.upper)[:, None]
    plain = solve_wholebody(floater, targets, seeds=seeds)
    pulled = solve_wholebody(floater, targets, seeds=seeds, posture=0.5, posture_iters=40)
    assert bool(plain.success.all()) and bool(pulled.success.all())
    rest = floater.neutral()
    d_plain, d_pulled = (
        (plain.q[..., 7:] - rest[7:]).norm(dim=-1),
        (pulled.q[..., 7:] - rest[7:]).norm(dim=-1),
    )
    assert float(d_pulled.mean()) < 0.9 * float(d_plain.mean())


def test_fit_base_recovers_the_base_of_the_configuration_behind_the_targets(floater):
    from torchik.ik.wholebody import fit_base
    from torchik.ik.wholebody.solve import _problem

    targets, q_true = _floating_targets(floater, 20, seed=19)
    targets["right_hand"] = targets["right_hand"][:, :3, 3]  # a position target counts too
    problem = _problem(floater, targets, None, None, None, 0.0, False, None, 1, 1e-3, 0.01,
                       None, None)[0]  # fmt: skip
    wrong = floater.random_configuration(20, torch.Generator().manual_seed(20))
    fitted = fit_base(problem, torch.cat((wrong[:, :7], q_true[:, 7:]), dim=-1), torch.arange(20))
    torch.testing.assert_close(fitted[:, 7:], q_true[:, 7:])
    pose = floater.forward_kinematics(fitted, floater.root)
    torch.testing.assert_close(pose, floater.forward_kinematics(q_true, floater.root))


def test_the_compiled_loop_places_a_restarted_floating_base_as_fit_base_does(floater, monkeypatch):
    """On a floating base the compiled loop restarts stalled rows from the seeder's pools too
    (a solve is one call), each restart's base placed where its links best fit the row's
    targets: :func:`fit_base` of the pool's member, float64, up to rounding (Horn's
    quaternion there, an SVD here), a pose and a position target. Hands 3 m apart: every row
    stalls after its first iteration (``attempt_iters=1``) and restarts once."""
    from torchik.ik.wholebody import fit_base
    from torchik.ik.wholebody import seeds as wholebody_seeds
    from torchik.ik.wholebody.solve import _problem
    from torchik.kinematics import native

    monkeypatch.setattr(wholebody_seeds, "RESTART_ROWS", 4)
    targets, _ = _floating_targets(floater, 3, seed=41)
    targets["left_hand"] = targets["left_hand"].clone()
    targets["left_hand"][:, :3, 3] += 3.0
    targets["right_hand"] = targets["right_hand"][:, :3, 3]
    seen, real = [], native.lm_loop

    def one_iteration(q, *args, **kwargs):
        real(q, *args, **{**kwargs, "n_iters": 1, "attempt_iters": 1})
        seen.append((q.clone(), kwargs["restarts"]))

    monkeypatch.setattr(native, "lm_loop", one_iteration)
    solve_wholebody(floater, targets, generator=torch.Generator().manual_seed(42))
    assert len(seen) == 1
    q, (configs, features, aims, attempt, k) = seen[0]
    assert attempt.tolist() == [1] * 6 and k == 2
    problem = _problem(floater, targets, None, None, None, 0.0, False, None, k, 1e-3, 0.01,
                       None, None)[0]  # fmt: skip
    scores = (aims.double() @ features[0].double().T).view(6, k, -1)  # pool 0, rank 0
    rows = torch.arange(6)
    sub = (rows % k + 1) % k
    member = scores[rows, sub].argmin(-1) + sub * scores.shape[-1]
    expected = fit_base(problem, configs[0, member], rows)
    torch.testing.assert_close(q[:, 7:], expected[:, 7:], atol=0, rtol=0)
    torch.testing.assert_close(q[:, :7], expected[:, :7], atol=1e-10, rtol=0)


def test_free_limit_columns_maps_step_columns_to_coordinates(floater):
    from torchik.ik.lm import free_limit_columns
    from torchik.ik.wholebody.solve import _problem

    targets, _ = _floating_targets(floater, 1, seed=21)
    problem = _problem(floater, targets, None, None, None, 0.0, False, None, 1, 1e-3, 0.01,
                       None, None)[0]  # fmt: skip
    q = floater.neutral()[None].clone()
    q[0, 7] = floater.upper[7]  # the first joint (step column 6) on its upper limit
    q[0, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0])  # quaternion entries at ±1: not limits
    q[0, 0] = 1e9  # nor is a far base position
    jac = torch.ones(1, 1, floater.nv, dtype=torch.float64)  # every column pushes upwards
    error, weights = torch.ones(1, 1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    freed = free_limit_columns(problem, q, jac, error, weights, problem.coordinates)
    blocked = torch.zeros(floater.nv, dtype=torch.bool)
    blocked[6] = True
    assert torch.equal(freed[0, 0] == 0, blocked)


@pytest.mark.skipif(
    not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1",
    reason="Triton's loop kernel runs on CUDA or in Triton's interpreter",
)
def test_triton_loop_kernel_solves_as_the_compiled_loop(monkeypatch):
    """With ``FUSED_LOOP`` (off by default until timed on a GPU) a whole-body solve on the
    fused kernels takes Triton's loop kernel with both links: the answers are those without
    it (the CPU's compiled loop in the interpreter, the captured iteration on CUDA: the same
    chunks and seeds), float64, up to rounding."""
    pytest.importorskip("triton", reason="the fused kernels need Triton")
    from torchik.ik.wholebody import solve as wholebody
    from torchik.kinematics import fused

    device = "cuda" if torch.cuda.is_available() else "cpu"  # no interpreter on a GPU machine
    robot = Robot.from_urdf(TWO_ARMS, dtype=torch.float64, backend="fused").to(device)
    targets, q_true = _targets(robot, 4, seed=9)
    noise = torch.randn(q_true.shape, generator=torch.Generator().manual_seed(11),
                        dtype=q_true.dtype).to(device)  # fmt: skip
    seeds = torch.clamp(q_true + 0.2 * noise, robot.lower, robot.upper)[:, None]
    calls, real = [], fused.lm_loop
    monkeypatch.setattr(fused, "lm_loop", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    out = {}
    for on in (False, True):
        monkeypatch.setattr(wholebody, "FUSED_LOOP", on)
        out[on] = solve_wholebody(robot, targets, seeds=seeds, max_iters=30, loop="fixed")
    assert calls and all(len(links) == 2 for links in calls)
    torch.testing.assert_close(out[True].q, out[False].q, atol=1e-9, rtol=0)
    assert torch.equal(out[True].success, out[False].success)
    assert bool(out[True].success.any(-1).all())


# ---------------------------------------------------------------- scenes with free bodies
def _mjcf_scene(robot_body: str) -> str:
    """A MuJoCo scene: a free box first (base 0), then ``robot_body`` (skips the calling test
    where mujoco, the optional mjcf extra, is missing: the image of a GPU machine lacks it)."""
    pytest.importorskip("mujoco", reason="the optional mjcf extra (mujoco) is not installed")
    return f"""<mujoco model="scene"><worldbody>
      <body name="box" pos="1 0 0.5"><freejoint name="box_free"/><geom size="0.05"/></body>
      {robot_body}
    </worldbody></mujoco>"""


ARM3 = """<body name="upper" pos="0 0 0">
        <joint name="shoulder" type="hinge" axis="0 1 0" range="-2 2"/>
        <joint name="yaw" type="hinge" axis="0 0 1" range="-3 3"/><geom size="0.02"/>
        <body name="lower" pos="0.3 0 0">
          <joint name="elbow" type="hinge" axis="0 1 0" range="-2 2"/><geom size="0.02"/>
          <body name="hand" pos="0.3 0 0"/></body></body>"""


def test_a_floating_robot_in_a_scene_moves_its_base_and_holds_the_other_bodies():
    """The free body that carries the targets (base 1 here, not the first) moves, fitted to
    the targets and normalised; the box, which carries none, stays where the file puts it."""
    torso = (
        f'<body name="torso" pos="0 0 1"><freejoint name="root"/><geom size="0.1"/>{ARM3}</body>'
    )
    robot = Robot.from_mjcf(_mjcf_scene(torso), dtype=torch.float64)
    assert (
        robot.floating_bases == 2 and robot.base_link(1) == "torso" and robot.base_of("hand") == 1
    )
    with pytest.raises(ValueError, match="has 2 floating bases, no base 2"):
        robot.base_link(2)
    g = torch.Generator().manual_seed(20)
    q = robot.random_configuration(20, g)
    q[:, :7] = robot.default_configuration()[:7]
    q[:, 7:10] = torch.rand(20, 3, generator=g, dtype=q.dtype)
    targets = robot.forward_kinematics(q, "hand")
    result = solve_wholebody(robot, {"hand": targets}, generator=g)
    assert bool(result.success[:, 0].all())
    best = result.q[:, 0]
    torch.testing.assert_close(robot.forward_kinematics(best, "hand"), targets, atol=2e-3, rtol=0)
    assert torch.equal(result.q[..., :7], robot.default_configuration()[:7].expand(20, 2, 7))
    torch.testing.assert_close(best[:, 10:14].norm(dim=-1), torch.ones(20, dtype=torch.float64))
    assert float((best[:, 7:10] - robot.neutral()[7:10]).norm(dim=-1).min()) > 0.05  # it moved
    seeds = robot.random_configuration(20 * 2, g).view(20, 2, -1)
    seeds[..., :7] = robot.default_configuration()[:7]
    seeds[..., 10:14] *= 3.0  # any nonzero norm is a rotation; the solver normalises it
    given = solve_wholebody(robot, {"hand": targets}, seeds=seeds, max_iters=300)
    torch.testing.assert_close(given.q[..., 10:14].norm(dim=-1), torch.ones(20, 2).double())
    # the projection normalises the moving base's quaternion, wherever it sits in q
    from torchik.ik.wholebody.solve import _problem

    problem = _problem(robot, {"hand": targets}, None, None, None, 0.0, False, None, 2, 1e-3,
                       0.1, None, None)[0]  # fmt: skip
    assert problem.moving_bases == (1,)
    projected = problem.project(seeds.reshape(40, -1))
    torch.testing.assert_close(projected[:, 10:14].norm(dim=-1), torch.ones(40).double())
    assert torch.equal(projected[:, :7], seeds.reshape(40, -1)[:, :7])  # held: the box keeps it
    # it runs in every step of the captured chunks: no read of the device (so not
    # normalize_bases, which checks for a zero quaternion), each call the same
    from tests.ik.recorder import Recorder

    with Recorder() as seen:
        again = problem.project(seeds.reshape(40, -1))
    assert not seen.reads() and torch.equal(again, projected), seen.reads()


def test_a_fixed_arm_in_a_scene_holds_the_free_bodies():
    robot = Robot.from_mjcf(_mjcf_scene(ARM3.replace('pos="0 0 0"', 'pos="0 0 0.5"', 1)),
                            dtype=torch.float64)  # fmt: skip
    assert robot.floating_bases == 1 and robot.base_of("hand") is None
    g = torch.Generator().manual_seed(21)
    q = robot.random_configuration(20, g)
    targets = robot.forward_kinematics(q, "hand")[:, :3, 3]
    for posture in (0.0, 0.5):
        result = solve_wholebody(robot, {"hand": targets}, posture=posture, generator=g)
        assert bool(result.success.any(-1).all())
        assert torch.equal(result.q[..., :7], robot.default_configuration()[:7].expand(20, 2, 7))
    with pytest.raises(ValueError, match="'box_free' carries no target and stays at its rest"):
        solve_wholebody(robot, {"hand": targets}, active=["box_free", "shoulder"])


def _hand_built_scene(carried: bool):
    """A scene built as the MJCF reader builds one (no mujoco needed): a free box, and a
    6-joint arm on the world or (``carried``) on a free torso; with the arm's body alone as a
    robot of its own, the same joints from the same root."""
    from torchik.description import Joint, Origin, URDFModel

    def hinge(i: int, parent: str) -> Joint:
        axis = ((0.0, 0.0, 1.0), (0.0, 1.0, 0.0), (1.0, 0.0, 0.0))[i % 3]
        return Joint(f"j{i}", "revolute", parent, f"l{i}", origin=Origin((0.0, 0.0, 0.2)),
                     axis=axis, lower=-2.5, upper=2.5)  # fmt: skip

    first = "torso" if carried else "world"
    arm = [hinge(0, first)] + [hinge(i, f"l{i - 1}") for i in range(1, 6)]
    arm.append(Joint("hand_joint", "fixed", "l5", "hand", origin=Origin((0.1, 0.0, 0.0))))
    torso = [Joint("torso_free", "floating", "world", "torso", origin=Origin((0.0, 0.0, 1.0)))]
    body = (torso if carried else []) + arm
    box = Joint("box_free", "floating", "world", "box", origin=Origin((1.0, 0.0, 0.5)))

    def robot(*joints: Joint) -> Robot:
        model = URDFModel("scene", "world", ("world", *(j.child for j in joints)), joints)
        return Robot(model, dtype=torch.float64)

    return robot(box, *body), robot(*body)


@pytest.mark.parametrize("backend", ["auto", "reference"])
@pytest.mark.parametrize("carried", [False, True], ids=["fixed arm", "free torso"])
def test_a_scene_is_solved_as_the_body_that_carries_the_targets(carried, backend, monkeypatch):
    """A scene's solve runs on the body that carries the targets (``Robot.scene_body``), on
    the CPU's compiled loop (the scene itself ran PyTorch operations, 8-12 times slower) and
    where PyTorch operations step it (the reference backend here, CUDA beyond the CPU's
    route: fewer coordinates, the held bodies without boxes): the same answers bit for bit
    as that body loaded alone, the box held at its rest pose (or at a rest per target), with
    random seeds, given seeds and a posture."""
    from torchik.kinematics import native

    scene, alone = _hand_built_scene(carried)
    scene.backend = alone.backend = backend
    assert scene.floating_bases == 2 - (not carried) and alone.floating_bases == carried
    g = torch.Generator().manual_seed(3)
    q = scene.random_configuration(12, g)
    q[:, :7] = scene.neutral()[:7]
    targets = {"hand": scene.forward_kinematics(q, "hand"), "l2": scene.link_positions(q, "l2")}
    _, kept = scene.scene_body(1 if carried else None)
    calls, real = [], native.lm_loop
    monkeypatch.setattr(native, "lm_loop",
                        lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))  # fmt: skip
    for options in ({}, dict(posture=0.5), dict(seeds=q[:, None, kept] + 0.1)):
        seeds = options.pop("seeds", None)
        out = [solve_wholebody(robot, targets, generator=torch.Generator().manual_seed(4),
                               seeds=None if seeds is None else seeds if robot is alone else
                               scene.neutral().expand(12, 1, -1).index_copy(-1, kept, seeds),
                               **options) for robot in (scene, alone)]  # fmt: skip
        assert torch.equal(out[0].q[..., kept], out[1].q) and bool(out[0].success.any(-1).all())
        assert torch.equal(out[0].success, out[1].success)
        assert torch.equal(out[0].q[..., :7], scene.neutral()[:7].expand_as(out[0].q[..., :7]))
        assert torch.equal(out[0].continuous, scene.continuous)
    assert all(shape[-1] == alone.dof for shape in calls)  # the body's, compiled
    assert bool(calls) == (backend == "auto")
    rest = scene.neutral().expand(12, -1).clone()
    rest[:, 0] = torch.arange(12, dtype=rest.dtype)  # the box held somewhere else per target
    held = solve_wholebody(scene, targets, rest=rest, generator=g)
    assert torch.equal(held.q[..., :7], rest[:, None, :7].expand(12, 2, 7))
    assert bool(held.success.any(-1).all())


def test_solve_ik_places_a_link_of_a_scenes_fixed_tree():
    """``solve_ik`` in a scene (it refused every floating robot): a link of the fixed tree is
    solved as that tree alone (the same answers bit for bit, with random or given seeds, a box,
    any batch shape), the free box where the file puts it; a link on a free body is refused,
    naming solve_wholebody."""
    scene, alone = _hand_built_scene(carried=False)
    _, kept = scene.scene_body(None)
    g = torch.Generator().manual_seed(8)
    q = scene.random_configuration(6, g)
    targets = scene.forward_kinematics(q, "hand").view(2, 3, 4, 4)
    seeds = q.view(2, 3, 1, -1) + 0.05
    lower = scene.lower.expand(2, 3, -1).clone()
    lower[..., kept[0]] = q.view(2, 3, -1)[..., kept[0]] - 0.01  # the first joint near its answer
    for options in ({}, dict(seeds=seeds), dict(lower=lower)):
        cut = {k: v[..., kept] for k, v in options.items()}
        out = [solve_ik(robot, targets, "hand", generator=torch.Generator().manual_seed(9),
                        **given) for robot, given in ((scene, options), (alone, cut))]  # fmt: skip
        assert out[0].q.shape == (2, 3, out[1].q.shape[-2], scene.dof)
        assert torch.equal(out[0].q[..., kept], out[1].q) and bool(out[0].success.all(-1).any())
        assert torch.equal(out[0].success, out[1].success)
        assert torch.equal(out[0].q[..., :7], scene.neutral()[:7].expand_as(out[0].q[..., :7]))
    one = solve_ik(scene, targets[0, 0], "hand", generator=g)
    assert one.q.shape == (2, scene.dof)
    with pytest.raises(ValueError, match="links of a free body .*accepted: solve_wholebody"):
        solve_ik(scene, targets, "box")
    # the scene's checks first (a list or a row of seeds leaked an error from cutting them)
    with pytest.raises(TypeError, match="seeds must be a floating-point torch.Tensor"):
        solve_ik(scene, targets, "hand", seeds=[[0.0] * scene.dof])
    with pytest.raises(ValueError, match=f"seeds must have shape .*, {scene.dof}"):
        solve_ik(scene, targets, "hand", seeds=torch.zeros(scene.dof, dtype=torch.float64))


def test_seeds_near_scatter_around_q_within_the_limits():
    """Every joint moved (within its limits), a floating base kept where ``q`` has it, the
    draw the generator's; bad arguments refused in one line."""
    from torchik import load_robot
    from torchik.ik.wholebody import seeds_near

    panda = load_robot("panda", dtype=torch.float64)
    q = panda.upper - 0.01  # near the upper limits: about half the steps are clamped
    seeds = seeds_near(panda, q, 64, scale=0.3, generator=torch.Generator().manual_seed(1))
    assert seeds.shape == (64, 7) and seeds.dtype == torch.float64
    assert bool(((seeds >= panda.lower) & (seeds <= panda.upper)).all())
    assert bool((seeds == panda.upper).any()) and bool((seeds < q - 0.05).any())
    again = seeds_near(panda, q, 64, scale=0.3, generator=torch.Generator().manual_seed(1))
    assert torch.equal(seeds, again)
    g1 = load_robot("g1", dtype=torch.float64, floating_base=True)
    base = g1.random_configuration(1, torch.Generator().manual_seed(2))[0]
    moved = seeds_near(g1, base, 5, generator=torch.Generator().manual_seed(3))
    assert torch.equal(moved[:, :7], base[:7].expand(5, 7))
    assert bool(((moved[:, 7:] - base[7:]).abs() > 0).any(-1).all())
    for bad, match in ((dict(n=0), "n must be"), (dict(scale=0.0), "scale"),
                       (dict(q=q[:3]), r"q must be a \(7,\) tensor")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            seeds_near(panda, **{"q": q, **bad})
    with pytest.raises(TypeError, match="generator"):
        seeds_near(panda, q, generator=3)
    with pytest.raises(ValueError, match="n must be <= 65536"):
        seeds_near(panda, q, n=2**63)  # refused before torch is asked for that many
    with pytest.raises(TypeError, match="q must be a floating-point tensor, got a torch.int64"):
        seeds_near(panda, q.long())


def test_nearest_keeps_each_targets_successful_slot_nearest_q():
    """Of each target's slots the successful one nearest ``q`` (a continuous joint the short
    way round), else the best (the smallest error)."""
    from torchik.ik import IKResult

    q = torch.tensor([[[0.0, 3.1], [0.5, 0.0], [0.1, -3.1]],
                      [[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]], dtype=torch.float64)  # fmt: skip
    success = torch.tensor([[True, True, True], [False, False, False]])
    error = torch.tensor([[1e-4, 1e-4, 1e-4], [0.3, 0.1, 0.2]], dtype=torch.float64)
    result = IKResult(q, success, error, torch.zeros_like(error), torch.ones_like(success).long(),
                      1e-3, 0.1, torch.tensor([False, True]))  # fmt: skip
    near = result.nearest(torch.tensor([0.0, -3.0], dtype=torch.float64))
    assert near.q.shape == (2, 1, 2)
    assert near.q[0, 0].tolist() == [0.1, -3.1]  # 3.1 is 0.18 rad the short way round, -3.1 0.1
    assert near.q[1, 0].tolist() == [2.0, 0.0]  # none solved: the smallest error
    assert near.success.tolist() == [[True], [False]]


def test_away_from_limits_keeps_a_margin_where_a_joint_has_a_range():
    """Each clamped joint within ``margin`` of its range from both limits, the others (a
    full-turn range, a floating base's coordinates) as they were; bad margins refused."""
    from torchik import load_robot
    from torchik.ik.wholebody import away_from_limits

    ur5 = load_robot("ur5", dtype=torch.float64)  # full turns but the elbow's ±2.5
    rest = away_from_limits(ur5, torch.stack((ur5.lower, ur5.upper, ur5.lower / 4)), 0.2)
    assert rest[:, 2].tolist() == pytest.approx([-1.5, 1.5, -0.625])
    assert torch.equal(
        rest[:2, [0, 1, 3, 4, 5]], torch.stack((ur5.lower, ur5.upper))[:, [0, 1, 3, 4, 5]]
    )
    g1 = load_robot("g1", dtype=torch.float64, floating_base=True)
    q = g1.random_configuration(4, torch.Generator().manual_seed(0))
    q[:, 7:] = g1.upper[7:]
    moved = away_from_limits(g1, q, 0.1)
    assert torch.equal(moved[:, :7], q[:, :7])
    torch.testing.assert_close(
        moved[:, 7:], (g1.upper - 0.1 * (g1.upper - g1.lower))[7:].expand(4, -1)
    )
    for margin, error in ((0.6, ValueError), (-0.1, ValueError), ("1", TypeError)):
        with pytest.raises(error, match="margin"):
            away_from_limits(g1, q, margin)
    with pytest.raises(ValueError, match=r"\(\.\.\., 36\)"):
        away_from_limits(g1, q[:, 1:])


def test_a_posture_away_from_the_limits_pulls_a_warm_start_off_them():
    """Warm-started at a configuration whose arm joints sit on their limits (where a path's
    answers drift), the targets met at once: with ``away_from_limits`` as the rest and a
    posture, the answer moves those joints off their limits in the targets' null space; with
    no posture they stay there."""
    from torchik import load_robot
    from torchik.ik.wholebody import away_from_limits

    g1 = load_robot("g1", dtype=torch.float64)
    hands = ["left_rubber_hand", "right_rubber_hand"]
    q = g1.random_configuration(6, torch.Generator().manual_seed(2))
    arm = [g1.joint_names.index(n) for n in ("left_elbow_joint", "right_elbow_joint")]
    q[:, arm] = g1.upper[arm]
    targets = dict(zip(hands, g1.forward_kinematics(q, hands).unbind(1), strict=True))
    seeds = q[:, None]
    still = solve_wholebody(g1, targets, seeds=seeds)
    pulled = solve_wholebody(g1, targets, seeds=seeds, rest=away_from_limits(g1, q),
                             posture=0.5, posture_iters=3)  # fmt: skip
    assert bool(still.success.all()) and bool(pulled.success.all())
    assert torch.equal(still.q[:, 0, arm], q[:, arm])
    assert bool((pulled.q[:, 0, arm] < g1.upper[arm] - 1e-3).all())
