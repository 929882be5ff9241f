"""torchik.ik.rounds (and the inputs it checks): ``max_iters`` is a hard cap however the work is
cut into rounds; a generator that is not one, and tensors on the meta device, are refused in
one line."""

from __future__ import annotations

import pytest
import torch

import torchik
from torchik.ik import solve_ik

F64 = torch.float64


@pytest.fixture(scope="module")
def panda():
    robot = torchik.load_robot("panda", dtype=F64)
    q = robot.random_configuration(3, torch.Generator().manual_seed(0))
    return robot, robot.forward_kinematics(q, "panda_hand")


@pytest.mark.parametrize("early_stop", [True, False])
@pytest.mark.parametrize("given", [False, True])
@pytest.mark.parametrize("max_iters", [0, 1, 3])
def test_max_iters_is_a_hard_cap(panda, early_stop, given, max_iters):
    """``max_iters=0`` ran 3 to 8 iterations: the first early-stop round used ``round_iters``."""
    robot, target = panda
    seeds = robot.random_configuration(4, torch.Generator().manual_seed(1)) if given else None
    result = solve_ik(robot, target, "panda_hand", max_iters=max_iters, early_stop=early_stop,
                      seeds=seeds, generator=torch.Generator().manual_seed(2))  # fmt: skip
    assert int(result.iterations.max()) <= max_iters


def test_solve_ik_refuses_a_seed_for_a_generator_and_meta_tensors(panda):
    robot, target = panda
    with pytest.raises(TypeError, match="generator must be a torch.Generator or None, got int 5"):
        solve_ik(robot, target, "panda_hand", generator=5)  # was an AttributeError
    meta = {"target": target.to("meta"), "seeds": torch.zeros(2, 7, device="meta")}
    meta["lower"] = torch.zeros(7, device="meta")
    for name, value in meta.items():
        kwargs = {"target": target, name: value}
        with pytest.raises(ValueError, match=f"{name} is on the meta device: it has a shape but"):
            solve_ik(robot, link="panda_hand", **kwargs)  # were RuntimeErrors


@pytest.mark.parametrize("k", [1, 2, 3])
def test_given_seeds_are_evaluated_as_given_only_where_a_slot_may_not_run(panda, k, monkeypatch):
    """A warm start (up to ``initial_seeds`` seeds per target): the first round runs every
    slot and its result is the whole result, so the seeds are not evaluated as given first
    (one FK less per call). With more slots, those the rounds never run keep their seed as
    evaluated (``iterations`` 0). (The rounds' own code: the CPU's compiled round, which
    evaluates in its kernel, is turned off.)"""
    from torchik.ik import compiled, rounds

    monkeypatch.setattr(compiled, "serves_given", lambda run: False)
    robot, _ = panda
    calls, evaluate = [], rounds.evaluate
    monkeypatch.setattr(rounds, "evaluate", lambda *a: calls.append(a[1].shape[0]) or evaluate(*a))
    g = torch.Generator().manual_seed(4)
    targets = robot.forward_kinematics(robot.random_configuration(6, g), "panda_hand")
    seeds = robot.random_configuration(6 * k, g).view(6, k, 7)
    result = solve_ik(robot, targets, seeds=seeds, restarts=False)
    assert result.q.shape == (6, k, 7)
    if k <= 2:  # initial_seeds: one evaluation, the first round's
        assert calls == [6 * k]
    else:  # every seed as given, then the first round's two slots, then the third's
        assert calls[:2] == [6 * k, 6 * 2] and len(calls) <= 3


@pytest.mark.parametrize("k", [1, 3])
def test_given_seeds_without_restarts_use_the_whole_budget(panda, k):
    """Given seeds, no restarts, ``early_stop``: the last round of given slots runs for what
    is left of ``max_iters`` (no random round follows to use it). It ran ``round_iters``: a
    warm start had 10 LM iterations whatever ``max_iters`` said, and solved less often than
    the same call without ``early_stop`` (one slot per target: the same iterations)."""
    robot, _ = panda
    g = torch.Generator().manual_seed(6)
    targets = robot.forward_kinematics(robot.random_configuration(100, g), "panda_hand")
    seeds = robot.random_configuration(100 * k, g).view(100, k, 7)
    out = {
        stop: solve_ik(robot, targets, seeds=seeds, restarts=False, max_iters=60, early_stop=stop)
        for stop in (True, False)
    }
    rounds = 1 if k == 1 else 2  # of round_iters (10) each, before the fix
    assert int(out[True].iterations.max()) > 10 * rounds
    assert int(out[True].iterations.max()) <= 60
    if k == 1:  # one slot per target: early stop changes nothing
        assert torch.equal(out[True].success, out[False].success)
        assert torch.equal(out[True].q, out[False].q)


@pytest.mark.parametrize("loop", ["host", "fixed"])
def test_random_seeds_come_back_best_first(panda, loop):
    """Each target's slots best first, on either loop: no success after a failure, and each
    kind ordered by error normalised by the tolerances (``IKResult.top``); the slot a user reads
    first (``q[:, 0]``) succeeds wherever one does. Few iterations, so that some slots fail."""
    robot, g = panda[0], torch.Generator().manual_seed(3)
    targets = robot.forward_kinematics(robot.random_configuration(60, g), "panda_hand")
    method = torchik.ik.LevenbergMarquardt(loop=loop, max_iters=8, round_iters=4)
    result = solve_ik(robot, targets, "panda_hand", num_seeds=4, method=method, generator=g)
    ok = result.success
    assert bool(ok.any()) and not bool(ok.all())
    assert not bool((ok[:, 1:] & ~ok[:, :-1]).any())  # no success after a failure
    assert torch.equal(ok[:, 0], ok.any(-1))
    r = result
    score = r.position_error / r.tol_position + r.rotation_error / r.tol_rotation
    same = ok[:, 1:] == ok[:, :-1]
    assert not bool((same & (score[:, 1:] < score[:, :-1])).any())
