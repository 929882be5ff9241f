"""Small solves on an accelerator go to the CPU's compiled code (:mod:`torchik.ik.host`).

No CUDA here: the tests count the CPU as an accelerator (``host.ACCELERATORS``), so a solve goes
to the CPU copy of its robot and back, and must give what the robot itself gives.
"""

from __future__ import annotations

import types

import pytest
import torch

from torchik.ik import LevenbergMarquardt, host, solve_ik, solve_wholebody
from torchik.ik.wholebody.result import WholeBodyResult
from torchik.kinematics import native
from torchik.robot import load_robot

pytestmark = pytest.mark.skipif(not native.available(), reason="the compiled code needs Numba")


@pytest.fixture
def routed(monkeypatch):
    """The CPU counted as an accelerator, ``solve_ik``'s route open up to 128 rows (off by
    default: the GPU answered first on an H200); the list of results sent back."""
    sent: list = []
    real = host.back
    monkeypatch.setattr(host, "ACCELERATORS", ("cpu",))
    monkeypatch.setattr(host, "HOST_ROWS", 128)
    monkeypatch.setattr(
        host, "back", lambda result, device: sent.append(device) or real(result, device)
    )
    return sent


def _pose(robot, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return robot.forward_kinematics(robot.random_configuration(n, g), "panda_hand")


def _direct_and_sent(solve):
    """``solve()`` with nothing counted as an accelerator (the device's own route), then
    routed as the fixture routes it."""
    host.ACCELERATORS, before = ("none",), host.ACCELERATORS
    direct = solve()
    host.ACCELERATORS = before
    return direct, solve()


def _same(a, b):
    for name in ("q", "success", "position_error", "rotation_error", "iterations"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_a_small_solve_goes_to_the_cpu_copy_with_the_same_answers(routed):
    robot = load_robot("panda", dtype=torch.float64)
    target = _pose(robot, 3)
    direct, sent = _direct_and_sent(
        lambda: solve_ik(robot, target, generator=torch.Generator().manual_seed(1))
    )
    assert routed == [robot.device]
    _same(sent, direct)
    assert sent.success.any(-1).all()
    # given seeds (a warm start) too
    seeds = direct.q[:, :1]
    again = solve_ik(robot, target, seeds=seeds)
    assert len(routed) == 2 and again.success[:, 0].all()


def test_what_stays_on_the_device(routed, monkeypatch):
    robot = load_robot("panda", dtype=torch.float64)
    solve_ik(robot, _pose(robot, 65))  # 130 rows > HOST_ROWS
    solve_ik(robot, _pose(robot, 2), method=LevenbergMarquardt(loop="host"))  # its own loop
    solve_ik(robot, _pose(robot, 2), method="dls")  # no compiled rounds
    assert routed == []
    monkeypatch.setattr(host, "HOST_ROWS", 0)
    solve_ik(robot, _pose(robot, 1))
    assert routed == []
    cuda = types.SimpleNamespace(device=torch.device("cuda"))  # a CUDA generator's draws
    assert not host.serves(robot, 2, 128, cuda)  # type: ignore[arg-type]
    assert host.serves(robot, 2, 128, torch.Generator())


def test_wholebody_goes_to_the_cpu_copy_with_the_same_answers(routed):
    robot = load_robot("g1", dtype=torch.float64)
    hands = ["left_rubber_hand", "right_rubber_hand"]
    poses = robot.forward_kinematics(
        robot.random_configuration(4, torch.Generator().manual_seed(0)), hands
    )
    targets = dict(zip(hands, poses.unbind(-3), strict=True))
    direct, sent = _direct_and_sent(
        lambda: solve_wholebody(robot, targets, generator=torch.Generator().manual_seed(1))
    )
    assert routed == [robot.device] and isinstance(sent, WholeBodyResult)
    _same(sent, direct)
    for link in hands:
        assert torch.equal(sent.position_errors[link], direct.position_errors[link])
    solve_wholebody(robot, targets, loop="fixed")  # the device's own loop
    assert len(routed) == 1


def test_a_scene_goes_to_the_cpu_copy_as_the_body_that_carries_the_targets(routed):
    """In a scene, the compiled loop takes the body that carries the targets (not the scene):
    the call goes to the CPU copy all the same, with the same answers."""
    from tests.ik.test_wholebody import _hand_built_scene

    scene = _hand_built_scene(carried=False)[0]
    q = scene.random_configuration(3, torch.Generator().manual_seed(0))
    targets = {"hand": scene.forward_kinematics(q, "hand")}
    direct, sent = _direct_and_sent(
        lambda: solve_wholebody(scene, targets, generator=torch.Generator().manual_seed(1))
    )
    assert routed == [scene.device]
    _same(sent, direct)
    solve_wholebody(scene, {"hand": targets["hand"], "box": targets["hand"]})  # two bodies
    assert len(routed) == 1


def test_twin_is_made_once_and_again_after_a_change():
    robot = load_robot("panda", dtype=torch.float64)
    tree = robot.tree  # made, with its caches: not copied
    first = host.twin(robot)
    assert host.twin(robot) is first and first.device.type == "cpu" and first is not robot
    assert first.tree is not tree and torch.equal(first.tree.w_joint, tree.w_joint)
    with torch.no_grad():
        robot.lower.add_(0.0)  # an in-place change
    second = host.twin(robot)
    assert second is not first
    robot.backend = "reference"
    assert host.twin(robot) is not second and host.twin(robot).backend == "reference"


def test_back_moves_every_tensor_and_the_per_link_errors():
    q = torch.zeros(2, 1, 3)
    zeros = torch.zeros(2, 1)
    mask = torch.zeros(3, dtype=torch.bool)
    result = WholeBodyResult(q, zeros.bool(), zeros, zeros, zeros.long(), 1e-3, 0.01, mask,
                             {"a": zeros}, {"a": zeros})  # fmt: skip
    moved = host.back(result, torch.device("meta"))
    assert moved.q.is_meta and moved.continuous.is_meta and moved.position_errors["a"].is_meta
    assert moved.tol_position == 1e-3 and isinstance(moved, WholeBodyResult)
    kept = host.to_host({"a": [zeros, (zeros, 2)], "b": None, "c": "name"})
    assert kept == {"a": [zeros, (zeros, 2)], "b": None, "c": "name"}
